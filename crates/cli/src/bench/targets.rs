//! The targets a run is measured against (the quorum lock's cost relative to the single-node
//! lock, its behaviour with slow or hung nodes, and both locks against the raw commands they
//! send and against rslock), evaluated on the run's rows.

use std::fmt;

use serde::Serialize;

use super::stats::Row;

/// A target from the issue, evaluated on this run.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Target {
    pub(super) name: String,
    pub(super) limit: String,
    pub(super) measured: Option<f64>,
    pub(super) met: Option<bool>,
}

/// A target met when `measured <= limit` (shown as `<= {shown}`); a measure that is not a
/// finite number is not met nor failed, only missing.
pub(super) fn at_most(name: String, measured: Option<f64>, limit: f64, shown: &str) -> Target {
    let measured = measured.filter(|v| v.is_finite());
    Target {
        name,
        limit: format!("<= {shown}"),
        measured,
        met: measured.map(|v| v <= limit),
    }
}

/// The bound a target sets on a ratio.
#[derive(Debug, Clone, Copy)]
enum Limit {
    AtMost(f64),
    AtLeast(f64),
}

impl Limit {
    fn met(self, v: f64) -> bool {
        match self {
            Limit::AtMost(limit) => v <= limit,
            Limit::AtLeast(limit) => v >= limit,
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::AtMost(limit) => write!(f, "<= {limit}"),
            Limit::AtLeast(limit) => write!(f, ">= {limit}"),
        }
    }
}

/// The targets on this run's rows; the fault targets only where the fault scenarios ran.
pub(super) fn evaluate_targets(rows: &[Row], n: usize, local: bool) -> Vec<Target> {
    let get = |id: &str| rows.iter().find(|r| r.id == id);
    let quorum = format!("quorum-{n}");
    let cycle = get(&format!("cycle/{quorum}")).and_then(|r| r.vs_single);
    let tp64 = get(&format!("tp64/{quorum}")).and_then(|r| r.vs_single);
    let slow = get("fault-acq/slow").and_then(|r| r.vs_healthy);
    let hung = get("fault-acq/hung").and_then(|r| r.vs_healthy);
    let mut targets = vec![
        (
            format!("{quorum} acquire+release p50 / single p50"),
            cycle.map(|r| r.p50),
            Limit::AtMost(1.3),
        ),
        (
            format!("{quorum} acquire+release p99 / single p99"),
            cycle.map(|r| r.p99),
            Limit::AtMost(1.5),
        ),
        (
            format!("{quorum} throughput with 64 tasks / single"),
            tp64.map(|r| r.ops_per_s),
            Limit::AtLeast(0.4),
        ),
    ];
    // Issue 12: our locks against the very commands they send, and against rslock.
    let ratio = |id: &str, of: &str, base: &str, field: fn(&Row) -> f64| {
        let (a, b) = (get(&format!("{id}/{of}"))?, get(&format!("{id}/{base}"))?);
        Some(field(a) / field(b))
    };
    let ops = |r: &Row| r.ops_per_s;
    let allocs = |name: &str| get(&format!("cycle/{name}")).and_then(|r| r.allocs_per_cycle);
    targets.extend(single_against_floors(rows));
    targets.extend([
        (
            format!("{quorum} throughput with 64 tasks / rslock-{n}"),
            ratio("tp64", &quorum, &format!("rslock-{n}"), ops),
            Limit::AtLeast(1.5),
        ),
        (
            format!("{quorum} throughput with 64 tasks / raw-{n}"),
            ratio("tp64", &quorum, &format!("raw-{n}"), ops),
            Limit::AtLeast(1.1),
        ),
        (
            "single allocations per cycle (half of 35)".to_owned(),
            allocs("single"),
            Limit::AtMost(17.5),
        ),
        (
            format!("{quorum} allocations per cycle (half of 130)"),
            allocs(&quorum),
            Limit::AtMost(65.0),
        ),
    ]);
    if local {
        targets.push((
            "2 of 5 slow (+20 ms): acquire p50 / healthy p50".to_owned(),
            slow.map(|r| r.p50),
            Limit::AtMost(1.5),
        ));
        targets.push((
            "1 of 5 hung: acquire p99 / healthy p99".to_owned(),
            hung.map(|r| r.p99),
            Limit::AtMost(2.0),
        ));
    }
    checked(targets)
}

/// The single-node lock against its raw floors (the same commands over plain redis-rs): one
/// task's acquire+release p50 and 64 tasks' cycles per second, against `raw-1` (`TCP_NODELAY`
/// like the lock) and, where measured, `raw-1-nagle` (redis-rs's default socket, Nagle on).
fn single_against_floors(rows: &[Row]) -> Vec<(String, Option<f64>, Limit)> {
    let get = |id: &str| rows.iter().find(|r| r.id == id);
    let ratio = |id: &str, lock: &str, base: &str, field: fn(&Row) -> f64| {
        let (a, b) = (get(&format!("{id}/{lock}"))?, get(&format!("{id}/{base}"))?);
        Some(field(a) / field(b))
    };
    let mut targets = Vec::new();
    // The lock with its defaults against each floor; then like for like, the lock without
    // `TCP_NODELAY` against the floor with redis-rs's default socket (Nagle on), where measured.
    let pairs = [
        ("single", "raw-1"),
        ("single", "raw-1-nagle"),
        ("single-nagle", "raw-1-nagle"),
    ];
    for (lock, floor) in pairs {
        if get(&format!("cycle/{floor}")).is_none() || get(&format!("cycle/{lock}")).is_none() {
            continue;
        }
        targets.push((
            format!("{lock} acquire+release p50 / {floor} p50"),
            ratio("cycle", lock, floor, |r| r.p50_us),
            Limit::AtMost(1.05),
        ));
        targets.push((
            format!("{lock} throughput with 64 tasks / {floor}"),
            ratio("tp64", lock, floor, |r| r.ops_per_s),
            Limit::AtLeast(0.95),
        ));
    }
    targets
}

/// The targets the single-node section (`--only single`) is held to.
pub(super) fn single_targets(rows: &[Row]) -> Vec<Target> {
    checked(single_against_floors(rows))
}

/// Each target's measured value checked against its limit.
fn checked(targets: Vec<(String, Option<f64>, Limit)>) -> Vec<Target> {
    targets
        .into_iter()
        .map(|(name, measured, limit)| {
            let measured = measured.filter(|v| v.is_finite());
            Target {
                name,
                limit: limit.to_string(),
                measured,
                met: measured.map(|v| limit.met(v)),
            }
        })
        .collect()
}
