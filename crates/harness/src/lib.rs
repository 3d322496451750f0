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
//!   while a failing test unwinds. [`TestCluster::masters`] is the one call a
//!   test of your own locking code starts with (`examples/testing_your_code.rs`).
//! * [`RedisClusters`] starts several independent local Redis Clusters, each a quorum
//!   member made of several shards (masters without replicas), for tests of a lock whose
//!   members are Redis Clusters: it kills and restarts shards (AOF keeps their keys), tells
//!   which shard serves a slot, and moves slots between shards, by hand ([`Migration`], to
//!   act mid-move) or with `redis-cli --cluster reshard`.
//! * [`FaultProxy`] sits in front of one server and injects network faults:
//!   added latency and jitter, a black hole (connections accepted, nothing
//!   ever answered), refused connections and cut connections.
//! * [`CountingAllocator`] is a global allocator that counts allocations, for
//!   benchmarks and tests that report allocations per operation.
//! * [`RawFloor`] sends a lock's commands over plain redis-rs connections
//!   ([`raw_connection`]) with no lock logic: the floor a benchmark compares a
//!   lock with.
//!
//! Per cluster, [`ClusterOptions`] also chooses:
//!
//! * the [`Backend`]: `redis-server` processes (default) or, with the `docker`
//!   cargo feature, one Docker container per node (see the `docker` module),
//!   behind the same [`TestCluster`] API; [`Backend::from_env`] reads
//!   `QUORUMLOCK_BACKEND`;
//! * the [`Persistence`]: none (a restarted node comes back empty) or AOF with
//!   `appendfsync always` (it comes back with its data, even after SIGKILL), and where node
//!   data lives ([`ClusterOptions::data_dir`]; on `/dev/shm` by default with AOF, where the
//!   fsync costs nothing);
//! * a clock rate per node ([`ClusterOptions::clock_rate`], libfaketime): that
//!   node's clocks, and so its key expiry, run faster or slower than real time;
//! * with the `tls` cargo feature, TLS-only nodes (`ClusterOptions::tls`): a CA and
//!   certificate the harness makes itself, `rediss://` URLs, and the CA for the
//!   client under test to trust (`TestCluster::tls_ca_pem`); nodes that require a client
//!   certificate (`ClusterOptions::tls_auth_clients`), with one made for the client under test
//!   (`TlsFiles::client_cert_pem`, `TlsFiles::client_key_pem`).
//!
//! # Cargo features
//!
//! | feature | what it adds |
//! | --- | --- |
//! | `docker` | [`Backend::Docker`]: nodes as containers (testcontainers) |
//! | `tls` | `ClusterOptions::tls`, `ClusterOptions::tls_auth_clients`, `TestCluster::tls`, `TlsFiles`: TLS-only nodes, with mutual TLS if asked (rcgen, rustls with ring, tokio-rustls) |
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
//! `redis://` URLs (`rediss://` with `ClusterOptions::tls`) and faults.
//!
//! # What it needs
//!
//! A `redis-server` binary, 7.0 or newer (Valkey too; [`RedisClusters::reshard`] also runs
//! `redis-cli`), and a Tokio runtime with I/O and time enabled (for
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
mod backend;
mod cluster;
#[cfg(feature = "docker")]
#[cfg_attr(docsrs, doc(cfg(feature = "docker")))]
pub mod docker;
mod env;
mod error;
mod eventually;
mod faketime;
mod floor;
mod masters;
mod netfilter;
mod options;
mod port;
mod probe;
mod process;
mod proxy;
mod redis_clusters;
#[cfg(feature = "tls")]
mod tls;
mod transport;

pub use alloc::CountingAllocator;
pub use backend::Backend;
pub use cluster::TestCluster;
pub use env::{BACKEND_ENV, LIBFAKETIME_ENV, REDIS_SERVER_ENV};
pub use error::HarnessError;
pub use eventually::eventually;
pub use floor::{RawFloor, raw_connection};
pub use netfilter::PacketDrop;
pub use options::{ClusterOptions, Persistence};
pub use proxy::FaultProxy;
pub use redis_clusters::{Migration, RedisClusters, RedisClustersOptions};
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use tls::{CA_CERT_FILE, CERT_FILE, KEY_FILE, SERVER_NAMES, TlsFiles};

/// Compiles the Rust examples of this crate's README as doctests, so they cannot drift from the
/// API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
