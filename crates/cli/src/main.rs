//! The `quorumlock` command-line tool: try the lock against your own Redis masters, or against
//! five local ones it starts itself.

mod bench;
mod chaos;

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use quorumlock::{Error, Lock, LockOptions, NodeOutcome, RetryPolicy};
use quorumlock_harness::{ClusterOptions, TestCluster};

#[derive(Parser)]
#[command(
    version,
    about = "Redlock distributed locks over independent Redis masters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Take a lock, show what each node did, show a second client being refused, release.
    ///
    /// Without --nodes it starts five local redis-server processes (redis-server must be on
    /// PATH, or named by QUORUMLOCK_REDIS_SERVER) and stops them when done.
    Demo {
        /// Comma-separated node URLs (redis://[user:password@]host:port[/db]).
        #[arg(long, value_delimiter = ',')]
        nodes: Vec<String>,
        /// The resource to lock.
        #[arg(long, default_value = "demo")]
        resource: String,
        /// Lock TTL in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        ttl_ms: u64,
    },
    /// Benchmark the quorum lock against the single-node lock, side by side in one run.
    ///
    /// Without --nodes it starts local redis-server processes on 127.0.0.1 (some behind fault
    /// proxies) and stops them when done.
    Bench(bench::BenchArgs),
    /// Chaos scenarios: faults against a local five-node cluster while clients contend, and a
    /// check of the history for two holders at once (mutual-exclusion violations).
    ///
    /// Exits non-zero when a scenario expected to be safe shows a violation.
    Chaos(chaos::ChaosArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Demo {
            nodes,
            resource,
            ttl_ms,
        } => demo(nodes, &resource, Duration::from_millis(ttl_ms)).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Chaos(args) => chaos::run_chaos(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn demo(nodes: Vec<String>, resource: &str, ttl: Duration) -> Result<(), String> {
    // Kept alive until the end of the demo: dropping it stops the servers.
    let mut local = None;
    let urls = if nodes.is_empty() {
        println!("no --nodes given: starting 5 local redis-server processes");
        let cluster = TestCluster::start(ClusterOptions::default().nodes(5))
            .await
            .map_err(|e| format!("starting local Redis masters: {e}"))?;
        let urls = cluster.urls();
        local = Some(cluster);
        urls
    } else {
        nodes
    };
    let options = LockOptions::new().ttl(ttl).retry(RetryPolicy::once());
    let lock = Lock::quorum(urls, options).map_err(|e| e.to_string())?;
    println!(
        "lock over {} nodes, quorum {}, ttl {:?}, per-node timeout {:?}\n",
        lock.node_addrs().len(),
        lock.quorum_size(),
        lock.ttl(),
        lock.node_timeout()
    );

    let started = Instant::now();
    let guard = lock.try_acquire(resource).await.map_err(|e| {
        print_outcomes(e.outcomes());
        format!("acquire failed: {e}")
    })?;
    println!(
        "acquired {resource:?} in {:?}; valid for {:?}; token {}",
        started.elapsed(),
        guard.remaining(),
        guard.token()
    );
    print_outcomes(guard.outcomes());

    match lock.try_acquire(resource).await {
        Err(Error::Held { outcomes }) => {
            println!("\na second client is refused while the lock is held:");
            print_outcomes(&outcomes);
        }
        Err(other) => println!("\na second client failed otherwise: {other}"),
        Ok(second) => {
            second.release().await;
            return Err("a second client acquired a held lock".into());
        }
    }

    let report = guard.release().await;
    println!("\nreleased: {} nodes still held our token", report.held);
    print_outcomes(&report.outcomes);
    drop(local);
    Ok(())
}

/// Writes `value` as pretty JSON to `path`, creating missing parent folders.
fn write_json_file(path: &Path, value: &impl serde::Serialize) -> Result<(), String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let file =
        std::fs::File::create(path).map_err(|e| format!("writing {}: {e}", path.display()))?;
    serde_json::to_writer_pretty(std::io::BufWriter::new(file), value)
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

fn print_outcomes(outcomes: &[NodeOutcome]) {
    for outcome in outcomes {
        println!("  {outcome}");
    }
}
