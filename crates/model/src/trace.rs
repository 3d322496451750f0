//! A path the checker found, as a numbered list of steps in words: what each client and node did
//! and what the protocol decided.

use std::fmt;

use stateright::{Model, Path};

use crate::action::{Action, Event};
use crate::ids::{Tick, client_name};
use crate::model::FencingModel;
use crate::node::{AcquireReply, Restart, WriteBackReply};
use crate::state::State;

/// One step of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceStep {
    /// The time when the step was taken.
    pub at: Tick,
    /// The action, as the model names it.
    pub action: Action,
    /// What happened, in words, in order.
    pub effects: Vec<String>,
}

/// A path from the initial state, in words, and where it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Trace {
    /// The steps, in order.
    pub steps: Vec<TraceStep>,
    /// The last state.
    pub end: State,
}

impl Trace {
    /// Describes `path`, a path of `model`. A path of a model with symmetry is in renamed terms:
    /// it is replayed without symmetry, at each step taking an action whose result is, renamed,
    /// the path's next state, so that every client and node keeps its name throughout.
    pub fn of(model: &FencingModel, path: Path<State, Action>) -> Trace {
        let path = path.into_vec();
        let mut steps = Vec::new();
        let mut now = model.initial_state();
        for pair in path.windows(2) {
            let [(_, Some(action)), (target, _)] = pair else {
                continue;
            };
            let Some((action, next, events)) = concrete_step(model, &now, *action, target) else {
                break;
            };
            steps.push(TraceStep {
                at: now.now,
                action,
                effects: events.iter().map(describe).collect(),
            });
            now = next;
        }
        Trace { steps, end: now }
    }
}

/// The step from `state` (not renamed) that leads, once renamed, to `target`: `action` itself
/// if it does, else the first action that does. With its result and events.
fn concrete_step(
    model: &FencingModel,
    state: &State,
    action: Action,
    target: &State,
) -> Option<(Action, State, Vec<Event>)> {
    let mut candidates = vec![action];
    if model.is_symmetric() {
        model.actions(state, &mut candidates);
    }
    candidates.into_iter().find_map(|candidate| {
        let (next, events) = model.step_with_events(state, candidate);
        let next = next?;
        (model.representative(next) == *target).then_some((candidate, next, events))
    })
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (number, step) in self.steps.iter().enumerate() {
            writeln!(
                f,
                "{:>3}. t={}  {}",
                number + 1,
                step.at,
                step.effects.join("; ")
            )?;
        }
        writeln!(f, "     at t={}:", self.end.now)?;
        for grant in &self.end.grants {
            let holding = self
                .end
                .clients
                .iter()
                .any(|client| self.end.held_grant(client) == Some(grant));
            let status = match (holding, self.end.now < grant.valid_until) {
                (true, true) => "holds it, valid",
                (true, false) => "holds it, validity over",
                (false, _) => "released",
            };
            writeln!(
                f,
                "       grant {} fence {}, T0 t={}, valid until t={}: {status}",
                grant.token, grant.fence, grant.t0, grant.valid_until
            )?;
        }
        let writes: Vec<String> = self
            .end
            .store
            .writes
            .iter()
            .filter_map(|write| {
                let grant = self.end.grants.get(usize::from(write.grant))?;
                let verdict = if write.accepted {
                    "accepted"
                } else {
                    "rejected"
                };
                Some(format!("{} fence {} {verdict}", grant.token, write.fence))
            })
            .collect();
        if !writes.is_empty() {
            writeln!(f, "       store writes in order: {}", writes.join(", "))?;
        }
        Ok(())
    }
}

/// One event in words.
fn describe(event: &Event) -> String {
    match *event {
        Event::TimeAdvanced { now } => format!("time advances to t={now}"),
        Event::KeyExpired { node, token } => format!("n{node}: {token}'s key expires"),
        Event::GuardLifted { node } => format!("n{node} votes again (restart guard over)"),
        Event::Restarted {
            node,
            restart: Restart::WithData,
            ..
        } => format!("n{node} crashes and restarts with its data (key and counter kept)"),
        Event::Restarted {
            node,
            restart: Restart::WithoutData,
            lost,
            recovering_until,
        } => {
            let key = lost
                .key
                .map_or("no key".to_owned(), |key| format!("{}'s key", key.token));
            let guard = recovering_until
                .map_or("no restart guard: it votes at once".to_owned(), |until| {
                    format!("restart guard: it votes from t={until}")
                });
            format!(
                "n{node} crashes and restarts WITHOUT its data: {key} and counter {} lost; {guard}",
                lost.counter
            )
        }
        Event::CounterRecovered {
            node,
            before,
            after,
        } => format!("n{node} recovers its counter from the other nodes: {before} → {after}"),
        Event::Began { token, t0 } => format!("{token} starts acquiring, T0 = {t0}"),
        Event::Recovering { token, node } => {
            format!("n{node} is recovering (restart guard): no vote for {token}")
        }
        Event::Acquired {
            token,
            node,
            reply: AcquireReply::Ours { counter },
            expires_at,
        } => format!(
            "n{node} sets {token}'s key (expires t={expires_at}), counter → {counter}: ours"
        ),
        Event::Acquired {
            token,
            node,
            reply: AcquireReply::Held { by },
            ..
        } => format!("n{node} holds {by}'s key: not ours for {token}"),
        Event::QuorumWon {
            token,
            ours,
            fence,
            agreed,
        } => {
            let then = if agreed {
                "every grant took it, no write-back"
            } else {
                "writing it back"
            };
            format!("{token} won on {ours}: fence F = {fence}, {then}")
        }
        Event::QuorumLost { token } => format!("{token} cannot reach a quorum: lost"),
        Event::WroteBack {
            token,
            node,
            reply: WriteBackReply::Confirmed { before, after },
        } => format!("n{node} confirms {token}: counter {before} → {after}"),
        Event::WroteBack {
            token,
            node,
            reply: WriteBackReply::NotOurs,
        } => format!("n{node} no longer holds {token}'s key: not ours"),
        Event::Granted { grant } => format!(
            "{} HOLDS the lock: fence {}, valid until t={}",
            grant.token, grant.fence, grant.valid_until
        ),
        Event::GrantTooLate { token, valid_until } => {
            format!("{token}'s validity ended at t={valid_until}: no grant")
        }
        Event::WriteBackLost { token } => {
            format!("{token}'s write-back cannot reach a majority: no grant")
        }
        Event::GaveUp { token } => format!("{token} stops waiting (timeout)"),
        Event::Wrote {
            token,
            fence,
            stale,
            accepted,
            last_before,
        } => {
            let when = if stale {
                "LATE, its validity over"
            } else {
                "while valid"
            };
            let verdict = if accepted { "accepted" } else { "REJECTED" };
            let last = last_before.map_or("none".to_owned(), |last| last.to_string());
            format!("{token} writes with fence {fence} {when}: store (last fence {last}) {verdict}")
        }
        Event::ReleaseStarted { token } => format!("{token} releases"),
        Event::Released {
            token,
            node,
            deleted: true,
        } => format!("n{node} deletes {token}'s key"),
        Event::Released {
            token,
            node,
            deleted: false,
        } => format!("n{node} has no key of {token} to delete"),
        Event::Finished { token } => {
            format!("client {} is done", client_name(token.client()))
        }
    }
}
