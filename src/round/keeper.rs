//! [`Keeper`]: one lock's batched keep-alive. Every lease the lock keeps alive is registered
//! here; one task per lock (spawned when the first lease is kept, ending when none is left)
//! sleeps until the earliest due extension or trusted deadline, sends the due leases out in
//! batches of at most `BATCH_KEYS` (`round/keep_batch.rs`, each batch its own task, so a slow
//! node delays no timer), and marks lost every lease whose trusted deadline came without an
//! extension. Per lease it keeps a few words and two entries in sorted sets, no task or timer.
//!
//! What a lease is, beyond its key, is the API's (`keep_alive.rs`): it comes in as a `Kept`
//! (`keep_batch.rs`).

use std::collections::{BTreeSet, HashMap};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;

use futures::StreamExt;

use super::background::Background;
use super::keep_batch::{Done, Item, Kept, Outcome, run_batch};
use super::members::Members;
use crate::error::{Error, Lost};
use crate::metrics;
use crate::rules::batch::{BATCH_KEYS, Missing, batch_sizes, may_join};
use crate::rules::clock::Moment;
use crate::rules::renewal::Schedule;

/// One registered lease.
struct Slot {
    kept: Arc<dyn Kept>,
    /// When its next extension is due; `None` while one is in flight, or once `max_hold`
    /// leaves none to make.
    due: Option<Moment>,
    /// Its trusted deadline as entered in `deadlines` (re-read from the lease when it comes).
    deadline: Moment,
    missing: Missing,
    last_error: Option<Box<Error>>,
}

#[derive(Default)]
struct Registry {
    slots: HashMap<u64, Slot>,
    due: BTreeSet<(Moment, u64)>,
    deadlines: BTreeSet<(Moment, u64)>,
    next_id: u64,
    /// Whether the keeper's task runs.
    running: bool,
    /// Batches sent and not yet decided for every lease in them.
    batches: usize,
}

/// The most batches out at once. Each node runs its commands one after another, so batches sent
/// together queue there and delay every other client's command behind them; two keep a node
/// busy with ours for at most about two batches' time while one is decided and the next sent.
/// Measured on a loaded two-core machine with 100,000 leases at a TTL of 3 s: with two, 67,000
/// of the 100,000 extensions due each second were made (3,600 leases lost in 60 s); with four,
/// the batches' replies came too late for the 50 ms node timeout and all were lost.
const MAX_BATCHES: usize = 2;

/// One lock's batched keep-alive: the registry of its kept leases and the task that extends them.
#[derive(Default)]
pub(crate) struct Keeper {
    registry: Mutex<Registry>,
    /// Wakes the task: a lease joined, or a batch finished.
    wake: Notify,
}

/// What one look at the registry found to do.
struct Tick {
    lost: Vec<(Arc<dyn Kept>, Lost)>,
    /// The due leases, in batches of at most `BATCH_KEYS` keys.
    due: Vec<Arc<[Item]>>,
    /// When to look again; `None` once no lease is left (the task then ends).
    next: Option<Moment>,
}

impl Keeper {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `kept`, its key missing on `missing`, and starts the task on `runtime` if it
    /// is not running (over `members()`). Returns the lease's number, for [`leave`](Keeper::leave).
    pub(crate) fn keep(
        self: &Arc<Self>,
        members: &Arc<Members>,
        kept: Arc<dyn Kept>,
        missing: Missing,
        runtime: &Handle,
    ) -> u64 {
        let first = kept.schedule().next_after_success(Duration::ZERO);
        let due = kept.decided().checked_add(first);
        let deadline = kept.trusted_until();
        let (id, start) = {
            let mut registry = self.registry();
            let id = registry.next_id;
            registry.next_id = id.wrapping_add(1);
            if let Some(due) = due {
                registry.due.insert((due, id));
            }
            registry.deadlines.insert((deadline, id));
            registry.slots.insert(
                id,
                Slot {
                    kept,
                    due,
                    deadline,
                    missing,
                    last_error: None,
                },
            );
            metrics::lease_kept();
            let start = !registry.running;
            registry.running = true;
            (id, start)
        };
        if start {
            runtime.spawn(run(Arc::clone(self), Arc::clone(members)));
        }
        self.wake.notify_one();
        id
    }

    /// Takes lease `id` out (released or dropped); whether it was still there (else the keeper
    /// found it lost and let go of it first).
    pub(crate) fn leave(&self, id: u64) -> bool {
        let mut registry = self.registry();
        let Some(slot) = registry.slots.remove(&id) else {
            return false;
        };
        registry.forget(id, &slot);
        true
    }

    /// Lost leases and due ones at `now`, under the registry's lock.
    fn tick(&self, now: Moment) -> Tick {
        let mut guard = self.registry();
        let registry = &mut *guard;
        let mut lost = Vec::new();
        while let Some(&(deadline, id)) = registry.deadlines.first() {
            if deadline > now {
                break;
            }
            registry.deadlines.pop_first();
            let Some(slot) = registry.slots.get_mut(&id) else {
                continue;
            };
            let trusted_until = slot.kept.trusted_until();
            if trusted_until > now {
                // Extended since (by a batch or by another guard of its hold).
                slot.deadline = trusted_until;
                registry.deadlines.insert((trusted_until, id));
                continue;
            }
            if let Some(slot) = registry.slots.remove(&id) {
                registry.forget(id, &slot);
                let since_start = now.saturating_duration_since(slot.kept.decided());
                let reason = out_of_time(slot.kept.schedule(), slot.last_error, since_start);
                lost.push((slot.kept, reason));
            }
        }
        let mut due = Vec::new();
        let room = MAX_BATCHES
            .saturating_sub(registry.batches)
            .saturating_mul(BATCH_KEYS);
        // Counted in keys: a set of resources is several.
        let mut due_keys = 0usize;
        while let Some(&(at, id)) = registry.due.first() {
            if due_keys >= room {
                break;
            }
            let Some(slot) = registry.slots.get_mut(&id) else {
                registry.due.pop_first();
                continue;
            };
            let decided = slot.kept.decided();
            let schedule = *slot.kept.schedule();
            let (now_offset, due_offset) = (
                now.saturating_duration_since(decided),
                at.saturating_duration_since(decided),
            );
            if !may_join(now_offset, due_offset, schedule.every) {
                // The rest are due later still (a lease of a longer interval behind it only
                // misses the chance to go out early).
                break;
            }
            registry.due.pop_first();
            slot.due = None;
            // Near `max_hold` no more extensions: the lease ends with its validity.
            if let Some(ttl) = schedule.extension_ttl(now_offset) {
                due_keys = due_keys.saturating_add(slot.kept.keys().len());
                due.push(Item {
                    id,
                    kept: Arc::clone(&slot.kept),
                    ttl,
                    missing: slot.missing,
                });
            }
        }
        let sizes = batch_sizes(
            &due.iter()
                .map(|item| item.kept.keys().len())
                .collect::<Vec<_>>(),
        );
        registry.batches = registry.batches.saturating_add(sizes.len());
        // With no room for another batch, the next due lease waits for a batch to be decided
        // (which wakes the task), not for its due time, which may have passed.
        let waiting_due = if due_keys < room {
            registry.due.first()
        } else {
            None
        };
        let next = if registry.slots.is_empty() {
            registry.running = false;
            None
        } else {
            // Every lease has a deadline entered, so there is always one.
            [waiting_due, registry.deadlines.first()]
                .into_iter()
                .flatten()
                .map(|&(at, _)| at)
                .min()
                .or_else(|| now.checked_add(Duration::from_secs(1)))
        };
        let mut leases = due.into_iter();
        let due = sizes
            .into_iter()
            .map(|size| leases.by_ref().take(size).collect())
            .collect();
        Tick { lost, due, next }
    }

    /// A batch's results, under the registry's lock: extended leases are due again an
    /// interval after their extension, failed ones a quarter interval after now; taken ones are
    /// let go of and returned, to be marked lost.
    fn finish(&self, done: Vec<Done>) -> Vec<(Arc<dyn Kept>, Lost)> {
        let now = Moment::now();
        let mut guard = self.registry();
        let registry = &mut *guard;
        registry.batches = registry.batches.saturating_sub(1);
        let mut lost = Vec::new();
        for Done {
            id,
            missing,
            result,
        } in done
        {
            let Some(slot) = registry.slots.get_mut(&id) else {
                // Released, dropped or lost while the batch was out.
                continue;
            };
            slot.missing = missing;
            let decided = slot.kept.decided();
            let schedule = *slot.kept.schedule();
            let due = match result {
                Outcome::Extended(at) => {
                    slot.last_error = None;
                    schedule.next_after_success(at.saturating_duration_since(decided))
                }
                Outcome::Failed(error) => {
                    tracing::debug!(%error, "keep-alive: extension failed; trying again");
                    slot.last_error = Some(error);
                    schedule.next_after_failure(now.saturating_duration_since(decided))
                }
                Outcome::Taken(outcomes) => {
                    if let Some(slot) = registry.slots.remove(&id) {
                        registry.forget(id, &slot);
                        lost.push((slot.kept, Lost::Taken { outcomes }));
                    }
                    continue;
                }
            };
            let due = decided.checked_add(due);
            let trusted_until = slot.kept.trusted_until();
            let old_deadline = std::mem::replace(&mut slot.deadline, trusted_until);
            slot.due = due;
            registry.deadlines.remove(&(old_deadline, id));
            registry.deadlines.insert((trusted_until, id));
            if let Some(due) = due {
                registry.due.insert((due, id));
            }
        }
        lost
    }
}

impl Registry {
    /// Takes lease `id`'s timers out, once its slot was removed: it is kept no more.
    fn forget(&mut self, id: u64, slot: &Slot) {
        metrics::lease_left();
        self.deadlines.remove(&(slot.deadline, id));
        if let Some(due) = slot.due {
            self.due.remove(&(due, id));
        }
    }
}

/// Why a lease whose trusted deadline came is lost: in the last stretch of a bounded hold, the
/// bound's doing; else expired, with the last extension's error.
fn out_of_time(schedule: &Schedule, last_error: Option<Box<Error>>, now: Duration) -> Lost {
    match schedule.max_hold {
        Some(max_hold) if schedule.ending(now) => Lost::MaxHold { max_hold },
        _ => Lost::Expired { last_error },
    }
}

/// Marks `lost` leases lost (the keeper has let go of them), then releases them: every signal
/// fires before any release is started, so that no release delays another lease's signal.
fn lose(lost: Vec<(Arc<dyn Kept>, Lost)>, background: &Arc<Background>) {
    if lost.is_empty() {
        return;
    }
    let mut released = Vec::with_capacity(lost.len());
    for (kept, reason) in lost {
        kept.lose(reason);
        released.push(kept);
    }
    // One counted task for all of them, at most RELEASES_AT_ONCE at a time: a thousand release
    // tasks at once would queue ahead of the keeper's own on the runtime, and the next lost
    // signals, due within the margin, would fire late.
    let releases: Vec<_> = released
        .iter()
        .filter_map(|kept| kept.release_lost())
        .collect();
    background.spawn(None, async move {
        futures::stream::iter(releases)
            .for_each_concurrent(RELEASES_AT_ONCE, |release| release)
            .await;
    });
}

/// How many lost leases are released at once: few, so that each poll of the releasing task is
/// short and the keeper's next deadline is not held up behind it (with 256, the lost signals of a
/// thousand leases under a frozen majority came up to 35 ms after their validity; with 16, in
/// time). They are released in the background; their keys expire by their TTL meanwhile.
const RELEASES_AT_ONCE: usize = 16;

/// The lease clock's `moment` on the tokio timer (the far future if it cannot be represented).
fn at(moment: Moment) -> tokio::time::Instant {
    tokio::time::Instant::from_std(moment.to_instant())
}

/// Marks the keeper stopped if its task is dropped before it ended by itself (its runtime shut
/// down), so that a lease kept later, on another runtime, starts a new one.
struct Running {
    keeper: Arc<Keeper>,
    /// The task ended by itself, having marked the keeper stopped under its lock.
    ended: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.ended {
            self.keeper.registry().running = false;
        }
    }
}

/// The keeper's task: until no lease is left, marks lost the leases whose trusted deadline came,
/// sends the due ones out in batches, and sleeps until the next timer or a wake-up.
async fn run(keeper: Arc<Keeper>, members: Arc<Members>) {
    let mut running = Running {
        keeper: Arc::clone(&keeper),
        ended: false,
    };
    loop {
        let mut woken = pin!(keeper.wake.notified());
        // Registered before the look, so a lease joining in between still wakes the task.
        woken.as_mut().enable();
        let Tick { lost, due, next } = keeper.tick(Moment::now());
        lose(lost, &members.background);
        let Some(next) = next else {
            // No lease left: the task ends (the next lease kept starts another).
            running.ended = true;
            return;
        };
        for items in due {
            let (keeper, members) = (Arc::clone(&keeper), Arc::clone(&members));
            tokio::spawn(async move {
                let done = run_batch(&members, items).await;
                lose(keeper.finish(done), &members.background);
                keeper.wake.notify_one();
            });
        }
        tokio::select! {
            () = tokio::time::sleep_until(at(next)) => {}
            () = woken => {}
        }
    }
}
