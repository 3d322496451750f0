//! [`ChaosError`]: everything that can stop a scenario from running to the end.

use quorumlock_harness::HarnessError;

use crate::scenario::Scenario;

/// Everything that can stop a scenario from running to the end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChaosError {
    /// The scenario kills, pauses or isolates nodes, which only works on a cluster the runner
    /// starts itself.
    #[error(
        "scenario {0} needs control over the nodes (kill, pause, proxies, clocks); \
         it cannot run against given --nodes"
    )]
    NeedsNodeControl(Scenario),
    /// The options make no sense (zero clients, …).
    #[error("invalid chaos options: {0}")]
    InvalidOptions(String),
    /// Starting or driving the test cluster failed.
    #[error("test cluster: {0}")]
    Harness(#[from] HarnessError),
    /// The lock rejected its configuration.
    #[error("lock: {0}")]
    Lock(#[from] quorumlock::Error),
    /// A command the runner itself sent to a node failed.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The protected store's log holds an entry the runner did not write.
    #[error("protected store: unreadable log entry {0:?}")]
    StoreLog(String),
    /// A node needed for a fault has no fault proxy.
    #[error("node {0} has no fault proxy")]
    NoProxy(usize),
    /// A fault's self-check failed: it did not take effect, so the run would prove nothing.
    #[error("self-check failed: {fault} on node {node} did not take effect: {evidence}")]
    FaultNotInEffect {
        /// The fault, e.g. `SIGSTOP`.
        fault: String,
        /// The node it was applied to.
        node: usize,
        /// What was measured instead.
        evidence: String,
    },
    /// A scenario's own self-check failed: its faults took effect, but it did not show what it
    /// exists for (e.g. no hold kept alive was lost), so the run would prove nothing.
    #[error("self-check failed: {scenario} did not show what it exists for: {evidence}")]
    EffectNotShown {
        /// The scenario.
        scenario: Scenario,
        /// What was seen instead.
        evidence: String,
    },
    /// A client-side fault's self-check failed: it did not have the effect it exists for, so
    /// the run would prove nothing.
    #[error("self-check failed: {fault} did not take effect: {evidence}")]
    ClientFaultNotInEffect {
        /// The fault, e.g. `client paused`.
        fault: String,
        /// What was seen instead.
        evidence: String,
    },
}
