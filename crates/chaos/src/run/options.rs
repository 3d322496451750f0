//! [`RunOptions`]: how long a scenario runs, with which TTL, how many clients on how many
//! resources, and on which nodes.

use std::time::Duration;

use quorumlock::Defect;
use quorumlock_harness::ClusterOptions;

use super::error::ChaosError;

/// How to run scenarios; start from [`RunOptions::new`].
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub(super) duration: Duration,
    pub(super) ttl: Duration,
    pub(super) clients: usize,
    pub(super) resources: usize,
    pub(super) writes_per_hold: u32,
    pub(super) nodes: Option<Vec<String>>,
    pub(super) cluster: ClusterOptions,
    pub(super) restart_guard: Option<bool>,
    pub(super) seed: Option<u64>,
    pub(super) defect: Option<Defect>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: Duration::from_secs(10),
            ttl: Duration::from_millis(400),
            clients: 12,
            resources: 3,
            writes_per_hold: 3,
            nodes: None,
            cluster: ClusterOptions::default(),
            restart_guard: None,
            seed: None,
            defect: None,
        }
    }
}

impl RunOptions {
    /// 10 s per scenario, TTL 400 ms, 12 clients on 3 resources, 3 writes per hold, on a local
    /// cluster of five `redis-server` processes.
    pub fn new() -> RunOptions {
        RunOptions::default()
    }

    /// How long clients run (faults are injected meanwhile).
    #[must_use]
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// The lock TTL: short, so that expiry happens often.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How many client tasks contend (each with its own [`Lock`](quorumlock::Lock) and
    /// connections).
    #[must_use]
    pub fn clients(mut self, clients: usize) -> Self {
        self.clients = clients;
        self
    }

    /// How many resources they contend for (client `i` wants resource `i mod resources`).
    #[must_use]
    pub fn resources(mut self, resources: usize) -> Self {
        self.resources = resources;
        self
    }

    /// How many protected writes a holder makes per hold.
    #[must_use]
    pub fn writes_per_hold(mut self, writes: u32) -> Self {
        self.writes_per_hold = writes;
        self
    }

    /// Runs against these nodes (a user's own deployment) instead of a local cluster; only
    /// scenarios that need no node control can run then.
    #[must_use]
    pub fn nodes(mut self, urls: Vec<String>) -> Self {
        self.nodes = Some(urls);
        self
    }

    /// The options for the local clusters (backend, `redis-server` binary, …). The runner sets
    /// the node count, proxies, persistence and clocks itself.
    #[must_use]
    pub fn cluster(mut self, cluster: ClusterOptions) -> Self {
        self.cluster = cluster;
        self
    }

    /// Runs every scenario's clients with the lock's restart guard on or off
    /// ([`LockOptions::restart_guard`](quorumlock::LockOptions::restart_guard)). By default each
    /// scenario decides ([`Scenario::restart_guard`](crate::Scenario::restart_guard)): on, but
    /// off for `restart-no-persistence`, so that it keeps showing the hazard the guard
    /// prevents. A report's expected safety follows the guard it ran with.
    #[must_use]
    pub fn restart_guard(mut self, on: bool) -> Self {
        self.restart_guard = Some(on);
        self
    }

    /// The seed of the nemesis's fault schedule ([`Scenario::Random`](crate::Scenario::Random)):
    /// the same seed, duration, TTL and node count replay the same faults at the same instants.
    /// Without it each run draws a seed, and reports it
    /// ([`ScenarioReport::seed`](crate::ScenarioReport::seed)).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Runs the clients with a deliberately broken lock ([`Defect`], the mutation score): a
    /// scenario expected safe that shows violations then has caught the defect.
    #[must_use]
    pub fn defect(mut self, defect: Defect) -> Self {
        self.defect = Some(defect);
        self
    }

    pub(super) fn validate(&self) -> Result<(), ChaosError> {
        let invalid = |what: &str| Err(ChaosError::InvalidOptions(what.to_owned()));
        if self.clients == 0 {
            return invalid("at least one client is needed");
        }
        if self.resources == 0 {
            return invalid("at least one resource is needed");
        }
        if self.ttl < Duration::from_millis(20) {
            return invalid("the TTL must be at least 20 ms");
        }
        if self.nodes.as_ref().is_some_and(Vec::is_empty) {
            return invalid("--nodes is empty");
        }
        Ok(())
    }
}
