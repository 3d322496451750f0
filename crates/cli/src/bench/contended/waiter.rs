//! One waiter of the contended section: it wants the key, gets it the way its contender does
//! (waiting, polling, rslock's loop), holds it, releases it and wants it again at once, until
//! the step's deadline. Every moment is read on CLOCK_MONOTONIC, the one clock that all the
//! processes of one machine share, so that the waiters of several processes can be put on one
//! time line afterwards.

use quorumlock::{Patience, Request};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use quorumlock::{Error, Guard, Lock, Resources, RetryPolicy};
use serde::{Deserialize, Serialize};

use crate::bench::rslock::Rslock;

/// Nanoseconds on CLOCK_MONOTONIC (what `Instant` reads on Linux too), shared by every process
/// on the machine.
pub(crate) fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// From now until `ns` on the monotonic clock (zero once it has passed).
pub(crate) fn until(ns: u64) -> Duration {
    Duration::from_nanos(ns.saturating_sub(now_ns()))
}

/// How a waiter gets the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Kind {
    /// `Lock::acquire` with `Patience::Wait`: woken by the release or by expiry, FIFO within
    /// one `Lock`.
    Waiting,
    /// The same for a set of three resources (the key and two more), all or none.
    #[value(name = "waiting-set3")]
    #[serde(rename = "waiting-set3")]
    WaitingSet3,
    /// `Patience::Retry`: unbounded attempts every 1 ms plus up to [`POLL_JITTER`].
    #[value(name = "polling-1ms")]
    #[serde(rename = "polling-1ms")]
    Polling1ms,
    /// `Patience::Retry` with the library's default policy (3 attempts 100–200 ms apart),
    /// called again while it gives up.
    PollingDefault,
    /// rslock's `lock` with its own retry loop as it comes (3 tries, 0–200 ms apart), called
    /// again while it gives up.
    Rslock,
    /// `Lock::acquire` of one of [`PERMITS`] permits (`Request::permits`) with
    /// `Patience::Wait`: woken by the release or expiry of any slot. The semaphore section's
    /// contender, not the one-key table's.
    Semaphore,
}

impl Kind {
    pub(crate) const ALL: [Kind; 5] = [
        Kind::Waiting,
        Kind::WaitingSet3,
        Kind::Polling1ms,
        Kind::PollingDefault,
        Kind::Rslock,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Waiting => "waiting",
            Kind::WaitingSet3 => "waiting-set3",
            Kind::Polling1ms => "polling-1ms",
            Kind::PollingDefault => "polling-default",
            Kind::Rslock => "rslock",
            Kind::Semaphore => "semaphore",
        }
    }
}

/// The set the `waiting-set3` contender takes: `key` and two resources beside it.
fn set3(key: &str) -> Result<Resources, quorumlock::ConfigError> {
    Resources::new([key.to_owned(), format!("{key}:b"), format!("{key}:c")])
}

/// The permits of the semaphore contender.
pub(crate) const PERMITS: u32 = 4;

/// The polling contender's jitter on top of its 1 ms delay.
pub(crate) const POLL_JITTER: Duration = Duration::from_micros(250);
/// The pause after an attempt that failed for another reason than a held lock, so that a node
/// that went away does not make a hot loop.
const ERROR_PAUSE: Duration = Duration::from_millis(1);
/// Calls one waiter makes at most in one step, whatever its duration.
const MAX_CALLS: u64 = 1_000_000;

/// One of our locks or rslock, with the contender's way of getting it.
#[derive(Clone)]
pub(crate) enum Acquirer {
    Lock(Lock, Kind),
    Rslock(Rslock),
}

/// What a waiter holds.
enum Held {
    Guard(Guard),
    Rslock(::rslock::Lock),
}

impl Held {
    /// The semaphore slot held: the number after the resource's last `:` (`name:3`). Asked
    /// of a semaphore's guards only: a plain key's name may end in a number too.
    fn slot(&self) -> Option<u32> {
        let Held::Guard(guard) = self else {
            return None;
        };
        let resource = guard.resource();
        let at = resource.iter().rposition(|&b| b == b':')?;
        std::str::from_utf8(resource.get(at + 1..)?)
            .ok()?
            .parse()
            .ok()
    }
}

/// How one call ended.
enum Call {
    Got(Held),
    /// It gave up while the lock was held (the contender's own retries ran out): call again.
    Refused,
    /// Another error (nodes unavailable, …).
    Failed,
    /// The step's deadline came first.
    Deadline,
}

impl Acquirer {
    /// The contender's name.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Acquirer::Lock(_, kind) => *kind,
            Acquirer::Rslock(_) => Kind::Rslock,
        }
    }

    /// One call that gets `key` or gives up, by `end` at the latest (an attempt under way then
    /// is finished).
    async fn call(&self, key: &str, end: u64) -> Call {
        let left = until(end);
        if left.is_zero() {
            return Call::Deadline;
        }
        let result = match self {
            Acquirer::Lock(lock, Kind::Waiting) => {
                lock.acquire(Request::from(key).patience(Patience::Wait(left)))
                    .await
            }
            Acquirer::Lock(lock, Kind::Semaphore) => {
                let request = Request::from(key).permits(PERMITS);
                lock.acquire(request.patience(Patience::Wait(left))).await
            }
            Acquirer::Lock(lock, Kind::WaitingSet3) => match set3(key) {
                Ok(set) => {
                    lock.acquire(Request::from(&set).patience(Patience::Wait(left)))
                        .await
                }
                Err(error) => Err(error.into()),
            },
            Acquirer::Lock(lock, kind) => {
                let policy = match kind {
                    Kind::Polling1ms => RetryPolicy::new()
                        .attempts(u32::MAX)
                        .delay(Duration::from_millis(1))
                        .jitter(POLL_JITTER)
                        .max_wait(left),
                    _ => RetryPolicy::default(),
                };
                lock.acquire_until(
                    Request::from(key).patience(Patience::Retry(policy.clone())),
                    tokio::time::sleep(left),
                )
                .await
            }
            Acquirer::Rslock(rslock) => {
                return match tokio::time::timeout(left, rslock.lock(key)).await {
                    Ok(Some(lock)) => Call::Got(Held::Rslock(lock)),
                    Ok(None) if until(end).is_zero() => Call::Deadline,
                    Ok(None) => Call::Refused,
                    Err(_) => Call::Deadline,
                };
            }
        };
        match result {
            Ok(guard) => Call::Got(Held::Guard(guard)),
            Err(Error::Cancelled { .. }) => Call::Deadline,
            Err(_) if until(end).is_zero() => Call::Deadline,
            Err(Error::Held { .. }) => Call::Refused,
            Err(_) => Call::Failed,
        }
    }

    async fn release(&self, held: Held) {
        match (self, held) {
            (_, Held::Guard(guard)) => {
                guard.release().await;
            }
            (Acquirer::Rslock(rslock), Held::Rslock(lock)) => rslock.unlock(&lock).await,
            (Acquirer::Lock(..), Held::Rslock(_)) => {}
        }
    }

    /// Untimed: connections made (for the waiting lock, its subscriptions too), scripts loaded.
    pub(crate) async fn warm_up(&self, key: &str) {
        for _ in 0..super::WARM_CALLS {
            match self {
                Acquirer::Lock(lock, Kind::Waiting) => {
                    if let Ok(guard) = lock
                        .acquire(Request::from(key).patience(Patience::Wait(Duration::ZERO)))
                        .await
                    {
                        guard.release().await;
                    }
                }
                Acquirer::Lock(lock, Kind::Semaphore) => {
                    let request = Request::from(key).permits(PERMITS);
                    if let Ok(guard) = lock
                        .acquire(request.patience(Patience::Wait(Duration::ZERO)))
                        .await
                    {
                        guard.release().await;
                    }
                }
                Acquirer::Lock(lock, Kind::WaitingSet3) => {
                    let Ok(set) = set3(key) else { return };
                    let request = Request::from(&set).patience(Patience::Wait(Duration::ZERO));
                    if let Ok(guard) = lock.acquire(request).await {
                        guard.release().await;
                    }
                }
                Acquirer::Lock(lock, _) => {
                    if let Ok(guard) = lock.try_acquire(key).await {
                        guard.release().await;
                    }
                }
                Acquirer::Rslock(rslock) => {
                    if let Some(lock) = rslock.lock(key).await {
                        rslock.unlock(&lock).await;
                    }
                }
            }
        }
    }
}

/// What one waiter did in one step.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct WaiterRecord {
    /// Which waiter (unique within the step, across processes).
    pub(crate) id: u32,
    /// Each hold: `[asked, acquired, released]` in ns on CLOCK_MONOTONIC: when the waiter began
    /// to want the key, when its acquire returned, when its release started.
    pub(crate) holds: Vec<[u64; 3]>,
    /// For a semaphore, the slot of each hold (in the order of `holds`); empty for one key.
    #[serde(default)]
    pub(crate) slots: Vec<u32>,
    /// Calls that gave up while the lock was held (and were made again).
    pub(crate) refused: u64,
    /// Calls that failed otherwise.
    pub(crate) errors: u64,
    /// When the wait the deadline cut short began, if one did.
    pub(crate) cut: Option<u64>,
}

/// The shared budget of one step: holds left to take.
pub(crate) struct Budget(AtomicU64);

impl Budget {
    pub(crate) fn new(holds: u64) -> Budget {
        Budget(AtomicU64::new(holds))
    }

    fn left(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }

    fn take(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// Waiter `id`: wants `key`, holds it for `hold`, releases it, wants it again at once; until
/// `end` (ns, CLOCK_MONOTONIC), `budget` runs out or [`MAX_CALLS`] calls were made.
pub(crate) async fn waiter(
    acquirer: &Acquirer,
    key: &str,
    id: u32,
    hold: Duration,
    end: u64,
    budget: &Budget,
) -> WaiterRecord {
    let mut record = WaiterRecord {
        id,
        ..WaiterRecord::default()
    };
    let mut asked = None;
    for _ in 0..MAX_CALLS {
        let now = now_ns();
        if now >= end || !budget.left() {
            break;
        }
        let since = *asked.get_or_insert(now);
        match acquirer.call(key, end).await {
            Call::Got(held) => {
                let acquired = now_ns();
                if acquirer.kind() == Kind::Semaphore {
                    record.slots.push(held.slot().unwrap_or(u32::MAX));
                }
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                let released = now_ns();
                acquirer.release(held).await;
                record.holds.push([since, acquired, released]);
                budget.take();
                asked = None;
            }
            Call::Refused => record.refused += 1,
            Call::Failed => {
                record.errors += 1;
                tokio::time::sleep(ERROR_PAUSE).await;
            }
            Call::Deadline => break,
        }
    }
    record.cut = asked;
    record
}
