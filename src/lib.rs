//! Distributed locks over N independent Redis masters: the Redlock algorithm, done right.
//!
//! A [`Lock`] sends `SET key token NX PX ttl` to every node at once, decides as soon as a quorum
//! has said yes (or can no longer say yes), subtracts the elapsed time and the clock drift from
//! the validity, and releases on every node whenever an acquisition fails, is cancelled, or its
//! future is dropped. The same [`Lock`] and [`Guard`] work over a single Redis server
//! ([`Topology::Single`]), so code switches between the two by configuration.
//!
//! ```no_run
//! use std::time::Duration;
//! use quorumlock::{Error, Lock, LockOptions};
//!
//! # async fn run() -> Result<(), Error> {
//! let lock = Lock::quorum(
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
//! # Layout
//!
//! - Pure algorithm, no I/O: `quorum` (the vote tally), `validity` (lease
//!   arithmetic), [`retry`](crate::RetryPolicy) (the retry schedule), `renewal` (the
//!   keep-alive's schedule), `token` (tokens, keys),
//!   `ledger` (which of an acquisition's requests may still reach each node, so that a release
//!   runs after them, and one request per server and attempt), `recovery` (the restart guard:
//!   what `INFO` says, and from when a node may vote), `identity` (duplicate addresses, and
//!   which node votes for which `run_id`).
//! - I/O: `node` (one master's lazy connection, what its server says about itself on connect,
//!   and timeouts), `commands` (SET NX PX and the Lua
//!   scripts on one node), `fanout` (all nodes at once, early decision), `fencing` (the fence's
//!   write-back to a quorum), `background` (releases started from `Drop`).
//! - The API: [`Lock`], [`Guard`], [`KeptGuard`] and [`Lease`] (a guard kept alive in the
//!   background, `keep_alive`), [`LockOptions`], [`Topology`], [`Error`].
//!
//! The test harness (real `redis-server` processes and a fault-injecting proxy), the chaos
//! tooling and the `quorumlock` command live in their own crates in this workspace
//! (`quorumlock-harness`, `quorumlock-chaos`, `quorumlock-cli`), so this one depends only on what
//! the lock needs at run time.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod background;
mod clock;
mod commands;
#[cfg(feature = "chaos-defects")]
mod defect;
mod error;
mod fanout;
mod fencing;
mod guard;
mod identity;
mod keep_alive;
mod lease;
mod ledger;
mod lock;
mod node;
mod options;
mod quorum;
mod recovery;
mod renewal;
mod retry;
mod shared;
mod token;
mod validity;

#[cfg(feature = "chaos-defects")]
#[doc(hidden)]
pub use defect::{Defect, UnknownDefect};
pub use error::{ConfigError, Error, Lost, NodeError, NodeOutcome, NodeReply};
pub use guard::{Guard, ReleaseReport};
pub use keep_alive::{KeepAlive, KeptGuard};
pub use lease::Lease;
pub use lock::Lock;
pub use options::{LockOptions, Topology};
pub use retry::RetryPolicy;
pub use token::Token;
pub use validity::MAX_TTL;

/// Compiles the README's examples as doctests, so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
