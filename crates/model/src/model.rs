//! The model for stateright: the configuration and symmetry a checker run explores with, and
//! the initial state (the state is in `state.rs`, which actions each state allows in `rules.rs`,
//! what they do in `steps.rs`).

use std::sync::Arc;

use crate::bounded::Bounded;
use crate::client::Client;
use crate::config::{Config, ConfigError};
use crate::discoveries::FirstDiscoveries;
use crate::ids::ClientId;
use crate::ids::NodeSet;
use crate::node::Node;
use crate::state::State;
use crate::store::Store;
use crate::symmetry::Symmetry;

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
