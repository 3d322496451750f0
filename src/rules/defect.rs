//! Deliberate defects in the lock's decision code, for the chaos tooling's mutation score: a
//! lock built with [`LockOptions::defect`](crate::LockOptions::defect) breaks one rule on
//! purpose, so that a chaos run can show whether its scenarios catch a broken lock.
//!
//! Compiled only with the test-only cargo feature `chaos-defects` and hidden from the docs;
//! without it nothing of this exists. Each defect lives next to the rule it breaks: the validity
//! (`validity.rs`, through `Settings::validity`), the quorum (`quorum.rs`, used when the options
//! are validated), the release after a failed attempt (`lock.rs`), the extension's quorum
//! (`guard.rs`), a node's gates in front of a vote (`node/vote.rs`: the restart guard's
//! decision and a replacement's sit-out), a semaphore's slots (`semaphore/mod.rs`), and a
//! read-write lock's writer check (`acquisition.rs`).

use std::fmt;
use std::str::FromStr;

/// One deliberate defect in the lock's decision code. **Test-only**: every defect breaks a
/// promise of the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Defect {
    /// `validity-plus-5pct`: the validity is overstated by 5 % of the TTL.
    ValidityPlus5Pct,
    /// `drift-ignored`: the clock drift is not subtracted from the validity.
    DriftIgnored,
    /// `quorum-half`: the quorum is N/2 (2 of 5) instead of N/2 + 1.
    QuorumHalf,
    /// `no-release-on-failure`: a failed acquisition does not release the nodes it won.
    NoReleaseOnFailure,
    /// `extend-minority`: an extension is accepted when a single node extended.
    ExtendMinority,
    /// `restart-guard-ignored`: the restart guard's decision is forced to "may vote now": a
    /// node restarted without persisting every write votes at once.
    RestartGuardIgnored,
    /// `replacement-ignored`: a server that replaced the known one at a node's address votes at
    /// once instead of sitting out.
    ReplacementIgnored,
    /// `slot-past-permits`: a semaphore of k permits has k + 1 slots, so k + 1 can hold at once.
    SlotPastPermits,
    /// `writer-ignores-readers`: a read-write lock's writer takes its key as a plain lock does,
    /// without looking at the readers, so a writer can hold beside readers.
    WriterIgnoresReaders,
}

impl Defect {
    /// Every defect, in the order a mutation score runs them.
    pub const ALL: [Defect; 9] = [
        Defect::ValidityPlus5Pct,
        Defect::DriftIgnored,
        Defect::QuorumHalf,
        Defect::NoReleaseOnFailure,
        Defect::ExtendMinority,
        Defect::RestartGuardIgnored,
        Defect::ReplacementIgnored,
        Defect::SlotPastPermits,
        Defect::WriterIgnoresReaders,
    ];

    /// The defect's name on the command line, e.g. `quorum-half`.
    pub fn name(self) -> &'static str {
        match self {
            Defect::ValidityPlus5Pct => "validity-plus-5pct",
            Defect::DriftIgnored => "drift-ignored",
            Defect::QuorumHalf => "quorum-half",
            Defect::NoReleaseOnFailure => "no-release-on-failure",
            Defect::ExtendMinority => "extend-minority",
            Defect::RestartGuardIgnored => "restart-guard-ignored",
            Defect::ReplacementIgnored => "replacement-ignored",
            Defect::SlotPastPermits => "slot-past-permits",
            Defect::WriterIgnoresReaders => "writer-ignores-readers",
        }
    }

    /// Whether the defect can let two holders in at once. `no-release-on-failure` cannot: keys
    /// it leaves behind only keep others out until they expire (it costs availability).
    pub fn breaks_exclusion(self) -> bool {
        self != Defect::NoReleaseOnFailure
    }
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A defect name that is not one of [`Defect::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
#[error("unknown defect {0:?}; known: {known}", known = Defect::ALL.map(Defect::name).join(", "))]
pub struct UnknownDefect(
    /// The name given.
    pub String,
);

impl FromStr for Defect {
    type Err = UnknownDefect;

    fn from_str(name: &str) -> Result<Defect, UnknownDefect> {
        Defect::ALL
            .into_iter()
            .find(|defect| defect.name() == name)
            .ok_or_else(|| UnknownDefect(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for defect in Defect::ALL {
            assert_eq!(defect.name().parse::<Defect>(), Ok(defect));
        }
        assert!("nope".parse::<Defect>().is_err());
    }
}
