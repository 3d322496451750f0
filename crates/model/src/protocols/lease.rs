//! One lock key over three nodes with time, as the lease protocols see it: acquisition by the
//! quorum rule, keep-alive rounds that renew our keys and (where allowed) write a missing key
//! back, release with a wake-up for waiters, waiting, and a fault that loses a node's key (a
//! restart without data, or a failover to a server that missed the last write) after which the
//! node sits out for the TTL and the drift (the restart guard, or failover detection, in the
//! library: `node/vote.rs`). Each protocol's assumption is a parameter ([`LeaseConfig`]).
//!
//! Time is one global clock in ticks; every node's clock runs fast by exactly the drift, so a
//! key set at `t` is gone from `t + ttl - drift`, the end of the validity an acquisition started
//! at `t` is given: the tightest the timing assumption allows. A round's steps are atomic per
//! node and may be spread over ticks.

use std::fmt::{self, Display};
use std::sync::Arc;

use stateright::{Model, Property};

use super::{Bounds, Protocol};
use crate::client::{Tally, tally, valid_until};
use crate::discoveries::FirstDiscoveries;
use crate::ids::{Tick, client_name};

/// Always: at no instant do two clients hold a validity that has not ended.
pub const MUTUAL_EXCLUSION: &str = "at most one valid holder at any instant";

/// Always: every valid holder got there by a round a quorum won (a wake-up or a timeout alone
/// never makes a holder).
pub const QUORUM_BACKED: &str = "no holder without a quorum";

/// Sometimes: a lock is granted.
pub const SOME_GRANT: &str = "a lock is granted";

/// Sometimes: a keep-alive round wins with a key it wrote back on a node.
pub const FILL_WON: &str = "a keep-alive round wins with a key written back";

/// Sometimes: a woken waiter is granted.
pub const WOKEN_GRANTED: &str = "a woken waiter is granted";

/// Sometimes: a node that lost its key in a fault grants a key again.
pub const FAULTED_VOTES: &str = "a node that lost its key votes again";

const NODES: usize = 3;
const CLIENTS: usize = 2;

/// What the model assumes, each assumption a parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseConfig {
    /// The TTL, in ticks.
    pub ttl: Tick,
    /// The drift the client allows, in ticks (node clocks run fast by exactly this much).
    pub drift: Tick,
    /// Time runs from 0 to this.
    pub horizon: Tick,
    /// Acquisitions each client starts.
    pub acquisitions: u8,
    /// Keep-alive rounds each grant may start.
    pub extensions: u8,
    /// Whether a keep-alive round writes our key back on a node that has none.
    pub fill: bool,
    /// Whether that write-back happens only where the node may vote (not sitting out).
    pub fill_checks_standing: bool,
    /// Faults the environment may inject (a node loses its key).
    pub faults: u8,
    /// Whether a fault may keep the key (a failover to a server that has it).
    pub fault_may_keep_key: bool,
    /// Whether a faulted node sits out for the TTL and the drift.
    pub sit_out: bool,
    /// Whether a client whose acquisition lost waits for a wake-up before trying again.
    pub waiting: bool,
    /// Whether a woken waiter takes the wake-up for the lock (a defect).
    pub wake_is_grant: bool,
}

impl LeaseConfig {
    /// The configuration of a lease scenario.
    pub fn of(protocol: Protocol) -> LeaseConfig {
        let base = LeaseConfig {
            ttl: 3,
            drift: 1,
            horizon: 5,
            acquisitions: 1,
            extensions: 0,
            fill: false,
            fill_checks_standing: true,
            faults: 1,
            fault_may_keep_key: false,
            sit_out: true,
            waiting: false,
            wake_is_grant: false,
        };
        match protocol {
            Protocol::KeepAliveFillUnguarded => LeaseConfig {
                fill_checks_standing: false,
                ..LeaseConfig::of(Protocol::KeepAlive)
            },
            Protocol::KeepAlive => LeaseConfig {
                horizon: 4,
                extensions: 1,
                fill: true,
                ..base
            },
            Protocol::WaitingWakeIsGrant => LeaseConfig {
                wake_is_grant: true,
                ..LeaseConfig::of(Protocol::Waiting)
            },
            Protocol::Waiting => LeaseConfig {
                acquisitions: 2,
                faults: 0,
                waiting: true,
                ..base
            },
            Protocol::FailoverUndetected => LeaseConfig {
                sit_out: false,
                ..LeaseConfig::of(Protocol::Failover)
            },
            _ => LeaseConfig {
                fault_may_keep_key: true,
                ..base
            },
        }
    }
}

/// A token: the client and its attempt number (from 1).
type Token = (u8, u8);

/// One node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Node {
    /// The lock key: whose, and from when it is gone.
    key: Option<(Token, Tick)>,
    /// Votes (and takes write-backs, with the check on) from this tick.
    votes_from: Tick,
    /// Lost its key in a fault.
    faulted: bool,
}

impl Node {
    fn held_by(&self, token: Token, now: Tick) -> bool {
        self.key
            .is_some_and(|(owner, gone)| owner == token && now < gone)
    }

    fn free(&self, now: Tick) -> bool {
        self.key.is_none_or(|(_, gone)| now >= gone)
    }
}

/// Where a client stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not acquiring, holding or waiting.
    #[default]
    Idle,
    /// Lost an acquisition: waits for a wake-up, or times out.
    Waiting,
    /// Acquiring from `t0`.
    Acquiring {
        /// When the round started.
        t0: Tick,
        /// Nodes that answered.
        answered: u8,
        /// Nodes that set our key.
        ours: u8,
        /// Whether the round started from a wake-up.
        woken: bool,
    },
    /// Holds until `valid_until`.
    Holding {
        /// The end of the validity.
        valid_until: Tick,
        /// Where our key may be.
        keys: u8,
        /// Whether a won round made this holder.
        quorum: bool,
        /// Keep-alive rounds left.
        extensions: u8,
    },
    /// A keep-alive round from `t1`, still holding until `valid_until`.
    Extending {
        /// When the round started.
        t1: Tick,
        /// The validity before the round.
        valid_until: Tick,
        /// Where our key may be.
        keys: u8,
        /// Nodes that answered.
        answered: u8,
        /// Nodes that hold our key now (renewed or written back).
        ours: u8,
        /// Whether a write-back counted.
        filled: bool,
        /// Keep-alive rounds left after this one.
        extensions: u8,
    },
    /// Releasing on these nodes; then waiting (`wait`) or idle.
    Releasing {
        /// Nodes still to release.
        pending: u8,
        /// Whether to wait for a wake-up afterwards.
        wait: bool,
    },
}

/// One client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Client {
    attempts: u8,
    phase: Phase,
    /// A release's wake-up reached it while it waited.
    woken: bool,
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseState {
    now: Tick,
    nodes: [Node; NODES],
    clients: [Client; CLIENTS],
    faults_left: u8,
    /// Examples seen: a round won with a write-back, a woken waiter granted, a faulted node
    /// voting.
    seen: [bool; 3],
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseAction {
    /// Time advances one tick.
    Tick,
    /// `node` loses its key (restart without data, or a failover), keeping it if `keep`.
    Fault { node: u8, keep: bool },
    /// `client`'s acquire script on `node` (`SET NX PX`), starting a round if idle.
    Acquire { client: u8, node: u8 },
    /// `client` starts a keep-alive round.
    StartExtend { client: u8 },
    /// `client`'s keep-alive on `node`: renew our key, or write it back where missing.
    Extend { client: u8, node: u8 },
    /// `client`'s release on `node` (compare and delete, then a wake-up for waiters).
    Release { client: u8, node: u8 },
    /// A wake-up reaches waiting `client`.
    Wake { client: u8 },
    /// Waiting `client` times out.
    Timeout { client: u8 },
}

impl Display for LeaseAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LeaseAction::Tick => write!(f, "time advances"),
            LeaseAction::Fault { node, keep: false } => {
                write!(
                    f,
                    "n{node} loses its key (restart without data, or failover)"
                )
            }
            LeaseAction::Fault { node, keep: true } => {
                write!(f, "n{node} fails over to a server that has the key")
            }
            LeaseAction::Acquire { client, node } => {
                write!(f, "{} acquire on n{node}", client_name(client))
            }
            LeaseAction::StartExtend { client } => {
                write!(f, "{} starts a keep-alive round", client_name(client))
            }
            LeaseAction::Extend { client, node } => {
                write!(f, "{} keep-alive on n{node}", client_name(client))
            }
            LeaseAction::Release { client, node } => {
                write!(f, "{} release on n{node}", client_name(client))
            }
            LeaseAction::Wake { client } => write!(f, "{} is woken", client_name(client)),
            LeaseAction::Timeout { client } => write!(f, "{} times out", client_name(client)),
        }
    }
}

fn bit(node: u8) -> u8 {
    1 << node
}

/// The lease protocols under one [`LeaseConfig`].
#[derive(Clone, Debug)]
pub struct LeaseModel {
    config: LeaseConfig,
    first: Arc<FirstDiscoveries>,
}

impl LeaseModel {
    /// The model of `config`.
    pub fn new(config: LeaseConfig) -> LeaseModel {
        LeaseModel {
            config,
            first: Arc::default(),
        }
    }

    fn quorum() -> usize {
        quorumlock::model_rules::majority(NODES)
    }

    fn decide(&self, yes: u8, answered: u8) -> Tally {
        let unanswered = NODES - answered.count_ones() as usize;
        tally(NODES, yes.count_ones() as usize, unanswered, Self::quorum())
    }

    /// Key lifetime on a node: the TTL less the drift (clocks fast by exactly the drift).
    fn lifetime(&self) -> Tick {
        self.config.ttl.saturating_sub(self.config.drift)
    }

    fn acquire(&self, state: &mut LeaseState, client: u8, node: u8) -> Option<()> {
        let now = state.now;
        let c = state.clients.get_mut(usize::from(client))?;
        if c.phase == Phase::Idle {
            c.attempts += 1;
            c.phase = Phase::Acquiring {
                t0: now,
                answered: 0,
                ours: 0,
                woken: false,
            };
        }
        let Phase::Acquiring {
            t0,
            answered,
            ours,
            woken,
        } = c.phase
        else {
            return None;
        };
        let token = (client, c.attempts);
        let n = state.nodes.get_mut(usize::from(node))?;
        let took = now >= n.votes_from && n.free(now);
        if took {
            n.key = Some((token, now.saturating_add(self.lifetime())));
            if n.faulted {
                state.seen[2] = true;
            }
        }
        let (answered, ours) = (
            answered | bit(node),
            if took { ours | bit(node) } else { ours },
        );
        let c = state.clients.get_mut(usize::from(client))?;
        c.phase = match self.decide(ours, answered) {
            Tally::Open => Phase::Acquiring {
                t0,
                answered,
                ours,
                woken,
            },
            Tally::Won => {
                let valid_until = valid_until(t0, self.config.ttl, self.config.drift);
                if now < valid_until {
                    if woken {
                        state.seen[1] = true;
                    }
                    Phase::Holding {
                        valid_until,
                        keys: ours,
                        quorum: true,
                        extensions: self.config.extensions,
                    }
                } else {
                    releasing(ours, false)
                }
            }
            Tally::Lost => releasing(
                ours,
                self.config.waiting && c.attempts < self.config.acquisitions,
            ),
        };
        Some(())
    }

    fn extend(&self, state: &mut LeaseState, client: u8, node: u8) -> Option<()> {
        let now = state.now;
        let c = *state.clients.get(usize::from(client))?;
        let Phase::Extending {
            t1,
            valid_until: old,
            keys,
            answered,
            ours,
            filled,
            extensions,
        } = c.phase
        else {
            return None;
        };
        let token = (client, c.attempts);
        let lifetime = self.lifetime();
        let n = state.nodes.get_mut(usize::from(node))?;
        let standing = !self.config.fill_checks_standing || now >= n.votes_from;
        let (took, wrote) = if n.held_by(token, now) {
            (true, false)
        } else if self.config.fill && n.free(now) && standing {
            (true, true)
        } else {
            (false, false)
        };
        if took {
            n.key = Some((token, now.saturating_add(lifetime)));
        }
        let answered = answered | bit(node);
        let ours = if took { ours | bit(node) } else { ours };
        let filled = filled || wrote;
        let keys = keys | ours;
        let c = state.clients.get_mut(usize::from(client))?;
        c.phase = match self.decide(ours, answered) {
            Tally::Open => Phase::Extending {
                t1,
                valid_until: old,
                keys,
                answered,
                ours,
                filled,
                extensions,
            },
            Tally::Won => {
                if filled {
                    state.seen[0] = true;
                }
                Phase::Holding {
                    valid_until: valid_until(t1, self.config.ttl, self.config.drift).max(old),
                    keys,
                    quorum: true,
                    extensions,
                }
            }
            Tally::Lost => Phase::Holding {
                valid_until: old,
                keys,
                quorum: true,
                extensions,
            },
        };
        Some(())
    }

    fn release(state: &mut LeaseState, client: u8, node: u8) -> Option<()> {
        let c = *state.clients.get(usize::from(client))?;
        let token = (client, c.attempts);
        let (pending, wait) = match c.phase {
            Phase::Holding { keys, .. } | Phase::Extending { keys, .. } => (keys, false),
            Phase::Releasing { pending, wait } => (pending, wait),
            _ => return None,
        };
        let n = state.nodes.get_mut(usize::from(node))?;
        if n.key.is_some_and(|(owner, _)| owner == token) {
            n.key = None;
            // The release publishes: every waiter hears it (a hint, however late it acts on it).
            for other in state.clients.iter_mut() {
                if other.phase == Phase::Waiting {
                    other.woken = true;
                }
            }
        }
        let c = state.clients.get_mut(usize::from(client))?;
        c.phase = releasing(pending & !bit(node), wait);
        Some(())
    }

    /// A woken waiter tries again by the quorum rule; with the defect, it takes the lock.
    fn wake(&self, state: &mut LeaseState, client: u8) -> Option<()> {
        let now = state.now;
        let c = state.clients.get_mut(usize::from(client))?;
        c.woken = false;
        c.attempts += 1;
        c.phase = if self.config.wake_is_grant {
            state.seen[1] = true;
            Phase::Holding {
                valid_until: valid_until(now, self.config.ttl, self.config.drift),
                keys: 0,
                quorum: false,
                extensions: 0,
            }
        } else {
            Phase::Acquiring {
                t0: now,
                answered: 0,
                ours: 0,
                woken: true,
            }
        };
        Some(())
    }
}

impl Bounds for LeaseModel {
    fn bounds(&self) -> String {
        let c = &self.config;
        format!(
            "3 nodes, 2 clients, TTL {} ticks, drift {}, time 0..={}; {} acquisition(s) per \
             client, {} keep-alive round(s) per grant; write-back of missing keys {}; {} \
             fault(s){}; sit-out after a fault {}; waiting {}{}",
            c.ttl,
            c.drift,
            c.horizon,
            c.acquisitions,
            c.extensions,
            match (c.fill, c.fill_checks_standing) {
                (false, _) => "off",
                (true, true) => "where the node may vote",
                (true, false) => "anywhere",
            },
            c.faults,
            if c.fault_may_keep_key {
                " (the new server may have the key)"
            } else {
                ""
            },
            if c.sit_out { "on" } else { "off" },
            if c.waiting { "on" } else { "off" },
            if c.wake_is_grant {
                ", a wake-up taken for the lock"
            } else {
                ""
            },
        )
    }
}

impl Model for LeaseModel {
    type State = LeaseState;
    type Action = LeaseAction;

    fn init_states(&self) -> Vec<LeaseState> {
        vec![LeaseState {
            now: 0,
            nodes: [Node::default(); NODES],
            clients: [Client::default(); CLIENTS],
            faults_left: self.config.faults,
            seen: [false; 3],
        }]
    }

    fn actions(&self, state: &LeaseState, actions: &mut Vec<LeaseAction>) {
        if state.now < self.config.horizon {
            actions.push(LeaseAction::Tick);
        }
        if state.faults_left > 0 {
            for node in 0..NODES as u8 {
                actions.push(LeaseAction::Fault { node, keep: false });
                if self.config.fault_may_keep_key {
                    actions.push(LeaseAction::Fault { node, keep: true });
                }
            }
        }
        for (client, c) in (0u8..).zip(state.clients) {
            let nodes = (0..NODES as u8).map(|node| (node, bit(node)));
            match c.phase {
                Phase::Idle if c.attempts < self.config.acquisitions => {
                    actions.extend(nodes.map(|(node, _)| LeaseAction::Acquire { client, node }));
                }
                Phase::Idle => {}
                Phase::Waiting => {
                    if c.woken {
                        actions.push(LeaseAction::Wake { client });
                    }
                    actions.push(LeaseAction::Timeout { client });
                }
                Phase::Acquiring { answered, .. } => actions.extend(
                    nodes
                        .filter(|(_, bit)| answered & bit == 0)
                        .map(|(node, _)| LeaseAction::Acquire { client, node }),
                ),
                Phase::Holding {
                    valid_until,
                    keys,
                    extensions,
                    ..
                } => {
                    if extensions > 0 && state.now < valid_until {
                        actions.push(LeaseAction::StartExtend { client });
                    }
                    actions.extend(
                        nodes
                            .filter(|(_, bit)| keys & bit != 0)
                            .map(|(node, _)| LeaseAction::Release { client, node }),
                    );
                }
                Phase::Extending { answered, .. } => actions.extend(
                    nodes
                        .filter(|(_, bit)| answered & bit == 0)
                        .map(|(node, _)| LeaseAction::Extend { client, node }),
                ),
                Phase::Releasing { pending, .. } => actions.extend(
                    nodes
                        .filter(|(_, bit)| pending & bit != 0)
                        .map(|(node, _)| LeaseAction::Release { client, node }),
                ),
            }
        }
    }

    fn next_state(&self, state: &LeaseState, action: LeaseAction) -> Option<LeaseState> {
        let mut next = state.clone();
        match action {
            LeaseAction::Tick => next.now += 1,
            LeaseAction::Fault { node, keep } => {
                next.faults_left -= 1;
                let ttl_and_drift = self.config.ttl.saturating_add(self.config.drift);
                let n = next.nodes.get_mut(usize::from(node))?;
                if !keep {
                    n.key = None;
                }
                n.faulted = true;
                if self.config.sit_out {
                    n.votes_from = state.now.saturating_add(ttl_and_drift);
                }
            }
            LeaseAction::Acquire { client, node } => self.acquire(&mut next, client, node)?,
            LeaseAction::StartExtend { client } => {
                let c = next.clients.get_mut(usize::from(client))?;
                let Phase::Holding {
                    valid_until,
                    keys,
                    extensions,
                    ..
                } = c.phase
                else {
                    return None;
                };
                c.phase = Phase::Extending {
                    t1: state.now,
                    valid_until,
                    keys,
                    answered: 0,
                    ours: 0,
                    filled: false,
                    extensions: extensions - 1,
                };
            }
            LeaseAction::Extend { client, node } => self.extend(&mut next, client, node)?,
            LeaseAction::Release { client, node } => Self::release(&mut next, client, node)?,
            LeaseAction::Wake { client } => self.wake(&mut next, client)?,
            LeaseAction::Timeout { client } => {
                let c = next.clients.get_mut(usize::from(client))?;
                c.woken = false;
                c.phase = Phase::Idle;
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(
                MUTUAL_EXCLUSION,
                |model: &LeaseModel, state: &LeaseState| {
                    let valid = state
                        .clients
                        .iter()
                        .filter(|c| relied_until(c).is_some_and(|until| state.now < until))
                        .count();
                    !model.first.report(0, valid > 1)
                },
            ),
            Property::always(QUORUM_BACKED, |model: &LeaseModel, state: &LeaseState| {
                let unbacked = state.clients.iter().any(|c| {
                    matches!(c.phase, Phase::Holding { quorum: false, valid_until, .. }
                        if state.now < valid_until)
                });
                !model.first.report(1, unbacked)
            }),
            Property::sometimes(SOME_GRANT, |model: &LeaseModel, state: &LeaseState| {
                let held = state.clients.iter().any(|c| relied_until(c).is_some());
                model.first.report(2, held)
            }),
        ];
        if self.config.fill {
            properties.push(Property::sometimes(
                FILL_WON,
                |model: &LeaseModel, state: &LeaseState| model.first.report(3, state.seen[0]),
            ));
        }
        if self.config.waiting {
            properties.push(Property::sometimes(
                WOKEN_GRANTED,
                |model: &LeaseModel, state: &LeaseState| model.first.report(4, state.seen[1]),
            ));
        }
        if self.config.faults > 0 {
            properties.push(Property::sometimes(
                FAULTED_VOTES,
                |model: &LeaseModel, state: &LeaseState| model.first.report(5, state.seen[2]),
            ));
        }
        properties
    }
}

/// Releasing on `pending`; once nothing is pending, waiting (`wait`) or idle.
fn releasing(pending: u8, wait: bool) -> Phase {
    match (pending, wait) {
        (0, true) => Phase::Waiting,
        (0, false) => Phase::Idle,
        (pending, wait) => Phase::Releasing { pending, wait },
    }
}

/// The validity a holding (or extending) client relies on.
fn relied_until(client: &Client) -> Option<Tick> {
    match client.phase {
        Phase::Holding { valid_until, .. } | Phase::Extending { valid_until, .. } => {
            Some(valid_until)
        }
        _ => None,
    }
}
