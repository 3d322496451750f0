//! Leader election (`Election`, `src/election/`): a leader is a holder of the election's lock,
//! its term the fence of that hold. Each node keeps the lock key's owner, the fence counter and
//! the leader record; granting the key takes the counter's next value and writes the record
//! with it, in one step (the candidate's fenced acquire script). A candidate leads once a
//! majority granted it; its term is the highest counter among the nodes that granted. Where
//! those counters differ, the term is written back to each of them, counter and record, before
//! it leads; where they agree, nothing is (`round/fencing.rs`). A request still in flight when
//! the campaign is decided lands later (a late grant keeps its own counter in its record), and
//! a release goes to a node only after that node's request landed. Three candidates, one
//! campaign each, no expiry (terms across expiry and restarts are the fencing model's).
//!
//! Besides the leaders, a reader: it names a leader where a quorum holds one candidate's key and
//! record with the same term (`rules/leader.rs`), and that term must be above every other
//! leader's so far.
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

/// Always: a leader read from the records (a quorum holding one candidate's key and record with
/// one term) has a term above every other leader's so far.
pub const READ_TERMS: &str =
    "a leader read from a quorum's records above every other leader's term";

/// Always: while a candidate leads, a reader names it, with its term.
pub const LEADER_READ: &str = "a leader read as the leader, with its term, while it leads";

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
        /// The lowest counter granted (0 before the first grant).
        lowest: u8,
    },
    /// Won, the term still to be written back to the nodes in `pending`.
    WritingBack {
        /// The term.
        term: u8,
        /// Nodes the write-back has still to reach.
        pending: u8,
    },
    /// Leading with `term`.
    Leading {
        /// The term.
        term: u8,
    },
    /// Lost, or resigned.
    Done,
}

/// A node's leader record: the candidate and the term it names.
pub type Record = Option<(u8, u8)>;

/// The model's state: per node the key's owner, the counter and the record; per candidate its
/// phase, its requests still in flight and the nodes its release has still to reach, and the
/// term it led with (0: never led: each candidate campaigns once); and whether a term ever
/// failed to grow.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionState {
    owner: [Option<u8>; NODES],
    counter: [u8; NODES],
    record: [Record; NODES],
    clients: [Phase; CLIENTS],
    late: [u8; CLIENTS],
    releasing: [u8; CLIENTS],
    led: [u8; CLIENTS],
    regressed: bool,
}

impl ElectionState {
    /// The leader a reader names: a candidate and term that a quorum of nodes holds both as the
    /// key's owner and as the record.
    fn read_leader(&self) -> Option<(u8, u8)> {
        let quorum = quorumlock::model_rules::majority(NODES);
        (0..NODES).find_map(|at| {
            let (client, term) = self.record[at]?;
            let agreeing = (0..NODES)
                .filter(|&other| {
                    self.owner[other] == Some(client) && self.record[other] == Some((client, term))
                })
                .count();
            (agreeing >= quorum).then_some((client, term))
        })
    }

    /// `client` starts to lead with `term`: counted, and checked against every earlier leader.
    fn lead(&mut self, client: u8, term: u8) -> Phase {
        if self
            .led
            .iter()
            .any(|&earlier| earlier != 0 && term <= earlier)
        {
            self.regressed = true;
        }
        self.led[usize::from(client)] = term;
        Phase::Leading { term }
    }

    /// How many candidates led so far.
    fn leaders(&self) -> usize {
        self.led.iter().filter(|&&term| term != 0).count()
    }

    /// Node `at` answers `client`'s acquire request: the fenced acquire script, which takes a
    /// free key, the counter's next value and the record in one step. The counter it took, if
    /// it granted.
    fn grant(&mut self, client: u8, at: usize) -> Option<u8> {
        if self.owner[at].is_some() {
            return None;
        }
        self.owner[at] = Some(client);
        self.counter[at] = self.counter[at].saturating_add(1);
        self.record[at] = Some((client, self.counter[at]));
        Some(self.counter[at])
    }
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
    /// `client`'s request to `node`, still in flight when its campaign was decided, lands.
    Late { client: u8, node: u8 },
    /// `client`'s write-back of its term lands on `node`.
    WriteBack { client: u8, node: u8 },
    /// `client`'s release lands on `node`.
    Release { client: u8, node: u8 },
}

impl Display for ElectionAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ElectionAction::Campaign { client } => write!(f, "{} campaigns", name(client)),
            ElectionAction::Ask { client, node } => write!(f, "{} asks n{node}", name(client)),
            ElectionAction::Resign { client } => write!(f, "{} resigns", name(client)),
            ElectionAction::Late { client, node } => {
                write!(f, "{}'s late request lands on n{node}", name(client))
            }
            ElectionAction::WriteBack { client, node } => {
                write!(f, "{}'s write-back lands on n{node}", name(client))
            }
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
                "the highest counter among the granting nodes, written back to them (counter and record) before leading unless they agree; late requests land after the decision"
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
            record: [None; NODES],
            clients: [Phase::Idle; CLIENTS],
            late: [0; CLIENTS],
            releasing: [0; CLIENTS],
            led: [0; CLIENTS],
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
                Phase::WritingBack { pending, .. } => {
                    for node in (0..NODES as u8).filter(|&node| pending & bit(node) != 0) {
                        actions.push(ElectionAction::WriteBack { client, node });
                    }
                }
                Phase::Leading { .. } => actions.push(ElectionAction::Resign { client }),
                Phase::Done => {}
            }
            let late = state.late[usize::from(client)];
            for node in (0..NODES as u8).filter(|&node| late & bit(node) != 0) {
                actions.push(ElectionAction::Late { client, node });
            }
            // The ordering rule: a node's release only after its request landed.
            let pending = state.releasing[usize::from(client)] & !late;
            for node in (0..NODES as u8).filter(|&node| pending & bit(node) != 0) {
                actions.push(ElectionAction::Release { client, node });
            }
        }
    }

    fn next_state(&self, state: &ElectionState, action: ElectionAction) -> Option<ElectionState> {
        let mut next = state.clone();
        let all = (1u8 << NODES) - 1;
        match action {
            ElectionAction::Campaign { client } => {
                next.clients[usize::from(client)] = Phase::Campaigning {
                    answered: 0,
                    ours: 0,
                    term: 0,
                    lowest: 0,
                };
            }
            ElectionAction::Ask { client, node } => {
                let Phase::Campaigning {
                    answered,
                    ours,
                    term,
                    lowest,
                } = next.clients[usize::from(client)]
                else {
                    return None;
                };
                let (ours, term, lowest) = match next.grant(client, usize::from(node)) {
                    Some(counter) => {
                        let term = if self.one_node && ours != 0 {
                            term
                        } else {
                            term.max(counter)
                        };
                        let lowest = if ours == 0 {
                            counter
                        } else {
                            lowest.min(counter)
                        };
                        (ours | bit(node), term, lowest)
                    }
                    None => (ours, term, lowest),
                };
                let answered = answered | bit(node);
                let unanswered = NODES - answered.count_ones() as usize;
                let quorum = quorumlock::model_rules::majority(NODES);
                let decided = tally(NODES, ours.count_ones() as usize, unanswered, quorum);
                if !matches!(decided, Tally::Open) {
                    next.late[usize::from(client)] = all & !answered;
                }
                next.clients[usize::from(client)] = match decided {
                    Tally::Open => Phase::Campaigning {
                        answered,
                        ours,
                        term,
                        lowest,
                    },
                    Tally::Won => {
                        // Every grant took the term already: its records are the leader's.
                        if lowest == term {
                            next.lead(client, term)
                        } else {
                            Phase::WritingBack {
                                term,
                                pending: ours,
                            }
                        }
                    }
                    Tally::Lost => {
                        next.releasing[usize::from(client)] = all;
                        Phase::Done
                    }
                };
            }
            ElectionAction::Late { client, node } => {
                next.late[usize::from(client)] &= !bit(node);
                next.grant(client, usize::from(node));
            }
            ElectionAction::WriteBack { client, node } => {
                let Phase::WritingBack { term, pending } = next.clients[usize::from(client)] else {
                    return None;
                };
                let at = usize::from(node);
                // The write-back script: only where the key is still ours.
                if next.owner[at] == Some(client) {
                    next.counter[at] = next.counter[at].max(term);
                    next.record[at] = Some((client, term));
                }
                let pending = pending & !bit(node);
                next.clients[usize::from(client)] = if pending == 0 {
                    next.lead(client, term)
                } else {
                    Phase::WritingBack { term, pending }
                };
            }
            ElectionAction::Resign { client } => {
                let Phase::Leading { .. } = next.clients[usize::from(client)] else {
                    return None;
                };
                next.releasing[usize::from(client)] = all;
                next.clients[usize::from(client)] = Phase::Done;
            }
            ElectionAction::Release { client, node } => {
                next.releasing[usize::from(client)] &= !bit(node);
                let owner = &mut next.owner[usize::from(node)];
                // Compare and delete: only the candidate's own key (its record stays, read only
                // beside the key).
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
            Property::always(
                READ_TERMS,
                |model: &ElectionModel, state: &ElectionState| {
                    let below = state.read_leader().is_some_and(|(client, term)| {
                        (0u8..)
                            .zip(state.led)
                            .any(|(other, led)| other != client && led != 0 && led >= term)
                    });
                    !model.first.report(2, below)
                },
            ),
            Property::always(
                LEADER_READ,
                |model: &ElectionModel, state: &ElectionState| {
                    let unread = (0u8..).zip(state.clients).any(|(client, phase)| {
                        matches!(phase, Phase::Leading { term }
                            if state.read_leader() != Some((client, term)))
                    });
                    !model.first.report(3, unread)
                },
            ),
            Property::sometimes(HANDOVER, |model: &ElectionModel, state: &ElectionState| {
                model.first.report(4, state.leaders() >= 2)
            }),
        ]
    }
}
