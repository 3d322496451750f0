//! The contending clients: each task acquires its resource in a single round and, on success,
//! holds it with one of three behaviours drawn per hold (a third each): careful, to the edge of
//! the validity, or extending it. Every protected write is a read-modify-write in the protected
//! store ([`StoreClient`]), carrying the hold's fence when the lock hands out fences. In
//! [`Scenario::ClientStall`](crate::Scenario::ClientStall) (and its fenced twin) some holders
//! stall past the validity, until a later holder has written, and write anyway; in
//! [`Scenario::NoLock`](crate::Scenario::NoLock) the clients skip the lock and just write; in
//! [`Scenario::KeepAliveLoss`](crate::Scenario::KeepAliveLoss) every hold is kept alive
//! (`workload/kept.rs`); in [`Scenario::Waiters`](crate::Scenario::Waiters) each client is
//! several callers waiting for the lock (`workload/waiters.rs`); in
//! [`Scenario::Sets`](crate::Scenario::Sets) each takes two resources as one set
//! (`workload/sets.rs`); in [`Scenario::Semaphore`](crate::Scenario::Semaphore) each takes
//! one or two permits of one semaphore (`workload/permits.rs`); in
//! [`Scenario::ReadWrite`](crate::Scenario::ReadWrite) each reads or writes its resource's
//! read-write lock (`workload/sides.rs`); in [`Scenario::Election`](crate::Scenario::Election)
//! each campaigns in its resource's election (`workload/leaders.rs`); in [`Scenario::ManyLeases`](crate::Scenario::ManyLeases) each lock
//! also keeps many bulk leases (`workload/many.rs`).
//!
//! (Just over 500 lines: the behaviours, the stall and the writes all work on one client's
//! state and timing constants, which are easier to check side by side.)

mod kept;
mod leaders;
mod many;
mod permits;
mod sets;
mod sides;
mod waiters;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quorumlock::{Guard, Lock, NodeError, NodeOutcome, NodeReply, Request};
use tokio::sync::watch;

use super::store::StoreClient;
use crate::history::{HoldId, Outcome, Recorder, StampedWrite};
pub(super) use leaders::leaders_elected;
pub(super) use many::{bulk_resources, keep_many, many_kept_at_once, ttl_for_leases};
pub(super) use permits::{SEMAPHORE, semaphore_full};
pub(super) use sides::sides_used;
pub(super) use waiters::waited_in_turn;

/// The label of a stalled holder's pause among the history's faults.
pub(super) const PAUSE_LABEL: &str = "client paused";

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

/// How long a stalled holder waits, after the first ½ TTL past its validity, for a later
/// holder's write to land, in TTLs. Other clients contend every 5–25 ms, so one gets in within
/// a few tens of milliseconds; the bound only matters when none comes (the end of the run).
const STALL_WAIT_TTLS: u32 = 2;

/// The accepted, acknowledged writes to one resource so far, and which client made the last
/// one: what a stalled holder waits on.
#[derive(Debug, Clone, Copy, Default)]
struct Landed {
    writes: u64,
    last_writer: usize,
}

/// What the clients of one resource share.
struct ResourceState {
    /// The holds of the resource so far (one after another, with a correct lock): in a stall
    /// scenario every other one stalls, whichever client holds it.
    holds: AtomicU64,
    /// The writes that landed on it.
    landed: watch::Sender<Landed>,
}

/// What every client task shares.
pub(super) struct ClientPlan {
    resources: Vec<String>,
    writes_per_hold: u32,
    ttl: Duration,
    deadline: Instant,
    /// Whether some holds pause past their validity before writing
    /// ([`Scenario::ClientStall`](crate::Scenario::ClientStall)).
    stall: bool,
    /// Whether every hold is kept alive
    /// ([`Scenario::KeepAliveLoss`](crate::Scenario::KeepAliveLoss)).
    keep_alive: bool,
    recorder: Recorder,
    /// Per resource, by index.
    states: Vec<ResourceState>,
}

impl ClientPlan {
    /// The plan of a run: the resources contended for, the writes per hold, the TTL, when the
    /// clients stop, whether some holds stall or every hold is kept alive, and where everything
    /// is recorded.
    pub(super) fn new(
        resources: Vec<String>,
        writes_per_hold: u32,
        ttl: Duration,
        deadline: Instant,
        (stall, keep_alive): (bool, bool),
        recorder: Recorder,
    ) -> ClientPlan {
        let states = resources
            .iter()
            .map(|_| ResourceState {
                holds: AtomicU64::new(0),
                landed: watch::Sender::new(Landed::default()),
            })
            .collect();
        ClientPlan {
            resources,
            writes_per_hold,
            ttl,
            deadline,
            stall,
            keep_alive,
            recorder,
            states,
        }
    }

    /// Lets `guard`'s keys expire instead of releasing them: it is dropped only once they are
    /// gone. They live at least until `valid_until` + the drift (6 ms at 400 ms); a tenth of a
    /// TTL past the validity, the release on drop finds them gone.
    async fn let_expire(&self, guard: Guard) {
        let expired = guard.valid_until() + self.ttl / 10;
        tokio::time::sleep_until(expired.into()).await;
        drop(guard);
    }

    /// Ends a hold recorded as `holds` (a set's: one per resource): lets its keys expire, or
    /// records its end now and releases it.
    async fn end_holds(&self, guard: Guard, holds: Vec<HoldId>, expire: bool) {
        if expire {
            self.let_expire(guard).await;
        } else {
            let released = Instant::now();
            for hold in holds {
                self.recorder.end_hold(hold, released);
            }
            let _report = guard.release().await;
        }
    }
}

/// What a holder's writes carry: its token, and its fence if the lock hands out fences.
struct Credentials {
    token: String,
    fence: Option<u64>,
}

impl Credentials {
    /// A guard's token and fence.
    fn of(guard: &Guard) -> Credentials {
        Credentials {
            token: guard.token().as_str().to_owned(),
            fence: guard.fence(),
        }
    }
}

impl Client {
    /// One hold per resource `names` (a set's, or the slots of several permits), each with
    /// `guard`'s token and window (to `valid_until`, the one reading of its validity the
    /// writes are made under), so the checker sees each resource as singly held.
    fn begin_holds(
        &self,
        names: &[String],
        guard: &Guard,
        credentials: &Credentials,
        (started, valid_until): (Instant, Instant),
    ) -> Vec<HoldId> {
        names
            .iter()
            .map(|name| {
                self.plan.recorder.begin_hold(
                    name,
                    self.id,
                    &credentials.token,
                    started,
                    guard.decided_at(),
                    valid_until,
                )
            })
            .collect()
    }
}

/// How a protected write ended, for the holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Acknowledged, or never sent: nothing of it can land later.
    Settled,
    /// Sent but not acknowledged: it may still land.
    Pending,
    /// Refused by the fenced store: a later holder has written (or the value moved under the
    /// writer). The holder stops writing.
    Rejected,
}

impl Written {
    /// How the hold ends after this write, if it ends here: after a pending write the holder
    /// lets the keys expire; after a rejection it stops writing and releases.
    fn ends_hold(self) -> Option<End> {
        match self {
            Written::Settled => None,
            Written::Pending => Some(End::Expire),
            Written::Rejected => Some(End::Release),
        }
    }
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
    /// The resource's index in the plan.
    index: usize,
    plan: Arc<ClientPlan>,
    store: StoreClient,
}

impl Client {
    /// Client `id` (it wants resource `id mod resources`), or `None` without resources.
    pub(super) fn new(id: usize, plan: Arc<ClientPlan>, store: StoreClient) -> Option<Client> {
        let index = id % plan.resources.len().max(1);
        let resource = plan.resources.get(index)?.clone();
        Some(Client {
            id,
            resource,
            index,
            plan,
            store,
        })
    }

    /// One protected write with `credentials`, given up at `deadline`, recorded (unless the
    /// deadline had passed and nothing was sent); an accepted, acknowledged one is announced to
    /// the stalled holders ([`Client::stall`]).
    async fn write(&mut self, credentials: &Credentials, deadline: Instant) -> Written {
        self.write_checked(credentials, deadline, None).await
    }

    /// [`Client::write`], recorded as invoked at `checked` if given: the instant the writer
    /// read before it checked that it may write, earlier than the write's own.
    async fn write_checked(
        &mut self,
        credentials: &Credentials,
        deadline: Instant,
        checked: Option<Instant>,
    ) -> Written {
        let Some(increment) = self
            .store
            .increment(
                &self.resource,
                &credentials.token,
                credentials.fence,
                deadline,
            )
            .await
        else {
            return Written::Settled;
        };
        self.plan.recorder.write(StampedWrite {
            resource: &self.resource,
            holder: self.id,
            token: &credentials.token,
            invoked: checked.unwrap_or(increment.invoked),
            completed: increment.completed,
            read: increment.read,
            written: increment.written,
            acked: increment.acked,
            fence: credentials.fence,
            rejected: increment.rejected,
        });
        if increment.rejected.is_some() {
            Written::Rejected
        } else if increment.acked {
            if let Some(state) = self.plan.states.get(self.index) {
                state.landed.send_modify(|landed| {
                    landed.writes += 1;
                    landed.last_writer = self.id;
                });
            }
            Written::Settled
        } else if increment.written.is_none() {
            Written::Settled
        } else {
            Written::Pending
        }
    }

    /// One attempt (one round) at `request`, recorded under `label`: the guard and when the
    /// attempt started; or, refused or failed, `None` after the client's back-off (5–25 ms).
    async fn try_once<'r>(
        &self,
        lock: &Lock,
        request: impl Into<Request<'r>>,
        label: &str,
    ) -> Option<(Guard, Instant)> {
        let started = Instant::now();
        let result = lock.try_acquire(request).await;
        let finished = Instant::now();
        let outcome = Outcome::of(&result);
        self.plan
            .recorder
            .attempt(label, self.id, started, finished, outcome);
        match result {
            Ok(guard) => Some((guard, started)),
            Err(_) => {
                let ms = Duration::from_millis;
                tokio::time::sleep(random_between(ms(5), ms(25))).await;
                None
            }
        }
    }

    /// Up to two writes to the client's resource under `valid_until`; whether the hold must
    /// then let its keys expire (a write that may still land), else it may release.
    async fn write_twice(&mut self, credentials: &Credentials, valid_until: Instant) -> bool {
        for _ in 0..2 {
            if Instant::now() >= valid_until {
                break;
            }
            match self.write(credentials, valid_until).await.ends_hold() {
                Some(End::Expire) => return true,
                Some(End::Release) => break,
                None => {}
            }
        }
        false
    }

    /// Acquire (one round), on success hold the lock with a behaviour drawn for the hold,
    /// release or let it expire; on failure back off a little; until the deadline.
    pub(super) async fn run(mut self, lock: Lock) {
        let ms = Duration::from_millis;
        for _ in 0..MAX_ATTEMPTS_PER_CLIENT {
            if Instant::now() >= self.plan.deadline {
                break;
            }
            let resource = self.resource.clone();
            let Some((mut guard, started)) = self.try_once(&lock, &resource, &resource).await
            else {
                continue;
            };
            let recorder = self.plan.recorder.clone();
            let credentials = Credentials::of(&guard);
            // One reading of the validity, both recorded and written under: the guard maps it
            // to the `Instant` clock afresh at each call.
            let valid_until = guard.valid_until();
            let hold = recorder.begin_hold(
                &self.resource,
                self.id,
                &credentials.token,
                started,
                guard.decided_at(),
                valid_until,
            );
            if self.plan.keep_alive {
                self.kept(guard, hold, &credentials).await;
                tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
                continue;
            }
            // Stalling holds: the first of each resource, and every other one after it.
            let stall = self.plan.stall
                && self.plan.states.get(self.index).is_some_and(|state| {
                    state
                        .holds
                        .fetch_add(1, Ordering::Relaxed)
                        .is_multiple_of(2)
                });
            let end = match if stall {
                Behaviour::Careful
            } else {
                Behaviour::draw()
            } {
                Behaviour::Careful => self.careful(valid_until, &credentials, stall).await,
                Behaviour::Edge => self.edge(valid_until, &credentials).await,
                Behaviour::Extender => {
                    self.extender(&mut guard, hold, valid_until, &credentials)
                        .await
                }
            };
            match end {
                End::Release => {
                    recorder.end_hold(hold, Instant::now());
                    let _report = guard.release().await;
                }
                End::Expire => self.plan.let_expire(guard).await,
            }
            tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
        }
        lock.settle().await;
    }

    /// [`Behaviour::Careful`]; with `stall`, the second write comes after a pause that outlasts
    /// the validity ([`Client::stall`]).
    async fn careful(
        &mut self,
        valid_until: Instant,
        credentials: &Credentials,
        stall: bool,
    ) -> End {
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
                if !self.stall(valid_until).await {
                    return End::Expire;
                }
                let late = self
                    .write(credentials, Instant::now() + STORE_TIMEOUT)
                    .await;
                if late == Written::Pending {
                    return End::Expire;
                }
                continue;
            }
            // The careful writer: only while the validity runs, and never past it.
            if Instant::now() >= valid_until {
                break;
            }
            if let Some(end) = self.write(credentials, valid_until).await.ends_hold() {
                return end;
            }
        }
        tokio::time::sleep_until((Instant::now() + spacing).min(valid_until).into()).await;
        End::Release
    }

    /// A stalled holder's pause, recorded as a client fault: until ½ TTL past `valid_until`,
    /// and then on until a later holder's write has landed on the resource (at most
    /// [`STALL_WAIT_TTLS`] TTLs more), so that the late write that follows always comes after
    /// a later holder's: the case fencing exists for. Whether one did land.
    async fn stall(&self, valid_until: Instant) -> bool {
        let recorder = self.plan.recorder.clone();
        let pause = recorder.client_fault(PAUSE_LABEL, &self.resource);
        let later_holder_wrote = match self.plan.states.get(self.index) {
            Some(state) => {
                let mut landed = state.landed.subscribe();
                let before = landed.borrow().writes;
                let woken = valid_until + self.plan.ttl / 2;
                tokio::time::sleep_until(woken.into()).await;
                let waited = woken + self.plan.ttl * STALL_WAIT_TTLS;
                let later = landed
                    .wait_for(|landed| landed.writes > before && landed.last_writer != self.id);
                matches!(
                    tokio::time::timeout_at(waited.into(), later).await,
                    Ok(Ok(_))
                )
            }
            None => false,
        };
        recorder.lift(pause);
        later_holder_wrote
    }

    /// Waits until [`EDGE_MARGIN`] before `valid_until` and writes there, under that deadline.
    async fn edge_write(&mut self, credentials: &Credentials, valid_until: Instant) -> Written {
        let edge = valid_until.checked_sub(EDGE_MARGIN).unwrap_or(valid_until);
        tokio::time::sleep_until(edge.into()).await;
        self.write(credentials, valid_until).await
    }

    /// [`Behaviour::Edge`].
    async fn edge(&mut self, valid_until: Instant, credentials: &Credentials) -> End {
        if let Some(end) = self.write(credentials, valid_until).await.ends_hold() {
            return end;
        }
        if let Some(end) = self.edge_write(credentials, valid_until).await.ends_hold() {
            return end;
        }
        if rand::random::<bool>() {
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
        credentials: &Credentials,
    ) -> End {
        if let Some(end) = self.write(credentials, valid_until).await.ends_hold() {
            return end;
        }
        for _ in 0..rand::random_range(1..=2u8) {
            let halfway = valid_until.saturating_duration_since(Instant::now()) / 2;
            tokio::time::sleep(halfway).await;
            if guard.extend(self.plan.ttl).await.is_err() {
                break;
            }
            valid_until = guard.valid_until();
            self.plan.recorder.extend_hold(hold, valid_until);
            if let Some(end) = self.write(credentials, valid_until).await.ends_hold() {
                return end;
            }
        }
        self.edge_write(credentials, valid_until)
            .await
            .ends_hold()
            .unwrap_or(End::Release)
    }

    /// [`Scenario::NoLock`](crate::Scenario::NoLock): writes as a careful holder would, in
    /// sessions of one made-up token each, without ever taking the lock.
    pub(super) async fn run_without_lock(mut self) {
        let ms = Duration::from_millis;
        for session in 0..MAX_ATTEMPTS_PER_CLIENT {
            if Instant::now() >= self.plan.deadline {
                break;
            }
            let credentials = Credentials {
                token: format!("no-lock-{}-{session}", self.id),
                fence: None,
            };
            let hold_for = self.plan.ttl.mul_f64(0.5 + 0.45 * rand::random::<f64>());
            let spacing = hold_for / self.plan.writes_per_hold;
            for write in 0..self.plan.writes_per_hold {
                if write > 0 {
                    tokio::time::sleep(spacing).await;
                }
                self.write(&credentials, Instant::now() + STORE_TIMEOUT)
                    .await;
            }
            tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
        }
    }
}

/// The resource client `id` warms up on (its fence counter, if any, is deleted with the
/// resources').
pub(super) fn warm_up_resource(id: usize) -> String {
    format!("warm-up-{id}")
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
    let bound = lock.restart_guard_period().unwrap_or_default() + WARM_UP_GRACE;
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
