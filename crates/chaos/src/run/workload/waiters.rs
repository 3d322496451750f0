//! The waiters of [`Scenario::Waiters`](crate::Scenario::Waiters): each client is
//! [`WAITERS_PER_CLIENT`] callers of its one [`Lock`], all for its resource, so that the lock's
//! own queue orders them, while the other clients' locks wait for the same resource and are
//! woken only through the nodes. Each caller asks [`Lock::acquire`] with `Patience::Wait`, a wait of its own
//! (¾ to 5 TTLs, drawn per call), holds briefly, and lets go in one of three ways: a release
//! awaited, a guard dropped (released in the background), or keys left to expire, so that its
//! waiters have only the expiry bound to wake them. Every call is recorded with its wait, and
//! its end, for the checker's deadline check (`checker/waits.rs`); the self-check here makes sure
//! the waiting was put to the test.

use quorumlock::{Patience, Request};
use std::time::{Duration, Instant};

use quorumlock::{Guard, Lock};

use super::{Client, random_between};
use crate::checker::CheckReport;
use crate::history::{History, Outcome};
use crate::run::error::ChaosError;
use crate::scenario::Scenario;

/// How many callers each client's lock has.
pub(in crate::run) const WAITERS_PER_CLIENT: usize = 3;

/// Upper bound on one waiter's calls, on top of the time bound.
const MAX_CALLS_PER_WAITER: u32 = 100_000;

/// Waiters that saw a release got the lock within this share of the TTL after it, at the
/// median. Measured at a TTL of 400 ms: 4.7–6.5 ms with wake-ups, 47–62 ms with the wake-ups
/// taken out (holds last up to a tenth of the TTL, and other waiters' attempts free some).
const PROMPT_SHARE: u32 = 16;

/// Fewer grants after a release than this say nothing about their median.
const MIN_TIMED_GRANTS: usize = 5;

impl Client {
    /// [`WAITERS_PER_CLIENT`] callers of `lock` waiting in turn for the client's resource
    /// until the run's deadline; then the lock settles.
    pub(in crate::run) async fn wait_in_turn(self, lock: Lock) {
        let waiters =
            (0..WAITERS_PER_CLIENT).map(|k| self.waiter(&lock, self.id * WAITERS_PER_CLIENT + k));
        futures::future::join_all(waiters).await;
        lock.settle().await;
    }

    /// One caller, recorded as holder `holder`: waits, holds briefly, lets go, again.
    async fn waiter(&self, lock: &Lock, holder: usize) {
        let plan = &self.plan;
        for _ in 0..MAX_CALLS_PER_WAITER {
            if Instant::now() >= plan.deadline {
                break;
            }
            let wait = random_between(plan.ttl * 3 / 4, plan.ttl * 5);
            let started = Instant::now();
            let result = lock
                .acquire(Request::from(&self.resource).patience(Patience::Wait(wait)))
                .await;
            let finished = Instant::now();
            let outcome = Outcome::of(&result);
            plan.recorder
                .waited(&self.resource, holder, (started, finished), wait, outcome);
            match result {
                Ok(guard) => self.hold_briefly(guard, holder, started).await,
                Err(_) => tokio::time::sleep(random_between(Duration::ZERO, plan.ttl / 20)).await,
            }
        }
    }

    /// Holds `guard` (from a call started at `started`) for up to a tenth of a TTL, within its
    /// validity, then releases it (half the holds), drops it (a third) or lets it expire (a
    /// sixth).
    async fn hold_briefly(&self, guard: Guard, holder: usize, started: Instant) {
        let plan = &self.plan;
        let valid_until = guard.valid_until();
        let hold = plan.recorder.begin_hold(
            &self.resource,
            holder,
            guard.token().as_str(),
            started,
            guard.decided_at(),
            valid_until,
        );
        let held_for = random_between(Duration::from_millis(1), plan.ttl / 10);
        tokio::time::sleep_until((Instant::now() + held_for).min(valid_until).into()).await;
        match rand::random_range(0..6u8) {
            0 => plan.let_expire(guard).await,
            1 | 2 => {
                plan.recorder.end_hold(hold, Instant::now());
                drop(guard);
            }
            _ => {
                plan.recorder.end_hold(hold, Instant::now());
                let _report = guard.release().await;
            }
        }
    }
}

/// The self-check of [`Scenario::Waiters`]: some waiter got the lock after waiting behind
/// another holder (else nobody was woken, and the run proved nothing about wake-ups), waiters
/// that saw a release got the lock promptly after it (the median within a sixteenth of the TTL,
/// [`PROMPT_SHARE`], when there are [`MIN_TIMED_GRANTS`] of them; the runtime's stalls in
/// between do not count, as a waiter cannot be woken while nothing runs), and some fault was injected
/// (else nothing was in the waiters' way). A run that is otherwise clean but shows any gap
/// fails ([`ChaosError::EffectNotShown`]); one with findings is reported as it is. The notes
/// count the calls by outcome, the slack and the latest return past a deadline.
pub(in crate::run) fn waited_in_turn(
    history: &History,
    check: &CheckReport,
    ttl: Duration,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    let waits = check.waits;
    let ms = |us: u64| us as f64 / 1e3;
    let evidence = format!(
        "{} waiting calls: {} got the lock ({} after waiting behind another holder, {} while a \
         node fault was in effect), {} gave up by their deadline + slack, {} late; slack {} ms \
         (one attempt: 2 × (connect_timeout + node_timeout)), latest return {:.1} ms past a deadline; \
         {} got it after a release during their wait, with no fault, the median {} ms after it \
         (less the runtime's stalls; ttl {} ms); {} node fault(s) injected",
        waits.calls,
        waits.acquired,
        waits.acquired_after_waiting,
        waits.acquired_during_fault,
        waits.gave_up_in_time,
        waits.late,
        waits
            .slack_us
            .map_or_else(|| "-".to_owned(), |us| format!("{:.0}", ms(us))),
        ms(waits.max_past_deadline_us),
        waits.acquired_after_release,
        waits
            .after_release_p50_us
            .map_or_else(|| "-".to_owned(), |us| format!("{:.1}", ms(us))),
        ttl.as_millis(),
        history.faults.len(),
    );
    let prompt_us = u64::try_from((ttl / PROMPT_SHARE).as_micros()).unwrap_or(u64::MAX);
    let gap = if waits.acquired_after_waiting == 0 {
        Some("no waiter got the lock after waiting behind another holder")
    } else if waits.acquired_after_release >= MIN_TIMED_GRANTS
        && waits.after_release_p50_us > Some(prompt_us)
    {
        Some("waiters got the lock long after the releases: wake-ups did not bring them")
    } else if history.faults.is_empty() {
        Some("no fault was injected")
    } else {
        None
    };
    if let Some(gap) = gap.filter(|_| check.is_safe()) {
        return Err(ChaosError::EffectNotShown {
            scenario: Scenario::Waiters,
            evidence: format!("{evidence}: {gap}"),
        });
    }
    notes.push(format!("self-check: {evidence}"));
    Ok(())
}
