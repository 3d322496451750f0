//! [`Backend`]: where a cluster's nodes run.
//!
//! Only the type is here, at the bottom of the crate, because
//! [`HarnessError`](crate::HarnessError) holds one (`BackendNotCompiled`). Reading it from
//! `QUORUMLOCK_BACKEND` ([`Backend::from_env`], and its `FromStr`) can fail with a
//! `HarnessError`, so that lives with the other cluster options, above `error.rs`.

/// Where a [`TestCluster`](crate::TestCluster)'s nodes run.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// `redis-server` processes started by the harness (the default).
    #[default]
    Process,
    /// Docker containers, one per node, published on `127.0.0.1`; see the `docker` module
    /// (cargo feature `docker`).
    Docker,
}
