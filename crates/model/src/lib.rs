//! An exhaustive model check of quorumlock's fencing protocol over N independent Redis masters,
//! with [stateright]: every interleaving of clients, node replies, time, crashes and clock
//! faults within small bounds, against three safety properties. Pure: no I/O, no Redis.
//!
//! # The protocol, as modelled
//!
//! Per resource, each node ([`node::Node`]) holds a lock key (token and expiry on the node's
//! own clock) and a fence counter that never expires. A client ([`client::Client`]):
//!
//! 1. records T0 as it sends its first request (one global clock; clients' clocks are exact);
//! 2. runs the acquire script on nodes one at a time, in any order, each an atomic step: if the
//!    key is free, `SET key token PX ttl`, `INCR counter`, reply the counter; else "not ours".
//!    Any node may never answer (its step is simply never taken);
//! 3. decides as soon as a majority said ours (won, fence F = the largest counter replied) or
//!    can no longer say so (lost: it releases where it set the key);
//! 4. writes F back to the nodes that said ours, each an atomic step: if the key still holds
//!    its token, `counter = max(counter, F)`;
//! 5. once a majority confirmed, is granted the lock if `now < T0 + ttl - drift`, the end of
//!    its validity; else (or if the write-back cannot reach a majority) it releases;
//! 6. while holding, writes to the fenced store ([`store::Store`]), which accepts fence `f` iff
//!    `f` ≥ the last fence it accepted; a paused holder may write after its validity ended;
//! 7. releases: per node, deletes the key if it holds its token (the counter stays).
//!
//! The environment advances time one tick at a time up to a horizon, crashes and restarts a
//! node with its data (nothing changes) or without it (key and counter lost), and may run a
//! node's clock fast ([`config::Config::expiry_shortfall`]). The restart guard keeps a node
//! that lost its data out of every vote until `ttl + drift` after its restart.
//!
//! # How it maps to the library
//!
//! | model | library |
//! | --- | --- |
//! | one acquire step per node | the `SET NX PX` fan-out, each reply as it arrives (`fanout`, `commands`) |
//! | the tally in [`client::tally`] | the early quorum decision (`quorum`) |
//! | [`client::valid_until`] | `validity = ttl − elapsed − drift` (`validity`) |
//! | a node that lost its data does not vote until `ttl + drift` after its restart | the restart guard (`recovery`, `LockOptions::restart_guard`) |
//! | a restart with data | a node running AOF with `appendfsync always` |
//! | the release step | the compare-and-delete script |
//! | the fence counter, write-back and fenced store | the fencing extension being added |
//!
//! # The properties ([`properties`])
//!
//! - at most one client holds a grant that is still valid at any instant;
//! - every grant's fence is greater than the fence of every grant made before it;
//! - after the store accepted a write from a holder, it accepts none from a holder granted
//!   earlier;
//!
//! and, so that a pass is not vacuous, examples the checker must reach: a grant, a second grant
//! after the first expired, a stale write the store rejects, and where data can be lost, a grant
//! that counts a node which lost it.
//!
//! # Running it
//!
//! [`check::check`] explores a [`config::Config`] breadth first with symmetry reduction and
//! returns a [`check::CheckReport`]: state counts, time, and for each property the shortest
//! path the checker found to a violation or example, as a readable [`trace::Trace`]. The named
//! configurations are in [`scenario::Scenario`]; the binary runs one by name:
//!
//! ```text
//! cargo run -p quorumlock-model --release -- restart-without-guard
//! ```
//!
//! ```
//! use quorumlock_model::check::check;
//! use quorumlock_model::properties::MUTUAL_EXCLUSION;
//! use quorumlock_model::scenario::Scenario;
//!
//! let mut config = Scenario::RestartWithoutGuard.config();
//! config.horizon = 1;
//! let report = check(config).unwrap();
//! assert!(report.violated().contains(&MUTUAL_EXCLUSION));
//! print!("{}", report.discovery(MUTUAL_EXCLUSION).unwrap());
//! ```
//!
//! `docs/model-check.md` in the repository has the results and both counterexample traces.
//!
//! [stateright]: stateright

pub mod action;
pub mod bounded;
pub mod check;
pub mod client;
pub mod config;
pub mod discoveries;
pub mod ids;
pub mod model;
pub mod node;
pub mod properties;
pub mod protocols;
mod rules;
pub mod scenario;
pub mod state;
mod steps;
pub mod store;
mod symmetry;
pub mod trace;
