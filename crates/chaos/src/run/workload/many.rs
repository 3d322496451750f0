//! The many leases of [`Scenario::ManyLeases`](crate::Scenario::ManyLeases): beside its kept
//! holder of a contended resource (as in `keep-alive-loss`), each client's lock keeps alive a
//! lease on every bulk resource of its own block and of its neighbour's block it can win, so
//! each bulk resource has two contenders and the keeper of every lock carries hundreds of
//! leases in its batches while the nemesis strikes.
//!
//! A bulk lease is held for 2–6 TTLs (several extensions), then released; one the lease says is
//! lost ends its hold at the signal. Every hold is recorded as the kept holder's are (the
//! guard's validity, the lease's margin, its readings and its lost signal), without writes: the
//! checker's overlap and late-signal checks see them all. The client first tries every bulk
//! resource, then every TTL an eighth of them drawn from those it does not hold, a few at a
//! time.

use std::collections::HashSet;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use quorumlock::{KeptGuard, Lease, Lock};
use rand::seq::SliceRandom;
use tokio::task::JoinSet;

use super::kept::keep;
use super::{ClientPlan, random_between};
use crate::checker::CheckReport;
use crate::history::{History, HoldId, LossReason, Outcome, Recorder};
use crate::run::{ChaosError, RunOptions};
use crate::scenario::Scenario;

/// What every bulk resource's name starts with.
const BULK_PREFIX: &str = "bulk-";

/// How many of its bulk resources a client tries at once in a sweep.
const SWEEP_CONCURRENCY: usize = 16;

/// After its first sweep, a client tries at most one in this many of its bulk resources per
/// sweep (and at least [`SWEEP_CONCURRENCY`]).
const RETRIED_PER_SWEEP: usize = 8;

/// Upper bound on a client's sweeps, on top of the time bound.
const MAX_SWEEPS: u32 = 100_000;

/// The bulk resources client `id` of `clients` contends for: its block of `per_client` and its
/// neighbour's (round the ring), so that every bulk resource has two contenders (one, with one
/// client).
pub(in crate::run) fn bulk_resources(id: usize, clients: usize, per_client: usize) -> Vec<String> {
    let next = (id + 1) % clients.max(1);
    let mut blocks = vec![id];
    if next != id {
        blocks.push(next);
    }
    blocks
        .into_iter()
        .flat_map(|block| (0..per_client).map(move |j| format!("{BULK_PREFIX}{block}-{j}")))
        .collect()
}

/// Client `id`'s bulk leases on `resources` (see the module docs), until the plan's deadline;
/// then it releases the ones it still holds.
pub(in crate::run) async fn keep_many(
    id: usize,
    lock: Lock,
    plan: Arc<ClientPlan>,
    resources: Vec<String>,
) {
    let mut holders = JoinSet::new();
    let mut held = HashSet::new();
    for sweep in 0..MAX_SWEEPS {
        let now = Instant::now();
        if now >= plan.deadline {
            break;
        }
        while let Some(done) = holders.try_join_next() {
            if let Ok(index) = done {
                held.remove(&index);
            }
        }
        let mut free: Vec<usize> = (0..resources.len())
            .filter(|index| !held.contains(index))
            .collect();
        if sweep > 0 {
            // After the first sweep, a sample: half the free ones are the neighbour's, and
            // trying them all every TTL would load the nodes with failing attempts far more
            // than the keep-alive the scenario is about.
            free.shuffle(&mut rand::rng());
            free.truncate((resources.len() / RETRIED_PER_SWEEP).max(SWEEP_CONCURRENCY));
        }
        let attempts = futures::stream::iter(free)
            .map(|index| {
                let lock = &lock;
                let plan = &plan;
                let resource = resources.get(index).map(String::as_str);
                async move { Some((index, take(lock, plan, id, resource?).await?)) }
            })
            .buffer_unordered(SWEEP_CONCURRENCY)
            .filter_map(std::future::ready);
        let mut attempts = pin!(attempts);
        // Each hold is watched from the moment it is won: a sweep under faults can take longer
        // than a lease lives, and its lost signal is stamped when its holder sees it.
        while let Some((index, kept)) = attempts.next().await {
            held.insert(index);
            let end =
                (Instant::now() + random_between(plan.ttl * 2, plan.ttl * 6)).min(plan.deadline);
            holders.spawn(async move {
                kept.hold_until(end).await;
                index
            });
        }
        let next = (now + plan.ttl).min(plan.deadline);
        tokio::time::sleep_until(next.into()).await;
    }
    // Every hold ends by the deadline: wait for their releases.
    while holders.join_next().await.is_some() {}
    lock.settle().await;
}

/// A bulk lease being kept, and its hold in the history.
struct KeptHold {
    kept: KeptGuard,
    lease: Lease,
    hold: HoldId,
    recorder: Recorder,
}

/// One attempt at `resource` (recorded); on success its hold, recorded and kept alive.
async fn take(lock: &Lock, plan: &ClientPlan, id: usize, resource: &str) -> Option<KeptHold> {
    let recorder = plan.recorder.clone();
    let started = Instant::now();
    let result = lock.try_acquire(resource).await;
    recorder.attempt(resource, id, started, Instant::now(), Outcome::of(&result));
    let guard = result.ok()?;
    let hold = recorder.begin_hold(
        resource,
        id,
        guard.token().as_str(),
        started,
        guard.decided_at(),
        guard.valid_until(),
    );
    let kept = keep(guard, hold, &recorder)?;
    let lease = kept.lease();
    Some(KeptHold {
        kept,
        lease,
        hold,
        recorder,
    })
}

impl KeptHold {
    /// Holds until `end` or the lost signal, whichever comes first, records how the hold
    /// ended, and releases.
    async fn hold_until(self, end: Instant) {
        let KeptHold {
            kept,
            lease,
            hold,
            recorder,
        } = self;
        tokio::select! {
            biased;
            lost = lease.lost() => {
                let seen = Instant::now();
                recorder.lease_read(hold, lease.extensions(), lease.valid_until());
                recorder.lost(hold, seen, LossReason::of(&lost));
                recorder.end_hold(hold, seen);
            }
            () = tokio::time::sleep_until(end.into()) => {
                recorder.lease_read(hold, lease.extensions(), lease.valid_until());
                recorder.end_hold(hold, Instant::now());
            }
        }
        let _report = kept.release().await;
    }
}

/// The self-check of [`Scenario::ManyLeases`](crate::Scenario::ManyLeases): at some instant at
/// least half of the `leases` bulk resources had a lease kept (else the keepers never carried
/// many, and the run proved nothing about them). A run that is otherwise clean but never got
/// there fails ([`ChaosError::EffectNotShown`]); one with findings is reported as it is. The
/// notes give the most kept at once, and the kept holds extended and lost.
pub(in crate::run) fn many_kept_at_once(
    history: &History,
    check: &CheckReport,
    leases: usize,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    // Windows are half-open: at one instant an end comes before a start.
    let mut edges: Vec<(u64, i64)> = history
        .holds
        .iter()
        .filter(|hold| hold.keep_alive.is_some() && hold.resource.starts_with(BULK_PREFIX))
        .flat_map(|hold| {
            let (start, end) = hold.window();
            [(start, 1), (end, -1)]
        })
        .collect();
    edges.sort_unstable();
    let (_, most) = edges.iter().fold((0i64, 0i64), |(now, most), &(_, step)| {
        (now + step, most.max(now + step))
    });
    let most = usize::try_from(most).unwrap_or(0);
    let kept = check.keep_alive;
    let evidence = format!(
        "at most {most} of {leases} bulk lease(s) kept at once; {} hold(s) kept alive in all, \
         {} extended at least once, {} lost ({} expired, {} taken, {} other)",
        kept.holds, kept.extended, kept.lost, kept.lost_expired, kept.lost_taken, kept.lost_other,
    );
    if check.is_safe() && most.saturating_mul(2) < leases {
        return Err(ChaosError::EffectNotShown {
            scenario: Scenario::ManyLeases,
            evidence,
        });
    }
    notes.push(format!("self-check: {evidence}"));
    Ok(())
}

/// The least TTL [`Scenario::ManyLeases`](crate::Scenario::ManyLeases) runs with. A lease's lost
/// signal is a timer that fires its margin (2 % of the TTL, at least 5 ms) before the validity
/// ends; when a majority goes away, every lease is lost within one interval, and the tasks
/// woken by those losses delay the next timers and their observers. At 400 ms (margin 8 ms)
/// with 1,200 leases on two cores, one of two 10 s runs saw 51 of 3,853 lost signals come after
/// the validity (by up to 4.8 ms); at 1 s (20 ms), none (docs/chaos.md, `many-leases`).
const LEASES_TTL_FLOOR: Duration = Duration::from_secs(1);

/// `options` with the TTL raised to [`LEASES_TTL_FLOOR`] if it is shorter, noted.
pub(in crate::run) fn ttl_for_leases(options: &RunOptions, notes: &mut Vec<String>) -> RunOptions {
    if options.ttl >= LEASES_TTL_FLOOR {
        return options.clone();
    }
    notes.push(format!(
        "ttl raised from {} ms to {} ms: a lease's margin (2 % of the TTL) must cover how late \
         timers and tasks run while hundreds of leases are lost at once",
        options.ttl.as_millis(),
        LEASES_TTL_FLOOR.as_millis()
    ));
    options.clone().ttl(LEASES_TTL_FLOOR)
}
