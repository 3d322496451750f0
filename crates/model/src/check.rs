//! Runs the exhaustive breadth-first check of one configuration and reports the state counts,
//! the time taken, and for each property whether the checker found a path to it.

use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, Model};

use crate::config::{Config, ConfigError};
use crate::model::FencingModel;
use crate::trace::Trace;

/// What the checker found for one property.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PropertyOutcome {
    /// The property's name (see [`crate::properties`]).
    pub name: &'static str,
    /// `true` for a safety property (`always`), `false` for an example (`sometimes`).
    pub safety: bool,
    /// The shortest path the checker found to a state that violates the safety property, or
    /// that shows the example; `None` if no reachable state does.
    pub discovery: Option<Trace>,
}

/// How a report prints one property: its kind (`always` or `sometimes`, padded to one width)
/// and the verdict, from whether it is a safety property and whether a path was found.
pub fn outcome_words(safety: bool, found: bool) -> (&'static str, &'static str) {
    let kind = if safety { "always   " } else { "sometimes" };
    let verdict = match (safety, found) {
        (true, false) => "holds",
        (true, true) => "VIOLATED",
        (false, true) => "reached",
        (false, false) => "not reached",
    };
    (kind, verdict)
}

impl PropertyOutcome {
    /// Whether the outcome is what a correct protocol gives: a safety property with no
    /// counterexample, or an example that was found.
    pub fn as_hoped(&self) -> bool {
        self.safety == self.discovery.is_none()
    }
}

/// The result of checking one configuration.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CheckReport {
    /// The configuration checked.
    pub config: Config,
    /// States generated, counting every visit of an already-known state.
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// The longest path explored, in states.
    pub max_depth: usize,
    /// Wall-clock time of the check.
    pub elapsed: Duration,
    /// Whether every reachable state was explored: the checker stops early once every property
    /// has a discovery (which only a configuration that breaks every safety property reaches).
    pub exhaustive: bool,
    /// One outcome per property, in [`crate::properties::all`]'s order.
    pub outcomes: Vec<PropertyOutcome>,
}

impl CheckReport {
    /// The outcome for the property `name`.
    pub fn outcome(&self, name: &str) -> Option<&PropertyOutcome> {
        self.outcomes.iter().find(|outcome| outcome.name == name)
    }

    /// The counterexample (or example) the checker found for `name`, if any.
    pub fn discovery(&self, name: &str) -> Option<&Trace> {
        self.outcome(name)?.discovery.as_ref()
    }

    /// The safety properties the checker found a counterexample for.
    pub fn violated(&self) -> Vec<&'static str> {
        self.outcomes
            .iter()
            .filter(|outcome| outcome.safety && outcome.discovery.is_some())
            .map(|outcome| outcome.name)
            .collect()
    }

    /// The examples the checker did not reach.
    pub fn unreached(&self) -> Vec<&'static str> {
        self.outcomes
            .iter()
            .filter(|outcome| !outcome.safety && outcome.discovery.is_none())
            .map(|outcome| outcome.name)
            .collect()
    }
}

/// Explores every state of `config`'s model reachable within its bounds, breadth first on one
/// thread, with symmetry reduction (see `symmetry.rs`). The run ends early only once every
/// property has a discovery (then [`CheckReport::exhaustive`] is false). Each discovery is a shortest path (see
/// [`FirstDiscoveries`](crate::discoveries::FirstDiscoveries)).
pub fn check(config: Config) -> Result<CheckReport, ConfigError> {
    let model = FencingModel::new(config)?.with_symmetry();
    let started = Instant::now();
    let checker = model.clone().checker().spawn_bfs().join();
    let elapsed = started.elapsed();
    let outcomes = model
        .properties()
        .into_iter()
        .map(|property| PropertyOutcome {
            name: property.name,
            safety: property.expectation == Expectation::Always,
            discovery: checker
                .discovery(property.name)
                .map(|path| Trace::of(&model, path)),
        })
        .collect();
    let exhaustive = checker.discoveries().len() < model.properties().len();
    Ok(CheckReport {
        exhaustive,
        config: model.config().clone(),
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        outcomes,
    })
}
