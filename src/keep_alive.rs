//! The keep-alive: a [`Guard`] handed to its lock's keeper (`round/keeper.rs`), which extends
//! it with every other lease the lock keeps, in batches, on the quorum rule (every third of the
//! TTL by default, see `renewal.rs`), and says through a [`Lease`] whether the lock is still held
//! and, once it is not, why ([`Lost`]). [`Lock::with_lock`](crate::Lock::with_lock) runs the caller's work under such a
//! lease and drops it the moment the lock is lost.
//!
//! Life cycle: [`Guard::keep_alive`] registers the lease with the keeper, which owns the guard
//! from then on. Each batch that reaches a quorum for it moves the lease's deadline; a failed
//! extension is tried again a quarter interval later while the lease is still trusted. It ends
//! in one of two ways. Released ([`KeptGuard::release`], or the [`KeptGuard`] dropped): it leaves
//! the keeper and is released. Lost (a majority answered that our key is gone; the deadline came
//! without a successful extension; `max_hold` reached): the keeper marks the lease lost (from
//! then on [`Lease::is_valid`] is false and [`Lease::lost`] completes), then releases whatever
//! keys of ours are left.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::runtime::Handle;

use crate::custody::Custody;
use crate::error::{ConfigError, Error, Lost};
use crate::guard::{Guard, ReleaseReport};
use crate::lease::{Lease, State};
use crate::outcome::NodeReply;
use crate::round::keep_batch::Kept;
use crate::round::keeper::Keeper;
use crate::round::ledger::Ledger;
use crate::rules::batch::Missing;
use crate::rules::clock::Moment;
use crate::rules::renewal::{Schedule, default_interval, margin};

/// How a [`KeptGuard`] keeps its lock alive: the interval between extensions and an optional
/// bound on the whole hold.
///
/// ```
/// use std::time::Duration;
/// use quorumlock::KeepAlive;
///
/// // Extend every 10 s (the default is a third of the guard's TTL); never hold for more than an hour.
/// let keep_alive = KeepAlive::new()
///     .every(Duration::from_secs(10))
///     .max_hold(Duration::from_secs(3600));
/// # let _ = keep_alive;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeepAlive {
    every: Option<Duration>,
    max_hold: Option<Duration>,
    /// The least time before the validity ends that the lease stops being trusted: an
    /// election's leader gives up its renew deadline after its last renewal (`election/`).
    distrust: Duration,
}

impl KeepAlive {
    /// The defaults: extend every third of the TTL, no bound on the hold.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long after the acquisition or the last successful extension the next one is made
    /// (default: a third of the guard's TTL). Greater than zero and less than the TTL; the
    /// smaller, the more failed attempts fit before the validity runs out.
    pub fn every(mut self, every: Duration) -> Self {
        self.every = Some(every);
        self
    }

    /// The longest the lock is held, counted from the acquisition: the last extensions ask for
    /// no more than is left of it, and when it is reached the lease is lost
    /// ([`Lost::MaxHold`]) and released. Default: no bound.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// Stops trusting the lease at least `before` its validity ends (and fires the lost signal
    /// then), instead of the small default margin.
    pub(crate) fn distrust(mut self, before: Duration) -> Self {
        self.distrust = before;
        self
    }

    /// The schedule for a lock of `ttl`: the interval greater than zero and below the TTL, a
    /// `max_hold` greater than zero.
    fn schedule(&self, ttl: Duration) -> Result<Schedule, ConfigError> {
        let every = self.every.unwrap_or_else(|| default_interval(ttl));
        if every.is_zero() || every >= ttl {
            return Err(ConfigError::InvalidKeepAlive { every, ttl });
        }
        if self.max_hold.is_some_and(|max_hold| max_hold.is_zero()) {
            return Err(ConfigError::ZeroMaxHold);
        }
        Ok(Schedule {
            ttl,
            every,
            max_hold: self.max_hold,
            margin: margin(ttl).max(self.distrust),
        })
    }
}

/// A held lock kept alive in the background (see [`Guard::keep_alive`]). Dereferences to its
/// [`Lease`]: `is_valid`, `valid_until`, `fence`, `lost`.
///
/// Dropping it stops the keep-alive and releases the lock in the background, as dropping a
/// [`Guard`] does; [`Lock::settle`](crate::Lock::settle) waits for that release.
#[must_use = "dropping a kept guard releases the lock at once"]
pub struct KeptGuard {
    lease: Lease,
    /// The lease's number in its keeper; `None` without a runtime (or once it left).
    kept: Option<u64>,
}

impl Kept for State {
    fn keys(&self) -> &[Arc<[u8]>] {
        self.hold.keys.all()
    }

    fn token(&self) -> &str {
        self.hold.token.as_str()
    }

    fn ledger(&self) -> &Ledger {
        &self.hold.ledger
    }

    fn held(&self) -> bool {
        self.hold.guards() > 0
    }

    fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    fn decided(&self) -> Moment {
        self.hold.decided
    }

    fn trusted_until(&self) -> Moment {
        self.trusted_until()
    }

    fn still_valid(&self) -> bool {
        self.hold.is_valid()
    }

    fn extended(&self, valid_until: Moment) {
        // A batch still out when the lease was found lost moves nothing: a lost lease stays
        // with the validity it was lost with.
        if self.hold.lost_reason().is_some() {
            return;
        }
        // The hold's validity moves, and with it the lease's and every guard's of the hold.
        self.hold.extended(valid_until);
        self.extensions.fetch_add(1, Ordering::Relaxed);
    }

    fn lose(&self, lost: Lost) {
        let hold = &self.hold;
        tracing::warn!(
            resource = %String::from_utf8_lossy(hold.resource()),
            reason = %lost,
            "lock lost"
        );
        hold.mark_lost(lost);
    }

    fn release_lost(self: Arc<Self>) -> Option<BoxFuture<'static, ()>> {
        let guard = self.custody.take_to_release(&self.hold)?;
        let reporting = Reporting(self);
        Some(
            async move {
                let released = guard.release().await;
                reporting.0.custody.report(Some(released));
            }
            .boxed(),
        )
    }
}

impl KeptGuard {
    /// A handle on the lease, to give to the code that relies on the lock.
    pub fn lease(&self) -> Lease {
        self.lease.clone()
    }

    /// Stops the keep-alive and releases the lock (as [`Guard::release`]). After a loss, returns
    /// what the release made at the loss found.
    pub async fn release(mut self) -> ReleaseReport {
        let kept = self.kept.is_some();
        if let Some(guard) = self.leave() {
            return guard.release().await;
        }
        if !kept {
            return ReleaseReport::nothing_sent(0);
        }
        self.lease.state.custody.reported().await
    }

    /// Takes the lease out of its keeper and returns the guard, unless the keeper found it lost
    /// first (and releases it itself).
    fn leave(&mut self) -> Option<Guard> {
        let id = self.kept.take()?;
        let state = &self.lease.state;
        if !state.hold.node_set.keeper.leave(id, &**state) {
            return None;
        }
        state.custody.take(&state.hold)
    }
}

impl Deref for KeptGuard {
    type Target = Lease;

    fn deref(&self) -> &Lease {
        &self.lease
    }
}

impl Drop for KeptGuard {
    fn drop(&mut self) {
        // The guard's own drop releases in the background, counted for `Lock::settle`.
        drop(self.leave());
    }
}

impl fmt::Debug for KeptGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("KeptGuard").field(&self.lease).finish()
    }
}

impl Guard {
    /// Keeps the lock alive in the background: extends it on the quorum rule (every third of the
    /// TTL by default), trying again while the validity lasts when an extension fails, until it
    /// is released, dropped, or lost. The returned [`KeptGuard`]'s lease says whether the lock
    /// is still held; its [`lost`](Lease::lost) future completes when it is not.
    ///
    /// Each extension asks for the guard's TTL ([`Guard::ttl`]: the lock's, or the one the
    /// acquisition gave; never more than is left of `max_hold`). The lock's kept leases are
    /// extended together, in batches of up to a few hundred keys per command to each node;
    /// nothing of it runs on the caller's task. A batch also brings the key back to a reachable
    /// node that lacks it (one the acquisition's request did not reach), if that node may vote
    /// as it could in an acquisition, so the lock regains the fault tolerance of all its nodes.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid [`KeepAlive`]: an interval of zero or not below the TTL
    /// ([`ConfigError::InvalidKeepAlive`]), a `max_hold` of zero ([`ConfigError::ZeroMaxHold`]).
    /// The guard is then released.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use quorumlock::KeepAlive;
    ///
    /// let kept = lock.acquire("nightly-report").await?.keep_alive(KeepAlive::new())?;
    /// tokio::select! {
    ///     lost = kept.lost() => eprintln!("lock lost: {lost}"),
    ///     () = async { /* the long job, checking kept.is_valid() before each write */ } => {}
    /// }
    /// kept.release().await;
    /// # Ok(()) }
    /// ```
    pub fn keep_alive(self, options: KeepAlive) -> Result<KeptGuard, Error> {
        let schedule = options.schedule(self.ttl())?;
        let hold = Arc::clone(self.hold());
        let state = |custody| {
            Arc::new(State {
                hold,
                schedule,
                extensions: AtomicU64::new(0),
                custody,
            })
        };
        let Some(runtime) = Handle::try_current()
            .ok()
            .or_else(|| self.runtime().cloned())
        else {
            // The guard's own drop releases what it can.
            let state = state(Custody::new(false));
            state.hold.mark_lost(Lost::NoRuntime);
            return Ok(KeptGuard {
                lease: Lease { state },
                kept: None,
            });
        };
        // The nodes the acquisition did not see holding our key: the first batch brings it
        // there if they may vote.
        let mut missing = Missing::default();
        for outcome in self.outcomes() {
            if outcome.reply != NodeReply::Ours {
                missing.insert(outcome.node);
            }
        }
        let node_set = Arc::clone(self.node_set());
        // The guard stays one of the hold's guards, in the keeper's custody.
        self.into_custody();
        let state = state(Custody::new(true));
        let keeper: &Arc<Keeper> = &node_set.keeper;
        let id = keeper.keep(
            &node_set.members,
            Arc::clone(&state) as Arc<dyn Kept>,
            missing,
            &runtime,
        );
        Ok(KeptGuard {
            lease: Lease { state },
            kept: Some(id),
        })
    }
}

/// The keeper's release of a lost lease: reports to the holder when it is dropped unfinished.
struct Reporting(Arc<State>);

impl Drop for Reporting {
    fn drop(&mut self) {
        self.0.custody.report(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_of_zero_or_not_below_the_ttl_and_a_zero_max_hold_are_rejected() {
        let ttl = Duration::from_secs(3);
        for every in [Duration::ZERO, ttl, ttl * 2] {
            assert_eq!(
                KeepAlive::new().every(every).schedule(ttl),
                Err(ConfigError::InvalidKeepAlive { every, ttl })
            );
        }
        assert_eq!(
            KeepAlive::new().max_hold(Duration::ZERO).schedule(ttl),
            Err(ConfigError::ZeroMaxHold)
        );
        assert_eq!(
            KeepAlive::new()
                .schedule(ttl)
                .map(|schedule| schedule.every),
            Ok(Duration::from_secs(1))
        );
    }
}
