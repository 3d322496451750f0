//! What a node remembers across its connections about the server at its address: which server
//! it last knew (`run_id`, replication ID), when it last heard from it, and until when a server
//! that replaced it sits out. The judgement itself is pure (`rules/replacement.rs`); this keeps
//! its inputs and applies its verdict, once per new connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::rules::recovery::ServerFacts;
use crate::rules::replacement::{Known, Replacement, Succession, succession};

/// One node's memory of the server at its address.
#[derive(Debug)]
pub(super) struct History {
    /// The instant `last_heard` counts from.
    epoch: Instant,
    /// When a reply last came from the server, in nanoseconds after `epoch` plus one (0: never).
    last_heard: AtomicU64,
    /// How long a server that replaced the known one sits out.
    sit_out: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    known: Option<Known>,
    /// Until when the server at the address sits out, and why.
    sits_out: Option<(Instant, Replacement)>,
}

/// What a new connection's server may do, by what the node remembers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Standing {
    /// Votes as the restart guard allows.
    Votes,
    /// Sits out until the instant given, whatever its persistence.
    SitsOut(Instant, Replacement),
    /// A replica: never votes.
    Replica,
}

impl History {
    /// A node that has known no server yet; a replacement sits out for `sit_out`.
    pub(super) fn new(sit_out: Duration) -> History {
        History {
            epoch: Instant::now(),
            last_heard: AtomicU64::new(0),
            sit_out,
            state: Mutex::default(),
        }
    }

    /// A reply came from the server just now.
    pub(super) fn heard(&self) {
        let since = Instant::now().saturating_duration_since(self.epoch);
        let nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX - 1);
        self.last_heard
            .store(nanos.saturating_add(1), Ordering::Relaxed);
    }

    /// Judges the server a new connection reached, whose facts were read at `read_at`, and
    /// remembers it as the known one. A sit-out already running is kept (a restart of a server
    /// that sits out keeps its data, and so its reason); a new replacement starts one from
    /// `read_at`.
    pub(super) fn judge(&self, facts: &ServerFacts, read_at: Instant) -> Standing {
        let heard_ago = match self.last_heard.load(Ordering::Relaxed) {
            0 => None,
            nanos => self
                .epoch
                .checked_add(Duration::from_nanos(nanos - 1))
                .map(|heard| read_at.saturating_duration_since(heard)),
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let verdict = succession(state.known.as_ref(), facts, heard_ago);
        state.known = Some(Known::from_facts(facts));
        if let Succession::Replaced(replacement) = verdict {
            // A moment that far out does not exist: sit out for as long as there is.
            let until = read_at.checked_add(self.sit_out).unwrap_or(read_at);
            let longer = state
                .sits_out
                .as_ref()
                .is_none_or(|(current, _)| *current < until);
            if longer {
                state.sits_out = Some((until, replacement));
            }
        } else if verdict == Succession::Replica {
            return Standing::Replica;
        }
        match &state.sits_out {
            Some((until, replacement)) if *until > read_at => {
                Standing::SitsOut(*until, replacement.clone())
            }
            _ => {
                state.sits_out = None;
                Standing::Votes
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::replacement::tests::facts;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_replacement_sits_out_from_when_it_was_noticed_and_a_restart_of_it_keeps_sitting_out() {
        let history = History::new(MINUTE);
        let first = Instant::now();
        assert_eq!(history.judge(&facts("a", 600), first), Standing::Votes);
        history.heard();
        let noticed = Instant::now();
        let Standing::SitsOut(until, Replacement::OtherServer { .. }) =
            history.judge(&facts("b", 600), noticed)
        else {
            panic!("a server up for 10 minutes replaced one heard from just now");
        };
        assert_eq!(until, noticed + MINUTE);
        // The same server again (a reconnect) keeps the deadline it had.
        let later = noticed + Duration::from_secs(1);
        assert!(matches!(
            history.judge(&facts("b", 601), later),
            Standing::SitsOut(same, _) if same == until
        ));
        // Restarted with its data (AOF): still the data that lacked the old server's keys.
        history.heard();
        let restarted = Instant::now() + Duration::from_secs(2);
        assert!(matches!(
            history.judge(&facts("c", 0), restarted),
            Standing::SitsOut(same, _) if same == until
        ));
        // Once the period has passed, it votes.
        assert_eq!(
            history.judge(&facts("c", 70), until + Duration::from_secs(1)),
            Standing::Votes
        );
    }

    #[test]
    fn a_second_replacement_while_sitting_out_extends_the_sit_out_and_never_shortens_it() {
        let history = History::new(MINUTE);
        assert_eq!(
            history.judge(&facts("a", 600), Instant::now()),
            Standing::Votes
        );
        history.heard();
        let noticed = Instant::now();
        let Standing::SitsOut(first, _) = history.judge(&facts("b", 600), noticed) else {
            panic!("b replaced a");
        };
        history.heard();
        let later = Instant::now() + Duration::from_secs(10);
        let Standing::SitsOut(second, _) = history.judge(&facts("c", 600), later) else {
            panic!("c replaced b");
        };
        assert_eq!(
            second,
            later + MINUTE,
            "counted from the second replacement"
        );
        assert!(second > first);
        // A replacement judged with an earlier clock reading keeps the later deadline.
        history.heard();
        let Standing::SitsOut(third, _) = history.judge(&facts("d", 600), noticed) else {
            panic!("d replaced c");
        };
        assert_eq!(third, second);
    }

    #[test]
    fn a_restart_after_the_last_reply_votes_and_a_replica_never_does() {
        let history = History::new(MINUTE);
        assert_eq!(
            history.judge(&facts("a", 600), Instant::now()),
            Standing::Votes
        );
        history.heard();
        assert_eq!(
            history.judge(&facts("b", 0), Instant::now()),
            Standing::Votes
        );
        let replica = ServerFacts {
            replica: true,
            ..facts("b", 5)
        };
        assert_eq!(history.judge(&replica, Instant::now()), Standing::Replica);
    }
}
