//! What keeping many locks alive costs: `count` guards held at once with `Guard::keep_alive`,
//! each extended every third of its TTL, and the client's CPU time, its resident memory and the
//! servers' CPU time over the hold, read from `/proc` (Linux; elsewhere those figures are
//! missing); optionally the latency of an unrelated acquire on the same nodes meanwhile.

use std::time::{Duration, Instant};

use super::alloc::ALLOC;
use super::stats::p99_us;
use futures::StreamExt;
use futures::stream;
use quorumlock::{KeepAlive, KeptGuard, Lock};
use serde::Serialize;

/// Acquisitions and releases in flight at once while the guards are taken and given back.
const PARALLEL: usize = 64;

/// Tries again after a failed acquire of a kept guard, at most this many times.
const ACQUIRE_TRIES: usize = 4;

/// The cost of one hold of many kept guards.
#[derive(Debug, Clone, Serialize)]
pub(super) struct KeptCost {
    /// Guards kept alive at once.
    pub(super) guards: usize,
    /// The lock's TTL; extensions come every third of it.
    pub(super) ttl_ms: u64,
    /// How long they were held, all kept alive.
    pub(super) hold_ms: u64,
    /// Successful extensions over the hold, all guards.
    pub(super) extensions: u64,
    /// Guards whose lease was lost during the hold (0 when the machine keeps up).
    pub(super) lost: usize,
    /// Client CPU time (user + system) per second of hold, in milliseconds.
    pub(super) client_cpu_ms_per_s: Option<f64>,
    /// Client CPU time per successful extension, in microseconds.
    pub(super) client_cpu_us_per_extension: Option<f64>,
    /// The servers' CPU time per second of hold, all nodes, in milliseconds.
    pub(super) server_cpu_ms_per_s: Option<f64>,
    /// Client resident memory with the guards held, less before they were taken, per guard.
    pub(super) rss_bytes_per_guard: Option<f64>,
    /// The client's live heap bytes with the guards held, less before they were taken, per
    /// guard: what the leases themselves hold, without the allocator's slack that the resident
    /// figure also counts.
    pub(super) heap_bytes_per_guard: f64,
    /// With a probe, the p99 of its acquires of an unrelated key during the hold, in µs.
    pub(super) probe_p99_us: Option<f64>,
    /// With a probe, how many acquires it made.
    pub(super) probe_samples: usize,
}

/// How often the probe acquires its key.
const PROBE_EVERY: Duration = Duration::from_millis(10);

/// Acquires and releases an unrelated key on `probe` every [`PROBE_EVERY`] for `hold`; the
/// acquires' latencies, sorted.
pub(super) async fn probe(probe: &Lock, hold: Duration) -> Vec<Duration> {
    let started = Instant::now();
    let mut latencies = Vec::new();
    while started.elapsed() < hold {
        let before = Instant::now();
        if let Ok(guard) = probe.try_acquire("kept-probe").await {
            latencies.push(before.elapsed());
            guard.release().await;
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    latencies.sort_unstable();
    latencies
}

/// Takes `count` guards on distinct resources from `lock`, keeps them all alive for `hold`, and
/// measures what that costs; then releases them. `servers` are the nodes' process ids, for
/// their CPU time. With `probe_lock`, an unrelated key is acquired meanwhile (see [`probe`]).
pub(super) async fn kept_guards(
    lock: &Lock,
    servers: &[u32],
    count: usize,
    hold: Duration,
    probe_lock: Option<&Lock>,
) -> Result<KeptCost, String> {
    let rss_before = resident_bytes();
    let heap_before = ALLOC.live_bytes();
    let kept: Vec<KeptGuard> = stream::iter(0..count)
        .map(|i| async move {
            // A few tries: while many leases are already being extended, a loaded machine can
            // make one acquire time out on a quorum.
            let mut tries = 0;
            let guard = loop {
                match lock.try_acquire(format!("kept:{i}")).await {
                    Ok(guard) => break guard,
                    Err(e) if tries >= ACQUIRE_TRIES => return Err(format!("kept guard {i}: {e}")),
                    Err(_) => tries += 1,
                }
            };
            guard
                .keep_alive(KeepAlive::new())
                .map_err(|e| format!("kept guard {i}: {e}"))
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let rss_held = resident_bytes();
    let heap_held = ALLOC.live_bytes();
    let extended = |kept: &[KeptGuard]| kept.iter().map(|guard| guard.extensions()).sum::<u64>();
    let extensions_before = extended(&kept);
    let (client_before, servers_before) = (cpu_time(None), servers_cpu(servers));
    let started = Instant::now();
    let latencies = match probe_lock {
        Some(probe_lock) => probe(probe_lock, hold).await,
        None => {
            tokio::time::sleep(hold).await;
            Vec::new()
        }
    };
    let held_for = started.elapsed();
    let (client_after, servers_after) = (cpu_time(None), servers_cpu(servers));
    // Only the extensions of the hold, which the CPU time is read over.
    let extensions = extended(&kept).saturating_sub(extensions_before);
    let lost = kept.iter().filter(|guard| !guard.is_valid()).count();
    stream::iter(kept)
        .for_each_concurrent(PARALLEL, |guard| async move {
            guard.release().await;
        })
        .await;
    lock.settle().await;

    let seconds = held_for.as_secs_f64();
    let client_cpu = client_after
        .zip(client_before)
        .map(|(after, before)| after.saturating_sub(before).as_secs_f64());
    let server_cpu = servers_after
        .zip(servers_before)
        .map(|(after, before)| after.saturating_sub(before).as_secs_f64());
    Ok(KeptCost {
        guards: count,
        ttl_ms: u64::try_from(lock.ttl().as_millis()).unwrap_or(u64::MAX),
        hold_ms: u64::try_from(held_for.as_millis()).unwrap_or(u64::MAX),
        extensions,
        lost,
        client_cpu_ms_per_s: client_cpu.map(|cpu| cpu * 1e3 / seconds),
        client_cpu_us_per_extension: client_cpu
            .filter(|_| extensions > 0)
            .map(|cpu| cpu * 1e6 / extensions as f64),
        server_cpu_ms_per_s: server_cpu.map(|cpu| cpu * 1e3 / seconds),
        rss_bytes_per_guard: rss_held
            .zip(rss_before)
            .map(|(held, before)| held.saturating_sub(before) as f64 / count.max(1) as f64),
        heap_bytes_per_guard: heap_held.saturating_sub(heap_before) as f64 / count.max(1) as f64,
        probe_p99_us: p99_us(&latencies),
        probe_samples: latencies.len(),
    })
}

/// User + system CPU time of a process (`None`: this one) from `/proc/<pid>/stat`.
fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // Linux reports them in USER_HZ ticks: 100 per second on x86 and ARM.
    Some(Duration::from_millis(ticks.saturating_mul(10)))
}

/// The summed CPU time of the server processes; `None` if any cannot be read.
fn servers_cpu(pids: &[u32]) -> Option<Duration> {
    if pids.is_empty() {
        return None;
    }
    pids.iter()
        .map(|&pid| cpu_time(Some(pid)))
        .sum::<Option<Duration>>()
}

/// This process's resident memory (`VmRSS` in `/proc/self/status`).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time_and_resident_memory_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(cpu_time(None).is_some());
            assert!(resident_bytes().is_some_and(|bytes| bytes > 0));
            assert!(servers_cpu(&[std::process::id()]).is_some());
        }
        assert_eq!(servers_cpu(&[]), None);
    }
}
