//! What `quorumlock bench` measures on the direct nodes, and how: sequential acquire+release
//! (with the references beside our locks: raw redis-rs floors, rslock; and the fenced quorum
//! lock beside the plain one), allocations per cycle, throughput and contended hand-off. Every
//! scenario runs its locks interleaved in rounds, so that a drift in the machine's speed hits
//! them alike.

use std::time::Duration;

use quorumlock::Lock;

use super::contender::Contender;
use super::loops::{self, Batch, allocs_per_cycle, cycles, timed_cycles, warm_up};
use super::plan::Plan;
use super::progress::Progress;
use super::stats::{Row, Tally};

/// A lock under test with its display name and row-id stem.
pub(super) struct Subject {
    pub(super) name: String,
    pub(super) lock: Lock,
    /// For a lock with fencing on, the name of the same lock without it, which its rows are
    /// also compared with.
    pub(super) plain: Option<String>,
}

/// The scenario of the sequential rows.
const CYCLE: &str = "acquire+release, 1 task";
/// The resource of the sequential warm-up, and the stem of the sequential cycles' resources.
const CYCLE_KEYS: &str = "cycle";
/// The resource of the allocation count.
const ALLOC_KEY: &str = "alloc";

/// Sequential cycles per lock in each round.
fn per_round(plan: &Plan) -> u64 {
    (plan.cycle_ops / plan.rounds).max(1)
}

/// Every resource [`sequential`] and [`allocations`] may lock a subject on.
pub(super) fn subject_resources(plan: &Plan) -> impl Iterator<Item = String> {
    let cycles = (0..plan.rounds * per_round(plan)).map(|i| format!("{CYCLE_KEYS}:{i}"));
    [CYCLE_KEYS.to_owned(), ALLOC_KEY.to_owned()]
        .into_iter()
        .chain(cycles)
}

/// Sequential acquire+release on every subject and on every reference (the raw commands,
/// rslock, like-for-like variants), interleaved in rounds.
pub(super) async fn sequential(
    subjects: &[Subject],
    references: &[(String, Contender)],
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<Row>, String> {
    for subject in subjects {
        warm_up(&subject.lock, CYCLE_KEYS).await;
    }
    for (_, reference) in references {
        reference.warm_up(CYCLE_KEYS).await;
    }
    let mut tallies: Vec<Tally> = subjects.iter().map(|_| Tally::new()).collect();
    let mut reference_tallies: Vec<Tally> = references.iter().map(|_| Tally::new()).collect();
    let per_round = per_round(plan);
    let cap = Duration::from_millis(plan.cycle_cap_ms / plan.rounds);
    for round in 0..plan.rounds {
        let batch = |key_base| Batch {
            key_base,
            first: round * per_round,
            ops: per_round,
            cap,
        };
        for (subject, tally) in subjects.iter().zip(&mut tallies) {
            progress.round(CYCLE, &subject.name, round, plan.rounds);
            cycles(&subject.lock, batch(CYCLE_KEYS), tally).await;
        }
        for ((name, reference), tally) in references.iter().zip(&mut reference_tallies) {
            progress.round(CYCLE, name, round, plan.rounds);
            timed_cycles(batch(name), tally, async |key| reference.cycle(key).await).await;
        }
    }
    let mut rows = Vec::new();
    for (subject, tally) in subjects.iter().zip(tallies) {
        let row = cycle_row(&subject.name, tally).vs_single("cycle/single");
        rows.push(match &subject.plain {
            Some(plain) => row.vs_plain(&format!("cycle/{plain}")),
            None => row,
        });
        progress.done(1);
    }
    for ((name, _), tally) in references.iter().zip(reference_tallies) {
        rows.push(cycle_row(name, tally).vs_single(&format!("cycle/{}", baseline(name))));
    }
    Ok(rows)
}

/// What a reference's rows are compared with: the raw floors with the raw single node (their
/// ratio is what a quorum costs at the least), anything else with our single-node lock.
fn baseline(name: &str) -> &'static str {
    if name.starts_with("raw-") {
        "raw-1"
    } else {
        "single"
    }
}

fn cycle_row(name: &str, tally: Tally) -> Row {
    Row::new(
        &format!("cycle/{name}"),
        CYCLE,
        name,
        "acquire+release",
        tally,
    )
}

/// Allocations per acquire+release cycle of every subject, written into its `cycle/` row.
pub(super) async fn allocations(
    subjects: &[Subject],
    rows: &mut [Row],
    plan: &Plan,
    progress: &Progress,
) {
    for subject in subjects {
        progress.step(format!("allocations per cycle: {}", subject.name));
        let allocs = allocs_per_cycle(&subject.lock, ALLOC_KEY, plan.alloc_cycles).await;
        if let Some(row) = rows
            .iter_mut()
            .find(|r| r.id == format!("cycle/{}", subject.name))
        {
            row.allocs_per_cycle = Some(allocs);
        }
        progress.done(1);
    }
}

/// Throughput with each of `plan.tasks` tasks, cycling on distinct keys: our two locks at every
/// step, the references beside them at the largest (where the targets are set).
pub(super) async fn throughput(
    pair: &[(&str, Contender)],
    references: &[(String, Contender)],
    plan: &Plan,
    progress: &Progress,
) -> Vec<Row> {
    let most = plan.tasks.iter().copied().max().unwrap_or_default();
    let everyone: Vec<(&str, Contender)> = pair
        .iter()
        .cloned()
        .chain(
            references
                .iter()
                .map(|(name, c)| (name.as_str(), c.clone())),
        )
        .collect();
    for (_, contender) in &everyone {
        contender.warm_up("tp-warm").await;
    }
    let slice = Duration::from_millis(plan.throughput_ms / plan.rounds);
    let mut rows = Vec::new();
    for &tasks in &plan.tasks {
        let scenario = format!("throughput, {}", plural_tasks(tasks));
        let measured = alternate(
            if tasks == most { &everyone } else { pair },
            &format!("tp{tasks}"),
            &scenario,
            "acquire+release",
            plan,
            progress,
            async |contender, round, tally| {
                let tag = format!("tp{tasks}:{round}");
                loops::throughput(contender, &tag, tasks, slice, tally).await;
            },
        )
        .await;
        progress.done(measured.len() as u64);
        rows.extend(measured);
    }
    rows
}

/// `contenders` tasks wanting one key: the time from a release to the next holder's acquire.
pub(super) async fn handoff(
    pair: &[(&str, &Lock)],
    contenders: usize,
    plan: &Plan,
    progress: &Progress,
) -> Vec<Row> {
    let slice = Duration::from_millis(plan.handoff_ms / plan.rounds);
    let max = plan.handoff_max / plan.rounds;
    let hold = Duration::from_micros(plan.handoff_hold_us);
    let rows = alternate(
        pair,
        "handoff",
        &format!("hand-off, {contenders} contenders"),
        "hand-off",
        plan,
        progress,
        async |lock, round, tally| {
            let key = format!("handoff:{round}");
            loops::handoff(lock, &key, contenders, slice, max, hold, tally).await;
        },
    )
    .await;
    progress.done(rows.len() as u64);
    rows
}

/// Runs one scenario on named locks or contenders (the single-node lock first), alternating
/// between them in `plan.rounds` rounds; `measure(lock, round, tally)` measures one round of one.
/// Returns one row per name, `{stem}/{name}`, compared with `{stem}/single`.
pub(super) async fn alternate<T>(
    pair: &[(&str, T)],
    stem: &str,
    scenario: &str,
    measured: &str,
    plan: &Plan,
    progress: &Progress,
    mut measure: impl AsyncFnMut(&T, u64, &mut Tally),
) -> Vec<Row> {
    let mut tallies: Vec<Tally> = pair.iter().map(|_| Tally::new()).collect();
    for round in 0..plan.rounds {
        for ((name, lock), tally) in pair.iter().zip(&mut tallies) {
            progress.round(scenario, name, round, plan.rounds);
            measure(lock, round, tally).await;
        }
    }
    pair.iter()
        .zip(tallies)
        .map(|((name, _), tally)| {
            Row::new(&format!("{stem}/{name}"), scenario, name, measured, tally)
                .vs_single(&format!("{stem}/single"))
        })
        .collect()
}

fn plural_tasks(tasks: usize) -> String {
    if tasks == 1 {
        "1 task".to_owned()
    } else {
        format!("{tasks} tasks")
    }
}
