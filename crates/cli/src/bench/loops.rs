//! The measurement loops against one lock: sequential cycles, acquire-only, release-only,
//! concurrent throughput (of anything that can [`Cycle`]), contended hand-off, and the
//! allocation count. Every loop is bounded in count and in time.

use quorumlock::{Patience, Request};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use quorumlock::{Error, Lock, RetryPolicy};
use tokio::task::JoinHandle;

use super::alloc::ALLOC;
use super::plan::{SETTLE_CAP, SETTLE_EVERY, THROUGHPUT_MAX_OPS, WARMUP};
use super::stats::{Tally, new_histogram, record};

/// Untimed acquire+release cycles: connections made, scripts loaded, caches warm.
pub(super) async fn warm_up(lock: &Lock, key: &str) {
    for _ in 0..WARMUP {
        if let Ok(guard) = lock.try_acquire(key).await {
            guard.release().await;
        }
    }
}

/// A bounded loop over fresh keys: `{key_base}:{first}`, `{key_base}:{first + 1}`, … for at
/// most `ops` operations or `cap` of time, whichever comes first.
#[derive(Debug, Clone, Copy)]
pub(super) struct Batch<'a> {
    pub(super) key_base: &'a str,
    pub(super) first: u64,
    pub(super) ops: u64,
    pub(super) cap: Duration,
}

impl Batch<'_> {
    /// Runs `op(key, i)` for the `i`-th key from 0; returns the time the whole loop took.
    async fn run(self, mut op: impl AsyncFnMut(&str, u64)) -> Duration {
        let mut key = String::new();
        let started = Instant::now();
        for i in 0..self.ops {
            if started.elapsed() >= self.cap {
                break;
            }
            key.clear();
            let _ = write!(key, "{}:{}", self.key_base, self.first + i);
            op(&key, i).await;
        }
        started.elapsed()
    }
}

/// Sequential acquire+release cycles, each on a fresh key (so that one lost release cannot fail
/// the cycles after it), timed as a whole.
pub(super) async fn cycles(lock: &Lock, batch: Batch<'_>, tally: &mut Tally) {
    timed_cycles(batch, tally, async |key| lock_cycle(lock, key).await).await;
}

/// One acquire+release of `key`; true when it was granted and released on a quorum.
pub(super) async fn lock_cycle(lock: &Lock, key: &str) -> bool {
    match lock.try_acquire(key).await {
        Ok(guard) => guard.release().await.held >= lock.quorum_size(),
        Err(_) => false,
    }
}

/// Runs `cycle` on each key of `batch`; adds the time of each successful cycle, the failed
/// cycles and the wall time of the whole loop to `tally`.
pub(super) async fn timed_cycles(
    batch: Batch<'_>,
    tally: &mut Tally,
    mut cycle: impl AsyncFnMut(&str) -> bool,
) {
    tally.wall += batch
        .run(async |key, _| {
            let t = Instant::now();
            if cycle(key).await {
                record(&mut tally.hist, t.elapsed());
            } else {
                tally.errors += 1;
            }
        })
        .await;
}

/// One acquisition of the free `key`, its time (or its error) counted in `tally`, then released
/// untimed: a lock's quorum round trip, which sections divide hand-offs by.
pub(super) async fn timed_acquire(lock: &Lock, key: &str, tally: &mut Tally) {
    let started = Instant::now();
    match lock.try_acquire(key).await {
        Ok(guard) => {
            record(&mut tally.hist, started.elapsed());
            guard.release().await;
        }
        Err(_) => tally.errors += 1,
    }
}

/// Allocations per acquire+release cycle, counted over a quiet sequential loop.
pub(super) async fn allocs_per_cycle(lock: &Lock, key: &str, cycles: u64) -> f64 {
    let before = ALLOC.allocations();
    let mut done = 0u64;
    for _ in 0..cycles {
        if let Ok(guard) = lock.try_acquire(key).await {
            guard.release().await;
            done += 1;
        }
    }
    let after = ALLOC.allocations();
    if done == 0 {
        f64::NAN
    } else {
        after.saturating_sub(before) as f64 / done as f64
    }
}

/// Waits (untimed, bounded) for background releases.
pub(super) async fn settle(lock: &Lock) {
    let _ = tokio::time::timeout(SETTLE_CAP, lock.settle()).await;
}

/// Acquisitions of fresh keys, timed alone; each guard is dropped and so released in the
/// background, and the loop waits for those releases outside the timed section every
/// [`SETTLE_EVERY`] acquisitions.
pub(super) async fn acquires(lock: &Lock, batch: Batch<'_>, tally: &mut Tally) {
    batch
        .run(async |key, i| {
            let t = Instant::now();
            let result = lock.try_acquire(key).await;
            let elapsed = t.elapsed();
            tally.wall += elapsed;
            match result {
                Ok(guard) => {
                    record(&mut tally.hist, elapsed);
                    drop(guard);
                }
                Err(_) => tally.errors += 1,
            }
            if i % SETTLE_EVERY == SETTLE_EVERY - 1 {
                settle(lock).await;
            }
        })
        .await;
    settle(lock).await;
}

/// Releases timed alone: acquire untimed, time `release()`.
pub(super) async fn releases(lock: &Lock, batch: Batch<'_>, tally: &mut Tally) {
    batch
        .run(async |key, _| match lock.try_acquire(key).await {
            Ok(guard) => {
                let t = Instant::now();
                guard.release().await;
                let elapsed = t.elapsed();
                tally.wall += elapsed;
                record(&mut tally.hist, elapsed);
            }
            Err(_) => tally.errors += 1,
        })
        .await;
}

/// What the throughput loop runs: one acquire+release of a key, true when it was granted.
pub(super) trait Cycle: Clone + Send + Sync + 'static {
    fn cycle(&self, key: &str) -> impl Future<Output = bool> + Send;
}

/// `tasks` tasks, each cycling acquire+release on its own key for `duration`.
pub(super) async fn throughput(
    contender: &impl Cycle,
    tag: &str,
    tasks: usize,
    duration: Duration,
    tally: &mut Tally,
) {
    let ops_cap = THROUGHPUT_MAX_OPS / tasks.max(1) as u64;
    let started = Instant::now();
    let deadline = started + duration;
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let contender = contender.clone();
            let key_base = format!("{tag}:{task}");
            tokio::spawn(async move {
                let mut hist = new_histogram();
                let mut errors = 0u64;
                let mut key = String::new();
                for i in 0..ops_cap {
                    if Instant::now() >= deadline {
                        break;
                    }
                    key.clear();
                    let _ = write!(key, "{key_base}:{i}");
                    let t = Instant::now();
                    if contender.cycle(&key).await {
                        record(&mut hist, t.elapsed());
                    } else {
                        errors += 1;
                    }
                }
                (hist, errors)
            })
        })
        .collect();
    join(handles, tally).await;
    tally.wall += started.elapsed();
}

/// `contenders` tasks wanting one key. A holder keeps it for `hold`, notes the instant it starts
/// to release, releases, and rests for `hold` before competing again; the sample is the time
/// from that instant to the next holder's successful acquire.
pub(super) async fn handoff(
    lock: &Lock,
    key: &str,
    contenders: usize,
    duration: Duration,
    max: u64,
    hold: Duration,
    tally: &mut Tally,
) {
    let started = Instant::now();
    let deadline = started + duration;
    let last_release: Arc<Mutex<Option<Instant>>> = Arc::default();
    let count = Arc::new(AtomicU64::new(0));
    // Waiters poll: retry every 0.2–1 ms until the step's deadline.
    let policy = RetryPolicy::new()
        .attempts(u32::MAX)
        .delay(Duration::from_micros(200))
        .jitter(Duration::from_micros(800))
        .max_wait(duration + Duration::from_secs(1));
    let handles: Vec<_> = (0..contenders)
        .map(|_| {
            let (lock, key, policy) = (lock.clone(), key.to_owned(), policy.clone());
            let (last_release, count) = (Arc::clone(&last_release), Arc::clone(&count));
            tokio::spawn(async move {
                let mut hist = new_histogram();
                let mut errors = 0u64;
                while Instant::now() < deadline && count.load(Ordering::Relaxed) < max {
                    let cancel = tokio::time::sleep_until(deadline.into());
                    match lock
                        .acquire_until(
                            Request::from(&key).patience(Patience::Retry(policy.clone())),
                            cancel,
                        )
                        .await
                    {
                        Ok(guard) => {
                            let now = Instant::now();
                            let previous = last_release
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .take();
                            if let Some(previous) = previous {
                                record(&mut hist, now.saturating_duration_since(previous));
                                count.fetch_add(1, Ordering::Relaxed);
                            }
                            tokio::time::sleep(hold).await;
                            *last_release.lock().unwrap_or_else(PoisonError::into_inner) =
                                Some(Instant::now());
                            guard.release().await;
                            tokio::time::sleep(hold).await;
                        }
                        Err(Error::Cancelled { .. }) => break,
                        Err(_) => errors += 1,
                    }
                }
                (hist, errors)
            })
        })
        .collect();
    join(handles, tally).await;
    tally.wall += started.elapsed();
}

/// Waits for every task and adds their histograms and error counts to `tally`; a task that
/// panicked counts as one error.
async fn join(handles: Vec<JoinHandle<(Histogram<u64>, u64)>>, tally: &mut Tally) {
    for handle in handles {
        match handle.await {
            Ok((hist, errors)) => {
                let _ = tally.hist.add(&hist);
                tally.errors += errors;
            }
            Err(_) => tally.errors += 1,
        }
    }
}
