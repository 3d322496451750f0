//! One client of the lock: where it stands in an acquisition, and the two decisions it makes on
//! the way (the quorum tally and the validity left at the grant).

use std::time::Duration;

use quorumlock::model_rules::{self, Verdict, Vote};

use crate::ids::{ClientId, Fence, NodeSet, Tick, Token};

/// A client's progress through acquisitions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Client {
    /// The client's number.
    pub id: ClientId,
    /// How many acquisitions it has started; the current one's token carries this number.
    pub attempts: u8,
    /// Where it stands now.
    pub phase: Phase,
}

/// Where a client stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Phase {
    /// Not acquiring and not holding.
    #[default]
    Idle,
    /// Step 2: the acquire script is out to the nodes not in `answered`.
    Acquiring {
        /// When the acquisition started (T0).
        t0: Tick,
        /// The nodes that replied.
        answered: NodeSet,
        /// The nodes that replied "ours": each set our key and counted.
        ours: NodeSet,
        /// The largest counter among `ours`.
        fence: Fence,
        /// The smallest counter among `ours` (`Fence::MAX` before the first): equal to
        /// `fence` when every grant took the same, and then no write-back is needed.
        lowest: Fence,
    },
    /// Step 4: the quorum said ours with fence `fence`, which is being written back to `ours`.
    WritingBack {
        /// When the acquisition started (T0).
        t0: Tick,
        /// The fence: the largest counter the quorum replied.
        fence: Fence,
        /// The nodes that replied "ours" in step 2 (where our key may be).
        ours: NodeSet,
        /// The nodes of `ours` that replied to the write-back.
        answered: NodeSet,
        /// The nodes that confirmed it.
        confirmed: NodeSet,
    },
    /// Steps 5 and 6: granted; the grant is `State::grants[grant]`.
    Holding {
        /// The index of the grant in `State::grants`.
        grant: u8,
        /// The nodes where our key may be, to release.
        keys: NodeSet,
        /// How many more writes to the store this holder makes.
        writes_left: u8,
    },
    /// Step 7 (or a failed acquisition's cleanup): the release script is out to `pending`.
    Releasing {
        /// The nodes still to release.
        pending: NodeSet,
    },
}

impl Client {
    /// A client that has not started any acquisition.
    pub fn new(id: ClientId) -> Client {
        Client {
            id,
            attempts: 0,
            phase: Phase::Idle,
        }
    }

    /// The token of the client's current (or last) acquisition.
    pub fn token(&self) -> Token {
        Token::new(self.id, self.attempts)
    }
}

/// Where a vote stands: the library decides as soon as a quorum said yes, or can no longer say
/// yes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tally {
    /// A quorum said yes.
    Won,
    /// Too few nodes are left to make a quorum.
    Lost,
    /// Neither yet.
    Open,
}

/// The tally of `yes` votes with `unanswered` of `nodes` still to reply, for `quorum`: the
/// library's own tally (`src/rules/quorum.rs`), the other nodes counted as "not ours".
pub fn tally(nodes: usize, yes: usize, unanswered: usize, quorum: usize) -> Tally {
    let mut library = model_rules::Tally::new(nodes, quorum);
    let no = nodes.saturating_sub(yes).saturating_sub(unanswered);
    let votes = std::iter::repeat_n(Vote::Ours, yes).chain(std::iter::repeat_n(Vote::NotOurs, no));
    for vote in votes {
        library.record(vote);
    }
    match library.verdict() {
        Verdict::Won => Tally::Won,
        Verdict::Pending => Tally::Open,
        Verdict::Held | Verdict::Unavailable => Tally::Lost,
    }
}

/// When a lock acquired from `t0` stops being valid: `t0` plus what the library's
/// `validity(ttl, elapsed, drift)` (`src/rules/validity.rs`) leaves at `t0`, a tick being a
/// second; `t0` itself when nothing is left.
pub fn valid_until(t0: Tick, ttl: Tick, drift: Tick) -> Tick {
    let seconds = |ticks: Tick| Duration::from_secs(u64::from(ticks));
    let left = model_rules::validity(seconds(ttl), Duration::ZERO, seconds(drift));
    let left = left.map_or(0, |left| {
        Tick::try_from(left.as_secs()).unwrap_or(Tick::MAX)
    });
    t0.saturating_add(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_decides_as_soon_as_it_can() {
        assert_eq!(tally(3, 2, 1, 2), Tally::Won);
        assert_eq!(tally(3, 1, 1, 2), Tally::Open);
        assert_eq!(tally(3, 1, 0, 2), Tally::Lost);
        assert_eq!(tally(3, 0, 1, 2), Tally::Lost);
    }

    #[test]
    fn validity_runs_from_the_start_of_the_acquisition_less_the_drift() {
        assert_eq!(valid_until(2, 3, 1), 4);
        assert_eq!(valid_until(0, 1, 2), 0);
    }
}
