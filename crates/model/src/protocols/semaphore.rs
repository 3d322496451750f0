//! Semaphores (`Request::permits`, `src/semaphore/`): k permits are k slots, each a lock won by
//! the quorum rule; a client tries the slots from any one onwards, and one it loses it releases
//! (in the background: the releases land in any order, also after its next slot's requests).
//! Three clients, two permits, three nodes; each client acquires once, holds, and leaves. Time
//! and expiry play no part (the lease model has them): the question is whether three can hold.
//!
//! The construction dropped for the counter the field ships: each node keeps the set of holders
//! it counted and counts one more while it has fewer than k; a client holds once a majority
//! counted it. Each node's count stays within k, yet three clients can each win a majority.

use std::fmt::{self, Display};
use std::sync::Arc;

use stateright::{Model, Property};

use super::Bounds;
use crate::client::{Tally, tally};
use crate::discoveries::FirstDiscoveries;

/// Always: no more holders at once than permits.
pub const PERMITS_BOUND: &str = "no more holders at once than permits";

/// Sometimes: as many hold at once as there are permits.
pub const ALL_PERMITS_HELD: &str = "every permit held at once";

const NODES: usize = 3;
const CLIENTS: usize = 3;
const PERMITS: usize = 2;

/// Where a client stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not started.
    Idle,
    /// Asking the nodes for `slot` (the counter: slot 0, the only one).
    Acquiring {
        /// The slot asked for.
        slot: u8,
        /// Slots tried so far, this one included.
        tried: u8,
        /// Nodes that answered.
        answered: u8,
        /// Nodes that granted.
        ours: u8,
    },
    /// Won on a quorum.
    Holding {
        /// The slot held.
        slot: u8,
    },
    /// Refused on every slot, or left after its hold.
    Done,
}

/// The model's state: per node the owner of each slot and the holders the counter counted; per
/// client its phase and, per slot, the nodes its release has still to reach.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SemaphoreState {
    slots: [[Option<u8>; PERMITS]; NODES],
    counted: [u8; NODES],
    clients: [Phase; CLIENTS],
    releasing: [[u8; PERMITS]; CLIENTS],
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SemaphoreAction {
    /// `client` starts with `slot`.
    Start { client: u8, slot: u8 },
    /// `node` answers `client`'s request for its current slot.
    Ask { client: u8, node: u8 },
    /// `client` leaves its hold (its release goes out).
    Leave { client: u8 },
    /// `client`'s release of `slot` lands on `node`.
    Release { client: u8, slot: u8, node: u8 },
}

impl Display for SemaphoreAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SemaphoreAction::Start { client, slot } => {
                write!(f, "{} starts with slot {slot}", name(client))
            }
            SemaphoreAction::Ask { client, node } => {
                write!(f, "{} asks n{node}", name(client))
            }
            SemaphoreAction::Leave { client } => write!(f, "{} leaves its hold", name(client)),
            SemaphoreAction::Release { client, slot, node } => {
                write!(f, "{} releases slot {slot} on n{node}", name(client))
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

/// The semaphore, with slots or with a counter voted on by a majority.
#[derive(Clone, Debug)]
pub struct SemaphoreModel {
    counter: bool,
    first: Arc<FirstDiscoveries>,
}

impl SemaphoreModel {
    /// The model; `counter`: the majority-voted counter instead of slots.
    pub fn new(counter: bool) -> SemaphoreModel {
        SemaphoreModel {
            counter,
            first: Arc::default(),
        }
    }

    /// `node` grants `client` `slot` if it has room, and takes it.
    fn grant(&self, state: &mut SemaphoreState, client: u8, slot: u8, node: u8) -> bool {
        let node = usize::from(node);
        if self.counter {
            let counted = &mut state.counted[node];
            let room = (counted.count_ones() as usize) < PERMITS;
            if room {
                *counted |= bit(client);
            }
            return room;
        }
        match state.slots[node].get_mut(usize::from(slot)) {
            Some(owner @ None) => {
                *owner = Some(client);
                true
            }
            _ => false,
        }
    }

    /// The next slot `client` tries after losing one, if any is left.
    fn next_slot(&self, slot: u8, tried: u8) -> Option<u8> {
        if self.counter {
            return None;
        }
        let next = (slot + 1) % PERMITS as u8;
        (tried & bit(next) == 0).then_some(next)
    }
}

impl Bounds for SemaphoreModel {
    fn bounds(&self) -> String {
        format!(
            "3 nodes, 3 clients, 2 permits, one acquisition each, no expiry; {}",
            if self.counter {
                "a counter per node, won on a majority"
            } else {
                "2 slots, each won by the quorum rule, tried from any one onwards, a lost one \
                 released in the background"
            }
        )
    }
}

impl Model for SemaphoreModel {
    type State = SemaphoreState;
    type Action = SemaphoreAction;

    fn init_states(&self) -> Vec<SemaphoreState> {
        vec![SemaphoreState {
            slots: [[None; PERMITS]; NODES],
            counted: [0; NODES],
            clients: [Phase::Idle; CLIENTS],
            releasing: [[0; PERMITS]; CLIENTS],
        }]
    }

    fn actions(&self, state: &SemaphoreState, actions: &mut Vec<SemaphoreAction>) {
        let first_slots = if self.counter { 1 } else { PERMITS as u8 };
        for (client, phase) in (0u8..).zip(state.clients) {
            match phase {
                Phase::Idle => {
                    for slot in 0..first_slots {
                        actions.push(SemaphoreAction::Start { client, slot });
                    }
                }
                Phase::Acquiring { answered, .. } => {
                    for node in (0..NODES as u8).filter(|&node| answered & bit(node) == 0) {
                        actions.push(SemaphoreAction::Ask { client, node });
                    }
                }
                Phase::Holding { .. } => actions.push(SemaphoreAction::Leave { client }),
                Phase::Done => {}
            }
            for (slot, pending) in (0u8..).zip(state.releasing[usize::from(client)]) {
                for node in (0..NODES as u8).filter(|&node| pending & bit(node) != 0) {
                    actions.push(SemaphoreAction::Release { client, slot, node });
                }
            }
        }
    }

    fn next_state(
        &self,
        state: &SemaphoreState,
        action: SemaphoreAction,
    ) -> Option<SemaphoreState> {
        let mut next = state.clone();
        match action {
            SemaphoreAction::Start { client, slot } => {
                next.clients[usize::from(client)] = Phase::Acquiring {
                    slot,
                    tried: bit(slot),
                    answered: 0,
                    ours: 0,
                };
            }
            SemaphoreAction::Ask { client, node } => {
                let Phase::Acquiring {
                    slot,
                    tried,
                    answered,
                    ours,
                } = next.clients[usize::from(client)]
                else {
                    return None;
                };
                let granted = self.grant(&mut next, client, slot, node);
                let answered = answered | bit(node);
                let ours = if granted { ours | bit(node) } else { ours };
                let unanswered = NODES - answered.count_ones() as usize;
                let quorum = quorumlock::model_rules::majority(NODES);
                next.clients[usize::from(client)] =
                    match tally(NODES, ours.count_ones() as usize, unanswered, quorum) {
                        Tally::Open => Phase::Acquiring {
                            slot,
                            tried,
                            answered,
                            ours,
                        },
                        Tally::Won => Phase::Holding { slot },
                        Tally::Lost => {
                            next.releasing[usize::from(client)][usize::from(slot)] |= ours;
                            match self.next_slot(slot, tried) {
                                Some(slot) => Phase::Acquiring {
                                    slot,
                                    tried: tried | bit(slot),
                                    answered: 0,
                                    ours: 0,
                                },
                                None => Phase::Done,
                            }
                        }
                    };
            }
            SemaphoreAction::Leave { client } => {
                let Phase::Holding { slot } = next.clients[usize::from(client)] else {
                    return None;
                };
                next.releasing[usize::from(client)][usize::from(slot)] |= (1 << NODES) - 1;
                next.clients[usize::from(client)] = Phase::Done;
            }
            SemaphoreAction::Release { client, slot, node } => {
                next.releasing[usize::from(client)][usize::from(slot)] &= !bit(node);
                let node = usize::from(node);
                if self.counter {
                    next.counted[node] &= !bit(client);
                } else if let Some(owner) = next.slots[node].get_mut(usize::from(slot)) {
                    // Compare and delete: only the client's own key.
                    if *owner == Some(client) {
                        *owner = None;
                    }
                }
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                PERMITS_BOUND,
                |model: &SemaphoreModel, state: &SemaphoreState| {
                    !model.first.report(0, holders(state) > PERMITS)
                },
            ),
            Property::sometimes(
                ALL_PERMITS_HELD,
                |model: &SemaphoreModel, state: &SemaphoreState| {
                    model.first.report(1, holders(state) == PERMITS)
                },
            ),
        ]
    }
}

/// How many clients hold a permit.
fn holders(state: &SemaphoreState) -> usize {
    state
        .clients
        .iter()
        .filter(|phase| matches!(phase, Phase::Holding { .. }))
        .count()
}
