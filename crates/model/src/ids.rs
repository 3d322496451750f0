//! The small names the model is written in: ticks, fences, node and client numbers, tokens, and
//! sets of nodes.

use std::fmt;

/// A point in model time, or a span of it, in ticks of the one global clock.
pub type Tick = u8;

/// A fence value: a node's counter, or the fence of a grant.
pub type Fence = u8;

/// A node's index, from 0.
pub type NodeId = u8;

/// A client's index, from 0 (shown as A, B, C, …).
pub type ClientId = u8;

/// The most nodes a model can have.
pub const MAX_NODES: usize = 5;

/// The most clients a model can have.
pub const MAX_CLIENTS: usize = 4;

/// The most grants one run of a model can make (clients × acquisitions per client).
pub const MAX_GRANTS: usize = 4;

/// The most writes one run of a model can send to the store (grants × writes per grant).
pub const MAX_WRITES: usize = 8;

/// A node's index as its id (indices are below [`MAX_NODES`] by validation).
pub(crate) fn as_node_id(index: usize) -> NodeId {
    NodeId::try_from(index).unwrap_or(NodeId::MAX)
}

/// A client's letter: A for client 0. Indices past Z show as `?`.
pub fn client_name(client: ClientId) -> char {
    char::from_u32(u32::from(b'A') + u32::from(client))
        .filter(char::is_ascii_uppercase)
        .unwrap_or('?')
}

/// What one acquisition writes into the lock key: the library's random token, here the client and
/// the number of the client's attempt, which is just as unique.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token {
    client: ClientId,
    attempt: u8,
}

impl Token {
    /// The token of `client`'s attempt number `attempt` (from 1).
    pub const fn new(client: ClientId, attempt: u8) -> Token {
        Token { client, attempt }
    }

    /// The client that acquires with this token.
    pub fn client(self) -> ClientId {
        self.client
    }

    /// Which of the client's acquisitions (from 1).
    pub fn attempt(self) -> u8 {
        self.attempt
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", client_name(self.client), self.attempt)
    }
}

/// A set of nodes (indices below 8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeSet(u8);

impl NodeSet {
    /// No node.
    pub const EMPTY: NodeSet = NodeSet(0);

    /// Nodes `0..count` (at most 8).
    pub fn first(count: usize) -> NodeSet {
        (0..count.min(8)).fold(NodeSet::EMPTY, |set, node| {
            set.with(NodeId::try_from(node).unwrap_or(NodeId::MAX))
        })
    }

    /// This set and `node` (unchanged for an index past 7).
    pub fn with(self, node: NodeId) -> NodeSet {
        NodeSet(self.0 | 1u8.checked_shl(u32::from(node)).unwrap_or(0))
    }

    /// This set without `node`.
    pub fn without(self, node: NodeId) -> NodeSet {
        NodeSet(self.0 & !1u8.checked_shl(u32::from(node)).unwrap_or(0))
    }

    /// Whether `node` is in the set.
    pub fn contains(self, node: NodeId) -> bool {
        self.0 & 1u8.checked_shl(u32::from(node)).unwrap_or(0) != 0
    }

    /// The nodes in both sets.
    pub fn intersection(self, other: NodeSet) -> NodeSet {
        NodeSet(self.0 & other.0)
    }

    /// How many nodes the set holds.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The nodes, lowest index first.
    pub fn iter(self) -> impl Iterator<Item = NodeId> {
        (0..8u8).filter(move |&node| self.contains(node))
    }
}

impl fmt::Display for NodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, node) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "n{node}")?;
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_set_holds_what_was_put_in_and_not_what_was_taken_out() {
        let set = NodeSet::EMPTY.with(0).with(2).with(5).without(2);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 5]);
        assert_eq!(set.len(), 2);
        assert!(set.contains(5) && !set.contains(2));
        assert_eq!(set.to_string(), "{n0,n5}");
        assert_eq!(NodeSet::first(3).to_string(), "{n0,n1,n2}");
        assert_eq!(NodeSet::EMPTY.with(200), NodeSet::EMPTY);
    }

    #[test]
    fn clients_are_letters() {
        assert_eq!(client_name(0), 'A');
        assert_eq!(client_name(2), 'C');
        assert_eq!(client_name(200), '?');
        assert_eq!(Token::new(1, 2).to_string(), "B#2");
    }
}
