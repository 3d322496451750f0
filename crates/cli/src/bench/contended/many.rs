//! Many waiters on one `Lock`: `waiters` tasks waiting (`Patience::Wait`) for `resources`
//! resources that are held, what they cost in client memory (bytes the counting allocator saw
//! allocated and not freed, tasks included), and how many connections they take on each node
//! (`CLIENT LIST`, before and while they wait). Then the holders release and every waiter is
//! served in turn.

use quorumlock::{Patience, Request};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream;
use quorumlock::{Guard, Lock};
use quorumlock_harness::raw_connection;
use serde::Serialize;

use crate::bench::alloc::ALLOC;

/// Connect and response timeout of the `CLIENT LIST` connections.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the registration of the waiters is checked.
const POLL: Duration = Duration::from_millis(5);
/// Acquisitions in flight at once while the holders are taken and given back.
const PARALLEL: usize = 32;

/// What the many waiters cost.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ManyWaiters {
    pub(super) waiters: usize,
    pub(super) resources: usize,
    /// Waiters registered in the lock's queues at the measurement.
    pub(super) registered: usize,
    /// Client memory while they wait, less before they were started, per waiter.
    pub(super) bytes_per_waiter: f64,
    /// Per node: clients before the lock made any connection, while the waiters wait, and of
    /// those the subscribers (`flags` with `P`).
    pub(super) clients_before: Vec<usize>,
    pub(super) clients_waiting: Vec<usize>,
    pub(super) subscribers_before: Vec<usize>,
    pub(super) subscribers_waiting: Vec<usize>,
    /// The most connections the waiting lock added on any node.
    pub(super) most_added: usize,
    /// Whether the waiters were served (else dropped after the measurement).
    pub(super) serve: bool,
    /// Waiters that got their resource once the holders released.
    pub(super) served: usize,
    /// From the holders' release to the last waiter served.
    pub(super) serve_ms: f64,
    pub(super) serve_per_s: f64,
}

/// `CLIENT LIST` on `url`: clients, and of those subscribers (the `CLIENT LIST` connection
/// itself counts as one, before and after alike).
async fn clients(url: &str) -> Result<(usize, usize), String> {
    let mut connection = raw_connection(url, Some(true), ADMIN_TIMEOUT)
        .await
        .map_err(|e| format!("CLIENT LIST on {url}: {e}"))?;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut connection)
        .await
        .map_err(|e| format!("CLIENT LIST on {url}: {e}"))?;
    let lines: Vec<&str> = list.lines().filter(|l| !l.trim().is_empty()).collect();
    let subscribers = lines
        .iter()
        .filter(|line| {
            line.split_whitespace()
                .find_map(|field| field.strip_prefix("flags="))
                .is_some_and(|flags| flags.contains('P'))
        })
        .count();
    Ok((lines.len(), subscribers))
}

async fn all_clients(urls: &[String]) -> Result<Vec<(usize, usize)>, String> {
    let mut counts = Vec::new();
    for url in urls {
        counts.push(clients(url).await?);
    }
    Ok(counts)
}

/// `waiters` tasks on `lock` (fresh: no connection made yet), spread over `resources` held
/// resources; bounded by `cap` in all. With `serve`, the holders then release and every waiter
/// gets its resource in turn; without, the waiters are dropped.
pub(super) async fn many_waiters(
    lock: &Lock,
    urls: &[String],
    waiters: usize,
    resources: usize,
    cap: Duration,
    serve: bool,
) -> Result<ManyWaiters, String> {
    let started = Instant::now();
    let before = all_clients(urls).await?;
    let name = |r: usize| format!("many:{r}");
    let holders: Vec<Guard> = stream::iter(0..resources)
        .map(|r| async move {
            lock.try_acquire(name(r))
                .await
                .map_err(|e| format!("holding {}: {e}", name(r)))
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let bytes_before = ALLOC.live_bytes();
    let tasks: Vec<_> = (0..waiters)
        .map(|i| {
            let lock = lock.clone();
            let resource = name(i % resources.max(1));
            let wait = cap.saturating_sub(started.elapsed());
            tokio::spawn(async move {
                match lock
                    .acquire(Request::from(resource).patience(Patience::Wait(wait)))
                    .await
                {
                    Ok(guard) => {
                        guard.release().await;
                        true
                    }
                    Err(_) => false,
                }
            })
        })
        .collect();
    // Until every task has joined its queue (bounded by the cap).
    let registered = |lock: &Lock| (0..resources).map(|r| lock.waiters(name(r))).sum::<usize>();
    while registered(lock) < waiters && started.elapsed() < cap / 2 {
        tokio::time::sleep(POLL).await;
    }
    let in_queues = registered(lock);
    let bytes_waiting = ALLOC.live_bytes();
    let waiting = all_clients(urls).await;
    if !serve {
        for task in &tasks {
            task.abort();
        }
    }
    let released = Instant::now();
    stream::iter(holders)
        .for_each_concurrent(PARALLEL, |guard| async move {
            guard.release().await;
        })
        .await;
    let mut served = 0;
    for task in tasks.into_iter().filter(|_| serve) {
        let left = cap.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, task).await {
            Ok(Ok(true)) => served += 1,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let serving = released.elapsed();
    lock.settle().await;
    let waiting = waiting?;
    let most_added = before
        .iter()
        .zip(&waiting)
        .map(|(b, w)| w.0.saturating_sub(b.0))
        .max()
        .unwrap_or(0);
    Ok(ManyWaiters {
        waiters,
        resources,
        registered: in_queues,
        serve,
        bytes_per_waiter: bytes_waiting.saturating_sub(bytes_before) as f64 / waiters.max(1) as f64,
        clients_before: before.iter().map(|c| c.0).collect(),
        clients_waiting: waiting.iter().map(|c| c.0).collect(),
        subscribers_before: before.iter().map(|c| c.1).collect(),
        subscribers_waiting: waiting.iter().map(|c| c.1).collect(),
        most_added,
        served,
        serve_ms: serving.as_secs_f64() * 1e3,
        serve_per_s: served as f64 / serving.as_secs_f64().max(1e-9),
    })
}
