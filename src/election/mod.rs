//! Leader election over a lock's nodes ([`Election`]): a leader is the holder of the election's
//! lock, its term the quorum's fence of that hold, and its value a record it publishes beside
//! the lock key on a quorum (`node/leader.rs`, read by `rules/leader.rs`). Campaigning is
//! waiting for the lock (woken by a release or the key's expiry, never polling); leading is a
//! kept lease with a lost signal; resigning is releasing it. Here: the election and its
//! checks; `leadership.rs` the campaign and the leader's side; `observe.rs` the followers'.

mod leadership;
mod observe;
mod options;

use std::sync::Arc;

pub use leadership::Leadership;
pub use observe::{Leader, Observer};
pub use options::ElectionOptions;

use crate::error::{ConfigError, Error};
use crate::lock::Lock;
use crate::rules::leader::record_key;

/// An election among the processes that campaign for the same name over the same nodes: at most
/// one leader at a time, each with a term larger than every earlier leader's.
///
/// The lock must have fencing on ([`LockOptions::fencing`](crate::LockOptions::fencing)): a
/// term is the fence of the leader's hold, which grows over a quorum, so a deposed leader's
/// writes can be refused by a store that checks terms ([`FencedWrite`](crate::FencedWrite),
/// `docs/fencing.md`).
///
/// ```no_run
/// # async fn run() -> Result<(), quorumlock::Error> {
/// use quorumlock::{Election, ElectionOptions, Lock, LockOptions};
///
/// // A TTL of at least the lease duration (15 s by default), which the restart guard covers.
/// let lock = Lock::new(
///     ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"],
///     LockOptions::new().ttl(std::time::Duration::from_secs(15)).fencing(true),
/// )?;
/// let election = Election::new(&lock, "scheduler", ElectionOptions::new())?;
/// // Waits to be elected, then runs the work until it ends or leadership is lost.
/// election
///     .lead("10.0.0.7:8080", async |lease| {
///         let term = lease.fence();
///         // ... lead, passing `term` with every write ...
///         # let _ = term;
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    lock: Lock,
    name: Arc<[u8]>,
    key: Arc<[u8]>,
    record_key: Arc<[u8]>,
    fence_key: Arc<[u8]>,
    options: ElectionOptions,
}

impl Election {
    /// An election named `name` over `lock`'s nodes (its lock key is the name's, so no lock of
    /// the same name may be taken beside it).
    ///
    /// # Errors
    ///
    /// [`Error::Config`]: [`ConfigError::ElectionWithoutFencing`] for a lock without fencing,
    /// [`ConfigError::InvalidElection`] for settings out of order,
    /// [`ConfigError::TtlAboveMaxTtl`] for a lease duration above the lock's
    /// [`max_ttl`](crate::LockOptions::max_ttl) (by default its TTL), and the name's refusals
    /// (empty).
    pub fn new(
        lock: &Lock,
        name: impl AsRef<[u8]>,
        options: ElectionOptions,
    ) -> Result<Election, Error> {
        let settings = &lock.node_set().settings;
        if settings.fencing.is_none() {
            return Err(ConfigError::ElectionWithoutFencing.into());
        }
        if name.as_ref().is_empty() {
            return Err(ConfigError::EmptyResource.into());
        }
        options.check()?;
        if options.lease_duration > settings.max_ttl {
            return Err(ConfigError::TtlAboveMaxTtl {
                ttl: options.lease_duration,
                max_ttl: settings.max_ttl,
            }
            .into());
        }
        let key = settings.lock_key(name.as_ref())?;
        Ok(Election {
            lock: lock.clone(),
            name: Arc::from(name.as_ref()),
            record_key: record_key(&key),
            fence_key: settings.fence_key(name.as_ref())?,
            key,
            options,
        })
    }

    /// The election's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The election's timing.
    pub fn options(&self) -> &ElectionOptions {
        &self.options
    }
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("name", &String::from_utf8_lossy(&self.name))
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}
