//! The ordering rule, per node, as pure bookkeeping: which of one acquisition's requests may
//! still reach a node, so that a release runs after them there. [`Record`] is one node's state;
//! `round/ledger.rs` keeps one per node under a lock and hands requests over by it. The rule and
//! why it is needed are told once, in `docs/ARCHITECTURE.md` ("The ordering rule").

/// Which kind of request, for what its end means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Can set our key (`SET NX PX`, acquire-or-renew).
    Acquire,
    /// Compare-and-delete: landing late can only delete our own key.
    Release,
}

/// What a release does on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// No request that can set our key ever went out to the node: send nothing.
    Skip,
    /// A request of ours is still in flight there: wait for it to finish first.
    Wait,
    /// Send the compare-and-delete.
    Send,
}

/// What one node may still get from one acquisition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Record {
    /// A request that can set the key was handed to the node since the last release that
    /// cleared it.
    handed: bool,
    /// Requests of ours (either kind) handed to the node and not finished.
    in_flight: u32,
    /// Oldest and newest connection generation on which a request that can set the key finished
    /// without a reply, since the last release that cleared the node.
    unanswered: Option<(u64, u64)>,
}

impl Record {
    /// A request of `kind` is handed to the node's connection.
    pub(crate) fn hand(&mut self, kind: Kind) {
        if kind == Kind::Acquire {
            self.handed = true;
        }
        self.in_flight = self.in_flight.saturating_add(1);
    }

    /// A request of `kind`, handed over on connection `generation`, finished: `answered` when
    /// the server replied to it (a value or an error reply), so it has run.
    pub(crate) fn finish(&mut self, kind: Kind, generation: u64, answered: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if kind == Kind::Acquire && !answered {
            self.unanswered = Some(match self.unanswered {
                None => (generation, generation),
                Some((oldest, newest)) => (oldest.min(generation), newest.max(generation)),
            });
        }
    }

    /// Whether nothing of ours is in flight to the node.
    pub(crate) fn quiet(&self) -> bool {
        self.in_flight == 0
    }

    /// What a release does on the node now.
    pub(crate) fn plan(&self) -> Plan {
        if self.in_flight > 0 {
            Plan::Wait
        } else if self.handed {
            Plan::Send
        } else {
            Plan::Skip
        }
    }

    /// A release's compare-and-delete was answered over connection `generation`. Returns whether
    /// that answer proves the node clear of our key: nothing of ours is in flight, and every
    /// request that could set the key was either answered or went out over that same connection,
    /// so it ran before the release. A cleared node starts afresh; otherwise the record is kept.
    pub(crate) fn cleared_by(&mut self, generation: u64) -> bool {
        let ordered = self.in_flight == 0
            && match self.unanswered {
                None => true,
                Some((oldest, newest)) => oldest == generation && newest == generation,
            };
        if ordered {
            *self = Record::default();
        }
        ordered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_never_sent_to_is_skipped() {
        let record = Record::default();
        assert_eq!(record.plan(), Plan::Skip);
        let mut released_only = Record::default();
        released_only.hand(Kind::Release);
        released_only.finish(Kind::Release, 1, false);
        assert_eq!(released_only.plan(), Plan::Skip);
    }

    #[test]
    fn a_request_in_flight_is_waited_for_then_released_after() {
        let mut record = Record::default();
        record.hand(Kind::Acquire);
        assert_eq!(record.plan(), Plan::Wait);
        assert!(!record.cleared_by(1), "not cleared while in flight");
        record.finish(Kind::Acquire, 1, true);
        assert_eq!(record.plan(), Plan::Send);
        assert!(
            record.cleared_by(2),
            "answered: ordered whatever the connection"
        );
        assert_eq!(record, Record::default());
    }

    #[test]
    fn an_unanswered_request_is_ordered_only_on_its_own_connection() {
        let mut record = Record::default();
        record.hand(Kind::Acquire);
        record.finish(Kind::Acquire, 3, false);
        assert_eq!(record.plan(), Plan::Send);
        assert!(!record.cleared_by(4), "a newer connection: may still land");
        assert_eq!(record.plan(), Plan::Send, "kept for the next release");
        assert!(record.cleared_by(3), "the same connection: ran before");
        assert_eq!(record.plan(), Plan::Skip);
    }

    #[test]
    fn unanswered_requests_on_two_connections_are_never_settled_by_one() {
        let mut record = Record::default();
        for generation in [2, 5] {
            record.hand(Kind::Acquire);
            record.finish(Kind::Acquire, generation, false);
        }
        assert!(!record.cleared_by(2));
        assert!(!record.cleared_by(5));
    }

    #[test]
    fn a_release_ending_without_reply_leaves_no_doubt() {
        let mut record = Record::default();
        record.hand(Kind::Acquire);
        record.finish(Kind::Acquire, 1, true);
        record.hand(Kind::Release);
        assert_eq!(record.plan(), Plan::Wait);
        record.finish(Kind::Release, 1, false);
        assert!(record.cleared_by(2));
    }
}
