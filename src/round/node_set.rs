//! [`NodeSet`]: what a [`Lock`](crate::Lock) and its guards share: its [`Members`] (the nodes,
//! the validated settings, the background work that outlives a call), the waiters, and the
//! keeper of its kept leases.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use super::keeper::Keeper;
use super::members::Members;
use super::wait_list::WaitList;

/// One lock's members with its waiters and keeper, shared by the lock's clones and its guards.
/// Reads as its [`Members`] (`node_set.nodes`, `node_set.settings`).
pub(crate) struct NodeSet {
    pub(crate) members: Arc<Members>,
    /// The callers waiting for a resource, and their wake-ups.
    pub(crate) wait_list: Arc<WaitList>,
    /// The leases kept alive, extended in batches.
    pub(crate) keeper: Arc<Keeper>,
}

impl Deref for NodeSet {
    type Target = Members;

    fn deref(&self) -> &Members {
        &self.members
    }
}

impl NodeSet {
    /// The longest one request to one node can take: connecting, then the command. A release
    /// waits at most this long for a request of ours still in flight to a node before it sends
    /// there, and a retry for the previous attempt's releases before it starts.
    pub(crate) fn request_bound(&self) -> Duration {
        self.settings
            .connect_timeout
            .saturating_add(self.settings.node_timeout)
    }
}
