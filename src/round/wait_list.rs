//! The waiters of one lock: per resource, a queue in arrival order whose head alone contends on
//! the nodes and alone is woken (each waiter has its own signal, so a release wakes one task, not
//! every waiter of the resource); the subscriptions (one per node, `node/subscription.rs`)
//! that turn a release published by any client into that signal; and the bound on how long a
//! waiter sleeps when no wake-up comes (the key's expiry on a quorum, `rules/wait.rs`).
//!
//! A resource's channel is subscribed while someone waits for it and unsubscribed when the last
//! waiter leaves, so no message arrives for a resource nobody waits on.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use crate::node::Node;
use crate::node::pttl::pttl;
use crate::node::subscription::Subscription;
use crate::rules::wait::{KeyTtl, free_after};

/// The waiters of one lock, by lock key.
#[derive(Default)]
pub(crate) struct WaitList {
    queues: Mutex<Queues>,
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
    waiters: VecDeque<(u64, Arc<Notify>)>,
}

/// A caller's place in a key's queue; leaving it (dropping it) lets the next one be head.
pub(crate) struct Place {
    list: Arc<WaitList>,
    key: Vec<u8>,
    ticket: u64,
    wake: Arc<Notify>,
}

impl WaitList {
    fn queues(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the tail of `key`'s queue. The first waiter of a key subscribes to its channel on
    /// every node; the receivers complete as each node confirms (or fails: then that node's
    /// releases are heard only through the expiry bound).
    pub(crate) fn join(
        self: &Arc<Self>,
        nodes: &[Arc<Node>],
        connect_timeout: Duration,
        key: &[u8],
    ) -> (Place, Vec<oneshot::Receiver<()>>) {
        let wake = Arc::new(Notify::new());
        let (ticket, first) = {
            let mut queues = self.queues();
            let ticket = queues.next_ticket;
            queues.next_ticket = ticket.wrapping_add(1);
            let first = !queues.by_key.contains_key(key);
            let queue = queues.by_key.entry(key.to_vec()).or_insert_with(|| Queue {
                waiters: VecDeque::new(),
            });
            queue.waiters.push_back((ticket, Arc::clone(&wake)));
            (ticket, first)
        };
        let confirmations = if first {
            self.subscriptions(nodes, connect_timeout)
                .iter()
                .map(|subscription| subscription.subscribe(key))
                .collect()
        } else {
            Vec::new()
        };
        let place = Place {
            list: Arc::clone(self),
            key: key.to_vec(),
            ticket,
            wake,
        };
        (place, confirmations)
    }

    /// Wakes the first of `key`'s waiters, the only one that contends: its lock was released
    /// (here, or by another client on a node). A wake-up it is not waiting for yet is kept for
    /// its next wait, once: several messages for one release cost at most one extra attempt.
    pub(crate) fn wake(&self, key: &[u8]) {
        if let Some((_, head)) = self
            .queues()
            .by_key
            .get(key)
            .and_then(|queue| queue.waiters.front())
        {
            head.notify_one();
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
    /// Whether this caller is first in its key's queue, and so may contend on the nodes.
    pub(crate) fn is_head(&self) -> bool {
        self.list
            .queues()
            .by_key
            .get(&self.key)
            .and_then(|queue| queue.waiters.front())
            .is_some_and(|(ticket, _)| *ticket == self.ticket)
    }

    /// The signal that wakes this caller: a release while it is head, or the head leaving.
    pub(crate) fn wake(&self) -> &Notify {
        &self.wake
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let last = {
            let mut queues = self.list.queues();
            let Some(queue) = queues.by_key.get_mut(&self.key) else {
                return;
            };
            let was_head = queue
                .waiters
                .front()
                .is_some_and(|(ticket, _)| *ticket == self.ticket);
            queue.waiters.retain(|(ticket, _)| *ticket != self.ticket);
            if was_head && let Some((_, next)) = queue.waiters.front() {
                // The next in line is head now.
                next.notify_one();
            }
            let last = queue.waiters.is_empty();
            if last {
                queues.by_key.remove(&self.key);
            }
            last
        };
        if last && let Some(subscriptions) = self.list.subscriptions.get() {
            for subscription in subscriptions {
                subscription.unsubscribe(&self.key);
            }
        }
    }
}

/// How long until a quorum of `nodes` is free of `key` by expiry alone, from each node's
/// `PTTL` (a node that does not answer counts as never freeing); `None` if expiry alone never
/// frees a quorum.
pub(crate) async fn free_by_expiry_after(
    nodes: &[Arc<Node>],
    quorum: usize,
    key: &[u8],
) -> Option<Duration> {
    let ttls: Vec<KeyTtl> = futures::future::join_all(
        nodes
            .iter()
            .map(|node| async move { pttl(node, key).await.unwrap_or(KeyTtl::Unknown) }),
    )
    .await;
    free_after(&ttls, quorum)
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    /// Whether `place` has a wake-up waiting for it (consumed by looking).
    fn woken(place: &Place) -> bool {
        place.wake().notified().now_or_never().is_some()
    }

    #[tokio::test]
    async fn only_the_first_waiter_is_head_and_only_it_is_woken() {
        let list = Arc::new(WaitList::default());
        let join = || list.join(&[], Duration::from_secs(1), b"k").0;
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
}
