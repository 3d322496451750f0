//! Chaos testing for Redlock (feature `chaos`): named fault scenarios, a recorded history of
//! every hold and protected write, and a checker that proves or disproves mutual exclusion.
//!
//! - [`history`]: what happened, on one monotonic clock ([`History`], [`Recorder`]).
//! - [`checker`]: pure functions from a history to a [`CheckReport`]: overlapping holds
//!   (violations), stale writes, availability, latency.
//! - [`Scenario`]: the named scenarios, each declaring whether Redlock should stay safe.
//! - [`run`]: runs a scenario on a local [`TestCluster`](quorumlock_harness::TestCluster) (or, for
//!   client-side scenarios, on the user's nodes) and checks the history.
//!
//! ```no_run
//! use std::time::Duration;
//! use quorumlock_chaos::{RunOptions, Scenario, run};
//!
//! # async fn demo() -> Result<(), quorumlock_chaos::ChaosError> {
//! let report = run(
//!     Scenario::MinorityCrash,
//!     &RunOptions::new().duration(Duration::from_secs(3)),
//! )
//! .await?;
//! assert!(report.check.violations.is_empty());
//! # Ok(()) }
//! ```
//!
//! See `docs/chaos.md` for what each scenario demonstrates.

pub mod checker;
pub mod history;
mod run;
mod scenario;

pub use checker::{CheckReport, check};
pub use history::{History, Recorder};
pub use run::{ChaosError, LOCAL_NODES, RunOptions, ScenarioReport, Verdict, run};
pub use scenario::{Scenario, UnknownScenario};
