//! [`RunOptions`]: how long a scenario runs, with which TTL, how many clients on how many
//! resources, on which nodes, with or without the restart guard and fencing.

use std::time::Duration;

use quorumlock::Defect;
use quorumlock_harness::ClusterOptions;

use super::error::ChaosError;
use crate::scenario::Scenario;

/// How to run scenarios; start from [`RunOptions::new`].
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub(super) duration: Duration,
    pub(super) ttl: Duration,
    pub(super) clients: usize,
    pub(super) resources: usize,
    pub(super) writes_per_hold: u32,
    pub(super) leases: usize,
    pub(super) nodes: Option<Vec<String>>,
    pub(super) cluster: ClusterOptions,
    pub(super) restart_guard: Option<bool>,
    pub(super) fencing: bool,
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
            leases: 1_200,
            nodes: None,
            cluster: ClusterOptions::default(),
            restart_guard: None,
            fencing: false,
            seed: None,
            defect: None,
        }
    }
}

impl RunOptions {
    /// 10 s per scenario, TTL 400 ms, 12 clients on 3 resources, 3 writes per hold, 1,200 bulk
    /// leases in `many-leases`, on a local cluster of five `redis-server` processes.
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

    /// How many bulk leases [`Scenario::ManyLeases`](crate::Scenario::ManyLeases) keeps alive
    /// at most, over all clients (default 1,200): each client's block is this divided by the
    /// clients, rounded up, and each client contends for its block and its neighbour's.
    #[must_use]
    pub fn leases(mut self, leases: usize) -> Self {
        self.leases = leases;
        self
    }

    /// The bulk leases per client's block ([`leases`](RunOptions::leases) over the clients,
    /// rounded up).
    pub(super) fn leases_per_client(&self) -> usize {
        self.leases.div_ceil(self.clients.max(1))
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

    /// Runs every scenario's clients with fencing tokens (default off; `client-stall-fenced`
    /// always has them): the locks are built with
    /// [`LockOptions::fencing`](quorumlock::LockOptions::fencing), every protected write
    /// carries its holder's [`Guard::fence`](quorumlock::Guard::fence), and the protected store
    /// accepts a write only if its fence is at least the last one it accepted. Where a
    /// scenario's nodes do not persist every write (all but `restart-aof`, and `random` without
    /// the restart guard; and given [`nodes`](RunOptions::nodes), whose persistence the runner
    /// does not know) the locks also get
    /// [`fence_volatile_nodes`](quorumlock::LockOptions::fence_volatile_nodes), since otherwise
    /// no node would vote. `no-lock` takes no lock, so its writes carry no fence. A report's
    /// expected safety follows: the client stalls are expected safe with fencing.
    #[must_use]
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
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

    /// Whether `scenario`'s clients run with the restart guard: as these options say, else as
    /// the scenario does by default.
    pub(super) fn restart_guard_for(&self, scenario: Scenario) -> bool {
        self.restart_guard
            .unwrap_or_else(|| scenario.restart_guard())
    }

    /// Whether `scenario`'s clients run with fencing: if these options or the scenario say so,
    /// and they take a lock at all.
    pub(super) fn fencing_for(&self, scenario: Scenario) -> bool {
        (self.fencing || scenario.fencing()) && scenario != Scenario::NoLock
    }

    /// Whether `scenario`, run with these options, is expected to keep mutual exclusion (its
    /// [`Scenario::expected_safe_with`] for the restart guard and fencing it runs with).
    pub fn expected_safe(&self, scenario: Scenario) -> bool {
        scenario.expected_safe_with(self.restart_guard_for(scenario), self.fencing_for(scenario))
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
