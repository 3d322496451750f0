//! Waiting for a held lock ([`Patience::Wait`](crate::Patience::Wait)): one resource or a set,
//! woken when the lock is released (by this process, or by any client through the nodes'
//! published release) or when its keys expire on a quorum, never by a poll timer. Callers of
//! one [`Lock`] waiting for overlapping resources are served in arrival order
//! (`round/wait_list.rs`); a semaphore's first waiters, as many as its permits (at most
//! [`MAX_HEADS`](crate::round::wait_list::MAX_HEADS)), contend together.
//!
//! The first attempt goes out at once, before any subscription, unless a caller of this lock
//! already queues for one of the resources: a free lock costs one attempt. A refused attempt
//! joins the queue and subscribes; the next attempt follows as soon as a quorum of nodes
//! confirmed the subscription, so a release between the refusal and the subscription is still
//! seen (on a quorum, one node at least also held the holder's key and publishes its release),
//! and a slow, hung or dead minority's confirmation is never waited for.
//!
//! A wake-up is only a hint: the head of the queue still wins only by the quorum rule. A missed
//! or late message costs it at most the time until the holder's keys expire on a quorum, which
//! it reads (`PTTL`) after every attempt that found the lock held (3 ms later, unless woken
//! first, when a quorum refused it as a holder's: `sleep::READ_AFTER_REFUSAL`), and again just
//! before that moment (`sleep::REREAD_AHEAD`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::sleep::{READ_AFTER_REFUSAL, REREAD_AHEAD};
use crate::error::Error;
use crate::guard::Guard;
use crate::lock::Lock;
use crate::outcome::not_ours;
use crate::request::Prepared;
use crate::round::wait_list::{MAX_HEADS, free_by_expiry_after, heads};
use crate::rules::resources::Keys;
use crate::rules::retry::RetryPolicy;
use crate::rules::rwlock::Side;

/// A deadline further out than this is treated as this far out (about 30 years): a deadline
/// that cannot be represented must still be a deadline.
const LONGEST_WAIT: Duration = Duration::from_secs(1 << 30);

/// What a waiter sleeps on besides its wake-up: a pause, or the expiry bound being read and
/// then slept out. Boxed: an allocation per round of waiting, none on the path that tries first.
type Pause<'p> = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'p>>;

impl Lock {
    /// Waits for what `prepared` names until `wait` after `called`, each attempt one
    /// acquisition as [`try_acquire`](Lock::try_acquire) makes it; `refused` is the first
    /// attempt's error, if the caller made one (else it queued at once). No attempt starts
    /// after the deadline, and one under way when it passes is finished (each bounded by the
    /// node timeouts), so the call returns within `wait` plus
    /// [`attempt_bound`](Lock::attempt_bound).
    pub(super) async fn wait_for<C>(
        &self,
        prepared: &Prepared<'_>,
        called: Instant,
        wait: Duration,
        refused: Option<Error>,
        mut cancel: Pin<&mut C>,
    ) -> Result<Guard, Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        let deadline = called.checked_add(wait.min(LONGEST_WAIT)).unwrap_or(called);
        let node_set = self.node_set();
        let settings = &node_set.settings;
        let keys = &prepared.keys;
        // After an attempt that failed for want of nodes (not held), the pause before the next.
        let retry_pause = || RetryPolicy::default().pause(rand::random());
        let refused = match refused {
            Some(error) if Instant::now() >= deadline => return Err(error),
            other => other,
        };
        let mut pause_first = match &refused {
            Some(Error::Held { .. }) | None => None,
            Some(_) => Some(retry_pause()),
        };
        let mut last_error = refused;
        // A read-write lock's waiters of both sides queue on its writer key, whose channel every
        // release of either side publishes on. Readers contend together (as many as a
        // semaphore's most), and each release wakes them all; a writer contends wherever it
        // stands: its mark keeps the readers ahead of it out, which would otherwise wait for a
        // writer that waits for them. Their bound is the writer key's and the writer's mark's
        // expiry: a mark lasts as long as the readers that kept its writer out.
        let (heads, shared, expiry_keys) = match &prepared.rw {
            Some((side, rw)) => (
                if *side == Side::Read {
                    MAX_HEADS
                } else {
                    usize::MAX
                },
                *side == Side::Read,
                Keys::Set(Arc::from([Arc::clone(&rw.writer), Arc::clone(&rw.mark)])),
            ),
            None => (
                heads(prepared.slots.as_ref().map_or(0, Vec::len)),
                false,
                keys.clone(),
            ),
        };
        let expiry_keys = &expiry_keys;
        let (place, subscribed) = node_set.wait_list.join(
            &node_set.nodes,
            settings.connect_timeout,
            keys,
            heads,
            shared,
        );
        // Heard from now on: the next attempt waits for a quorum of confirmations at most.
        let confirmed_by = Instant::now()
            .checked_add(node_set.request_bound())
            .map_or(deadline, |bound| bound.min(deadline));
        let confirmed = tokio::time::timeout_at(
            confirmed_by,
            confirmed_by_quorum(subscribed, settings.quorum),
        );
        tokio::select! {
            biased;
            () = cancel.as_mut() => return Err(cancelled(last_error)),
            _ = confirmed => {}
        }
        loop {
            // Armed before the attempt, so a release during it is not missed.
            let woken = place.wake().notified();
            let pause: Pause = if let Some(pause) = pause_first.take() {
                Box::pin(tokio::time::sleep(pause))
            } else if Instant::now() >= deadline {
                // No attempt starts after the deadline (the select below returns at once).
                Box::pin(std::future::pending())
            } else if place.is_head() {
                // The task ahead may have been this owner's, and now holds the lock.
                if let Some(guard) = self.reenter_prepared(prepared) {
                    return Ok(guard);
                }
                // Not cut short by the deadline: an attempt is bounded by the node timeouts, and
                // one cut short would only have to be released again.
                // Boxed: a waiter's future then carries one acquisition's state (the caller's
                // first attempt's), not two, for an allocation per attempt after a refusal.
                // A semaphore's waiter woken by a release tries the slot it freed. Marked as
                // trying before the hint is read: a release told after the read is queued for
                // this head or goes to another, instead of being forgotten when this attempt ends.
                // Told nothing, it reads which slots are free before trying one (`informed`).
                let trying = place.trying();
                let freed = trying.freed();
                let take = self.take(prepared);
                let (result, bounds) = match (&take, freed) {
                    (Some(take), None) => {
                        let others = place.told_to_others();
                        Box::pin(take.informed(&others, cancel.as_mut())).await
                    }
                    _ => (
                        Box::pin(self.attempt(prepared, freed, true, cancel.as_mut())).await,
                        None,
                    ),
                };
                trying.answered();
                match result {
                    Ok(guard) => return Ok(guard),
                    // Cancelled, or nothing a wait can cure (a refused password, nodes that may
                    // not vote).
                    Err(error) if error.ends_trying() => return Err(error),
                    Err(error @ Error::Held { .. }) => {
                        // Refused as someone else's by a quorum: a holder's, whose release will
                        // publish, so the read below waits a moment (`sleep::READ_AFTER_REFUSAL`)
                        // and is skipped if that release comes first. Else (votes split, nodes
                        // failed: nobody may publish) it is read at once.
                        let held_elsewhere = not_ours(error.outcomes()) >= settings.quorum;
                        last_error = Some(error);
                        // No wake-up heard: try again once a quorum is free by expiry alone, or
                        // at the re-check bound (a release that publishes nothing). Read while
                        // the wake-up is listened for, so a slow or hung node's PTTL never holds
                        // up a hand-off.
                        Box::pin(async move {
                            if bounds.is_none() && held_elsewhere {
                                tokio::time::sleep(READ_AFTER_REFUSAL).await;
                            }
                            let read = async |bounds| match &take {
                                Some(take) => take.free_after(bounds).await,
                                None => {
                                    free_by_expiry_after(
                                        &node_set.nodes,
                                        settings.quorum,
                                        expiry_keys,
                                    )
                                    .await
                                }
                            };
                            let expiry = read(bounds).await;
                            // Past the caller's deadline the select below has already returned.
                            // The re-check counts from this read, whatever a second one says.
                            let read_at = Instant::now();
                            let after = |from: Instant, sleep: Duration| {
                                from.checked_add(sleep)
                                    .map_or(deadline, |until| until.min(deadline))
                            };
                            let recheck = settings
                                .recheck
                                .map_or(deadline, |bound| after(read_at, bound));
                            let expires = after(read_at, expiry.unwrap_or(prepared.ttl));
                            let mut until = expires.min(recheck);
                            // Read again just before the expiry (`sleep::REREAD_AHEAD`), when it
                            // comes before the re-check: by the servers' clocks, with the round
                            // trip paid before the keys expire.
                            if expiry.is_some()
                                && expires < recheck
                                && let Some(reread) = expires.checked_sub(REREAD_AHEAD)
                                && reread > Instant::now()
                            {
                                super::sleep::sleep_until(reread).await;
                                if let Some(left) = read(None).await {
                                    until = after(Instant::now(), left).min(recheck);
                                }
                            }
                            super::sleep::sleep_until(until).await;
                        })
                    }
                    Err(error) => {
                        last_error = Some(error);
                        Box::pin(tokio::time::sleep(retry_pause()))
                    }
                }
            } else {
                Box::pin(std::future::pending())
            };
            tokio::select! {
                biased;
                () = cancel.as_mut() => return Err(cancelled(last_error)),
                () = tokio::time::sleep_until(deadline) => {
                    return Err(last_error.unwrap_or_else(|| Error::Held {
                        resource: prepared.name.to_vec(),
                        unreachable: 0,
                        outcomes: Vec::new(),
                    }));
                }
                () = woken => {}
                () = pause => {}
            }
        }
    }

    /// How many callers of this lock are waiting for `resource` now, alone or in a set.
    pub fn waiters(&self, resource: impl AsRef<[u8]>) -> usize {
        let settings = &self.node_set().settings;
        // A name no key can be made of has nobody waiting for it.
        settings
            .lock_key(resource.as_ref())
            .map_or(0, |key| self.node_set().wait_list.waiters(&key))
    }
}

/// `Cancelled`, with the last attempt's outcomes if there was one.
fn cancelled(last_error: Option<Error>) -> Error {
    let outcomes = last_error.map(|error| error.outcomes().to_vec());
    Error::Cancelled {
        outcomes: outcomes.unwrap_or_default(),
    }
}

/// Completes once `quorum` of the nodes confirmed their subscription, or once so many failed
/// that no quorum can: then only the expiry bound tells a waiter of a release it missed. A
/// slower minority's confirmation is not waited for: a release that frees a quorum for us
/// deletes the holder's key on a quorum of nodes, and two quorums share a node.
async fn confirmed_by_quorum(subscribed: Vec<oneshot::Receiver<()>>, quorum: usize) {
    let total = subscribed.len();
    let mut pending: FuturesUnordered<_> = subscribed.into_iter().collect();
    let (mut confirmed, mut failed) = (0usize, 0usize);
    while confirmed < quorum && total.saturating_sub(failed) >= quorum {
        match pending.next().await {
            Some(Ok(())) => confirmed += 1,
            Some(Err(_)) => failed += 1,
            None => return,
        }
    }
}
