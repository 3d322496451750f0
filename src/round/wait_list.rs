//! The waiters of one lock: per lock key, a queue in arrival order whose head alone (a
//! semaphore's first few, below) contends on the nodes and alone is woken (each waiter has its own signal, so a release wakes one task, not
//! every waiter of the resource); the subscriptions (one per node, `node/subscription.rs`)
//! that turn a release published by any client into that signal; and the bound on how long a
//! waiter sleeps when no wake-up comes (the keys' expiry on a quorum, `rules/wait.rs`).
//!
//! A set's waiter stands in the queue of each of its keys, with one ticket, and contends only
//! when it heads every one of them. Tickets grow, and a waiter joins all its queues in one step,
//! so every queue is in ticket order: the waiter with the smallest ticket heads all of its
//! queues, and no two waiters each head a queue the other waits in (no deadlock, whatever order
//! sets name their resources in; no starvation, the order is arrival).
//!
//! A semaphore's waiter stands in the queue of every slot and contends while fewer than its
//! heads ([`heads`]: the permits, at most [`MAX_HEADS`]) are ahead of it in each: that many
//! waiters try at once, so slots freed together are taken together, and a release wakes one of
//! them that is not already trying.
//!
//! A key's channel is subscribed while someone waits for it and unsubscribed when the last
//! waiter leaves, so no message arrives for a resource nobody waits on.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use crate::node::Node;
use crate::node::pttl::pttl;
use crate::node::subscription::Subscription;
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

/// The callers waiting for one key, in arrival order, each with the signal that wakes it.
struct Queue {
    waiters: VecDeque<(u64, Arc<Wake>)>,
}

/// What wakes a waiter, and the key whose release woke it last: a semaphore's waiter tries
/// that slot first instead of searching the slots from a random one. Also how many may contend
/// at once in its queues, and whether it is trying now (a release then wakes another head).
#[derive(Default)]
struct Wake {
    notify: Notify,
    freed: Mutex<Option<Vec<u8>>>,
    heads: usize,
    /// A read-write lock's reader: a release wakes every head when one of them is a reader,
    /// since readers do not split the votes, they share the lock.
    shared: bool,
    trying: AtomicBool,
}

impl Wake {
    fn told(&self) -> Option<Vec<u8>> {
        self.freed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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

    /// Wakes one of `key`'s heads, the waiters that contend: its lock was released (here, or by
    /// another client on a node). Every head, if one is a read-write lock's reader. The one head of a lock or set, always; of a semaphore's
    /// heads, nobody if one was told of that key already and has not
    /// finished its attempt (each node publishes a release: one head answers it, two would split
    /// the votes); else the first head neither trying nor told of another key, which learns the
    /// key; else the first head, told nothing (it searches every slot on its next attempt). A
    /// wake-up a head is not waiting for yet is kept for its next wait, once.
    pub(crate) fn wake(&self, key: &[u8]) {
        let queues = self.queues();
        let Some(queue) = queues.by_key.get(key) else {
            return;
        };
        let heads: Vec<&Arc<Wake>> = queue
            .waiters
            .iter()
            .enumerate()
            // Each by its own heads: a read-write lock's readers behind its writer (who heads
            // alone) still contend, and are woken too.
            .filter(|(position, (_, wake))| *position < wake.heads)
            .map(|(_, (_, wake))| wake)
            .collect();
        if heads.iter().any(|wake| wake.shared) {
            for head in heads {
                head.notify.notify_one();
            }
            return;
        }
        if let [head] = heads[..] {
            // A lock's or a set's one head (or a semaphore's only one): it is told every time.
            *head.freed.lock().unwrap_or_else(PoisonError::into_inner) = Some(key.to_vec());
            head.notify.notify_one();
            return;
        }
        if heads.iter().any(|wake| wake.told().as_deref() == Some(key)) {
            return;
        }
        let idle = heads
            .iter()
            .find(|wake| !wake.trying.load(Ordering::Acquire) && wake.told().is_none());
        if let Some(head) = idle {
            *head.freed.lock().unwrap_or_else(PoisonError::into_inner) = Some(key.to_vec());
            head.notify.notify_one();
        } else if let Some(head) = heads.first() {
            head.notify.notify_one();
        }
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
            let on_message: crate::node::subscription::OnMessage = Arc::new(move |key: &[u8]| {
                if let Some(list) = list.upgrade() {
                    list.wake(key);
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
    /// wakes another head.
    pub(crate) fn trying(&self) -> Trying<'_> {
        self.wake.trying.store(true, Ordering::Release);
        Trying(&self.wake)
    }

    /// The signal that wakes this caller: a release of a key it heads, or the head of one of
    /// its queues leaving.
    pub(crate) fn wake(&self) -> &Notify {
        &self.wake.notify
    }

    /// The key whose release woke this caller, if one did since its last attempt ended.
    pub(crate) fn freed(&self) -> Option<Vec<u8>> {
        self.wake.told()
    }
}

/// A caller's mark that it is trying on the nodes ([`Place::trying`]); dropped when the attempt
/// ended, it forgets the key the caller was told of, which that attempt answered.
pub(crate) struct Trying<'a>(&'a Wake);

impl Drop for Trying<'_> {
    fn drop(&mut self) {
        *self.0.freed.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.0.trying.store(false, Ordering::Release);
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut emptied = Vec::new();
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

/// How long until a quorum of `nodes` is free of every one of `keys` by expiry alone, from each
/// node's `PTTL` of each key (a node that does not answer counts as never freeing); `None` if
/// expiry alone never frees a quorum. For a set, the latest of its keys' bounds: a bound, not
/// the moment (a node may free one key early and another late).
pub(crate) async fn free_by_expiry_after(
    nodes: &[Arc<Node>],
    quorum: usize,
    keys: &Keys,
) -> Option<Duration> {
    let bounds = futures::future::join_all(keys.all().iter().map(|key| async move {
        let ttls: Vec<KeyTtl> = futures::future::join_all(
            nodes
                .iter()
                .map(|node| async move { pttl(node, key).await.unwrap_or(KeyTtl::Unknown) }),
        )
        .await;
        free_after(&ttls, quorum)
    }))
    .await;
    bounds
        .into_iter()
        .try_fold(Duration::ZERO, |latest, bound| Some(latest.max(bound?)))
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

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
        list.wake(b"w");
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

        list.wake(b"k");
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
        assert_eq!(head.freed(), None);
        list.wake(b"s:1");
        assert_eq!(head.freed().as_deref(), Some(&b"s:1"[..]));
        assert_eq!(next.freed(), None, "only the head is told");
        // Kept until the attempt that answers it ends.
        drop(head.trying());
        assert_eq!(head.freed(), None);
        // The head leaving wakes the next without a freed key: it searches from a random slot.
        drop(head);
        assert!(woken(&next));
        assert_eq!(next.freed(), None);
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
        list.wake(b"s:1");
        assert!(woken(&second), "the head not trying is woken");
        assert!(!woken(&first) && !woken(&third));
        assert_eq!(second.freed().as_deref(), Some(&b"s:1"[..]));
        // Every node publishes a release: the same key again wakes nobody more.
        list.wake(b"s:1");
        assert!(!woken(&first) && !woken(&second) && !woken(&third));
        // Another key with no idle head: the first head, told nothing (it will search).
        list.wake(b"s:0");
        assert!(woken(&first));
        assert_eq!(first.freed(), None);
        drop(trying);
        list.wake(b"s:0");
        assert!(woken(&first), "the first idle head, in order");
        assert_eq!(first.freed().as_deref(), Some(&b"s:0"[..]));

        // The second leaving lets the third in; the first stays a head, not woken.
        drop(second);
        assert!(third.is_head());
        assert!(woken(&third));
        assert!(!woken(&first));
        drop((first, third));
        assert!(list.queues().by_key.is_empty());
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
        list.wake(b"x");
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
