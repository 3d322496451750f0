//! Distributed locks over N independent Redis masters: the Redlock algorithm, done right.
//!
//! A [`Lock`] sends `SET key token NX PX ttl` to every node at once, decides as soon as a quorum
//! has said yes (or can no longer say yes), subtracts the elapsed time and the clock drift from
//! the validity, and releases on every node whenever an acquisition fails, is cancelled, or its
//! future is dropped. The same [`Lock`] and [`Guard`] work over a single Redis server (a
//! [`Lock::new`] of one node), so code switches between the two by configuration.
//!
//! Every acquisition is one [`Request`] (a resource, a set of [`Resources`], one of k
//! [`permits`](Request::permits) of a semaphore, or a [`read`](Request::read) or
//! [`write`](Request::write) side of a read-write lock, and where they differ from the lock's options
//! its TTL, [`Patience`] and [`Owner`]) given to one of three
//! verbs: [`Lock::acquire`], [`Lock::try_acquire`] and [`Lock::acquire_until`] (and
//! [`Lock::with_lock`] runs work under a kept lock). An [`Election`] elects one leader at a
//! time over the same nodes, each with a term larger than the last.
//!
//! ```no_run
//! use std::time::Duration;
//! use quorumlock::{Error, Lock, LockOptions};
//!
//! # async fn run() -> Result<(), Error> {
//! let lock = Lock::new(
//!     (1..=5).map(|i| format!("redis://127.0.0.1:700{i}")),
//!     LockOptions::new().ttl(Duration::from_secs(10)),
//! )?;
//! match lock.try_acquire("reports:daily").await {
//!     Ok(guard) => {
//!         println!("held for {:?}", guard.remaining());
//!         guard.release().await;
//!     }
//!     Err(Error::Held { .. }) => println!("someone else is on it"),
//!     Err(other) => return Err(other),
//! }
//! # Ok(()) }
//! ```
//!
//! # What the lock promises
//!
//! While [`Guard::is_valid`] is true, no other client holding a guard for the same resource from
//! the same nodes is valid too, *provided* the timing assumptions hold: process pauses, network
//! delays and clock-rate differences stay within the drift allowance. A pause after acquiring (a
//! long GC, a stopped VM) can outlast the validity: check `is_valid()` before each protected
//! write. See `docs/ARCHITECTURE.md` for the full list.
//!
//! Two rules the lock enforces on every connection, from what each server says about itself
//! (`INFO`):
//!
//! - **One server, one vote.** The same host and port twice is a configuration error
//!   ([`ConfigError::DuplicateNode`]); one server under two names (`127.0.0.1:P`,
//!   `localhost:P`) is recognised by its `run_id`, and only one of its nodes votes
//!   ([`NodeError::SameServer`] for the other).
//! - **A restarted node waits its turn** (the restart guard, on by default): a node that does not
//!   persist every write (AOF with `appendfsync always`) may have forgotten keys in a crash, so
//!   it sits out acquisitions until it has been up for longer than the largest TTL plus the
//!   drift ([`NodeError::Recovering`]). See [`LockOptions::restart_guard`] and
//!   [`LockOptions::max_ttl`].
//!
//! # Observability
//!
//! Every acquisition, extension and release is a `tracing` span, with a child per node request.
//! With the cargo feature `metrics`, the lock also records counters, a gauge and a histogram
//! through the `metrics` facade (acquisitions by outcome and their
//! duration, node errors by kind, kept leases, lost signals, restart-guard sit-outs), for the
//! recorder the application installs. The README's "Tracing" and "Metrics" sections list them.
//!
//! # Layout
//!
//! Three floors, each importing only from the ones below it (`docs/ARCHITECTURE.md` has the map):
//!
//! - `rules/`: the pure rules: the quorum tally, validity arithmetic, the retry and keep-alive
//!   schedules, the ordering rule, the restart guard, one server one vote, tokens, the lease
//!   clock, Redis Cluster's hash slots. No I/O: nothing there imports `redis`, `tokio` or `futures`.
//! - `node/`: one member: one server (or a Redis Cluster's shards, routed by slot, with `MOVED`
//!   and `ASK` followed), its connection, what its server says about itself, the gates in front
//!   of its votes, and the lock's commands on it, one per file.
//! - `round/`: all members at once: the fan-out and its early decision, the ledger that orders a
//!   release after our requests, the release round, fencing's write-back, background work.
//! - The API at the top: [`Lock`] (`lock/`: construction, the verbs, waiting for a held lock,
//!   `with_lock`), a [`Request`] (`request`) and its [`Patience`] (`rules/patience`), one acquisition's flow in
//!   `acquisition`, sets of [`Resources`] in `resources`, a semaphore's slots in `semaphore/`,
//!   a read-write lock's downgrade in `rwlock/`, leader election ([`Election`]) in
//!   `election/`, what each node holds of a resource ([`Lock::inspect`]) in `inspect`,
//!   [`Guard`], [`KeptGuard`] and [`Lease`] (`keep_alive`, `lease`), [`LockOptions`]
//!   (`options`, validated into `settings`), [`NodeConfig`] (`node_config`: a node
//!   from a URL, the application's own `redis::Client`, or a Redis Cluster's seeds), [`Error`] (`error`) and what each
//!   node did (`outcome`).
//! - `metrics`: every metric's name and the functions the floors record through, with the
//!   `metrics` feature (empty without it); the table is in its docs and in the README.
//!
//! The test harness (real `redis-server` processes and a fault-injecting proxy), the chaos
//! tooling and the `quorumlock` command live in their own crates in this workspace
//! (`quorumlock-harness`, `quorumlock-chaos`, `quorumlock-cli`), so this one depends only on what
//! the lock needs at run time.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod acquisition;
mod custody;
mod detached;
mod election;
mod error;
mod fenced_write;
mod guard;
mod hold;
mod inspect;
mod keep_alive;
mod key_format;
mod lease;
mod lock;
mod metrics;
mod node;
mod node_config;
mod options;
mod outcome;
mod owner;
mod request;
mod resources;
mod round;
mod rules;
mod rwlock;
mod semaphore;
mod settings;

/// The pure rules the model check (`crates/model`) runs instead of restating them, so that a
/// change to a rule changes what is checked. Hidden, and no stable API: for that crate only.
#[cfg(feature = "model")]
#[doc(hidden)]
pub mod model_rules {
    pub use crate::rules::quorum::{Tally, Verdict, Vote, majority};
    pub use crate::rules::validity::validity;
}

pub use detached::Detached;
pub use election::{Election, ElectionOptions, Leader, Leadership, Observer};
pub use error::{ConfigError, Error, Lost};
pub use fenced_write::{Fenced, FencedWrite};
pub use guard::{Guard, ReleaseReport};
pub use inspect::{KeyState, NodeState};
pub use keep_alive::{KeepAlive, KeptGuard};
pub use key_format::KeyFormat;
pub use lease::Lease;
pub use lock::Lock;
pub use node_config::NodeConfig;
pub use options::LockOptions;
pub use outcome::{NodeError, NodeOutcome, NodeReply, SetOutcome};
pub use owner::Owner;
pub use request::Request;
pub use resources::Resources;
#[cfg(feature = "chaos-defects")]
#[doc(hidden)]
pub use rules::defect::{Defect, UnknownDefect};
pub use rules::patience::Patience;
pub use rules::permits::MAX_PERMITS;
pub use rules::replacement::Replacement;
pub use rules::resources::MAX_RESOURCES;
pub use rules::retry::RetryPolicy;
pub use rules::token::Token;
pub use rules::validity::MAX_TTL;

/// Compiles the README's examples as doctests, so they cannot drift from the API; and those of
/// the docs that show the library's API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/fencing.md")]
struct FencingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/deployment.md")]
struct DeploymentDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/benchmarks.md")]
struct BenchmarksDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/interop.md")]
struct InteropDoctests;
