//! The contended section (issue 19, point 6): waiters wanting one key over the five local
//! nodes, side by side in one run: the waiting lock (`Patience::Wait`, for one key and for a set
//! of three), polling (`Patience::Retry` every 1 ms, and with the default policy) and rslock's
//! lock loop; 8 waiters
//! in one process (tasks on one `Lock`) and 4 processes × 2 waiters (the `quorumlock` binary
//! itself, `bench-waiters`); holding 0 and 1 ms. Beside them, the quorum's round trip measured
//! in the same run, two ways: a `PING` to each node at once, timed to the quorum-th reply, and
//! an acquisition of a free key after a pause as long as the row's hold (what the election's
//! section measures, and what a hand-off is made of: a lock's own rounds, after an idle
//! hold), and many
//! waiters on one lock: memory per waiter and connections per node, and a semaphore of 4
//! permits wanted by 16 waiters (`semaphore.rs`).
//!
//! Contenders alternate in rounds, each round on a fresh key, so that a drift in the machine's
//! speed hits them alike. Every loop is bounded in count and time.
//!
//! Over 500 lines: the section's run, its table and its targets are three views of one
//! measurement; what stands alone (the child processes, the figures, the many waiters, the
//! semaphore's rows) is in files of its own.

pub(crate) mod child;
mod figures;
mod many;
mod semaphore;
mod waiter;

use quorumlock::Patience;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use quorumlock::{Lock, LockOptions};
use quorumlock_harness::{TestCluster, raw_connection};
use redis::aio::MultiplexedConnection;
use serde::Serialize;

use self::child::{Step, acquirer, across_processes};
use self::figures::{ContendedRow, RowTally};
use self::many::{ManyWaiters, many_waiters};
use self::waiter::{Acquirer, Budget, Kind, POLL_JITTER, now_ns, waiter};
use super::cdf::{Mark, plot_cdf_marked};
use super::loops::timed_acquire;
use super::plan::Plan;
use super::progress::Progress;
use super::stats::{Row, Tally, record};
use super::targets::{Target, at_most};
use crate::text_table::aligned;
use crate::units::fmt_us;

/// Untimed calls per contender before its first round.
const WARM_CALLS: u64 = 20;
/// Waiters of the one-process shape; processes × waiters of the other.
const ONE_PROCESS: u32 = 8;
const PROCESSES: u32 = 4;
const PER_PROCESS: u32 = 2;
/// How long a holder keeps the key.
const HOLDS_MS: [u64; 2] = [0, 1];
/// Acquisitions of a free key, each after a pause of the row's hold, taken before each round.
const ACQUIRE_SAMPLES: u64 = 10;
/// Connect and response timeout of the `PING` connections.
const PING_TIMEOUT: Duration = Duration::from_secs(1);
/// How far past its slice a step's tasks may run before they count as lost.
const STEP_GRACE: Duration = Duration::from_secs(15);

/// The shapes: label, processes, waiters per process.
const SHAPES: [(&str, u32, u32); 2] = [
    ("1 process × 8", 1, ONE_PROCESS),
    ("4 processes × 2", PROCESSES, PER_PROCESS),
];

/// Everything the section measured.
#[derive(Debug, Serialize)]
pub(super) struct Contended {
    slice_ms: u64,
    rounds: u64,
    poll_jitter_us: u64,
    /// The quorum's round trip: a `PING` to each of the five nodes at once, to the third reply.
    rtt: Row,
    /// The quorum's round trip of an acquisition of a free key, per pause before it (a row's
    /// hold, in ms).
    acquire_rtt: Vec<(u64, Row)>,
    /// The same two through the proxies, a millisecond each way, if the semaphore's rows were
    /// measured through them too.
    net_rtt: Option<Row>,
    net_acquire_rtt: Vec<(u64, Row)>,
    rows: Vec<ContendedRow>,
    /// 16 waiters wanting one of 4 permits.
    semaphore: Vec<ContendedRow>,
    many: Option<ManyWaiters>,
}

/// The quorum's round trip, sampled between the rounds of every row, two ways: a `PING` to
/// each node at once, timed to the quorum-th reply, back to back; and a lock's acquisition of
/// a free key, each after a pause as long as the row's hold. The first is the network and the
/// servers' dispatch; the second what a hand-off is made of (a lock's rounds, with their writes
/// and the client's work), after the idle a hold leaves: on this machine the first round trip
/// after a pause costs more (docs/benchmarks.md).
pub(super) struct Rtt {
    pings: Vec<MultiplexedConnection>,
    quorum: usize,
    tally: Tally,
    lock: Lock,
    /// Per pause, in ms: the acquisitions after it.
    after_pause: BTreeMap<u64, Tally>,
    /// Acquisitions so far, which name their keys.
    taken: u64,
}

impl Rtt {
    /// Connects to every node of `urls` and warms the connections up (untimed).
    async fn connect(
        urls: &[String],
        plan: &Plan,
        ttl: Duration,
        prefix: &str,
    ) -> Result<Rtt, String> {
        let mut pings = Vec::new();
        for url in urls {
            let connection = raw_connection(url, Some(true), PING_TIMEOUT)
                .await
                .map_err(|e| format!("PING connection to {url}: {e}"))?;
            pings.push(connection);
        }
        let options = LockOptions::new()
            .ttl(ttl)
            .key_prefix(prefix.as_bytes().to_vec());
        let lock = Lock::new(urls.iter().cloned(), options).map_err(|e| format!("rtt: {e}"))?;
        let mut rtt = Rtt {
            pings,
            quorum: urls.len() / 2 + 1,
            tally: Tally::new(),
            lock,
            after_pause: BTreeMap::new(),
            taken: 0,
        };
        for _ in 0..plan.contended_rtt_samples {
            sample_rtt(&rtt.pings, rtt.quorum, &mut Tally::new()).await;
            rtt.acquire_free(&mut Tally::new()).await;
        }
        Ok(rtt)
    }

    /// The samples taken before each contender's round whose holders hold `hold`.
    async fn sample_between_rounds(&mut self, plan: &Plan, hold: Duration) {
        for _ in 0..plan.contended_rtt_samples / plan.contended_rounds.max(1) {
            sample_rtt(&self.pings, self.quorum, &mut self.tally).await;
        }
        let hold_ms = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX);
        let mut tally = self.after_pause.remove(&hold_ms).unwrap_or_else(Tally::new);
        for _ in 0..ACQUIRE_SAMPLES {
            tokio::time::sleep(hold).await;
            self.acquire_free(&mut tally).await;
        }
        self.after_pause.insert(hold_ms, tally);
    }

    /// One acquisition of a free key, timed into `tally`, then released (untimed).
    async fn acquire_free(&mut self, tally: &mut Tally) {
        self.taken += 1;
        let key = format!("contended-rtt:{}", self.taken);
        timed_acquire(&self.lock, &key, tally).await;
    }

    /// The rows: `PING`s, and acquisitions per pause.
    fn rows(self, id: &str, label: &str) -> (Row, Vec<(u64, Row)>) {
        let ping = Row::new(
            id,
            "contended",
            &format!(
                "quorum round trip{label} (PING ×{}, reply {})",
                self.pings.len(),
                self.quorum
            ),
            "round trip",
            self.tally,
        );
        let acquire = self
            .after_pause
            .into_iter()
            .map(|(pause_ms, tally)| {
                let row = Row::new(
                    &format!("{id}/acquire/{pause_ms}ms"),
                    "contended",
                    &format!("acquisition of a free key{label}, after {pause_ms} ms idle"),
                    "round trip",
                    tally,
                );
                (pause_ms, row)
            })
            .collect();
        (ping, acquire)
    }
}

/// The p50 of the acquisitions after a pause of `hold_ms` (NaN if none were taken).
fn acquire_p50(rows: &[(u64, Row)], hold_ms: u64) -> f64 {
    rows.iter()
        .find(|(pause, _)| *pause == hold_ms)
        .map_or(f64::NAN, |(_, row)| row.p50_us)
}

/// Progress steps the section reports.
pub(super) fn steps() -> u64 {
    (SHAPES.len() * HOLDS_MS.len()) as u64 + semaphore::steps() + 1
}

/// Runs the section over `urls` (the five local nodes); the semaphore's rows again
/// through `net`'s proxies, a millisecond each way, if given.
pub(super) async fn contended(
    urls: &[String],
    net: Option<&TestCluster>,
    ttl: Duration,
    prefix: &str,
    plan: &Plan,
    progress: &Progress,
) -> Result<Contended, String> {
    let mut rtt = Rtt::connect(urls, plan, ttl, prefix).await?;
    // One acquirer per contender for the one-process shape, warmed up once.
    let mut acquirers = Vec::new();
    for kind in Kind::ALL {
        let acquirer = acquirer(kind, urls, ttl, prefix)?;
        acquirer
            .warm_up(&format!("contended-warm:{}", kind.name()))
            .await;
        acquirers.push(acquirer);
    }
    let slice = Duration::from_millis(plan.contended_slice_ms);
    let max_holds = plan.contended_max_holds;
    let mut tallies: Vec<(String, u32, u64, Kind, RowTally)> = Vec::new();
    for &(shape, processes, per_process) in &SHAPES {
        for hold_ms in HOLDS_MS {
            progress.step(format!("contended: {shape}, hold {hold_ms} ms"));
            let first = tallies.len();
            for kind in Kind::ALL {
                tallies.push((shape.to_owned(), processes, hold_ms, kind, RowTally::new()));
            }
            let hold = Duration::from_millis(hold_ms);
            for round in 0..plan.contended_rounds {
                for (i, acquirer) in acquirers.iter().enumerate() {
                    let kind = acquirer.kind();
                    rtt.sample_between_rounds(plan, hold).await;
                    let key = format!(
                        "contended:{processes}x{per_process}:{hold_ms}:{}:{round}",
                        kind.name()
                    );
                    let Some((_, _, _, _, tally)) = tallies.get_mut(first + i) else {
                        continue;
                    };
                    let step = Step {
                        urls,
                        kind,
                        key: &key,
                        prefix,
                        ttl,
                        processes,
                        per_process,
                        hold,
                        slice,
                        max_holds,
                    };
                    let (records, wall, lost) = run_step(&step, acquirer).await?;
                    tally.add_step(&records, wall, lost);
                }
            }
            progress.done(1);
        }
    }
    let semaphore = semaphore::tallies(urls, None, ttl, prefix, plan, &mut rtt, progress).await?;
    let (net_semaphore, net_rtt) = match net {
        Some(cluster) => {
            let proxied = cluster.urls();
            let mut net_rtt = Rtt::connect(&proxied, plan, ttl, prefix).await?;
            let pending = semaphore::tallies(
                &proxied,
                Some(cluster),
                ttl,
                prefix,
                plan,
                &mut net_rtt,
                progress,
            )
            .await?;
            let (net_rtt, net_acquire_rtt) =
                net_rtt.rows("contended/net-rtt", " through the proxies, 1 ms each way");
            let rows = pending
                .into_iter()
                .map(|pending| {
                    let acquire = acquire_p50(&net_acquire_rtt, pending.hold_ms);
                    pending.row(net_rtt.p50_us, acquire)
                })
                .collect();
            (rows, Some((net_rtt, net_acquire_rtt)))
        }
        None => (Vec::new(), None),
    };
    let (net_rtt, net_acquire_rtt) = net_rtt.unzip();
    let (rtt, acquire_rtt) = rtt.rows("contended/rtt", "");
    let semaphore = semaphore
        .into_iter()
        .map(|pending| {
            let acquire = acquire_p50(&acquire_rtt, pending.hold_ms);
            pending.row(rtt.p50_us, acquire)
        })
        .chain(net_semaphore)
        .collect();
    let rows = tallies
        .into_iter()
        .map(|(shape, processes, hold_ms, kind, tally)| {
            let id = format!("contended/{}/{hold_ms}ms/{}", slug(processes), kind.name());
            let acquire = acquire_p50(&acquire_rtt, hold_ms);
            tally.row(&id, &shape, hold_ms, kind.name(), rtt.p50_us, acquire)
        })
        .collect();

    progress.step(format!(
        "{} waiters on {} resources",
        plan.many_waiters, plan.many_resources
    ));
    let options = LockOptions::new()
        .ttl(ttl)
        .patience(Patience::Once)
        .key_prefix(prefix.as_bytes().to_vec());
    let lock = Lock::new(urls.iter().cloned(), options).map_err(|e| format!("many: {e}"))?;
    let many = many_waiters(
        &lock,
        urls,
        plan.many_waiters,
        plan.many_resources,
        Duration::from_millis(plan.many_cap_ms),
        plan.many_serve,
    )
    .await?;
    progress.done(1);
    Ok(Contended {
        slice_ms: plan.contended_slice_ms,
        rounds: plan.contended_rounds,
        poll_jitter_us: u64::try_from(POLL_JITTER.as_micros()).unwrap_or(u64::MAX),
        rtt,
        acquire_rtt,
        net_rtt,
        net_acquire_rtt: net_acquire_rtt.unwrap_or_default(),
        rows,
        semaphore,
        many: Some(many),
    })
}

fn slug(processes: u32) -> &'static str {
    if processes == 1 { "1x8" } else { "4x2" }
}

/// Runs one step: its waiters as tasks on `acquirer` when the step has one process, else in
/// processes of their own. Every waiter's record, the wall time, and how many did not report.
async fn run_step(
    step: &Step<'_>,
    acquirer: &Acquirer,
) -> Result<(Vec<waiter::WaiterRecord>, Duration, u64), String> {
    if step.processes == 1 {
        let (waiters, hold, slice) = (step.per_process, step.hold, step.slice);
        Ok(in_process(acquirer, step.key, waiters, hold, slice, step.max_holds).await)
    } else {
        across_processes(step).await
    }
}

/// `waiters` tasks of this process wanting `key` for `slice`: their records, the wall time and
/// how many tasks did not report.
async fn in_process(
    acquirer: &Acquirer,
    key: &str,
    waiters: u32,
    hold: Duration,
    slice: Duration,
    max_holds: u64,
) -> (Vec<waiter::WaiterRecord>, Duration, u64) {
    let start = now_ns();
    let end = start + u64::try_from(slice.as_nanos()).unwrap_or(0);
    let budget = Arc::new(Budget::new(max_holds));
    let tasks: Vec<_> = (0..waiters)
        .map(|id| {
            let (acquirer, budget, key) = (acquirer.clone(), Arc::clone(&budget), key.to_owned());
            tokio::spawn(async move { waiter(&acquirer, &key, id, hold, end, &budget).await })
        })
        .collect();
    let mut records = Vec::new();
    let mut lost = 0;
    for task in tasks {
        let abort = task.abort_handle();
        match tokio::time::timeout(waiter::until(end) + STEP_GRACE, task).await {
            Ok(Ok(record)) => records.push(record),
            _ => {
                abort.abort();
                lost += 1;
            }
        }
    }
    let wall = Duration::from_nanos(now_ns().saturating_sub(start)).min(slice);
    (records, wall, lost)
}

/// One sample of the quorum's round trip: a `PING` to each node at once, timed to the
/// `quorum`-th reply. Waits for every reply (each bounded by [`PING_TIMEOUT`]).
async fn sample_rtt(pings: &[MultiplexedConnection], quorum: usize, tally: &mut Tally) {
    let started = std::time::Instant::now();
    let mut replies: FuturesUnordered<_> = pings
        .iter()
        .map(|connection| {
            let mut connection = connection.clone();
            async move {
                redis::cmd("PING")
                    .query_async::<String>(&mut connection)
                    .await
                    .is_ok_and(|r| r == "PONG")
            }
        })
        .collect();
    let mut answered = 0;
    while let Some(ok) = replies.next().await {
        if ok {
            answered += 1;
            if answered == quorum {
                let elapsed = started.elapsed();
                record(&mut tally.hist, elapsed);
                tally.wall += elapsed;
            }
        }
    }
    if answered < quorum {
        tally.errors += 1;
    }
}

/// Issue 19's targets, on the waiting lock's rows at each hold.
pub(super) fn targets(c: &Contended) -> Vec<Target> {
    let row = |kind: Kind, processes: u32, hold_ms: u64| {
        let id = format!("contended/{}/{hold_ms}ms/{}", slug(processes), kind.name());
        c.rows.iter().find(|r| r.id == id)
    };
    let mut targets = Vec::new();
    for hold_ms in HOLDS_MS {
        let (one, many) = (
            row(Kind::Waiting, 1, hold_ms),
            row(Kind::Waiting, PROCESSES, hold_ms),
        );
        let h = format!("hold {hold_ms} ms");
        for (label, r) in [("1×8", one), ("4×2", many)] {
            targets.push(at_most(
                format!("waiting {label} {h}: hand-off p50 / PING RTT p50"),
                r.map(|r| r.handoff_p50_per_ping),
                2.5,
                "2.5",
            ));
            targets.push(at_most(
                format!("waiting {label} {h}: hand-off p99, ms"),
                r.map(|r| r.handoff.p99_us / 1e3),
                5.0,
                "5",
            ));
        }
        // A set of three waits like one resource (issue 29): the same local hand-off.
        let set = row(Kind::WaitingSet3, 1, hold_ms);
        for (kind, r) in [(Kind::Waiting, one), (Kind::WaitingSet3, set)] {
            let name = kind.name();
            targets.push(at_most(
                format!("{name} 1×8 {h}: hand-off p50 / RTT (next holder local)"),
                r.map(|r| r.handoff_p50_per_ping),
                1.5,
                "1.5",
            ));
            targets.push(at_most(
                format!("{name} 1×8 {h}: share to the task that released"),
                r.map(|r| r.self_share),
                1.0 / 8.0 + 0.05,
                "0.175",
            ));
        }
        targets.push(at_most(
            format!("waiting 1×8 {h}: worst waiter's wait p99, ms"),
            one.map(|r| r.worst_wait_p99_us / 1e3),
            10.0,
            "10",
        ));
        targets.push(at_most(
            format!("waiting 1×8 {h}: worst waiter's max / its mean"),
            one.map(|r| r.worst_max_over_mean),
            5.0,
            "5",
        ));
        targets.push(at_most(
            format!("waiting 4×2 {h}: max wait / mean wait"),
            many.map(|r| r.max_over_mean_all),
            10.0,
            "10",
        ));
    }
    targets.extend(semaphore::targets(&c.semaphore));
    if let Some(m) = &c.many {
        targets.push(at_most(
            format!("{} waiters: connections added per node", m.waiters),
            Some(m.most_added as f64),
            2.0,
            "2",
        ));
    }
    targets
}

fn ratio(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "-".to_owned()
    }
}

/// The section's table and its notes.
pub(super) fn render(c: &Contended) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ncontended: one key, 5 local nodes, {} rounds of {} ms per row; quorum round trip \
         (PING to 5, 3rd reply) p50 {}, p99 {} ({} samples)\n",
        c.rounds,
        c.slice_ms,
        fmt_us(c.rtt.p50_us),
        fmt_us(c.rtt.p99_us),
        c.rtt.samples
    );
    if let Some(net) = &c.net_rtt {
        let _ = writeln!(
            out,
            "through proxies delaying each byte 1 ms each way: quorum round trip p50 {}, p99 {} \
             ({} samples)\n",
            fmt_us(net.p50_us),
            fmt_us(net.p99_us),
            net.samples
        );
    }
    for (place, rows) in [
        ("", &c.acquire_rtt),
        (" through the proxies", &c.net_acquire_rtt),
    ] {
        let each: Vec<String> = rows
            .iter()
            .map(|(pause_ms, row)| {
                format!(
                    "after {pause_ms} ms idle p50 {}, p99 {} ({})",
                    fmt_us(row.p50_us),
                    fmt_us(row.p99_us),
                    row.samples
                )
            })
            .collect();
        if !each.is_empty() {
            let _ = writeln!(
                out,
                "acquisition of a free key{place} (the quorum round trip of a lock): {}\n",
                each.join("; ")
            );
        }
    }
    let header = [
        "shape",
        "hold",
        "held",
        "contender",
        "acq",
        "acq/s",
        "hand-off p50",
        "p99",
        "÷ping",
        "÷acq",
        "self",
        "wait p50",
        "p99 (worst)",
        "max (worst)",
        "max÷mean",
        "all max÷mean",
        "cut",
        "err",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for r in &c.rows {
        table.push(vec![
            r.shape.clone(),
            format!("{} ms", r.hold_ms),
            fmt_us(r.held_p50_us),
            r.contender.clone(),
            r.acquisitions.to_string(),
            format!("{:.0}", r.acquisitions_per_s),
            fmt_us(r.handoff.p50_us),
            fmt_us(r.handoff.p99_us),
            ratio(r.handoff_p50_per_ping),
            ratio(r.handoff_p50_per_acquire),
            if r.self_share.is_finite() {
                format!("{:.0}%", r.self_share * 100.0)
            } else {
                "-".to_owned()
            },
            fmt_us(r.wait.p50_us),
            fmt_us(r.worst_wait_p99_us),
            fmt_us(r.worst_wait_max_us),
            ratio(r.worst_max_over_mean),
            ratio(r.max_over_mean_all),
            r.cut.to_string(),
            (r.errors + r.overlaps + r.lost).to_string(),
        ]);
    }
    out.push_str(&aligned(&table, 2));
    let _ = writeln!(
        out,
        "\nheld = p50 of acquire returned → release started (the hold is a sleep on Tokio's 1 ms timer);\nhand-off = a holder's release starts → the next holder's acquire returns \
         (CLOCK_MONOTONIC, shared by the\nprocesses); ÷ping, ÷acq = its p50 over the PING round \
         trip's p50, over the p50 of an acquisition\nafter a pause of the hold; self = share of \
         hand-offs to the waiter that had just released; wait = a waiter began to\nwant the key → its acquire returned \
         (p99, max and max÷mean: the worst waiter's; all max÷mean: the\nlargest wait over the \
         mean of all); cut = waits the step's end cut short (not counted); err = failed\n\
         calls, overlapping holds and waiters that did not report. polling-1ms = Patience::Retry, \
         unbounded\nattempts 1 ms + up to {} µs apart; polling-default = the default policy \
         (3 attempts 100–200 ms\napart), called again; rslock = rslock 0.10's lock with its \
         retry loop as it comes (3 tries 0–200 ms\napart, Nagle on), called again.",
        c.poll_jitter_us
    );
    for r in c.rows.iter().filter(|r| r.contender == "waiting") {
        let waits: Vec<String> = r
            .waiters
            .iter()
            .map(|w| {
                format!(
                    "{}:{}/{}/{}",
                    w.id,
                    fmt_us(w.p50_us),
                    fmt_us(w.p99_us),
                    fmt_us(w.max_us)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  waiting, {}, hold {} ms, each waiter's wait p50/p99/max: {}",
            r.shape,
            r.hold_ms,
            waits.join(" ")
        );
    }
    if let Some(m) = &c.many {
        let per_node = |counts: &[usize], subs: &[usize]| {
            counts
                .iter()
                .zip(subs)
                .map(|(c, s)| format!("{c} ({s} sub)"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "  {} waiters on {} resources (one Lock, Patience::Wait): {} in the queues, {:.0} \
             bytes of client memory per waiter;\n  clients per node before: {}; while \
             waiting: {}; {} of {} served {:.0} ms after the holders released ({:.0}/s)",
            m.waiters,
            m.resources,
            m.registered,
            m.bytes_per_waiter,
            per_node(&m.clients_before, &m.subscribers_before),
            per_node(&m.clients_waiting, &m.subscribers_waiting),
            m.served,
            m.waiters,
            m.serve_ms,
            m.serve_per_s
        );
        if !m.serve {
            let _ = writeln!(out, "  (--quick: the waiters were dropped, not served)");
        }
    }
    out.push_str(&semaphore::render(&c.semaphore));
    out
}

/// The section's plots: per shape and hold, the hand-off CDF of each contender (with the quorum
/// round trip's p50 marked) and the CDF of its waits.
pub(super) fn write_plots(dir: &Path, c: &Contended) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for &(shape, processes, _) in &SHAPES {
        for hold_ms in HOLDS_MS {
            let rows: Vec<&ContendedRow> = c
                .rows
                .iter()
                .filter(|r| r.shape == shape && r.hold_ms == hold_ms)
                .collect();
            let tag = format!("{}-{hold_ms}ms", slug(processes));
            let handoffs: Vec<&Row> = rows
                .iter()
                .map(|r| &r.handoff)
                .filter(|r| r.samples > 0)
                .collect();
            if !handoffs.is_empty() {
                let file = format!("cdf-contended-handoff-{tag}.svg");
                let mark = Mark {
                    x_us: c.rtt.p50_us,
                    row: handoffs.len(),
                    label: format!("quorum round trip p50 ({})", fmt_us(c.rtt.p50_us)),
                };
                plot_cdf_marked(
                    &dir.join(&file),
                    &format!("hand-off, {shape}, hold {hold_ms} ms: release → next acquire"),
                    &handoffs,
                    &[mark],
                )?;
                written.push(file);
            }
            let waits: Vec<&Row> = rows
                .iter()
                .map(|r| &r.wait)
                .filter(|r| r.samples > 0)
                .collect();
            if !waits.is_empty() {
                let file = format!("cdf-contended-wait-{tag}.svg");
                plot_cdf_marked(
                    &dir.join(&file),
                    &format!("waits, {shape}, hold {hold_ms} ms: want → acquire returned"),
                    &waits,
                    &[],
                )?;
                written.push(file);
            }
        }
    }
    Ok(written)
}
