//! The model for stateright: the state of nodes, clients, grants and store, and which actions
//! each state allows (what they do is in `steps.rs`).

use std::sync::Arc;

use stateright::{Model, Property};

use crate::action::{Action, Log};
use crate::bounded::Bounded;
use crate::client::{Client, Phase};
use crate::config::{Config, ConfigError};
use crate::ids::{
    ClientId, Fence, MAX_CLIENTS, MAX_GRANTS, MAX_NODES, NodeSet, Tick, Token, as_node_id,
};
use crate::node::{Node, Restart};
use crate::properties::{self, FirstDiscoveries};
use crate::store::Store;
use crate::symmetry::Symmetry;

/// One grant: a client won the quorum, wrote its fence back to a majority, and had validity
/// left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Grant {
    /// The acquisition's token.
    pub token: Token,
    /// Its fence.
    pub fence: Fence,
    /// When its acquisition started (T0).
    pub t0: Tick,
    /// The first tick at which it is no longer valid.
    pub valid_until: Tick,
    /// Whether its quorum counted a node that had restarted without its data.
    pub counted_data_loss: bool,
}

/// Everything the model tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct State {
    /// Global time.
    pub now: Tick,
    /// The masters.
    pub nodes: Bounded<Node, MAX_NODES>,
    /// The clients.
    pub clients: Bounded<Client, MAX_CLIENTS>,
    /// How many more crash-restarts the environment may inject.
    pub restarts_left: u8,
    /// The nodes that have restarted without their data.
    pub lost_data: NodeSet,
    /// Every grant so far, in grant order.
    pub grants: Bounded<Grant, MAX_GRANTS>,
    /// The fenced store.
    pub store: Store,
}

impl State {
    /// The grant `client` holds, if it is in the holding phase (valid or not).
    pub fn held_grant(&self, client: &Client) -> Option<&Grant> {
        match client.phase {
            Phase::Holding { grant, .. } => self.grants.get(usize::from(grant)),
            _ => None,
        }
    }
}

/// The fencing protocol over N masters, with its clients and environment, for stateright.
#[derive(Clone, Debug)]
pub struct FencingModel {
    config: Config,
    symmetry: Option<Symmetry>,
    first_discoveries: Arc<FirstDiscoveries>,
}

impl FencingModel {
    /// A model of `config`.
    pub fn new(config: Config) -> Result<FencingModel, ConfigError> {
        config.validate()?;
        Ok(FencingModel {
            config,
            symmetry: None,
            first_discoveries: Arc::default(),
        })
    }

    /// Which properties already have a discovery in this model's checker run.
    pub fn first_discoveries(&self) -> &FirstDiscoveries {
        &self.first_discoveries
    }

    /// The same model, keeping one representative of each set of states that differ only by
    /// renaming clients, or nodes whose clocks run alike (see `symmetry.rs`). Paths it finds are
    /// in renamed terms; [`Trace::of`](crate::trace::Trace::of) renames them back.
    pub fn with_symmetry(self) -> FencingModel {
        let symmetry = Symmetry::of(&self.config);
        FencingModel {
            symmetry: Some(symmetry),
            ..self
        }
    }

    /// The representative of `state` under this model's symmetry (`state` itself without).
    pub(crate) fn representative(&self, state: State) -> State {
        match &self.symmetry {
            Some(symmetry) => symmetry.representative(state),
            None => state,
        }
    }

    /// Whether the model reduces by symmetry.
    pub(crate) fn is_symmetric(&self) -> bool {
        self.symmetry.is_some()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The one initial state: no keys, counters at 0, every client idle, nothing granted.
    pub fn initial_state(&self) -> State {
        let mut clients = Bounded::new();
        for id in 0..self.config.clients {
            clients.push(Client::new(ClientId::try_from(id).unwrap_or(ClientId::MAX)));
        }
        State {
            now: 0,
            nodes: Bounded::filled(self.config.nodes, Node::default()),
            clients,
            restarts_left: self.config.max_restarts,
            lost_data: NodeSet::EMPTY,
            grants: Bounded::new(),
            store: Store::default(),
        }
    }
}

impl Model for FencingModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.representative(self.initial_state())]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < self.config.horizon {
            actions.push(Action::Tick);
        }
        if state.restarts_left > 0 {
            for node in (0..self.config.nodes).map(as_node_id) {
                if self.config.restart_with_data {
                    actions.push(Action::Restart {
                        node,
                        restart: Restart::WithData,
                    });
                }
                if self.config.restart_without_data {
                    actions.push(Action::Restart {
                        node,
                        restart: Restart::WithoutData,
                    });
                }
            }
        }
        for (index, node) in state.nodes.iter().enumerate() {
            if node.counter_stale {
                actions.push(Action::RecoverCounter {
                    node: as_node_id(index),
                });
            }
        }
        for client in &state.clients {
            let id = client.id;
            match client.phase {
                Phase::Idle => {
                    if client.attempts < self.config.acquisitions_per_client {
                        for node in NodeSet::first(self.config.nodes).iter() {
                            actions.push(Action::Acquire { client: id, node });
                        }
                    }
                }
                Phase::Acquiring { answered, .. } => {
                    for node in NodeSet::first(self.config.nodes).iter() {
                        if !answered.contains(node) {
                            actions.push(Action::Acquire { client: id, node });
                        }
                    }
                    if self.config.give_up {
                        actions.push(Action::GiveUp { client: id });
                    }
                }
                Phase::WritingBack { ours, answered, .. } => {
                    for node in ours.iter().filter(|&node| !answered.contains(node)) {
                        actions.push(Action::WriteBack { client: id, node });
                    }
                    if self.config.give_up {
                        actions.push(Action::GiveUp { client: id });
                    }
                }
                Phase::Holding {
                    writes_left, keys, ..
                } => {
                    if writes_left > 0 {
                        actions.push(Action::Write { client: id });
                    }
                    for node in keys.iter() {
                        actions.push(Action::ReleaseAt { client: id, node });
                    }
                }
                Phase::Releasing { pending } => {
                    for node in pending.iter() {
                        actions.push(Action::ReleaseAt { client: id, node });
                    }
                }
            }
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let next = self.step(state, action, &mut Log(None))?;
        Some(self.representative(next))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}
