//! Sets of resources: acquire+release of 1, 4 and 16 resources as one set (`try_acquire` of a `Resources`)
//! beside the same number of single locks taken one after the other and released, p50 and p99,
//! interleaved in rounds in one run over the same five local nodes; and what one set's script
//! costs the server at the largest set (`MAX_RESOURCES` keys), from `INFO commandstats`.

use crate::units::fmt_us;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use quorumlock::{Lock, MAX_RESOURCES, Resources};
use quorumlock_harness::TestCluster;
use serde::Serialize;

use super::loops::warm_up;
use super::stats::{Row, Tally, record};
use crate::text_table::aligned;

/// The set sizes compared.
pub(super) const SIZES: [usize; 3] = [1, 4, 16];

/// Cycles per row: quick and full runs.
pub(super) fn cycles(quick: bool) -> u64 {
    if quick { 200 } else { 2_000 }
}

/// Cycles of the server-cost loop at [`MAX_RESOURCES`] keys.
const SERVER_COST_CYCLES: u64 = 200;

/// One set size: the set beside the sequence of single locks.
#[derive(Debug, Clone, Serialize)]
pub(super) struct SetRow {
    pub(super) resources: usize,
    pub(super) set: Row,
    pub(super) sequence: Row,
}

/// The section's figures.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Sets {
    pub(super) rows: Vec<SetRow>,
    /// Server time per script (acquire or release of a whole set) at `MAX_RESOURCES` keys,
    /// averaged over the five nodes' `cmdstat_eval`, in microseconds.
    pub(super) server_us_per_script_at_max: Option<f64>,
}

/// The resource names of cycle `cycle` of a size-`size` run of `kind`: fresh names per cycle, so
/// that a release still finishing on a slow node never meets the next cycle's acquisition.
fn names(kind: &str, size: usize, cycle: u64) -> Vec<String> {
    (0..size)
        .map(|i| format!("sets:{kind}:{size}:{cycle}:{i}"))
        .collect()
}

/// One acquire+release of `names` as one set; whether it held.
async fn set_cycle(lock: &Lock, names: &[String]) -> bool {
    let Ok(resources) = Resources::new(names) else {
        return false;
    };
    match lock.try_acquire(&resources).await {
        Ok(guard) => {
            guard.release().await;
            true
        }
        Err(_) => false,
    }
}

/// The same resources as single locks, taken one after the other, then released; whether all
/// of them held.
async fn sequence_cycle(lock: &Lock, names: &[String]) -> bool {
    let mut guards = Vec::with_capacity(names.len());
    for name in names {
        match lock.try_acquire(name).await {
            Ok(guard) => guards.push(guard),
            Err(_) => break,
        }
    }
    let all = guards.len() == names.len();
    for guard in guards {
        guard.release().await;
    }
    all
}

/// Runs the section on `lock` (over `cluster`'s nodes): `cycles` cycles per row, in `rounds`
/// rounds that alternate the set and the sequence, each round capped at `cap`.
pub(super) async fn sets(
    cluster: &TestCluster,
    lock: &Lock,
    cycles: u64,
    rounds: u64,
    cap: Duration,
) -> Result<Sets, String> {
    warm_up(lock, "sets:warm-up").await;
    let per_round = (cycles / rounds.max(1)).max(1);
    let mut rows = Vec::new();
    for size in SIZES {
        let (mut set, mut sequence) = (Tally::new(), Tally::new());
        let mut cycle = 0u64;
        for round in 0..rounds.max(1) {
            // Alternate which goes first, so that neither always runs on a warmer machine.
            let order = if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for as_set in order {
                let tally = if as_set { &mut set } else { &mut sequence };
                let started = Instant::now();
                for _ in 0..per_round {
                    if started.elapsed() > cap {
                        break;
                    }
                    cycle = cycle.saturating_add(1);
                    let names = names(if as_set { "set" } else { "seq" }, size, cycle);
                    let began = Instant::now();
                    let held = if as_set {
                        set_cycle(lock, &names).await
                    } else {
                        sequence_cycle(lock, &names).await
                    };
                    record(&mut tally.hist, began.elapsed());
                    if !held {
                        tally.errors = tally.errors.saturating_add(1);
                    }
                }
                tally.wall = tally.wall.saturating_add(started.elapsed());
            }
        }
        let scenario = format!("{size} resources, 1 task");
        rows.push(SetRow {
            resources: size,
            set: Row::new(
                &format!("sets/set-{size}"),
                &scenario,
                "quorum-5, one set",
                "set acquire+release",
                set,
            ),
            sequence: Row::new(
                &format!("sets/sequence-{size}"),
                &scenario,
                "quorum-5, single locks in sequence",
                "acquires+releases",
                sequence,
            ),
        });
    }
    lock.settle().await;
    let server_us_per_script_at_max = server_cost_at_max(cluster, lock).await;
    Ok(Sets {
        rows,
        server_us_per_script_at_max,
    })
}

/// Server time per set script at [`MAX_RESOURCES`] keys: the statistics reset on every node,
/// [`SERVER_COST_CYCLES`] acquire+release cycles of the largest set, then `cmdstat_eval`'s
/// microseconds per call, averaged over the nodes. `None` if a node could not be read.
async fn server_cost_at_max(cluster: &TestCluster, lock: &Lock) -> Option<f64> {
    for node in 0..cluster.len() {
        let mut admin = cluster.connection(node).await.ok()?;
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut admin)
            .await
            .ok()?;
    }
    for cycle in 0..SERVER_COST_CYCLES {
        set_cycle(lock, &names("max", MAX_RESOURCES, cycle)).await;
    }
    lock.settle().await;
    let mut per_call = Vec::new();
    for node in 0..cluster.len() {
        let mut admin = cluster.connection(node).await.ok()?;
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut admin)
            .await
            .ok()?;
        let usec_per_call = stats
            .lines()
            .find_map(|line| line.strip_prefix("cmdstat_eval:"))?
            .split(',')
            .find_map(|field| field.strip_prefix("usec_per_call="))?
            .parse::<f64>()
            .ok()?;
        per_call.push(usec_per_call);
    }
    (!per_call.is_empty()).then(|| per_call.iter().sum::<f64>() / per_call.len() as f64)
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}×", a / b)
    } else {
        "-".to_owned()
    }
}

/// The section as a table: per size, the set and the sequence, and the set's share of the
/// sequence's time.
pub(super) fn render(sets: &Sets) -> String {
    let mut out = String::from(
        "\nsets of resources: acquire+release over 5 local nodes, one task, set and sequence \
         alternating in rounds\n\n",
    );
    let mut rows = vec![
        [
            "resources",
            "set p50",
            "set p99",
            "sequence p50",
            "sequence p99",
            "set÷sequence p50",
            "p99",
            "errors",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for row in &sets.rows {
        rows.push(vec![
            row.resources.to_string(),
            fmt_us(row.set.p50_us),
            fmt_us(row.set.p99_us),
            fmt_us(row.sequence.p50_us),
            fmt_us(row.sequence.p99_us),
            ratio(row.set.p50_us, row.sequence.p50_us),
            ratio(row.set.p99_us, row.sequence.p99_us),
            format!("{} / {}", row.set.errors, row.sequence.errors),
        ]);
    }
    out.push_str(&aligned(&rows, 1));
    match sets.server_us_per_script_at_max {
        Some(us) => {
            let _ = writeln!(
                out,
                "\nserver time per set script at {MAX_RESOURCES} resources (acquire or release, \
                 cmdstat_eval, mean of 5 nodes): {us:.1} µs"
            );
        }
        None => out.push_str("\nserver time per set script: not read\n"),
    }
    out
}
