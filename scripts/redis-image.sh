#!/usr/bin/env bash
# Builds a Redis container image without pulling anything: `FROM scratch` plus the host's
# installed redis-server binary, the shared libraries it loads (as `ldd` lists them), the
# dynamic loader, and libfaketime (for the harness's per-node clock rate), a minimal
# /etc/passwd and a writable /data.
#
# Usage: scripts/redis-image.sh
#
# Environment:
#   QUORUMLOCK_REDIS_IMAGE   tag to build (default quorumlock-redis:local)
#   QUORUMLOCK_REDIS_SERVER  redis-server to package (default: the one on PATH)
#   QUORUMLOCK_LIBFAKETIME   libfaketime.so.1 to package (default: searched in the usual places;
#                            the image is built without it, with a warning, if none is found)
#
# In the image: redis-server is /usr/bin/redis-server (on PATH), libfaketime is
# /usr/lib/faketime/libfaketime.so.1, the working directory is /data, the default command is
# `redis-server --protected-mode no`. The image fits `command: [redis-server, ...]` in compose
# files written for the official image.
#
# Idempotent: an unchanged build context is a cache hit (well under a second).
set -euo pipefail

tag="${QUORUMLOCK_REDIS_IMAGE:-quorumlock-redis:local}"
faketime_in_image=/usr/lib/faketime/libfaketime.so.1

die() {
    echo "redis-image.sh: $*" >&2
    exit 1
}

command -v docker >/dev/null 2>&1 || die "docker is not installed (no 'docker' on PATH)"
docker info >/dev/null 2>&1 || die "the docker engine is not reachable ('docker info' failed): is dockerd running?"
command -v ldd >/dev/null 2>&1 || die "ldd is not installed"

server="${QUORUMLOCK_REDIS_SERVER:-}"
if [[ -z "$server" ]]; then
    server="$(command -v redis-server || true)"
fi
[[ -n "$server" ]] || die "redis-server is not installed (apt-get install redis-server, or set QUORUMLOCK_REDIS_SERVER)"
[[ -x "$server" ]] || die "redis-server '$server' is not an executable file"
server="$(readlink -f "$server")"

faketime="${QUORUMLOCK_LIBFAKETIME:-}"
if [[ -z "$faketime" ]]; then
    for candidate in \
        /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 \
        /usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1 \
        /usr/lib/faketime/libfaketime.so.1 \
        /usr/local/lib/faketime/libfaketime.so.1; do
        if [[ -f "$candidate" ]]; then
            faketime="$candidate"
            break
        fi
    done
fi
if [[ -n "$faketime" && ! -f "$faketime" ]]; then
    die "libfaketime '$faketime' does not exist"
fi
if [[ -z "$faketime" ]]; then
    echo "redis-image.sh: warning: libfaketime not found (apt-get install faketime); clock_rate will not work in this image" >&2
fi

context="$(mktemp -d "${TMPDIR:-/tmp}/quorumlock-redis-image.XXXXXX")"
trap 'rm -rf "$context"' EXIT
rootfs="$context/rootfs"
mkdir -p "$rootfs/usr/bin" "$rootfs/data" "$rootfs/tmp" "$rootfs/etc"

# Copies a file to the same path inside the image, following symlinks (the image gets the
# file's contents under the name the loader looks for).
copy_in() {
    local source="$1" target="$2"
    mkdir -p "$rootfs$(dirname "$target")"
    cp -L "$source" "$rootfs$target"
}

# The libraries (and the loader) that ldd lists for a binary: "name => /path (addr)" and
# "/path (addr)" lines; vdso has no file.
libraries_of() {
    ldd "$1" | awk '
        $2 == "=>" && $3 ~ /^\// { print $3; next }
        $1 ~ /^\// { print $1 }
    '
}

copy_in "$server" /usr/bin/redis-server
binaries=("$server")
if [[ -n "$faketime" ]]; then
    copy_in "$faketime" "$faketime_in_image"
    binaries+=("$faketime")
fi
for binary in "${binaries[@]}"; do
    if ! ldd "$binary" >/dev/null 2>&1; then
        die "ldd cannot read '$binary' (not a dynamic executable?)"
    fi
    while IFS= read -r library; do
        [[ -f "$library" ]] || die "'$binary' needs '$library', which does not exist"
        copy_in "$library" "$library"
    done < <(libraries_of "$binary")
done

printf 'root:x:0:0:root:/root:/sbin/nologin\nredis:x:999:999:redis:/data:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
    >"$rootfs/etc/passwd"
printf 'root:x:0:\nredis:x:999:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"
chmod 0777 "$rootfs/data"
# Fixed timestamps keep the context identical between runs (COPY's cache key is content and
# metadata).
find "$rootfs" -exec touch -h -d '2000-01-01 00:00:00 UTC' {} +

cat >"$context/Dockerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
WORKDIR /data
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
EOF

# The legacy builder needs no buildx plugin and never pulls for `FROM scratch`.
if ! output="$(DOCKER_BUILDKIT=0 docker build --quiet --tag "$tag" --label org.quorumlock.redis-image=1 "$context" 2>&1)"; then
    echo "$output" >&2
    die "docker build failed"
fi

# Smoke test: the server in the image starts (its libraries are all there).
if ! version="$(docker run --rm --network none "$tag" redis-server --version 2>&1)"; then
    echo "$version" >&2
    die "the built image cannot run redis-server"
fi
echo "built $tag: $version"
