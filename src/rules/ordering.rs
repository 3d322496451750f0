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

/// How a request ended, for what it may have left on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Without a reply: it may have run, and over its connection it may still run.
    Unanswered,
    /// The server replied (a value or an error reply): it has run.
    Answered,
    /// The server replied that this acquire request did not set the key (it was held): it has
    /// run and left nothing of ours.
    Refused,
}

impl End {
    /// [`Answered`](End::Answered) or [`Unanswered`](End::Unanswered).
    pub(crate) fn replied(answered: bool) -> End {
        if answered {
            End::Answered
        } else {
            End::Unanswered
        }
    }
}

/// What a release does on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// No request that can set our key went out to the node, or every one that did was
    /// answered that it did not set it: send nothing.
    Skip,
    /// A request of ours is still in flight there: wait for it to finish first.
    Wait,
    /// Send the compare-and-delete.
    Send,
}

/// What one node may still get from one acquisition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Record {
    /// A request that can set the key finished on the node without being refused, since the
    /// last release that cleared it: our key may be there.
    may_hold: bool,
    /// Requests of ours (either kind) handed to the node and not finished.
    in_flight: u32,
    /// Whether `unanswered` holds a range. (A flag beside it rather than an `Option`, which
    /// would make a record 32 bytes instead of 24: a kept lease keeps one per node.)
    any_unanswered: bool,
    /// Oldest and newest connection generation on which a request that can set the key finished
    /// without a reply, since the last release that cleared the node.
    unanswered: (u64, u64),
}

impl Record {
    /// A request is handed to the node's connection.
    pub(crate) fn hand(&mut self) {
        self.in_flight = self.in_flight.saturating_add(1);
    }

    /// A request of `kind`, handed over on connection `generation`, ended as `end`.
    pub(crate) fn finish(&mut self, kind: Kind, generation: u64, end: End) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if kind != Kind::Acquire || end == End::Refused {
            return;
        }
        self.may_hold = true;
        if end == End::Unanswered {
            let (oldest, newest) = self.unanswered;
            self.unanswered = if self.any_unanswered {
                (oldest.min(generation), newest.max(generation))
            } else {
                (generation, generation)
            };
            self.any_unanswered = true;
        }
    }

    /// The record of a node that a lease taken elsewhere (resumed from its token) may hold:
    /// nothing of ours is known to be in flight, and a release must be sent.
    pub(crate) fn resumed() -> Record {
        Record {
            may_hold: true,
            ..Record::default()
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
        } else if self.may_hold {
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
            && (!self.any_unanswered || self.unanswered == (generation, generation));
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
        released_only.hand();
        released_only.finish(Kind::Release, 1, End::Unanswered);
        assert_eq!(released_only.plan(), Plan::Skip);
    }

    #[test]
    fn a_node_that_refused_every_request_is_skipped_and_one_that_did_not_is_sent_to() {
        let mut refused = Record::default();
        for generation in [1, 2] {
            refused.hand();
            assert_eq!(refused.plan(), Plan::Wait);
            refused.finish(Kind::Acquire, generation, End::Refused);
        }
        assert_eq!(refused.plan(), Plan::Skip, "held by someone else each time");
        // One request that may have set the key, before or after a refusal, is enough.
        for ends in [
            [End::Answered, End::Refused],
            [End::Refused, End::Answered],
            [End::Unanswered, End::Refused],
            [End::Refused, End::Unanswered],
        ] {
            let mut record = Record::default();
            for end in ends {
                record.hand();
                record.finish(Kind::Acquire, 1, end);
            }
            assert_eq!(record.plan(), Plan::Send, "{ends:?}");
        }
    }

    #[test]
    fn a_request_in_flight_is_waited_for_then_released_after() {
        let mut record = Record::default();
        record.hand();
        assert_eq!(record.plan(), Plan::Wait);
        assert!(!record.cleared_by(1), "not cleared while in flight");
        record.finish(Kind::Acquire, 1, End::Answered);
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
        record.hand();
        record.finish(Kind::Acquire, 3, End::Unanswered);
        assert_eq!(record.plan(), Plan::Send);
        assert!(!record.cleared_by(4), "a newer connection: may still land");
        assert_eq!(record.plan(), Plan::Send, "kept for the next release");
        assert!(record.cleared_by(3), "the same connection: ran before");
        assert_eq!(record.plan(), Plan::Skip);
    }

    #[test]
    fn a_record_is_24_bytes() {
        // A kept lease keeps one per node.
        assert_eq!(std::mem::size_of::<Record>(), 24);
    }

    #[test]
    fn unanswered_requests_on_two_connections_are_never_settled_by_one() {
        let mut record = Record::default();
        for generation in [2, 5] {
            record.hand();
            record.finish(Kind::Acquire, generation, End::Unanswered);
        }
        assert!(!record.cleared_by(2));
        assert!(!record.cleared_by(5));
    }

    #[test]
    fn a_release_ending_without_reply_leaves_no_doubt() {
        let mut record = Record::default();
        record.hand();
        record.finish(Kind::Acquire, 1, End::Answered);
        record.hand();
        assert_eq!(record.plan(), Plan::Wait);
        record.finish(Kind::Release, 1, End::Unanswered);
        assert!(record.cleared_by(2));
    }
}
