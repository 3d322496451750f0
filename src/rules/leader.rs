//! Who leads an election, from what each node holds: its lock key's token and PTTL, and the
//! leader record written beside it (`node/leader.rs`, read by `node/inspect.rs`). A candidate's
//! grants write its record with each node's fence as the term, and the fence's write-back
//! rewrites it with the quorum's term where the nodes took different ones. A leader is known
//! once a quorum of nodes hold its token and the same record (token and term): a candidate
//! whose grants disagree on the term leads nobody until its write-back settles it, unless a
//! quorum of its grants took the same smaller fence (3, 3, 2, 2, 2): then it is read with that
//! one until the write-back lands, a term still its alone and above every earlier leader's. A
//! largest-term rule would hide a leader for good behind a late grant's larger fence. A record
//! outliving its lock (released, expired, taken by the next leader) is never read as current.

use std::sync::Arc;
use std::time::Duration;

use crate::rules::rwlock::suffixed;

/// The key of the leader record of the election whose lock key is `writer`, `W:leader`; a
/// leader's publication is announced on the channel of that name.
pub(crate) fn record_key(writer: &[u8]) -> Arc<[u8]> {
    suffixed(writer, b":leader")
}

/// What an election's candidate asks its acquisition to write beside the lock key on each node
/// that grants it: the record's key and the leader's value (the term is the node's fence, and
/// the quorum's fence where the write-back raises it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Publication {
    pub(crate) record_key: Arc<[u8]>,
    pub(crate) value: Arc<[u8]>,
}

/// A leader's record on one node: its token, its term and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) token: String,
    pub(crate) term: u64,
    pub(crate) value: Vec<u8>,
}

/// What one node holds of an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    /// The token in the lock key, if it exists.
    pub(crate) holder: Option<String>,
    /// The lock key's `PTTL` in milliseconds (negative: no key, or no expiry).
    pub(crate) pttl_ms: i64,
    /// The leader record there, if any.
    pub(crate) record: Option<Record>,
    /// The resource's fence counter there, if any.
    pub(crate) fence: Option<u64>,
}

/// The leader a quorum agrees on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) record: Record,
    /// How long a quorum of the nodes still holds the leader's key, as read: the quorum-th
    /// longest of their `PTTL`s.
    pub(crate) held_for: Duration,
}

/// The leader that a quorum of `views` (one per node that answered) holds, token and record;
/// `None` when no token has that.
pub(crate) fn leader(views: &[View], quorum: usize) -> Option<Seen> {
    fn current(view: &View) -> Option<&Record> {
        view.record
            .as_ref()
            .filter(|record| view.holder.as_deref() == Some(record.token.as_str()))
    }
    views.iter().filter_map(current).find_map(|candidate| {
        let mut agreeing: Vec<(&Record, i64)> = views
            .iter()
            .filter_map(|view| current(view).map(|record| (record, view.pttl_ms)))
            .filter(|(record, _)| record.token == candidate.token && record.term == candidate.term)
            .collect();
        if agreeing.len() < quorum.max(1) {
            return None;
        }
        agreeing.sort_unstable_by_key(|(_, pttl)| std::cmp::Reverse(*pttl));
        let held_ms = agreeing
            .get(quorum.max(1).saturating_sub(1))
            .map_or(0, |(_, pttl)| *pttl);
        Some(Seen {
            record: candidate.clone(),
            held_for: Duration::from_millis(u64::try_from(held_ms).unwrap_or(0)),
        })
    })
}

/// How long until a lock key in `views` expires: the leader's view can change then without any
/// message (a leader that crashed, or one that never published). `None` without such a key.
pub(crate) fn next_expiry(views: &[View]) -> Option<Duration> {
    views
        .iter()
        .filter(|view| view.holder.is_some())
        .filter_map(|view| u64::try_from(view.pttl_ms).ok())
        .min()
        .map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(token: &str, term: u64) -> Record {
        Record {
            token: token.to_owned(),
            term,
            value: token.as_bytes().to_vec(),
        }
    }

    fn view(holder: Option<&str>, pttl_ms: i64, record: Option<Record>) -> View {
        View {
            holder: holder.map(str::to_owned),
            pttl_ms,
            record,
            fence: None,
        }
    }

    #[test]
    fn a_leader_is_one_whose_token_and_record_a_quorum_holds() {
        let views = [
            view(Some("a"), 900, Some(record("a", 7))),
            view(Some("a"), 500, Some(record("a", 7))),
            view(None, -2, Some(record("old", 6))),
        ];
        let seen = leader(&views, 2).expect("a quorum holds a");
        assert_eq!(seen.record, record("a", 7));
        assert_eq!(seen.held_for, Duration::from_millis(500));
    }

    #[test]
    fn a_won_lock_not_yet_published_leads_nobody() {
        // The new holder's key is on a quorum, the records are the last leader's.
        let views = [
            view(Some("b"), 900, Some(record("a", 7))),
            view(Some("b"), 900, Some(record("a", 7))),
            view(Some("a"), 100, Some(record("a", 7))),
        ];
        assert_eq!(leader(&views, 2), None);
    }

    #[test]
    fn a_leader_whose_grants_took_different_terms_leads_once_a_quorum_holds_one() {
        // Its grants wrote each node's own fence; the write-back has rewritten one so far.
        let mut views = [
            view(Some("a"), 900, Some(record("a", 11))),
            view(Some("a"), 900, Some(record("a", 21))),
            view(Some("a"), 900, Some(record("a", 31))),
        ];
        assert_eq!(leader(&views, 2), None);
        views[0].record = Some(record("a", 21));
        assert_eq!(
            leader(&views, 2).map(|seen| seen.record),
            Some(record("a", 21))
        );
    }

    #[test]
    fn a_quorum_of_grants_on_one_smaller_fence_is_read_until_the_write_back() {
        // The grants took fences 3, 3, 2, 2, 2: the term is 3; three nodes hold 2 for now.
        let mut views = [
            view(Some("b"), 900, Some(record("b", 3))),
            view(Some("b"), 900, Some(record("b", 3))),
            view(Some("b"), 900, Some(record("b", 2))),
            view(Some("b"), 900, Some(record("b", 2))),
            view(Some("b"), 900, Some(record("b", 2))),
        ];
        assert_eq!(
            leader(&views, 3).map(|seen| seen.record),
            Some(record("b", 2))
        );
        views[2].record = Some(record("b", 3));
        assert_eq!(
            leader(&views, 3).map(|seen| seen.record),
            Some(record("b", 3))
        );
    }

    #[test]
    fn a_record_on_a_minority_is_no_leader() {
        let views = [
            view(Some("a"), 900, Some(record("a", 7))),
            view(None, -2, None),
            view(Some("b"), 900, None),
        ];
        assert_eq!(leader(&views, 2), None);
    }

    #[test]
    fn the_next_expiry_is_the_soonest_key() {
        let views = [
            view(Some("a"), 900, None),
            view(None, -2, None),
            view(Some("a"), 300, None),
        ];
        assert_eq!(next_expiry(&views), Some(Duration::from_millis(300)));
        assert_eq!(next_expiry(&[view(None, -2, None)]), None);
    }

    proptest! {
        /// Whatever the nodes hold, a leader found is held, token and record (with its term),
        /// by a quorum, and for no longer than the quorum-th longest key.
        // promise: election-term
        #[test]
        fn a_leader_found_is_held_by_a_quorum(
            nodes in proptest::collection::vec(
                (0u8..3, 0u8..3, -2i64..2_000, 0u64..4), 1..8),
            quorum in 1usize..8,
        ) {
            let token = |n: u8| (n > 0).then(|| format!("t{n}"));
            let views: Vec<View> = nodes
                .iter()
                .map(|(holder, recorded, pttl, term)| View {
                    holder: token(*holder),
                    pttl_ms: *pttl,
                    record: token(*recorded).map(|token| Record { token, term: *term, value: Vec::new() }),
                    fence: None,
                })
                .collect();
            if let Some(seen) = leader(&views, quorum) {
                let holding: Vec<&View> = views
                    .iter()
                    .filter(|view| view.holder.as_deref() == Some(seen.record.token.as_str()))
                    .filter(|view| view.record.as_ref() == Some(&seen.record))
                    .collect();
                prop_assert!(holding.len() >= quorum);
                let longer = holding
                    .iter()
                    .filter(|view| u64::try_from(view.pttl_ms).unwrap_or(0) >= seen.held_for.as_millis() as u64)
                    .count();
                prop_assert!(longer >= quorum);
            }
        }
    }
}
