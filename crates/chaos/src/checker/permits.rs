//! The semaphore's promise, checked on the holds of its slots, pure: at no instant do more
//! holders believe they hold one of its permits than it has permits ([`OverPermits`]).
//!
//! Each slot is a lock of its own, so the per-resource overlap check already sees two holders
//! of one slot; this one sees k + 1 holders of k + 1 different slots, which only a slot past
//! the permits (or a permit counted some other way than by slots) can let in. Windows are the
//! holders' own beliefs (acquired until validity end or release), half-open, so a hand-off at
//! one instant is not an overlap.

use serde::Serialize;

use super::HoldRef;
use crate::history::{History, Semaphore};

/// An instant at which more holders held permits of a semaphore than it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct OverPermits {
    /// The semaphore.
    pub semaphore: String,
    /// Its permits.
    pub permits: u32,
    /// When one holder too many came in (µs).
    pub at_us: u64,
    /// The holds believed at that instant, in the order they began.
    pub holds: Vec<HoldRef>,
}

/// How a semaphore's permits were used in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PermitUse {
    /// The semaphore.
    pub semaphore: String,
    /// Its permits.
    pub permits: u32,
    /// Holds of its slots.
    pub holds: usize,
    /// The most holders believed at one instant (at most `permits` in a safe run; as many
    /// shows the bound was put to the test).
    pub most_at_once: usize,
}

/// Every semaphore of the history, its use, and every time it went over its permits: one
/// finding per excursion (from the instant one holder too many came in until the count fell
/// back), in time order.
pub(super) fn permits(history: &History) -> (Vec<PermitUse>, Vec<OverPermits>) {
    let mut uses = Vec::new();
    let mut found = Vec::new();
    for semaphore in &history.semaphores {
        let (used, over) = sweep(history, semaphore);
        uses.push(used);
        found.extend(over);
    }
    found.sort_by_key(|over| over.at_us);
    (uses, found)
}

/// One semaphore's holds in time order: its use and its excursions over its permits.
fn sweep(history: &History, semaphore: &Semaphore) -> (PermitUse, Vec<OverPermits>) {
    let holds: Vec<HoldRef> = history
        .holds
        .iter()
        .filter(|hold| semaphore.has_slot(&hold.resource))
        .map(HoldRef::of)
        .collect();
    // Ends before starts at one instant: windows are half-open (an empty one never counts).
    let mut edges: Vec<(u64, bool, usize)> = holds
        .iter()
        .enumerate()
        .filter(|(_, hold)| hold.start_us < hold.end_us)
        .flat_map(|(i, hold)| [(hold.start_us, true, i), (hold.end_us, false, i)])
        .collect();
    edges.sort_unstable();
    let permits = usize::try_from(semaphore.permits).unwrap_or(usize::MAX);
    let mut believed: Vec<usize> = Vec::new();
    let mut most_at_once = 0;
    let mut found = Vec::new();
    for (at_us, starts, i) in edges {
        let was_over = believed.len() > permits;
        if starts {
            believed.push(i);
        } else {
            believed.retain(|&held| held != i);
        }
        most_at_once = most_at_once.max(believed.len());
        if believed.len() > permits && !was_over {
            found.push(OverPermits {
                semaphore: semaphore.name.clone(),
                permits: semaphore.permits,
                at_us,
                holds: believed
                    .iter()
                    .filter_map(|&i| holds.get(i).cloned())
                    .collect(),
            });
        }
    }
    let used = PermitUse {
        semaphore: semaphore.name.clone(),
        permits: semaphore.permits,
        holds: holds.len(),
        most_at_once,
    };
    (used, found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::checker::tests::history;
    use crate::history::Hold;

    /// Two permits: three holds of three slots at once are one finding, however long it lasts;
    /// two at once, or a third starting as another ends, are none; other resources (and a
    /// name that only begins like the semaphore's) do not count.
    #[test]
    fn more_holders_than_permits_at_one_instant_is_a_finding() {
        let holds = vec![
            Hold::new("sem:0", 1, "a", 0, 100),
            Hold::new("sem:1", 2, "b", 10, 100),
            // Starts as "a" ends: back to back, not three at once.
            Hold::new("sem:0", 3, "c", 100, 200),
            // A third slot while "c" and "d" hold: over, until "e" ends.
            Hold::new("sem:1", 4, "d", 150, 300),
            Hold::new("sem:2", 5, "e", 160, 180),
            Hold::new("sem:2", 6, "f", 170, 190),
            // Not its slots.
            Hold::new("other", 7, "g", 150, 300),
            Hold::new("sem:x", 7, "h", 150, 300),
            Hold::new("semaphore:0", 7, "i", 150, 300),
        ];
        let mut history = history(holds, vec![]);
        history.semaphores = vec![Semaphore::new("sem", 2)];
        let (uses, found) = permits(&history);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!((uses[0].holds, uses[0].most_at_once), (6, 4));
        assert_eq!(found[0].at_us, 160);
        let tokens: Vec<&str> = found[0]
            .holds
            .iter()
            .map(|hold| hold.token.as_str())
            .collect();
        assert_eq!(tokens, ["c", "d", "e"]);
        let report = check(&history);
        assert!(!report.is_safe());
        // "e" and "f" overlap on slot 2: the per-resource check sees that pair too.
        assert_eq!(report.violations.len(), 1);
        // Four held at once (c, d, e, f at 170): with four permits the same holds keep the bound.
        history.semaphores = vec![Semaphore::new("sem", 4)];
        assert!(permits(&history).1.is_empty());
    }

    /// Without a semaphore in the history nothing is judged.
    #[test]
    fn no_semaphore_no_finding() {
        let holds = vec![
            Hold::new("sem:0", 1, "a", 0, 100),
            Hold::new("sem:1", 2, "b", 0, 100),
        ];
        let (uses, found) = permits(&history(holds, vec![]));
        assert!(uses.is_empty() && found.is_empty());
    }
}
