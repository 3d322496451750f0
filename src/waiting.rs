//! One acquisition's own settings ([`AcquireOptions`]: its TTL, and how long it waits), and
//! waiting for a held lock: [`Lock::acquire_within`] waits up to a deadline the caller states,
//! woken when the lock is released (by this process, or by any client through the nodes'
//! published release) or when its keys expire on a quorum, never by a poll timer; callers of
//! one [`Lock`] waiting for one resource are served in arrival order (`round/wait_list.rs`).
//!
//! A wake-up is only a hint: the head of the queue still wins only by the quorum rule. A missed
//! or late message costs it at most the time until the holder's keys expire on a quorum, which
//! it reads (`PTTL`) after every attempt that found the lock held.

use std::time::Duration;

use tokio::time::Instant;

use crate::acquisition::Acquisition;
use crate::error::{ConfigError, Error};
use crate::guard::Guard;
use crate::lock::Lock;
use crate::round::wait_list::free_by_expiry_after;
use crate::rules::retry::RetryPolicy;
use crate::rules::token::lock_key;
use crate::settings::validate_ttl;

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
    ttl: Option<Duration>,
    wait: Option<Duration>,
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
}

impl Lock {
    /// Acquires `resource` as `options` say: with their TTL, and waiting as
    /// [`acquire_within`](Lock::acquire_within) does if they give a wait, else with the lock's
    /// retry policy as [`acquire`](Lock::acquire) does.
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
        let resource = resource.as_ref();
        if resource.is_empty() {
            return Err(ConfigError::EmptyResource.into());
        }
        let settings = &self.node_set().settings;
        let ttl = options.ttl.unwrap_or(settings.ttl);
        validate_ttl(ttl)?;
        settings.check_guarded_ttl(ttl)?;
        match options.wait {
            Some(wait) => self.wait_for(resource, ttl, wait).await,
            None => {
                Acquisition::new(self.node_set(), resource, ttl)
                    .run(&settings.retry, std::future::pending())
                    .await
            }
        }
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

    /// Waits up to `wait` for `resource` (not empty), each attempt for `ttl` (checked).
    async fn wait_for(
        &self,
        resource: &[u8],
        ttl: Duration,
        wait: Duration,
    ) -> Result<Guard, Error> {
        let started = Instant::now();
        let deadline = started
            .checked_add(wait.min(LONGEST_WAIT))
            .unwrap_or(started);
        let node_set = self.node_set();
        let settings = &node_set.settings;
        let key = lock_key(&settings.key_prefix, resource);
        let (place, subscribed) =
            node_set
                .wait_list
                .join(&node_set.nodes, settings.connect_timeout, &key);
        // Heard from now on, once each node confirmed (or failed: then its expiry bound).
        let confirmed_by = started
            .checked_add(node_set.request_bound())
            .map_or(deadline, |bound| bound.min(deadline));
        let _ = tokio::time::timeout_at(confirmed_by, futures::future::join_all(subscribed)).await;
        let mut last_error = None;
        loop {
            // Armed before the attempt, so a release during it is not missed.
            let woken = place.wake().notified();
            let pause = if place.is_head() {
                // Not cut short by the deadline: an attempt is bounded by the node timeouts, and
                // one cut short would only have to be released again.
                let attempt = Acquisition::new(node_set, resource, ttl)
                    .run(&RetryPolicy::once(), std::future::pending())
                    .await;
                match attempt {
                    Ok(guard) => return Ok(guard),
                    Err(error @ Error::Held { .. }) => {
                        last_error = Some(error);
                        // No wake-up heard: try again once a quorum is free by expiry alone. Not
                        // read past the deadline (a node being reconnected would hold the caller
                        // up to its timeouts for a bound nobody needs any more).
                        let expiry = free_by_expiry_after(&node_set.nodes, settings.quorum, &key);
                        tokio::time::timeout_at(deadline, expiry)
                            .await
                            .ok()
                            .flatten()
                            .unwrap_or(ttl)
                    }
                    Err(error @ Error::Config(_)) => return Err(error),
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
        self.node_set()
            .wait_list
            .waiters(&lock_key(&settings.key_prefix, resource.as_ref()))
    }
}
