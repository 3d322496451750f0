//! One acquisition's own settings ([`AcquireOptions`]: its TTL, how long it waits, its owner),
//! and waiting for a held lock: [`Lock::acquire`] (up to the lock's wait, by default its TTL)
//! and [`Lock::acquire_within`] (up to a deadline the caller states) wait,
//! woken when the lock is released (by this process, or by any client through the nodes'
//! published release) or when its keys expire on a quorum, never by a poll timer; callers of
//! one [`Lock`] waiting for one resource are served in arrival order (`round/wait_list.rs`).
//!
//! A wake-up is only a hint: the head of the queue still wins only by the quorum rule. A missed
//! or late message costs it at most the time until the holder's keys expire on a quorum, which
//! it reads (`PTTL`) after every attempt that found the lock held.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::acquisition::Acquisition;
use crate::error::{ConfigError, Error};
use crate::guard::Guard;
use crate::hold::Owners;
use crate::lock::Lock;
use crate::owner::Owner;
use crate::round::wait_list::free_by_expiry_after;
use crate::rules::resources::Keys;
use crate::rules::retry::RetryPolicy;
use crate::settings::{Patience, validate_ttl};

/// A deadline further out than this is treated as this far out (about 30 years): a deadline
/// that cannot be represented must still be a deadline.
const LONGEST_WAIT: Duration = Duration::from_secs(1 << 30);

/// How one acquisition runs where it differs from its lock's settings: its TTL (Redisson's
/// `leaseTime`), and whether and how long it waits for a held lock (`waitTime`).
///
/// ```no_run
/// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
/// use quorumlock::AcquireOptions;
///
/// // This job's lock lives 2 minutes; wait up to 10 s for whoever holds it now.
/// let options = AcquireOptions::new()
///     .ttl(Duration::from_secs(120))
///     .wait(Duration::from_secs(10));
/// let guard = lock.acquire_with_options("reindex", &options).await?;
/// assert_eq!(guard.ttl(), Duration::from_secs(120));
/// guard.release().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    pub(crate) ttl: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) owner: Option<Owner>,
}

impl AcquireOptions {
    /// The lock's settings: its TTL, its retry policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// The TTL of this acquisition (default: the lock's), which a keep-alive also extends by.
    /// Between 1 ms and [`MAX_TTL`](crate::MAX_TTL), and with the restart guard on at most the
    /// lock's [`max_ttl`](crate::LockOptions::max_ttl), which is what the guard covers.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Wait up to `wait` for a held lock, woken by its release or expiry (see
    /// [`Lock::acquire_within`]), instead of the lock's retry policy. Zero makes one attempt.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Acquire for `owner` (default: no owner, not reentrant). If `owner` already holds the
    /// resource through this lock (or a clone of it), with validity left, the call returns at
    /// once with another guard of that hold: nothing is sent, and this call's TTL and wait do
    /// not apply. The lock is released when the last of the owner's guards is; see [`Owner`].
    ///
    /// Re-entry is checked when the call begins and, with a [`wait`](AcquireOptions::wait),
    /// each time it is the next in line: a task of the owner that waits behind another task
    /// of the same owner joins its hold as soon as that one has it.
    pub fn owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }
}

impl Lock {
    /// Acquires `resource`, waiting for it if someone else holds it: by default up to the
    /// lock's TTL, woken by the release or the holder's keys expiring, in arrival order with
    /// this lock's other callers, as [`acquire_within`](Lock::acquire_within) does. With
    /// [`LockOptions::wait`](crate::LockOptions::wait) it waits that long instead; with [`LockOptions::retry`](crate::LockOptions::retry) it polls
    /// with that policy's attempts, as [`acquire_with`](Lock::acquire_with) does.
    ///
    /// Why the TTL: it is the longest a holder that crashed without releasing can keep the
    /// lock, so by default a caller gets every lock that nobody keeps alive, however long its
    /// holder works within one TTL, and a lock kept alive by a live holder makes it give up
    /// (`Held`) rather than hang. [`try_acquire`](Lock::try_acquire) makes one attempt.
    ///
    /// # Errors
    ///
    /// Those of [`acquire_within`](Lock::acquire_within), or with a retry policy those of
    /// [`acquire_with`](Lock::acquire_with).
    pub async fn acquire(&self, resource: impl AsRef<[u8]>) -> Result<Guard, Error> {
        self.acquire_with_options_until(
            resource.as_ref(),
            &AcquireOptions::new(),
            std::future::pending(),
        )
        .await
    }

    /// [`acquire`](Lock::acquire), giving up with [`Error::Cancelled`] as soon as `cancel`
    /// completes (a shutdown signal, say). Keys set so far are released first.
    pub async fn acquire_until(
        &self,
        resource: impl AsRef<[u8]>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        self.acquire_with_options_until(resource.as_ref(), &AcquireOptions::new(), cancel)
            .await
    }

    /// Acquires `resource` as `options` say: with their TTL and owner, and waiting as
    /// [`acquire_within`](Lock::acquire_within) does if they give a wait, else as
    /// [`acquire`](Lock::acquire) does (the lock's wait, or its retry policy).
    ///
    /// # Errors
    ///
    /// Those of [`acquire_within`](Lock::acquire_within) or [`acquire`](Lock::acquire), and
    /// [`Error::Config`] for a TTL Redis cannot store
    /// ([`ConfigError::InvalidTtl`](crate::ConfigError::InvalidTtl)) or, with the restart guard
    /// on, above `max_ttl` ([`ConfigError::TtlAboveMaxTtl`](crate::ConfigError::TtlAboveMaxTtl)),
    /// before anything is sent.
    pub async fn acquire_with_options(
        &self,
        resource: impl AsRef<[u8]>,
        options: &AcquireOptions,
    ) -> Result<Guard, Error> {
        self.acquire_with_options_until(resource.as_ref(), options, std::future::pending())
            .await
    }

    /// [`acquire_with_options`](Lock::acquire_with_options), given up with
    /// [`Error::Cancelled`] when `cancel` completes.
    pub(crate) async fn acquire_with_options_until(
        &self,
        resource: &[u8],
        options: &AcquireOptions,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        if resource.is_empty() {
            return Err(ConfigError::EmptyResource.into());
        }
        let settings = &self.node_set().settings;
        let ttl = options.ttl.unwrap_or(settings.ttl);
        validate_ttl(ttl)?;
        settings.check_guarded_ttl(ttl)?;
        let key = settings.lock_key(resource)?;
        if let Some(guard) = self.reenter(options.owner, Keys::One(Arc::clone(&key))) {
            return Ok(guard);
        }
        match options.wait.map_or(settings.acquire, Patience::Wait) {
            Patience::Wait(wait) => {
                self.wait_for(resource, &key, ttl, wait, options.owner, cancel)
                    .await
            }
            Patience::Retry => {
                Acquisition::new(self.node_set(), resource, Keys::One(key), ttl)
                    .for_owner(self.owned_by(options.owner))
                    .run(&settings.retry, cancel)
                    .await
            }
        }
    }

    /// Another guard of `owner`'s hold of `keys`, if it has one still valid.
    pub(crate) fn reenter(&self, owner: Option<Owner>, keys: Keys) -> Option<Guard> {
        let hold = self.owners().join(owner?, keys)?;
        Some(Guard::joined(hold))
    }

    /// An acquisition's owner with this lock's registry of owned holds.
    pub(crate) fn owned_by(&self, owner: Option<Owner>) -> Option<(Owner, Arc<Owners>)> {
        owner.map(|owner| (owner, Arc::clone(self.owners())))
    }

    /// Acquires `resource`, waiting for it for up to `wait` if someone else holds it.
    ///
    /// The caller sleeps until the lock is released (by this process, or by any client: the
    /// release publishes on the key's channel, which this lock subscribes to on every node while
    /// someone waits) or until the holder's keys expire on a quorum of nodes, then tries again;
    /// never on a poll timer. Callers of this `Lock` waiting for the same resource are served in
    /// the order they arrived: only the first contends on the nodes, and one that gets the lock,
    /// releases it and asks again queues behind the others. Callers in other processes are not
    /// ordered with these; they all wake on the same release and the quorum rule decides.
    ///
    /// Each attempt is one acquisition as [`try_acquire`](Lock::try_acquire) makes it, with a
    /// fresh token, released on every node when it fails; a `wait` of zero makes one attempt. No
    /// attempt starts after the deadline, and one under way when it passes is finished (its
    /// requests, and a failed one's release, each bounded by `connect_timeout + node_timeout`),
    /// so the call returns within `wait` plus one attempt
    /// ([`attempt_bound`](Lock::attempt_bound)). Nodes that are unavailable (not held) are tried
    /// again after the configured retry pause.
    ///
    /// # Errors
    ///
    /// When `wait` runs out: the last attempt's error, usually [`Error::Held`] (with empty
    /// outcomes if the caller never reached the head of the queue: it waited behind other
    /// callers of this lock and never asked the nodes); [`Error::Unavailable`] if too many nodes
    /// failed. [`Error::Config`] for an empty resource name, before anything is sent.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    ///
    /// // Wait up to 5 s for the nightly job's lock, however long its holder keeps it.
    /// let guard = lock.acquire_within("nightly-report", Duration::from_secs(5)).await?;
    /// // … work while guard.is_valid() …
    /// guard.release().await;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_within(
        &self,
        resource: impl AsRef<[u8]>,
        wait: Duration,
    ) -> Result<Guard, Error> {
        self.acquire_with_options(resource, &AcquireOptions::new().wait(wait))
            .await
    }

    /// Waits up to `wait` for `resource` (not empty; its lock key is `key`), each attempt for
    /// `ttl` (checked), for `owner` if given.
    async fn wait_for(
        &self,
        resource: &[u8],
        key: &Arc<[u8]>,
        ttl: Duration,
        wait: Duration,
        owner: Option<Owner>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        let mut cancel = pin!(cancel);
        let started = Instant::now();
        let deadline = started
            .checked_add(wait.min(LONGEST_WAIT))
            .unwrap_or(started);
        let node_set = self.node_set();
        let settings = &node_set.settings;
        let (place, subscribed) =
            node_set
                .wait_list
                .join(&node_set.nodes, settings.connect_timeout, key);
        // Heard from now on, once each node confirmed (or failed: then its expiry bound).
        let confirmed_by = started
            .checked_add(node_set.request_bound())
            .map_or(deadline, |bound| bound.min(deadline));
        let confirmed =
            tokio::time::timeout_at(confirmed_by, futures::future::join_all(subscribed));
        tokio::select! {
            biased;
            () = cancel.as_mut() => return Err(Error::Cancelled { outcomes: Vec::new() }),
            _ = confirmed => {}
        }
        let mut last_error: Option<Error> = None;
        loop {
            // Armed before the attempt, so a release during it is not missed.
            let woken = place.wake().notified();
            let pause = if place.is_head() {
                // The task ahead may have been this owner's, and now holds the lock.
                if let Some(guard) = self.reenter(owner, Keys::One(Arc::clone(key))) {
                    return Ok(guard);
                }
                // Not cut short by the deadline: an attempt is bounded by the node timeouts, and
                // one cut short would only have to be released again.
                let attempt = Acquisition::new(node_set, resource, Keys::One(Arc::clone(key)), ttl)
                    .for_owner(self.owned_by(owner))
                    .run(&RetryPolicy::once(), cancel.as_mut())
                    .await;
                match attempt {
                    Ok(guard) => return Ok(guard),
                    Err(error @ (Error::Config(_) | Error::Cancelled { .. })) => return Err(error),
                    Err(error @ Error::Held { .. }) => {
                        last_error = Some(error);
                        // No wake-up heard: try again once a quorum is free by expiry alone. Not
                        // read past the deadline (a node being reconnected would hold the caller
                        // up to its timeouts for a bound nobody needs any more).
                        let expiry = free_by_expiry_after(&node_set.nodes, settings.quorum, key);
                        tokio::time::timeout_at(deadline, expiry)
                            .await
                            .ok()
                            .flatten()
                            .unwrap_or(ttl)
                    }
                    Err(error) => {
                        last_error = Some(error);
                        settings.retry.pause(rand::random())
                    }
                }
            } else {
                LONGEST_WAIT
            };
            tokio::select! {
                biased;
                () = cancel.as_mut() => {
                    let outcomes = last_error.map(|error| error.outcomes().to_vec());
                    return Err(Error::Cancelled { outcomes: outcomes.unwrap_or_default() });
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(last_error.unwrap_or_else(|| Error::Held {
                        resource: resource.to_vec(),
                        unreachable: 0,
                        outcomes: Vec::new(),
                    }));
                }
                () = woken => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// How many callers of this lock are waiting for `resource` now
    /// ([`acquire_within`](Lock::acquire_within)).
    pub fn waiters(&self, resource: impl AsRef<[u8]>) -> usize {
        let settings = &self.node_set().settings;
        // A name no key can be made of has nobody waiting for it.
        settings
            .lock_key(resource.as_ref())
            .map_or(0, |key| self.node_set().wait_list.waiters(&key))
    }
}
