//! The verbs section: the README's first call, `acquire` with the lock's default patience (wait,
//! woken), against `try_acquire` (one attempt) of the same build, on free keys, in one run:
//! one task's latency, 64 tasks' throughput on distinct keys, and one task's p99 with one of
//! five nodes hung after its connection was made. The two verbs alternate in rounds, so that a
//! drift in the machine's speed hits them alike; every loop is bounded in count and time.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quorumlock::{Lock, LockOptions};
use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
use serde::Serialize;

use super::stats::{Row, Tally, record};
use super::targets::Target;
use crate::units::fmt_us;

/// The two verbs compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Acquire,
    TryAcquire,
}

impl Verb {
    const BOTH: [Verb; 2] = [Verb::Acquire, Verb::TryAcquire];

    fn name(self) -> &'static str {
        match self {
            Verb::Acquire => "acquire",
            Verb::TryAcquire => "try_acquire",
        }
    }

    /// One acquisition of a free `key` and its release; whether it was granted.
    async fn cycle(self, lock: &Lock, key: &str, tally: &mut Tally) -> bool {
        let started = Instant::now();
        let result = match self {
            Verb::Acquire => lock.acquire(key).await,
            Verb::TryAcquire => lock.try_acquire(key).await,
        };
        let elapsed = started.elapsed();
        match result {
            Ok(guard) => {
                record(&mut tally.hist, elapsed);
                tally.wall += elapsed;
                guard.release().await;
                true
            }
            Err(_) => {
                tally.errors += 1;
                false
            }
        }
    }
}

/// How much the section measures.
struct Sizes {
    rounds: u64,
    /// One task's cycles per verb and round.
    cycles: u64,
    /// 64 tasks' time per verb and round.
    slice: Duration,
}

/// Tasks of the throughput rows.
const TASKS: usize = 64;
/// A cap on any one loop, whatever its count.
const LOOP_CAP: Duration = Duration::from_secs(20);

/// What the section measured: a row per verb and measure.
#[derive(Debug, Serialize)]
pub(super) struct Verbs {
    rows: Vec<Row>,
}

/// Runs the section on five fresh local nodes behind fault proxies.
pub(super) async fn verbs(quick: bool) -> Result<Verbs, String> {
    let sizes = if quick {
        Sizes {
            rounds: 2,
            cycles: 300,
            slice: Duration::from_millis(500),
        }
    } else {
        Sizes {
            rounds: 6,
            cycles: 2_000,
            slice: Duration::from_secs(2),
        }
    };
    let aof = ClusterOptions::default().persistence(Persistence::AofAlways);
    let cluster = TestCluster::start(aof.nodes(5).proxies(true))
        .await
        .map_err(|e| format!("verbs: starting local Redis masters behind proxies: {e}"))?;
    // The lock's defaults, as the README's first example has them: patience is a wait.
    let lock = Lock::new(cluster.urls(), LockOptions::new()).map_err(|e| format!("verbs: {e}"))?;
    let run = format!("{:08x}", rand::random::<u32>());
    for verb in Verb::BOTH {
        Verb::cycle(verb, &lock, &format!("verbs:{run}:warm"), &mut Tally::new()).await;
    }

    // [acquire, try_acquire] per measure.
    let mut one = [Tally::new(), Tally::new()];
    let mut many = [Tally::new(), Tally::new()];
    for round in 0..sizes.rounds {
        for i in order(round) {
            let (verb, one, many) = (Verb::BOTH[i], &mut one[i], &mut many[i]);
            let stem = format!("verbs:{run}:{}:{round}", verb.name());
            sequential(&lock, verb, &format!("{stem}:1"), sizes.cycles, one).await;
            concurrent(&lock, verb, &format!("{stem}:64"), sizes.slice, many).await;
        }
    }
    let mut rows = pair("verbs/1", "1 task, free keys", "acquire latency", one);
    rows.extend(pair(
        "verbs/64",
        "64 tasks, distinct free keys",
        "acquire+release throughput",
        many,
    ));

    // The same lock with one node hung (its proxy swallows every byte) after its connections
    // were made, beside the same nodes healthy.
    let cycles = sizes.cycles / 2;
    for (state, measured) in [
        ("healthy", "5 nodes behind proxies"),
        ("hung", "1 of 5 nodes hung"),
    ] {
        if state == "hung"
            && let Some(proxy) = cluster.proxy(4)
        {
            proxy.blackhole();
        }
        let mut tallies = [Tally::new(), Tally::new()];
        for round in 0..sizes.rounds {
            for i in order(round) {
                let verb = Verb::BOTH[i];
                let stem = format!("verbs:{run}:{}:{round}:{state}", verb.name());
                sequential(&lock, verb, &stem, cycles, &mut tallies[i]).await;
            }
        }
        rows.extend(pair(
            &format!("verbs/{state}"),
            &format!("1 task, {measured}"),
            "acquire latency",
            tallies,
        ));
    }
    lock.settle().await;
    drop(cluster);
    Ok(Verbs { rows })
}

/// Which verb goes first in `round`: each in turn, so that neither always follows the other
/// (and the background work it left).
fn order(round: u64) -> [usize; 2] {
    if round.is_multiple_of(2) {
        [0, 1]
    } else {
        [1, 0]
    }
}

/// `cycles` acquisitions of fresh keys under `stem`, one after another, each released.
async fn sequential(lock: &Lock, verb: Verb, stem: &str, cycles: u64, tally: &mut Tally) {
    let cap = Instant::now() + LOOP_CAP;
    for cycle in 0..cycles {
        verb.cycle(lock, &format!("{stem}:{cycle}"), tally).await;
        if Instant::now() > cap {
            break;
        }
    }
}

/// [`TASKS`] tasks, each acquiring and releasing its own key under `stem` for `slice`: every
/// latency in `tally`, and the slice as its wall time, so that its rate is the throughput.
async fn concurrent(lock: &Lock, verb: Verb, stem: &str, slice: Duration, tally: &mut Tally) {
    let end = Instant::now() + slice;
    let granted = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (lock, key, granted) =
                (lock.clone(), format!("{stem}:{task}"), Arc::clone(&granted));
            tokio::spawn(async move {
                let mut mine = Tally::new();
                while Instant::now() < end {
                    if verb.cycle(&lock, &key, &mut mine).await {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                }
                mine
            })
        })
        .collect();
    for task in tasks {
        if let Ok(Ok(mine)) = tokio::time::timeout(slice + LOOP_CAP, task).await {
            let _ = tally.hist.add(&mine.hist);
            tally.errors += mine.errors;
        } else {
            tally.errors += 1;
        }
    }
    tally.wall += slice;
}

/// The rows of one measure, acquire's compared with try_acquire's.
fn pair(id: &str, scenario: &str, measured: &str, tallies: [Tally; 2]) -> Vec<Row> {
    let [acquire, once] = tallies;
    vec![
        Row::new(
            &format!("{id}/acquire"),
            scenario,
            "acquire",
            measured,
            acquire,
        ),
        Row::new(
            &format!("{id}/try_acquire"),
            scenario,
            "try_acquire",
            measured,
            once,
        ),
    ]
}

impl Verbs {
    fn row(&self, id: &str) -> Option<&Row> {
        self.rows.iter().find(|row| row.id == id)
    }

    /// acquire's figure over try_acquire's, by `figure`.
    fn ratio(&self, id: &str, figure: impl Fn(&Row) -> f64) -> Option<f64> {
        let acquire = figure(self.row(&format!("{id}/acquire"))?);
        let once = figure(self.row(&format!("{id}/try_acquire"))?);
        (once > 0.0).then(|| acquire / once)
    }

    /// Issue 29's targets.
    pub(super) fn targets(&self) -> Vec<Target> {
        let hung = self
            .row("verbs/hung/acquire")
            .zip(self.row("verbs/healthy/acquire"))
            .map(|(hung, healthy)| hung.p99_us / healthy.p99_us);
        vec![
            target(
                "acquire / try_acquire, 1 task: p50",
                self.ratio("verbs/1", |r| r.p50_us),
                true,
                1.05,
            ),
            target(
                "acquire / try_acquire, 64 tasks: throughput",
                self.ratio("verbs/64", |r| r.ops_per_s),
                false,
                0.95,
            ),
            target("acquire, 1 of 5 hung: p99 / healthy p99", hung, true, 2.0),
        ]
    }
}

/// A target on `measured`: at most `limit` if `at_most`, else at least.
fn target(name: &str, measured: Option<f64>, at_most: bool, limit: f64) -> Target {
    let measured = measured.filter(|v| v.is_finite());
    Target {
        name: name.to_owned(),
        limit: format!("{} {limit}", if at_most { "<=" } else { ">=" }),
        measured,
        met: measured.map(|v| if at_most { v <= limit } else { v >= limit }),
    }
}

/// The section's table.
pub(super) fn render(verbs: &Verbs) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "
acquire (default patience: wait) against try_acquire, same lock, free keys:"
    );
    let _ = writeln!(
        out,
        "  {:<34} {:<12} {:>9} {:>9} {:>9} {:>11} {:>7}",
        "scenario", "verb", "p50", "p99", "max", "ops/s", "errors"
    );
    for row in &verbs.rows {
        let _ = writeln!(
            out,
            "  {:<34} {:<12} {:>9} {:>9} {:>9} {:>11.0} {:>7}",
            row.scenario,
            row.lock,
            fmt_us(row.p50_us),
            fmt_us(row.p99_us),
            fmt_us(row.max_us),
            row.ops_per_s,
            row.errors
        );
    }
    out
}
