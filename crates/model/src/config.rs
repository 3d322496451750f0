//! The knobs of one model: sizes, timing, which faults the environment may inject, and how many
//! actions each client gets.

use std::error::Error;
use std::fmt;

use crate::ids::{MAX_CLIENTS, MAX_GRANTS, MAX_NODES, MAX_WRITES, Tick};

/// One model's parameters. Start from [`Config::assumptions_hold`] and change fields.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// How many independent masters (at most [`MAX_NODES`]).
    pub nodes: usize,
    /// How many clients compete for the one resource (at most [`MAX_CLIENTS`]).
    pub clients: usize,
    /// The lock's TTL, in ticks.
    pub ttl: Tick,
    /// The drift allowance the client subtracts from the validity, in ticks.
    pub drift: Tick,
    /// The last tick time may reach.
    pub horizon: Tick,
    /// Whether clients ignore a node that restarted without its data until `ttl + drift` after
    /// the restart.
    pub restart_guard: bool,
    /// How many crash-restarts the environment may inject in one run, over all nodes.
    pub max_restarts: u8,
    /// Whether a restart may keep the node's data (key and counter).
    pub restart_with_data: bool,
    /// Whether a restart may lose the node's data.
    pub restart_without_data: bool,
    /// Per node: how many ticks earlier than `ttl` its clock expires a key (a clock running
    /// fast). Within the assumptions it is at most `drift`. Missing entries are 0.
    pub expiry_shortfall: Vec<Tick>,
    /// How many acquisitions each client may start.
    pub acquisitions_per_client: u8,
    /// How many writes each holder sends to the store (while valid, or late after a pause).
    pub writes_per_grant: u8,
    /// Whether a client may give up on an acquisition or write-back at any point (a timeout)
    /// instead of waiting for every reply.
    pub give_up: bool,
    /// Recovery of the counter a restart without data loses: such a node does not vote until its
    /// counter has been raised to the largest counter of all the other nodes (one environment
    /// step, [`Action::RecoverCounter`](crate::action::Action::RecoverCounter)). The library does
    /// it in the client, within the acquisition (`fence_volatile_nodes`, docs/fencing.md).
    pub counter_recovery: bool,
}

impl Config {
    /// The assumptions of the protocol hold: 3 nodes, 2 clients, TTL 3 and drift 1 tick, time
    /// up to tick 6, the restart guard on, one restart with or without data, and every node's
    /// clock fast by exactly the drift (the most the assumptions allow).
    pub fn assumptions_hold() -> Config {
        Config {
            nodes: 3,
            clients: 2,
            ttl: 3,
            drift: 1,
            horizon: 6,
            restart_guard: true,
            max_restarts: 1,
            restart_with_data: true,
            restart_without_data: true,
            expiry_shortfall: vec![1, 1, 1],
            acquisitions_per_client: 1,
            writes_per_grant: 1,
            give_up: false,
            counter_recovery: false,
        }
    }

    /// The majority, as the library computes it (`src/rules/quorum.rs`).
    pub fn quorum(&self) -> usize {
        quorumlock::model_rules::majority(self.nodes)
    }

    /// How long after it is set `node`'s clock expires a key (at least one tick).
    pub fn key_lifetime(&self, node: usize) -> Tick {
        let shortfall = self.expiry_shortfall.get(node).copied().unwrap_or(0);
        self.ttl.saturating_sub(shortfall).max(1)
    }

    /// How long after a restart without data the restart guard keeps the node out of the vote.
    pub fn guard_period(&self) -> Tick {
        self.ttl.saturating_add(self.drift)
    }

    /// Checks that the model can be built from this configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.nodes == 0 || self.nodes > MAX_NODES {
            return Err(ConfigError::Nodes(self.nodes));
        }
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return Err(ConfigError::Clients(self.clients));
        }
        if self.ttl == 0 {
            return Err(ConfigError::ZeroTtl);
        }
        if self.expiry_shortfall.len() > self.nodes {
            return Err(ConfigError::ShortfallNodes(self.expiry_shortfall.len()));
        }
        let grants = self
            .clients
            .saturating_mul(usize::from(self.acquisitions_per_client));
        let writes = grants.saturating_mul(usize::from(self.writes_per_grant));
        if grants > MAX_GRANTS || writes > MAX_WRITES {
            return Err(ConfigError::TooManyActions { grants, writes });
        }
        Ok(())
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let restarts = match (self.restart_with_data, self.restart_without_data) {
            (true, true) => "with or without data",
            (true, false) => "with data",
            (false, true) => "without data",
            (false, false) => "of no kind",
        };
        let lifetimes: Vec<String> = (0..self.nodes)
            .map(|node| self.key_lifetime(node).to_string())
            .collect();
        write!(
            f,
            "{} nodes, {} clients, TTL {} ticks, drift {}, time 0..={}; up to {} restart(s) {}, \
             restart guard {}{}; key lifetime per node [{}]; {} acquisition(s) per client, {} \
             write(s) per grant{}",
            self.nodes,
            self.clients,
            self.ttl,
            self.drift,
            self.horizon,
            self.max_restarts,
            restarts,
            if self.restart_guard { "on" } else { "off" },
            if self.counter_recovery {
                ", counter recovery on"
            } else {
                ""
            },
            lifetimes.join(","),
            self.acquisitions_per_client,
            self.writes_per_grant,
            if self.give_up {
                ", clients may give up"
            } else {
                ""
            },
        )
    }
}

/// A configuration the model cannot be built from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// Nodes must be between 1 and [`MAX_NODES`].
    Nodes(usize),
    /// Clients must be between 1 and [`MAX_CLIENTS`].
    Clients(usize),
    /// The TTL must be at least one tick.
    ZeroTtl,
    /// `expiry_shortfall` names more nodes than there are.
    ShortfallNodes(usize),
    /// More grants (clients × acquisitions per client) than [`MAX_GRANTS`], or more writes
    /// (grants × writes per grant) than [`MAX_WRITES`].
    TooManyActions {
        /// Clients × acquisitions per client.
        grants: usize,
        /// Grants × writes per grant.
        writes: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Nodes(n) => write!(f, "{n} nodes: the model takes 1 to {MAX_NODES}"),
            ConfigError::Clients(n) => {
                write!(f, "{n} clients: the model takes 1 to {MAX_CLIENTS}")
            }
            ConfigError::ZeroTtl => f.write_str("the TTL must be at least one tick"),
            ConfigError::ShortfallNodes(n) => {
                write!(
                    f,
                    "expiry_shortfall has {n} entries, more than there are nodes"
                )
            }
            ConfigError::TooManyActions { grants, writes } => write!(
                f,
                "up to {grants} grants and {writes} store writes: the model holds at most \
                 {MAX_GRANTS} and {MAX_WRITES}"
            ),
        }
    }
}

impl Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_configuration_is_valid_and_its_numbers_follow_from_it() {
        let mut config = Config::assumptions_hold();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.quorum(), 2);
        assert_eq!(config.key_lifetime(0), 2);
        config.expiry_shortfall = vec![0];
        assert_eq!(config.key_lifetime(0), 3);
        assert_eq!(config.key_lifetime(2), 3);
        assert_eq!(config.guard_period(), 4);
    }

    #[test]
    fn invalid_configurations_are_refused() {
        let mut config = Config::assumptions_hold();
        config.nodes = 9;
        assert_eq!(config.validate(), Err(ConfigError::Nodes(9)));
        config.nodes = 3;
        config.acquisitions_per_client = 5;
        assert_eq!(
            config.validate(),
            Err(ConfigError::TooManyActions {
                grants: 10,
                writes: 10
            })
        );
        config.acquisitions_per_client = 1;
        config.nodes = 2;
        assert_eq!(config.validate(), Err(ConfigError::ShortfallNodes(3)));
        config.nodes = 3;
        config.ttl = 0;
        assert_eq!(config.validate(), Err(ConfigError::ZeroTtl));
    }
}
