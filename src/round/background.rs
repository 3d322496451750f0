//! Work that outlives the call that started it: releases started from `Drop` (a guard dropped
//! without `release`, an acquisition cancelled mid-flight) and requests still in flight when a
//! round was decided. Counted, so that [`Lock::settle`](crate::Lock::settle) can wait for it, for
//! example before a service shuts down.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::runtime::Handle;
use tokio::sync::Notify;

/// Counts background tasks and wakes waiters when the count drops to zero.
#[derive(Debug, Default)]
pub(crate) struct Background {
    pending: AtomicUsize,
    idle: Notify,
}

/// One counted task; uncounts itself when dropped, whether the task finished, panicked, or was
/// dropped by a runtime shutting down.
struct Ticket(Arc<Background>);

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Background {
    /// Runs `task` on the current runtime, or on `fallback` when called outside one. Returns
    /// false when there is no runtime to run it on.
    pub(crate) fn spawn<F>(self: &Arc<Self>, fallback: Option<&Handle>, task: F) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(handle) = Handle::try_current().ok().or_else(|| fallback.cloned()) else {
            return false;
        };
        self.pending.fetch_add(1, Ordering::AcqRel);
        let ticket = Ticket(Arc::clone(self));
        handle.spawn(async move {
            let _ticket = ticket;
            task.await;
        });
        true
    }

    /// Lets the requests of a decided round that were still unanswered finish: at once if they
    /// have all finished meanwhile (their replies had arrived by the decision), else as a
    /// counted task on the current runtime. Spawning costs more than the one poll that often
    /// makes it needless.
    pub(crate) fn finish_unanswered(self: &Arc<Self>, mut unanswered: BoxFuture<'static, ()>) {
        if (&mut unanswered).now_or_never().is_none() {
            self.spawn(None, unanswered);
        }
    }

    /// Waits until no counted task is left.
    pub(crate) async fn settle(&self) {
        loop {
            let mut idle = pin!(self.idle.notified());
            // Registered before the check, so a wake-up between the check and the await is kept.
            idle.as_mut().enable();
            if self.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn settle_waits_for_every_task() {
        let background = Arc::new(Background::default());
        let (release, released) = oneshot::channel::<()>();
        let (done_tx, mut done_rx) = oneshot::channel::<()>();
        assert!(background.spawn(None, async move {
            let _ = released.await;
            let _ = done_tx.send(());
        }));
        let mut settle = pin!(background.settle());
        assert!(futures::poll!(settle.as_mut()).is_pending());
        release.send(()).unwrap();
        settle.await;
        assert!(done_rx.try_recv().is_ok());
    }

    #[test]
    fn without_a_runtime_nothing_is_spawned_or_counted() {
        let background = Arc::new(Background::default());
        assert!(!background.spawn(None, async {}));
        assert_eq!(background.pending.load(Ordering::Acquire), 0);
    }
}
