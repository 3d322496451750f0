//! [`Patience`]: how an acquisition gets a held lock, as plain configuration (the waiting itself
//! is the API's, `lock/wait.rs`).

use std::time::Duration;

use crate::rules::retry::RetryPolicy;

/// How an acquisition gets a lock someone else holds: give up at once, wait woken by the
/// release, or poll on a retry policy. The lock's default is set with
/// [`LockOptions::patience`](crate::LockOptions::patience) (unset: wait up to the TTL), and one
/// request overrides it with [`Request::patience`](crate::Request::patience).
///
/// ```
/// use std::time::Duration;
/// use quorumlock::{Patience, Request, RetryPolicy};
///
/// let once = Request::from("report").patience(Patience::Once);
/// let woken = Request::from("report").patience(Patience::Wait(Duration::from_secs(5)));
/// let polled = Request::from("report").patience(Patience::Retry(RetryPolicy::default()));
/// # let _ = (once, woken, polled);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Patience {
    /// One attempt: [`Error::Held`](crate::Error::Held) at once if someone else holds the lock.
    Once,
    /// Wait up to this long, queued in arrival order with this lock's other waiters of the same
    /// resources, woken by a release (by any client) or by the holder's keys expiring on a
    /// quorum; never on a poll timer. Zero makes one attempt.
    Wait(Duration),
    /// Poll: the policy's attempts, with its pauses between them. For nodes whose clients'
    /// releases are not heard, or to bound the number of attempts.
    Retry(RetryPolicy),
}
