//! The clients of [`Scenario::ReadWrite`](crate::Scenario::ReadWrite): each takes a side of its
//! resource's read-write lock in a single round ([`Request::read`] three times in four,
//! [`Request::write`] else, and again after a refused write: up to three tries, or until won for
//! a client's first write). A writer writes to the resource's register as any holder does and
//! is recorded under the resource; a reader holds for a while, writes nothing, and is recorded
//! under a resource of its own ([`ReadWrite::reader`]), so readers together are no overlap and
//! the checker's side check sees a writer beside anyone.

use std::time::{Duration, Instant};

use quorumlock::{Lock, Request};

use super::{Client, Credentials, MAX_ATTEMPTS_PER_CLIENT, random_between};
use crate::checker::CheckReport;
use crate::history::ReadWrite;
use crate::run::ChaosError;
use crate::scenario::Scenario;

impl Client {
    /// Reads or writes the client's resource's read-write lock, one round per attempt: a
    /// writer writes up to twice under its validity, a reader holds 5–40 ms (within its
    /// validity); each then releases or, a quarter of the holds, lets its keys expire; until
    /// the deadline.
    pub(in crate::run) async fn take_sides(mut self, lock: Lock) {
        let sides = ReadWrite::new(self.resource.clone());
        let ms = Duration::from_millis;
        // A writer kept out tries again as a writer, up to WRITER_TRIES times, as an
        // application's would: its mark keeps new readers out for it, so a writer that turned
        // reader next would be kept out by its own mark (a whole run went unwritten so). A
        // client's first writer keeps trying until it gets in: with three tries, a short run
        // under faults could leave every lock unwritten. Later writers stop at WRITER_TRIES, so
        // writers' marks do not keep readers apart for the rest of the run.
        let mut writing = 0u8;
        let mut wrote = false;
        for n in 0..MAX_ATTEMPTS_PER_CLIENT {
            if Instant::now() >= self.plan.deadline {
                break;
            }
            if writing == 0 && rand::random_range(0..4u8) == 0 {
                writing = WRITER_TRIES;
            }
            let reads = writing == 0;
            if wrote {
                writing = writing.saturating_sub(1);
            }
            let request = Request::from(sides.name.as_str());
            let request = if reads {
                request.read()
            } else {
                request.write()
            };
            let Some((guard, started)) = self.try_once(&lock, request, &sides.name).await else {
                continue;
            };
            writing = 0;
            wrote |= !reads;
            let recorder = self.plan.recorder.clone();
            let credentials = Credentials::of(&guard);
            let valid_until = guard.valid_until();
            let resource = if reads {
                sides.reader(self.id, usize::try_from(n).unwrap_or(usize::MAX))
            } else {
                sides.name.clone()
            };
            let hold = recorder.begin_hold(
                &resource,
                self.id,
                &credentials.token,
                started,
                guard.decided_at(),
                valid_until,
            );
            let chosen = rand::random_range(0..4u8) == 0;
            let expire = if reads {
                let until = (Instant::now() + random_between(ms(5), ms(40))).min(valid_until);
                tokio::time::sleep_until(until.into()).await;
                chosen
            } else {
                self.write_twice(&credentials, valid_until).await || chosen
            };
            self.plan.end_holds(guard, vec![hold], expire).await;
            tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
        }
        lock.settle().await;
    }
}

/// How many attempts in a row a client that chose to write makes as a writer.
const WRITER_TRIES: u8 = 3;

/// The self-check of [`Scenario::ReadWrite`](crate::Scenario::ReadWrite): some lock was both
/// written and read by two holders at once (else the promise was never put to the test; with
/// seeded faults over a short run, one lock of several may go a run without either). A run
/// that is otherwise clean but never got there fails ([`ChaosError::EffectNotShown`]); one
/// with findings is reported as it is. The notes give each lock's holds by side.
pub(in crate::run) fn sides_used(
    check: &CheckReport,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    let evidence: Vec<String> = check
        .sides
        .iter()
        .map(|used| {
            format!(
                "read-write lock {}: {} read hold(s), at most {} at once; {} write hold(s)",
                used.lock, used.reads, used.most_readers_at_once, used.writes
            )
        })
        .collect();
    let shown = check
        .sides
        .iter()
        .any(|used| used.writes > 0 && used.most_readers_at_once >= 2);
    if check.is_safe() && !shown {
        return Err(ChaosError::EffectNotShown {
            scenario: Scenario::ReadWrite,
            evidence: evidence.join("; "),
        });
    }
    notes.extend(evidence.iter().map(|line| format!("self-check: {line}")));
    Ok(())
}
