//! The lock observed: its spans printed (`tracing-subscriber`, filtered by `RUST_LOG`) and its
//! metrics served for Prometheus on 127.0.0.1, while it acquires and releases a few times (one
//! of them against a holder, so that a `held` outcome shows too), then prints the metrics and
//! exits.
//!
//! ```text
//! RUST_LOG=quorumlock=debug cargo run --example observe --features metrics [-- URL...]
//! curl -s http://127.0.0.1:9898/metrics    # while it runs
//! ```
//!
//! The nodes are the URLs given, or the five masters of `docker-compose.redlock.yml`
//! (127.0.0.1:7001–7005). The metrics' address is `QUORUMLOCK_METRICS_ADDR` (127.0.0.1:9898
//! by default; only a loopback address is accepted).
// Demo code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use quorumlock::Patience;
use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use quorumlock::{Error, KeepAlive, Lock, LockOptions};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// How many acquire-and-release rounds the example makes before it exits.
const ROUNDS: u32 = 10;

/// The pause between rounds: time to `curl` the metrics while it runs.
const PAUSE: Duration = Duration::from_millis(500);

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Each span printed as it closes, with its fields (outcome, attempts, validity left, …).
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("quorumlock=info")),
        )
        .with_span_events(FmtSpan::CLOSE)
        .init();

    let addr: SocketAddr = std::env::var("QUORUMLOCK_METRICS_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:9898".to_owned())
        .parse()?;
    if !addr.ip().is_loopback() {
        return Err(format!("{addr}: the metrics are served on a loopback address only").into());
    }
    // Buckets in seconds, for the acquire duration: a histogram, not a summary.
    let (recorder, exporter) = PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets(&[
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
        ])?
        .build()?;
    let metrics = recorder.handle();
    metrics::set_global_recorder(recorder)?;
    let serving = tokio::spawn(exporter);
    println!("metrics on http://{addr}/metrics");

    let urls: Vec<String> = match std::env::args().skip(1).collect::<Vec<_>>() {
        urls if urls.is_empty() => (1..=5)
            .map(|i| format!("redis://127.0.0.1:700{i}"))
            .collect(),
        urls => urls,
    };
    let lock = Lock::new(
        urls,
        LockOptions::new()
            .ttl(Duration::from_secs(5))
            .patience(Patience::Once),
    )?;

    for round in 1..=ROUNDS {
        match lock.try_acquire("observe").await {
            Ok(guard) => {
                if round == 1 {
                    // Someone else tries while it is held: a `held` outcome.
                    if let Err(error @ Error::Held { .. }) = lock.try_acquire("observe").await {
                        println!("round {round}: a second caller is refused: {error}");
                    }
                }
                if round == 2 {
                    // Kept alive for a moment: the kept-leases gauge is 1 meanwhile.
                    let kept = guard.keep_alive(KeepAlive::new())?;
                    tokio::time::sleep(PAUSE).await;
                    kept.release().await;
                } else {
                    guard.release().await;
                }
                println!("round {round}: acquired and released");
            }
            Err(error) => println!("round {round}: {error}"),
        }
        tokio::time::sleep(PAUSE).await;
    }
    lock.settle().await;

    println!("\n{}", metrics.render());
    serving.abort();
    Ok(())
}
