//! The candidates of [`Scenario::Election`](crate::Scenario::Election): every client campaigns
//! in its resource's election ([`Election::campaign`], woken by the leader's resignation or its
//! key's expiry), bounded by the run's deadline; a leader is recorded as a hold of the resource
//! with its term ([`Recorder::term`](crate::history::Recorder::term)), writes up to twice to
//! the resource's register with its term as the fence, and resigns; until the deadline.

use std::time::{Duration, Instant};

use quorumlock::{Election, ElectionOptions, Lock};

use super::{Client, Credentials, MAX_ATTEMPTS_PER_CLIENT, random_between};
use crate::checker::CheckReport;
use crate::history::Outcome;
use crate::run::ChaosError;
use crate::scenario::Scenario;

impl Client {
    /// Campaigns, leads and resigns in turn (see the module docs). The election's lease is the
    /// run's TTL, renewed every quarter of it, trusted until three quarters after a renewal.
    pub(in crate::run) async fn campaign(mut self, lock: Lock) {
        let ttl = self.plan.ttl;
        let options = ElectionOptions::new()
            .lease_duration(ttl)
            .renew_deadline(ttl * 3 / 4)
            .retry_period(ttl / 4);
        // A lock without fencing or a TTL under 4 ms cannot hold an election: nothing to run.
        let Ok(election) = Election::new(&lock, &self.resource, options) else {
            return;
        };
        let value = format!("client {}", self.id);
        for _ in 0..MAX_ATTEMPTS_PER_CLIENT {
            let started = Instant::now();
            if started >= self.plan.deadline {
                break;
            }
            let campaign = election.campaign(value.as_str());
            let Ok(result) = tokio::time::timeout_at(self.plan.deadline.into(), campaign).await
            else {
                break;
            };
            // Recorded as an attempt: its latency is the time to be elected, waiting included.
            let outcome = Outcome::of(&result);
            let recorder = self.plan.recorder.clone();
            recorder.attempt(&self.resource, self.id, started, Instant::now(), outcome);
            let leadership = match result {
                Ok(leadership) => leadership,
                Err(_) => {
                    tokio::time::sleep(random_between(Duration::from_millis(5), ttl / 10)).await;
                    continue;
                }
            };
            let term = leadership.term();
            let credentials = Credentials {
                token: leadership.token().as_str().to_owned(),
                fence: Some(term),
            };
            // One reading of the trusted deadline, recorded and written under.
            let valid_until = leadership.valid_until();
            let hold = recorder.begin_hold(
                &self.resource,
                self.id,
                &credentials.token,
                started,
                leadership.elected_at(),
                valid_until,
            );
            recorder.term(hold, term);
            if self.write_twice(&credentials, valid_until).await {
                // A write that may still land: lead on until the deadline it was made under.
                tokio::time::sleep_until(valid_until.into()).await;
            }
            recorder.end_hold(hold, Instant::now());
            let _report = leadership.resign().await;
            tokio::time::sleep(random_between(Duration::ZERO, ttl / 20)).await;
        }
        lock.settle().await;
    }
}

/// The self-check of [`Scenario::Election`](crate::Scenario::Election): some election had two
/// leaders or more (else no hand-over was put to the test). A run that is otherwise clean but
/// never got there fails ([`ChaosError::EffectNotShown`]); one with findings is reported as it
/// is. The notes give each election's leaders and terms.
pub(in crate::run) fn leaders_elected(
    check: &CheckReport,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    let evidence: Vec<String> = check
        .terms
        .iter()
        .map(|used| {
            format!(
                "election {}: {} leader(s), terms {} to {}",
                used.election, used.leaders, used.first_term, used.last_term
            )
        })
        .collect();
    let shown = check.terms.iter().any(|used| used.leaders >= 2);
    if check.is_safe() && !shown {
        return Err(ChaosError::EffectNotShown {
            scenario: Scenario::Election,
            evidence: evidence.join("; "),
        });
    }
    notes.extend(evidence.iter().map(|line| format!("self-check: {line}")));
    Ok(())
}
