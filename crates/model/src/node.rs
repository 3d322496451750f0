//! One Redis master as the model sees it: the resource's lock key, its fence counter, and the
//! restart guard's view of it; and the three scripts the library runs on it, each one atomic step.

use crate::ids::{Fence, Tick, Token};

/// The lock key as the node holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct LockKey {
    /// The token of the acquisition that set it.
    pub token: Token,
    /// When the node's clock expires it, in global ticks: the node's clock rate is folded in when
    /// the key is set (a fast clock gives an earlier tick than `set + ttl`).
    pub expires_at: Tick,
}

/// One master.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Node {
    /// The lock key, if set and not yet expired.
    pub key: Option<LockKey>,
    /// The fence counter: never expires, lost only in a restart without data.
    pub counter: Fence,
    /// Set by a restart without data while the restart guard is on: before this tick the node
    /// does not vote (clients do not count it in acquisitions or write-backs).
    pub recovering_until: Option<Tick>,
    /// Set by a restart without data when counter recovery is on (the library's recovers within the acquisition, see
    /// [`Config::counter_recovery`](crate::config::Config::counter_recovery)): the node does not
    /// vote until its counter has been raised to the other nodes' largest.
    pub counter_stale: bool,
}

/// The acquire script's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireReply {
    /// The key was free: it now holds our token, and the counter was incremented to `counter`.
    Ours {
        /// The counter after `INCR`.
        counter: Fence,
    },
    /// Another acquisition's key is there.
    Held {
        /// Whose key it is.
        by: Token,
    },
}

/// The write-back script's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteBackReply {
    /// The key still holds our token: the counter went from `before` to `after`, the larger of
    /// `before` and our fence.
    Confirmed {
        /// The counter before the write-back.
        before: Fence,
        /// The counter after it.
        after: Fence,
    },
    /// The key is gone or someone else's.
    NotOurs,
}

/// What a node keeps through a crash and restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Restart {
    /// Everything (AOF with `appendfsync always`): the key and the counter.
    WithData,
    /// Nothing (no persistence): the key and the counter are gone.
    WithoutData,
}

impl Node {
    /// Whether the node's key is ours (present and unexpired: expired keys are gone).
    fn holds(&self, token: Token) -> bool {
        self.key.is_some_and(|key| key.token == token)
    }

    /// Whether clients count this node's replies at `now`: not during the restart guard, nor
    /// while its counter awaits recovery.
    pub fn votes(&self, now: Tick) -> bool {
        self.recovering_until.is_none_or(|until| now >= until) && !self.counter_stale
    }

    /// The acquire script: if the key is free, `SET key token PX ttl` then `INCR counter`, and
    /// reply the counter; else reply whose key it is. `expires_at` is when this node's clock
    /// ends a key set now.
    pub fn acquire(&mut self, token: Token, expires_at: Tick) -> AcquireReply {
        if let Some(key) = self.key {
            return AcquireReply::Held { by: key.token };
        }
        self.key = Some(LockKey { token, expires_at });
        self.counter = self.counter.saturating_add(1);
        AcquireReply::Ours {
            counter: self.counter,
        }
    }

    /// The write-back script: if the key still holds our token, `counter = max(counter, fence)`.
    pub fn write_back(&mut self, token: Token, fence: Fence) -> WriteBackReply {
        if !self.holds(token) {
            return WriteBackReply::NotOurs;
        }
        let before = self.counter;
        self.counter = before.max(fence);
        WriteBackReply::Confirmed {
            before,
            after: self.counter,
        }
    }

    /// The release script: delete the key if it holds our token; the counter stays. Whether a key
    /// was deleted.
    pub fn release(&mut self, token: Token) -> bool {
        let ours = self.holds(token);
        if ours {
            self.key = None;
        }
        ours
    }

    /// A crash and restart. For a node that lost its data, `recovering_until` is the restart
    /// guard's verdict (`None` with the guard off) and `counter_stale` whether its counter must
    /// be recovered before it votes; a node that kept its data keeps what it had.
    pub fn restart(
        &mut self,
        restart: Restart,
        recovering_until: Option<Tick>,
        counter_stale: bool,
    ) {
        if restart == Restart::WithoutData {
            *self = Node {
                key: None,
                counter: 0,
                recovering_until,
                counter_stale,
            };
        }
    }

    /// Counter recovery (the library's runs within the acquisition instead): raises the counter to `others_max`, the largest
    /// counter of the other nodes, after which the node may vote again (once the restart guard
    /// also allows). The counter before and after.
    pub fn recover_counter(&mut self, others_max: Fence) -> (Fence, Fence) {
        let before = self.counter;
        self.counter = before.max(others_max);
        self.counter_stale = false;
        (before, self.counter)
    }

    /// What the passing of time does at `now`: the key expires on the node's clock, and the
    /// restart guard ends. Both are forgotten as soon as they no longer matter, so that states
    /// differing only in a dead key are one state.
    pub fn advance_to(&mut self, now: Tick) {
        if self.key.is_some_and(|key| key.expires_at <= now) {
            self.key = None;
        }
        if self.recovering_until.is_some_and(|until| now >= until) {
            self.recovering_until = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Token = Token::new(0, 1);
    const B: Token = Token::new(1, 1);

    #[test]
    fn acquire_sets_the_key_and_counts_only_when_the_key_is_free() {
        let mut node = Node::default();
        assert_eq!(node.acquire(A, 3), AcquireReply::Ours { counter: 1 });
        assert_eq!(node.acquire(B, 3), AcquireReply::Held { by: A });
        assert_eq!(node.counter, 1);
        node.advance_to(3);
        assert_eq!(node.acquire(B, 6), AcquireReply::Ours { counter: 2 });
    }

    #[test]
    fn write_back_raises_the_counter_only_under_our_key() {
        let mut node = Node::default();
        node.acquire(A, 3);
        assert_eq!(
            node.write_back(A, 5),
            WriteBackReply::Confirmed {
                before: 1,
                after: 5
            }
        );
        assert_eq!(
            node.write_back(A, 2),
            WriteBackReply::Confirmed {
                before: 5,
                after: 5
            }
        );
        assert_eq!(node.write_back(B, 9), WriteBackReply::NotOurs);
        assert_eq!(node.counter, 5);
    }

    #[test]
    fn release_deletes_only_our_key_and_keeps_the_counter() {
        let mut node = Node::default();
        node.acquire(A, 3);
        assert!(!node.release(B));
        assert!(node.release(A));
        assert_eq!((node.key, node.counter), (None, 1));
    }

    #[test]
    fn a_restart_without_data_forgets_key_and_counter_and_may_sit_out_the_vote() {
        let mut kept = Node::default();
        kept.acquire(A, 3);
        let before = kept;
        kept.restart(Restart::WithData, Some(9), true);
        assert_eq!(kept, before);

        let mut lost = before;
        lost.restart(Restart::WithoutData, Some(4), false);
        assert_eq!((lost.key, lost.counter), (None, 0));
        assert!(!lost.votes(3));
        lost.advance_to(4);
        assert!(lost.votes(4));
        assert_eq!(lost.recovering_until, None);
    }

    #[test]
    fn a_node_whose_counter_is_stale_votes_only_after_recovering_it() {
        let mut node = Node::default();
        node.acquire(A, 3);
        node.restart(Restart::WithoutData, None, true);
        assert!(!node.votes(0));
        assert_eq!(node.recover_counter(7), (0, 7));
        assert!(node.votes(0));
    }
}
