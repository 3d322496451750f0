//! One client of the lock: where it stands in an acquisition, and the two decisions it makes on
//! the way (the quorum tally and the validity left at the grant).

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

/// The tally of `yes` votes with `unanswered` nodes still to reply, for `quorum`.
pub fn tally(yes: usize, unanswered: usize, quorum: usize) -> Tally {
    if yes >= quorum {
        Tally::Won
    } else if yes.saturating_add(unanswered) < quorum {
        Tally::Lost
    } else {
        Tally::Open
    }
}

/// When a lock acquired from `t0` stops being valid: `t0 + ttl - drift` (the library's
/// `validity = ttl - elapsed - drift`, counted from the start of the acquisition).
pub fn valid_until(t0: Tick, ttl: Tick, drift: Tick) -> Tick {
    t0.saturating_add(ttl).saturating_sub(drift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_decides_as_soon_as_it_can() {
        assert_eq!(tally(2, 1, 2), Tally::Won);
        assert_eq!(tally(1, 1, 2), Tally::Open);
        assert_eq!(tally(1, 0, 2), Tally::Lost);
        assert_eq!(tally(0, 1, 2), Tally::Lost);
    }

    #[test]
    fn validity_runs_from_the_start_of_the_acquisition_less_the_drift() {
        assert_eq!(valid_until(2, 3, 1), 4);
        assert_eq!(valid_until(0, 1, 2), 0);
    }
}
