//! [`Custody`]: who has a kept lease's [`Guard`]. The keeper keeps it until the holder takes it
//! back to release it, or until the keeper finds the lease lost and releases it itself; then the
//! holder's release waits for that release's report here. It lives inline in the lease's state,
//! and holds no guard, only where the guard is: the guard is remade from the lease's hold (one
//! allocation per kept lease, where a guard's vectors and a channel for the report were more).

use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::guard::{Guard, ReleaseReport};
use crate::hold::Hold;

/// Where a kept lease's guard is, and the report of the release the keeper made of it at a loss.
pub(crate) struct Custody {
    state: Mutex<Kept>,
    /// Signalled when the keeper's release has reported (or was dropped unfinished).
    reported: Notify,
}

/// Where the guard is.
enum Kept {
    /// In the keeper's custody: one of the hold's guards (see [`Guard::into_custody`]).
    Guard,
    /// Taken by the keeper to release a lost lease: the release is under way.
    Releasing,
    /// That release's report, until the holder reads it.
    Reported(Box<ReleaseReport>),
    /// Taken by the holder, or the report read.
    Gone,
}

impl Custody {
    /// Custody of a guard of the lease's hold (see [`Guard::into_custody`]), or of nothing.
    pub(crate) fn new(guard: bool) -> Custody {
        Custody {
            state: Mutex::new(if guard { Kept::Guard } else { Kept::Gone }),
            reported: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, Kept> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The holder takes the guard of `hold` back (the keeper has let go of the lease).
    pub(crate) fn take(&self, hold: &Arc<Hold>) -> Option<Guard> {
        self.take_leaving(hold, Kept::Gone)
    }

    /// The keeper takes the guard of `hold` to release a lost lease; it reports through
    /// [`Custody::report`], also when the release is dropped unfinished.
    pub(crate) fn take_to_release(&self, hold: &Arc<Hold>) -> Option<Guard> {
        self.take_leaving(hold, Kept::Releasing)
    }

    fn take_leaving(&self, hold: &Arc<Hold>, then: Kept) -> Option<Guard> {
        let mut state = self.state();
        matches!(*state, Kept::Guard).then(|| {
            *state = then;
            Guard::joined(Arc::clone(hold))
        })
    }

    /// The keeper's release at a loss found `report` (`None`: it was dropped unfinished, and
    /// the holder is told that nothing was sent).
    pub(crate) fn report(&self, report: Option<ReleaseReport>) {
        {
            let mut state = self.state();
            if !matches!(*state, Kept::Releasing) {
                return;
            }
            *state = report.map_or(Kept::Gone, |report| Kept::Reported(Box::new(report)));
        }
        // A permit: the holder may start waiting only after this.
        self.reported.notify_one();
    }

    /// The report of the keeper's release at a loss, once it is made (the keeper let go of the
    /// lease first, so it takes the guard if it has not yet).
    pub(crate) async fn reported(&self) -> ReleaseReport {
        loop {
            let mut reported = pin!(self.reported.notified());
            // Registered before the check, so a report made in between still wakes us.
            reported.as_mut().enable();
            {
                let mut state = self.state();
                match std::mem::replace(&mut *state, Kept::Gone) {
                    Kept::Reported(report) => return *report,
                    Kept::Gone => return ReleaseReport::nothing_sent(0),
                    waiting => *state = waiting,
                }
            }
            reported.await;
        }
    }
}
