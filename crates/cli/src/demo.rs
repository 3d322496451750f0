//! `quorumlock demo`: take a lock, show what each node did, show a second client being refused,
//! release.

use quorumlock::Patience;
use std::time::{Duration, Instant};

use quorumlock::{Error, Lock, LockOptions, NodeOutcome};
use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};

use crate::flags::{self, NODES_ENV};

/// Arguments of `quorumlock demo`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  quorumlock demo
  quorumlock demo --ttl 30s --resource orders
  quorumlock demo --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
  QUORUMLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 quorumlock demo")]
pub struct DemoArgs {
    /// Comma-separated node URLs (redis://[user:password@]host:port[/db]).
    #[arg(long, value_delimiter = ',', env = NODES_ENV)]
    nodes: Vec<String>,
    /// The resource to lock.
    #[arg(long, default_value = "demo")]
    resource: String,
    /// Lock TTL, e.g. `10s`, `500ms`.
    #[arg(long, default_value = "10s", value_parser = flags::duration)]
    ttl: Duration,
}

/// Runs `quorumlock demo`: on the given nodes, or on five local `redis-server` processes it
/// starts and stops.
pub async fn run(args: DemoArgs) -> Result<(), String> {
    let DemoArgs {
        nodes,
        resource,
        ttl,
    } = args;
    let resource = resource.as_str();
    // Kept alive until the end of the demo: dropping it stops the servers.
    let mut local = None;
    let urls = if nodes.is_empty() {
        println!(
            "no --nodes given: starting 5 local redis-server processes \
             (appendonly yes, appendfsync always)"
        );
        // Persisting every write lets the restart guard (on by default) count the fresh nodes'
        // votes at once; without persistence they would sit out the first TTL.
        let cluster = TestCluster::start(
            ClusterOptions::default()
                .nodes(5)
                .persistence(Persistence::AofAlways),
        )
        .await
        .map_err(|e| format!("starting local Redis masters: {e}"))?;
        let urls = cluster.urls();
        local = Some(cluster);
        urls
    } else {
        nodes
    };
    let options = LockOptions::new().ttl(ttl).patience(Patience::Once);
    let lock = Lock::new(urls, options).map_err(|e| e.to_string())?;
    println!(
        "lock over {} nodes, quorum {}, ttl {:?}, per-node timeout {:?}, restart guard {}\n",
        lock.node_addrs().len(),
        lock.quorum_size(),
        lock.ttl(),
        lock.node_timeout(),
        match lock.restart_guard_period() {
            Some(period) => format!("{period:?} for nodes that do not persist every write"),
            None => "off".to_owned(),
        }
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
        Err(Error::Held { outcomes, .. }) => {
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

/// One line per node: what it answered.
fn print_outcomes(outcomes: &[NodeOutcome]) {
    for outcome in outcomes {
        println!("  {outcome}");
    }
}
