//! The rules for stateright: which actions each state allows, the properties, and how a state
//! is reduced by symmetry (what each action does is in `steps.rs`).

use stateright::{Model, Property};

use crate::action::{Action, Log};
use crate::client::Phase;
use crate::ids::{NodeSet, as_node_id};
use crate::model::FencingModel;
use crate::node::Restart;
use crate::properties;
use crate::state::State;

impl Model for FencingModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.representative(self.initial_state())]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < self.config().horizon {
            actions.push(Action::Tick);
        }
        if state.restarts_left > 0 {
            for node in (0..self.config().nodes).map(as_node_id) {
                if self.config().restart_with_data {
                    actions.push(Action::Restart {
                        node,
                        restart: Restart::WithData,
                    });
                }
                if self.config().restart_without_data {
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
                    if client.attempts < self.config().acquisitions_per_client {
                        for node in NodeSet::first(self.config().nodes).iter() {
                            actions.push(Action::Acquire { client: id, node });
                        }
                    }
                }
                Phase::Acquiring { answered, .. } => {
                    for node in NodeSet::first(self.config().nodes).iter() {
                        if !answered.contains(node) {
                            actions.push(Action::Acquire { client: id, node });
                        }
                    }
                    if self.config().give_up {
                        actions.push(Action::GiveUp { client: id });
                    }
                }
                Phase::WritingBack { ours, answered, .. } => {
                    for node in ours.iter().filter(|&node| !answered.contains(node)) {
                        actions.push(Action::WriteBack { client: id, node });
                    }
                    if self.config().give_up {
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
