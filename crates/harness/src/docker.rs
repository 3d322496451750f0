//! The container backend of [`TestCluster`](crate::TestCluster): each node is a Docker
//! container running `redis-server`, published on `127.0.0.1` only.
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
//! | harness | Docker |
//! | --- | --- |
//! | [`kill`](crate::TestCluster::kill) | `docker kill` (SIGKILL), then waits until the container has stopped |
//! | [`stop`](crate::TestCluster::stop) | `docker stop -t 5` (SIGTERM, SIGKILL after 5 s) |
//! | [`start_node`](crate::TestCluster::start_node) | `docker start` of the same container, same published port |
//! | [`pause`](crate::TestCluster::pause) / [`resume`](crate::TestCluster::resume) | `docker pause` / `docker unpause` (cgroup freezer) |
//! | [`pid`](crate::TestCluster::pid) | the server's host process id, as the engine reports it |
//!
//! A node's container lives as long as the cluster: a restart stops and starts the same
//! container, so with [`Persistence::AofAlways`](crate::Persistence::AofAlways) its data survives
//! (its `/data` is a host directory bind-mounted from
//! [`ClusterOptions::data_dir`](crate::ClusterOptions::data_dir), `/dev/shm` by default, deleted
//! with the cluster), and with [`Persistence::None`](crate::Persistence::None) it does not. (Not a
//! tmpfs mount: Docker empties those at every stop, append-only file and all.) Each node's host port is chosen by the harness (a free loopback port) and mapped
//! explicitly, `127.0.0.1:<port> -> 6379/tcp`, so it stays the same across restarts; the
//! container's bridge address is never used.
//!
//! # Cleanup
//!
//! Containers are created with the label `org.quorumlock.harness=1` ([`LABEL`]) and removed
//! (`docker rm -f`, with their anonymous volumes) when the cluster is dropped, also while a
//! failing test unwinds and outside any runtime: removal runs on a helper thread with its own
//! runtime, bounded by a timeout. A process that is killed outright cannot clean up; remove
//! such leftovers with `docker rm -f $(docker ps -aq --filter label=org.quorumlock.harness=1)`.
//!
//! # Engine API version
//!
//! The client negotiates the API version with the engine, so old engines work (Docker 20.10
//! speaks API 1.41 at most). This is why the backend talks to the engine with `bollard`
//! directly rather than through `testcontainers`, whose client always asks for API 1.53 and is
//! refused by such engines.

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
