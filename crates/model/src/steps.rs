//! What each action does to the state: the protocol's steps on the nodes, the client's
//! decisions, and the environment's ticks, crashes and counter recoveries.
//!
//! Just over 500 lines with its tests: one function per action, each short, and the tests that
//! walk a client through them read best next to them.

use crate::action::{Action, Event, Log};
use crate::bounded::Bounded;
use crate::client::{Client, Phase, Tally, tally, valid_until};
use crate::config::Config;
use crate::ids::{ClientId, Fence, MAX_GRANTS, NodeId, NodeSet, Tick, Token, as_node_id};
use crate::model::FencingModel;
use crate::node::{AcquireReply, Restart, WriteBackReply};
use crate::state::{Grant, State};

impl FencingModel {
    /// Applies `action` to `state` and says what happened: the next state (`None` if the action
    /// does not apply) and the events, in order.
    pub(crate) fn step_with_events(
        &self,
        state: &State,
        action: Action,
    ) -> (Option<State>, Vec<Event>) {
        let mut events = Vec::new();
        let next = self.step(state, action, &mut Log(Some(&mut events)));
        (next, events)
    }

    /// Applies `action` to `state`, noting what happened in `log`: the next state, or `None` if
    /// the action does not apply.
    pub(crate) fn step(&self, state: &State, action: Action, log: &mut Log<'_>) -> Option<State> {
        let mut next = *state;
        match action {
            Action::Tick => self.tick(&mut next, log)?,
            Action::Restart { node, restart } => self.restart(&mut next, node, restart, log)?,
            Action::RecoverCounter { node } => self.recover_counter(&mut next, node, log)?,
            Action::Acquire { client, node } => self.acquire(&mut next, client, node, log)?,
            Action::WriteBack { client, node } => self.write_back(&mut next, client, node, log)?,
            Action::GiveUp { client } => self.give_up(&mut next, client, log)?,
            Action::Write { client } => self.write(&mut next, client, log)?,
            Action::ReleaseAt { client, node } => self.release_at(&mut next, client, node, log)?,
        }
        Some(next)
    }

    fn tick(&self, state: &mut State, log: &mut Log<'_>) -> Option<()> {
        if state.now >= self.config().horizon {
            return None;
        }
        state.now += 1;
        log.note(Event::TimeAdvanced { now: state.now });
        for (index, node) in state.nodes.iter_mut().enumerate() {
            let before = *node;
            node.advance_to(state.now);
            let id = as_node_id(index);
            if let (Some(key), None) = (before.key, node.key) {
                log.note(Event::KeyExpired {
                    node: id,
                    token: key.token,
                });
            }
            if before.recovering_until.is_some() && node.recovering_until.is_none() {
                log.note(Event::GuardLifted { node: id });
            }
        }
        Some(())
    }

    fn restart(
        &self,
        state: &mut State,
        node: NodeId,
        restart: Restart,
        log: &mut Log<'_>,
    ) -> Option<()> {
        if restart == Restart::WithData {
            // Keys and counter survive and a node that persists every write votes at once: the
            // restart changes nothing the protocol can see (requests in flight are not
            // modelled), so it is no step at all.
            return None;
        }
        state.restarts_left = state.restarts_left.checked_sub(1)?;
        state.lost_data = state.lost_data.with(node);
        let recovering_until = self
            .config()
            .restart_guard
            .then(|| state.now.saturating_add(self.config().guard_period()));
        let target = state.nodes.get_mut(usize::from(node))?;
        let lost = *target;
        target.restart(restart, recovering_until, self.config().counter_recovery);
        log.note(Event::Restarted {
            node,
            restart,
            lost,
            recovering_until: target.recovering_until,
        });
        Some(())
    }

    fn recover_counter(&self, state: &mut State, node: NodeId, log: &mut Log<'_>) -> Option<()> {
        let others_max = state
            .nodes
            .iter()
            .enumerate()
            .filter(|&(other, _)| other != usize::from(node))
            .map(|(_, other)| other.counter)
            .max()
            .unwrap_or(0);
        let target = state.nodes.get_mut(usize::from(node))?;
        if !target.counter_stale {
            return None;
        }
        let (before, after) = target.recover_counter(others_max);
        log.note(Event::CounterRecovered {
            node,
            before,
            after,
        });
        Some(())
    }

    /// Starts `client`'s next acquisition at `now`, if it has one left.
    fn begin(&self, client: &mut Client, now: Tick, log: &mut Log<'_>) -> Option<()> {
        if client.attempts >= self.config().acquisitions_per_client {
            return None;
        }
        client.attempts += 1;
        client.phase = Phase::Acquiring {
            t0: now,
            answered: NodeSet::EMPTY,
            ours: NodeSet::EMPTY,
            fence: 0,
            lowest: Fence::MAX,
        };
        log.note(Event::Began {
            token: client.token(),
            t0: now,
        });
        Some(())
    }

    fn acquire(
        &self,
        state: &mut State,
        client_id: ClientId,
        node_id: NodeId,
        log: &mut Log<'_>,
    ) -> Option<()> {
        let now = state.now;
        let client = state.clients.get_mut(usize::from(client_id))?;
        if client.phase == Phase::Idle {
            self.begin(client, now, log)?;
        }
        let token = client.token();
        let Phase::Acquiring {
            t0,
            answered,
            mut ours,
            mut fence,
            mut lowest,
        } = client.phase
        else {
            return None;
        };
        if answered.contains(node_id) {
            return None;
        }
        let node = state.nodes.get_mut(usize::from(node_id))?;
        if node.votes(now) {
            let expires_at = now.saturating_add(self.config().key_lifetime(usize::from(node_id)));
            let reply = node.acquire(token, expires_at);
            log.note(Event::Acquired {
                token,
                node: node_id,
                reply,
                expires_at,
            });
            if let AcquireReply::Ours { counter } = reply {
                ours = ours.with(node_id);
                fence = fence.max(counter);
                lowest = lowest.min(counter);
            }
        } else {
            log.note(Event::Recovering {
                token,
                node: node_id,
            });
        }
        let answered = answered.with(node_id);
        let unanswered = self.config().nodes.saturating_sub(answered.len());
        client.phase = match tally(
            self.config().nodes,
            ours.len(),
            unanswered,
            self.config().quorum(),
        ) {
            Tally::Open => Phase::Acquiring {
                t0,
                answered,
                ours,
                fence,
                lowest,
            },
            Tally::Won if lowest == fence && !self.config().counter_recovery => {
                // Every grant took the same counter: it is on a quorum already, which is all
                // the write-back would make it (`round/fencing.rs`). Not on volatile nodes: one
                // that lost its data after its grant would count, and the write-back's check
                // of the key is what leaves it out.
                log.note(Event::QuorumWon {
                    token,
                    ours,
                    fence,
                    agreed: true,
                });
                granted(
                    &mut state.grants,
                    state.lost_data,
                    self.config(),
                    now,
                    (token, t0, fence, ours),
                    log,
                )?
            }
            Tally::Won => {
                log.note(Event::QuorumWon {
                    token,
                    ours,
                    fence,
                    agreed: false,
                });
                Phase::WritingBack {
                    t0,
                    fence,
                    ours,
                    answered: NodeSet::EMPTY,
                    confirmed: NodeSet::EMPTY,
                }
            }
            Tally::Lost => {
                log.note(Event::QuorumLost { token });
                release_phase(ours)
            }
        };
        finish_if_idle(client, log);
        Some(())
    }

    fn write_back(
        &self,
        state: &mut State,
        client_id: ClientId,
        node_id: NodeId,
        log: &mut Log<'_>,
    ) -> Option<()> {
        let now = state.now;
        let client = state.clients.get_mut(usize::from(client_id))?;
        let token = client.token();
        let Phase::WritingBack {
            t0,
            fence,
            ours,
            answered,
            mut confirmed,
        } = client.phase
        else {
            return None;
        };
        if !ours.contains(node_id) || answered.contains(node_id) {
            return None;
        }
        let node = state.nodes.get_mut(usize::from(node_id))?;
        if node.votes(now) {
            let reply = node.write_back(token, fence);
            log.note(Event::WroteBack {
                token,
                node: node_id,
                reply,
            });
            if let WriteBackReply::Confirmed { .. } = reply {
                confirmed = confirmed.with(node_id);
            }
        } else {
            log.note(Event::Recovering {
                token,
                node: node_id,
            });
        }
        let answered = answered.with(node_id);
        let unanswered = ours.len().saturating_sub(answered.len());
        client.phase = match tally(
            self.config().nodes,
            confirmed.len(),
            unanswered,
            self.config().quorum(),
        ) {
            Tally::Open => Phase::WritingBack {
                t0,
                fence,
                ours,
                answered,
                confirmed,
            },
            Tally::Won => granted(
                &mut state.grants,
                state.lost_data,
                self.config(),
                now,
                (token, t0, fence, ours),
                log,
            )?,
            Tally::Lost => {
                log.note(Event::WriteBackLost { token });
                release_phase(ours)
            }
        };
        Some(())
    }

    fn give_up(&self, state: &mut State, client_id: ClientId, log: &mut Log<'_>) -> Option<()> {
        if !self.config().give_up {
            return None;
        }
        let client = state.clients.get_mut(usize::from(client_id))?;
        let (Phase::Acquiring { ours, .. } | Phase::WritingBack { ours, .. }) = client.phase else {
            return None;
        };
        log.note(Event::GaveUp {
            token: client.token(),
        });
        client.phase = release_phase(ours);
        finish_if_idle(client, log);
        Some(())
    }

    fn write(&self, state: &mut State, client_id: ClientId, log: &mut Log<'_>) -> Option<()> {
        let client = state.clients.get_mut(usize::from(client_id))?;
        let Phase::Holding {
            grant: index,
            keys,
            writes_left,
        } = client.phase
        else {
            return None;
        };
        let writes_left = writes_left.checked_sub(1)?;
        let grant = *state.grants.get(usize::from(index))?;
        let stale = state.now >= grant.valid_until;
        let last_before = state.store.last_accepted();
        let accepted = state.store.write(index, grant.fence, stale)?;
        client.phase = Phase::Holding {
            grant: index,
            keys,
            writes_left,
        };
        log.note(Event::Wrote {
            token: grant.token,
            fence: grant.fence,
            stale,
            accepted,
            last_before,
        });
        Some(())
    }

    fn release_at(
        &self,
        state: &mut State,
        client_id: ClientId,
        node_id: NodeId,
        log: &mut Log<'_>,
    ) -> Option<()> {
        let client = state.clients.get_mut(usize::from(client_id))?;
        let token = client.token();
        let pending = match client.phase {
            Phase::Releasing { pending } => pending,
            Phase::Holding { keys, .. } => {
                log.note(Event::ReleaseStarted { token });
                keys
            }
            _ => return None,
        };
        if !pending.contains(node_id) {
            return None;
        }
        let deleted = state.nodes.get_mut(usize::from(node_id))?.release(token);
        log.note(Event::Released {
            token,
            node: node_id,
            deleted,
        });
        let pending = pending.without(node_id);
        client.phase = release_phase(pending);
        if pending.is_empty() {
            log.note(Event::Finished { token });
        }
        Some(())
    }
}

/// The phase after deciding to release `keys`: releasing them, or idle if there are none.
fn release_phase(keys: NodeSet) -> Phase {
    if keys.is_empty() {
        Phase::Idle
    } else {
        Phase::Releasing { pending: keys }
    }
}

/// Notes the end of an acquisition that had nothing to release.
fn finish_if_idle(client: &Client, log: &mut Log<'_>) {
    if client.phase == Phase::Idle {
        log.note(Event::Finished {
            token: client.token(),
        });
    }
}

/// A quorum confirmed `fence` (by its grants alone, or by its write-back): the grant if its
/// validity is left, else its keys released.
fn granted(
    grants: &mut Bounded<Grant, MAX_GRANTS>,
    lost_data: NodeSet,
    config: &Config,
    now: Tick,
    (token, t0, fence, ours): (Token, Tick, Fence, NodeSet),
    log: &mut Log<'_>,
) -> Option<Phase> {
    let valid_until = valid_until(t0, config.ttl, config.drift);
    if now >= valid_until {
        log.note(Event::GrantTooLate { token, valid_until });
        return Some(release_phase(ours));
    }
    let grant = Grant {
        token,
        fence,
        t0,
        valid_until,
        counted_data_loss: !ours.intersection(lost_data).is_empty(),
    };
    let index = u8::try_from(grants.len()).ok()?;
    if !grants.push(grant) {
        return None;
    }
    log.note(Event::Granted { grant });
    Some(Phase::Holding {
        grant: index,
        keys: ours,
        writes_left: config.writes_per_grant,
    })
}

#[cfg(test)]
mod tests {
    use stateright::Model;

    use super::*;
    use crate::config::Config;
    use crate::ids::Token;

    const A: ClientId = 0;
    const B: ClientId = 1;

    /// The state after `actions` from the start; panics on an action that does not apply.
    fn after(model: &FencingModel, actions: &[Action]) -> State {
        actions
            .iter()
            .fold(model.initial_state(), |state, &action| {
                model
                    .next_state(&state, action)
                    .unwrap_or_else(|| panic!("{action:?} does not apply to {state:#?}"))
            })
    }

    /// B's key on n2 expires and leaves n2's counter at 1; A then wins n0 and n2 with counters
    /// 1 and 2, out of step, so its fence (2) must be written back.
    const OUT_OF_STEP: [Action; 6] = [
        Action::Acquire { client: B, node: 2 },
        Action::Tick,
        Action::Tick,
        Action::Tick,
        Action::Acquire { client: A, node: 0 },
        Action::Acquire { client: A, node: 2 },
    ];

    fn model() -> FencingModel {
        let mut config = Config::assumptions_hold();
        config.expiry_shortfall = vec![0, 0, 0];
        FencingModel::new(config).unwrap()
    }

    #[test]
    fn a_quorum_that_confirms_its_fence_in_time_grants_the_lock_with_the_largest_counter() {
        let model = model();
        let state = after(
            &model,
            &[
                &OUT_OF_STEP[..],
                &[
                    Action::WriteBack { client: A, node: 0 },
                    Action::WriteBack { client: A, node: 2 },
                ],
            ]
            .concat(),
        );
        let grant = state.grants[0];
        assert_eq!((grant.token, grant.fence), (Token::new(A, 1), 2));
        assert_eq!((grant.t0, grant.valid_until), (3, 5));
        assert_eq!(state.nodes[0].counter, 2, "the write-back raised n0 to F");
    }

    #[test]
    fn grants_that_all_took_the_same_counter_grant_without_a_write_back() {
        let model = model();
        let state = after(
            &model,
            &[
                Action::Acquire { client: A, node: 0 },
                Action::Acquire { client: A, node: 1 },
            ],
        );
        let grant = state.grants[0];
        assert_eq!((grant.token, grant.fence), (Token::new(A, 1), 1));
        assert!(matches!(state.clients[0].phase, Phase::Holding { .. }));
    }

    #[test]
    fn a_write_back_completed_after_the_validity_ended_grants_nothing_and_releases() {
        let model = model();
        let state = after(
            &model,
            &[
                &OUT_OF_STEP[..],
                &[
                    Action::WriteBack { client: A, node: 0 },
                    Action::Tick,
                    Action::Tick,
                    Action::WriteBack { client: A, node: 2 },
                ],
            ]
            .concat(),
        );
        assert!(state.grants.is_empty());
        assert!(
            matches!(state.clients[0].phase, Phase::Releasing { pending } if pending.len() == 2)
        );
    }

    #[test]
    fn a_client_that_can_no_longer_win_releases_only_where_it_set_the_key() {
        let model = model();
        let state = after(
            &model,
            &[
                Action::Acquire { client: B, node: 0 },
                Action::Acquire { client: B, node: 1 },
                Action::Acquire { client: A, node: 2 },
                Action::Acquire { client: A, node: 0 },
                Action::Acquire { client: A, node: 1 },
            ],
        );
        assert_eq!(
            state.clients[0].phase,
            Phase::Releasing {
                pending: NodeSet::EMPTY.with(2)
            }
        );
    }

    #[test]
    fn a_node_that_lost_its_data_has_no_vote_until_the_guard_period_is_over() {
        let model = model();
        let restarted = after(
            &model,
            &[Action::Restart {
                node: 0,
                restart: Restart::WithoutData,
            }],
        );
        let refused = model
            .next_state(&restarted, Action::Acquire { client: A, node: 0 })
            .unwrap();
        assert_eq!(refused.nodes[0].key, None, "the guarded node was not asked");
        let guard_over = after(
            &model,
            &[
                Action::Restart {
                    node: 0,
                    restart: Restart::WithoutData,
                },
                Action::Tick,
                Action::Tick,
                Action::Tick,
                Action::Tick,
                Action::Acquire { client: A, node: 0 },
            ],
        );
        assert!(guard_over.nodes[0].key.is_some());
    }
}
