//! [`NodeSet`]: what a [`Lock`](crate::Lock) and its guards share: the nodes, the validated
//! settings, and the background work that outlives a call.

use std::sync::Arc;
use std::time::Duration;

use super::background::Background;
use super::keeper::Keeper;
use super::wait_list::WaitList;
use crate::node::Node;
use crate::settings::Settings;

/// The nodes of one lock with its settings and background work, shared by the lock's clones and
/// its guards.
pub(crate) struct NodeSet {
    pub(crate) nodes: Vec<Arc<Node>>,
    pub(crate) settings: Settings,
    pub(crate) background: Arc<Background>,
    /// The callers waiting for a resource, and their wake-ups.
    pub(crate) wait_list: Arc<WaitList>,
    /// The leases kept alive, extended in batches.
    pub(crate) keeper: Arc<Keeper>,
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
