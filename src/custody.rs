//! [`Custody`]: who has a kept lease's [`Guard`]. The keeper keeps it until the holder takes it
//! back to release it, or until the keeper finds the lease lost and releases it itself; then the
//! holder's release waits for that release's report here. It lives inline in the lease's state,
//! and holds no guard, only where the guard is: the guard is remade from the lease's hold (one
//! allocation per kept lease, where a guard's vectors and a channel for the report were more).
//! The one holder that may wait for the report leaves its waker here rather than on a `Notify`:
//! 16 bytes less in every kept lease, for a wait that only a loss makes.

use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use crate::guard::{Guard, ReleaseReport};
use crate::hold::Hold;

/// Where a kept lease's guard is, and the report of the release the keeper made of it at a loss.
pub(crate) struct Custody {
    state: Mutex<Kept>,
}

/// Where the guard is.
enum Kept {
    /// In the keeper's custody: one of the hold's guards (see [`Guard::into_custody`]). The
    /// holder may already wait for the keeper, which let go of the lease, to take it.
    Guard(Option<Waker>),
    /// Taken by the keeper to release a lost lease: the release is under way, and the holder
    /// may wait for its report.
    Releasing(Option<Waker>),
    /// That release's report, until the holder reads it.
    Reported(Box<ReleaseReport>),
    /// Taken by the holder, or the report read.
    Gone,
}

impl Custody {
    /// Custody of a guard of the lease's hold (see [`Guard::into_custody`]), or of nothing.
    pub(crate) fn new(guard: bool) -> Custody {
        Custody {
            state: Mutex::new(if guard { Kept::Guard(None) } else { Kept::Gone }),
        }
    }

    fn state(&self) -> MutexGuard<'_, Kept> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The holder takes the guard of `hold` back (the keeper has let go of the lease).
    pub(crate) fn take(&self, hold: &Arc<Hold>) -> Option<Guard> {
        let mut state = self.state();
        matches!(*state, Kept::Guard(_)).then(|| {
            *state = Kept::Gone;
            Guard::joined(Arc::clone(hold))
        })
    }

    /// The keeper takes the guard of `hold` to release a lost lease; it reports through
    /// [`Custody::report`], also when the release is dropped unfinished.
    pub(crate) fn take_to_release(&self, hold: &Arc<Hold>) -> Option<Guard> {
        let mut state = self.state();
        let Kept::Guard(waiter) = &mut *state else {
            return None;
        };
        *state = Kept::Releasing(waiter.take());
        Some(Guard::joined(Arc::clone(hold)))
    }

    /// The keeper's release at a loss found `report` (`None`: it was dropped unfinished, and
    /// the holder is told that nothing was sent).
    pub(crate) fn report(&self, report: Option<ReleaseReport>) {
        let waiter = {
            let mut state = self.state();
            let Kept::Releasing(waiter) = &mut *state else {
                return;
            };
            let waiter = waiter.take();
            *state = report.map_or(Kept::Gone, |report| Kept::Reported(Box::new(report)));
            waiter
        };
        if let Some(waiter) = waiter {
            waiter.wake();
        }
    }

    /// The report of the keeper's release at a loss, once it is made (the keeper let go of the
    /// lease first, so it takes the guard if it has not yet).
    pub(crate) async fn reported(&self) -> ReleaseReport {
        poll_fn(|cx| {
            let mut state = self.state();
            match &mut *state {
                Kept::Guard(waiter) | Kept::Releasing(waiter) => {
                    *waiter = Some(cx.waker().clone());
                    Poll::Pending
                }
                Kept::Reported(_) => match std::mem::replace(&mut *state, Kept::Gone) {
                    Kept::Reported(report) => Poll::Ready(*report),
                    _ => Poll::Ready(ReleaseReport::nothing_sent(0)),
                },
                Kept::Gone => Poll::Ready(ReleaseReport::nothing_sent(0)),
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a waiter's waker is registered.
    fn waited_for(custody: &Custody) -> bool {
        matches!(&*custody.state(), Kept::Releasing(Some(_)))
    }

    #[tokio::test]
    async fn a_holder_waiting_for_the_keepers_release_is_woken_by_its_report() {
        for report in [Some(ReleaseReport::nothing_sent(7)), None] {
            let custody = Arc::new(Custody {
                state: Mutex::new(Kept::Releasing(None)),
            });
            let waiting = tokio::spawn({
                let custody = Arc::clone(&custody);
                async move { custody.reported().await }
            });
            for _ in 0..10_000 {
                if waited_for(&custody) {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert!(waited_for(&custody), "the holder never waited");
            let expected = report.as_ref().map_or(0, |report| report.still_held_by);
            custody.report(report);
            let got = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
                .await
                .expect("woken by the report")
                .unwrap();
            // A release dropped unfinished reports that nothing was sent.
            assert_eq!(got.still_held_by, expected);
        }
    }

    #[test]
    fn custody_takes_32_bytes() {
        // Inline in every kept lease's state (a `Notify` alone would be 32).
        assert_eq!(std::mem::size_of::<Custody>(), 32);
    }
}
