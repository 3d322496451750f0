//! An election's terms, pure: each leader's term must be larger than every earlier leader's of
//! the same election (leaders in the order they were elected), so no term is led twice and terms
//! only grow ([`TermRegression`]); and how many leaders each election had ([`TermUse`]), for the
//! `election` scenario's self-check.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::history::Hold;

/// A leader elected after another whose term was not smaller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TermRegression {
    /// The election (its resource).
    pub election: String,
    /// The earlier leader's token and term.
    pub earlier: (String, u64),
    /// The later leader's token and term, no larger.
    pub later: (String, u64),
    /// When the later leader was elected (µs).
    pub at_us: u64,
}

/// How one election went: its leaders and their terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TermUse {
    /// The election (its resource).
    pub election: String,
    /// How many leaders were elected.
    pub leaders: usize,
    /// The first leader's term.
    pub first_term: u64,
    /// The last leader's term.
    pub last_term: u64,
}

/// Per election, its leaders' terms in the order they were elected: each regression against
/// the largest term before it, and the election's summary.
pub(super) fn terms(holds: &[Hold]) -> (Vec<TermUse>, Vec<TermRegression>) {
    let mut elections: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in holds.iter().filter(|hold| hold.term.is_some()) {
        elections
            .entry(hold.resource.as_str())
            .or_default()
            .push(hold);
    }
    let mut uses = Vec::new();
    let mut regressions = Vec::new();
    for (election, mut leaders) in elections {
        leaders.sort_by_key(|hold| hold.acquired_us);
        let mut highest: Option<(&Hold, u64)> = None;
        for hold in &leaders {
            let term = hold.term.unwrap_or(0);
            match highest {
                Some((earlier, top)) if term <= top => regressions.push(TermRegression {
                    election: election.to_owned(),
                    earlier: (earlier.token.clone(), top),
                    later: (hold.token.clone(), term),
                    at_us: hold.acquired_us,
                }),
                _ => highest = Some((hold, term)),
            }
        }
        let term_of = |hold: Option<&&Hold>| hold.and_then(|hold| hold.term).unwrap_or(0);
        uses.push(TermUse {
            election: election.to_owned(),
            leaders: leaders.len(),
            first_term: term_of(leaders.first()),
            last_term: term_of(leaders.last()),
        });
    }
    (uses, regressions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader(token: &str, elected_us: u64, term: u64) -> Hold {
        Hold::new("e", 0, token, elected_us, elected_us + 100).led(term)
    }

    #[test]
    fn growing_terms_are_clean_and_counted() {
        let (uses, regressions) = terms(&[leader("a", 0, 1), leader("b", 200, 3)]);
        assert!(regressions.is_empty());
        assert_eq!(uses[0].leaders, 2);
        assert_eq!((uses[0].first_term, uses[0].last_term), (1, 3));
    }

    #[test]
    fn a_term_led_twice_or_going_back_is_a_regression() {
        let holds = [leader("a", 0, 5), leader("b", 200, 5), leader("c", 400, 4)];
        let (_, regressions) = terms(&holds);
        assert_eq!(regressions.len(), 2);
        assert_eq!(regressions[0].later, ("b".to_owned(), 5));
        assert_eq!(regressions[1].earlier, ("a".to_owned(), 5));
        assert_eq!(regressions[1].later, ("c".to_owned(), 4));
    }

    #[test]
    fn a_lock_s_holds_are_no_election() {
        let (uses, regressions) = terms(&[Hold::new("lock", 0, "a", 0, 100)]);
        assert!(uses.is_empty() && regressions.is_empty());
    }
}
