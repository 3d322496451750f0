//! Whether a release of this process keeps its key here (a waiter of the same lock, idle, takes
//! it) or leaves it to every client's waiters, and how the release's message says so, as pure
//! logic.
//!
//! An idle waiter of the releasing lock wins the key almost always: it is woken before the
//! nodes answer, and its `SET NX` follows the release on each connection (`round/release.rs`).
//! Other processes' waiters, woken by the message, could only be refused, and would be busy
//! trying meanwhile, deaf to the next release. So a kept release's message says so, and they
//! sleep on. Kept for [`KEEP_FOR`] in a row, the next release is left to everyone: the other
//! processes' waiters race for it, by the message, and this one's waiter is woken a round trip
//! later ([`yield_pause`]), so that it only takes a key nobody else wanted. (Woken by the
//! message too, it won nearly every such race: it subscribed first, and its requests went
//! out first; in a test here a waiter elsewhere waited from 0.2 s to over 20 s for a turn.)

use std::time::Duration;

/// How long a process keeps handing a key to its own waiters before it leaves a release to
/// every process: the longest a waiter elsewhere goes without a chance while the key changes
/// hands here (plus one hold).
pub(crate) const KEEP_FOR: Duration = Duration::from_millis(50);

/// What a release of this process does for the waiters of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hand {
    /// An idle waiter here is woken before the nodes answer; the message tells other
    /// processes' waiters to sleep on.
    Keep,
    /// No idle waiter here: one here is told (it tries after its attempt under way) and every
    /// process's waiters are woken by the message.
    Share,
    /// Kept here long enough: the message wakes other processes' waiters, and this one's is
    /// woken a round trip later.
    Yield,
}

/// The hand of a release, from whether a waiter of the key here is idle (neither trying nor
/// told of another release) and how long the key has been kept here in a row, if it has.
pub(crate) fn hand(idle_here: bool, kept_for: Option<Duration>) -> Hand {
    match kept_for {
        _ if !idle_here => Hand::Share,
        Some(kept_for) if kept_for >= KEEP_FOR => Hand::Yield,
        _ => Hand::Keep,
    }
}

/// How long after its release was decided a process that left the key to every process
/// (`Yield`) wakes its own waiter: as long as the release's round took, a round trip, which the
/// others' waiters, woken by its message, need to send their requests; `KEEP_FOR` at most.
pub(crate) fn yield_pause(release_took: Duration) -> Duration {
    release_took.min(KEEP_FOR)
}

/// What a kept release's message ends with, after its mark: a mark is hex digits.
const KEPT: &str = "+";

/// What a release published: its mark (empty when the message stands for releases unknown),
/// and whether the releaser kept the key.
pub(crate) fn read_message(message: &[u8]) -> (&[u8], bool) {
    match message.strip_suffix(KEPT.as_bytes()) {
        Some(mark) => (mark, true),
        None => (message, false),
    }
}

/// What a release's script appends to the mark it publishes, if anything: a release that
/// keeps nothing sends no such argument (the uncontended release among them).
pub(crate) fn kept_suffix(hand: Hand) -> Option<&'static str> {
    match hand {
        Hand::Keep => Some(KEPT),
        Hand::Share | Hand::Yield => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn an_idle_waiter_keeps_the_key_until_its_turn_is_over() {
        assert_eq!(hand(true, None), Hand::Keep);
        assert_eq!(hand(true, Some(Duration::from_millis(49))), Hand::Keep);
        assert_eq!(hand(true, Some(KEEP_FOR)), Hand::Yield);
        assert_eq!(hand(false, None), Hand::Share);
        assert_eq!(hand(false, Some(KEEP_FOR * 2)), Hand::Share);
    }

    #[test]
    fn a_yield_pauses_one_round_trip_and_never_longer_than_a_turn() {
        assert_eq!(
            yield_pause(Duration::from_micros(150)),
            Duration::from_micros(150)
        );
        assert_eq!(yield_pause(Duration::from_secs(8)), KEEP_FOR);
    }

    #[test]
    fn a_kept_message_is_its_mark_and_a_plus() {
        let suffix = kept_suffix(Hand::Keep).unwrap();
        let message = [b"0123abcd".as_slice(), suffix.as_bytes()].concat();
        assert_eq!(read_message(&message), (&b"0123abcd"[..], true));
        assert_eq!(read_message(b"0123abcd"), (&b"0123abcd"[..], false));
        assert_eq!(read_message(b""), (&b""[..], false));
        assert_eq!(kept_suffix(Hand::Share), None);
        assert_eq!(kept_suffix(Hand::Yield), None);
    }

    proptest! {
        /// A mark of hex digits reads back as itself, kept or not.
        #[test]
        fn any_mark_reads_back(mark in "[0-9a-f]{0,8}", keep in any::<bool>()) {
            let hand = if keep { Hand::Keep } else { Hand::Share };
            let message = format!("{mark}{}", kept_suffix(hand).unwrap_or_default());
            prop_assert_eq!(read_message(message.as_bytes()), (mark.as_bytes(), keep));
        }
    }
}
