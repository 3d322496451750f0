//! Leader election (`Election`, `src/election/`): a leader is a holder of the election's lock,
//! its term the fence of that hold. Each node keeps the lock key's owner and the fence counter;
//! granting the key takes the counter's next value in the same step (the fenced acquire script).
//! A candidate leads once a majority granted it; its term is the highest counter among the nodes
//! that granted, written back to them before it leads (`round/fencing.rs`); it resigns, and its
//! releases land in any order. Three candidates, one campaign each, no expiry (terms across
//! expiry and restarts are the fencing model's).
//!
//! The construction dropped for the one a single-node elector has: the term is the counter of
//! one node that granted (the first to answer), not the highest of the quorum.

use std::fmt::{self, Display};
use std::sync::Arc;

use stateright::{Model, Property};

use super::Bounds;
use crate::client::{Tally, tally};
use crate::discoveries::FirstDiscoveries;

/// Always: at most one leader at a time.
pub const ONE_LEADER: &str = "at most one leader at a time";

/// Always: each leader's term is larger than every earlier leader's.
pub const TERMS_GROW: &str = "each leader's term larger than every earlier leader's";

/// Sometimes: a second leader is elected after the first resigned.
pub const HANDOVER: &str = "a second leader after the first";

const NODES: usize = 3;
const CLIENTS: usize = 3;

/// Where a candidate stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not campaigning yet.
    Idle,
    /// Asking the nodes.
    Campaigning {
        /// Nodes that answered.
        answered: u8,
        /// Nodes that granted.
        ours: u8,
        /// The term so far: the highest counter granted, or the first one (the broken variant).
        term: u8,
    },
    /// Leading with `term`.
    Leading {
        /// The term.
        term: u8,
    },
    /// Lost, or resigned.
    Done,
}

/// The model's state: per node the key's owner and the counter; per candidate its phase and the
/// nodes its release has still to reach; the highest term led so far, how many led, and whether
/// a term ever failed to grow.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionState {
    owner: [Option<u8>; NODES],
    counter: [u8; NODES],
    clients: [Phase; CLIENTS],
    releasing: [u8; CLIENTS],
    highest: u8,
    leaders: u8,
    regressed: bool,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionAction {
    /// `client` starts its campaign.
    Campaign { client: u8 },
    /// `node` answers `client`'s request.
    Ask { client: u8, node: u8 },
    /// `client` resigns (its releases go out).
    Resign { client: u8 },
    /// `client`'s release lands on `node`.
    Release { client: u8, node: u8 },
}

impl Display for ElectionAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ElectionAction::Campaign { client } => write!(f, "{} campaigns", name(client)),
            ElectionAction::Ask { client, node } => write!(f, "{} asks n{node}", name(client)),
            ElectionAction::Resign { client } => write!(f, "{} resigns", name(client)),
            ElectionAction::Release { client, node } => {
                write!(f, "{}'s release lands on n{node}", name(client))
            }
        }
    }
}

fn name(client: u8) -> char {
    crate::ids::client_name(client)
}

fn bit(index: u8) -> u8 {
    1 << index
}

/// The election, with the term from the quorum or from one node.
#[derive(Clone, Debug)]
pub struct ElectionModel {
    one_node: bool,
    first: Arc<FirstDiscoveries>,
}

impl ElectionModel {
    /// The model; `one_node`: the term is the first granting node's counter.
    pub fn new(one_node: bool) -> ElectionModel {
        ElectionModel {
            one_node,
            first: Arc::default(),
        }
    }
}

impl Bounds for ElectionModel {
    fn bounds(&self) -> String {
        format!(
            "3 nodes, 3 candidates, one campaign each, no expiry; the term is {}",
            if self.one_node {
                "the counter of the first node that granted"
            } else {
                "the highest counter among the granting nodes, written back to them before leading"
            }
        )
    }
}

impl Model for ElectionModel {
    type State = ElectionState;
    type Action = ElectionAction;

    fn init_states(&self) -> Vec<ElectionState> {
        vec![ElectionState {
            owner: [None; NODES],
            counter: [0; NODES],
            clients: [Phase::Idle; CLIENTS],
            releasing: [0; CLIENTS],
            highest: 0,
            leaders: 0,
            regressed: false,
        }]
    }

    fn actions(&self, state: &ElectionState, actions: &mut Vec<ElectionAction>) {
        for (client, phase) in (0u8..).zip(state.clients) {
            match phase {
                Phase::Idle => actions.push(ElectionAction::Campaign { client }),
                Phase::Campaigning { answered, .. } => {
                    for node in (0..NODES as u8).filter(|&node| answered & bit(node) == 0) {
                        actions.push(ElectionAction::Ask { client, node });
                    }
                }
                Phase::Leading { .. } => actions.push(ElectionAction::Resign { client }),
                Phase::Done => {}
            }
            let pending = state.releasing[usize::from(client)];
            for node in (0..NODES as u8).filter(|&node| pending & bit(node) != 0) {
                actions.push(ElectionAction::Release { client, node });
            }
        }
    }

    fn next_state(&self, state: &ElectionState, action: ElectionAction) -> Option<ElectionState> {
        let mut next = state.clone();
        match action {
            ElectionAction::Campaign { client } => {
                next.clients[usize::from(client)] = Phase::Campaigning {
                    answered: 0,
                    ours: 0,
                    term: 0,
                };
            }
            ElectionAction::Ask { client, node } => {
                let Phase::Campaigning {
                    answered,
                    ours,
                    term,
                } = next.clients[usize::from(client)]
                else {
                    return None;
                };
                let at = usize::from(node);
                // The fenced acquire script: the key and the counter's next value, one step.
                let granted = next.owner[at].is_none();
                let (ours, term) = if granted {
                    next.owner[at] = Some(client);
                    next.counter[at] = next.counter[at].saturating_add(1);
                    let counter = next.counter[at];
                    let term = if self.one_node && ours != 0 {
                        term
                    } else {
                        term.max(counter)
                    };
                    (ours | bit(node), term)
                } else {
                    (ours, term)
                };
                let answered = answered | bit(node);
                let unanswered = NODES - answered.count_ones() as usize;
                let quorum = quorumlock::model_rules::majority(NODES);
                next.clients[usize::from(client)] =
                    match tally(NODES, ours.count_ones() as usize, unanswered, quorum) {
                        Tally::Open => Phase::Campaigning {
                            answered,
                            ours,
                            term,
                        },
                        Tally::Won => {
                            // The write-back: the term on every node that granted, while the key
                            // is still ours there (no expiry here: it is).
                            for node in (0..NODES as u8).filter(|&node| ours & bit(node) != 0) {
                                let at = usize::from(node);
                                next.counter[at] = next.counter[at].max(term);
                            }
                            if next.leaders > 0 && term <= next.highest {
                                next.regressed = true;
                            }
                            next.highest = next.highest.max(term);
                            next.leaders = next.leaders.saturating_add(1);
                            Phase::Leading { term }
                        }
                        Tally::Lost => {
                            next.releasing[usize::from(client)] |= ours;
                            Phase::Done
                        }
                    };
            }
            ElectionAction::Resign { client } => {
                let Phase::Leading { .. } = next.clients[usize::from(client)] else {
                    return None;
                };
                next.releasing[usize::from(client)] |= (1 << NODES) - 1;
                next.clients[usize::from(client)] = Phase::Done;
            }
            ElectionAction::Release { client, node } => {
                next.releasing[usize::from(client)] &= !bit(node);
                let owner = &mut next.owner[usize::from(node)];
                // Compare and delete: only the candidate's own key.
                if *owner == Some(client) {
                    *owner = None;
                }
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                ONE_LEADER,
                |model: &ElectionModel, state: &ElectionState| {
                    let leaders = state
                        .clients
                        .iter()
                        .filter(|phase| matches!(phase, Phase::Leading { .. }))
                        .count();
                    !model.first.report(0, leaders > 1)
                },
            ),
            Property::always(
                TERMS_GROW,
                |model: &ElectionModel, state: &ElectionState| {
                    !model.first.report(1, state.regressed)
                },
            ),
            Property::sometimes(HANDOVER, |model: &ElectionModel, state: &ElectionState| {
                model.first.report(2, state.leaders >= 2)
            }),
        ]
    }
}
