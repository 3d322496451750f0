//! [`Lease`]: the view of a kept lock that the lock's keeper updates and the holder reads
//! (validity, fence, the lost signal; why it was lost is a [`Lost`], in `error.rs`). The keeper
//! is `round/keeper.rs`; how a guard is handed to it, `keep_alive.rs`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::custody::Custody;
use crate::error::Lost;
use crate::hold::Hold;
use crate::rules::clock::Moment;
use crate::rules::renewal::Schedule;
use crate::rules::token::Token;

/// What the keeper, the [`KeptGuard`](crate::KeptGuard) and every [`Lease`] handle share, in
/// one allocation: the hold (its validity, which every extension moves, and its lost signal,
/// which every guard of the hold sees), the schedule's margin, and the guard in the keeper's
/// custody.
pub(crate) struct State {
    pub(crate) hold: Arc<Hold>,
    /// The keep-alive's schedule, whose margin the lease is trusted less than the validity by.
    pub(crate) schedule: Schedule,
    pub(crate) extensions: AtomicU64,
    pub(crate) custody: Custody,
}

impl State {
    /// Until when the lease is trusted: the validity less the margin (not before the
    /// acquisition was decided).
    pub(crate) fn trusted_until(&self) -> Moment {
        let start = self.hold.decided;
        let valid_for = self.hold.valid_until().saturating_duration_since(start);
        start.saturating_add(self.schedule.trusted_until(valid_for))
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // A guard still in custody when the last handle goes is dropped as a guard is: its hold
        // is released in the background.
        drop(self.custody.take(&self.hold));
    }
}

/// A view of a kept lock: whether it is still held, until when, its fence, and a future that
/// completes when it is lost. Cheap to clone; every clone sees the same lease.
#[derive(Clone)]
pub struct Lease {
    pub(crate) state: Arc<State>,
}

impl Lease {
    /// The resource name, as given to `acquire`.
    pub fn resource(&self) -> &[u8] {
        self.state.hold.resource()
    }

    /// The acquisition's token.
    pub fn token(&self) -> &Token {
        &self.state.hold.token
    }

    /// The acquisition's fence, with fencing on (see [`Guard::fence`](crate::Guard::fence)).
    pub fn fence(&self) -> Option<u64> {
        self.state.hold.fence
    }

    /// Until when the lock may be relied on, on the `Instant` clock, read now: the validity of
    /// the last successful extension (or of the acquisition), less a small margin (2 % of the
    /// TTL, between 5 ms and 50 ms) so that the lost signal, a timer, fires before the validity
    /// ends even when it fires a little late.
    pub fn valid_until(&self) -> Instant {
        self.state.trusted_until().to_instant()
    }

    /// Time left until [`valid_until`](Lease::valid_until); zero once lost.
    pub fn remaining(&self) -> Duration {
        if self.lost_reason().is_some() {
            return Duration::ZERO;
        }
        self.state
            .trusted_until()
            .saturating_duration_since(Moment::now())
    }

    /// Whether the lock may be relied on now: not lost, and before
    /// [`valid_until`](Lease::valid_until). It turns false no later than the moment
    /// [`lost`](Lease::lost) completes.
    pub fn is_valid(&self) -> bool {
        self.lost_reason().is_none() && Moment::now() < self.state.trusted_until()
    }

    /// How many extensions have succeeded.
    pub fn extensions(&self) -> u64 {
        self.state.extensions.load(Ordering::Relaxed)
    }

    /// Why the lock was lost, once it was.
    pub fn lost_reason(&self) -> Option<Lost> {
        self.state.hold.lost_reason()
    }

    /// Completes when the lock is lost, with the reason; at the latest when the validity of the
    /// last successful extension runs out. Stays pending after a release.
    pub async fn lost(&self) -> Lost {
        let mut receiver = self.state.hold.lost_signal().subscribe();
        let lost = receiver
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|lost| lost.clone());
        match lost {
            Some(lost) => lost,
            // The sender lives in the hold this lease holds: it is never dropped first.
            None => std::future::pending().await,
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("resource", &String::from_utf8_lossy(self.resource()))
            .field("fence", &self.fence())
            .field("remaining", &self.remaining())
            .field("extensions", &self.extensions())
            .field("lost", &self.lost_reason())
            .finish()
    }
}
