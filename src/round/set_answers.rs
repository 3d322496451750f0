//! [`SetAnswers`]: what each node of a round said about each key of a set (a release's or an
//! extension's per-key flags), collected as the nodes answer and read back only for the nodes
//! that had answered when the round was decided, so that it agrees with the round's outcomes.

use std::sync::{Arc, Mutex, PoisonError};

use super::fan_out::Round;
use crate::outcome::{NodeReply, SetOutcome};
use crate::rules::resources::Keys;

/// The per-key answers of one round over a set; shared by its requests.
#[derive(Clone, Default)]
pub(crate) struct SetAnswers(Arc<Mutex<Vec<SetOutcome>>>);

impl SetAnswers {
    /// Answers to collect, for a set; `None` for one key, which has none.
    pub(crate) fn for_keys(keys: &Keys) -> Option<SetAnswers> {
        matches!(keys, Keys::Set(_)).then(SetAnswers::default)
    }

    /// Node `node` found `held` (one flag per key).
    pub(crate) fn record(&self, node: usize, held: Vec<bool>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(SetOutcome { node, held });
    }

    /// The answers of the nodes that had answered when `round` was decided, in node order: a
    /// node answering later (in the background) is left out, as it is from the round's outcomes.
    pub(crate) fn answered_in(&self, round: &Round) -> Vec<SetOutcome> {
        let mut sets = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        sets.retain(|outcome| {
            round
                .outcomes
                .get(outcome.node)
                .is_some_and(|node| node.reply != NodeReply::NoReply)
        });
        sets.sort_by_key(|outcome| outcome.node);
        sets
    }
}
