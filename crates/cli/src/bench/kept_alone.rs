//! `--only kept`: the keep-alive at scale alone, on five fresh local nodes: 100,000 leases at a
//! TTL of 3 s held for 60 s and 10,000 at 30 s held for 25 s (`--quick`: 10,000 at 3 s for 10 s),
//! each beside an unrelated acquire every 10 ms on the same `Lock`, as a service that keeps
//! leases makes its other lock calls; its p99 is also measured on that `Lock` with no lease held.

use quorumlock::Patience;
use std::time::Duration;

use quorumlock::{Lock, LockOptions};

use super::kept::{KeptCost, kept_guards, probe};
use super::plan::TARGET_NODES;
use super::report::cpu_model;
use super::stats::p99_us;

/// One run: leases, TTL, hold.
struct KeptRun {
    leases: usize,
    ttl: Duration,
    hold: Duration,
}

/// The runs of `--only kept`: with `--leases`, one per count at 3 s.
fn runs(quick: bool, counts: &[usize]) -> Vec<KeptRun> {
    if !counts.is_empty() {
        let hold = Duration::from_secs(if quick { 10 } else { 60 });
        return counts
            .iter()
            .map(|&leases| KeptRun {
                leases,
                ttl: Duration::from_secs(3),
                hold,
            })
            .collect();
    }
    if quick {
        return vec![KeptRun {
            leases: 10_000,
            ttl: Duration::from_secs(3),
            hold: Duration::from_secs(10),
        }];
    }
    vec![
        KeptRun {
            leases: 100_000,
            ttl: Duration::from_secs(3),
            hold: Duration::from_secs(60),
        },
        KeptRun {
            leases: 10_000,
            ttl: Duration::from_secs(30),
            hold: Duration::from_secs(25),
        },
    ]
}

/// Runs the kept section alone and prints its figures.
pub(super) async fn run(quick: bool, counts: &[usize]) -> Result<(), String> {
    let (mut cluster, urls, version) = super::five_local_nodes().await?;
    let servers: Vec<u32> = (0..TARGET_NODES)
        .filter_map(|node| cluster.pid(node).ok().flatten())
        .collect();
    let prefix = format!(
        "quorumlock-bench-kept:{}:{:08x}:",
        std::process::id(),
        rand::random::<u32>()
    );
    let options = |ttl: Duration| {
        LockOptions::new()
            .ttl(ttl)
            .patience(Patience::Once)
            .key_prefix(prefix.clone().into_bytes())
    };
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "\nquorumlock bench --only kept ({}) — {nproc} CPUs ({}), redis {version}, 5 local nodes \
         (AOF always, tmpfs)",
        if quick { "quick" } else { "full" },
        cpu_model(),
    );
    for run in runs(quick, counts) {
        let lock = Lock::new(urls.iter().cloned(), options(run.ttl))
            .map_err(|e| format!("kept leases: {e}"))?;
        let idle = probe(&lock, Duration::from_secs(if quick { 3 } else { 10 })).await;
        eprintln!(
            "{} leases, ttl {} ms, held {} s …",
            run.leases,
            run.ttl.as_millis(),
            run.hold.as_secs()
        );
        let cost = kept_guards(&lock, &servers, run.leases, run.hold, Some(&lock)).await?;
        print_run(&cost, p99_us(&idle), idle.len());
    }
    drop(cluster);
    Ok(())
}

/// One run's line.
fn print_run(cost: &KeptCost, idle_p99_us: Option<f64>, idle_samples: usize) {
    let figure = |value: Option<f64>, unit: &str| {
        value.map_or_else(|| "n/a".to_owned(), |value| format!("{value:.1} {unit}"))
    };
    println!(
        "  {} leases, ttl {} ms, held {} ms: {} extensions, {} lost; client CPU {} ({} per \
         extension); client memory {} per lease ({:.0} B of it live heap); servers' CPU {}; unrelated acquire p99 {} \
         ({} samples) against {} with no lease ({} samples)",
        cost.guards,
        cost.ttl_ms,
        cost.hold_ms,
        cost.extensions,
        cost.lost,
        figure(cost.client_cpu_ms_per_s, "ms/s"),
        figure(cost.client_cpu_us_per_extension, "µs"),
        figure(cost.rss_bytes_per_guard, "B"),
        cost.heap_bytes_per_guard,
        figure(cost.server_cpu_ms_per_s, "ms/s"),
        figure(cost.probe_p99_us, "µs"),
        cost.probe_samples,
        figure(idle_p99_us, "µs"),
        idle_samples,
    );
}
