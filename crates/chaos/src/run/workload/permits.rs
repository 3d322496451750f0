//! The clients of [`Scenario::Semaphore`](crate::Scenario::Semaphore): each takes permits of
//! one semaphore ([`Request::permits`], as many permits as the run has resources; odd clients
//! two at once with [`Request::take`], even ones one) in a single round, writes to the
//! register of each slot it got as if the slot were its resource, then releases or lets the
//! keys expire. A hold is recorded under each slot's name, so the checker sees two holders of
//! one slot as an overlap and more permits held than there are as the semaphore's finding.

use std::time::{Duration, Instant};

use quorumlock::{Lock, Request};

use super::{Client, Credentials, End, MAX_ATTEMPTS_PER_CLIENT, random_between};
use crate::checker::CheckReport;
use crate::history::Semaphore;
use crate::run::ChaosError;
use crate::scenario::Scenario;

/// The semaphore's name: its slots, `sem:0` …, are the run's resources.
pub(in crate::run) const SEMAPHORE: &str = "sem";

impl Client {
    /// Takes its permits of `semaphore` (one round), writes to each of its slots under the
    /// validity, releases them (or, a quarter of the holds, lets their keys expire); until the
    /// deadline.
    pub(in crate::run) async fn take_permits(mut self, lock: Lock, semaphore: Semaphore) {
        let take = if self.id % 2 == 1 && semaphore.permits >= 2 {
            2
        } else {
            1
        };
        let request = Request::from(semaphore.name.as_str())
            .permits(semaphore.permits)
            .take(take);
        let ms = Duration::from_millis;
        for _ in 0..MAX_ATTEMPTS_PER_CLIENT {
            if Instant::now() >= self.plan.deadline {
                break;
            }
            let Some((guard, started)) =
                self.try_once(&lock, request.clone(), &semaphore.name).await
            else {
                continue;
            };
            let credentials = Credentials::of(&guard);
            let valid_until = guard.valid_until();
            let slots: Vec<String> = guard
                .resources()
                .map(|slot| String::from_utf8_lossy(slot).into_owned())
                .collect();
            let holds = self.begin_holds(&slots, &guard, &credentials, (started, valid_until));
            let mut expire = rand::random_range(0..4u8) == 0;
            for slot in &slots {
                // A slot past the plan's, as a defect gives, has no register: nothing to write.
                let Some(index) = self.plan.resources.iter().position(|r| r == slot) else {
                    continue;
                };
                if Instant::now() >= valid_until {
                    break;
                }
                let written = self.write_to(index, &credentials, valid_until).await;
                if written.ends_hold() == Some(End::Expire) {
                    expire = true;
                    break;
                }
            }
            self.plan.end_holds(guard, holds, expire).await;
            tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
        }
        lock.settle().await;
    }
}

/// The self-check of [`Scenario::Semaphore`](crate::Scenario::Semaphore): at some instant every
/// permit was held (else the bound was never put to the test). A run that is otherwise clean
/// but never got there fails ([`ChaosError::EffectNotShown`]); one with findings is reported as
/// it is. The notes give the holds and the most held at once.
pub(in crate::run) fn semaphore_full(
    check: &CheckReport,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    for used in &check.permits {
        let evidence = format!(
            "semaphore {} of {} permit(s): {} hold(s) of its slots, at most {} at once",
            used.semaphore, used.permits, used.holds, used.most_at_once
        );
        let full = u32::try_from(used.most_at_once).unwrap_or(u32::MAX) >= used.permits;
        if check.is_safe() && !full {
            return Err(ChaosError::EffectNotShown {
                scenario: Scenario::Semaphore,
                evidence,
            });
        }
        notes.push(format!("self-check: {evidence}"));
    }
    Ok(())
}
