//! A waiter's sleep until a held lock's keys expire, ended on time. Tokio's timer counts whole
//! milliseconds and parks its driver in them, so its sleeps end up to about 2 ms late; sleeping
//! out a crashed holder's lease, that lateness adds to every fail-over. So the last few
//! milliseconds are slept by a thread of Tokio's blocking pool, whose `nanosleep` ends within
//! tens of microseconds. Only the last stretch: a waiter keeps no thread for the long part of
//! its sleep, and one dropped while that thread sleeps costs the thread those milliseconds.

use std::time::Duration;

use tokio::time::Instant;

/// How long before a held lock's keys expire a waiter reads their expiry again, and sleeps out
/// what that read says. A long sleep by the waiter's clock drifts from the servers' clocks; and
/// on a machine idle through it the first round trip after it costs milliseconds (5 ms after
/// 1 s idle, 85 µs when busy, on the 2-core VM of docs/benchmarks.md), which this read pays
/// before the expiry instead of the attempt after it.
pub(super) const REREAD_AHEAD: Duration = Duration::from_millis(10);

/// How long a waiter refused by a holder waits before it reads the expiry, unless woken
/// first. Where waiters of several processes contend, each release wakes one in each process and
/// all but one are refused: reading at once doubled what the losers sent the nodes, on the CPUs
/// the next hand-off needs (docs/benchmarks.md). A holder that crashes instead costs at most
/// this much more (on Tokio's timer, up to 2 ms late), and only if its keys expire within it.
pub(super) const READ_AFTER_REFUSAL: Duration = Duration::from_millis(3);

/// How long before the end the sleep moves from Tokio's timer to a thread: more than Tokio's
/// lateness, so the first part does not already end past the deadline.
const LAST_STRETCH: Duration = Duration::from_millis(3);

/// Sleeps until `deadline`, ending within tens of microseconds of it unless the machine is
/// too busy to run the thread or the task on time.
pub(super) async fn sleep_until(deadline: Instant) {
    if let Some(start) = deadline.checked_sub(LAST_STRETCH) {
        tokio::time::sleep_until(start).await;
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return;
    }
    // A blocking pool that cannot run it (the runtime shutting down) leaves Tokio's timer.
    if tokio::task::spawn_blocking(move || std::thread::sleep(left))
        .await
        .is_err()
    {
        tokio::time::sleep_until(deadline).await;
    }
}
