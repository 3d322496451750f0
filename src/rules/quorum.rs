//! The quorum rule, as pure arithmetic: given the replies so far, is the operation won, lost, or
//! still open?
//!
//! The fan-out feeds one [`Vote`] per node into a [`Tally`] and stops listening as soon as the
//! [`Verdict`] is no longer [`Verdict::Pending`]: a majority of yeses wins at once, and once too
//! few nodes are left to reach the quorum the operation is lost without waiting for them.

/// The default quorum for `nodes` nodes: a strict majority.
pub fn majority(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// The quorum of a lock built with the `quorum-half` defect (test-only, see `defect.rs`): half
/// the nodes, rounded down (2 of 5), which two disjoint groups can both reach; at least one.
#[cfg(feature = "chaos-defects")]
pub(crate) fn half(nodes: usize) -> usize {
    (nodes / 2).max(1)
}

/// One node's contribution to a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vote {
    /// The node did what we asked (holds the key for us).
    Ours,
    /// The node answered, but the key belongs to someone else (or is gone).
    NotOurs,
    /// The node failed or timed out.
    Failed,
}

/// Where a tally stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not decided: the nodes still out could tip it either way.
    Pending,
    /// At least a quorum of nodes said yes.
    Won,
    /// The quorum can no longer be reached, and the failed nodes alone are not the reason: other
    /// owners hold the key on nodes we needed.
    Held,
    /// The quorum can no longer be reached because too many nodes failed.
    Unavailable,
}

/// Counts votes for one operation over `nodes` nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    nodes: usize,
    quorum: usize,
    ours: usize,
    not_ours: usize,
    failed: usize,
    /// The first verdict other than `Pending`: later votes never change a decision or its cause.
    decided: Option<Verdict>,
}

impl Tally {
    /// A tally with no votes yet. `quorum` is assumed validated (`majority(nodes) ..= nodes`).
    pub fn new(nodes: usize, quorum: usize) -> Self {
        Tally {
            nodes,
            quorum,
            ours: 0,
            not_ours: 0,
            failed: 0,
            decided: None,
        }
    }

    /// Adds one node's vote and returns the verdict after it. Votes beyond `nodes` are ignored:
    /// every node votes at most once.
    pub fn record(&mut self, vote: Vote) -> Verdict {
        if self.votes() < self.nodes {
            match vote {
                Vote::Ours => self.ours += 1,
                Vote::NotOurs => self.not_ours += 1,
                Vote::Failed => self.failed += 1,
            }
        }
        let verdict = self.verdict();
        if verdict != Verdict::Pending {
            self.decided = Some(verdict);
        }
        verdict
    }

    /// The number of nodes that have voted.
    pub fn votes(&self) -> usize {
        self.ours + self.not_ours + self.failed
    }

    /// The verdict for the votes so far.
    pub fn verdict(&self) -> Verdict {
        if let Some(decided) = self.decided {
            return decided;
        }
        let outstanding = self.nodes - self.votes();
        if self.ours >= self.quorum {
            Verdict::Won
        } else if self.ours + outstanding >= self.quorum {
            Verdict::Pending
        } else if self.failed > self.nodes - self.quorum {
            Verdict::Unavailable
        } else {
            Verdict::Held
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vote() -> impl Strategy<Value = Vote> {
        prop_oneof![Just(Vote::Ours), Just(Vote::NotOurs), Just(Vote::Failed)]
    }

    /// Any node count, any valid quorum, any order of any replies (including more than N).
    fn election() -> impl Strategy<Value = (usize, usize, Vec<Vote>)> {
        (1usize..=64).prop_flat_map(|nodes| {
            (
                Just(nodes),
                majority(nodes)..=nodes,
                proptest::collection::vec(vote(), 0..=nodes + 3),
            )
        })
    }

    #[test]
    fn majority_is_more_than_half() {
        for nodes in 1..1000usize {
            let m = majority(nodes);
            assert!(2 * m > nodes, "{m} of {nodes}");
            assert!(
                2 * (m - 1) <= nodes,
                "{m} of {nodes} is more than a bare majority"
            );
        }
    }

    #[test]
    fn three_of_five_wins_and_three_refusals_lose() {
        let mut t = Tally::new(5, 3);
        assert_eq!(t.record(Vote::Ours), Verdict::Pending);
        assert_eq!(t.record(Vote::Failed), Verdict::Pending);
        assert_eq!(t.record(Vote::Ours), Verdict::Pending);
        assert_eq!(t.record(Vote::Ours), Verdict::Won);

        let mut t = Tally::new(5, 3);
        t.record(Vote::NotOurs);
        t.record(Vote::NotOurs);
        assert_eq!(t.record(Vote::NotOurs), Verdict::Held);

        let mut t = Tally::new(5, 3);
        t.record(Vote::Failed);
        t.record(Vote::Failed);
        assert_eq!(t.record(Vote::Failed), Verdict::Unavailable);
    }

    #[test]
    fn a_vote_beyond_the_node_count_is_not_counted() {
        let mut t = Tally::new(3, 2);
        for vote in [Vote::Ours, Vote::Ours, Vote::NotOurs] {
            t.record(vote);
        }
        assert_eq!(t.votes(), 3);
        assert_eq!(t.record(Vote::Failed), Verdict::Won);
        assert_eq!(t.votes(), 3, "every node votes at most once");
    }

    #[test]
    fn two_failed_and_one_held_is_held() {
        let mut t = Tally::new(5, 3);
        t.record(Vote::Failed);
        t.record(Vote::Failed);
        assert_eq!(t.record(Vote::NotOurs), Verdict::Held);
    }

    proptest! {
        /// The verdict after each reply is what counting the replies says it should be, up to
        /// the first decision, which then stands.
        #[test]
        fn verdict_matches_the_count((nodes, quorum, votes) in election()) {
            let mut tally = Tally::new(nodes, quorum);
            let mut seen: Vec<Vote> = Vec::new();
            let mut first_decision = None;
            for vote in votes {
                let verdict = tally.record(vote);
                if seen.len() < nodes {
                    seen.push(vote);
                }
                let ours = seen.iter().filter(|v| **v == Vote::Ours).count();
                let failed = seen.iter().filter(|v| **v == Vote::Failed).count();
                let outstanding = nodes - seen.len();
                let expected = if ours >= quorum {
                    Verdict::Won
                } else if ours + outstanding >= quorum {
                    Verdict::Pending
                } else if failed + quorum > nodes {
                    Verdict::Unavailable
                } else {
                    Verdict::Held
                };
                let expected = *first_decision.get_or_insert(expected);
                if expected == Verdict::Pending {
                    first_decision = None;
                }
                prop_assert_eq!(verdict, expected);
            }
        }

        /// Once decided, a verdict never changes, and when every node has voted it is decided.
        #[test]
        fn decisions_are_final_and_complete((nodes, quorum, votes) in election()) {
            let mut tally = Tally::new(nodes, quorum);
            let mut decided = None;
            for vote in &votes {
                let verdict = tally.record(*vote);
                if let Some(first) = decided {
                    prop_assert_eq!(verdict, first);
                } else if verdict != Verdict::Pending {
                    decided = Some(verdict);
                }
            }
            if votes.len() >= nodes {
                prop_assert_ne!(tally.verdict(), Verdict::Pending);
            }
            prop_assert_eq!(tally.votes(), votes.len().min(nodes));
        }

        /// Two disjoint groups of clients can never both win: a quorum is a majority.
        #[test]
        fn two_owners_never_both_win(nodes in 1usize..=64, split in 0usize..=64) {
            let quorum = majority(nodes);
            let split = split.min(nodes);
            let mut first = Tally::new(nodes, quorum);
            let mut second = Tally::new(nodes, quorum);
            for node in 0..nodes {
                let (a, b) = if node < split { (Vote::Ours, Vote::NotOurs) } else { (Vote::NotOurs, Vote::Ours) };
                first.record(a);
                second.record(b);
            }
            prop_assert!(!(first.verdict() == Verdict::Won && second.verdict() == Verdict::Won));
        }
    }
}
