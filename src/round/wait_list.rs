//! The waiters of one lock: per lock key, a queue in arrival order whose head alone (a
//! semaphore's first few, below) contends on the nodes and alone is woken (each waiter has its
//! own signal, so a release wakes one task, not every waiter of the resource); the
//! subscriptions (one per node, `node/subscription.rs`) that turn a release published by any
//! client into that signal; and the bound on how long a waiter sleeps when no wake-up comes (the
//! keys' expiry on a quorum, `rules/wait.rs`). Over 500 lines: half are unit tests, which need
//! the private queues.
//!
//! A set's waiter stands in the queue of each of its keys, with one ticket, and contends only
//! when it heads every one of them. Tickets grow, and a waiter joins all its queues in one step,
//! so every queue is in ticket order: the waiter with the smallest ticket heads all of its
//! queues, and no two waiters each head a queue the other waits in (no deadlock, whatever order
//! sets name their resources in; no starvation, the order is arrival).
//!
//! A semaphore's waiter stands in the queue of every slot and contends while fewer than its
//! heads ([`heads`]: the permits, at most [`MAX_HEADS`]) are ahead of it in each: that many
//! waiters try at once, so slots freed together are taken together. Each release is told to one
//! of them once, however many nodes publish it (they publish its mark): an idle one if there is
//! one, else it is queued for a busy one.
//!
//! A release of this lock's own that an idle head here takes is kept here ([`WaitList::hand`],
//! `rules/hand_off.rs`): other processes' waiters, told so by its message, are not woken.
//!
//! A key's channel is subscribed while someone waits for it and unsubscribed when the last
//! waiter leaves, so no message arrives for a resource nobody waits on.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::node::Node;
use crate::node::pttl::pttls;
use crate::node::subscription::Subscription;
use crate::rules::hand_off::{Hand, hand, read_message};
use crate::rules::resources::Keys;
use crate::rules::wait::{KeyTtl, free_after};

/// The waiters of one lock, by lock key.
#[derive(Default)]
pub(crate) struct WaitList {
    queues: Mutex<Queues>,
    /// How many callers wait, read without the lock: an acquisition that finds none tries
    /// first without touching `queues`.
    waiting: AtomicUsize,
    /// One per node, made when the first waiter arrives.
    subscriptions: OnceLock<Vec<Subscription>>,
}

#[derive(Default)]
struct Queues {
    next_ticket: u64,
    by_key: HashMap<Vec<u8>, Queue>,
}

/// The callers waiting for one key, in arrival order, each with the signal that wakes it, and
/// the releases of the key answered lately.
struct Queue {
    waiters: VecDeque<(u64, Arc<Wake>)>,
    answered: VecDeque<Answered>,
    /// Since when this lock's own releases of the key have been kept here, if the last was.
    kept_since: Option<Instant>,
}

/// How many releases of one key a queue remembers: every node's copy of a release arrives
/// within a round trip or so of the first, and few releases of one key are that close.
const ANSWERED: usize = 8;

/// A release a queue answered: its mark, the waiter it was told to (none when every reader head
/// was woken, or another process kept the key), and whether a later copy told that waiter
/// again.
struct Answered {
    mark: Vec<u8>,
    told: Option<u64>,
    retold: bool,
}

/// Whom a release of one key is for, among a queue's heads.
enum Pick<'a> {
    /// Every head: one of them is a read-write lock's reader (readers do not split the votes).
    Every(Vec<&'a (u64, Arc<Wake>)>),
    /// One head; `alone` if it is the queue's only head, `idle` if it will try at once (not
    /// trying now, and, among several heads, told of no other key).
    One {
        ticket: u64,
        head: &'a Wake,
        alone: bool,
        idle: bool,
    },
    /// Nobody: no head, or one already told of the key will answer it.
    Nobody,
}

impl Queue {
    /// Whom a release of `key` is for. Every head, if one is a reader. The one head of a lock or
    /// a set, always, told only of this key; of a semaphore's heads, nobody if one was told of
    /// that key already and has not answered it (two would split the votes); else the first
    /// idle head; else the head told of the fewest keys, which answers it after the attempt
    /// under way, one round instead of a search.
    fn pick(&self, key: &[u8]) -> Pick<'_> {
        let heads = self.heads();
        if heads.iter().any(|(_, wake)| wake.shared) {
            return Pick::Every(heads);
        }
        if let [(ticket, head)] = heads[..] {
            // Its next attempt asks for every key, so it answers this one whatever it was told.
            let idle = !head.trying.load(Ordering::Acquire);
            return Pick::One {
                ticket: *ticket,
                head,
                alone: true,
                idle,
            };
        }
        if heads.iter().any(|(_, wake)| wake.was_told(key)) {
            return Pick::Nobody;
        }
        // Idle heads first, then by how many keys each has yet to answer; the first of equals.
        heads
            .iter()
            .map(|(ticket, head)| (head.idle(), head.lock_freed().len(), *ticket, head))
            .min_by_key(|(idle, told, ..)| (!idle, *told))
            .map_or(Pick::Nobody, |(idle, _, ticket, head)| Pick::One {
                ticket,
                head,
                alone: false,
                idle,
            })
    }

    /// Wakes the heads a new release of `key` is for ([`pick`](Queue::pick)), and says which
    /// one was told of it. A wake-up a head is not waiting for yet is kept for its next wait,
    /// once.
    fn wake_heads(&self, key: &[u8]) -> Option<u64> {
        match self.pick(key) {
            Pick::Every(heads) => {
                for (_, head) in heads {
                    head.notify.notify_one();
                }
                None
            }
            Pick::One {
                ticket,
                head,
                alone,
                ..
            } => {
                if alone {
                    head.lock_freed().clear();
                }
                head.tell(key);
                Some(ticket)
            }
            Pick::Nobody => None,
        }
    }

    /// The waiters that contend, each by its own heads: a read-write lock's readers behind its
    /// writer (who heads alone) still contend, and are woken too.
    fn heads(&self) -> Vec<&(u64, Arc<Wake>)> {
        self.waiters
            .iter()
            .enumerate()
            .filter(|(position, (_, wake))| *position < wake.heads)
            .map(|(_, waiter)| waiter)
            .collect()
    }

    /// Remembers the release marked `mark` (unless unknown: empty) as answered, by waking
    /// `told`; a later copy of its message then wakes nobody new.
    fn answer(&mut self, mark: &[u8], told: Option<u64>) {
        if mark.is_empty() {
            return;
        }
        if self.answered.len() >= ANSWERED {
            self.answered.pop_front();
        }
        self.answered.push_back(Answered {
            mark: mark.to_vec(),
            told,
            retold: false,
        });
    }

    /// Whether a release of `key` goes to an idle head here, which then takes it in the
    /// release's own round: never when a head is a reader (readers share the key, and waiters
    /// elsewhere must hear of it).
    fn idle_head_for(&self, key: &[u8]) -> bool {
        matches!(self.pick(key), Pick::One { idle: true, .. })
    }
}

/// What wakes a waiter, and the keys whose releases it was told of: a semaphore's waiter tries
/// such a slot instead of looking at every slot. Also how many may contend at once in its
/// queues, and whether it is trying now (a release then goes to another head).
#[derive(Default)]
struct Wake {
    notify: Notify,
    /// Told and not yet answered, oldest first: each attempt answers the first. One key at
    /// most, unless every head was busy when a release came.
    freed: Mutex<VecDeque<Vec<u8>>>,
    heads: usize,
    /// A read-write lock's reader: a release wakes every head when one of them is a reader,
    /// since readers do not split the votes, they share the lock.
    shared: bool,
    trying: AtomicBool,
}

impl Wake {
    fn lock_freed(&self) -> MutexGuard<'_, VecDeque<Vec<u8>>> {
        self.freed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells this waiter that `key` was freed, and wakes it.
    fn tell(&self, key: &[u8]) {
        let mut freed = self.lock_freed();
        if !freed.iter().any(|told| **told == *key) {
            freed.push_back(key.to_vec());
        }
        drop(freed);
        self.notify.notify_one();
    }

    /// The first key told and not yet answered.
    fn told(&self) -> Option<Vec<u8>> {
        self.lock_freed().front().cloned()
    }

    fn was_told(&self, key: &[u8]) -> bool {
        self.lock_freed().iter().any(|told| **told == *key)
    }

    /// Neither trying nor told of a release it has not answered.
    fn idle(&self) -> bool {
        !self.trying.load(Ordering::Acquire) && self.lock_freed().is_empty()
    }
}

/// The most waiters of one semaphore that contend at once: each that the nodes refuse reads
/// every slot's PTTL on every node, so many more would load the nodes more than they gain.
pub(crate) const MAX_HEADS: usize = 8;

/// How many waiters of a request of `slots` slots (0 for a lock or a set) contend at once.
pub(crate) fn heads(slots: usize) -> usize {
    slots.clamp(1, MAX_HEADS)
}

/// A caller's place in its keys' queues; leaving them (dropping it) lets the next ones be head.
pub(crate) struct Place {
    list: Arc<WaitList>,
    keys: Keys,
    ticket: u64,
    wake: Arc<Wake>,
}

impl WaitList {
    fn queues(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a caller already waits for one of `keys`: a newcomer then queues behind it
    /// instead of trying first.
    pub(crate) fn queued(&self, keys: &Keys) -> bool {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return false;
        }
        let queues = self.queues();
        keys.all()
            .iter()
            .any(|key| queues.by_key.contains_key(&**key))
    }

    /// Joins the tail of each of `keys`' queues, with one ticket, to contend while fewer than
    /// `heads` waiters are ahead of it in each. The first waiter of a key
    /// subscribes to its channel on every node; the receivers (one per node, for the keys new
    /// there) complete as each node confirms, or fail (then that node's releases are heard only
    /// through the expiry bound). Empty if every key had a waiter already.
    pub(crate) fn join(
        self: &Arc<Self>,
        nodes: &[Arc<Node>],
        connect_timeout: Duration,
        keys: &Keys,
        heads: usize,
        shared: bool,
    ) -> (Place, Vec<oneshot::Receiver<()>>) {
        let wake = Arc::new(Wake {
            heads: heads.max(1),
            shared,
            ..Wake::default()
        });
        let (ticket, new_keys) = {
            let mut queues = self.queues();
            let ticket = queues.next_ticket;
            queues.next_ticket = ticket.wrapping_add(1);
            self.waiting.fetch_add(1, Ordering::AcqRel);
            let mut new_keys = Vec::new();
            for key in keys.all() {
                let queue = queues.by_key.entry(key.to_vec()).or_insert_with(|| {
                    new_keys.push(key.to_vec());
                    Queue {
                        waiters: VecDeque::new(),
                        answered: VecDeque::new(),
                        kept_since: None,
                    }
                });
                queue.waiters.push_back((ticket, Arc::clone(&wake)));
            }
            (ticket, new_keys)
        };
        let confirmations = if new_keys.is_empty() {
            Vec::new()
        } else {
            self.subscriptions(nodes, connect_timeout)
                .iter()
                .map(|subscription| subscription.subscribe(new_keys.clone()))
                .collect()
        };
        let place = Place {
            list: Arc::clone(self),
            keys: keys.clone(),
            ticket,
            wake,
        };
        (place, confirmations)
    }

    /// What this lock's own release of `key`, marked `mark`, does for its waiters
    /// (`rules/hand_off.rs`), asked before the release is sent: its message must say whether
    /// the key is kept here. A release left to every process (`Yield`) is recorded as answered
    /// here with nobody told: its message wakes only other processes' waiters, and this lock's
    /// are woken a round trip later ([`wake_after_yield`](WaitList::wake_after_yield)).
    pub(crate) fn hand(&self, key: &[u8], mark: &[u8]) -> Hand {
        // Nobody waits (the common release): no lock taken.
        if self.waiting.load(Ordering::Acquire) == 0 {
            return Hand::Share;
        }
        let mut queues = self.queues();
        let Some(queue) = queues.by_key.get_mut(key) else {
            return Hand::Share;
        };
        let kept_for = queue.kept_since.map(|since| since.elapsed());
        let hand = hand(queue.idle_head_for(key), kept_for);
        queue.kept_since = match hand {
            Hand::Keep => queue.kept_since.or_else(|| Some(Instant::now())),
            Hand::Share | Hand::Yield => None,
        };
        if hand == Hand::Yield {
            queue.answer(mark, None);
        }
        hand
    }

    /// Wakes the heads of `key` after this lock's own release of it was left to every process
    /// (`Hand::Yield`), once the other processes' waiters, woken by its message, have had a
    /// round trip to take it first; whoever did, this lock's head is refused and sleeps on.
    pub(crate) fn wake_after_yield(&self, key: &[u8]) {
        if let Some(queue) = self.queues().by_key.get(key) {
            queue.wake_heads(key);
        }
    }

    /// Wakes one of `key`'s heads, the waiters that contend: its lock was released (here, or by
    /// another client on a node), by the release's `message`: its mark (empty: unknown, then
    /// every message counts as a new release), and whether another process kept the key (then
    /// nobody here is woken). A release is answered once however many nodes publish it: a
    /// later copy wakes nobody, unless the waiter it was told to still waits and is not trying
    /// (its attempt may have met a node that had not deleted the key yet), which is told again,
    /// once. Which heads a new release wakes: [`Queue::wake_heads`].
    pub(crate) fn wake(&self, key: &[u8], message: &[u8]) {
        let (mark, kept) = read_message(message);
        let mut queues = self.queues();
        let Some(queue) = queues.by_key.get_mut(key) else {
            return;
        };
        if !mark.is_empty()
            && let Some(answered) = queue.answered.iter_mut().find(|seen| seen.mark == mark)
        {
            if let Some(told) = answered.told.filter(|_| !answered.retold)
                && let Some((_, wake)) = queue.waiters.iter().find(|(ticket, _)| *ticket == told)
                && !wake.trying.load(Ordering::Acquire)
                && !wake.was_told(key)
            {
                answered.retold = true;
                wake.tell(key);
            }
            return;
        }
        let told = if kept { None } else { queue.wake_heads(key) };
        queue.answer(mark, told);
    }

    /// How many callers wait for `key` now.
    pub(crate) fn waiters(&self, key: &[u8]) -> usize {
        self.queues()
            .by_key
            .get(key)
            .map_or(0, |queue| queue.waiters.len())
    }

    fn subscriptions(
        self: &Arc<Self>,
        nodes: &[Arc<Node>],
        connect_timeout: Duration,
    ) -> &[Subscription] {
        self.subscriptions.get_or_init(|| {
            let list: Weak<WaitList> = Arc::downgrade(self);
            let on_message: crate::node::subscription::OnMessage =
                Arc::new(move |key: &[u8], mark: &[u8]| {
                    if let Some(list) = list.upgrade() {
                        list.wake(key, mark);
                    }
                });
            nodes
                .iter()
                .map(|node| node.subscription(connect_timeout, Arc::clone(&on_message)))
                .collect()
        })
    }
}

impl Place {
    /// Whether fewer than its heads are ahead of this caller in every one of its keys' queues
    /// (for a lock or a set: it is first in each), and so it may contend on the nodes.
    pub(crate) fn is_head(&self) -> bool {
        let queues = self.list.queues();
        self.keys.all().iter().all(|key| {
            queues.by_key.get(&**key).is_some_and(|queue| {
                queue
                    .waiters
                    .iter()
                    .take(self.wake.heads)
                    .any(|(ticket, _)| *ticket == self.ticket)
            })
        })
    }

    /// Marks this caller as trying on the nodes until the mark is dropped: a release meanwhile
    /// goes to another head. Its attempt answers the first key it was told of, if any.
    pub(crate) fn trying(&self) -> Trying<'_> {
        self.wake.trying.store(true, Ordering::Release);
        Trying {
            wake: &self.wake,
            freed: self.wake.told(),
        }
    }

    /// The signal that wakes this caller: a release of a key it heads, or the head of one of
    /// its queues leaving.
    pub(crate) fn wake(&self) -> &Notify {
        &self.wake.notify
    }

    /// The keys other waiters in this caller's queues were told of and have not answered: a
    /// semaphore's head that looks for a free slot leaves those to them (two would split the
    /// votes).
    pub(crate) fn told_to_others(&self) -> Vec<Vec<u8>> {
        let queues = self.list.queues();
        self.keys
            .all()
            .iter()
            .filter_map(|key| queues.by_key.get(&**key))
            .flat_map(|queue| &queue.waiters)
            .filter(|(ticket, _)| *ticket != self.ticket)
            .flat_map(|(_, wake)| wake.lock_freed().clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }
}

/// A caller's mark that it is trying on the nodes ([`Place::trying`]), with the key its attempt
/// answers. The attempt ended: [`answered`](Trying::answered) forgets that key. Dropped without
/// it (the attempt was cancelled), the key stays told, and the caller leaving its place hands it
/// to another head.
pub(crate) struct Trying<'a> {
    wake: &'a Wake,
    freed: Option<Vec<u8>>,
}

impl Trying<'_> {
    /// The key whose release this attempt answers: a semaphore's waiter tries that slot.
    pub(crate) fn freed(&self) -> Option<&[u8]> {
        self.freed.as_deref()
    }

    /// The attempt ended: the key it answered is forgotten.
    pub(crate) fn answered(self) {
        if let Some(key) = &self.freed {
            self.wake.lock_freed().retain(|told| told != key);
        }
    }
}

impl Drop for Trying<'_> {
    fn drop(&mut self) {
        self.wake.trying.store(false, Ordering::Release);
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut emptied = Vec::new();
        // Releases told to this caller and not answered (it left mid-attempt, or was told while
        // trying) go to other heads, which would otherwise not hear of them.
        let unanswered = self.wake.lock_freed().clone();
        {
            let mut queues = self.list.queues();
            self.list.waiting.fetch_sub(1, Ordering::AcqRel);
            for key in self.keys.all() {
                let Some(queue) = queues.by_key.get_mut(&**key) else {
                    continue;
                };
                let position = queue
                    .waiters
                    .iter()
                    .position(|(ticket, _)| *ticket == self.ticket);
                queue.waiters.retain(|(ticket, _)| *ticket != self.ticket);
                // The waiter that moved up into the heads of this queue heads it now (and may
                // head all of its own): the next in line, or for a semaphore the one behind the
                // others that contend.
                if let Some(position) = position
                    && let Some((_, next)) = queue
                        .waiters
                        .iter()
                        .skip(position)
                        .enumerate()
                        .find(|(behind, (_, wake))| position + behind + 1 == wake.heads)
                        .map(|(_, waiter)| waiter)
                {
                    next.notify.notify_one();
                }
                if queue.waiters.is_empty() {
                    queues.by_key.remove(&**key);
                    emptied.push(key);
                } else if unanswered.iter().any(|told| **told == **key) {
                    queue.wake_heads(key);
                }
            }
        }
        if let Some(subscriptions) = self.list.subscriptions.get() {
            for key in emptied {
                for subscription in subscriptions {
                    subscription.unsubscribe(key);
                }
            }
        }
    }
}

/// How long until a quorum of `nodes` is free of every one of `keys` by expiry alone (`None` if
/// expiry alone never frees a quorum): for a set, the latest of its keys' [`expiry_bounds`], a
/// bound, not the moment (a node may free one key early and another late).
pub(crate) async fn free_by_expiry_after(
    nodes: &[Arc<Node>],
    quorum: usize,
    keys: &Keys,
) -> Option<Duration> {
    let keys: Vec<&[u8]> = keys.all().iter().map(|key| &**key).collect();
    expiry_bounds(nodes, quorum, &keys)
        .await
        .into_iter()
        .try_fold(Duration::ZERO, |latest, bound| Some(latest.max(bound?)))
}

/// For each of `keys`, in order, how long until a quorum of `nodes` is free of it by expiry
/// alone, from each node's `PTTL`s (one read of all the keys per node, [`pttls`]; a node that
/// does not answer counts as never freeing); `None` where expiry alone never frees a quorum.
pub(crate) async fn expiry_bounds(
    nodes: &[Arc<Node>],
    quorum: usize,
    keys: &[&[u8]],
) -> Vec<Option<Duration>> {
    let by_node: Vec<Vec<KeyTtl>> =
        futures::future::join_all(nodes.iter().map(|node| pttls(node, keys))).await;
    (0..keys.len())
        .map(|index| {
            let ttls: Vec<KeyTtl> = by_node
                .iter()
                .map(|ttls| ttls.get(index).copied().unwrap_or(KeyTtl::Unknown))
                .collect();
            free_after(&ttls, quorum)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;
    use crate::rules::hand_off::KEEP_FOR;

    /// The first key `place` was told of and has not answered.
    fn freed(place: &Place) -> Option<Vec<u8>> {
        place.wake.told()
    }

    /// Whether `place` has a wake-up waiting for it (consumed by looking).
    fn woken(place: &Place) -> bool {
        place.wake().notified().now_or_never().is_some()
    }

    /// A read-write lock's waiters: a release wakes every reader among the first eight and a
    /// writer wherever it stands (behind readers that are not heads too); the ninth reader
    /// waits its turn.
    #[tokio::test]
    async fn a_release_wakes_every_reader_head_and_the_writer_wherever_it_stands() {
        let list = Arc::new(WaitList::default());
        let w = Keys::One(Arc::from(&b"w"[..]));
        let readers: Vec<Place> = (0..9)
            .map(|_| {
                list.join(&[], Duration::from_secs(1), &w, MAX_HEADS, true)
                    .0
            })
            .collect();
        let (writer, _) = list.join(&[], Duration::from_secs(1), &w, usize::MAX, false);
        assert!(writer.is_head());
        list.wake(b"w", b"");
        assert!(readers.iter().take(8).all(woken), "every reader head");
        assert!(!woken(&readers[8]), "not the ninth reader");
        assert!(woken(&writer), "the writer behind nine readers");
    }

    #[tokio::test]
    async fn only_the_first_waiter_is_head_and_only_it_is_woken() {
        let list = Arc::new(WaitList::default());
        let k = Keys::One(Arc::from(&b"k"[..]));
        let join = || list.join(&[], Duration::from_secs(1), &k, 1, false).0;
        let (first, second, third) = (join(), join(), join());
        assert_eq!(list.waiters(b"k"), 3);
        assert!(first.is_head() && !second.is_head() && !third.is_head());

        list.wake(b"k", b"");
        assert!(woken(&first), "a release wakes the head");
        assert!(!woken(&second) && !woken(&third), "and no one else");

        // A waiter behind the head leaving wakes no one; the head leaving wakes the next.
        drop(third);
        assert!(!woken(&second));
        drop(first);
        assert!(second.is_head());
        assert!(woken(&second));
        drop(second);
        assert_eq!(list.waiters(b"k"), 0);
        assert!(
            list.queues().by_key.is_empty(),
            "an empty queue is forgotten"
        );
    }

    // promise: semaphore-permits
    #[tokio::test]
    async fn the_head_learns_which_key_a_release_freed_once() {
        let list = Arc::new(WaitList::default());
        let slots = set(&[b"s:0", b"s:1"]);
        let (head, _) = list.join(&[], Duration::from_secs(1), &slots, 1, false);
        let (next, _) = list.join(&[], Duration::from_secs(1), &slots, 1, false);
        assert_eq!(freed(&head), None);
        list.wake(b"s:1", b"");
        assert_eq!(freed(&head).as_deref(), Some(&b"s:1"[..]));
        assert_eq!(freed(&next), None, "only the head is told");
        // Kept until the attempt that answers it ends.
        head.trying().answered();
        assert_eq!(freed(&head), None);
        // The head leaving wakes the next without a freed key: it searches from a random slot.
        drop(head);
        assert!(woken(&next));
        assert_eq!(freed(&next), None);
    }

    /// A semaphore's waiters contend as many at once as its heads: a release wakes one head
    /// that is not trying already, once however many nodes publish it, and a head leaving lets
    /// the next waiter in, woken.
    // promise: semaphore-permits
    #[tokio::test]
    async fn a_semaphores_first_waiters_contend_together_and_a_release_wakes_an_idle_one() {
        let list = Arc::new(WaitList::default());
        let slots = set(&[b"s:0", b"s:1"]);
        let join = || {
            list.join(&[], Duration::from_secs(1), &slots, heads(2), false)
                .0
        };
        let (first, second, third) = (join(), join(), join());
        assert!(first.is_head() && second.is_head() && !third.is_head());

        let trying = first.trying();
        list.wake(b"s:1", b"");
        assert!(woken(&second), "the head not trying is woken");
        assert!(!woken(&first) && !woken(&third));
        assert_eq!(freed(&second).as_deref(), Some(&b"s:1"[..]));
        // Every node publishes a release: the same key again wakes nobody more.
        list.wake(b"s:1", b"");
        assert!(!woken(&first) && !woken(&second) && !woken(&third));
        // Another key with no idle head: the busy head told of the fewest keys, which answers
        // it after the attempt under way (one round, no search).
        list.wake(b"s:0", b"");
        assert!(woken(&first));
        assert_eq!(freed(&first).as_deref(), Some(&b"s:0"[..]));
        trying.answered();
        let attempt = first.trying();
        assert_eq!(attempt.freed(), Some(&b"s:0"[..]));
        attempt.answered();
        assert_eq!(freed(&first), None);

        // The second leaving lets the third in; the first stays a head, not woken.
        second.trying().answered();
        drop(second);
        assert!(third.is_head());
        assert!(woken(&third));
        assert!(!woken(&first));
        drop((first, third));
        assert!(list.queues().by_key.is_empty());
    }

    /// A release of this lock's own with an idle head here is kept (its message says so), until
    /// the key has been kept 50 ms in a row; with the head trying, it is shared. A kept message
    /// from another process wakes nobody here, nor do its later copies. (Broken on purpose by
    /// reading no `+`: the kept message wakes the head.)
    // promise: hand-off-kept
    #[tokio::test]
    async fn a_kept_release_wakes_nobody_here_and_a_key_kept_50_ms_is_left_to_all() {
        let list = Arc::new(WaitList::default());
        let k = Keys::One(Arc::from(&b"k"[..]));
        assert_eq!(
            list.hand(b"k", b"0000aaaa"),
            Hand::Share,
            "nobody waits here"
        );
        let (head, _) = list.join(&[], Duration::from_secs(1), &k, 1, false);

        assert_eq!(list.hand(b"k", b"0000aaaa"), Hand::Keep);
        assert_eq!(list.hand(b"k", b"0000aaaa"), Hand::Keep);
        // As if kept since 50 ms ago.
        let since = Instant::now().checked_sub(KEEP_FOR).unwrap();
        list.queues().by_key.get_mut(&b"k"[..]).unwrap().kept_since = Some(since);
        assert_eq!(
            list.hand(b"k", b"0000bbbb"),
            Hand::Yield,
            "kept 50 ms in a row"
        );
        list.wake(b"k", b"0000bbbb");
        assert!(
            !woken(&head),
            "a release left to all wakes nobody here by its message"
        );
        list.wake_after_yield(b"k");
        assert!(woken(&head), "but a round trip later");
        assert_eq!(list.hand(b"k", b"0000aaaa"), Hand::Keep, "a new turn");
        let trying = head.trying();
        assert_eq!(
            list.hand(b"k", b"0000aaaa"),
            Hand::Share,
            "the head is trying"
        );
        trying.answered();
        assert_eq!(list.hand(b"k", b"0000aaaa"), Hand::Keep);

        list.wake(b"k", b"0123abcd+");
        assert!(!woken(&head), "kept elsewhere");
        list.wake(b"k", b"0123abcd+");
        list.wake(b"k", b"0123abcd");
        assert!(!woken(&head), "nor by its later copies");
        list.wake(b"k", b"4567cdef");
        assert!(woken(&head), "a release left to everyone");
    }

    /// Every node publishes a release, some after the head told of it has finished its attempt:
    /// those late copies wake no other head (each would spend a round on a slot just taken),
    /// and tell the head told first once more only while it still waits and is idle.
    // promise: semaphore-permits
    #[tokio::test]
    async fn a_semaphores_release_wakes_one_head_once_however_late_its_copies() {
        let list = Arc::new(WaitList::default());
        let slots = set(&[b"s:0", b"s:1"]);
        let join = || {
            list.join(&[], Duration::from_secs(1), &slots, heads(2), false)
                .0
        };
        let (first, second) = (join(), join());
        list.wake(b"s:1", b"mark-one");
        assert!(woken(&first) && !woken(&second));
        // The first head's attempt ends (it lost the slot to another client).
        first.trying().answered();
        // A copy from another node, then more: told again once, the second head never.
        list.wake(b"s:1", b"mark-one");
        assert!(woken(&first) && !woken(&second));
        assert_eq!(freed(&first).as_deref(), Some(&b"s:1"[..]));
        first.trying().answered();
        list.wake(b"s:1", b"mark-one");
        list.wake(b"s:1", b"mark-one");
        assert!(!woken(&first) && !woken(&second), "answered: nobody more");
        // A copy while the told head is trying wakes nobody either.
        list.wake(b"s:0", b"mark-two");
        assert!(woken(&first));
        let trying = first.trying();
        list.wake(b"s:0", b"mark-two");
        assert!(!woken(&first) && !woken(&second));
        assert_eq!(second.told_to_others(), [b"s:0".to_vec()]);
        trying.answered();
        assert!(second.told_to_others().is_empty());
        // A new release is a new mark: it wakes an idle head as before.
        list.wake(b"s:1", b"mark-three");
        assert!(woken(&first));
        // The told head won and left: a late copy wakes nobody.
        first.trying().answered();
        drop(first);
        list.wake(b"s:1", b"mark-three");
        assert!(!woken(&second));

        // A head cancelled mid-attempt leaves its told key to another head.
        let third = join();
        list.wake(b"s:0", b"mark-four");
        assert!(woken(&second));
        let trying = second.trying();
        drop(trying);
        drop(second);
        assert!(woken(&third));
        assert_eq!(freed(&third).as_deref(), Some(&b"s:0"[..]));
    }

    fn set(keys: &[&[u8]]) -> Keys {
        Keys::Set(keys.iter().map(|key| Arc::from(*key)).collect())
    }

    #[tokio::test]
    async fn sets_in_opposite_orders_queue_by_arrival_and_never_both_wait_on_each_other() {
        let list = Arc::new(WaitList::default());
        // A set is sorted, so two sets name their keys in one order; what matters is that
        // each waiter's queues agree on who came first.
        let xy = list
            .join(&[], Duration::from_secs(1), &set(&[b"x", b"y"]), 1, false)
            .0;
        let y = list
            .join(
                &[],
                Duration::from_secs(1),
                &Keys::One(Arc::from(&b"y"[..])),
                1,
                false,
            )
            .0;
        let yx = list
            .join(&[], Duration::from_secs(1), &set(&[b"x", b"y"]), 1, false)
            .0;
        assert!(
            xy.is_head(),
            "the first to arrive heads every queue it stands in"
        );
        assert!(!y.is_head() && !yx.is_head());
        assert!(list.queued(&Keys::One(Arc::from(&b"x"[..]))));
        assert!(list.queued(&set(&[b"z", b"y"])), "one key queued is enough");
        assert!(!list.queued(&Keys::One(Arc::from(&b"z"[..]))));

        // A release of one key of the set wakes the set's waiter at the head of that queue.
        list.wake(b"x", b"");
        assert!(woken(&xy));
        drop(xy);
        // y came before the second set: it heads y's queue now, the set heads only x's.
        assert!(y.is_head() && !yx.is_head());
        assert!(woken(&y) && woken(&yx), "each new head of a queue is woken");
        drop(y);
        assert!(yx.is_head());
        assert!(woken(&yx));
        drop(yx);
        assert!(list.queues().by_key.is_empty());
        assert!(!list.queued(&set(&[b"x", b"y"])));
    }
}
