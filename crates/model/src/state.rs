//! The model's state: the nodes, clients, grants and store at one instant, and the grants in
//! the order they were made.

use crate::bounded::Bounded;
use crate::client::{Client, Phase};
use crate::ids::{Fence, MAX_CLIENTS, MAX_GRANTS, MAX_NODES, NodeSet, Tick, Token};
use crate::node::Node;
use crate::store::Store;

/// One grant: a client won the quorum, wrote its fence back to a majority, and had validity
/// left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Grant {
    /// The acquisition's token.
    pub token: Token,
    /// Its fence.
    pub fence: Fence,
    /// When its acquisition started (T0).
    pub t0: Tick,
    /// The first tick at which it is no longer valid.
    pub valid_until: Tick,
    /// Whether its quorum counted a node that had restarted without its data.
    pub counted_data_loss: bool,
}

/// Everything the model tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct State {
    /// Global time.
    pub now: Tick,
    /// The masters.
    pub nodes: Bounded<Node, MAX_NODES>,
    /// The clients.
    pub clients: Bounded<Client, MAX_CLIENTS>,
    /// How many more crash-restarts the environment may inject.
    pub restarts_left: u8,
    /// The nodes that have restarted without their data.
    pub lost_data: NodeSet,
    /// Every grant so far, in grant order.
    pub grants: Bounded<Grant, MAX_GRANTS>,
    /// The fenced store.
    pub store: Store,
}

impl State {
    /// The grant `client` holds, if it is in the holding phase (valid or not).
    pub fn held_grant(&self, client: &Client) -> Option<&Grant> {
        match client.phase {
            Phase::Holding { grant, .. } => self.grants.get(usize::from(grant)),
            _ => None,
        }
    }
}
