//! Which properties have already been discovered in one checker run, so that each reports only
//! its first (shortest) path.

use std::sync::atomic::{AtomicBool, Ordering};

/// Which properties already have a discovery in the current run (up to eight per model).
///
/// stateright 0.31's breadth-first checker does not stop checking a property once it has a
/// discovery: every later state that violates (or shows) it replaces the path it keeps, so it
/// ends up with the last path found, often long and full of steps after the point. The
/// conditions therefore report a discovery for the first state only and stay quiet after it.
/// Breadth-first on one thread, states are checked in order of distance from the start, so the
/// path kept is a shortest one. Exploration is unchanged: a quiet condition still lets the
/// checker expand every state. One model value serves one checker run.
#[derive(Debug, Default)]
pub struct FirstDiscoveries([AtomicBool; 8]);

impl FirstDiscoveries {
    /// Whether to report a discovery for property `index` (in its model's order) at a state where
    /// `found` says whether it is one: only the first time.
    pub(crate) fn report(&self, index: usize, found: bool) -> bool {
        found
            && self
                .0
                .get(index)
                .is_some_and(|seen| !seen.swap(true, Ordering::Relaxed))
    }
}
