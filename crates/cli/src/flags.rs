//! What every subcommand's flags share: one syntax for durations (`10s`, `500ms`, `2m`,
//! `1m 30s`, parsed by humantime), node URLs from `--nodes` or [`NODES_ENV`], and the key
//! prefixes a lock was made with ([`Prefixes`]).

use std::time::Duration;

use quorumlock::{Lock, LockOptions};

/// The environment variable `--nodes` falls back to: comma-separated node URLs.
pub(crate) const NODES_ENV: &str = "QUORUMLOCK_NODES";

/// Parses a duration flag: a number and a unit, e.g. `10s`, `500ms`, `2m`, `1m 30s`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{e}; durations look like 10s, 500ms or 2m"))
}

/// The key prefixes of `run`, `elect` and `status`: a lock's keys are found only under the
/// prefixes it was made with, so every tool that meets the lock must be given the same ones.
#[derive(clap::Args, Debug)]
pub(crate) struct Prefixes {
    /// The lock keys' prefix (`LockOptions::key_prefix`; default `quorumlock:`).
    #[arg(long, value_name = "PREFIX")]
    key_prefix: Option<String>,
    /// The fence counters' prefix (`LockOptions::fence_prefix`; default `quorumlock-fence:`).
    #[arg(long, value_name = "PREFIX")]
    fence_prefix: Option<String>,
}

impl Prefixes {
    /// `options` with the prefixes given (the defaults where none is).
    pub(crate) fn apply(self, mut options: LockOptions) -> LockOptions {
        if let Some(prefix) = self.key_prefix {
            options = options.key_prefix(prefix);
        }
        if let Some(prefix) = self.fence_prefix {
            options = options.fence_prefix(prefix);
        }
        options
    }
}

/// The lock over the nodes `--nodes` named (an empty entry, as an empty [`NODES_ENV`] or a
/// trailing comma gives, names none); the message when there is none or the options fail.
pub(crate) fn lock_over(mut nodes: Vec<String>, options: LockOptions) -> Result<Lock, String> {
    nodes.retain(|url| !url.trim().is_empty());
    if nodes.is_empty() {
        return Err(format!("no nodes: give --nodes URL,... or set {NODES_ENV}"));
    }
    Lock::new(nodes, options).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert!(duration("3").is_err());
        assert!(duration("x").is_err());
    }
}
