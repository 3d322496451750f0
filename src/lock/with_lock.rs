//! [`Lock::with_lock`]: the caller's work run under a kept lock, released on every path.

use std::future::Future;
use std::pin::pin;

use crate::error::Error;
use crate::keep_alive::KeepAlive;
use crate::lease::Lease;
use crate::lock::Lock;
use crate::request::Request;

impl Lock {
    /// Acquires what `request` names as [`acquire`](Lock::acquire) does, keeps the lock alive while
    /// `work` runs, and releases it when `work` is done, on every path: `work` finishing, the
    /// lock being lost, `work` panicking, or this future being dropped.
    ///
    /// `work` gets the [`Lease`] (for its fence, and to check `is_valid()` before each
    /// protected write). If the lock is lost first, `work`'s future is dropped at once (it
    /// stops at its current `.await`) and the result is [`Error::Lost`] with the reason.
    ///
    /// # Errors
    ///
    /// Those of [`Lock::acquire`] and [`Guard::keep_alive`](crate::Guard::keep_alive), and [`Error::Lost`] when the
    /// lock is lost while `work` runs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::{KeepAlive, Lock, LockOptions};
    ///
    /// let lock = Lock::new(
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
    pub async fn with_lock<'a, F, Fut, T>(
        &self,
        request: impl Into<Request<'a>>,
        keep_alive: KeepAlive,
        work: F,
    ) -> Result<T, Error>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let kept = self.acquire(request).await?.keep_alive(keep_alive)?;
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
