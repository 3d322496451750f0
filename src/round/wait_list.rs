//! The waiters of one lock: per resource, a queue in arrival order whose head alone contends on
//! the nodes, and one wake-up signal; the subscriptions (one per node, `node/subscription.rs`)
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

/// The callers waiting for one key, in arrival order, and the signal that wakes them.
struct Queue {
    tickets: VecDeque<u64>,
    wake: Arc<Notify>,
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
        let (ticket, wake, first) = {
            let mut queues = self.queues();
            let ticket = queues.next_ticket;
            queues.next_ticket = ticket.wrapping_add(1);
            let first = !queues.by_key.contains_key(key);
            let queue = queues.by_key.entry(key.to_vec()).or_insert_with(|| Queue {
                tickets: VecDeque::new(),
                wake: Arc::default(),
            });
            queue.tickets.push_back(ticket);
            (ticket, Arc::clone(&queue.wake), first)
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

    /// Wakes `key`'s waiters: its lock was released (here, or by another client on a node).
    pub(crate) fn wake(&self, key: &[u8]) {
        if let Some(queue) = self.queues().by_key.get(key) {
            queue.wake.notify_waiters();
        }
    }

    /// How many callers wait for `key` now.
    pub(crate) fn waiters(&self, key: &[u8]) -> usize {
        self.queues()
            .by_key
            .get(key)
            .map_or(0, |queue| queue.tickets.len())
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
            .and_then(|queue| queue.tickets.front())
            == Some(&self.ticket)
    }

    /// The signal that wakes this key's waiters (a release, or the head leaving).
    pub(crate) fn wake(&self) -> &Arc<Notify> {
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
            queue.tickets.retain(|ticket| *ticket != self.ticket);
            let last = queue.tickets.is_empty();
            if last {
                queues.by_key.remove(&self.key);
            }
            last
        };
        if last {
            if let Some(subscriptions) = self.list.subscriptions.get() {
                for subscription in subscriptions {
                    subscription.unsubscribe(&self.key);
                }
            }
        } else {
            // The next in line may be head now.
            self.wake.notify_waiters();
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
