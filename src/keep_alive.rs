//! The keep-alive: a [`Guard`] handed to a background task that extends it on the quorum rule
//! (every third of the TTL by default, see `renewal.rs`), and says through a [`Lease`] whether
//! the lock is still held and, once it is not, why ([`Lost`]). [`Lock::with_lock`] runs the
//! caller's work under such a lease and drops it the moment the lock is lost.
//!
//! Life cycle: [`Guard::keep_alive`] spawns the task, which owns the guard. The task sleeps until
//! the next extension is due, extends, and on success moves the lease's deadline; a failed
//! extension is tried again a quarter interval later while the lease is still trusted. It stops
//! in one of two ways. Released ([`KeptGuard::release`], or the [`KeptGuard`] dropped): it stops
//! extending and releases. Lost (a majority answered that our key is gone; the deadline came
//! without a successful extension; `max_hold` reached): it marks the lease lost (from then on
//! [`Lease::is_valid`] is false and [`Lease::lost`] completes), then releases whatever keys of
//! ours are left.

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::{ConfigError, Error, Lost};
use crate::guard::{Guard, ReleaseReport};
use crate::lease::{Lease, State};
use crate::lock::Lock;
use crate::outcome::not_ours;
use crate::round::background::Background;
use crate::rules::clock::Moment;
use crate::rules::renewal::{Schedule, default_interval, margin, taken};

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
            margin: margin(ttl),
        })
    }
}

/// A held lock kept alive in the background (see [`Guard::keep_alive`]). Dereferences to its
/// [`Lease`]: `is_valid`, `valid_until`, `fence`, `lost`.
///
/// Dropping it stops the keep-alive and releases the lock in the background, as dropping a
/// [`Guard`] does; [`Lock::settle`] waits for that release.
#[must_use = "dropping a kept guard releases the lock at once"]
pub struct KeptGuard {
    lease: Lease,
    /// Dropped to stop the task.
    stop: Option<oneshot::Sender<()>>,
    /// The keep-alive task; it releases the lock when it stops and returns what the release
    /// found.
    task: Option<JoinHandle<ReleaseReport>>,
    background: Arc<Background>,
    runtime: Option<Handle>,
}

impl KeptGuard {
    /// A handle on the lease, to give to the code that relies on the lock.
    pub fn lease(&self) -> Lease {
        self.lease.clone()
    }

    /// Stops the keep-alive and releases the lock (as [`Guard::release`]). After a loss, returns
    /// what the release made at the loss found.
    pub async fn release(mut self) -> ReleaseReport {
        drop(self.stop.take());
        match self.task.take() {
            Some(task) => task
                .await
                .unwrap_or_else(|_| ReleaseReport::nothing_sent(0)),
            None => ReleaseReport::nothing_sent(0),
        }
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
        drop(self.stop.take());
        if let Some(task) = self.task.take() {
            // Counted, so that `Lock::settle` waits until the task has stopped and handed its
            // release to the background work.
            self.background.spawn(self.runtime.as_ref(), async move {
                let _ = task.await;
            });
        }
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
    /// acquisition gave; never more than is left of `max_hold`) and costs
    /// one round trip to every node; nothing of it runs on the caller's task.
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
        let state = Arc::new(State {
            hold: Arc::clone(self.hold()),
            schedule,
            extensions: AtomicU64::new(0),
        });
        let background = Arc::clone(&self.node_set().background);
        let runtime = Handle::try_current()
            .ok()
            .or_else(|| self.runtime().cloned());
        let lease = Lease {
            state: Arc::clone(&state),
        };
        let Some(handle) = runtime.clone() else {
            state.hold.mark_lost(Lost::NoRuntime);
            return Ok(KeptGuard {
                lease,
                stop: None,
                task: None,
                background,
                runtime,
            });
        };
        let (stop, stopped) = oneshot::channel();
        let task = handle.spawn(keep(self, state, schedule, stopped));
        Ok(KeptGuard {
            lease,
            stop: Some(stop),
            task: Some(task),
            background,
            runtime,
        })
    }
}

/// The lease clock's moment `offset` after `start` (the far future if it cannot be represented).
fn at(start: Moment, offset: Duration) -> tokio::time::Instant {
    match start.checked_add(offset) {
        Some(moment) => tokio::time::Instant::from_std(moment.to_instant()),
        None => tokio::time::Instant::now() + Duration::from_secs(86_400 * 365),
    }
}

/// The keep-alive task: extends `guard` on `schedule` until `stopped` completes or the lock is
/// lost, then releases it.
async fn keep(
    mut guard: Guard,
    state: Arc<State>,
    schedule: Schedule,
    mut stopped: oneshot::Receiver<()>,
) -> ReleaseReport {
    let start = guard.decided_moment();
    let since_start = || Moment::now().saturating_duration_since(start);
    let (nodes, quorum) = (
        guard.node_set().nodes.len(),
        guard.node_set().settings.quorum,
    );
    let mut due = schedule.next_after_success(Duration::ZERO);
    let mut last_error: Option<Box<Error>> = None;
    // Out of time in the last stretch of a bounded hold is the bound's doing.
    let out_of_time = |last_error: Option<Box<Error>>, now: Duration| match schedule.max_hold {
        Some(max_hold) if schedule.ending(now) => Lost::MaxHold { max_hold },
        _ => Lost::Expired { last_error },
    };
    let lost = loop {
        let deadline = at(
            start,
            state.trusted_until().saturating_duration_since(start),
        );
        tokio::select! {
            biased;
            _ = &mut stopped => break None,
            () = tokio::time::sleep_until(deadline) => {
                break Some(out_of_time(last_error, since_start()));
            }
            () = tokio::time::sleep_until(at(start, due)) => {}
        }
        let Some(ttl) = schedule.extension_ttl(since_start()) else {
            // `max_hold` is (nearly) reached: no more extensions; the lease ends with its
            // validity.
            tokio::select! {
                biased;
                _ = &mut stopped => break None,
                () = tokio::time::sleep_until(deadline) => {
                    break Some(out_of_time(last_error, since_start()));
                }
            }
        };
        let result = tokio::select! {
            biased;
            _ = &mut stopped => break None,
            () = tokio::time::sleep_until(deadline) => {
                break Some(out_of_time(last_error, since_start()));
            }
            result = guard.extend(ttl) => result,
        };
        match result {
            Ok(()) => {
                // The hold's validity moved, and with it the lease's.
                state.extensions.fetch_add(1, Ordering::Relaxed);
                due = schedule.next_after_success(since_start());
                last_error = None;
            }
            Err(Error::ExtendFailed { outcomes, .. })
                if taken(nodes, quorum, not_ours(&outcomes)) =>
            {
                break Some(Lost::Taken { outcomes });
            }
            Err(error) => {
                tracing::debug!(%error, "keep-alive: extension failed; trying again");
                last_error = Some(Box::new(error));
                due = schedule.next_after_failure(since_start());
            }
        }
    };
    if let Some(lost) = lost {
        tracing::warn!(
            resource = %String::from_utf8_lossy(guard.resource()),
            reason = %lost,
            "lock lost"
        );
        state.hold.mark_lost(lost);
    }
    guard.release().await
}

impl Lock {
    /// Acquires `resource` as [`acquire`](Lock::acquire) does, keeps the lock alive while
    /// `work` runs, and releases it when `work` is done, on every path: `work` finishing, the
    /// lock being lost, `work` panicking, or this future being dropped.
    ///
    /// `work` gets the [`Lease`] (for its fence, and to check `is_valid()` before each
    /// protected write). If the lock is lost first, `work`'s future is dropped at once (it
    /// stops at its current `.await`) and the result is [`Error::Lost`] with the reason.
    ///
    /// # Errors
    ///
    /// Those of [`Lock::acquire_with`] and [`Guard::keep_alive`], and [`Error::Lost`] when the
    /// lock is lost while `work` runs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::{KeepAlive, Lock, LockOptions};
    ///
    /// let lock = Lock::quorum(
    ///     ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"],
    ///     LockOptions::new().ttl(Duration::from_secs(30)),
    /// )?;
    /// let rows = lock
    ///     .with_lock("nightly-report", KeepAlive::new(), async |lease| {
    ///         // Runs as long as it needs: the lock is extended every 10 s meanwhile.
    ///         assert!(lease.is_valid());
    ///         42
    ///     })
    ///     .await?;
    /// # let _ = rows;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<F, Fut, T>(
        &self,
        resource: impl AsRef<[u8]>,
        keep_alive: KeepAlive,
        work: F,
    ) -> Result<T, Error>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let kept = self.acquire(resource).await?.keep_alive(keep_alive)?;
        let outcome = {
            let work = pin!(work(kept.lease()));
            tokio::select! {
                biased;
                lost = kept.lost() => Err(Error::Lost(lost)),
                value = work => Ok(value),
            }
        };
        kept.release().await;
        outcome
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
