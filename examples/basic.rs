//! Acquire, extend and release a quorum lock over three local Redis masters that the example
//! starts itself, and show the typed error a second client gets.
//!
//! Run with `cargo run --example basic` (needs `redis-server` on PATH).
// Test and demo code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use quorumlock::Patience;
use std::time::Duration;

use quorumlock::{Error, Lock, LockOptions};
use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Masters that persist every write (AOF, appendfsync always): the restart guard lets them
    // vote at once. Without persistence, a freshly started master sits out acquisitions for
    // the TTL plus the drift, in case it lost keys in a crash.
    let cluster = TestCluster::start(
        ClusterOptions::default()
            .nodes(3)
            .persistence(Persistence::AofAlways),
    )
    .await?;
    let options = LockOptions::new()
        .ttl(Duration::from_secs(5))
        // The longest TTL an extension below asks for: the restart guard covers keys this long.
        .max_ttl(Duration::from_secs(10))
        .patience(Patience::Once);
    let lock = Lock::new(cluster.urls(), options)?;

    let mut guard = lock.acquire("example").await?;
    println!("acquired; valid for {:?}", guard.remaining());

    match lock.try_acquire("example").await {
        Err(Error::Held {
            unreachable,
            outcomes,
            ..
        }) => {
            println!("a second client is refused ({unreachable} nodes unreachable):");
            for outcome in outcomes {
                println!("  {outcome}");
            }
        }
        other => println!("unexpected: {other:?}"),
    }

    guard.extend(Duration::from_secs(10)).await?;
    println!("extended; valid for {:?}", guard.remaining());

    let report = guard.release().await;
    println!("released on {} of 3 nodes", report.held);
    Ok(())
}
