//! Symmetry reduction: clients are interchangeable, and so are nodes whose clocks run alike. The
//! checker keeps one representative (the least, in the states' order) of each set of states that
//! differ only by such a renaming; every behaviour of one member is, renamed, a behaviour of the
//! others, so no violation is lost.

use crate::client::{Client, Phase};
use crate::config::Config;
use crate::ids::{ClientId, NodeId, NodeSet, Token, as_node_id};
use crate::node::{LockKey, Node};
use crate::state::State;

/// One renaming: the new number of each node and each client, by old number.
#[derive(Clone, Debug)]
struct Renaming {
    nodes: Vec<NodeId>,
    clients: Vec<ClientId>,
}

/// The renamings a configuration allows.
#[derive(Clone, Debug)]
pub(crate) struct Symmetry {
    renamings: Vec<Renaming>,
}

impl Symmetry {
    /// Every renaming of clients, combined with every renaming of nodes that maps each node to
    /// one whose clock runs at the same rate (the same `expiry_shortfall`).
    pub(crate) fn of(config: &Config) -> Symmetry {
        let shortfall = |node: usize| config.expiry_shortfall.get(node).copied().unwrap_or(0);
        let node_renamings: Vec<Vec<u8>> = permutations(config.nodes)
            .into_iter()
            .filter(|renaming| {
                renaming
                    .iter()
                    .enumerate()
                    .all(|(old, &new)| shortfall(old) == shortfall(usize::from(new)))
            })
            .collect();
        let client_renamings = permutations(config.clients);
        let renamings = node_renamings
            .iter()
            .flat_map(|nodes| {
                client_renamings.iter().map(|clients| Renaming {
                    nodes: nodes.clone(),
                    clients: clients.clone(),
                })
            })
            .collect();
        Symmetry { renamings }
    }

    /// The representative of `state`'s class: the least of its renamings.
    pub(crate) fn representative(&self, state: State) -> State {
        self.renamings
            .iter()
            .map(|renaming| renaming.apply(&state))
            .min()
            .unwrap_or(state)
    }
}

impl Renaming {
    fn node(&self, node: NodeId) -> NodeId {
        self.nodes.get(usize::from(node)).copied().unwrap_or(node)
    }

    fn client(&self, client: ClientId) -> ClientId {
        self.clients
            .get(usize::from(client))
            .copied()
            .unwrap_or(client)
    }

    fn token(&self, token: Token) -> Token {
        Token::new(self.client(token.client()), token.attempt())
    }

    fn set(&self, set: NodeSet) -> NodeSet {
        set.iter().fold(NodeSet::EMPTY, |renamed, node| {
            renamed.with(self.node(node))
        })
    }

    fn phase(&self, phase: Phase) -> Phase {
        match phase {
            Phase::Idle => Phase::Idle,
            Phase::Acquiring {
                t0,
                answered,
                ours,
                fence,
                lowest,
            } => Phase::Acquiring {
                t0,
                answered: self.set(answered),
                ours: self.set(ours),
                fence,
                lowest,
            },
            Phase::WritingBack {
                t0,
                fence,
                ours,
                answered,
                confirmed,
            } => Phase::WritingBack {
                t0,
                fence,
                ours: self.set(ours),
                answered: self.set(answered),
                confirmed: self.set(confirmed),
            },
            Phase::Holding {
                grant,
                keys,
                writes_left,
            } => Phase::Holding {
                grant,
                keys: self.set(keys),
                writes_left,
            },
            Phase::Releasing { pending } => Phase::Releasing {
                pending: self.set(pending),
            },
        }
    }

    fn apply(&self, state: &State) -> State {
        let mut renamed = *state;
        for (old, node) in state.nodes.iter().enumerate() {
            if let Some(slot) = renamed
                .nodes
                .get_mut(usize::from(self.node(as_node_id(old))))
            {
                *slot = Node {
                    key: node.key.map(|key| LockKey {
                        token: self.token(key.token),
                        expires_at: key.expires_at,
                    }),
                    ..*node
                };
            }
        }
        for client in &state.clients {
            let id = self.client(client.id);
            if let Some(slot) = renamed.clients.get_mut(usize::from(id)) {
                *slot = Client {
                    id,
                    attempts: client.attempts,
                    phase: self.phase(client.phase),
                };
            }
        }
        renamed.lost_data = self.set(state.lost_data);
        for grant in renamed.grants.iter_mut() {
            grant.token = self.token(grant.token);
        }
        renamed
    }
}

/// Every permutation of `0..count`, each as the image of 0, 1, ….
fn permutations(count: usize) -> Vec<Vec<u8>> {
    let Ok(count) = u8::try_from(count) else {
        return vec![Vec::new()];
    };
    let mut all = vec![Vec::new()];
    for next in 0..count {
        all = all
            .into_iter()
            .flat_map(|partial: Vec<u8>| {
                (0..=partial.len()).map(move |at| {
                    let mut longer = partial.clone();
                    longer.insert(at, next);
                    longer
                })
            })
            .collect();
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_all_there_once() {
        let mut three = permutations(3);
        three.sort();
        three.dedup();
        assert_eq!(three.len(), 6);
        assert_eq!(permutations(0), vec![Vec::<u8>::new()]);
    }

    #[test]
    fn states_that_differ_only_by_names_have_one_representative() {
        use stateright::Model;

        use crate::action::Action;
        use crate::model::FencingModel;

        let model = FencingModel::new(Config::assumptions_hold()).unwrap();
        let a_on_n0 = model
            .next_state(
                &model.initial_state(),
                Action::Acquire { client: 0, node: 0 },
            )
            .unwrap();
        let b_on_n2 = model
            .next_state(
                &model.initial_state(),
                Action::Acquire { client: 1, node: 2 },
            )
            .unwrap();
        assert_ne!(a_on_n0, b_on_n2);
        let symmetry = Symmetry::of(model.config());
        assert_eq!(
            symmetry.representative(a_on_n0),
            symmetry.representative(b_on_n2)
        );
    }

    #[test]
    fn only_nodes_with_the_same_clock_are_interchangeable() {
        let mut config = Config::assumptions_hold();
        config.expiry_shortfall = vec![2, 0, 0];
        // {n1, n2} swap, clients A and B swap: 2 × 2.
        assert_eq!(Symmetry::of(&config).renamings.len(), 4);
        config.expiry_shortfall = vec![1, 1, 1];
        assert_eq!(Symmetry::of(&config).renamings.len(), 12);
    }
}
