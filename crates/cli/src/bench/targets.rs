//! The targets a run is measured against (the quorum lock's cost relative to the single-node
//! lock, and its behaviour with slow or hung nodes), evaluated on the run's rows.

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
            Limit::AtMost(limit) => write!(f, "<= {limit:.1}"),
            Limit::AtLeast(limit) => write!(f, ">= {limit:.1}"),
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
