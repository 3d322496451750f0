//! `quorumlock bench`: the quorum lock against the single-node lock, side by side in one run.
//!
//! Every scenario runs the single-node lock and the quorum lock in the same process, on the same
//! machine, interleaved in rounds, so that the ratios between them are fair even when the
//! machine's speed drifts during the run. Latencies go into HDR histograms; a table prints every
//! figure with its ratio to the single-node baseline, and optionally JSON and SVG plots.
//!
//! Without `--nodes` everything runs against local `redis-server` processes on 127.0.0.1 that
//! the command starts and stops itself. Every loop is bounded both in count and in time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use plotters::prelude::*;
use quorumlock::testing::{ClusterOptions, TestCluster};
use quorumlock::{Error, Lock, LockOptions, RetryPolicy};
use redis::aio::MultiplexedConnection;
use serde::Serialize;

// ---------------------------------------------------------------------------------------------
// Allocation counting
// ---------------------------------------------------------------------------------------------

/// Counts every allocation the process makes (all threads), so that a quiet sequential loop can
/// report allocations per acquire+release cycle.
struct CountingAllocator;

/// Allocations (alloc, alloc_zeroed and realloc calls) since the process started.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged;
// the counter is a relaxed atomic and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Arguments and plan
// ---------------------------------------------------------------------------------------------

/// Compare the quorum lock with the single-node lock, side by side in one run.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Comma-separated node URLs of your own deployment (redis://host:port). The first one is
    /// the single-node baseline, all of them form the quorum. Scenarios that need fault proxies
    /// (slow minority, hung node) are skipped. Without it, local redis-server processes on
    /// 127.0.0.1 are started and stopped.
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    /// A short run: the whole command finishes in well under a minute.
    #[arg(long)]
    quick: bool,
    /// Write the raw results (every figure, CDF points, machine facts) as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write SVG plots (latency CDFs per scenario, throughput bars) into this directory.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// Tasks contending for one key in the hand-off scenario.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(2..=256))]
    contenders: u16,
    /// Lock TTL in milliseconds (the per-node timeout defaults to TTL / 10, at most 50 ms).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    ttl_ms: u64,
}

/// How much of everything to measure. Every loop stops at its count or its time, whichever
/// comes first.
#[derive(Debug, Clone, Serialize)]
struct Plan {
    /// Sequential acquire+release cycles per lock, spread over `rounds` rounds.
    cycle_ops: u64,
    /// Time cap per lock for those cycles.
    cycle_cap_ms: u64,
    /// Rounds the sequential scenarios are interleaved in.
    rounds: u64,
    /// Concurrent task counts for the throughput scenario.
    tasks: Vec<usize>,
    /// Duration of each throughput step.
    throughput_ms: u64,
    /// Duration of each hand-off step.
    handoff_ms: u64,
    /// Cap on hand-offs per step.
    handoff_max: u64,
    /// How long a holder keeps the lock, and rests after releasing, in the hand-off scenario.
    handoff_hold_us: u64,
    /// Acquisitions per fault scenario (slow minority, hung node, their healthy baseline).
    fault_ops: u64,
    /// Time cap per fault scenario.
    fault_cap_ms: u64,
    /// Timed releases per fault scenario.
    release_ops: u64,
    /// Cycles of the allocation count.
    alloc_cycles: u64,
    /// Added one-way delay on each slow node (a round trip gains twice this).
    slow_one_way_ms: u64,
    /// Added one-way delay on every node in the simulated-network scenario.
    net_one_way_ms: u64,
    /// Acquire+release cycles per lock in the simulated-network scenario.
    net_ops: u64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                cycle_ops: 2_000,
                cycle_cap_ms: 4_000,
                rounds: 4,
                tasks: vec![1, 16, 64],
                throughput_ms: 1_500,
                handoff_ms: 2_000,
                handoff_max: 20_000,
                handoff_hold_us: 1_000,
                fault_ops: 1_500,
                fault_cap_ms: 4_000,
                release_ops: 20,
                alloc_cycles: 200,
                slow_one_way_ms: 10,
                net_one_way_ms: 1,
                net_ops: 300,
            }
        } else {
            Plan {
                cycle_ops: 10_000,
                cycle_cap_ms: 15_000,
                rounds: 5,
                tasks: vec![1, 16, 64],
                throughput_ms: 5_000,
                handoff_ms: 5_000,
                handoff_max: 100_000,
                handoff_hold_us: 1_000,
                fault_ops: 6_000,
                fault_cap_ms: 15_000,
                release_ops: 60,
                alloc_cycles: 1_000,
                slow_one_way_ms: 10,
                net_one_way_ms: 1,
                net_ops: 1_000,
            }
        }
    }
}

/// Cycles run untimed before a measurement, so connections exist and caches are warm.
const WARMUP: u64 = 50;
/// The most background releases left outstanding in the acquire-only scenarios before the
/// loop waits for them (untimed).
const SETTLE_EVERY: u64 = 32;
/// The longest a wait for background releases may take.
const SETTLE_CAP: Duration = Duration::from_secs(5);
/// Hard cap on the cycles of any throughput step, whatever its duration.
const THROUGHPUT_MAX_OPS: u64 = 5_000_000;
/// The five-node cluster the targets refer to.
const TARGET_NODES: usize = 5;

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

/// Ratios of one row to a baseline row (row ÷ baseline).
#[derive(Debug, Clone, Copy, Serialize)]
struct Ratios {
    p50: f64,
    p99: f64,
    ops_per_s: f64,
}

/// One measured figure set.
#[derive(Debug, Clone, Serialize)]
struct Row {
    /// Unique name, e.g. `cycle/quorum-5`.
    id: String,
    /// Scenario, e.g. `acquire+release, 1 task`.
    scenario: String,
    /// Which lock: `single` or `quorum-N`, with a qualifier for fault scenarios.
    lock: String,
    /// What one sample is: `acquire+release`, `acquire`, `release` or `hand-off`.
    measured: String,
    samples: u64,
    errors: u64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    max_us: f64,
    mean_us: f64,
    /// Samples per second of wall time (all tasks together).
    ops_per_s: f64,
    /// Allocations per acquire+release cycle, where counted.
    allocs_per_cycle: Option<f64>,
    /// The single-node row this one is compared with.
    single_id: Option<String>,
    vs_single: Option<Ratios>,
    /// The healthy-cluster row this one is compared with (fault scenarios).
    healthy_id: Option<String>,
    vs_healthy: Option<Ratios>,
    /// `[latency_us, fraction]` points of the latency CDF.
    cdf: Vec<[f64; 2]>,
}

/// A target from the issue, evaluated on this run.
#[derive(Debug, Clone, Serialize)]
struct Target {
    name: String,
    limit: String,
    measured: Option<f64>,
    met: Option<bool>,
}

/// Facts about where the run happened.
#[derive(Debug, Clone, Serialize)]
struct Machine {
    nproc: usize,
    cpu_model: String,
    redis_version: String,
}

/// Everything `--json` writes.
#[derive(Debug, Serialize)]
struct Report {
    mode: String,
    quick: bool,
    machine: Machine,
    plan: Plan,
    ttl_ms: u64,
    node_timeout_ms: u64,
    rows: Vec<Row>,
    targets: Vec<Target>,
    notes: Vec<String>,
}

fn new_histogram() -> Histogram<u64> {
    // Nanoseconds from 1 ns to 10 min, 3 significant digits. The bounds are constants that
    // satisfy `new_with_bounds`' rules (low >= 1, high >= 2 * low, sigfig <= 5).
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("constant histogram bounds are valid")
}

fn record(hist: &mut Histogram<u64>, elapsed: Duration) {
    hist.saturating_record(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
}

fn us(nanos: u64) -> f64 {
    nanos as f64 / 1_000.0
}

impl Row {
    fn new(
        id: &str,
        scenario: &str,
        lock: &str,
        measured: &str,
        hist: Histogram<u64>,
        errors: u64,
        wall: Duration,
    ) -> Row {
        let samples = hist.len();
        let ops_per_s = if wall.is_zero() {
            0.0
        } else {
            samples as f64 / wall.as_secs_f64()
        };
        let q = |quantile: f64| {
            if samples == 0 {
                0.0
            } else {
                us(hist.value_at_quantile(quantile))
            }
        };
        Row {
            id: id.to_owned(),
            scenario: scenario.to_owned(),
            lock: lock.to_owned(),
            measured: measured.to_owned(),
            samples,
            errors,
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            max_us: if samples == 0 { 0.0 } else { us(hist.max()) },
            mean_us: if samples == 0 {
                0.0
            } else {
                hist.mean() / 1_000.0
            },
            ops_per_s,
            allocs_per_cycle: None,
            single_id: None,
            vs_single: None,
            healthy_id: None,
            vs_healthy: None,
            cdf: cdf_points(&hist),
        }
    }

    fn vs_single(mut self, id: &str) -> Row {
        self.single_id = Some(id.to_owned());
        self
    }

    fn vs_healthy(mut self, id: &str) -> Row {
        self.healthy_id = Some(id.to_owned());
        self
    }
}

/// Points of the empirical CDF, denser in the tail.
fn cdf_points(hist: &Histogram<u64>) -> Vec<[f64; 2]> {
    if hist.is_empty() {
        return Vec::new();
    }
    let mut quantiles: Vec<f64> = (0..=100).map(|i| f64::from(i) / 100.0).collect();
    quantiles.extend([0.991, 0.993, 0.995, 0.997, 0.999, 0.9995, 0.9999]);
    quantiles.sort_by(f64::total_cmp);
    let mut points: Vec<[f64; 2]> = quantiles
        .into_iter()
        .map(|quantile| [us(hist.value_at_quantile(quantile)), quantile])
        .collect();
    points.insert(0, [us(hist.min()), 0.0]);
    points
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

fn ratios(row: &Row, base: &Row) -> Ratios {
    Ratios {
        p50: ratio(row.p50_us, base.p50_us),
        p99: ratio(row.p99_us, base.p99_us),
        ops_per_s: ratio(row.ops_per_s, base.ops_per_s),
    }
}

fn fill_ratios(rows: &mut [Row]) {
    let snapshot: Vec<(String, Row)> = rows.iter().map(|r| (r.id.clone(), r.clone())).collect();
    let find = |id: &Option<String>| {
        id.as_ref()
            .and_then(|id| snapshot.iter().find(|(rid, _)| rid == id).map(|(_, r)| r))
    };
    for row in rows.iter_mut() {
        if let Some(base) = find(&row.single_id) {
            row.vs_single = Some(ratios(row, base));
        }
        if let Some(base) = find(&row.healthy_id) {
            row.vs_healthy = Some(ratios(row, base));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Measurement loops
// ---------------------------------------------------------------------------------------------

/// Untimed acquire+release cycles: connections made, scripts loaded, caches warm.
async fn warm_up(lock: &Lock, key: &str) {
    for _ in 0..WARMUP {
        if let Ok(guard) = lock.try_acquire(key).await {
            guard.release().await;
        }
    }
}

/// Sequential acquire+release cycles, each on a fresh key (so that one lost release cannot fail
/// the cycles after it), timed as a whole.
async fn cycles(
    lock: &Lock,
    key_base: &str,
    first: u64,
    ops: u64,
    cap: Duration,
    hist: &mut Histogram<u64>,
) -> (u64, Duration) {
    let mut errors = 0;
    let mut key = String::new();
    let started = Instant::now();
    for i in 0..ops {
        if started.elapsed() >= cap {
            break;
        }
        key.clear();
        let _ = write!(key, "{key_base}:{}", first + i);
        let t = Instant::now();
        match lock.try_acquire(&key).await {
            Ok(guard) => {
                let report = guard.release().await;
                if report.held >= lock.quorum_size() {
                    record(hist, t.elapsed());
                } else {
                    errors += 1;
                }
            }
            Err(_) => errors += 1,
        }
    }
    (errors, started.elapsed())
}

/// Allocations per acquire+release cycle, counted over a quiet sequential loop.
async fn allocs_per_cycle(lock: &Lock, key: &str, cycles: u64) -> f64 {
    let before = allocations();
    let mut done = 0u64;
    for _ in 0..cycles {
        if let Ok(guard) = lock.try_acquire(key).await {
            guard.release().await;
            done += 1;
        }
    }
    let after = allocations();
    if done == 0 {
        f64::NAN
    } else {
        after.saturating_sub(before) as f64 / done as f64
    }
}

/// Waits (untimed, bounded) for background releases.
async fn settle(lock: &Lock) {
    let _ = tokio::time::timeout(SETTLE_CAP, lock.settle()).await;
}

/// Acquisitions of fresh keys, timed alone; each guard is dropped and so released in the
/// background, and the loop waits for those releases outside the timed section every
/// [`SETTLE_EVERY`] acquisitions.
async fn acquires(
    lock: &Lock,
    key_base: &str,
    first: u64,
    ops: u64,
    cap: Duration,
    hist: &mut Histogram<u64>,
) -> (u64, Duration) {
    let mut errors = 0;
    let mut busy = Duration::ZERO;
    let started = Instant::now();
    for i in 0..ops {
        if started.elapsed() >= cap {
            break;
        }
        let key = format!("{key_base}:{}", first + i);
        let t = Instant::now();
        let result = lock.try_acquire(&key).await;
        let elapsed = t.elapsed();
        busy += elapsed;
        match result {
            Ok(guard) => {
                record(hist, elapsed);
                drop(guard);
            }
            Err(_) => errors += 1,
        }
        if i % SETTLE_EVERY == SETTLE_EVERY - 1 {
            settle(lock).await;
        }
    }
    settle(lock).await;
    (errors, busy)
}

/// Releases timed alone: acquire untimed, time `release()`.
async fn releases(
    lock: &Lock,
    key_base: &str,
    ops: u64,
    cap: Duration,
    hist: &mut Histogram<u64>,
) -> (u64, Duration) {
    let mut errors = 0;
    let mut busy = Duration::ZERO;
    let started = Instant::now();
    for i in 0..ops {
        if started.elapsed() >= cap {
            break;
        }
        match lock.try_acquire(format!("{key_base}:{i}")).await {
            Ok(guard) => {
                let t = Instant::now();
                guard.release().await;
                let elapsed = t.elapsed();
                busy += elapsed;
                record(hist, elapsed);
            }
            Err(_) => errors += 1,
        }
    }
    (errors, busy)
}

/// `tasks` tasks, each cycling acquire+release on its own key for `duration`.
async fn throughput(
    lock: &Lock,
    tag: &str,
    tasks: usize,
    duration: Duration,
) -> (Histogram<u64>, u64, Duration) {
    let ops_cap = THROUGHPUT_MAX_OPS / tasks.max(1) as u64;
    let started = Instant::now();
    let deadline = started + duration;
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let lock = lock.clone();
            let key_base = format!("{tag}:{task}");
            tokio::spawn(async move {
                let mut hist = new_histogram();
                let mut errors = 0u64;
                let mut key = String::new();
                for i in 0..ops_cap {
                    if Instant::now() >= deadline {
                        break;
                    }
                    key.clear();
                    let _ = write!(key, "{key_base}:{i}");
                    let t = Instant::now();
                    match lock.try_acquire(&key).await {
                        Ok(guard) => {
                            guard.release().await;
                            record(&mut hist, t.elapsed());
                        }
                        Err(_) => errors += 1,
                    }
                }
                (hist, errors)
            })
        })
        .collect();
    let mut hist = new_histogram();
    let mut errors = 0;
    for handle in handles {
        match handle.await {
            Ok((h, e)) => {
                let _ = hist.add(&h);
                errors += e;
            }
            Err(_) => errors += 1,
        }
    }
    (hist, errors, started.elapsed())
}

/// `contenders` tasks wanting one key. A holder keeps it for `hold`, notes the instant it starts
/// to release, releases, and rests for `hold` before competing again; the sample is the time
/// from that instant to the next holder's successful acquire.
async fn handoff(
    lock: &Lock,
    key: &str,
    contenders: usize,
    duration: Duration,
    max: u64,
    hold: Duration,
) -> (Histogram<u64>, u64, Duration) {
    let started = Instant::now();
    let deadline = started + duration;
    let last_release: Arc<Mutex<Option<Instant>>> = Arc::default();
    let count = Arc::new(AtomicU64::new(0));
    // Waiters poll: retry every 0.2–1 ms until the step's deadline.
    let policy = RetryPolicy::new()
        .attempts(u32::MAX)
        .delay(Duration::from_micros(200))
        .jitter(Duration::from_micros(800))
        .max_wait(duration + Duration::from_secs(1));
    let handles: Vec<_> = (0..contenders)
        .map(|_| {
            let (lock, key, policy) = (lock.clone(), key.to_owned(), policy.clone());
            let (last_release, count) = (Arc::clone(&last_release), Arc::clone(&count));
            tokio::spawn(async move {
                let mut hist = new_histogram();
                let mut errors = 0u64;
                while Instant::now() < deadline && count.load(Ordering::Relaxed) < max {
                    let cancel = tokio::time::sleep_until(deadline.into());
                    match lock.acquire_with(&key, &policy, cancel).await {
                        Ok(guard) => {
                            let now = Instant::now();
                            let previous = last_release
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .take();
                            if let Some(previous) = previous {
                                record(&mut hist, now.saturating_duration_since(previous));
                                count.fetch_add(1, Ordering::Relaxed);
                            }
                            tokio::time::sleep(hold).await;
                            *last_release.lock().unwrap_or_else(PoisonError::into_inner) =
                                Some(Instant::now());
                            guard.release().await;
                            tokio::time::sleep(hold).await;
                        }
                        Err(Error::Cancelled { .. }) => break,
                        Err(_) => errors += 1,
                    }
                }
                (hist, errors)
            })
        })
        .collect();
    let mut hist = new_histogram();
    let mut errors = 0;
    for handle in handles {
        match handle.await {
            Ok((h, e)) => {
                let _ = hist.add(&h);
                errors += e;
            }
            Err(_) => errors += 1,
        }
    }
    (hist, errors, started.elapsed())
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// A lock under test with its display name and row-id stem.
struct Subject {
    name: String,
    lock: Lock,
}

/// Deletes the key only while it holds our token: the lock's release script.
static RAW_RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0",
    )
});

/// The floor under the quorum's cost on this machine: the same commands the lock sends, straight
/// over redis-rs connections with no lock logic (no token, validity, outcome bookkeeping or
/// timeouts). `SET NX PX` on every node until a majority said yes, then the compare-and-delete
/// script on every node, waiting for all.
struct Raw {
    name: String,
    connections: Vec<MultiplexedConnection>,
    quorum: usize,
}

impl Raw {
    async fn connect(name: String, urls: &[String]) -> Result<Raw, String> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(1)));
        let mut connections = Vec::new();
        for url in urls {
            let client =
                redis::Client::open(url.as_str()).map_err(|e| format!("{name}: bad URL: {e}"))?;
            let connection = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(|e| format!("{name}: connecting: {e}"))?;
            connections.push(connection);
        }
        Ok(Raw {
            name,
            quorum: urls.len() / 2 + 1,
            connections,
        })
    }

    /// One acquire+release; true when a majority was set and every node deleted.
    async fn cycle(&self, key: &str, token: &str) -> bool {
        let mut sets: FuturesUnordered<_> = self
            .connections
            .iter()
            .map(|connection| {
                let mut connection = connection.clone();
                async move {
                    let reply: redis::RedisResult<Option<String>> = redis::cmd("SET")
                        .arg(key)
                        .arg(token)
                        .arg("NX")
                        .arg("PX")
                        .arg(10_000)
                        .query_async(&mut connection)
                        .await;
                    matches!(reply, Ok(Some(_)))
                }
            })
            .collect();
        let mut yes = 0;
        while let Some(set) = sets.next().await {
            yes += usize::from(set);
            if yes >= self.quorum {
                break;
            }
        }
        drop(sets);
        let deleted = futures::future::join_all(self.connections.iter().map(|connection| {
            let mut connection = connection.clone();
            async move {
                let reply: redis::RedisResult<i64> = RAW_RELEASE
                    .key(key)
                    .arg(token)
                    .invoke_async(&mut connection)
                    .await;
                matches!(reply, Ok(1))
            }
        }))
        .await;
        yes >= self.quorum && deleted.iter().filter(|d| **d).count() >= self.quorum
    }
}

/// Like [`cycles`], for the raw redis-rs floor.
async fn raw_cycles(
    raw: &Raw,
    key_base: &str,
    first: u64,
    ops: u64,
    cap: Duration,
    hist: &mut Histogram<u64>,
) -> (u64, Duration) {
    let mut errors = 0;
    let mut key = String::new();
    let started = Instant::now();
    for i in 0..ops {
        if started.elapsed() >= cap {
            break;
        }
        key.clear();
        let _ = write!(key, "{key_base}:{}", first + i);
        let t = Instant::now();
        if raw.cycle(&key, &key).await {
            record(hist, t.elapsed());
        } else {
            errors += 1;
        }
    }
    (errors, started.elapsed())
}

/// Progress on stderr: one step per measured phase.
struct Progress {
    bar: ProgressBar,
}

impl Progress {
    fn new(steps: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Progress { bar }
    }

    fn step(&self, message: String) {
        self.bar.set_message(message);
    }

    fn done(&self) {
        self.bar.inc(1);
    }
}

/// Runs `quorumlock bench`.
pub async fn run(args: BenchArgs) -> Result<(), String> {
    let plan = Plan::new(args.quick);
    let ttl = Duration::from_millis(args.ttl_ms);
    let prefix = format!(
        "quorumlock-bench:{}:{:08x}:",
        std::process::id(),
        rand::random::<u32>()
    );
    let options = LockOptions::new()
        .ttl(ttl)
        .retry(RetryPolicy::once())
        .key_prefix(prefix.into_bytes());
    let mut notes = Vec::new();

    // Where the nodes are. `_direct` and `proxied` keep the local servers alive until the end.
    let local = args.nodes.is_empty();
    let (_direct, proxied, urls) = if local {
        eprintln!("starting 7 + 5 local redis-server processes on 127.0.0.1 …");
        let direct = TestCluster::start(ClusterOptions::default().nodes(7))
            .await
            .map_err(|e| format!("starting local Redis masters: {e}"))?;
        let proxied =
            TestCluster::start(ClusterOptions::default().nodes(TARGET_NODES).proxies(true))
                .await
                .map_err(|e| format!("starting local Redis masters behind fault proxies: {e}"))?;
        let urls = direct.urls();
        (Some(direct), Some(proxied), urls)
    } else {
        notes.push(
            "--nodes given: the slow-minority and hung-node scenarios need local fault proxies \
             and were skipped"
                .to_owned(),
        );
        (None, None, args.nodes.clone())
    };
    let Some(first_url) = urls.first().cloned() else {
        return Err("no node URLs".to_owned());
    };
    let version = redis_version(&first_url).await;

    let single =
        Lock::single(first_url, options.clone()).map_err(|e| format!("single-node lock: {e}"))?;
    let mut subjects = vec![Subject {
        name: "single".to_owned(),
        lock: single.clone(),
    }];
    let sizes: Vec<usize> = if local {
        vec![3, 5, 7]
    } else {
        vec![urls.len()]
    };
    for &n in &sizes {
        let lock = Lock::quorum(urls.iter().take(n).cloned(), options.clone())
            .map_err(|e| format!("quorum lock over {n} nodes: {e}"))?;
        subjects.push(Subject {
            name: format!("quorum-{n}"),
            lock,
        });
    }
    let main_n = if local { TARGET_NODES } else { urls.len() };
    let main_name = format!("quorum-{main_n}");
    let quorum_main = subjects
        .iter()
        .find(|s| s.name == main_name)
        .map(|s| s.lock.clone())
        .ok_or_else(|| "no main quorum lock".to_owned())?;

    // Fail early, with the reason, when the nodes cannot be locked on at all.
    for subject in &subjects {
        let guard = subject
            .lock
            .try_acquire("preflight")
            .await
            .map_err(|e| format!("{}: a first acquire failed: {e}", subject.name))?;
        guard.release().await;
    }

    let machine = Machine {
        nproc: std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model: cpu_model(),
        redis_version: version,
    };

    let steps =
        subjects.len() as u64 * 2 + plan.tasks.len() as u64 * 2 + 2 + if local { 7 } else { 0 };
    let progress = Progress::new(steps);
    let mut rows = Vec::new();

    // 1. Sequential acquire+release, interleaved in rounds.
    let mut hists: Vec<Histogram<u64>> = subjects.iter().map(|_| new_histogram()).collect();
    let mut errs = vec![0u64; subjects.len()];
    let mut walls = vec![Duration::ZERO; subjects.len()];
    for subject in &subjects {
        warm_up(&subject.lock, "cycle").await;
    }
    let raws = [
        Raw::connect("raw-1".to_owned(), urls.get(..1).unwrap_or(&urls)).await?,
        Raw::connect(format!("raw-{main_n}"), urls.get(..main_n).unwrap_or(&urls)).await?,
    ];
    let mut raw_hists: Vec<Histogram<u64>> = raws.iter().map(|_| new_histogram()).collect();
    let mut raw_errs = [0u64; 2];
    let mut raw_walls = [Duration::ZERO; 2];
    for raw in &raws {
        for i in 0..WARMUP {
            let key = format!("raw-warm:{i}");
            raw.cycle(&key, &key).await;
        }
    }
    let per_round = (plan.cycle_ops / plan.rounds).max(1);
    let cap_per_round = Duration::from_millis(plan.cycle_cap_ms / plan.rounds);
    for round in 0..plan.rounds {
        for (i, subject) in subjects.iter().enumerate() {
            progress.step(format!(
                "acquire+release, 1 task: {} (round {}/{})",
                subject.name,
                round + 1,
                plan.rounds
            ));
            let (e, wall) = cycles(
                &subject.lock,
                "cycle",
                round * per_round,
                per_round,
                cap_per_round,
                &mut hists[i],
            )
            .await;
            errs[i] += e;
            walls[i] += wall;
        }
        for (i, raw) in raws.iter().enumerate() {
            progress.step(format!(
                "acquire+release, 1 task: {} (round {}/{})",
                raw.name,
                round + 1,
                plan.rounds
            ));
            let (e, wall) = raw_cycles(
                raw,
                "raw",
                round * per_round,
                per_round,
                cap_per_round,
                &mut raw_hists[i],
            )
            .await;
            raw_errs[i] += e;
            raw_walls[i] += wall;
        }
    }
    for (i, (subject, hist)) in subjects.iter().zip(hists).enumerate() {
        rows.push(
            Row::new(
                &format!("cycle/{}", subject.name),
                "acquire+release, 1 task",
                &subject.name,
                "acquire+release",
                hist,
                errs[i],
                walls[i],
            )
            .vs_single("cycle/single"),
        );
        progress.done();
    }
    for (i, (raw, hist)) in raws.iter().zip(raw_hists).enumerate() {
        rows.push(
            Row::new(
                &format!("cycle/{}", raw.name),
                "acquire+release, 1 task",
                &raw.name,
                "acquire+release",
                hist,
                raw_errs[i],
                raw_walls[i],
            )
            .vs_single("cycle/raw-1"),
        );
    }

    // 2. Allocations per cycle.
    for subject in &subjects {
        progress.step(format!("allocations per cycle: {}", subject.name));
        let allocs = allocs_per_cycle(&subject.lock, "alloc", plan.alloc_cycles).await;
        if let Some(row) = rows
            .iter_mut()
            .find(|r| r.id == format!("cycle/{}", subject.name))
        {
            row.allocs_per_cycle = Some(allocs);
        }
        progress.done();
    }

    // 3. Throughput with 1, 16, 64 tasks on distinct keys, and 4. contended hand-off: the
    // single-node and quorum locks alternate in rounds, like the sequential cycles.
    let pair = [("single", &single), (main_name.as_str(), &quorum_main)];
    for (_, lock) in pair {
        warm_up(lock, "tp-warm").await;
    }
    let slice = Duration::from_millis(plan.throughput_ms / plan.rounds);
    for &tasks in &plan.tasks {
        let mut acc: Vec<(Histogram<u64>, u64, Duration)> = pair
            .iter()
            .map(|_| (new_histogram(), 0, Duration::ZERO))
            .collect();
        for round in 0..plan.rounds {
            for ((name, lock), acc) in pair.iter().zip(acc.iter_mut()) {
                progress.step(format!(
                    "throughput, {}: {name} (round {}/{})",
                    plural_tasks(tasks),
                    round + 1,
                    plan.rounds
                ));
                let tag = format!("tp{tasks}:{round}");
                let (hist, errors, wall) = throughput(lock, &tag, tasks, slice).await;
                let _ = acc.0.add(&hist);
                acc.1 += errors;
                acc.2 += wall;
            }
        }
        for ((name, _), (hist, errors, wall)) in pair.iter().zip(acc) {
            rows.push(
                Row::new(
                    &format!("tp{tasks}/{name}"),
                    &format!("throughput, {}", plural_tasks(tasks)),
                    name,
                    "acquire+release",
                    hist,
                    errors,
                    wall,
                )
                .vs_single(&format!("tp{tasks}/single")),
            );
            progress.done();
        }
    }

    let contenders = usize::from(args.contenders);
    let slice = Duration::from_millis(plan.handoff_ms / plan.rounds);
    let mut acc: Vec<(Histogram<u64>, u64, Duration)> = pair
        .iter()
        .map(|_| (new_histogram(), 0, Duration::ZERO))
        .collect();
    for round in 0..plan.rounds {
        for ((name, lock), acc) in pair.iter().zip(acc.iter_mut()) {
            progress.step(format!(
                "hand-off, {contenders} contenders: {name} (round {}/{})",
                round + 1,
                plan.rounds
            ));
            let (hist, errors, wall) = handoff(
                lock,
                &format!("handoff:{round}"),
                contenders,
                slice,
                plan.handoff_max / plan.rounds,
                Duration::from_micros(plan.handoff_hold_us),
            )
            .await;
            let _ = acc.0.add(&hist);
            acc.1 += errors;
            acc.2 += wall;
        }
    }
    for ((name, _), (hist, errors, wall)) in pair.iter().zip(acc) {
        rows.push(
            Row::new(
                &format!("handoff/{name}"),
                &format!("hand-off, {contenders} contenders"),
                name,
                "hand-off",
                hist,
                errors,
                wall,
            )
            .vs_single("handoff/single"),
        );
        progress.done();
    }

    // 5. Faults: 2 of 5 slow, 1 of 5 hung, against the same proxied cluster healthy.
    if let Some(cluster) = &proxied {
        let faults = fault_scenarios(cluster, &single, &options, &plan, &progress).await?;
        rows.extend(faults);
    }
    progress.bar.finish_and_clear();

    fill_ratios(&mut rows);
    let targets = evaluate_targets(&rows, main_n, local);
    let node_timeout_ms = u64::try_from(quorum_main.node_timeout().as_millis()).unwrap_or(u64::MAX);
    let report = Report {
        mode: if local {
            "local".to_owned()
        } else {
            "nodes".to_owned()
        },
        quick: args.quick,
        machine,
        plan,
        ttl_ms: args.ttl_ms,
        node_timeout_ms,
        rows,
        targets,
        notes,
    };
    print!("{}", render(&report));

    if let Some(path) = &args.json {
        let json =
            serde_json::to_string_pretty(&report).map_err(|e| format!("encoding JSON: {e}"))?;
        std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("raw results written to {}", path.display());
    }
    if let Some(dir) = &args.plots {
        let written = write_plots(dir, &report)?;
        println!("plots written to {}: {}", dir.display(), written.join(", "));
    }
    // Dropping the clusters kills and reaps every server and proxy started above.
    drop(proxied);
    Ok(())
}

/// The healthy proxied cluster, 2 of 5 nodes slow, 1 of 5 hung, interleaved in rounds.
async fn fault_scenarios(
    cluster: &TestCluster,
    single: &Lock,
    options: &LockOptions,
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<Row>, String> {
    let lock = Lock::quorum(cluster.urls(), options.clone())
        .map_err(|e| format!("proxied quorum lock: {e}"))?;
    let proxy = |i: usize| {
        cluster
            .proxy(i)
            .ok_or_else(|| format!("the local cluster has no proxy for node {i}"))
    };
    let slow = [proxy(3)?, proxy(4)?];
    let hung = proxy(4)?;
    let latency = Duration::from_millis(plan.slow_one_way_ms);
    warm_up(&lock, "fault-warm").await;
    warm_up(single, "fault-warm").await;

    let names = ["healthy", "slow", "hung", "single"];
    let mut acq: Vec<Histogram<u64>> = names.iter().map(|_| new_histogram()).collect();
    let mut errs = [0u64; 4];
    let mut busy = [Duration::ZERO; 4];
    let per_round = (plan.fault_ops / plan.rounds).max(1);
    let cap = Duration::from_millis(plan.fault_cap_ms / plan.rounds);
    for round in 0..plan.rounds {
        let first = round * per_round;
        let tag = |what: &str| format!("{what} (round {}/{})", round + 1, plan.rounds);
        progress.step(tag("acquire: single-node"));
        let (e, b) = acquires(single, "f-single", first, per_round, cap, &mut acq[3]).await;
        errs[3] += e;
        busy[3] += b;

        progress.step(tag("acquire: 5 healthy nodes behind proxies"));
        let (e, b) = acquires(&lock, "f-healthy", first, per_round, cap, &mut acq[0]).await;
        errs[0] += e;
        busy[0] += b;

        progress.step(tag("acquire: 2 of 5 nodes slow"));
        for p in slow {
            p.set_latency(latency);
        }
        let (e, b) = acquires(&lock, "f-slow", first, per_round, cap, &mut acq[1]).await;
        errs[1] += e;
        busy[1] += b;
        for p in slow {
            p.set_latency(Duration::ZERO);
        }
        // Chunks queued while slow keep their delay: let them drain.
        tokio::time::sleep(latency * 3).await;

        progress.step(tag("acquire: 1 of 5 nodes hung"));
        hung.blackhole();
        let (e, b) = acquires(&lock, "f-hung", first, per_round, cap, &mut acq[2]).await;
        errs[2] += e;
        busy[2] += b;
        heal(hung).await?;
        warm_up(&lock, "fault-warm").await;
    }
    let mut rows = Vec::new();
    let labels = [
        ("healthy", "5 healthy nodes (proxied)"),
        ("slow", "2 of 5 slow (proxied)"),
        ("hung", "1 of 5 hung (proxied)"),
    ];
    let single_row = Row::new(
        "fault-acq/single",
        "acquire only",
        "single",
        "acquire",
        acq.pop().unwrap_or_else(new_histogram),
        errs[3],
        busy[3],
    );
    rows.push(single_row.vs_single("fault-acq/single"));
    for (i, (hist, (key, label))) in acq.into_iter().zip(labels).enumerate() {
        rows.push(
            Row::new(
                &format!("fault-acq/{key}"),
                "acquire only",
                &format!("quorum-5 {label}"),
                "acquire",
                hist,
                errs[i],
                busy[i],
            )
            .vs_single("fault-acq/single")
            .vs_healthy("fault-acq/healthy"),
        );
    }
    for _ in 0..3 {
        progress.done();
    }

    // Releases, timed alone: a release waits for every node, up to its timeout.
    let cap = Duration::from_millis(plan.fault_cap_ms);
    let mut rel = Vec::new();
    for key in ["single", "healthy", "slow", "hung"] {
        progress.step(format!("release: {key}"));
        let subject = if key == "single" { single } else { &lock };
        match key {
            "slow" => slow.iter().for_each(|p| p.set_latency(latency)),
            "hung" => hung.blackhole(),
            _ => {}
        }
        let mut hist = new_histogram();
        let (e, b) = releases(
            subject,
            &format!("r-{key}"),
            plan.release_ops,
            cap,
            &mut hist,
        )
        .await;
        match key {
            "slow" => {
                slow.iter().for_each(|p| p.set_latency(Duration::ZERO));
                tokio::time::sleep(latency * 3).await;
            }
            "hung" => heal(hung).await?,
            _ => {}
        }
        rel.push((key, hist, e, b));
    }
    for (key, hist, e, b) in rel {
        let lock_name = match key {
            "single" => "single".to_owned(),
            "healthy" => "quorum-5 5 healthy nodes (proxied)".to_owned(),
            "slow" => "quorum-5 2 of 5 slow (proxied)".to_owned(),
            _ => "quorum-5 1 of 5 hung (proxied)".to_owned(),
        };
        let mut row = Row::new(
            &format!("fault-rel/{key}"),
            "release only",
            &lock_name,
            "release",
            hist,
            e,
            b,
        )
        .vs_single("fault-rel/single");
        if key != "single" {
            row = row.vs_healthy("fault-rel/healthy");
        }
        rows.push(row);
    }
    for _ in 0..3 {
        progress.done();
    }
    settle(&lock).await;
    rows.extend(simulated_network(cluster, &lock, options, plan, progress).await?);
    Ok(rows)
}

/// Acquire+release with every node behind a proxy adding `net_one_way_ms` each way: a crude
/// stand-in for servers on other hosts, where the round trip rather than the CPU dominates.
/// The single-node lock uses node 0 through its proxy, the quorum all five; interleaved.
async fn simulated_network(
    cluster: &TestCluster,
    quorum: &Lock,
    options: &LockOptions,
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<Row>, String> {
    let urls = cluster.urls();
    let Some(first) = urls.first() else {
        return Ok(Vec::new());
    };
    let single = Lock::single(first.clone(), options.clone())
        .map_err(|e| format!("single-node lock through a proxy: {e}"))?;
    let latency = Duration::from_millis(plan.net_one_way_ms);
    for i in 0..urls.len() {
        if let Some(proxy) = cluster.proxy(i) {
            proxy.set_latency(latency);
        }
    }
    let pair = [("single", &single), ("quorum-5", quorum)];
    let mut acc: Vec<(Histogram<u64>, u64, Duration)> = pair
        .iter()
        .map(|_| (new_histogram(), 0, Duration::ZERO))
        .collect();
    for (_, lock) in pair {
        for i in 0..5 {
            if let Ok(guard) = lock.try_acquire(format!("net-warm:{i}")).await {
                guard.release().await;
            }
        }
    }
    let per_round = (plan.net_ops / plan.rounds).max(1);
    let cap = Duration::from_millis(plan.fault_cap_ms / plan.rounds);
    for round in 0..plan.rounds {
        for ((name, lock), acc) in pair.iter().zip(acc.iter_mut()) {
            progress.step(format!(
                "acquire+release, nodes +{} ms each way: {name} (round {}/{})",
                plan.net_one_way_ms,
                round + 1,
                plan.rounds
            ));
            let (e, wall) =
                cycles(lock, "net", round * per_round, per_round, cap, &mut acc.0).await;
            acc.1 += e;
            acc.2 += wall;
        }
    }
    for i in 0..urls.len() {
        if let Some(proxy) = cluster.proxy(i) {
            proxy.set_latency(Duration::ZERO);
        }
    }
    let scenario = format!(
        "acquire+release, nodes +{} ms each way",
        plan.net_one_way_ms
    );
    let rows = pair
        .iter()
        .zip(acc)
        .map(|((name, _), (hist, errors, wall))| {
            Row::new(
                &format!("net/{name}"),
                &scenario,
                &format!("{name} (proxied)"),
                "acquire+release",
                hist,
                errors,
                wall,
            )
            .vs_single("net/single")
        })
        .collect();
    progress.done();
    Ok(rows)
}

/// Lifts a black hole and cuts the connections whose requests it swallowed, so the client
/// reconnects instead of waiting on replies that will never come.
async fn heal(proxy: &quorumlock::testing::FaultProxy) -> Result<(), String> {
    proxy
        .heal()
        .await
        .map_err(|e| format!("healing a fault proxy: {e}"))?;
    proxy.cut().await;
    Ok(())
}

fn plural_tasks(tasks: usize) -> String {
    if tasks == 1 {
        "1 task".to_owned()
    } else {
        format!("{tasks} tasks")
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .and_then(|rest| rest.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `redis_version` from `INFO server` on the first node (bounded by short timeouts).
async fn redis_version(url: &str) -> String {
    let ask = async {
        let client = redis::Client::open(url).ok()?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(1)));
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .ok()?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut connection)
            .await
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .map(|v| v.trim().to_owned())
    };
    tokio::time::timeout(Duration::from_secs(3), ask)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| "unknown".to_owned())
}

// ---------------------------------------------------------------------------------------------
// Targets, table
// ---------------------------------------------------------------------------------------------

fn evaluate_targets(rows: &[Row], n: usize, local: bool) -> Vec<Target> {
    let get = |id: &str| rows.iter().find(|r| r.id == id);
    let quorum = format!("quorum-{n}");
    let mut targets = Vec::new();
    let mut push = |name: String, limit: &str, measured: Option<f64>, ok: fn(f64) -> bool| {
        let measured = measured.filter(|v| v.is_finite());
        targets.push(Target {
            name,
            limit: limit.to_owned(),
            measured,
            met: measured.map(ok),
        });
    };
    let cycle = get(&format!("cycle/{quorum}")).and_then(|r| r.vs_single);
    push(
        format!("{quorum} acquire+release p50 / single p50"),
        "<= 1.3",
        cycle.map(|r| r.p50),
        |v| v <= 1.3,
    );
    push(
        format!("{quorum} acquire+release p99 / single p99"),
        "<= 1.5",
        cycle.map(|r| r.p99),
        |v| v <= 1.5,
    );
    push(
        format!("{quorum} throughput with 64 tasks / single"),
        ">= 0.4",
        get(&format!("tp64/{quorum}"))
            .and_then(|r| r.vs_single)
            .map(|r| r.ops_per_s),
        |v| v >= 0.4,
    );
    if local {
        push(
            "2 of 5 slow (+20 ms): acquire p50 / healthy p50".to_owned(),
            "<= 1.5",
            get("fault-acq/slow")
                .and_then(|r| r.vs_healthy)
                .map(|r| r.p50),
            |v| v <= 1.5,
        );
        push(
            "1 of 5 hung: acquire p99 / healthy p99".to_owned(),
            "<= 2.0",
            get("fault-acq/hung")
                .and_then(|r| r.vs_healthy)
                .map(|r| r.p99),
            |v| v <= 2.0,
        );
    }
    targets
}

fn fmt_us(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1}ms", v / 1_000.0)
    } else if v >= 1_000.0 {
        format!("{:.2}ms", v / 1_000.0)
    } else {
        format!("{v:.0}µs")
    }
}

fn fmt_ratio(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.2}×"),
        _ => "-".to_owned(),
    }
}

fn render(report: &Report) -> String {
    let mut out = String::new();
    let m = &report.machine;
    let _ = writeln!(
        out,
        "\nquorumlock bench ({}{}) — {} CPUs ({}), redis {}; ttl {} ms, node timeout {} ms\n",
        report.mode,
        if report.quick { ", quick" } else { "" },
        m.nproc,
        m.cpu_model,
        m.redis_version,
        report.ttl_ms,
        report.node_timeout_ms
    );
    let header = [
        "scenario", "lock", "n", "err", "p50", "p90", "p99", "max", "ops/s", "allocs", "p50×1",
        "p99×1", "ops×1", "p50×H", "p99×H",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for r in &report.rows {
        table.push(vec![
            r.scenario.clone(),
            r.lock.clone(),
            r.samples.to_string(),
            r.errors.to_string(),
            fmt_us(r.p50_us),
            fmt_us(r.p90_us),
            fmt_us(r.p99_us),
            fmt_us(r.max_us),
            format!("{:.0}", r.ops_per_s),
            r.allocs_per_cycle
                .map_or_else(|| "-".to_owned(), |a| format!("{a:.0}")),
            fmt_ratio(r.vs_single.map(|x| x.p50)),
            fmt_ratio(r.vs_single.map(|x| x.p99)),
            fmt_ratio(r.vs_single.map(|x| x.ops_per_s)),
            fmt_ratio(r.vs_healthy.map(|x| x.p50)),
            fmt_ratio(r.vs_healthy.map(|x| x.p99)),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            table
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, row) in table.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let pad = widths[c].saturating_sub(cell.chars().count());
                if c < 2 {
                    format!("{cell}{}", " ".repeat(pad))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{}", "-".repeat(total));
        }
    }
    let _ = writeln!(
        out,
        "\n×1 = ratio to the single-node lock in the same scenario (ops: higher is better);\n\
         ×H = ratio to the same 5 proxied nodes, all healthy. \"allocs\" = allocations per\n\
         acquire+release cycle (whole process). Throughput rows: latency of one cycle under load;\n\
         acquire/release-only rows: ops/s counts time inside the timed call only.\n\
         raw-N = the lock's commands sent over redis-rs alone, no lock logic (the floor on this\n\
         machine); its ×1 is relative to raw-1.\n"
    );
    let _ = writeln!(
        out,
        "targets (stated for 5 masters; ratios within this run):"
    );
    for t in &report.targets {
        let verdict = match t.met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        let measured = t
            .measured
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
        let _ = writeln!(
            out,
            "  {:<48} {:>6}  (target {})  {verdict}",
            t.name, measured, t.limit
        );
    }
    let floor = report
        .rows
        .iter()
        .find(|r| r.id.starts_with("cycle/raw-") && r.id != "cycle/raw-1")
        .and_then(|r| r.vs_single.map(|v| (r.lock.clone(), v)));
    let net = report.rows.iter().find(|r| r.id == "net/quorum-5");
    if let Some(v) = net.and_then(|r| r.vs_single) {
        let _ = writeln!(
            out,
            "  (every node behind a proxy adding {} ms each way: quorum-5 / single p50 {:.2}, \
             p99 {:.2})",
            report.plan.net_one_way_ms, v.p50, v.p99
        );
    }
    if let Some((name, v)) = floor {
        let _ = writeln!(
            out,
            "  (floor: {name} / raw-1 over redis-rs alone: p50 {:.2}, p99 {:.2})",
            v.p50, v.p99
        );
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Plots
// ---------------------------------------------------------------------------------------------

fn draw_err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> String + '_ {
    move |e| format!("drawing {}: {e}", path.display())
}

fn write_plots(dir: &Path, report: &Report) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let groups: [(&str, &str, &[&str]); 7] = [
        ("cdf-cycle.svg", "acquire+release, 1 task", &["cycle/"]),
        (
            "cdf-throughput-16.svg",
            "acquire+release, 16 tasks",
            &["tp16/"],
        ),
        (
            "cdf-throughput-64.svg",
            "acquire+release, 64 tasks",
            &["tp64/"],
        ),
        (
            "cdf-handoff.svg",
            "hand-off: release → next holder's acquire",
            &["handoff/"],
        ),
        (
            "cdf-faults-acquire.svg",
            "acquire, 5 proxied nodes: healthy, slow, hung",
            &["fault-acq/"],
        ),
        (
            "cdf-faults-release.svg",
            "release, 5 proxied nodes: healthy, slow, hung",
            &["fault-rel/"],
        ),
        (
            "cdf-network.svg",
            "acquire+release, every node behind a proxy adding 1 ms each way",
            &["net/"],
        ),
    ];
    for (file, title, prefixes) in groups {
        let rows: Vec<&Row> = report
            .rows
            .iter()
            .filter(|r| prefixes.iter().any(|p| r.id.starts_with(p)) && r.samples > 0)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let path = dir.join(file);
        plot_cdf(&path, title, &rows)?;
        written.push(file.to_owned());
    }
    let path = dir.join("throughput.svg");
    if plot_throughput(&path, report)? {
        written.push("throughput.svg".to_owned());
    }
    Ok(written)
}

/// Distinct, print-friendly series colours (ColorBrewer Set1).
fn color(index: usize) -> RGBAColor {
    const SET1: [(u8, u8, u8); 6] = [
        (228, 26, 28),
        (55, 126, 184),
        (77, 175, 74),
        (152, 78, 163),
        (255, 127, 0),
        (166, 86, 40),
    ];
    let (r, g, b) = SET1[index % SET1.len()];
    RGBColor(r, g, b).to_rgba()
}

fn plot_cdf(path: &Path, title: &str, rows: &[&Row]) -> Result<(), String> {
    let err = draw_err(path);
    let root = SVGBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let lo = rows
        .iter()
        .filter_map(|r| r.cdf.first().map(|p| p[0]))
        .fold(f64::INFINITY, f64::min)
        .max(1.0);
    let hi = rows
        .iter()
        .filter_map(|r| r.cdf.last().map(|p| p[0]))
        .fold(lo * 2.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d((lo * 0.8..hi * 1.25).log_scale(), 0.0..1.0)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc("latency, µs (log scale)")
        .y_desc("fraction of operations ≤ latency")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(&err)?;
    for (i, row) in rows.iter().enumerate() {
        let color = color(i);
        let label = format!(
            "{} (p50 {}, p99 {})",
            row.lock,
            fmt_us(row.p50_us),
            fmt_us(row.p99_us)
        );
        chart
            .draw_series(LineSeries::new(
                row.cdf.iter().map(|p| (p[0].max(lo), p[1])),
                color.stroke_width(2),
            ))
            .map_err(&err)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(())
}

fn plot_throughput(path: &Path, report: &Report) -> Result<bool, String> {
    let tasks = &report.plan.tasks;
    let bars: Vec<(usize, Vec<&Row>)> = tasks
        .iter()
        .map(|t| {
            let prefix = format!("tp{t}/");
            (
                *t,
                report
                    .rows
                    .iter()
                    .filter(|r| r.id.starts_with(&prefix))
                    .collect(),
            )
        })
        .collect();
    let top = bars
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|r| r.ops_per_s))
        .fold(0.0, f64::max);
    if top <= 0.0 {
        return Ok(false);
    }
    let err = draw_err(path);
    let root = SVGBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let groups = tasks.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "throughput: acquire+release cycles per second, distinct keys",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.5..groups - 0.5, 0.0..top * 1.2)
        .map_err(&err)?;
    let labels: Vec<usize> = tasks.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * tasks.len() + 1)
        .x_label_formatter(&|x| {
            let r = x.round();
            if (x - r).abs() < 1e-6 && r >= 0.0 {
                labels.get(r as usize).map_or_else(String::new, |t| {
                    format!("{t} task{}", if *t == 1 { "" } else { "s" })
                })
            } else {
                String::new()
            }
        })
        .y_desc("cycles / s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(&err)?;
    let width = 0.8 / 2.0;
    let mut legend_done = [false, false];
    for (g, (_, rows)) in bars.iter().enumerate() {
        for (b, row) in rows.iter().enumerate() {
            let x0 = g as f64 - 0.4 + b as f64 * width;
            let color = color(b);
            let series = chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0 + 0.02, 0.0), (x0 + width - 0.02, row.ops_per_s)],
                    color.filled(),
                )))
                .map_err(&err)?;
            if let Some(done) = legend_done.get_mut(b)
                && !*done
            {
                *done = true;
                series.label(row.lock.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
                });
            }
            let text = match row.vs_single {
                Some(r) if row.lock != "single" => {
                    format!("{:.0}/s ({:.2}×)", row.ops_per_s, r.ops_per_s)
                }
                _ => format!("{:.0}/s", row.ops_per_s),
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (x0 + 0.03, row.ops_per_s + top * 0.04),
                    ("sans-serif", 14),
                )))
                .map_err(&err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(true)
}
