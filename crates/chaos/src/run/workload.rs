//! The contending clients: each task acquires its resource in a single round and, on success,
//! holds it with one of three behaviours drawn per hold (a third each): careful, to the edge of
//! the validity, or extending it. Every protected write is a read-modify-write in the protected
//! store ([`StoreClient`]). In [`Scenario::ClientStall`](crate::Scenario::ClientStall) some
//! holders stall past the validity and write anyway; in [`Scenario::NoLock`](crate::Scenario::NoLock)
//! the clients skip the lock and just write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::{Guard, Lock, NodeError, NodeOutcome, NodeReply};

use super::store::StoreClient;
use crate::history::{HoldId, Outcome, Recorder, StampedWrite};

/// Upper bound on acquisition attempts per client task, on top of the time bound.
const MAX_ATTEMPTS_PER_CLIENT: u64 = 1_000_000;

/// How long before `valid_until` an edge write is invoked. Every protected write of a holder is
/// given up at its `valid_until` (unacknowledged, then the holder lets the lock expire instead of
/// releasing), so a write never completes after the validity it was made under; the margin is
/// what the write's two loopback round trips to the store (0.1–0.5 ms, more when the machine is
/// busy) get to finish before that deadline, so that on a correct lock nearly every edge write is
/// acknowledged and clean. A lock that overstates its validity by 5 % of the 400 ms TTL lets the
/// next holder in up to 14 ms before the edge write, far more than the margin.
const EDGE_MARGIN: Duration = Duration::from_millis(2);

/// How long a write gets that is not bounded by a validity (the stalled writer's, which no longer
/// looks at its validity, and those of [`Scenario::NoLock`](crate::Scenario::NoLock)). The store
/// is local and never faulted: it answers in well under a millisecond.
const STORE_TIMEOUT: Duration = Duration::from_millis(100);

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

/// How a holder uses one hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Writes spread over 50–95 % of the validity, each checked against it, then releases.
    Careful,
    /// Writes at once, then keeps the lock until [`EDGE_MARGIN`] before `valid_until` and writes
    /// there; then releases or lets the lock expire (a coin toss).
    Edge,
    /// Writes at once, extends once or twice (halfway through what is left) and writes after
    /// each extension, then writes at the edge of the extended validity and releases.
    Extender,
}

impl Behaviour {
    /// A behaviour for the next hold: a third each.
    fn draw() -> Behaviour {
        match rand::random_range(0..3u8) {
            0 => Behaviour::Careful,
            1 => Behaviour::Edge,
            _ => Behaviour::Extender,
        }
    }
}

/// How a hold ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The holder releases.
    Release,
    /// The holder never releases: the keys expire. Also after a write that was sent but not
    /// acknowledged: it may still land, so the holder keeps out the next one as long as it can.
    Expire,
}

/// A random duration in `[low, high)` (`low` if the range is empty).
fn random_between(low: Duration, high: Duration) -> Duration {
    if high <= low {
        return low;
    }
    low + (high - low).mul_f64(rand::random::<f64>())
}

/// One client task: its resource, the plan, and its connection to the store.
pub(super) struct Client {
    id: usize,
    resource: String,
    plan: Arc<ClientPlan>,
    store: StoreClient,
}

impl Client {
    /// Client `id` (it wants resource `id mod resources`), or `None` without resources.
    pub(super) fn new(id: usize, plan: Arc<ClientPlan>, store: StoreClient) -> Option<Client> {
        let resource = plan
            .resources
            .get(id % plan.resources.len().max(1))?
            .clone();
        Some(Client {
            id,
            resource,
            plan,
            store,
        })
    }

    /// One protected write under `token`, given up at `deadline`, recorded (unless the deadline
    /// had passed and nothing was sent). Whether it is settled: acknowledged, or no write sent,
    /// so that nothing of it can land later.
    async fn write(&mut self, token: &str, deadline: Instant) -> bool {
        let Some(increment) = self.store.increment(&self.resource, token, deadline).await else {
            return true;
        };
        self.plan.recorder.write(StampedWrite {
            resource: &self.resource,
            holder: self.id,
            token,
            invoked: increment.invoked,
            completed: increment.completed,
            read: increment.read,
            written: increment.written,
            acked: increment.acked,
        });
        increment.acked || increment.written.is_none()
    }

    /// Acquire (one round), on success hold the lock with a behaviour drawn for the hold,
    /// release or let it expire; on failure back off a little; until the deadline.
    pub(super) async fn run(mut self, lock: Lock) {
        let ms = Duration::from_millis;
        let mut holds = 0u64;
        for _ in 0..MAX_ATTEMPTS_PER_CLIENT {
            if Instant::now() >= self.plan.deadline {
                break;
            }
            let started = Instant::now();
            let result = lock.try_acquire(&self.resource).await;
            let finished = Instant::now();
            let outcome = Outcome::of(&result);
            let recorder = self.plan.recorder.clone();
            recorder.attempt(&self.resource, self.id, started, finished, outcome);
            let Ok(mut guard) = result else {
                tokio::time::sleep(random_between(ms(5), ms(25))).await;
                continue;
            };
            holds += 1;
            let token = guard.token().as_str().to_owned();
            // One reading of the validity, both recorded and written under: the guard maps it
            // to the `Instant` clock afresh at each call.
            let valid_until = guard.valid_until();
            let hold = recorder.begin_hold(
                &self.resource,
                self.id,
                &token,
                started,
                guard.decided_at(),
                valid_until,
            );
            // Stalling clients: the first client on each resource, every other hold.
            let stall =
                self.plan.stall && self.id < self.plan.resources.len() && !holds.is_multiple_of(2);
            let end = match if stall {
                Behaviour::Careful
            } else {
                Behaviour::draw()
            } {
                Behaviour::Careful => self.careful(valid_until, &token, stall).await,
                Behaviour::Edge => self.edge(valid_until, &token).await,
                Behaviour::Extender => self.extender(&mut guard, hold, valid_until, &token).await,
            };
            match end {
                End::Release => {
                    recorder.end_hold(hold, Instant::now());
                    let _report = guard.release().await;
                }
                End::Expire => {
                    // The keys live at least until `valid_until` + the drift (6 ms at 400 ms):
                    // keep the guard past that, so that its release on drop finds them gone.
                    let expired = guard.valid_until() + self.plan.ttl / 10;
                    tokio::time::sleep_until(expired.into()).await;
                    drop(guard);
                }
            }
            tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
        }
        lock.settle().await;
    }

    /// [`Behaviour::Careful`]; with `stall`, the second write comes after a pause that outlasts
    /// the validity.
    async fn careful(&mut self, valid_until: Instant, token: &str, stall: bool) -> End {
        let validity = valid_until.saturating_duration_since(Instant::now());
        let hold_for = validity.mul_f64(0.5 + 0.45 * rand::random::<f64>());
        let spacing = hold_for / self.plan.writes_per_hold;
        for write in 0..self.plan.writes_per_hold {
            if write > 0 {
                tokio::time::sleep(spacing).await;
            }
            if stall && write == 1 {
                // A pause between the validity check and the write (a long GC, a stopped VM):
                // the writer wakes after its keys have expired and writes anyway.
                let recorder = self.plan.recorder.clone();
                let pause = recorder.client_fault("client paused", &self.resource);
                tokio::time::sleep_until((valid_until + self.plan.ttl / 2).into()).await;
                recorder.lift(pause);
                if !self.write(token, Instant::now() + STORE_TIMEOUT).await {
                    return End::Expire;
                }
                continue;
            }
            // The careful writer: only while the validity runs, and never past it.
            if Instant::now() >= valid_until {
                break;
            }
            if !self.write(token, valid_until).await {
                return End::Expire;
            }
        }
        tokio::time::sleep_until((Instant::now() + spacing).min(valid_until).into()).await;
        End::Release
    }

    /// Waits until [`EDGE_MARGIN`] before `valid_until` and writes there, under that deadline;
    /// whether the write is settled.
    async fn edge_write(&mut self, token: &str, valid_until: Instant) -> bool {
        let edge = valid_until.checked_sub(EDGE_MARGIN).unwrap_or(valid_until);
        tokio::time::sleep_until(edge.into()).await;
        self.write(token, valid_until).await
    }

    /// [`Behaviour::Edge`].
    async fn edge(&mut self, valid_until: Instant, token: &str) -> End {
        let settled =
            self.write(token, valid_until).await && self.edge_write(token, valid_until).await;
        if settled && rand::random::<bool>() {
            End::Release
        } else {
            End::Expire
        }
    }

    /// [`Behaviour::Extender`].
    async fn extender(
        &mut self,
        guard: &mut Guard,
        hold: HoldId,
        mut valid_until: Instant,
        token: &str,
    ) -> End {
        if !self.write(token, valid_until).await {
            return End::Expire;
        }
        for _ in 0..rand::random_range(1..=2u8) {
            let halfway = valid_until.saturating_duration_since(Instant::now()) / 2;
            tokio::time::sleep(halfway).await;
            if guard.extend(self.plan.ttl).await.is_err() {
                break;
            }
            valid_until = guard.valid_until();
            self.plan.recorder.extend_hold(hold, valid_until);
            if !self.write(token, valid_until).await {
                return End::Expire;
            }
        }
        if self.edge_write(token, valid_until).await {
            End::Release
        } else {
            End::Expire
        }
    }

    /// [`Scenario::NoLock`](crate::Scenario::NoLock): writes as a careful holder would, in
    /// sessions of one made-up token each, without ever taking the lock.
    pub(super) async fn run_without_lock(mut self) {
        let ms = Duration::from_millis;
        for session in 0..MAX_ATTEMPTS_PER_CLIENT {
            if Instant::now() >= self.plan.deadline {
                break;
            }
            let token = format!("no-lock-{}-{session}", self.id);
            let hold_for = self.plan.ttl.mul_f64(0.5 + 0.45 * rand::random::<f64>());
            let spacing = hold_for / self.plan.writes_per_hold;
            for write in 0..self.plan.writes_per_hold {
                if write > 0 {
                    tokio::time::sleep(spacing).await;
                }
                self.write(&token, Instant::now() + STORE_TIMEOUT).await;
            }
            tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
        }
    }
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
