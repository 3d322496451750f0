//! The leader's side of an [`Election`]: campaigning (waiting for the election's lock, then
//! publishing the leader record on a quorum), the [`Leadership`] that keeps the lock alive
//! with the election's timing, and [`Election::lead`], which runs the caller's work while
//! leading and resigns on every path.

use std::future::Future;
use std::ops::Deref;
use std::pin::pin;
use std::time::Duration;

use crate::error::{Error, Lost};
use crate::guard::{Guard, ReleaseReport};
use crate::keep_alive::{KeepAlive, KeptGuard};
use crate::lease::Lease;
use crate::node::leader::publish;
use crate::outcome::NodeReply;
use crate::request::Request;
use crate::round::fan_out::{Until, fan_out};
use crate::rules::patience::Patience;
use crate::rules::quorum::Verdict;

use super::Election;

/// A campaign waits this long at most (about 30 years): for as long as it takes.
const FOREVER: Duration = Duration::from_secs(1 << 30);

/// Leading an election, won by [`Election::campaign`]: the election's lock, kept alive every
/// retry period, and the term and value published with it. Dereferences to its [`Lease`]:
/// `is_valid()` before each act of leadership, `lost()` to hear the end of it.
///
/// Dropping it resigns in the background, as dropping a guard releases.
#[must_use = "dropping a leadership resigns at once"]
pub struct Leadership {
    kept: KeptGuard,
    term: u64,
    value: Vec<u8>,
    elected_at: std::time::Instant,
}

impl Leadership {
    /// The term: the quorum's fence of this leadership, larger than every earlier leader's.
    /// Pass it with every write a store can check ([`FencedWrite`](crate::FencedWrite)).
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The value published with it.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// When the quorum's decision that made this leader was made: leadership counts from
    /// here (its validity was measured from the acquisition's start, before it).
    pub fn elected_at(&self) -> std::time::Instant {
        self.elected_at
    }

    /// A handle on the lease, for the code that leads.
    pub fn lease(&self) -> Lease {
        self.kept.lease()
    }

    /// Steps down at once: releases the election's lock on every node, which wakes the
    /// candidates and observers, so the next leader is elected without waiting out the lease.
    pub async fn resign(self) -> ReleaseReport {
        self.kept.release().await
    }
}

impl Deref for Leadership {
    type Target = Lease;

    fn deref(&self) -> &Lease {
        &self.kept
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("term", &self.term)
            .field("value", &String::from_utf8_lossy(&self.value))
            .field("valid", &self.kept.is_valid())
            .finish()
    }
}

impl Election {
    /// Waits to be elected, publishing `value` (an address, say; at most what a Redis string
    /// holds) as the leader's: returns once this caller holds the election's lock and a quorum
    /// took its record. Woken by the leader's release or its key's expiry on a quorum, never
    /// on a timer. Dropping the future stops the campaign and releases whatever it took.
    ///
    /// # Errors
    ///
    /// Those of [`Lock::acquire`](crate::Lock::acquire) when the nodes fail it (not
    /// [`Error::Held`]: a held lock is waited for), [`Error::NotPublished`] when the record did
    /// not reach a quorum (the lock is released), and those of
    /// [`Guard::keep_alive`](crate::Guard::keep_alive).
    pub async fn campaign(&self, value: impl Into<Vec<u8>>) -> Result<Leadership, Error> {
        let value = value.into();
        let request = Request::from(&*self.name)
            .ttl(self.options.lease_duration)
            .patience(Patience::Wait(FOREVER));
        let guard = self.lock.acquire(request).await?;
        let term = guard.fence().unwrap_or(0);
        let elected_at = guard.decided_at();
        if let Err(error) = self.publish(&guard, term, &value).await {
            guard.release().await;
            return Err(error);
        }
        let keep_alive = KeepAlive::new().every(self.options.retry_period).distrust(
            self.options
                .lease_duration
                .saturating_sub(self.options.renew_deadline),
        );
        let kept = guard.keep_alive(keep_alive)?;
        Ok(Leadership {
            kept,
            term,
            value,
            elected_at,
        })
    }

    /// Waits to be elected as [`campaign`](Election::campaign) does, runs `work` while leading,
    /// and resigns when it is done, on every path: `work` finishing, leadership being lost,
    /// `work` panicking, or this future being dropped. `work` gets the [`Lease`]: its
    /// `fence()` is the term. If leadership is lost first, `work`'s future is dropped at once
    /// and the result is [`Error::Lost`].
    ///
    /// # Errors
    ///
    /// Those of [`campaign`](Election::campaign), and [`Error::Lost`].
    pub async fn lead<F, Fut, T>(&self, value: impl Into<Vec<u8>>, work: F) -> Result<T, Error>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let leadership = self.campaign(value).await?;
        let outcome = {
            let work = pin!(work(leadership.lease()));
            tokio::select! {
                biased;
                lost = leadership.lost() => Err::<T, Lost>(lost),
                value = work => Ok(value),
            }
        };
        leadership.resign().await;
        outcome.map_err(Error::Lost)
    }

    /// Writes the leader record of `guard`'s holder on every node where its key holds; a
    /// quorum must take it, else the lock is released.
    async fn publish(&self, guard: &Guard, term: u64, value: &[u8]) -> Result<(), Error> {
        let node_set = self.lock.node_set();
        let token = guard.token().as_str().to_owned();
        let round = fan_out(
            &node_set.nodes,
            node_set.settings.quorum,
            Until::Decided,
            pin!(std::future::pending::<()>()),
            "publish_leader",
            |node| {
                let (key, record_key) = (self.key.clone(), self.record_key.clone());
                let (token, value) = (token.clone(), value.to_vec());
                async move {
                    NodeReply::from_flag(
                        publish(&node, &key, &record_key, &token, term, &value).await,
                    )
                }
            },
        )
        .await;
        if let Some(unanswered) = round.unanswered {
            // The slower nodes take the record too, so a reader there sees it.
            node_set.background.finish_unanswered(unanswered);
        }
        if round.verdict == Some(Verdict::Won) {
            return Ok(());
        }
        Err(Error::NotPublished {
            term,
            outcomes: round.outcomes,
        })
    }
}
