//! Whatever a throughput step can run: one of our locks, a raw-command floor, or rslock, each
//! cycling acquire+release on its own keys.

use quorumlock::Lock;

use super::loops::{Cycle, lock_cycle, warm_up};
use super::raw::Raw;
use super::rslock::Rslock;

/// One contender of a throughput step.
#[derive(Clone)]
pub(super) enum Contender {
    Lock(Lock),
    Raw(Raw),
    Rslock(Rslock),
}

impl Contender {
    /// Untimed cycles before a measurement.
    pub(super) async fn warm_up(&self, key: &str) {
        match self {
            Contender::Lock(lock) => warm_up(lock, key).await,
            Contender::Raw(raw) => raw.warm_up().await,
            Contender::Rslock(rslock) => rslock.warm_up().await,
        }
    }

    /// One acquire+release on `key`; true when it was granted (and, for our locks, released on
    /// a quorum).
    pub(super) async fn cycle(&self, key: &str) -> bool {
        match self {
            Contender::Lock(lock) => lock_cycle(lock, key).await,
            Contender::Raw(raw) => raw.cycle(key, key).await,
            Contender::Rslock(rslock) => rslock.cycle(key).await,
        }
    }
}

impl Cycle for Contender {
    fn cycle(&self, key: &str) -> impl Future<Output = bool> + Send {
        Contender::cycle(self, key)
    }
}
