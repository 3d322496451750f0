//! Whatever a throughput step can run: one of our locks, a raw-command floor, or rslock, each
//! cycling acquire+release on its own keys.

use quorumlock::Lock;
use quorumlock_harness::RawFloor;

use super::loops::{Cycle, lock_cycle, warm_up};
use super::plan::WARMUP;
use super::rslock::Rslock;

/// One contender of a throughput step.
#[derive(Clone)]
pub(super) enum Contender {
    Lock(Lock),
    /// The lock's commands over plain redis-rs, with `TCP_NODELAY` like the lock's.
    Raw(RawFloor),
    Rslock(Rslock),
}

impl Contender {
    /// Untimed cycles before a measurement: connections made, scripts loaded, caches warm.
    pub(super) async fn warm_up(&self, key: &str) {
        match self {
            Contender::Lock(lock) => warm_up(lock, key).await,
            Contender::Raw(_) | Contender::Rslock(_) => {
                for i in 0..WARMUP {
                    self.cycle(&format!("{key}:{i}")).await;
                }
            }
        }
    }

    /// One acquire+release on `key`; true when it was granted (and, for our locks, released on
    /// a quorum).
    pub(super) async fn cycle(&self, key: &str) -> bool {
        match self {
            Contender::Lock(lock) => lock_cycle(lock, key).await,
            Contender::Raw(raw) => raw.cycle(key).await,
            Contender::Rslock(rslock) => rslock.cycle(key).await,
        }
    }
}

impl Cycle for Contender {
    fn cycle(&self, key: &str) -> impl Future<Output = bool> + Send {
        Contender::cycle(self, key)
    }
}
