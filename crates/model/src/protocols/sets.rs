//! Sets of resources (`Resources::new([..])`, `node/set.rs`): each node takes every key of a
//! request or none, in one atomic script, and counts towards the quorum only when it took them
//! all; the request is won on a quorum of such nodes. Three clients ask for {x,y}, {y} and {x}
//! on three nodes, in every order. Time and expiry play no part here (the lease model has them):
//! the question is whether two overlapping requests can both be won.
//!
//! The assumption dropped: the atomic step. Split into a check ("all free?") and a later write
//! (the script's `SET` without `NX`, since it has checked), another client's write can land in
//! between and be overwritten, and both count the node.

use std::fmt::{self, Display};
use std::sync::Arc;

use stateright::{Model, Property};

use super::Bounds;
use crate::client::{Tally, tally};
use crate::discoveries::FirstDiscoveries;

/// Always: no two clients hold requests that share a resource.
pub const EXCLUSION: &str = "no two holders of overlapping resources at once";

/// Sometimes: the two-resource request is granted.
pub const SET_GRANTED: &str = "a set is granted";

/// Sometimes: the two one-resource requests, which do not overlap, are held at once.
pub const DISJOINT_HELD: &str = "two disjoint requests held at once";

const NODES: usize = 3;
/// Each client's request: resource x is bit 0, y bit 1.
const REQUESTS: [u8; 3] = [0b11, 0b10, 0b01];

/// Where a client stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not started.
    Idle,
    /// Asking the nodes: which answered, which took every key for us, which checked free and
    /// wait for their write (split step only).
    Acquiring {
        /// Nodes that answered.
        answered: u8,
        /// Nodes that took every key for us.
        ours: u8,
        /// Nodes checked free, their write still to come.
        checked: u8,
    },
    /// Won on a quorum: holds the request.
    Holding {
        /// Nodes where our keys may be.
        keys: u8,
    },
    /// Releasing (after a hold, or a lost round) on these nodes.
    Releasing {
        /// Nodes still to release.
        pending: u8,
    },
}

/// The model's state: per node, the owner of x and of y; per client, its phase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SetsState {
    owners: [[Option<u8>; 2]; NODES],
    clients: [Phase; REQUESTS.len()],
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetsAction {
    /// The atomic acquire script of `client`'s request on `node`.
    Acquire { client: u8, node: u8 },
    /// Split step, first half: are all of the request's keys free on `node`?
    Check { client: u8, node: u8 },
    /// Split step, second half: write every key of the request on `node`.
    Write { client: u8, node: u8 },
    /// Release on `node`: delete each of the request's keys that is still ours.
    Release { client: u8, node: u8 },
}

impl Display for SetsAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, client, node) = match *self {
            SetsAction::Acquire { client, node } => ("takes all its keys or none", client, node),
            SetsAction::Check { client, node } => ("checks its keys free", client, node),
            SetsAction::Write { client, node } => ("writes its keys", client, node),
            SetsAction::Release { client, node } => ("releases", client, node),
        };
        write!(
            f,
            "{} {{{}}} on n{node}: {what}",
            name(client),
            resources(client)
        )
    }
}

fn name(client: u8) -> char {
    crate::ids::client_name(client)
}

fn resources(client: u8) -> &'static str {
    match request(client) {
        0b11 => "x,y",
        0b10 => "y",
        _ => "x",
    }
}

fn request(client: u8) -> u8 {
    REQUESTS.get(usize::from(client)).copied().unwrap_or(0)
}

fn bit(node: u8) -> u8 {
    1 << node
}

/// The sets protocol, with the atomic step or the split one.
#[derive(Clone, Debug)]
pub struct SetsModel {
    split: bool,
    first: Arc<FirstDiscoveries>,
}

impl SetsModel {
    /// The model; `split`: each node's step split into a check and a write.
    pub fn new(split: bool) -> SetsModel {
        SetsModel {
            split,
            first: Arc::default(),
        }
    }

    /// Whether every key of `client`'s request is free on `node`.
    fn free(state: &SetsState, client: u8, node: u8) -> bool {
        let owners = state.owners[usize::from(node)];
        (0..2).all(|r| request(client) & (1 << r) == 0 || owners[r].is_none())
    }

    fn take(state: &mut SetsState, client: u8, node: u8) {
        for (r, owner) in state.owners[usize::from(node)].iter_mut().enumerate() {
            if request(client) & (1 << r) != 0 {
                *owner = Some(client);
            }
        }
    }

    /// Records `node`'s answer and decides by the library's tally.
    fn answer(state: &mut SetsState, client: u8, node: u8, took: bool) {
        let Phase::Acquiring {
            answered,
            ours,
            checked,
        } = state.clients[usize::from(client)]
        else {
            return;
        };
        let answered = answered | bit(node);
        let ours = if took { ours | bit(node) } else { ours };
        let checked = checked & !bit(node);
        let unanswered = NODES - answered.count_ones() as usize;
        let quorum = quorumlock::model_rules::majority(NODES);
        state.clients[usize::from(client)] =
            match tally(NODES, ours.count_ones() as usize, unanswered, quorum) {
                Tally::Open => Phase::Acquiring {
                    answered,
                    ours,
                    checked,
                },
                Tally::Won => Phase::Holding { keys: ours },
                Tally::Lost => Phase::Releasing { pending: ours },
            };
    }
}

impl Bounds for SetsModel {
    fn bounds(&self) -> String {
        format!(
            "3 nodes, clients A {{x,y}}, B {{y}}, C {{x}}, one acquisition each, no expiry; \
             each node's step {}",
            if self.split {
                "split into check and write"
            } else {
                "atomic"
            }
        )
    }
}

impl Model for SetsModel {
    type State = SetsState;
    type Action = SetsAction;

    fn init_states(&self) -> Vec<SetsState> {
        vec![SetsState {
            owners: [[None; 2]; NODES],
            clients: [Phase::Idle; REQUESTS.len()],
        }]
    }

    fn actions(&self, state: &SetsState, actions: &mut Vec<SetsAction>) {
        for (client, phase) in (0u8..).zip(state.clients) {
            for node in 0..NODES as u8 {
                let open = match phase {
                    Phase::Idle => true,
                    Phase::Acquiring {
                        answered, checked, ..
                    } => (answered | checked) & bit(node) == 0,
                    _ => false,
                };
                if open {
                    actions.push(if self.split {
                        SetsAction::Check { client, node }
                    } else {
                        SetsAction::Acquire { client, node }
                    });
                }
                match phase {
                    Phase::Acquiring { checked, .. } if checked & bit(node) != 0 => {
                        actions.push(SetsAction::Write { client, node });
                    }
                    Phase::Holding { keys: pending } | Phase::Releasing { pending }
                        if pending & bit(node) != 0 =>
                    {
                        actions.push(SetsAction::Release { client, node });
                    }
                    _ => {}
                }
            }
        }
    }

    fn next_state(&self, state: &SetsState, action: SetsAction) -> Option<SetsState> {
        let mut next = state.clone();
        match action {
            SetsAction::Acquire { client, node } | SetsAction::Check { client, node } => {
                if next.clients[usize::from(client)] == Phase::Idle {
                    next.clients[usize::from(client)] = Phase::Acquiring {
                        answered: 0,
                        ours: 0,
                        checked: 0,
                    };
                }
                let free = Self::free(&next, client, node);
                match (action, free) {
                    (SetsAction::Check { .. }, true) => {
                        if let Phase::Acquiring { checked, .. } =
                            &mut next.clients[usize::from(client)]
                        {
                            *checked |= bit(node);
                        }
                    }
                    (_, true) => {
                        Self::take(&mut next, client, node);
                        Self::answer(&mut next, client, node, true);
                    }
                    (_, false) => Self::answer(&mut next, client, node, false),
                }
            }
            SetsAction::Write { client, node } => {
                Self::take(&mut next, client, node);
                Self::answer(&mut next, client, node, true);
            }
            SetsAction::Release { client, node } => {
                for owner in next.owners[usize::from(node)].iter_mut() {
                    if *owner == Some(client) {
                        *owner = None;
                    }
                }
                let phase = &mut next.clients[usize::from(client)];
                if let Phase::Holding { keys: pending } | Phase::Releasing { pending } = *phase {
                    *phase = Phase::Releasing {
                        pending: pending & !bit(node),
                    };
                }
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(EXCLUSION, |model: &SetsModel, state: &SetsState| {
                !model.first.report(0, overlapping_holders(state))
            }),
            Property::sometimes(SET_GRANTED, |model: &SetsModel, state: &SetsState| {
                model
                    .first
                    .report(1, matches!(state.clients[0], Phase::Holding { .. }))
            }),
            Property::sometimes(DISJOINT_HELD, |model: &SetsModel, state: &SetsState| {
                let held = |client: usize| matches!(state.clients[client], Phase::Holding { .. });
                model.first.report(2, held(1) && held(2))
            }),
        ]
    }
}

/// Whether two clients hold requests that share a resource.
fn overlapping_holders(state: &SetsState) -> bool {
    let holding: Vec<u8> = (0u8..)
        .zip(state.clients)
        .filter(|(_, phase)| matches!(phase, Phase::Holding { .. }))
        .map(|(client, _)| request(client))
        .collect();
    holding
        .iter()
        .enumerate()
        .any(|(i, a)| holding.iter().skip(i + 1).any(|b| a & b != 0))
}
