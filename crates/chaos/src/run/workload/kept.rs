//! The kept holder of [`Scenario::KeepAliveLoss`](crate::Scenario::KeepAliveLoss): it hands its
//! guard to the keep-alive ([`Guard::keep_alive`]) and holds for 3–6 TTLs, so that the lock is
//! extended several times, writing every fifth of a TTL while the lease says it is valid, until
//! the lease signals the lock lost or the planned length has passed; then it releases.
//!
//! What it records, for the checker's keep-alive checks (`checker/keep_alive.rs`):
//!
//! - the lease's margin, once: the guard's `valid_until` less the lease's, right after
//!   `keep_alive` (the lease trusts the lock until its validity less that margin);
//! - the lease's extensions and deadline before each write and at the end (the deadline only
//!   moves with an extension, and a write is given up at the deadline it was made under);
//! - the lost signal: a task of its own does nothing but await [`Lease::lost`] and stamps the
//!   instant it completes, so that the stamp does not wait for a write in flight;
//! - each write as invoked at the instant read before the holder asked
//!   [`Lease::is_valid`]: `is_valid()` turns false no later than `lost()` completes, so with a
//!   correct lease no write is recorded as invoked after the lost signal.
//!
//! Once the lease is no longer valid the holder stops writing but keeps the lock until the lost
//! signal comes (or the planned length passes): a lease whose signal came late, or never, shows
//! as a hold still held when its validity ended.

use std::time::Instant;

use quorumlock::{Guard, KeepAlive, KeptGuard, Lease};
use tokio::task::JoinSet;

use super::{Client, Credentials, Written, random_between};
use crate::history::{HoldId, LossReason, Recorder};

/// Upper bound on a kept holder's writes per hold, on top of the time bound.
const MAX_KEPT_WRITES: u32 = 1_000;

impl Client {
    /// Holds the lock with `guard`, recorded as `hold`, kept alive (see the module docs), and
    /// releases it.
    pub(super) async fn kept(&mut self, guard: Guard, hold: HoldId, credentials: &Credentials) {
        let recorder = self.plan.recorder.clone();
        let ttl = self.plan.ttl;
        let Some(kept) = keep(guard, hold, &recorder) else {
            return;
        };
        let lease = kept.lease();
        // In a set of its own, so that it is aborted with this future too (a client task cut
        // short at the end of a run).
        let mut watcher = JoinSet::new();
        watcher.spawn(watch_loss(lease.clone(), recorder.clone(), hold));
        // Within a TTL of the run's end, so that the wind-down (two TTLs and a grace) never cuts
        // a hold short with its lease still valid and unrecorded.
        let planned_end =
            (Instant::now() + random_between(ttl * 3, ttl * 6)).min(self.plan.deadline + ttl);
        let spacing = ttl / 5;
        let mut pending = false;
        for _ in 0..MAX_KEPT_WRITES {
            let checked = Instant::now();
            if checked >= planned_end {
                break;
            }
            if !lease.is_valid() {
                // No more writes; hold on until the lease says why (or the hold's time is up).
                tokio::select! {
                    biased;
                    _ = lease.lost() => {}
                    () = tokio::time::sleep_until(planned_end.into()) => {}
                }
                break;
            }
            let valid_until = lease.valid_until();
            recorder.lease_read(hold, lease.extensions(), valid_until);
            match self
                .write_checked(credentials, valid_until, Some(checked))
                .await
            {
                Written::Settled => {}
                Written::Rejected => break,
                Written::Pending => {
                    pending = true;
                    break;
                }
            }
            let next = (Instant::now() + spacing).min(planned_end);
            tokio::select! {
                biased;
                _ = lease.lost() => break,
                () = tokio::time::sleep_until(next.into()) => {}
            }
        }
        if pending {
            // The write may still land: keep the lock a little longer, as a holder that lets
            // its keys expire does, so that the next holder reads after it.
            tokio::select! {
                biased;
                _ = lease.lost() => {}
                () = tokio::time::sleep(ttl / 10) => {}
            }
        }
        recorder.lease_read(hold, lease.extensions(), lease.valid_until());
        recorder.end_hold(hold, Instant::now());
        let _report = kept.release().await;
        // Released: a lease not lost by now never will be (its signal stays pending), so the
        // watcher has either seen the signal, or is about to record it, or never will (then
        // dropping the set aborts it).
        if lease.lost_reason().is_some() {
            let _ = watcher.join_next().await;
        }
    }
}

/// Hands `guard`, recorded as `hold`, to the keep-alive and records the lease's trusted
/// deadline and margin; if that fails, ends the hold.
pub(super) fn keep(guard: Guard, hold: HoldId, recorder: &Recorder) -> Option<KeptGuard> {
    let validity = guard.valid_until();
    let Ok(kept) = guard.keep_alive(KeepAlive::new()) else {
        // Only an invalid `KeepAlive` fails (and releases the guard): never the default.
        recorder.end_hold(hold, Instant::now());
        return None;
    };
    let trusted = kept.lease().valid_until();
    recorder.keep_alive(hold, trusted, validity.saturating_duration_since(trusted));
    Some(kept)
}

/// Awaits `lease`'s lost signal and records it for `hold`, with the lease's last reading.
async fn watch_loss(lease: Lease, recorder: Recorder, hold: HoldId) {
    let lost = lease.lost().await;
    let seen = Instant::now();
    recorder.lease_read(hold, lease.extensions(), lease.valid_until());
    recorder.lost(hold, seen, LossReason::of(&lost));
}
