//! [`Keeper`]: one lock's batched keep-alive. Every lease the lock keeps alive is registered
//! here; one task per lock (spawned when the first lease is kept, ending when none is left)
//! sleeps until the next lease falls due, the pace lets a batch go, or a trusted deadline
//! comes; sends leases out in batches of at most `BATCH_KEYS` (`round/keep_batch.rs`, each
//! batch its own task, so a slow node delays no timer): due ones at once, nearest deadline
//! first, else paced ones a little early, evenly over the interval; and marks lost every lease
//! whose trusted deadline came without an extension. When due leases wait for room, it says so
//! (a gauge and a warning). Per lease it keeps a few words and two entries in sorted sets, no
//! task or timer.
//!
//! What a lease is, beyond its key, is the API's (`keep_alive.rs`): it comes in as a `Kept`
//! (`keep_batch.rs`).
//!
//! Over 500 lines, with its tests: the registry's queues (due, waiting by deadline, deadlines)
//! and the task that walks them are one state machine, each step reading the others' state under
//! one lock; split, each part would need the registry's insides.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;

use futures::StreamExt;

use super::background::Background;
use super::keep_batch::{Done, Item, Kept, Outcome, run_batch};
use super::members::Members;
use super::slots::Slots;
use crate::error::{Error, Lost};
use crate::metrics;
use crate::node::Lane;
use crate::rules::batch::{BATCH_KEYS, Missing, batch_sizes, may_go_early, pace};
use crate::rules::clock::Moment;
use crate::rules::renewal::{Lead, Schedule};

/// One registered lease.
struct Slot {
    kept: Arc<dyn Kept>,
    /// Where it waits for its next extension.
    queue: Queue,
    /// Its trusted deadline as entered in `deadlines` (re-read from the lease when it comes).
    deadline: Moment,
    missing: Missing,
    last_error: Option<Box<Error>>,
}

/// Where a lease waits, and its entry there.
#[derive(Clone, Copy)]
enum Queue {
    /// Not due yet: its entry in `due`, when its next extension is due.
    Due(Moment),
    /// Due and not sent yet: its entry in `ready`, by deadline, and when it fell due.
    Ready { deadline: Moment, due: Moment },
    /// In a batch that is out.
    Out,
    /// No extension left to make (`max_hold` leaves none): it ends with its validity.
    Done,
}

#[derive(Default)]
struct Registry {
    slots: Slots<Slot>,
    due: BTreeSet<(Moment, u64)>,
    /// Due leases waiting for room in a batch, nearest deadline first: when the nodes cannot
    /// keep up, the lease that would be lost first goes first, whatever it fell due.
    ready: BTreeSet<(Moment, u64)>,
    deadlines: BTreeSet<(Moment, u64)>,
    /// Whether the keeper's task runs.
    running: bool,
    /// Batches sent and not yet decided for every lease in them.
    batches: usize,
    /// Every kept key over its interval: the keys per second the batches must carry.
    load: f64,
    /// When the last batch went out, for the pace.
    sent_at: Option<Moment>,
    /// When the keeper last warned that it falls behind.
    warned_at: Option<Moment>,
    /// How far ahead of a trusted deadline leases are marked lost, for the task's late timers.
    lead: Lead,
    /// The kept leases' intervals, counted: the shortest bounds the lead.
    intervals: BTreeMap<Duration, usize>,
}

/// The most batches out at once. Each node runs its commands one after another, so batches sent
/// together queue there and delay every other client's command behind them; two keep a node
/// busy with ours for at most about two batches' time while one is decided and the next sent.
/// Measured on a two-core machine, five local nodes (`docs/benchmarks.md`, issue 30): with two,
/// 160,000 leases at a TTL of 3 s were kept for 60 s with none lost (80,000 extensions a second,
/// each lease extended about every 2 s instead of 1 s, nearest deadline first). Letting the
/// count grow while leases waited (one more after each batch back within a quarter of the 50 ms
/// node timeout, up to 8, halved past half of it) lost 154,890 of the same 160,000: batches
/// queued on the nodes ran past the timeout, which drops the connection and fails every lease
/// in them.
const MAX_BATCHES: usize = 2;

/// How often at most the keeper warns that it falls behind.
const WARN_EVERY: Duration = Duration::from_secs(10);

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
        // Each node's batch connection is made now, so that the first batch finds it made (and
        // brings the key to the nodes the acquisition missed) instead of timing out making it.
        {
            let _runtime = runtime.enter();
            for node in &members.nodes {
                for key in kept.keys() {
                    node.warm(Lane::KeepAlive, key);
                }
            }
        }
        let (id, start) = {
            let mut registry = self.registry();
            let id = registry.register(kept, missing);
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

    /// Takes lease `id`, which is `kept`, out (released or dropped); whether it was still there
    /// (else the keeper found it lost and let go of it first). The lease itself is compared too:
    /// a number is unique only as long as its serial has not wrapped.
    pub(crate) fn leave(&self, id: u64, kept: &dyn Kept) -> bool {
        let mut registry = self.registry();
        let ours = registry
            .slots
            .get(id)
            .is_some_and(|slot| std::ptr::addr_eq(Arc::as_ptr(&slot.kept), kept));
        let Some(slot) = ours.then(|| registry.slots.remove(id)).flatten() else {
            return false;
        };
        registry.forget(id, &slot);
        true
    }

    /// Notes how late the task's timer, set for `due`, fired: the lead follows it.
    fn note_late(&self, due: Moment) {
        self.registry().lead.note(due, Moment::now());
    }

    /// Lost leases and due ones at `now`, under the registry's lock.
    ///
    /// Due leases go out at once, nearest deadline first, in as many batches as there is room
    /// for. With none due, a paced batch goes out once the pace allows (`rules/batch.rs`), with
    /// the leases due soonest, up to half an interval early: a burst of leases falling due
    /// together is spread over the interval, and a node never has more than a batch or two of
    /// ours ahead of another client's command.
    fn tick(&self, now: Moment) -> Tick {
        let mut guard = self.registry();
        let registry = &mut *guard;
        let lost = registry.expire(now);
        registry.fall_due(now);
        let room = MAX_BATCHES.saturating_sub(registry.batches);
        let mut leases: Vec<Item> = Vec::new();
        // Counted in keys: a set of resources is several.
        let mut keys = 0usize;
        let mut late = Late::default();
        if !registry.ready.is_empty() {
            let room = room.saturating_mul(BATCH_KEYS);
            while room > 0
                && let Some(&(_, id)) = registry.ready.first()
            {
                let size = registry
                    .slots
                    .get(id)
                    .map_or(0, |slot| slot.kept.keys().len());
                if keys > 0 && keys.saturating_add(size) > room {
                    break;
                }
                registry.ready.pop_first();
                keys = keys.saturating_add(size);
                registry.note_lateness(id, now, &mut late);
                leases.extend(registry.send(id, now));
            }
        } else if room > 0 && registry.paced(now) {
            let most = pace(registry.load).keys;
            while let Some(&(at, id)) = registry.due.first() {
                let Some(slot) = registry.slots.get(id) else {
                    registry.due.pop_first();
                    continue;
                };
                let size = slot.kept.keys().len();
                let decided = slot.kept.decided();
                let every = slot.kept.schedule().every;
                let early = may_go_early(
                    now.saturating_duration_since(decided),
                    at.saturating_duration_since(decided),
                    every,
                );
                if !early || (keys > 0 && keys.saturating_add(size) > most) {
                    // The rest are due later still (a lease of a longer interval behind it
                    // only misses the chance to go out early).
                    break;
                }
                registry.due.pop_first();
                keys = keys.saturating_add(size);
                leases.extend(registry.send(id, now));
            }
        }
        let sizes = batch_sizes(
            &leases
                .iter()
                .map(|item| item.kept.keys().len())
                .collect::<Vec<_>>(),
        );
        if !sizes.is_empty() {
            registry.batches = registry.batches.saturating_add(sizes.len());
            registry.sent_at = Some(now);
        }
        registry.warn_if_behind(now, late);
        let next = if registry.slots.is_empty() {
            registry.running = false;
            None
        } else {
            registry.next_look(now)
        };
        let mut items = leases.into_iter();
        let due = sizes
            .into_iter()
            .map(|size| items.by_ref().take(size).collect())
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
            let Some(slot) = registry.slots.get_mut(id) else {
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
                    if let Some(slot) = registry.slots.remove(id) {
                        registry.forget(id, &slot);
                        lost.push((slot.kept, Lost::Taken { outcomes }));
                    }
                    continue;
                }
            };
            let trusted_until = slot.kept.trusted_until();
            let old_deadline = std::mem::replace(&mut slot.deadline, trusted_until);
            slot.queue = decided.checked_add(due).map_or(Queue::Done, Queue::Due);
            registry.deadlines.remove(&(old_deadline, id));
            registry.deadlines.insert((trusted_until, id));
            if let Queue::Due(due) = slot.queue {
                registry.due.insert((due, id));
            }
        }
        lost
    }
}

impl Registry {
    /// Enters `kept`, its key missing on `missing`, due an interval after its acquisition;
    /// returns its number.
    fn register(&mut self, kept: Arc<dyn Kept>, missing: Missing) -> u64 {
        let schedule = *kept.schedule();
        let first = schedule.next_after_success(Duration::ZERO);
        let queue = kept
            .decided()
            .checked_add(first)
            .map_or(Queue::Done, Queue::Due);
        let deadline = kept.trusted_until();
        let load = load(kept.keys().len(), schedule.every);
        let id = self.slots.insert(Slot {
            kept,
            queue,
            deadline,
            missing,
            last_error: None,
        });
        if let Queue::Due(due) = queue {
            self.due.insert((due, id));
        }
        self.deadlines.insert((deadline, id));
        *self.intervals.entry(schedule.every).or_default() += 1;
        self.load += load;
        metrics::lease_kept();
        id
    }

    /// Takes lease `id`'s timers out, once its slot was removed: it is kept no more.
    fn forget(&mut self, id: u64, slot: &Slot) {
        metrics::lease_left();
        self.deadlines.remove(&(slot.deadline, id));
        let every = slot.kept.schedule().every;
        if let Some(count) = self.intervals.get_mut(&every) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.intervals.remove(&every);
            }
        }
        // Its share, computed as when it was entered.
        self.load = (self.load - load(slot.kept.keys().len(), every)).max(0.0);
        match slot.queue {
            Queue::Due(due) => {
                self.due.remove(&(due, id));
            }
            Queue::Ready { deadline, .. } => {
                self.ready.remove(&(deadline, id));
            }
            Queue::Out | Queue::Done => {}
        }
    }

    /// Lets go of the leases whose trusted deadline came by `now`, or comes within the lead
    /// (`rules/renewal.rs`, [`Lead`]), without an extension, and returns them with the reason,
    /// to be marked lost.
    fn expire(&mut self, now: Moment) -> Vec<(Arc<dyn Kept>, Lost)> {
        let horizon = now.checked_add(self.lead_at(now)).unwrap_or(now);
        let mut lost = Vec::new();
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > horizon {
                break;
            }
            self.deadlines.pop_first();
            let Some(slot) = self.slots.get_mut(id) else {
                continue;
            };
            let trusted_until = slot.kept.trusted_until();
            if trusted_until > horizon {
                // Extended since (by a batch or by another guard of its hold).
                slot.deadline = trusted_until;
                self.deadlines.insert((trusted_until, id));
                continue;
            }
            if let Some(slot) = self.slots.remove(id) {
                // Its deadline entry is already out; `forget` finds nothing to remove there.
                self.forget(id, &slot);
                // Why it is lost is judged at its deadline, which the lead may not have reached.
                let ends = trusted_until.max(now);
                let since_start = ends.saturating_duration_since(slot.kept.decided());
                let reason = out_of_time(slot.kept.schedule(), slot.last_error, since_start);
                lost.push((slot.kept, reason));
            }
        }
        lost
    }

    /// The lead at `now`: no more than a quarter of the shortest interval kept.
    fn lead_at(&self, now: Moment) -> Duration {
        let shortest = self.intervals.keys().next().copied().unwrap_or_default();
        self.lead.at(now).min(shortest / 4)
    }

    /// Moves the leases due by `now` to `ready`, by deadline.
    fn fall_due(&mut self, now: Moment) {
        while let Some(&(at, id)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            if let Some(slot) = self.slots.get_mut(id) {
                slot.queue = Queue::Ready {
                    deadline: slot.deadline,
                    due: at,
                };
                self.ready.insert((slot.deadline, id));
            }
        }
    }

    /// Whether the pace lets a batch go out at `now` ahead of any lease's due time.
    fn paced(&self, now: Moment) -> bool {
        self.paced_from().is_none_or(|next| next <= now)
    }

    /// From when the pace lets the next batch go: a spacing after the last one; `None`, at once.
    fn paced_from(&self) -> Option<Moment> {
        self.sent_at
            .and_then(|sent_at| sent_at.checked_add(pace(self.load).spacing))
    }

    /// Lease `id` going out in a batch at `now`: its item, unless `max_hold` leaves no extension
    /// to make (then it ends with its validity).
    fn send(&mut self, id: u64, now: Moment) -> Option<Item> {
        let slot = self.slots.get_mut(id)?;
        let now_offset = now.saturating_duration_since(slot.kept.decided());
        let Some(ttl) = slot.kept.schedule().extension_ttl(now_offset) else {
            slot.queue = Queue::Done;
            return None;
        };
        slot.queue = Queue::Out;
        Some(Item {
            id,
            kept: Arc::clone(&slot.kept),
            ttl,
            missing: slot.missing,
        })
    }

    /// When to look again after `now`: with room for a batch, when the next lease falls due or
    /// the pace lets the soonest go early; a trusted deadline in any case. With no room, a batch
    /// being decided wakes the task.
    fn next_look(&self, now: Moment) -> Option<Moment> {
        let room = self.batches < MAX_BATCHES;
        let sending = room
            .then(|| {
                let &(due, id) = self.due.first()?;
                let slot = self.slots.get(id)?;
                let window = slot.kept.schedule().every / 2;
                let early = due.saturating_sub(window);
                let paced = self.paced_from().unwrap_or(now);
                Some(due.min(early.max(paced)))
            })
            .flatten();
        let ready = (room && !self.ready.is_empty()).then_some(now);
        // Every lease has a deadline entered, so there is always one.
        let deadline = self
            .deadlines
            .first()
            .map(|&(at, _)| at.saturating_sub(self.lead_at(now)));
        [sending, ready, deadline]
            .into_iter()
            .flatten()
            .min()
            .or_else(|| now.checked_add(Duration::from_secs(1)))
    }

    /// Lease `id`, going out at `now` after it fell due, counted in `late` if it waited for
    /// room longer than [`LATE`] of its interval.
    fn note_lateness(&self, id: u64, now: Moment, late: &mut Late) {
        let Some(slot) = self.slots.get(id) else {
            return;
        };
        let Queue::Ready { due, .. } = slot.queue else {
            return;
        };
        let waited = now.saturating_duration_since(due);
        if waited > slot.kept.schedule().every / LATE {
            late.leases = late.leases.saturating_add(1);
            late.most = late.most.max(waited);
        }
    }

    /// Says so when leases went out late, or wait for room at `now` (the nodes answer batches
    /// slower than leases fall due): the `quorumlock_keep_alive_late_total` counter always, a
    /// warning with the shortfall at most every [`WARN_EVERY`]. Nothing is dropped: due leases
    /// go out as soon as there is room, nearest deadline first, and one whose deadline comes
    /// first is reported lost.
    fn warn_if_behind(&mut self, now: Moment, late: Late) {
        metrics::keep_alive_late(late.leases);
        let waiting = self.ready.len();
        if late.leases == 0 && waiting == 0 {
            return;
        }
        if self
            .warned_at
            .and_then(|at| at.checked_add(WARN_EVERY))
            .is_some_and(|next| next > now)
        {
            return;
        }
        self.warned_at = Some(now);
        let nearest_deadline_ms = self
            .ready
            .first()
            .map(|&(deadline, _)| deadline.saturating_duration_since(now).as_millis());
        tracing::warn!(
            late = late.leases,
            late_by_ms = late.most.as_millis(),
            waiting,
            ?nearest_deadline_ms,
            keys_per_second = self.load.round(),
            batches_out = self.batches,
            "keep-alive falling behind: leases go out later than they are due, because the \
             nodes answer batches slower than leases fall due"
        );
    }
}

/// Leases that went out late in one look at the registry.
#[derive(Default, Clone, Copy)]
struct Late {
    leases: u64,
    /// The longest any of them waited after it fell due.
    most: Duration,
}

/// A lease that waits for room longer than this part of its interval after it fell due went
/// out late: a quarter, the pause after a failed extension, so that two late extensions in a
/// row still leave the default interval's third failure a chance.
const LATE: u32 = 4;

/// A lease's share of the keeper's load: its keys per second of its interval.
fn load(keys: usize, every: Duration) -> f64 {
    let every = every.as_secs_f64();
    if every > 0.0 {
        keys as f64 / every
    } else {
        0.0
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
        .into_iter()
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
            () = tokio::time::sleep_until(at(next)) => keeper.note_late(next),
            () = woken => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::ledger::Ledger;

    /// A lease as the registry sees it, with no lock behind it: what it holds is not asked.
    struct Lease {
        keys: Vec<Arc<[u8]>>,
        ledger: Ledger,
        schedule: Schedule,
        decided: Moment,
        trusted_until: Moment,
    }

    impl Kept for Lease {
        fn keys(&self) -> &[Arc<[u8]>] {
            &self.keys
        }
        fn token(&self) -> &str {
            "token"
        }
        fn ledger(&self) -> &Ledger {
            &self.ledger
        }
        fn held(&self) -> bool {
            true
        }
        fn schedule(&self) -> &Schedule {
            &self.schedule
        }
        fn decided(&self) -> Moment {
            self.decided
        }
        fn trusted_until(&self) -> Moment {
            self.trusted_until
        }
        fn still_valid(&self) -> bool {
            true
        }
        fn extended(&self, _valid_until: Moment) {}
        fn lose(&self, _lost: Lost) {}
        fn release_lost(self: Arc<Self>) -> Option<futures::future::BoxFuture<'static, ()>> {
            None
        }
    }

    fn lease(decided: Moment, trusted_until: Moment) -> Arc<dyn Kept> {
        let ttl = Duration::from_secs(3);
        Arc::new(Lease {
            keys: vec![Arc::from(&b"key"[..])],
            ledger: Ledger::new(3),
            schedule: Schedule {
                ttl,
                every: Duration::from_secs(1),
                max_hold: None,
                margin: crate::rules::renewal::margin(ttl),
            },
            decided,
            trusted_until,
        })
    }

    /// After the task's timer fired 40 ms late, a lease whose trusted deadline is 30 ms off is
    /// marked lost at once, and one 300 ms off is not; with no late timer, neither is. (Broken
    /// on purpose by expiring at `now` only: the first stays.)
    #[test]
    fn a_late_timer_makes_the_keeper_mark_leases_lost_that_much_ahead() {
        let ms = Duration::from_millis(1);
        let now = Moment::now();
        let (Some(near), Some(far)) = (now.checked_add(30 * ms), now.checked_add(300 * ms)) else {
            return;
        };
        let decided = now.saturating_sub(Duration::from_secs(2));
        let on_time = Keeper::default();
        {
            let mut registry = on_time.registry();
            registry.register(lease(decided, near), Missing::default());
            registry.register(lease(decided, far), Missing::default());
        }
        assert!(on_time.tick(now).lost.is_empty());

        let late = Keeper::default();
        let near_id = {
            let mut registry = late.registry();
            let near_id = registry.register(lease(decided, near), Missing::default());
            registry.register(lease(decided, far), Missing::default());
            registry.lead.note(now.saturating_sub(40 * ms), now);
            near_id
        };
        let Tick { lost, next, .. } = late.tick(now);
        assert_eq!(lost.len(), 1, "only the lease within the lead");
        assert!(late.registry().slots.get(near_id).is_none());
        // The next look comes the lead ahead of the other's deadline, not at it.
        assert!(next.is_some_and(|next| next < far && next > now));
        assert!(matches!(lost.first(), Some((_, Lost::Expired { .. }))));
    }

    /// With room for one batch and a batch more due than it holds, the lease nearest its
    /// deadline goes first, though it fell due last. (Broken on purpose by taking the due
    /// leases in the order they fell due: it waits.)
    #[test]
    fn due_leases_go_out_nearest_deadline_first() {
        let keeper = Keeper::default();
        let now = Moment::now();
        let second = Duration::from_secs(1);
        let ms = Duration::from_millis(1);
        let (Some(far), Some(near)) = (now.checked_add(10 * second), now.checked_add(100 * ms))
        else {
            return;
        };
        let mut registry = keeper.registry();
        for _ in 0..BATCH_KEYS {
            // Due a second ago.
            registry.register(
                lease(now.saturating_sub(2 * second), far),
                Missing::default(),
            );
        }
        // Due a millisecond ago.
        let nearest = registry.register(
            lease(now.saturating_sub(second + ms), near),
            Missing::default(),
        );
        registry.batches = MAX_BATCHES - 1;
        drop(registry);
        let Tick { due, .. } = keeper.tick(now);
        assert_eq!(due.len(), 1, "one batch of room");
        let sent: Vec<u64> = due
            .iter()
            .flat_map(|batch| batch.iter().map(|item| item.id))
            .collect();
        assert_eq!(sent.len(), BATCH_KEYS);
        assert!(
            sent.contains(&nearest),
            "the lease nearest its deadline waits"
        );
    }
}
