//! The steps every chaos run takes around its faults, whatever nodes it runs on (the masters of
//! [`run_on`](super::run_on), the Redis Clusters of `cluster_members`): a scenario's base lock
//! options, the clients' warm-up and store connections, the wind-down after the deadline, and
//! the check of the recorded history.

use quorumlock::Patience;
use std::time::{Duration, Instant};

use quorumlock::{Lock, LockOptions};
use tokio::task::JoinSet;

use super::store::{Store, StoreClient};
use super::workload::{warm_up, warm_up_resource};
use super::{ChaosError, RunOptions};
use crate::checker::{CheckReport, check};
use crate::history::{History, Recorder};

/// How long clients get to finish their last hold after the run, beyond its TTLs.
pub(super) const WIND_DOWN_GRACE: Duration = Duration::from_secs(3);

/// A run's lock options before its fencing: the TTL, one attempt per round (the clients do their
/// own retrying), the run's key prefix, the restart guard on or off, and any deliberate defect.
pub(super) fn lock_options(
    options: &RunOptions,
    prefix: String,
    restart_guard: bool,
) -> LockOptions {
    let lock_options = LockOptions::new()
        .ttl(options.ttl)
        .patience(Patience::Once)
        .key_prefix(prefix)
        .restart_guard(restart_guard);
    match options.defect {
        Some(defect) => lock_options.defect(defect),
        None => lock_options,
    }
}

/// Freshly started nodes that do not persist every write sit out acquisitions for the TTL plus
/// the drift: every client connects and waits that out before the clock starts, so that the run
/// measures the faults, not the start. A client that could not is noted.
pub(super) async fn warm_up_all(locks: &[Lock], notes: &mut Vec<String>) {
    let waits = locks
        .iter()
        .enumerate()
        .map(|(id, lock)| warm_up(lock, warm_up_resource(id)));
    let ready = futures::future::join_all(waits).await;
    let cold = ready.iter().filter(|ready| !**ready).count();
    if cold > 0 {
        notes.push(format!(
            "{cold} client(s) could not acquire before the run (restart guard warm-up)"
        ));
    }
}

/// One connection to the protected store per client.
pub(super) async fn store_clients(
    store: &Store,
    clients: usize,
) -> Result<Vec<StoreClient>, ChaosError> {
    let mut store_clients = Vec::with_capacity(clients);
    for _ in 0..clients {
        store_clients.push(store.client().await?);
    }
    Ok(store_clients)
}

/// Waits (within two TTLs and a grace) for the client tasks to see the deadline, and aborts the
/// ones still busy then, noting how many.
pub(super) async fn wind_down(
    clients: &mut JoinSet<()>,
    options: &RunOptions,
    notes: &mut Vec<String>,
) {
    let wind_down = options.ttl * 2 + WIND_DOWN_GRACE;
    let joined = tokio::time::timeout(wind_down, async {
        while clients.join_next().await.is_some() {}
    })
    .await;
    if joined.is_err() {
        notes.push(format!(
            "{} client task(s) still busy {wind_down:?} after the end; aborted",
            clients.len()
        ));
        clients.shutdown().await;
    }
}

/// The run's history, closed at `deadline` with what the store holds for `resources` (and any
/// other resource a write was recorded for), and the
/// checker's report on it (noted with its size and how long the check took).
pub(super) async fn checked(
    recorder: &Recorder,
    store: &Store,
    resources: &[String],
    deadline: Instant,
    notes: &mut Vec<String>,
) -> Result<(History, CheckReport), ChaosError> {
    recorder.set_duration(recorder.clock().us(deadline));
    let mut registers = resources.to_vec();
    for written in recorder.written_resources() {
        if !registers.contains(&written) {
            registers.push(written);
        }
    }
    recorder.set_store(store.read_back(&registers).await?);
    let history = recorder.take();
    let checking = Instant::now();
    let check = check(&history);
    notes.push(format!(
        "checked {} holds, {} writes, {} attempts in {:.1} ms",
        history.holds.len(),
        history.writes.len(),
        history.attempts.len(),
        checking.elapsed().as_secs_f64() * 1e3
    ));
    if check.stalls.count > 0 {
        notes.push(format!(
            "the clients' runtime stalled {} time(s) (no timer fired for over 4 ms), the longest \
             {:.1} ms; {} lost signal(s) came late within one, set apart (a starved runtime \
             fires the keep-alive's timer late: docs/ARCHITECTURE.md, Invariants)",
            check.stalls.count,
            check.stalls.longest_us as f64 / 1e3,
            check.stalled_losses.len()
        ));
    }
    Ok((history, check))
}
