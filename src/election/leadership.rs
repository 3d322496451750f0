//! The leader's side of an [`Election`]: campaigning (waiting for the election's lock, then
//! publishing the leader record on a quorum), the [`Leadership`] that keeps the lock alive
//! with the election's timing, and [`Election::lead`], which runs the caller's work while
//! leading and resigns on every path.

use std::future::Future;
use std::ops::Deref;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Lost};
use crate::guard::ReleaseReport;
use crate::keep_alive::{KeepAlive, KeptGuard};
use crate::lease::Lease;
use crate::request::Request;
use crate::rules::leader::Publication;
use crate::rules::patience::Patience;

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
    /// Failures that may pass (a timeout, a refused connection, a minority down) are tried
    /// again, with pauses, for as long as it takes; to bound a campaign, drop it (wrap it in
    /// `tokio::time::timeout`). It returns an error no retry can cure
    /// ([`Error::is_permanent`](crate::Error::is_permanent)) at once: [`Error::Unavailable`]
    /// when too few nodes can vote for good (a refused password, nodes that do not persist
    /// every write, [`NodeError::NotDurable`](crate::NodeError::NotDurable)), or
    /// [`Error::Config`]. Also [`Error::NotPublished`] when the record did not reach a quorum
    /// (the lock is released), and those of [`Guard::keep_alive`](crate::Guard::keep_alive).
    pub async fn campaign(&self, value: impl Into<Vec<u8>>) -> Result<Leadership, Error> {
        let value = value.into();
        // The grants write the record, or the fence's write-back when it raises the term: by
        // the time the lock is won, a quorum holds the record with the term.
        let request = Request::from(&*self.name)
            .ttl(self.options.lease_duration)
            .patience(Patience::Wait(FOREVER))
            .publishing(Publication {
                record_key: Arc::clone(&self.record_key),
                value: Arc::from(&value[..]),
            });
        let guard = match self.lock.acquire(request).await {
            Ok(guard) => guard,
            Err(Error::FenceUnconfirmed {
                fence, outcomes, ..
            }) => {
                return Err(Error::NotPublished {
                    term: fence,
                    outcomes,
                });
            }
            Err(error) => return Err(error),
        };
        let term = guard.fence().unwrap_or(0);
        let elected_at = guard.decided_at();
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
}
