//! Running a scenario: a cluster (or the user's nodes), contending client tasks doing protected
//! writes, the scenario's faults, and the history they leave, checked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use serde::Serialize;
use tokio::task::JoinSet;

use super::checker::{CheckReport, check};
use super::history::{Clock, History, Outcome, Recorder};
use super::scenario::Scenario;
use quorumlock::{Lock, LockOptions, RetryPolicy};
use quorumlock_harness::{ClusterOptions, HarnessError, Persistence, TestCluster};

/// Nodes of a cluster the runner starts itself (the scenarios name nodes 0–4).
pub const LOCAL_NODES: usize = 5;
/// Upper bound on fault cycles per scenario, on top of the time bound.
const MAX_CYCLES: u32 = 10_000;
/// Upper bound on acquisition attempts per client task, on top of the time bound.
const MAX_ATTEMPTS_PER_CLIENT: u64 = 1_000_000;
/// How long clients get to finish their last hold after the run, beyond one TTL.
const WIND_DOWN_GRACE: Duration = Duration::from_secs(3);
/// Speed factor of the fast clocks in [`Scenario::ClockFast`].
const FAST_CLOCK_RATE: f64 = 10.0;
/// The nodes whose clocks run fast in [`Scenario::ClockFast`].
const FAST_NODES: [usize; 3] = [0, 1, 2];
/// How long the clock-rate check watches a node's clock.
const CLOCK_CHECK: Duration = Duration::from_millis(100);
/// How often the clock emulation looks for new keys.
const SKEW_POLL: Duration = Duration::from_millis(2);

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
    /// A node needed for a fault has no fault proxy.
    #[error("node {0} has no fault proxy")]
    NoProxy(usize),
}

/// How to run scenarios; start from [`RunOptions::new`].
#[derive(Debug, Clone)]
pub struct RunOptions {
    duration: Duration,
    ttl: Duration,
    clients: usize,
    resources: usize,
    writes_per_hold: u32,
    nodes: Option<Vec<String>>,
    cluster: ClusterOptions,
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

    /// How many client tasks contend (each with its own [`Lock`] and connections).
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

    /// The duration.
    pub fn get_duration(&self) -> Duration {
        self.duration
    }

    /// The TTL.
    pub fn get_ttl(&self) -> Duration {
        self.ttl
    }

    /// The user's nodes, if given.
    pub fn get_nodes(&self) -> Option<&[String]> {
        self.nodes.as_deref()
    }

    fn validate(&self) -> Result<(), ChaosError> {
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

/// Whether a run came out as its scenario predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// Expected safe and safe, or expected unsafe and a violation or stale write was shown.
    AsExpected,
    /// Expected safe, yet a violation or stale write was found: a bug (or broken assumptions).
    UnexpectedViolation,
    /// Expected unsafe, but this run happened to show nothing: the scenario failed to
    /// demonstrate the hazard (run it longer).
    NotDemonstrated,
}

/// The outcome of one scenario run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ScenarioReport {
    /// The scenario.
    pub scenario: Scenario,
    /// Whether Redlock is expected to stay safe through it.
    pub expected_safe: bool,
    /// What it does.
    pub description: String,
    /// Where it ran, e.g. `5 local redis-server processes`.
    pub target: String,
    /// Lock TTL (ms).
    pub ttl_ms: u64,
    /// Client tasks.
    pub clients: usize,
    /// Resources.
    pub resources: usize,
    /// Remarks about how the run was done (e.g. an emulated clock).
    pub notes: Vec<String>,
    /// What the checker found.
    pub check: CheckReport,
    /// The full history.
    pub history: History,
}

impl ScenarioReport {
    /// Whether the run came out as predicted.
    pub fn verdict(&self) -> Verdict {
        match (self.expected_safe, self.check.is_safe()) {
            (true, true) | (false, false) => Verdict::AsExpected,
            (true, false) => Verdict::UnexpectedViolation,
            (false, true) => Verdict::NotDemonstrated,
        }
    }
}

/// Runs `scenario` as `options` say: on a local cluster it starts (and always stops, also on
/// error), or on the user's nodes for scenarios that need no node control.
///
/// Needs a multi-threaded Tokio runtime with I/O and time.
pub async fn run(scenario: Scenario, options: &RunOptions) -> Result<ScenarioReport, ChaosError> {
    options.validate()?;
    if let Some(urls) = &options.nodes {
        if scenario.needs_node_control() {
            return Err(ChaosError::NeedsNodeControl(scenario));
        }
        let target = format!("{} given nodes", urls.len());
        return run_on(scenario, options, urls.clone(), None, target, Vec::new()).await;
    }
    let mut notes = Vec::new();
    let mut cluster = match TestCluster::start(cluster_options(scenario, options, true)).await {
        Ok(cluster) => cluster,
        Err(error) if scenario == Scenario::ClockFast => {
            notes.push(format!(
                "could not start nodes with fast clocks ({error}); emulating them instead"
            ));
            TestCluster::start(cluster_options(scenario, options, false)).await?
        }
        Err(error) => return Err(error.into()),
    };
    let urls = cluster.urls();
    let target = format!("{LOCAL_NODES} local nodes behind fault proxies");
    if scenario == Scenario::RestartAof {
        notes.push("every node: appendonly yes, appendfsync always".to_owned());
    }
    // Dropping the cluster (here, or while unwinding) kills every process and proxy it started.
    run_on(scenario, options, urls, Some(&mut cluster), target, notes).await
}

/// The cluster for a scenario: five nodes behind proxies, with persistence where it matters,
/// and (if `clocks`) fast clocks on nodes 0–2 for [`Scenario::ClockFast`].
fn cluster_options(scenario: Scenario, options: &RunOptions, clocks: bool) -> ClusterOptions {
    let mut cluster = options.cluster.clone().nodes(LOCAL_NODES).proxies(true);
    match scenario {
        Scenario::RestartAof => cluster = cluster.persistence(Persistence::AofAlways),
        Scenario::ClockFast if clocks => {
            for node in FAST_NODES {
                cluster = cluster.clock_rate(node, FAST_CLOCK_RATE);
            }
        }
        _ => {}
    }
    cluster
}

async fn run_on(
    scenario: Scenario,
    options: &RunOptions,
    urls: Vec<String>,
    cluster: Option<&mut TestCluster>,
    target: String,
    mut notes: Vec<String>,
) -> Result<ScenarioReport, ChaosError> {
    let recorder = Recorder::new(Clock::start());
    let started = Instant::now();
    let deadline = started + options.duration;
    let prefix = format!("quorumlock:chaos:{scenario}:{:08x}:", rand::random::<u32>());
    let resources: Vec<String> = (0..options.resources).map(|i| format!("res-{i}")).collect();
    let lock_options = LockOptions::new()
        .ttl(options.ttl)
        .retry(RetryPolicy::once())
        .key_prefix(prefix.clone());
    let client = Arc::new(ClientPlan {
        resources: resources.clone(),
        writes_per_hold: options.writes_per_hold.max(1),
        ttl: options.ttl,
        deadline,
        stall: scenario == Scenario::ClientStall,
        recorder: recorder.clone(),
    });
    let mut clients = JoinSet::new();
    for id in 0..options.clients {
        let lock = Lock::quorum(urls.clone(), lock_options.clone())?;
        clients.spawn(run_client(id, lock, Arc::clone(&client)));
    }

    let faults = Faults {
        recorder: &recorder,
        deadline,
        ttl: options.ttl,
    };
    // On error, returning drops `clients`, which aborts every client task.
    match cluster {
        Some(cluster) => {
            let keys = resources
                .iter()
                .map(|r| format!("{prefix}{r}").into_bytes())
                .collect();
            faults.inject(scenario, cluster, keys, &mut notes).await?;
        }
        None => faults.sleep_until(deadline).await,
    }
    faults.sleep_until(deadline).await;

    let wind_down = options.ttl * 2 + WIND_DOWN_GRACE;
    let joined = tokio::time::timeout(wind_down, async {
        while clients.join_next().await.is_some() {}
    })
    .await;
    if joined.is_err() {
        notes.push(format!(
            "{} client task(s) still busy {wind_down:?} after the end; aborted",
            clients.len()
        ));
        clients.shutdown().await;
    }
    recorder.set_duration(recorder.clock().us(deadline));
    let history = recorder.snapshot();
    Ok(ScenarioReport {
        scenario,
        expected_safe: scenario.expected_safe(),
        description: scenario.description().to_owned(),
        target,
        ttl_ms: u64::try_from(options.ttl.as_millis()).unwrap_or(u64::MAX),
        clients: options.clients,
        resources: options.resources,
        notes,
        check: check(&history),
        history,
    })
}

/// What every client task shares.
struct ClientPlan {
    resources: Vec<String>,
    writes_per_hold: u32,
    ttl: Duration,
    deadline: Instant,
    /// Whether some holds pause past their validity before writing ([`Scenario::ClientStall`]).
    stall: bool,
    recorder: Recorder,
}

/// A random duration in `[low, high)` (`low` if the range is empty).
fn random_between(low: Duration, high: Duration) -> Duration {
    if high <= low {
        return low;
    }
    low + (high - low).mul_f64(rand::random::<f64>())
}

/// One client: acquire (one round), on success hold for a while doing protected writes while
/// the guard is valid, release; on failure back off a little; until the deadline.
async fn run_client(id: usize, lock: Lock, plan: Arc<ClientPlan>) {
    let Some(resource) = plan.resources.get(id % plan.resources.len().max(1)) else {
        return;
    };
    let recorder = &plan.recorder;
    let ms = Duration::from_millis;
    let mut holds = 0u64;
    for _ in 0..MAX_ATTEMPTS_PER_CLIENT {
        if Instant::now() >= plan.deadline {
            break;
        }
        let started = Instant::now();
        let result = lock.try_acquire(resource).await;
        let finished = Instant::now();
        let outcome = Outcome::of(&result);
        recorder.attempt(resource, id, started, finished, outcome);
        let Ok(guard) = result else {
            tokio::time::sleep(random_between(ms(5), ms(25))).await;
            continue;
        };
        holds += 1;
        let token = guard.token().as_str().to_owned();
        let valid_until = guard.valid_until();
        let hold = recorder.begin_hold(resource, id, &token, started, finished, valid_until);
        // Stalling clients: the first client on each resource, every other hold.
        let stall_now = plan.stall && id < plan.resources.len() && !holds.is_multiple_of(2);
        let validity = valid_until.saturating_duration_since(finished);
        let hold_for = validity.mul_f64(0.5 + 0.45 * rand::random::<f64>());
        let spacing = hold_for / plan.writes_per_hold;
        for write in 0..plan.writes_per_hold {
            if write > 0 {
                tokio::time::sleep(spacing).await;
            }
            if stall_now && write == 1 {
                // A pause between the validity check and the write (a long GC, a stopped VM):
                // the writer wakes after its keys have expired and writes anyway.
                let pause = recorder.client_fault("client paused", resource);
                tokio::time::sleep_until((valid_until + plan.ttl / 2).into()).await;
                recorder.lift(pause);
                recorder.write(resource, id, &token, Instant::now());
                continue;
            }
            // The careful writer: check the validity, then write at once (no await between).
            let now = Instant::now();
            if now >= guard.valid_until() {
                break;
            }
            recorder.write(resource, id, &token, now);
        }
        tokio::time::sleep_until((Instant::now() + spacing).min(valid_until).into()).await;
        recorder.end_hold(hold, Instant::now());
        let _report = guard.release().await;
        tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
    }
    lock.settle().await;
}

/// The fault schedule of a scenario, on a local cluster.
struct Faults<'a> {
    recorder: &'a Recorder,
    deadline: Instant,
    ttl: Duration,
}

impl Faults<'_> {
    async fn sleep_until(&self, until: Instant) {
        tokio::time::sleep_until(until.min(self.deadline).into()).await;
    }

    async fn sleep(&self, duration: Duration) {
        self.sleep_until(Instant::now() + duration).await;
    }

    /// Whether a fault cycle of `span` still ends before the deadline.
    fn fits(&self, span: Duration) -> bool {
        Instant::now() + span <= self.deadline
    }

    async fn inject(
        &self,
        scenario: Scenario,
        cluster: &mut TestCluster,
        keys: Vec<Vec<u8>>,
        notes: &mut Vec<String>,
    ) -> Result<(), ChaosError> {
        let t = self.ttl;
        match scenario {
            Scenario::Baseline | Scenario::ClientStall => {}
            Scenario::MinorityCrash => {
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("killed", &[3, 4]);
                    cluster.kill(3).await?;
                    cluster.kill(4).await?;
                    self.sleep(t * 2).await;
                    cluster.start_node(3).await?;
                    cluster.start_node(4).await?;
                    self.recorder.lift(fault);
                }
            }
            Scenario::MinorityFreeze => {
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("SIGSTOP", &[3, 4]);
                    cluster.pause(3)?;
                    cluster.pause(4)?;
                    self.sleep(t * 2).await;
                    cluster.resume(3)?;
                    cluster.resume(4)?;
                    self.recorder.lift(fault);
                }
            }
            Scenario::MinorityLatency => self.latency(cluster, &[3, 4]).await?,
            Scenario::MajorityLatency => self.latency(cluster, &[0, 1, 2]).await?,
            Scenario::PartitionMinority => {
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("black hole", &[3, 4]);
                    for node in [3, 4] {
                        proxy(cluster, node)?.blackhole();
                    }
                    self.sleep(t * 2).await;
                    for node in [3, 4] {
                        let proxy = proxy(cluster, node)?;
                        proxy.heal().await?;
                        // Swallowed requests leave the clients' connections out of step.
                        proxy.cut().await;
                    }
                    self.recorder.lift(fault);
                }
            }
            Scenario::PartitionMajority => {
                for _ in 0..MAX_CYCLES {
                    self.sleep(t).await;
                    if !self.fits(t * 5 / 2) {
                        break;
                    }
                    let fault = self.recorder.fault("cut + refused", &[0, 1, 2]);
                    self.partition(cluster, &[0, 1, 2]).await?;
                    self.sleep(t * 2).await;
                    heal(cluster, &[0, 1, 2]).await?;
                    self.recorder.lift(fault);
                }
            }
            Scenario::RestartNoPersistence | Scenario::RestartAof => {
                self.restarts(cluster, None).await?;
            }
            Scenario::RestartDelayed => self.restarts(cluster, Some(t * 3 / 2)).await?,
            Scenario::ClockFast => self.fast_clocks(cluster, keys, notes).await?,
        }
        Ok(())
    }

    async fn partition(&self, cluster: &TestCluster, nodes: &[usize]) -> Result<(), ChaosError> {
        for &node in nodes {
            let proxy = proxy(cluster, node)?;
            proxy.refuse().await;
            proxy.cut().await;
        }
        Ok(())
    }

    /// Latency under the per-node timeout (slow answers), then over it (timeouts), alternating.
    async fn latency(&self, cluster: &TestCluster, nodes: &[usize]) -> Result<(), ChaosError> {
        let t = self.ttl;
        for cycle in 0..MAX_CYCLES {
            self.sleep(t).await;
            if !self.fits(t * 5 / 2) {
                break;
            }
            // The default node timeout is TTL / 10: a round trip of 2 × TTL / 50 stays under
            // it, one of 2 × TTL / 12 goes over.
            let latency = if cycle % 2 == 0 { t / 50 } else { t / 12 };
            let fault = self
                .recorder
                .fault(format!("+{}ms each way", latency.as_millis()), nodes);
            for &node in nodes {
                proxy(cluster, node)?.set_latency(latency);
            }
            self.sleep(t * 2).await;
            for &node in nodes {
                proxy(cluster, node)?.set_latency(Duration::ZERO);
            }
            self.recorder.lift(fault);
        }
        Ok(())
    }

    /// The restart cycle: cut nodes 3,4 off for one TTL, so holds taken meanwhile have their
    /// keys on nodes 0–2 only; bring 3,4 back; kill and restart node 1 and then node 2 at once
    /// (`down` = `None`), or kill both and restart them after `down`.
    async fn restarts(
        &self,
        cluster: &mut TestCluster,
        down: Option<Duration>,
    ) -> Result<(), ChaosError> {
        let t = self.ttl;
        for _ in 0..MAX_CYCLES {
            self.sleep(t).await;
            if !self.fits(t * 2 + down.unwrap_or_default()) {
                break;
            }
            let cut = self.recorder.fault("cut + refused", &[3, 4]);
            self.partition(cluster, &[3, 4]).await?;
            self.sleep(t).await;
            heal(cluster, &[3, 4]).await?;
            self.recorder.lift(cut);
            let label = match down {
                None => "killed, restarted at once",
                Some(_) => "killed, restarted after > TTL",
            };
            match down {
                // One node after the other: a contender can get in as soon as node 1 is back
                // (nodes 1, 3, 4), while the holder still has nodes 0 and 2.
                None => {
                    for node in [1, 2] {
                        let restart = self.recorder.fault(label, &[node]);
                        cluster.kill(node).await?;
                        cluster.start_node(node).await?;
                        self.recorder.lift(restart);
                    }
                }
                Some(down) => {
                    let restart = self.recorder.fault(label, &[1, 2]);
                    cluster.kill(1).await?;
                    cluster.kill(2).await?;
                    self.sleep(down).await;
                    cluster.start_node(1).await?;
                    cluster.start_node(2).await?;
                    self.recorder.lift(restart);
                }
            }
        }
        Ok(())
    }

    /// Nodes 0–2 count time [`FAST_CLOCK_RATE`] times too fast for the whole run: every key
    /// they store expires after TTL / rate.
    ///
    /// Emulated: a key's expiry is shortened to a tenth of what is left as soon as it is
    /// seen (within a few milliseconds), which is what a node clock running that fast does to
    /// it.
    async fn fast_clocks(
        &self,
        cluster: &TestCluster,
        keys: Vec<Vec<u8>>,
        notes: &mut Vec<String>,
    ) -> Result<(), ChaosError> {
        let nodes = FAST_NODES;
        let mut connections = Vec::new();
        for node in nodes {
            connections.push(cluster.connection(node).await?);
        }
        let rates = futures::future::try_join_all(connections.iter_mut().map(clock_rate)).await?;
        if rates.iter().all(|&rate| rate > FAST_CLOCK_RATE / 2.0) {
            notes.push(format!(
                "clocks of nodes 0,1,2 run fast (libfaketime); measured rates {}",
                rates
                    .iter()
                    .map(|rate| format!("×{rate:.1}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            let fault = self
                .recorder
                .fault(format!("clock ×{FAST_CLOCK_RATE}"), &nodes);
            self.sleep_until(self.deadline).await;
            self.recorder.lift(fault);
            return Ok(());
        }
        notes.push(format!(
            "clock ×{FAST_CLOCK_RATE} emulated (node clocks measured at ×{:.1}): each new key's \
             remaining TTL is divided by {FAST_CLOCK_RATE} within {SKEW_POLL:?} of being set",
            rates.first().copied().unwrap_or(1.0)
        ));
        let fault = self
            .recorder
            .fault(format!("clock ×{FAST_CLOCK_RATE}"), &nodes);
        let script = redis::Script::new(SHORTEN_NEW_KEY);
        // The token last shortened, per node and key.
        let mut seen: Vec<Vec<Option<String>>> = vec![vec![None; keys.len()]; nodes.len()];
        let polls = self
            .deadline
            .saturating_duration_since(Instant::now())
            .as_millis()
            / SKEW_POLL.as_millis().max(1)
            + 1;
        for _ in 0..polls {
            if Instant::now() >= self.deadline {
                break;
            }
            for (connection, seen) in connections.iter_mut().zip(seen.iter_mut()) {
                for (key, last) in keys.iter().zip(seen.iter_mut()) {
                    let token: Option<String> = script
                        .key(key.as_slice())
                        .arg(last.as_deref().unwrap_or(""))
                        .arg(FAST_CLOCK_RATE)
                        .invoke_async(connection)
                        .await?;
                    if token.is_some() {
                        *last = token;
                    }
                }
            }
            tokio::time::sleep(SKEW_POLL).await;
        }
        self.recorder.lift(fault);
        Ok(())
    }
}

/// How fast a node's wall clock runs against ours, watched over [`CLOCK_CHECK`].
async fn clock_rate(connection: &mut MultiplexedConnection) -> Result<f64, ChaosError> {
    async fn node_time(connection: &mut MultiplexedConnection) -> redis::RedisResult<f64> {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(connection).await?;
        Ok(secs as f64 + micros as f64 / 1e6)
    }
    let started = Instant::now();
    let first = node_time(connection).await?;
    tokio::time::sleep(CLOCK_CHECK).await;
    let second = node_time(connection).await?;
    let ours = started.elapsed().as_secs_f64();
    Ok(if ours > 0.0 {
        (second - first) / ours
    } else {
        1.0
    })
}

/// Divides the remaining TTL of `KEYS[1]` by `ARGV[2]` unless its value is `ARGV[1]` (already
/// done); returns the value, or nil if there is no key.
const SHORTEN_NEW_KEY: &str = r"
local value = redis.call('GET', KEYS[1])
if not value then return nil end
if value ~= ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    redis.call('PEXPIRE', KEYS[1], math.max(1, math.floor(left / tonumber(ARGV[2]))))
  end
end
return value
";

fn proxy(
    cluster: &TestCluster,
    node: usize,
) -> Result<&quorumlock_harness::FaultProxy, ChaosError> {
    cluster.proxy(node).ok_or(ChaosError::NoProxy(node))
}

async fn heal(cluster: &TestCluster, nodes: &[usize]) -> Result<(), ChaosError> {
    for &node in nodes {
        proxy(cluster, node)?.heal().await?;
    }
    Ok(())
}
