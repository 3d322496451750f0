//! The lock's other protocols, each a small model of its own beside the fencing model: the
//! batched keep-alive that writes a missing key back, waiting woken on release, failover
//! detection (`lease.rs`, one model with each protocol's assumption as a parameter), sets of
//! resources (`sets.rs`), semaphores (`semaphore.rs`), the read-write lock's design
//! (`rwlock.rs`), and leader election's terms (`election.rs`). Each scenario names what it assumes; for every protocol one scenario
//! keeps its assumptions and holds, and one drops an assumption and finds a counterexample.
//!
//! These models are smaller than the fencing model: no symmetry reduction, and a counterexample
//! is the list of actions that leads to it. The quorum tally and the validity are the library's
//! (`quorumlock::model_rules`).

pub mod election;
pub mod lease;
pub mod rwlock;
pub mod semaphore;
pub mod sets;

use std::fmt::{self, Debug, Display};
use std::hash::Hash;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, Model};

use crate::check::outcome_words;

/// A named configuration of one of the protocol models, with the safety properties it is
/// expected to violate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// The keep-alive with its write-back of missing keys, only where the node may vote.
    KeepAlive,
    /// As [`Protocol::KeepAlive`], the write-back ignoring that the node sits out.
    KeepAliveFillUnguarded,
    /// Waiters woken on release, a wake-up only a hint: the quorum decides.
    Waiting,
    /// As [`Protocol::Waiting`], a woken waiter taking the wake-up for the lock.
    WaitingWakeIsGrant,
    /// A failover replaces a node's server; the lock sees the new server and it sits out.
    Failover,
    /// As [`Protocol::Failover`], failover detection off: the new server votes at once.
    FailoverUndetected,
    /// Sets of resources, each node's step atomic (all keys or none).
    Sets,
    /// As [`Protocol::Sets`], each node's step split into a check and a write.
    SetsSplitStep,
    /// A semaphore's permits as slots, each won by the quorum rule.
    Semaphore,
    /// A semaphore as a counter of holders per node, won on a majority.
    SemaphoreCounter,
    /// A read-write lock: writer, readers and a writer-waiting marker per node, each side won by
    /// the quorum rule; a downgrading writer is a reader from the moment it downgrades.
    RwLock,
    /// As [`Protocol::RwLock`], a downgrading writer exclusive until a majority converted.
    RwLockLateDowngrade,
    /// As [`Protocol::RwLock`], a reader that looks first and adds itself in a later step.
    RwLockReadChecksFirst,
    /// Leader election: a leader holds the lock on a majority, its term the highest counter of
    /// the granting nodes, written back before it leads.
    Election,
    /// As [`Protocol::Election`], the term taken from one granting node.
    ElectionTermFromOneNode,
}

impl Protocol {
    /// Every protocol scenario, in the order the docs present them.
    pub const ALL: [Protocol; 15] = [
        Protocol::KeepAlive,
        Protocol::KeepAliveFillUnguarded,
        Protocol::Waiting,
        Protocol::WaitingWakeIsGrant,
        Protocol::Failover,
        Protocol::FailoverUndetected,
        Protocol::Sets,
        Protocol::SetsSplitStep,
        Protocol::Semaphore,
        Protocol::SemaphoreCounter,
        Protocol::RwLock,
        Protocol::RwLockLateDowngrade,
        Protocol::RwLockReadChecksFirst,
        Protocol::Election,
        Protocol::ElectionTermFromOneNode,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::KeepAlive => "keep-alive",
            Protocol::KeepAliveFillUnguarded => "keep-alive-fill-unguarded",
            Protocol::Waiting => "waiting",
            Protocol::WaitingWakeIsGrant => "waiting-wake-is-grant",
            Protocol::Failover => "failover",
            Protocol::FailoverUndetected => "failover-undetected",
            Protocol::Sets => "sets",
            Protocol::SetsSplitStep => "sets-split-step",
            Protocol::Semaphore => "semaphore",
            Protocol::SemaphoreCounter => "semaphore-counter",
            Protocol::RwLock => "rwlock",
            Protocol::RwLockLateDowngrade => "rwlock-late-downgrade",
            Protocol::RwLockReadChecksFirst => "rwlock-read-checks-first",
            Protocol::Election => "election",
            Protocol::ElectionTermFromOneNode => "election-term-from-one-node",
        }
    }

    /// The scenario called `name`.
    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL
            .into_iter()
            .find(|protocol| protocol.name() == name)
    }

    /// One line on what the scenario is.
    pub fn summary(self) -> &'static str {
        match self {
            Protocol::KeepAlive => {
                "keep-alive rounds renew our keys and write a missing one back where the node \
                 may vote; a node restarts without its data and sits out for the TTL and drift"
            }
            Protocol::KeepAliveFillUnguarded => {
                "as keep-alive, but the write-back of a missing key ignores the sit-out \
                 (no identity or restart-guard check)"
            }
            Protocol::Waiting => {
                "a client that lost waits for a release's wake-up (or times out) and then tries \
                 again by the quorum rule; wake-ups may come late or for a lock already taken"
            }
            Protocol::WaitingWakeIsGrant => "as waiting, but a woken waiter takes the lock",
            Protocol::Failover => {
                "a failover puts another server at a node's address, with or without the last \
                 key; the lock sees a different server and it sits out for the TTL and drift"
            }
            Protocol::FailoverUndetected => {
                "as failover, with failover detection off: the new server votes at once"
            }
            Protocol::Sets => {
                "three clients lock {x,y}, {y} and {x}; each node takes all of a request's keys \
                 or none in one step, and votes only when it took them all"
            }
            Protocol::SetsSplitStep => {
                "as sets, but each node first checks the keys free and writes them in a later \
                 step"
            }
            Protocol::Semaphore => {
                "three clients, two permits as two slots, each a lock won by the quorum rule; a \
                 client tries the slots from any one onwards, releasing a lost one behind it"
            }
            Protocol::SemaphoreCounter => {
                "three clients, two permits as a counter of holders on each node, counted while \
                 below two; a client holds once a majority counted it"
            }
            Protocol::RwLock => {
                "two writers (one may downgrade) and a reader; each node keeps a writer, readers \
                 and a writer waiting, and answers in one step (a reader adds itself, and \
                 looks in a later step); each side won by the quorum rule"
            }
            Protocol::RwLockLateDowngrade => {
                "as rwlock, but a downgrading writer takes itself for the writer until its \
                 downgrade has landed on a majority"
            }
            Protocol::RwLockReadChecksFirst => {
                "as rwlock, but a reader looks first and adds itself in a later step"
            }
            Protocol::Election => {
                "three candidates; a leader holds the lock on a majority, its term the highest \
                 fence counter of the nodes that granted, written back with the leader record \
                 before it leads unless they agree; late requests land after the decision; a \
                 reader names a leader from a quorum's records; it resigns"
            }
            Protocol::ElectionTermFromOneNode => {
                "as election, but the term is the counter of the first node that granted"
            }
        }
    }

    /// The safety properties this scenario is expected to violate.
    pub fn expected_violations(self) -> &'static [&'static str] {
        match self {
            Protocol::KeepAlive
            | Protocol::Waiting
            | Protocol::Failover
            | Protocol::Sets
            | Protocol::Semaphore
            | Protocol::RwLock
            | Protocol::Election => &[],
            Protocol::KeepAliveFillUnguarded | Protocol::FailoverUndetected => {
                &[lease::MUTUAL_EXCLUSION]
            }
            Protocol::WaitingWakeIsGrant => &[lease::MUTUAL_EXCLUSION, lease::QUORUM_BACKED],
            Protocol::SetsSplitStep => &[sets::EXCLUSION],
            Protocol::SemaphoreCounter => &[semaphore::PERMITS_BOUND],
            Protocol::RwLockLateDowngrade | Protocol::RwLockReadChecksFirst => {
                &[rwlock::EXCLUSIVE_WRITER]
            }
            Protocol::ElectionTermFromOneNode => &[election::TERMS_GROW, election::LEADER_READ],
        }
    }

    /// Checks the scenario exhaustively.
    pub fn check(self) -> ProtocolReport {
        match self {
            Protocol::Sets => explore(self, sets::SetsModel::new(false)),
            Protocol::SetsSplitStep => explore(self, sets::SetsModel::new(true)),
            Protocol::Semaphore => explore(self, semaphore::SemaphoreModel::new(false)),
            Protocol::SemaphoreCounter => explore(self, semaphore::SemaphoreModel::new(true)),
            Protocol::RwLock => explore(self, rwlock::RwLockModel::new(rwlock::Variant::Design)),
            Protocol::RwLockLateDowngrade => explore(
                self,
                rwlock::RwLockModel::new(rwlock::Variant::LateDowngrade),
            ),
            Protocol::RwLockReadChecksFirst => explore(
                self,
                rwlock::RwLockModel::new(rwlock::Variant::ReadChecksFirst),
            ),
            Protocol::Election => explore(self, election::ElectionModel::new(false)),
            Protocol::ElectionTermFromOneNode => explore(self, election::ElectionModel::new(true)),
            lease => explore(self, lease::LeaseModel::new(lease::LeaseConfig::of(lease))),
        }
    }

    /// Whether `report` is what this scenario expects: exactly the expected violations, and
    /// every example reached.
    pub fn as_expected(self, report: &ProtocolReport) -> bool {
        let mut violated = report.violated();
        violated.sort_unstable();
        let mut expected = self.expected_violations().to_vec();
        expected.sort_unstable();
        violated == expected && report.unreached().is_empty()
    }
}

/// What the checker found for one property of a protocol model.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProtocolOutcome {
    /// The property's name.
    pub name: &'static str,
    /// `true` for a safety property (`always`), `false` for an example (`sometimes`).
    pub safety: bool,
    /// The shortest path found to a counterexample (or to the example), one line per action,
    /// and the state it ends in.
    pub path: Option<(Vec<String>, String)>,
}

/// The result of checking one protocol scenario.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProtocolReport {
    /// The scenario checked.
    pub protocol: Protocol,
    /// The model's bounds, in a line.
    pub bounds: String,
    /// States generated.
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// Wall-clock time of the check.
    pub elapsed: Duration,
    /// Whether every reachable state was explored (the checker stops once every property has
    /// a discovery).
    pub exhaustive: bool,
    /// One outcome per property.
    pub outcomes: Vec<ProtocolOutcome>,
}

impl ProtocolReport {
    /// The safety properties with a counterexample.
    pub fn violated(&self) -> Vec<&'static str> {
        self.outcomes
            .iter()
            .filter(|outcome| outcome.safety && outcome.path.is_some())
            .map(|outcome| outcome.name)
            .collect()
    }

    /// The examples not reached.
    pub fn unreached(&self) -> Vec<&'static str> {
        self.outcomes
            .iter()
            .filter(|outcome| !outcome.safety && outcome.path.is_none())
            .map(|outcome| outcome.name)
            .collect()
    }
}

impl Display for ProtocolReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let protocol = self.protocol;
        writeln!(f, "scenario {}: {}", protocol.name(), protocol.summary())?;
        writeln!(f, "model: {}", self.bounds)?;
        let extent = if self.exhaustive {
            "every reachable state"
        } else {
            "until every property had a discovery"
        };
        writeln!(
            f,
            "explored {extent}: {} distinct states ({} generated) in {:.2} s\n",
            self.unique_states,
            self.states,
            self.elapsed.as_secs_f64()
        )?;
        for outcome in &self.outcomes {
            let (kind, verdict) = outcome_words(outcome.safety, outcome.path.is_some());
            writeln!(f, "  {kind}  {verdict:<11}  {}", outcome.name)?;
        }
        writeln!(
            f,
            "\nas expected for {}: {}",
            protocol.name(),
            if protocol.as_expected(self) {
                "yes"
            } else {
                "NO"
            }
        )?;
        for outcome in self.outcomes.iter().filter(|outcome| outcome.safety) {
            let Some((actions, last)) = &outcome.path else {
                continue;
            };
            writeln!(
                f,
                "\ncounterexample to \"{}\" (a shortest one, {} steps):",
                outcome.name,
                actions.len()
            )?;
            for (number, action) in actions.iter().enumerate() {
                writeln!(f, "  {:>2}. {action}", number + 1)?;
            }
            writeln!(f, "     ending in: {last}")?;
        }
        Ok(())
    }
}

/// A protocol model: a stateright model that says its bounds in a line.
pub trait Bounds {
    /// The model's bounds and parameters, in a line.
    fn bounds(&self) -> String;
}

/// Explores every reachable state of `model` breadth first on one thread (the properties report
/// only their first discovery, so each path is a shortest one).
fn explore<M>(protocol: Protocol, model: M) -> ProtocolReport
where
    M: Model + Bounds + Clone + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Display + Debug + PartialEq + Send + Sync + 'static,
{
    let started = Instant::now();
    let checker = model.clone().checker().spawn_bfs().join();
    let elapsed = started.elapsed();
    let properties = model.properties();
    let outcomes = properties
        .iter()
        .map(|property| ProtocolOutcome {
            name: property.name,
            safety: property.expectation == Expectation::Always,
            path: checker.discovery(property.name).map(|path| {
                let last = format!("{:?}", path.last_state());
                let actions = path.into_actions();
                (actions.iter().map(ToString::to_string).collect(), last)
            }),
        })
        .collect();
    ProtocolReport {
        protocol,
        bounds: model.bounds(),
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        elapsed,
        exhaustive: checker.discoveries().len() < properties.len(),
        outcomes,
    }
}
