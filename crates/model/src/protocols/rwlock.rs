//! A read-write lock over the quorum (issue 33's `RwLock`): each node keeps one writer, a set
//! of readers and a "writer waiting" marker, and answers a request in one atomic step: a reader
//! is granted where no writer holds and no other writer waits, a writer where nobody holds
//! (and, refused, it marks itself waiting where no one else does, so new readers stop coming:
//! writer preference). A reader asks as the library's first read does, in two steps: it adds
//! itself, and later looks (a writer may check in between), so it stays among the readers of a
//! node that refused it until its release lands.
//! A side holds once a majority granted it, by the library's tally; a loser releases everything
//! it has on every node. A writer may downgrade: each node turns its writer entry into a reader
//! entry.
//!
//! Three clients on three nodes: A writes and may downgrade, B writes, C reads; each acquires
//! once, holds, and leaves. Time and expiry play no part (the lease model has them): the
//! question is whether a writer can ever hold beside anyone else, also while a downgrade is
//! landing. Two variants each drop an assumption. One keeps a downgrading writer exclusive until
//! its downgrade has landed on a majority, which is when a naive "no gap" downgrade would stop
//! writing: a reader granted by the nodes it reached first can win its majority before then.
//! The other has a reader look first and add itself in a later step (a check, then a `SET`):
//! a writer can pass between the two.

use std::fmt::{self, Display};
use std::sync::Arc;

use stateright::{Model, Property};

use super::Bounds;
use crate::client::{Tally, tally};
use crate::discoveries::FirstDiscoveries;

/// Always: a writer never holds while anyone else holds.
pub const EXCLUSIVE_WRITER: &str = "a writer holds alone";

/// Sometimes: a downgraded writer and a reader hold at once (reads are shared, and the
/// downgrade lets a reader in).
pub const SHARED_READS: &str = "two readers at once, one of them downgraded";

/// Sometimes: a writer waiting on a node turns a reader away there.
pub const WRITER_PREFERRED: &str = "a reader refused where a writer waits";

const NODES: usize = 3;
const CLIENTS: usize = 3;
/// Client A writes and may downgrade; B writes; C reads.
const DOWNGRADER: u8 = 0;
const READER: u8 = 2;

/// Where a client stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not started.
    Idle,
    /// Asking the nodes.
    Acquiring {
        /// Nodes that answered.
        answered: u8,
        /// Nodes that granted.
        ours: u8,
    },
    /// Holds the write side.
    Writing,
    /// Downgraded, but still taking itself for the writer until its downgrade has landed on a
    /// majority (only in the variant).
    Downgrading,
    /// Holds the read side (a reader, or a writer that downgraded).
    Reading,
    /// Refused, or left after its hold.
    Done,
}

/// One node: its writer, its readers (a bit per client) and the writer waiting there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeState {
    writer: Option<u8>,
    readers: u8,
    waiting: Option<u8>,
}

/// The model's state: the nodes; per client its phase, the nodes its release has still to
/// reach and the nodes its downgrade has still to reach (and has reached).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RwLockState {
    nodes: [NodeState; NODES],
    clients: [Phase; CLIENTS],
    releasing: [u8; CLIENTS],
    downgrading: u8,
    downgraded: u8,
    /// Whether a reader was ever refused where a writer waited (for the example).
    refused_for_waiting: bool,
    /// Nodes where the reader has taken its first step and not its second: added itself and not
    /// looked yet, or in the variant, found the way free and not added itself yet.
    read_pending: u8,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwLockAction {
    /// `client` starts its acquisition.
    Start { client: u8 },
    /// `node` answers `client`'s request.
    Ask { client: u8, node: u8 },
    /// The reader, having added itself on `node`, looks there.
    ReadLooks { node: u8 },
    /// The reader, having looked first, adds itself on `node` (only in that variant).
    ReadLands { node: u8 },
    /// The writer A downgrades its hold (its downgrade goes out to every node).
    Downgrade,
    /// A's downgrade lands on `node`.
    Convert { node: u8 },
    /// `client` leaves its hold (its release goes out).
    Leave { client: u8 },
    /// `client`'s release lands on `node`.
    Release { client: u8, node: u8 },
}

impl Display for RwLockAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RwLockAction::Start { client } => {
                let side = if client == READER { "read" } else { "write" };
                write!(f, "{} starts to {side}", name(client))
            }
            RwLockAction::Ask { client, node } => write!(f, "{} asks n{node}", name(client)),
            RwLockAction::ReadLooks { node } => write!(f, "{} looks on n{node}", name(READER)),
            RwLockAction::ReadLands { node } => {
                write!(f, "{} adds itself as a reader on n{node}", name(READER))
            }
            RwLockAction::Downgrade => write!(f, "{} downgrades", name(DOWNGRADER)),
            RwLockAction::Convert { node } => {
                write!(f, "{}'s downgrade lands on n{node}", name(DOWNGRADER))
            }
            RwLockAction::Leave { client } => write!(f, "{} leaves its hold", name(client)),
            RwLockAction::Release { client, node } => {
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

const ALL_NODES: u8 = (1 << NODES) - 1;

/// Which assumption a variant drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// None: the design.
    Design,
    /// A downgrading writer stays exclusive until its downgrade landed on a majority.
    LateDowngrade,
    /// A reader looks first and adds itself in a later step.
    ReadChecksFirst,
}

/// The read-write lock, as the design has it or with one assumption dropped.
#[derive(Clone, Debug)]
pub struct RwLockModel {
    variant: Variant,
    first: Arc<FirstDiscoveries>,
}

impl RwLockModel {
    /// The model of `variant`.
    pub fn new(variant: Variant) -> RwLockModel {
        RwLockModel {
            variant,
            first: Arc::default(),
        }
    }
}

/// `node` answers `client`'s request in one step: whether it granted. For the reader, only
/// whether it would (it adds itself in a step of its own).
fn answer(state: &mut RwLockState, client: u8, node: usize) -> bool {
    let Some(at) = state.nodes.get_mut(node) else {
        return false;
    };
    if client == READER {
        let granted = at.writer.is_none() && at.waiting.is_none_or(|writer| writer == client);
        if !granted && at.writer.is_none() {
            state.refused_for_waiting = true;
        }
        return granted;
    }
    let granted = at.writer.is_none() && at.readers == 0;
    if granted {
        at.writer = Some(client);
        if at.waiting == Some(client) {
            at.waiting = None;
        }
    } else if at.waiting.is_none() {
        at.waiting = Some(client);
    }
    granted
}

impl Bounds for RwLockModel {
    fn bounds(&self) -> String {
        format!(
            "3 nodes; A writes and may downgrade, B writes, C reads; one acquisition each, no \
             expiry; a node's answer one atomic step (writer, readers, writer waiting); {}",
            match self.variant {
                Variant::Design => {
                    "a reader adds itself, then looks in a later step; a downgrading writer is a \
                     reader from the moment it downgrades"
                }
                Variant::LateDowngrade => {
                    "a downgrading writer stays exclusive until a majority converted"
                }
                Variant::ReadChecksFirst => "a reader looks, then adds itself in a later step",
            }
        )
    }
}

impl Model for RwLockModel {
    type State = RwLockState;
    type Action = RwLockAction;

    fn init_states(&self) -> Vec<RwLockState> {
        let node = NodeState {
            writer: None,
            readers: 0,
            waiting: None,
        };
        vec![RwLockState {
            nodes: [node; NODES],
            clients: [Phase::Idle; CLIENTS],
            releasing: [0; CLIENTS],
            downgrading: 0,
            downgraded: 0,
            refused_for_waiting: false,
            read_pending: 0,
        }]
    }

    fn actions(&self, state: &RwLockState, actions: &mut Vec<RwLockAction>) {
        for (client, phase) in (0u8..).zip(state.clients) {
            match phase {
                Phase::Idle => actions.push(RwLockAction::Start { client }),
                Phase::Acquiring { answered, .. } => {
                    let pending = if client == READER {
                        state.read_pending
                    } else {
                        0
                    };
                    for node in
                        (0..NODES as u8).filter(|&node| (answered | pending) & bit(node) == 0)
                    {
                        actions.push(RwLockAction::Ask { client, node });
                    }
                    for node in (0..NODES as u8).filter(|&node| pending & bit(node) != 0) {
                        actions.push(match self.variant {
                            Variant::ReadChecksFirst => RwLockAction::ReadLands { node },
                            _ => RwLockAction::ReadLooks { node },
                        });
                    }
                }
                Phase::Writing => {
                    if client == DOWNGRADER && state.downgraded == 0 && state.downgrading == 0 {
                        actions.push(RwLockAction::Downgrade);
                    }
                    actions.push(RwLockAction::Leave { client });
                }
                Phase::Reading => actions.push(RwLockAction::Leave { client }),
                Phase::Downgrading | Phase::Done => {}
            }
            let pending = state
                .releasing
                .get(usize::from(client))
                .copied()
                .unwrap_or(0);
            for node in (0..NODES as u8).filter(|&node| pending & bit(node) != 0) {
                actions.push(RwLockAction::Release { client, node });
            }
        }
        for node in (0..NODES as u8).filter(|&node| state.downgrading & bit(node) != 0) {
            actions.push(RwLockAction::Convert { node });
        }
    }

    fn next_state(&self, state: &RwLockState, action: RwLockAction) -> Option<RwLockState> {
        let mut next = state.clone();
        match action {
            RwLockAction::Start { client } => {
                *next.clients.get_mut(usize::from(client))? = Phase::Acquiring {
                    answered: 0,
                    ours: 0,
                };
            }
            RwLockAction::Ask { client, node } if client == READER => {
                if self.variant == Variant::ReadChecksFirst {
                    if !answer(&mut next, client, usize::from(node)) {
                        counted(&mut next, client, node, false)?;
                        return Some(next);
                    }
                } else {
                    next.nodes.get_mut(usize::from(node))?.readers |= bit(READER);
                }
                next.read_pending |= bit(node);
            }
            RwLockAction::Ask { client, node } => {
                let granted = answer(&mut next, client, usize::from(node));
                counted(&mut next, client, node, granted)?;
            }
            RwLockAction::ReadLooks { node } => {
                next.read_pending &= !bit(node);
                let granted = answer(&mut next, READER, usize::from(node));
                counted(&mut next, READER, node, granted)?;
            }
            RwLockAction::ReadLands { node } => {
                next.read_pending &= !bit(node);
                next.nodes.get_mut(usize::from(node))?.readers |= bit(READER);
                counted(&mut next, READER, node, true)?;
            }
            RwLockAction::Downgrade => {
                next.downgrading = ALL_NODES;
                *next.clients.get_mut(usize::from(DOWNGRADER))? =
                    if self.variant == Variant::LateDowngrade {
                        Phase::Downgrading
                    } else {
                        Phase::Reading
                    };
            }
            RwLockAction::Convert { node } => {
                next.downgrading &= !bit(node);
                next.downgraded |= bit(node);
                let at = next.nodes.get_mut(usize::from(node))?;
                if at.writer == Some(DOWNGRADER) {
                    at.writer = None;
                    at.readers |= bit(DOWNGRADER);
                }
                let majority = quorumlock::model_rules::majority(NODES);
                let phase = next.clients.get_mut(usize::from(DOWNGRADER))?;
                if *phase == Phase::Downgrading && next.downgraded.count_ones() as usize >= majority
                {
                    *phase = Phase::Reading;
                }
            }
            RwLockAction::Leave { client } => {
                *next.releasing.get_mut(usize::from(client))? |= ALL_NODES;
                *next.clients.get_mut(usize::from(client))? = Phase::Done;
            }
            RwLockAction::Release { client, node } => {
                *next.releasing.get_mut(usize::from(client))? &= !bit(node);
                // Compare and delete: only the client's own entries.
                let at = next.nodes.get_mut(usize::from(node))?;
                if at.writer == Some(client) {
                    at.writer = None;
                }
                if at.waiting == Some(client) {
                    at.waiting = None;
                }
                at.readers &= !bit(client);
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                EXCLUSIVE_WRITER,
                |model: &RwLockModel, state: &RwLockState| {
                    let writers = state.clients.iter().filter(|phase| writes(phase)).count();
                    let holders = state
                        .clients
                        .iter()
                        .filter(|phase| writes(phase) || **phase == Phase::Reading)
                        .count();
                    !model.first.report(0, writers > 0 && holders > 1)
                },
            ),
            Property::sometimes(SHARED_READS, |model: &RwLockModel, state: &RwLockState| {
                let readers = state
                    .clients
                    .iter()
                    .filter(|phase| **phase == Phase::Reading)
                    .count();
                model.first.report(1, readers == 2)
            }),
            Property::sometimes(
                WRITER_PREFERRED,
                |model: &RwLockModel, state: &RwLockState| {
                    model.first.report(2, state.refused_for_waiting)
                },
            ),
        ]
    }
}

/// `node`'s answer to `client` counted by the tally: the client holds, goes on asking, or has
/// lost and releases everything it has everywhere.
fn counted(next: &mut RwLockState, client: u8, node: u8, granted: bool) -> Option<()> {
    let Phase::Acquiring { answered, ours } = *next.clients.get(usize::from(client))? else {
        return None;
    };
    let answered = answered | bit(node);
    let ours = if granted { ours | bit(node) } else { ours };
    let unanswered = NODES - answered.count_ones() as usize;
    let quorum = quorumlock::model_rules::majority(NODES);
    let phase = match tally(NODES, ours.count_ones() as usize, unanswered, quorum) {
        Tally::Open => Phase::Acquiring { answered, ours },
        Tally::Won if client == READER => Phase::Reading,
        Tally::Won => Phase::Writing,
        Tally::Lost => {
            // Everything it has anywhere goes: grants, waiting markers, a reader's entries.
            *next.releasing.get_mut(usize::from(client))? |= ALL_NODES;
            Phase::Done
        }
    };
    if client == READER && !matches!(phase, Phase::Acquiring { .. }) {
        // Decided: nothing of its acquisition lands any more (its release undoes the rest).
        next.read_pending = 0;
    }
    *next.clients.get_mut(usize::from(client))? = phase;
    Some(())
}

/// Whether a client in `phase` takes itself for the writer.
fn writes(phase: &Phase) -> bool {
    matches!(phase, Phase::Writing | Phase::Downgrading)
}
