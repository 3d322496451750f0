//! Chaos testing for Redlock with [`quorumlock`]: named fault scenarios, a recorded history of
//! every hold and protected write, and a checker that proves or disproves mutual exclusion.
//!
//! - [`history`]: what happened, on one monotonic clock ([`History`], [`Recorder`]).
//! - [`checker`]: pure functions from a history to a [`CheckReport`]: overlapping holds
//!   (violations), stale writes, writes the protected store lost or interleaved, lost signals
//!   of kept-alive holds that came late and writes after them, availability, latency.
//! - [`Scenario`]: the named scenarios, each declaring whether Redlock should stay safe.
//! - [`nemesis`]: the seeded fault schedule of [`Scenario::Random`].
//! - [`run`]: runs a scenario on a local [`TestCluster`](quorumlock_harness::TestCluster) (or, for
//!   client-side scenarios, on the user's nodes; for [`Scenario::ClusterMembers`], on three
//!   local Redis Clusters, [`RedisClusters`](quorumlock_harness::RedisClusters)) and checks the
//!   history; its
//!   [`ScenarioReport`] tells with [`ExpectedVsObserved`] whether the run came out as the
//!   scenario predicts.
//!
//! ```no_run
//! use std::time::Duration;
//! use quorumlock_chaos::{ExpectedVsObserved, RunOptions, Scenario, run};
//!
//! # async fn demo() -> Result<(), quorumlock_chaos::ChaosError> {
//! let report = run(
//!     Scenario::MinorityCrash,
//!     &RunOptions::new().duration(Duration::from_secs(3)),
//! )
//! .await?;
//! assert!(report.check.violations.is_empty());
//! assert_eq!(report.expected_vs_observed(), ExpectedVsObserved::AsExpected);
//! # Ok(()) }
//! ```
//!
//! The crate feature `docker` lets the scenarios run on the harness's Docker backend too
//! ([`ClusterOptions::backend`](quorumlock_harness::ClusterOptions::backend), passed in with
//! [`RunOptions::cluster`]). See `docs/chaos.md` in the repository for what each scenario
//! demonstrates, and the `quorumlock chaos` command (crate `quorumlock-cli`) to run them from a
//! shell.

pub mod checker;
pub mod history;
pub mod nemesis;
mod run;
mod scenario;

pub use checker::{CheckReport, check};
pub use history::{History, Recorder};
/// The lock's deliberate defects (its test-only `chaos-defects` feature), for
/// [`RunOptions::defect`] and the mutation score in `docs/chaos.md`.
#[doc(inline)]
pub use quorumlock::{Defect, UnknownDefect};
pub use run::{
    ChaosError, ExpectedVsObserved, LOCAL_NODES, RunOptions, SHARD_KILLED_LABEL,
    SLOT_MIGRATED_LABEL, ScenarioReport, run,
};
pub use scenario::{Scenario, UnknownScenario};

/// Compiles the Rust examples of this crate's README as doctests, so they cannot drift from the
/// API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The same for `docs/chaos.md`, the chaos tooling's manual.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/chaos.md")]
struct ChaosDocDoctests;
