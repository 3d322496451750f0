//! The contending clients: each task acquires its resource in a single round, makes protected
//! writes while its guard is valid (in [`Scenario::ClientStall`](crate::Scenario::ClientStall)
//! some holders stall past the validity and write anyway), releases, and records all of it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::{Lock, NodeError, NodeOutcome, NodeReply};

use crate::history::{Outcome, Recorder};

/// Upper bound on acquisition attempts per client task, on top of the time bound.
const MAX_ATTEMPTS_PER_CLIENT: u64 = 1_000_000;

/// What every client task shares.
pub(super) struct ClientPlan {
    pub(super) resources: Vec<String>,
    pub(super) writes_per_hold: u32,
    pub(super) ttl: Duration,
    pub(super) deadline: Instant,
    /// Whether some holds pause past their validity before writing
    /// ([`Scenario::ClientStall`](crate::Scenario::ClientStall)).
    pub(super) stall: bool,
    pub(super) recorder: Recorder,
}

/// A random duration in `[low, high)` (`low` if the range is empty).
fn random_between(low: Duration, high: Duration) -> Duration {
    if high <= low {
        return low;
    }
    low + (high - low).mul_f64(rand::random::<f64>())
}

/// One client: acquire (one round), on success hold for a while doing protected writes while
/// the guard is valid, release; on failure back off a little; until the deadline.
pub(super) async fn run_client(id: usize, lock: Lock, plan: Arc<ClientPlan>) {
    let Some(resource) = plan.resources.get(id % plan.resources.len().max(1)) else {
        return;
    };
    let recorder = &plan.recorder;
    let ms = Duration::from_millis;
    let mut holds = 0u64;
    for _ in 0..MAX_ATTEMPTS_PER_CLIENT {
        if Instant::now() >= plan.deadline {
            break;
        }
        let started = Instant::now();
        let result = lock.try_acquire(resource).await;
        let finished = Instant::now();
        let outcome = Outcome::of(&result);
        recorder.attempt(resource, id, started, finished, outcome);
        let Ok(guard) = result else {
            tokio::time::sleep(random_between(ms(5), ms(25))).await;
            continue;
        };
        holds += 1;
        let token = guard.token().as_str().to_owned();
        let valid_until = guard.valid_until();
        let hold = recorder.begin_hold(
            resource,
            id,
            &token,
            started,
            guard.decided_at(),
            valid_until,
        );
        // Stalling clients: the first client on each resource, every other hold.
        let stall_now = plan.stall && id < plan.resources.len() && !holds.is_multiple_of(2);
        let validity = valid_until.saturating_duration_since(finished);
        let hold_for = validity.mul_f64(0.5 + 0.45 * rand::random::<f64>());
        let spacing = hold_for / plan.writes_per_hold;
        for write in 0..plan.writes_per_hold {
            if write > 0 {
                tokio::time::sleep(spacing).await;
            }
            if stall_now && write == 1 {
                // A pause between the validity check and the write (a long GC, a stopped VM):
                // the writer wakes after its keys have expired and writes anyway.
                let pause = recorder.client_fault("client paused", resource);
                tokio::time::sleep_until((valid_until + plan.ttl / 2).into()).await;
                recorder.lift(pause);
                recorder.write(resource, id, &token, Instant::now());
                continue;
            }
            // The careful writer: check the validity, then write at once (no await between).
            let now = Instant::now();
            if now >= guard.valid_until() {
                break;
            }
            recorder.write(resource, id, &token, now);
        }
        tokio::time::sleep_until((Instant::now() + spacing).min(valid_until).into()).await;
        recorder.end_hold(hold, Instant::now());
        let _report = guard.release().await;
        tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
    }
    lock.settle().await;
}

/// Upper bound on warm-up attempts per client, on top of the time bound.
const MAX_WARM_UP_ATTEMPTS: u32 = 100;
/// How long a client may wait for the nodes to vote before a run, beyond the guard itself.
const WARM_UP_GRACE: Duration = Duration::from_secs(5);

/// Makes `lock`'s connections and waits until every node votes (the restart guard holds back
/// freshly started nodes that do not persist every write): acquires and releases `resource`,
/// after each attempt a node failed as recovering waiting out the time it said was left.
/// Returns whether an acquisition with no node recovering succeeded in time.
pub(super) async fn warm_up(lock: &Lock, resource: String) -> bool {
    let bound = lock.restart_guard().unwrap_or_default() + WARM_UP_GRACE;
    let deadline = Instant::now() + bound;
    for _ in 0..MAX_WARM_UP_ATTEMPTS {
        if Instant::now() >= deadline {
            break;
        }
        let result = lock.try_acquire(&resource).await;
        let left = match &result {
            Ok(guard) => recovering(guard.outcomes()),
            Err(error) => recovering(error.outcomes()),
        };
        if let Ok(guard) = result {
            guard.release().await;
            if left.is_none() {
                return true;
            }
        }
        let pause = left.unwrap_or(Duration::from_millis(20));
        tokio::time::sleep_until((Instant::now() + pause).min(deadline).into()).await;
    }
    false
}

/// The longest time a node said it is still recovering, if any did.
fn recovering(outcomes: &[NodeOutcome]) -> Option<Duration> {
    outcomes
        .iter()
        .filter_map(|outcome| match outcome.reply {
            NodeReply::Failed(NodeError::Recovering { left }) => Some(left),
            _ => None,
        })
        .max()
}
