//! From the waiters' records to the figures of one row: all holds of a step put on one time
//! line (they share one clock), the hand-off from each release to the next acquire of the same
//! key (for a semaphore, of the same slot), who got it after whom, how many held at once, and
//! each waiter's waits.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::waiter::WaiterRecord;
use crate::bench::stats::{Row, Tally, new_histogram, record};

/// What one row added up to over its rounds.
pub(super) struct RowTally {
    handoff: Tally,
    waits: Tally,
    by_waiter: BTreeMap<u32, Histogram<u64>>,
    /// How long each holder really held the key (acquire returned → release started).
    held: Histogram<u64>,
    holds: u64,
    /// Hand-offs to the waiter that had just released.
    to_self: u64,
    /// Next holder's acquire returned before the previous holder's release started (of the
    /// same key or slot): two holders at once, which must never be seen.
    overlaps: u64,
    /// The sum of every hold's length (acquire returned → release started), in ns.
    held_ns: u128,
    /// The wall time of every step, in ns, for the mean of holders at once.
    wall_ns: u128,
    /// The most holds that were under way at one moment.
    most_at_once: u64,
    refused: u64,
    errors: u64,
    cut: u64,
    /// Processes or tasks that did not report (panicked, killed at the time bound).
    lost: u64,
}

/// One waiter's waits over the row.
#[derive(Debug, Clone, Serialize)]
pub(super) struct WaiterFigures {
    pub(super) id: u32,
    pub(super) acquisitions: u64,
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    pub(super) max_us: f64,
    pub(super) mean_us: f64,
    pub(super) max_over_mean: f64,
}

/// One row of the contended table.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ContendedRow {
    pub(super) id: String,
    /// `1 process × 8` or `4 processes × 2`.
    pub(super) shape: String,
    pub(super) hold_ms: u64,
    pub(super) contender: String,
    /// Release started → next holder's acquire returned.
    pub(super) handoff: Row,
    /// Began to want the key → acquire returned, all waiters.
    pub(super) wait: Row,
    /// The hand-off p50 over the p50 of the quorum's `PING` round trip of the same run.
    pub(super) handoff_p50_per_ping: f64,
    /// The hand-off p50 over the p50 of an acquisition of a free key after a pause as long as
    /// the hold, in the same run.
    pub(super) handoff_p50_per_acquire: f64,
    /// Share of hand-offs to the waiter that had just released.
    pub(super) self_share: f64,
    pub(super) acquisitions: u64,
    pub(super) acquisitions_per_s: f64,
    /// Holders at once on average over the steps' wall time: for a semaphore, the permits in
    /// use (a permit counts from its acquire's return to its release's start).
    pub(super) in_use_mean: f64,
    /// The most holders seen at one moment (1 for a key, at most the permits for a semaphore).
    pub(super) most_at_once: u64,
    /// The p50 of how long a holder really held the key (a 1 ms sleep on Tokio's timer takes
    /// longer).
    pub(super) held_p50_us: f64,
    /// The largest of the waiters' p99 waits.
    pub(super) worst_wait_p99_us: f64,
    /// The largest wait of any waiter.
    pub(super) worst_wait_max_us: f64,
    /// The largest of the waiters' max ÷ own mean.
    pub(super) worst_max_over_mean: f64,
    /// The largest wait over the mean of all waits.
    pub(super) max_over_mean_all: f64,
    pub(super) waiters: Vec<WaiterFigures>,
    pub(super) overlaps: u64,
    pub(super) refused: u64,
    pub(super) errors: u64,
    /// Waits the step's deadline cut short (not in the wait figures).
    pub(super) cut: u64,
    pub(super) lost: u64,
}

impl RowTally {
    pub(super) fn new() -> RowTally {
        RowTally {
            handoff: Tally::new(),
            waits: Tally::new(),
            by_waiter: BTreeMap::new(),
            held: new_histogram(),
            holds: 0,
            to_self: 0,
            overlaps: 0,
            held_ns: 0,
            wall_ns: 0,
            most_at_once: 0,
            refused: 0,
            errors: 0,
            cut: 0,
            lost: 0,
        }
    }

    /// Adds one step: every waiter's record (of one key, or of one semaphore's slots), the
    /// step's wall time, and how many waiters did not report.
    pub(super) fn add_step(&mut self, records: &[WaiterRecord], wall: Duration, lost: u64) {
        // (slot, acquired, released, waiter): a key's holds are all of slot 0.
        let mut holds: Vec<(u32, u64, u64, u32)> = Vec::new();
        for r in records {
            let waits = self.by_waiter.entry(r.id).or_insert_with(new_histogram);
            for (i, &[asked, acquired, released]) in r.holds.iter().enumerate() {
                let wait = Duration::from_nanos(acquired.saturating_sub(asked));
                record(waits, wait);
                record(&mut self.waits.hist, wait);
                let held = released.saturating_sub(acquired);
                record(&mut self.held, Duration::from_nanos(held));
                self.held_ns += u128::from(held);
                let slot = r.slots.get(i).copied().unwrap_or(0);
                holds.push((slot, acquired, released, r.id));
            }
            self.refused += r.refused;
            self.errors += r.errors;
            self.cut += u64::from(r.cut.is_some());
        }
        self.most_at_once = self.most_at_once.max(most_at_once(&holds));
        holds.sort_unstable();
        for pair in holds.windows(2) {
            let [(slot, _, released, before), (next_slot, acquired, _, after)] = pair else {
                continue;
            };
            if slot != next_slot {
                continue;
            }
            if acquired < released {
                self.overlaps += 1;
                continue;
            }
            record(
                &mut self.handoff.hist,
                Duration::from_nanos(acquired - released),
            );
            self.to_self += u64::from(before == after);
        }
        self.holds += holds.len() as u64;
        self.handoff.wall += wall;
        self.waits.wall += wall;
        self.wall_ns += wall.as_nanos();
        self.lost += lost;
    }

    pub(super) fn row(
        self,
        id: &str,
        shape: &str,
        hold_ms: u64,
        contender: &str,
        ping_p50_us: f64,
        acquire_p50_us: f64,
    ) -> ContendedRow {
        let handoffs = self.handoff.hist.len();
        let waiters: Vec<WaiterFigures> = self
            .by_waiter
            .iter()
            .map(|(&id, hist)| waiter_figures(id, hist))
            .collect();
        let worst = |f: fn(&WaiterFigures) -> f64| {
            waiters
                .iter()
                .map(f)
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
        };
        let wall = self.handoff.wall.as_secs_f64();
        let scenario = format!("contended, {shape}, hold {hold_ms} ms");
        let handoff = Row::new(
            &format!("{id}/handoff"),
            &scenario,
            contender,
            "hand-off",
            self.handoff,
        );
        let wait = Row::new(
            &format!("{id}/wait"),
            &scenario,
            contender,
            "wait",
            self.waits,
        );
        ContendedRow {
            id: id.to_owned(),
            shape: shape.to_owned(),
            hold_ms,
            contender: contender.to_owned(),
            handoff_p50_per_ping: ratio(handoff.p50_us, ping_p50_us),
            handoff_p50_per_acquire: ratio(handoff.p50_us, acquire_p50_us),
            self_share: ratio(self.to_self as f64, handoffs as f64),
            acquisitions: self.holds,
            held_p50_us: if self.held.is_empty() {
                f64::NAN
            } else {
                self.held.value_at_quantile(0.5) as f64 / 1_000.0
            },
            acquisitions_per_s: ratio(self.holds as f64, wall),
            in_use_mean: ratio(self.held_ns as f64, self.wall_ns as f64),
            most_at_once: self.most_at_once,
            worst_wait_p99_us: worst(|w| w.p99_us),
            worst_wait_max_us: worst(|w| w.max_us),
            worst_max_over_mean: worst(|w| w.max_over_mean),
            max_over_mean_all: ratio(wait.max_us, wait.mean_us),
            handoff,
            wait,
            waiters,
            overlaps: self.overlaps,
            refused: self.refused,
            errors: self.errors,
            cut: self.cut,
            lost: self.lost,
        }
    }
}

/// The most of `holds` (slot, acquired, released, waiter) under way at one moment: a sweep
/// over their starts and ends, an end before a start at the same instant.
fn most_at_once(holds: &[(u32, u64, u64, u32)]) -> u64 {
    let mut events: Vec<(u64, bool)> = holds
        .iter()
        .flat_map(|&(_, acquired, released, _)| [(acquired, true), (released, false)])
        .collect();
    events.sort_unstable();
    let (mut now, mut most) = (0u64, 0u64);
    for (_, starts) in events {
        if starts {
            now += 1;
            most = most.max(now);
        } else {
            now = now.saturating_sub(1);
        }
    }
    most
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

fn waiter_figures(id: u32, hist: &Histogram<u64>) -> WaiterFigures {
    let us = |ns: u64| ns as f64 / 1_000.0;
    if hist.is_empty() {
        return WaiterFigures {
            id,
            acquisitions: 0,
            p50_us: f64::NAN,
            p99_us: f64::NAN,
            max_us: f64::NAN,
            mean_us: f64::NAN,
            max_over_mean: f64::NAN,
        };
    }
    let mean_us = hist.mean() / 1_000.0;
    WaiterFigures {
        id,
        acquisitions: hist.len(),
        p50_us: us(hist.value_at_quantile(0.5)),
        p99_us: us(hist.value_at_quantile(0.99)),
        max_us: us(hist.max()),
        mean_us,
        max_over_mean: ratio(us(hist.max()), mean_us),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(id: u32, holds: &[[u64; 3]]) -> WaiterRecord {
        WaiterRecord {
            id,
            holds: holds.to_vec(),
            ..WaiterRecord::default()
        }
    }

    #[test]
    fn holds_of_all_waiters_are_put_on_one_time_line() {
        let mut tally = RowTally::new();
        // Waiter 0 holds 100–200 ns, then 1 holds 300–400, then 1 again 450–500, then 0.
        let records = [
            waiter(0, &[[0, 100, 200], [210, 600, 700]]),
            waiter(1, &[[0, 300, 400], [400, 450, 500]]),
        ];
        tally.add_step(&records, Duration::from_secs(1), 0);
        let row = tally.row("c/x", "1 process × 2", 0, "waiting", 0.1, 0.2);
        // Hand-offs: 200→300, 400→450 (to itself), 500→600.
        assert_eq!(row.handoff.samples, 3);
        assert_eq!(row.overlaps, 0);
        assert!((row.self_share - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(row.acquisitions, 4);
        assert_eq!(row.waiters.len(), 2);
        assert_eq!(row.waiters[0].acquisitions, 2);
    }

    #[test]
    fn a_semaphores_hand_offs_and_overlaps_are_counted_per_slot() {
        let mut tally = RowTally::new();
        // Slots 0 and 1 held at once by waiters 0 and 1 (no overlap); on slot 0, 150–250 by
        // waiter 2 starts before waiter 0's release at 200 (an overlap); slot 1 goes 300 → 350.
        let mut a = waiter(0, &[[0, 100, 200]]);
        a.slots = vec![0];
        let mut b = waiter(1, &[[0, 110, 300], [300, 350, 400]]);
        b.slots = vec![1, 1];
        let mut c = waiter(2, &[[0, 150, 250]]);
        c.slots = vec![0];
        tally.add_step(&[a, b, c], Duration::from_nanos(1_000), 0);
        let row = tally.row("s/x", "s", 0, "semaphore", 1.0, 1.0);
        assert_eq!(row.overlaps, 1);
        assert_eq!(row.handoff.samples, 1);
        assert_eq!(row.most_at_once, 3);
        // Held 100 + 190 + 50 + 100 = 440 ns of 1,000.
        assert!((row.in_use_mean - 0.44).abs() < 1e-9);
    }

    #[test]
    fn an_acquire_before_the_previous_release_counts_as_an_overlap() {
        let mut tally = RowTally::new();
        let records = [waiter(0, &[[0, 100, 300]]), waiter(1, &[[0, 200, 400]])];
        tally.add_step(&records, Duration::from_secs(1), 0);
        let row = tally.row("c/x", "s", 0, "waiting", 1.0, 1.0);
        assert_eq!(row.overlaps, 1);
        assert_eq!(row.handoff.samples, 0);
    }
}
