//! Latency statistics: HDR histograms in nanoseconds, a measured [`Row`] with its percentiles,
//! throughput and CDF points, and its ratios to its baseline rows (the single-node lock, the
//! healthy cluster, the same lock without fencing).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::units::fmt_us;

/// Ratios of one row to a baseline row (row ÷ baseline).
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct Ratios {
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) ops_per_s: f64,
}

/// One measured figure set.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Row {
    /// Unique name, e.g. `cycle/quorum-5`.
    pub(super) id: String,
    /// Scenario, e.g. `acquire+release, 1 task`.
    pub(super) scenario: String,
    /// Which lock: `single` or `quorum-N`, with a qualifier for fault scenarios.
    pub(super) lock: String,
    /// What one sample is: `acquire+release`, `acquire`, `release` or `hand-off`.
    pub(super) measured: String,
    pub(super) samples: u64,
    pub(super) errors: u64,
    pub(super) p50_us: f64,
    pub(super) p90_us: f64,
    pub(super) p99_us: f64,
    pub(super) max_us: f64,
    pub(super) mean_us: f64,
    /// Samples per second of wall time (all tasks together).
    pub(super) ops_per_s: f64,
    /// Allocations per acquire+release cycle, where counted.
    pub(super) allocs_per_cycle: Option<f64>,
    /// The single-node row this one is compared with.
    pub(super) single_id: Option<String>,
    pub(super) vs_single: Option<Ratios>,
    /// The healthy-cluster row this one is compared with (fault scenarios).
    pub(super) healthy_id: Option<String>,
    pub(super) vs_healthy: Option<Ratios>,
    /// The same lock without fencing, for a fenced lock's row.
    pub(super) plain_id: Option<String>,
    pub(super) vs_plain: Option<Ratios>,
    /// `[latency_us, fraction]` points of the latency CDF.
    pub(super) cdf: Vec<[f64; 2]>,
}

/// What one lock added up to in one scenario, over all its rounds: the latencies, the failed
/// operations and the time spent.
#[derive(Debug)]
pub(super) struct Tally {
    pub(super) hist: Histogram<u64>,
    pub(super) errors: u64,
    /// Wall time of the loops, or time inside the timed calls only, as the scenario says.
    pub(super) wall: Duration,
}

impl Tally {
    pub(super) fn new() -> Tally {
        Tally {
            hist: new_histogram(),
            errors: 0,
            wall: Duration::ZERO,
        }
    }
}

pub(super) fn new_histogram() -> Histogram<u64> {
    // Nanoseconds from 1 ns to 10 min, 3 significant digits. The bounds are constants that
    // satisfy `new_with_bounds`' rules (low >= 1, high >= 2 * low, sigfig <= 5).
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("constant histogram bounds are valid")
}

pub(super) fn record(hist: &mut Histogram<u64>, elapsed: Duration) {
    hist.saturating_record(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
}

/// The 99th percentile of `latencies` in µs, read from a histogram as every row's is; `None`
/// for no latency.
pub(super) fn p99_us(latencies: &[Duration]) -> Option<f64> {
    let mut hist = new_histogram();
    for latency in latencies {
        record(&mut hist, *latency);
    }
    (!hist.is_empty()).then(|| us(hist.value_at_quantile(0.99)))
}

fn us(nanos: u64) -> f64 {
    nanos as f64 / 1_000.0
}

impl Row {
    /// Its samples, errors, p50, p90, p99 and max, as table cells.
    pub(super) fn cells(&self) -> [String; 6] {
        [
            self.samples.to_string(),
            self.errors.to_string(),
            fmt_us(self.p50_us),
            fmt_us(self.p90_us),
            fmt_us(self.p99_us),
            fmt_us(self.max_us),
        ]
    }

    pub(super) fn new(id: &str, scenario: &str, lock: &str, measured: &str, tally: Tally) -> Row {
        let Tally { hist, errors, wall } = tally;
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
            plain_id: None,
            vs_plain: None,
            cdf: cdf_points(&hist),
        }
    }

    pub(super) fn vs_single(mut self, id: &str) -> Row {
        self.single_id = Some(id.to_owned());
        self
    }

    pub(super) fn vs_healthy(mut self, id: &str) -> Row {
        self.healthy_id = Some(id.to_owned());
        self
    }

    pub(super) fn vs_plain(mut self, id: &str) -> Row {
        self.plain_id = Some(id.to_owned());
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

pub(super) fn fill_ratios(rows: &mut [Row]) {
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
        if let Some(base) = find(&row.plain_id) {
            row.vs_plain = Some(ratios(row, base));
        }
    }
}

/// The latency table of a section's rows: a header (`count` names the samples' column), then
/// per row its label, samples, errors, p50, p90, p99 and max.
pub(super) fn latency_table<'r>(
    count: &str,
    rows: impl IntoIterator<Item = (String, &'r Row)>,
) -> Vec<Vec<String>> {
    let header = ["row", count, "err", "p50", "p90", "p99", "max"].map(str::to_owned);
    let lines = rows
        .into_iter()
        .map(|(label, row)| std::iter::once(label).chain(row.cells()).collect());
    std::iter::once(header.to_vec()).chain(lines).collect()
}
