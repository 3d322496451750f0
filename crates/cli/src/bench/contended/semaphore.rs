//! The contended section's semaphore rows (issue 33): 16 waiters wanting one of 4 permits
//! (`Request::permits(4)`, `Patience::Wait`), in one process and across 4 processes × 4,
//! holding 1 ms and 10 ms. What a semaphore must show: the permits stay in use while waiters
//! wait (a freed slot goes to a waiter within about a round trip), and never more than 4 hold.
//! Given nodes behind proxies, both shapes again through them, a millisecond each way:
//! there the network sets the pace, not five servers and the client sharing the machine's CPUs.

use std::fmt::Write as _;
use std::time::Duration;

use quorumlock_harness::TestCluster;

use super::child::{Step, acquirer};
use super::figures::{ContendedRow, RowTally};
use super::waiter::{Kind, PERMITS};
use super::{Rtt, ratio, run_step};
use crate::bench::faults::set_latency;
use crate::bench::plan::{NET_ONE_WAY, Plan};
use crate::bench::progress::Progress;
use crate::bench::targets::{Target, at_most};
use crate::text_table::aligned;
use crate::units::fmt_us;

/// The shapes: label, processes, waiters per process (16 waiters in all).
const SHAPES: [(&str, u32, u32); 2] = [("1 process × 16", 1, 16), ("4 processes × 4", 4, 4)];
/// The shapes measured through the proxies.
const NET_SHAPES: [(&str, u32, u32); 2] = [
    ("1 process × 16, 1 ms each way", 1, 16),
    ("4 processes × 4, 1 ms each way", 4, 4),
];
/// How long a holder keeps its permit: a short call, and one long against the hand-off.
const HOLDS_MS: [u64; 2] = [1, 10];

/// Progress steps of the semaphore rows (with those through the proxies).
pub(super) fn steps() -> u64 {
    ((SHAPES.len() + NET_SHAPES.len()) * HOLDS_MS.len()) as u64
}

fn slug(shape: &str, processes: u32) -> &'static str {
    match (processes, shape.contains("each way")) {
        (1, false) => "1x16",
        (1, true) => "net-1x16",
        (_, true) => "net-4x4",
        _ => "4x4",
    }
}

/// One row's tally, made a row once the round trip is known.
pub(super) struct Pending {
    id: String,
    shape: &'static str,
    pub(super) hold_ms: u64,
    tally: RowTally,
}

impl Pending {
    /// The row, its hand-off compared with the p50 of the `PING` round trip and of an
    /// acquisition after a pause of the hold.
    pub(super) fn row(self, ping_p50_us: f64, acquire_p50_us: f64) -> ContendedRow {
        let (id, shape) = (self.id, self.shape);
        self.tally.row(
            &id,
            shape,
            self.hold_ms,
            "semaphore",
            ping_p50_us,
            acquire_p50_us,
        )
    }
}

/// The rows' tallies, their rounds alternating with samples of the quorum's round trip into
/// `rtt`: on the nodes at `urls`, or with `net`, both shapes through the proxies at
/// `urls`, which `net` slows down once the connections are warm.
pub(super) async fn tallies(
    urls: &[String],
    net: Option<&TestCluster>,
    ttl: Duration,
    prefix: &str,
    plan: &Plan,
    rtt: &mut Rtt,
    progress: &Progress,
) -> Result<Vec<Pending>, String> {
    let semaphore = acquirer(Kind::Semaphore, urls, ttl, prefix)?;
    semaphore.warm_up("semaphore-warm").await;
    let shapes: &[(&'static str, u32, u32)] = match net {
        Some(cluster) => {
            set_latency(cluster, NET_ONE_WAY);
            &NET_SHAPES
        }
        None => &SHAPES,
    };
    // In a block of its own, so that the proxies are fast again whatever it returns.
    let rows = async {
        let slice = Duration::from_millis(plan.contended_slice_ms);
        let mut rows = Vec::new();
        for &(shape, processes, per_process) in shapes {
            for hold_ms in HOLDS_MS {
                progress.step(format!(
                    "semaphore of {PERMITS}: {shape}, hold {hold_ms} ms"
                ));
                let hold = Duration::from_millis(hold_ms);
                let mut tally = RowTally::new();
                for round in 0..plan.contended_rounds {
                    rtt.sample_between_rounds(plan, hold).await;
                    let key = format!("semaphore:{}:{hold_ms}:{round}", slug(shape, processes));
                    let step = Step {
                        urls,
                        kind: Kind::Semaphore,
                        key: &key,
                        prefix,
                        ttl,
                        processes,
                        per_process,
                        hold,
                        slice,
                        max_holds: plan.contended_max_holds,
                    };
                    let (records, wall, lost) = run_step(&step, &semaphore).await?;
                    tally.add_step(&records, wall, lost);
                }
                let id = format!("semaphore/{}/{hold_ms}ms", slug(shape, processes));
                rows.push(Pending {
                    id,
                    shape,
                    hold_ms,
                    tally,
                });
                progress.done(1);
            }
        }
        Ok(rows)
    }
    .await;
    if let Some(cluster) = net {
        set_latency(cluster, Duration::ZERO);
    }
    rows
}

/// Issue 33's targets: on loopback with the long hold (the hand-off small beside it), the
/// permits in use on average; at both holds, the hand-off of a freed slot against the quorum
/// round trip of an acquisition after a pause of the hold (the yardstick of the election's
/// section: a hand-off is a lock's rounds after the idle its hold left, not `PING`s back to
/// back).
pub(super) fn targets(rows: &[ContendedRow]) -> Vec<Target> {
    let mut targets = Vec::new();
    for r in rows {
        let label = format!("semaphore of {PERMITS}, {}, hold {} ms", r.shape, r.hold_ms);
        // Through the proxies a permit is idle at least a round trip (2.5 ms) after each 10 ms
        // hold: 3.2 at most, whatever the protocol. The target is the loopback rows'.
        if r.hold_ms == 10 && !r.shape.contains("each way") {
            let measured = Some(r.in_use_mean).filter(|v| v.is_finite());
            targets.push(Target {
                name: format!("{label}: permits in use, mean"),
                limit: ">= 3.8".to_owned(),
                measured,
                met: measured.map(|v| v >= 3.8),
            });
        }
        targets.push(at_most(
            format!(
                "{label}: hand-off p50 / acquisition after {} ms idle p50",
                r.hold_ms
            ),
            Some(r.handoff_p50_per_acquire),
            2.5,
            "2.5",
        ));
        targets.push(at_most(
            format!("{label}: holders at once"),
            Some(r.most_at_once as f64),
            f64::from(PERMITS),
            &PERMITS.to_string(),
        ));
    }
    targets
}

/// The rows' table and what its columns mean.
pub(super) fn render(rows: &[ContendedRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nsemaphore: {PERMITS} permits (Request::permits({PERMITS}), Patience::Wait), 16 waiters, \
         5 local nodes\n"
    );
    let header = [
        "shape",
        "hold",
        "held",
        "acq",
        "acq/s",
        "in use",
        "most",
        "hand-off p50",
        "p99",
        "÷ping",
        "÷acq",
        "wait p50",
        "p99 (worst)",
        "max (worst)",
        "err",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for r in rows {
        table.push(vec![
            r.shape.clone(),
            format!("{} ms", r.hold_ms),
            fmt_us(r.held_p50_us),
            r.acquisitions.to_string(),
            format!("{:.0}", r.acquisitions_per_s),
            ratio(r.in_use_mean),
            r.most_at_once.to_string(),
            fmt_us(r.handoff.p50_us),
            fmt_us(r.handoff.p99_us),
            ratio(r.handoff_p50_per_ping),
            ratio(r.handoff_p50_per_acquire),
            fmt_us(r.wait.p50_us),
            fmt_us(r.worst_wait_p99_us),
            fmt_us(r.worst_wait_max_us),
            (r.errors + r.overlaps + r.lost).to_string(),
        ]);
    }
    out.push_str(&aligned(&table, 2));
    let _ = writeln!(
        out,
        "\nin use = permits held on average over the rows' time (a permit counts from its \
         acquire's return to its\nrelease's start); most = the most holders at one moment; \
         hand-off = a slot's release starts → that\nslot's next acquire returns; ÷ping, ÷acq = its \
         p50 over the PING round trip's, over an\nacquisition's after a pause of the hold (the \
         targets); err = failed calls, two holders of one\nslot at once, waiters that did not \
         report."
    );
    out
}
