//! The named configurations the tests and the binary run: the protocol under its assumptions,
//! with and without nodes that lose their data, with counter recovery, and each assumption broken.

use crate::check::CheckReport;
use crate::config::Config;
use crate::properties::{
    DATA_LOSS_VOTES, FENCE_ORDER, GRANT_AFTER_EXPIRY, MUTUAL_EXCLUSION, SOME_GRANT,
    STALE_WRITE_REJECTED, STORE_ORDER,
};

/// A named configuration, with the safety properties it is expected to violate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scenario {
    /// Every node persists every write (a restart keeps its data); clocks within the drift.
    PersistentNodes,
    /// The stated assumptions: restart guard on, restarts with or without data, clocks within
    /// the drift.
    AssumptionsHold,
    /// As [`Scenario::AssumptionsHold`], plus counter recovery (in the library for volatile nodes,
    /// `fence_volatile_nodes`, where it runs within the acquisition).
    CounterRecovery,
    /// Restarts without data and the restart guard off.
    RestartWithoutGuard,
    /// One node's clock faster than the drift allows.
    FastClock,
}

impl Scenario {
    /// Every scenario, in the order the docs present them.
    pub const ALL: [Scenario; 5] = [
        Scenario::PersistentNodes,
        Scenario::AssumptionsHold,
        Scenario::CounterRecovery,
        Scenario::RestartWithoutGuard,
        Scenario::FastClock,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::PersistentNodes => "persistent-nodes",
            Scenario::AssumptionsHold => "assumptions-hold",
            Scenario::CounterRecovery => "counter-recovery",
            Scenario::RestartWithoutGuard => "restart-without-guard",
            Scenario::FastClock => "fast-clock",
        }
    }

    /// The scenario called `name`.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL
            .into_iter()
            .find(|scenario| scenario.name() == name)
    }

    /// One line on what the scenario is.
    pub fn summary(self) -> &'static str {
        match self {
            Scenario::PersistentNodes => {
                "restart guard on, restarts keep their data (AOF appendfsync always), every node \
                 clock fast by exactly the drift"
            }
            Scenario::AssumptionsHold => {
                "restart guard on, a restart with or without data, every node clock fast by \
                 exactly the drift"
            }
            Scenario::CounterRecovery => {
                "as assumptions-hold, and a node that lost its data takes the other nodes' \
                 largest counter before it votes again (the library's remedy for volatile nodes)"
            }
            Scenario::RestartWithoutGuard => {
                "a restart without data, restart guard off, exact clocks"
            }
            Scenario::FastClock => {
                "node n0's clock expires keys 2 ticks early while the client allows 1 tick of \
                 drift; no restarts"
            }
        }
    }

    /// Its configuration: 3 nodes, 2 clients, TTL 3 ticks and drift 1 tick throughout, time up
    /// to tick 6 (8 for persistent-nodes, 4 for counter-recovery).
    pub fn config(self) -> Config {
        let mut config = Config::assumptions_hold();
        match self {
            Scenario::PersistentNodes => {
                config.restart_without_data = false;
                config.horizon = 8;
            }
            Scenario::AssumptionsHold => {}
            Scenario::CounterRecovery => {
                // Recovery can run at any moment of the guard period, which more than doubles
                // the states per tick: two ticks less keep the check about as fast as
                // assumptions-hold's (`--horizon 6` checks the full range in about 3 times as
                // long). At tick 4 a node that lost its data at tick 0 votes again.
                config.counter_recovery = true;
                config.horizon = 4;
            }
            Scenario::RestartWithoutGuard => {
                config.restart_guard = false;
                config.restart_with_data = false;
                config.expiry_shortfall = vec![0, 0, 0];
            }
            Scenario::FastClock => {
                config.max_restarts = 0;
                config.expiry_shortfall = vec![2, 0, 0];
            }
        }
        config
    }

    /// The safety properties the checker is expected to find violated.
    pub fn expected_violations(self) -> &'static [&'static str] {
        match self {
            Scenario::PersistentNodes | Scenario::CounterRecovery => &[],
            Scenario::AssumptionsHold => &[FENCE_ORDER, STORE_ORDER],
            Scenario::RestartWithoutGuard | Scenario::FastClock => {
                &[MUTUAL_EXCLUSION, FENCE_ORDER, STORE_ORDER]
            }
        }
    }

    /// The examples the checker is expected to reach: the three the model always shows, and
    /// where data can be lost, a grant that counts a node which lost it.
    pub fn expected_examples(self) -> &'static [&'static str] {
        match self {
            Scenario::PersistentNodes | Scenario::FastClock => {
                &[SOME_GRANT, GRANT_AFTER_EXPIRY, STALE_WRITE_REJECTED]
            }
            Scenario::AssumptionsHold
            | Scenario::CounterRecovery
            | Scenario::RestartWithoutGuard => &[
                SOME_GRANT,
                GRANT_AFTER_EXPIRY,
                STALE_WRITE_REJECTED,
                DATA_LOSS_VOTES,
            ],
        }
    }

    /// Whether `report` came out as this scenario expects: exactly the expected violations, and
    /// every expected example reached.
    pub fn as_expected(self, report: &CheckReport) -> bool {
        report.violated() == self.expected_violations()
            && self
                .expected_examples()
                .iter()
                .all(|name| report.discovery(name).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_is_found_by_its_name_and_is_valid() {
        for scenario in Scenario::ALL {
            assert_eq!(Scenario::from_name(scenario.name()), Some(scenario));
            assert_eq!(scenario.config().validate(), Ok(()));
        }
        assert_eq!(Scenario::from_name("no-such-scenario"), None);
    }
}
