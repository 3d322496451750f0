//! Test harness for Redis clients and locks: real `redis-server` processes (or Docker
//! containers) you can kill, pause, restart and flush, and a fault-injecting TCP proxy.
//!
//! Lock code is only as good as its behaviour when Redis misbehaves: a master
//! dies mid-acquire, a master hangs without closing its sockets, the network
//! refuses or drops connections, replies arrive late. Mocks rarely get those
//! cases right, so this crate runs the real thing:
//!
//! * [`TestCluster`] starts N independent `redis-server` masters on free
//!   127.0.0.1 ports, each in its own temporary directory, and lets a test
//!   kill, stop, restart, pause (`SIGSTOP`), resume and flush any one of them.
//!   Everything it started is killed and reaped when it is dropped, including
//!   while a failing test unwinds.
//! * [`FaultProxy`] sits in front of one server and injects network faults:
//!   added latency, a black hole (connections accepted, nothing ever answered),
//!   refused connections and cut connections.
//! * [`CountingAllocator`] is a global allocator that counts allocations, for
//!   benchmarks and tests that report allocations per operation.
//!
//! Per cluster, [`ClusterOptions`] also chooses:
//!
//! * the [`Backend`]: `redis-server` processes (default) or, with the `docker`
//!   cargo feature, one Docker container per node (see the `docker` module),
//!   behind the same [`TestCluster`] API; [`Backend::from_env`] reads
//!   `QUORUMLOCK_BACKEND`;
//! * the [`Persistence`]: none (a restarted node comes back empty) or AOF with
//!   `appendfsync always` (it comes back with its data, even after SIGKILL);
//! * a clock rate per node ([`ClusterOptions::clock_rate`], libfaketime): that
//!   node's clocks, and so its key expiry, run faster or slower than real time.
//!
//! # Adding it
//!
//! The harness is the crate `quorumlock-harness` in `crates/harness` of the `quorumlock`
//! workspace (it used to be `quorumlock::testing`, behind the `test-cluster` feature of the
//! library). It is for tests, so add it as a dev-dependency, by path:
//!
//! ```toml
//! [dev-dependencies]
//! quorumlock-harness = { path = "path/to/quorumlock/crates/harness" }
//! # or, for the docker backend too:
//! # quorumlock-harness = { path = "path/to/quorumlock/crates/harness", features = ["docker"] }
//! ```
//!
//! or `cargo add --dev quorumlock-harness --path path/to/quorumlock/crates/harness`. Crates of
//! the workspace itself write `quorumlock-harness.workspace = true`. The code under test can be
//! `quorumlock` or any other Redis client or lock implementation: the harness only hands out
//! `redis://` URLs and faults.
//!
//! # What it needs
//!
//! A `redis-server` binary, 7.0 or newer, and a Tokio runtime with I/O and time enabled (for
//! example `#[tokio::test]`), on which the harness must be used. These environment variables
//! are read:
//!
//! | variable | meaning |
//! | --- | --- |
//! | `QUORUMLOCK_REDIS_SERVER` ([`REDIS_SERVER_ENV`]) | the `redis-server` to run (default: found on `PATH`) |
//! | `QUORUMLOCK_BACKEND` ([`BACKEND_ENV`]) | `process` or `docker`, for [`Backend::from_env`] |
//! | `QUORUMLOCK_LIBFAKETIME` ([`LIBFAKETIME_ENV`]) | `libfaketime.so.1`, for clock rates on processes (default: the usual install locations) |
//! | `QUORUMLOCK_REDIS_IMAGE` | the image the docker backend runs (default `quorumlock-redis:local`, built by `scripts/redis-image.sh`) |
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use quorumlock_harness::{ClusterOptions, HarnessError, TestCluster};
//!
//! # async fn demo() -> Result<(), HarnessError> {
//! // Five masters, each behind its own fault proxy; `urls()` points at the proxies.
//! let mut cluster = TestCluster::start(ClusterOptions::default().nodes(5).proxies(true)).await?;
//! let urls = cluster.urls();
//! assert_eq!(urls.len(), 5);
//!
//! // Node 0 turns into a hung server: connections succeed, nothing is ever answered.
//! if let Some(proxy) = cluster.proxy(0) {
//!     proxy.blackhole();
//! }
//! // Node 1's process is frozen with SIGSTOP; its socket queues requests.
//! cluster.pause(1)?;
//!
//! // ... exercise the code under test against `urls` here ...
//! tokio::time::sleep(Duration::from_millis(100)).await;
//!
//! // Bring both back.
//! cluster.resume(1)?;
//! if let Some(proxy) = cluster.proxy(0) {
//!     proxy.heal().await?;
//! }
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod alloc;
mod cluster;
#[cfg(feature = "docker")]
#[cfg_attr(docsrs, doc(cfg(feature = "docker")))]
pub mod docker;
mod proxy;

pub use alloc::CountingAllocator;
pub use cluster::{
    BACKEND_ENV, Backend, ClusterOptions, LIBFAKETIME_ENV, Persistence, REDIS_SERVER_ENV,
    TestCluster,
};
pub use proxy::FaultProxy;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting or driving the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The `redis-server` program could not be started at all.
    #[error("node {node}: could not start {program:?} (is redis-server installed? set {env} to its path)", env = REDIS_SERVER_ENV)]
    Spawn {
        /// Index of the node being started.
        node: usize,
        /// The program that was run.
        program: PathBuf,
        /// Why the operating system refused.
        #[source]
        source: std::io::Error,
    },
    /// The server process started but did not answer in time.
    #[error("node {node}: redis-server not ready after {waited:?}; output:\n{output}")]
    NotReady {
        /// Index of the node.
        node: usize,
        /// How long the harness waited.
        waited: Duration,
        /// The end of the server's log and console output.
        output: String,
    },
    /// The server process exited while starting up.
    #[error("node {node}: redis-server exited during startup ({status}); output:\n{output}")]
    Exited {
        /// Index of the node.
        node: usize,
        /// The exit status, as the operating system reported it.
        status: String,
        /// The end of the server's log and console output.
        output: String,
    },
    /// No usable port could be bound for a node after several attempts.
    #[error("node {node}: port {port} still in use after {attempts} attempts")]
    PortUnavailable {
        /// Index of the node.
        node: usize,
        /// The last port tried.
        port: u16,
        /// How many attempts were made.
        attempts: u32,
    },
    /// A process did not exit in time after being signalled.
    #[error("node {node}: redis-server did not exit within {waited:?}")]
    NotExited {
        /// Index of the node.
        node: usize,
        /// How long the harness waited.
        waited: Duration,
    },
    /// The node index is out of range.
    #[error("no such node: {0}")]
    NoSuchNode(usize),
    /// The operation needs a running node, but the node is stopped or killed.
    #[error("node {0} is not running")]
    NotRunning(usize),
    /// `start` was called on a node that is already running.
    #[error("node {0} is already running")]
    AlreadyRunning(usize),
    /// Sending a signal to a node's process failed.
    #[error("node {node}: could not send {signal}")]
    Signal {
        /// Index of the node.
        node: usize,
        /// Name of the signal, for example `SIGSTOP`.
        signal: &'static str,
        /// The error reported by `kill(2)`.
        #[source]
        source: nix::errno::Errno,
    },
    /// A proxy could not listen on its address.
    #[error("could not listen on {addr}")]
    Bind {
        /// The address that could not be bound.
        addr: SocketAddr,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// The harness was used outside a Tokio runtime.
    #[error("the test harness must run inside a Tokio runtime")]
    NoRuntime,
    /// Another I/O error (temporary directories, log files, process status).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A Redis command sent by the harness itself failed.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// `QUORUMLOCK_BACKEND` names no backend.
    #[error("{env}={value:?} is not a backend (expected \"process\" or \"docker\")", env = BACKEND_ENV)]
    UnknownBackend {
        /// The value found in the environment.
        value: String,
    },
    /// The backend was asked for, but this build does not include it (the docker backend needs
    /// the `docker` cargo feature).
    #[error("the {0:?} backend is not compiled in (enable the `docker` cargo feature)")]
    BackendNotCompiled(Backend),
    /// A clock rate given with [`ClusterOptions::clock_rate`] is not a finite number above zero.
    #[error("node {node}: clock rate {rate} is not a finite number above zero")]
    InvalidClockRate {
        /// Index of the node.
        node: usize,
        /// The rate given.
        rate: f64,
    },
    /// A node needs a clock rate, but libfaketime was not found.
    #[error("libfaketime not found (apt-get install faketime, or set {env} to libfaketime.so.1); looked at {searched:?}", env = LIBFAKETIME_ENV)]
    LibfaketimeNotFound {
        /// The paths that were tried.
        searched: Vec<PathBuf>,
    },
    /// The Docker engine could not be reached (docker backend).
    #[error("the Docker engine is not reachable: {reason}")]
    DockerUnavailable {
        /// What failed.
        reason: String,
    },
    /// The image the docker backend runs does not exist locally; nothing is pulled.
    #[error("docker image {image} not found (build it with scripts/redis-image.sh)")]
    ImageMissing {
        /// The image name.
        image: String,
    },
    /// A Docker Engine API call made for a node failed (docker backend).
    #[error("node {node}: docker: {action} failed")]
    Docker {
        /// Index of the node.
        node: usize,
        /// What the harness was doing, for example `"pause container"`.
        action: &'static str,
        /// The engine's (or the transport's) error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
