//! The container backend of [`TestCluster`](crate::TestCluster): each node is a Docker
//! container running `redis-server`, started and driven through
//! [testcontainers](https://docs.rs/testcontainers) (a `ContainerAsync` per node), published on
//! `127.0.0.1` only.
//!
//! Select it with [`ClusterOptions::backend`](crate::ClusterOptions::backend)`(`[`Backend::Docker`](crate::Backend::Docker)`)`
//! (or `QUORUMLOCK_BACKEND=docker` and [`Backend::from_env`](crate::Backend::from_env)); it needs the `docker` cargo feature
//! and a reachable Docker engine. Everything else about the cluster stays the same: the same
//! [`TestCluster`](crate::TestCluster) methods, the same URLs (`redis://127.0.0.1:<port>`), the
//! same [`FaultProxy`](crate::FaultProxy)s when proxies are on.
//!
//! # The image
//!
//! Nodes run the image named by `QUORUMLOCK_REDIS_IMAGE` ([`IMAGE_ENV`]), by default
//! `quorumlock-redis:local` ([`DEFAULT_IMAGE`]). Nothing is ever pulled: build the default image
//! from the installed `redis-server` with `scripts/redis-image.sh` (a `FROM scratch` image of
//! the binary, its shared libraries and libfaketime, about 18 MB, built in about a second). Any
//! image with `redis-server` on its `PATH` works (the official `redis:7` images do), except
//! that [`ClusterOptions::clock_rate`](crate::ClusterOptions::clock_rate) needs libfaketime at
//! [`LIBFAKETIME_IN_IMAGE`]. [`check_available`] tells whether the engine answers and the
//! image is there, so a test can skip with a reason instead of failing.
//!
//! # How node faults map to Docker
//!
//! | harness | Docker | through |
//! | --- | --- | --- |
//! | [`kill`](crate::TestCluster::kill) | `docker kill` (SIGKILL), then waits until the container has stopped | the Engine API (testcontainers cannot send a signal) |
//! | [`stop`](crate::TestCluster::stop) | `docker stop -t 5` (SIGTERM, SIGKILL after 5 s) | `ContainerAsync::stop_with_timeout` |
//! | [`start_node`](crate::TestCluster::start_node) | `docker start` of the same container, same published port | `ContainerAsync::start` |
//! | [`pause`](crate::TestCluster::pause) / [`resume`](crate::TestCluster::resume) | `docker pause` / `docker unpause` (cgroup freezer) | `ContainerAsync::pause` / `unpause` |
//! | [`pid`](crate::TestCluster::pid) | the server's host process id, as the engine reports it | the Engine API (testcontainers does not report it) |
//!
//! The Engine API calls testcontainers has no method for go through the `bollard` client it
//! re-exports: those two, whether the image exists (testcontainers would pull a missing one, and
//! nothing is ever pulled here), and removing a container that was created but failed to start
//! (testcontainers returns no handle for it).
//!
//! A node's container lives as long as the cluster: a restart stops and starts the same
//! container, so with [`Persistence::AofAlways`](crate::Persistence::AofAlways) its data survives
//! (its `/data` is a host directory bind-mounted from
//! [`ClusterOptions::data_dir`](crate::ClusterOptions::data_dir), `/dev/shm` by default, deleted
//! with the cluster), and with [`Persistence::None`](crate::Persistence::None) it does not. (Not a
//! tmpfs mount: Docker empties those at every stop, append-only file and all.) A node with a
//! jumpable clock gets its libfaketime file's directory bind-mounted read-only at `/faketime`.
//! Each node's host port is chosen by the harness (a free loopback port) and mapped explicitly,
//! `127.0.0.1:<port> -> 6379/tcp`, so it stays the same across restarts; the container's bridge
//! address is used only to drop its packets ([`TestCluster::drop_packets`](crate::TestCluster::drop_packets)).
//!
//! # Cleanup
//!
//! Containers are created with the label `org.quorumlock.harness=1` ([`LABEL`]), plus
//! `org.quorumlock.harness.owner-pid=<the test process's id>`, and removed (`docker rm -f`, with
//! their anonymous volumes) when the cluster is dropped, also while a failing test unwinds and
//! outside any runtime: removal runs on a helper thread with its own runtime, bounded by a
//! timeout.
//!
//! testcontainers for Rust starts no reaper container (no Ryuk: there is nothing to pull or to
//! switch off, and `TESTCONTAINERS_RYUK_DISABLED`, the setting of other languages'
//! testcontainers, does nothing here). So a test process that is killed outright (SIGKILL, a
//! CI timeout) leaves its containers behind; the labels find them. Remove one dead run's
//! leftovers with
//! `docker rm -f $(docker ps -aq --filter label=org.quorumlock.harness.owner-pid=<pid>)`, or every
//! harness container on a machine nobody else is testing on with
//! `docker rm -f $(docker ps -aq --filter label=org.quorumlock.harness=1)`.
//! (`TESTCONTAINERS_COMMAND=keep` does not keep the harness's containers: it removes them itself.)
//!
//! # Engine API version
//!
//! Old engines work: Docker 20.10 (API 1.41 at most) runs this backend's tests. The harness's
//! own client negotiates the version; testcontainers' client does not, but with the bollard it
//! is built on (0.21) its requests carry no version in their path, so the engine answers them
//! in its own version. An upgrade of either crate must be checked against such an engine again.

mod cleanup;
mod container;
mod engine;
mod node;

pub use cleanup::LABEL;
pub(crate) use cleanup::remove_all_blocking;
pub(crate) use container::DockerServer;
pub(crate) use engine::connect;
pub use engine::{
    DEFAULT_IMAGE, IMAGE_ENV, LIBFAKETIME_IN_IMAGE, REQUIRE_DOCKER_ENV, check_available, image,
    usable,
};
