//! [`Lock`]: the client. Acquires over all nodes at once with an early quorum decision, computes
//! the validity, retries with jitter, and releases on every node whenever an acquisition fails,
//! is cancelled, or its future is dropped. Each acquisition keeps a [`Ledger`] of its requests
//! per node, so that every release reaches a node after them (or says it may not have).
//!
//! Just over 500 lines: the acquisition is one flow (attempts, the fan-out, the fence's
//! write-back, the validity, cleanup on every path) that reads best in one place.

use std::fmt;
use std::future::{Future, pending};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::clock::Moment;
use crate::commands::{self, AcquireCommand, AcquireRequest, Taken};
use crate::error::{ConfigError, Error, NodeOutcome, NodeReply};
use crate::fanout::{Round, Until, fan_out};
use crate::fencing;
use crate::guard::{Grant, Guard};
use crate::identity::{Claims, first_duplicate};
use crate::ledger::Ledger;
use crate::node::Node;
use crate::options::{LockOptions, Topology};
use crate::quorum::Verdict;
use crate::retry::RetryPolicy;
use crate::shared::{Shared, release_all, release_in_background};
use crate::token::{Token, lock_key};
use crate::validity::ttl_millis;

/// A distributed lock client over one Redis server or a quorum of independent masters.
///
/// Cheap to clone (clones share connections); `Send + Sync`. Connections are made lazily, on
/// first use, so constructing a `Lock` sends nothing and only fails on a bad configuration.
///
/// ```no_run
/// use quorumlock::{Lock, LockOptions};
///
/// # async fn run() -> Result<(), quorumlock::Error> {
/// let lock = Lock::quorum(
///     ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"],
///     LockOptions::default(),
/// )?;
/// let guard = lock.acquire("invoice:42").await?;
/// // … work while guard.is_valid() …
/// let report = guard.release().await;
/// assert!(report.held <= 3);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    shared: Arc<Shared>,
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("nodes", &self.node_addrs())
            .field("quorum", &self.shared.settings.quorum)
            .field("ttl", &self.shared.settings.ttl)
            .finish_non_exhaustive()
    }
}

impl Lock {
    /// A lock over `topology`. Fails only on an invalid configuration.
    pub fn new(topology: Topology, options: LockOptions) -> Result<Lock, Error> {
        let urls = topology.urls();
        let settings = options.validate(urls.len())?;
        let claims = Arc::new(Claims::default());
        let nodes = urls
            .iter()
            .enumerate()
            .map(|(index, url)| {
                Node::new(index, url, &settings).map(|node| Arc::new(node.with_claims(&claims)))
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        // One server, one vote: the same host and port twice is a configuration error (the
        // same server under two names is caught on connect, by its run_id).
        let endpoints: Vec<_> = nodes.iter().map(|node| node.endpoint()).collect();
        if let Some((first, second)) = first_duplicate(&endpoints) {
            return Err(ConfigError::DuplicateNode {
                first,
                second,
                addr: endpoints
                    .get(second)
                    .map(|endpoint| endpoint.as_str().to_owned())
                    .unwrap_or_default(),
            }
            .into());
        }
        Ok(Lock {
            shared: Arc::new(Shared {
                nodes,
                settings,
                background: Arc::default(),
            }),
        })
    }

    /// A lock on one Redis server (`redis://[user:password@]host:port[/db]`).
    pub fn single(url: impl Into<String>, options: LockOptions) -> Result<Lock, Error> {
        Lock::new(Topology::Single(url.into()), options)
    }

    /// A Redlock over independent Redis masters, one URL each.
    pub fn quorum<I, S>(urls: I, options: LockOptions) -> Result<Lock, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Lock::new(
            Topology::Quorum(urls.into_iter().map(Into::into).collect()),
            options,
        )
    }

    /// The nodes' addresses (`host:port`), in configured order.
    pub fn node_addrs(&self) -> Vec<&str> {
        self.shared
            .nodes
            .iter()
            .map(|node| &**node.addr())
            .collect()
    }

    /// How many nodes must agree.
    pub fn quorum_size(&self) -> usize {
        self.shared.settings.quorum
    }

    /// The TTL of each acquisition.
    pub fn ttl(&self) -> Duration {
        self.shared.settings.ttl
    }

    /// The longest one command waits for one node.
    pub fn node_timeout(&self) -> Duration {
        self.shared.settings.node_timeout
    }

    /// With the restart guard on (the default, see [`LockOptions::restart_guard`]), how long a
    /// node that does not persist every write stays out of acquisitions after it (re)started:
    /// `max_ttl` plus its drift allowance. `None` with the guard off.
    pub fn restart_guard(&self) -> Option<Duration> {
        self.shared.settings.restart_guard
    }

    /// One attempt, no retry: `Held` at once if someone else has the lock.
    pub async fn try_acquire(&self, resource: impl AsRef<[u8]>) -> Result<Guard, Error> {
        self.acquire_with(resource, &RetryPolicy::once(), pending())
            .await
    }

    /// Acquires with the configured [`RetryPolicy`].
    pub async fn acquire(&self, resource: impl AsRef<[u8]>) -> Result<Guard, Error> {
        self.acquire_with(resource, &self.shared.settings.retry, pending())
            .await
    }

    /// Acquires with the configured [`RetryPolicy`], giving up with [`Error::Cancelled`] as soon
    /// as `cancel` completes (a shutdown signal, say). Keys set so far are released first.
    pub async fn acquire_until(
        &self,
        resource: impl AsRef<[u8]>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        self.acquire_with(resource, &self.shared.settings.retry, cancel)
            .await
    }

    /// Acquires with an explicit retry policy and cancel signal.
    ///
    /// Every attempt of one acquisition uses the same fresh token, so a key an earlier attempt
    /// left behind (its release was lost) counts for us, not against us. Dropping this future
    /// at any point releases whatever it may have set, in the background; see [`Lock::settle`].
    pub async fn acquire_with(
        &self,
        resource: impl AsRef<[u8]>,
        policy: &RetryPolicy,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        let resource = resource.as_ref();
        if resource.is_empty() {
            return Err(ConfigError::EmptyResource.into());
        }
        policy.validate()?;
        let settings = &self.shared.settings;
        let acquisition = Acquisition {
            resource,
            key: lock_key(&settings.key_prefix, resource),
            fence_key: settings
                .fencing
                .is_some()
                .then(|| lock_key(&settings.fence_prefix, resource)),
            token: Token::generate(),
            ledger: Arc::new(Ledger::new(self.shared.nodes.len())),
        };
        let mut cancel = pin!(cancel);
        let first_started = Instant::now();
        let mut attempts_made = 0u32;
        loop {
            let result = self
                .attempt(&acquisition, attempts_made > 0, cancel.as_mut())
                .await;
            attempts_made = attempts_made.saturating_add(1);
            let error = match result {
                Ok((lease, outcomes)) => {
                    let Acquisition {
                        key, token, ledger, ..
                    } = acquisition;
                    return Ok(Guard::new(
                        Arc::clone(&self.shared),
                        key,
                        resource.len(),
                        token,
                        ledger,
                        lease,
                        outcomes,
                    ));
                }
                Err(error @ Error::Cancelled { .. }) => return Err(error),
                Err(error) => error,
            };
            let Some(pause) =
                policy.next_delay(attempts_made, first_started.elapsed(), rand::random())
            else {
                return Err(error);
            };
            tracing::debug!(attempt = attempts_made, ?pause, %error, "acquire attempt failed; retrying");
            // The failed attempt's releases may still be in flight on the slower nodes; they
            // finish (within their timeouts) before the next attempt sends anything, so none of
            // them can delete its key.
            let pause_then_quiet = async {
                tokio::time::sleep(pause).await;
                acquisition
                    .ledger
                    .wait_quiet(None, self.shared.request_bound())
                    .await;
            };
            tokio::select! {
                biased;
                () = cancel.as_mut() => {
                    return Err(Error::Cancelled { outcomes: error.outcomes().to_vec() });
                }
                () = pause_then_quiet => {}
            }
        }
    }

    /// Waits until all background work has finished: releases of guards dropped without
    /// [`Guard::release`] or of acquisitions dropped mid-flight, and requests to slower nodes
    /// still in flight when an acquisition or extension was decided. Call it before a runtime
    /// shuts down to leave no lock behind for its TTL.
    pub async fn settle(&self) {
        self.shared.background.settle().await;
    }

    /// Deletes the fence counter of `resource` on every node (`DEL`, whatever the lock's state),
    /// so that it takes no space once the resource is retired. Works with fencing on or off.
    ///
    /// **The next fence of the resource is 1 again**: a store that still remembers a higher
    /// fence will refuse every later holder, and a holder valid meanwhile keeps a fence that a
    /// later holder's can equal. Call it only for a resource no one will lock again, or together
    /// with deleting the store's record of the last fence, while no one holds the lock.
    ///
    /// Returns what each node did: [`NodeReply::Ours`] deleted a counter,
    /// [`NodeReply::NotOurs`] had none, [`NodeReply::Failed`] could not be asked (try again: a
    /// counter left there stays until deleted).
    pub async fn delete_fence_counter(
        &self,
        resource: impl AsRef<[u8]>,
    ) -> Result<Vec<NodeOutcome>, Error> {
        fencing::delete_counters(&self.shared, resource.as_ref()).await
    }

    /// One attempt: the fan-out, the verdict, with fencing the write-back, the validity, and the
    /// cleanup if it failed.
    async fn attempt<C>(
        &self,
        acquisition: &Acquisition<'_>,
        renew_leftover: bool,
        mut cancel: Pin<&mut C>,
    ) -> Result<(Grant, Vec<NodeOutcome>), Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        let shared = &self.shared;
        let settings = &shared.settings;
        let Acquisition {
            resource,
            key,
            fence_key,
            token,
            ledger,
        } = acquisition;
        let ttl_ms = ttl_millis(settings.ttl);
        let mut cleanup = ReleaseOnDrop::new(shared, key, token, ledger);
        let attempt = ledger.begin();
        // With fencing, each node's new counter value, 0 until it has answered with one.
        let fences: Option<Arc<[AtomicU64]>> = fence_key
            .as_ref()
            .map(|_| shared.nodes.iter().map(|_| AtomicU64::new(0)).collect());
        // Built once and shared: every node gets the same bytes.
        let command = Arc::new(AcquireCommand::new(&AcquireRequest {
            key,
            fence_key: fence_key.as_deref(),
            token: token.as_str(),
            ttl_ms,
            renew_leftover,
        }));
        let started = Moment::now();
        let round = fan_out(
            &shared.nodes,
            settings.quorum,
            Until::Decided,
            cancel.as_mut(),
            |node| {
                let (command, ledger, fences) =
                    (Arc::clone(&command), Arc::clone(ledger), fences.clone());
                async move {
                    match commands::acquire(&node, &command, &ledger, attempt).await {
                        Ok(Taken::Ours(fence)) => {
                            if let (Some(fence), Some(slot)) = (
                                fence,
                                fences.as_ref().and_then(|fences| fences.get(node.index())),
                            ) {
                                slot.store(fence, Ordering::Relaxed);
                            }
                            NodeReply::Ours
                        }
                        Ok(Taken::NotOurs) => NodeReply::NotOurs,
                        Err(error) => NodeReply::Failed(error),
                    }
                }
            },
        )
        .await;
        // In the same step as the decision: the requests handed back unfinished were last
        // polled inside `fan_out`, so none of them is handed to a connection from now on unless
        // it already was; those that were are in flight in the ledger until they finish.
        ledger.decide();
        let decided = Moment::now();
        let Round {
            verdict,
            outcomes,
            unanswered,
        } = round;
        let error = match verdict {
            Some(Verdict::Won) => {
                // Requests already handed over reach the slower nodes, so more of them hold the
                // key if one of the quorum crashes; a release to such a node waits until its
                // request has finished (the ledger), should this attempt still fail.
                if let Some(unanswered) = unanswered {
                    shared.background.finish_unanswered(unanswered);
                }
                let confirmed = match (fence_key, &fences) {
                    (Some(fence_key), Some(fences)) => {
                        let fence = fencing::highest_fence(fences, &outcomes);
                        fencing::write_back_all(shared, key, fence_key, token, fence, cancel)
                            .await
                            .map(|(decided, outcomes)| (decided, outcomes, Some(fence)))
                    }
                    _ => Ok((decided, outcomes, None)),
                };
                match confirmed {
                    Ok((decided, outcomes, fence)) => {
                        let elapsed = decided.saturating_duration_since(started);
                        match settings.validity(settings.ttl, elapsed) {
                            Some(left) => {
                                cleanup.disarm();
                                // A moment that far out does not exist: treat the lock as
                                // expiring now.
                                let valid_until = decided.checked_add(left).unwrap_or(decided);
                                return Ok((
                                    Grant {
                                        decided,
                                        valid_until,
                                        fence,
                                    },
                                    outcomes,
                                ));
                            }
                            None => Error::ValidityExpired {
                                ttl: settings.ttl,
                                elapsed,
                                outcomes,
                            },
                        }
                    }
                    Err(error) => error,
                }
            }
            Some(verdict) => {
                // Requests still in flight are dropped, which finishes them: the release that
                // follows is ordered after each on its node.
                drop(unanswered);
                match verdict {
                    Verdict::Held => Error::Held {
                        resource: resource.to_vec(),
                        unreachable: outcomes
                            .iter()
                            .filter(|outcome| matches!(outcome.reply, NodeReply::Failed(_)))
                            .count(),
                        outcomes,
                    },
                    _ => Error::Unavailable {
                        quorum: settings.quorum,
                        outcomes,
                    },
                }
            }
            None => Error::Cancelled { outcomes },
        };
        #[cfg(feature = "chaos-defects")]
        if settings.defect == Some(crate::defect::Defect::NoReleaseOnFailure) {
            cleanup.disarm();
            return Err(error);
        }
        release_all(shared, key, token, ledger).await;
        cleanup.disarm();
        Err(error)
    }
}

/// What every attempt of one acquisition shares: the names, the token, and the ledger.
struct Acquisition<'a> {
    resource: &'a [u8],
    key: Arc<[u8]>,
    /// The fence counter's key, with fencing on.
    fence_key: Option<Arc<[u8]>>,
    token: Token,
    ledger: Arc<Ledger>,
}

/// Releases an acquisition's key in the background if dropped while armed: the attempt's future
/// was dropped (cancelled) or unwound (panic) before it could clean up or hand over to a guard.
struct ReleaseOnDrop<'a> {
    shared: &'a Arc<Shared>,
    key: &'a Arc<[u8]>,
    token: &'a Token,
    ledger: &'a Arc<Ledger>,
    armed: bool,
}

impl<'a> ReleaseOnDrop<'a> {
    fn new(
        shared: &'a Arc<Shared>,
        key: &'a Arc<[u8]>,
        token: &'a Token,
        ledger: &'a Arc<Ledger>,
    ) -> Self {
        ReleaseOnDrop {
            shared,
            key,
            token,
            ledger,
            armed: true,
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!("acquisition dropped mid-flight; releasing in the background");
            // Nothing of this attempt is handed to a connection from now on, whatever the order
            // in which its requests' futures are dropped and the release task runs.
            self.ledger.decide();
            release_in_background(
                self.shared,
                Arc::clone(self.key),
                self.token.clone(),
                Arc::clone(self.ledger),
                None,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync_static<T: Send + Sync + 'static>(_: &T) {}
    fn send<T: Send>(_: &T) {}

    /// Guards move between tasks, and acquisitions can be spawned.
    #[test]
    fn locks_guards_and_their_futures_can_cross_tasks() {
        let lock = Lock::single("redis://127.0.0.1:1", LockOptions::new()).unwrap();
        send_sync_static(&lock);
        send(&lock.acquire("r"));
        send(&lock.acquire_until("r", std::future::pending()));
        fn guard_is_send_sync_static<T: Send + Sync + 'static>() {}
        guard_is_send_sync_static::<Guard>();
        guard_is_send_sync_static::<Error>();
    }
}
