//! How to test your own code that takes a lock, against real Redis masters that a test faults:
//! the function under test, `send_invoices`, and its tests, each starting five masters with one
//! call (`TestCluster::masters`).
//!
//! `cargo test -p quorumlock-harness --example testing_your_code` runs the tests (on processes;
//! `QUORUMLOCK_BACKEND=docker` and `--features docker` run them on containers);
//! `cargo run -p quorumlock-harness --example testing_your_code` runs the function once. Needs
//! `redis-server` on `PATH` (or the docker backend's image).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use quorumlock::{Error, Lock, LockOptions};

/// What [`send_invoices`] did.
#[derive(Debug, PartialEq, Eq)]
enum Run {
    /// It held the lock and did the work.
    Done,
    /// Another instance holds the lock: the work is being done there.
    HeldElsewhere,
}

/// The code under test, as it might be in your crate: the month's invoices go out from at
/// most one instance at a time. `sent` stands in for the work, so tests can see whether it ran.
async fn send_invoices(lock: &Lock, sent: &AtomicUsize) -> Result<Run, Error> {
    let guard = match lock.try_acquire("invoices:2026-11").await {
        Ok(guard) => guard,
        Err(Error::Held { .. }) => return Ok(Run::HeldElsewhere),
        Err(other) => return Err(other),
    };
    sent.fetch_add(1, Ordering::SeqCst);
    guard.release().await;
    Ok(Run::Done)
}

/// The lock as the application builds it, over the masters' URLs.
fn invoice_lock(urls: Vec<String>) -> Result<Lock, Error> {
    Lock::new(urls, LockOptions::new().ttl(Duration::from_secs(10)))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cluster = quorumlock_harness::TestCluster::masters(5).await?;
    let sent = AtomicUsize::new(0);
    let run = send_invoices(&invoice_lock(cluster.urls())?, &sent).await?;
    println!("{run:?} over {} masters", cluster.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use quorumlock_harness::TestCluster;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[tokio::test]
    async fn runs_while_a_minority_is_crashed_or_frozen() -> TestResult {
        let mut cluster = TestCluster::masters(5).await?;
        let lock = invoice_lock(cluster.urls())?;
        cluster.kill(0).await?;
        // Frozen with SIGSTOP (docker: paused): connections are accepted, nothing answers.
        cluster.pause(1)?;
        let sent = AtomicUsize::new(0);

        let run = send_invoices(&lock, &sent).await;

        cluster.resume(1)?;
        assert_eq!(run?, Run::Done);
        assert_eq!(sent.load(Ordering::SeqCst), 1);
        Ok(())
    }

    #[tokio::test]
    async fn skips_while_another_instance_holds_the_lock() -> TestResult {
        let mut cluster = TestCluster::masters(5).await?;
        let lock = invoice_lock(cluster.urls())?;
        let other_instance = invoice_lock(cluster.urls())?
            .try_acquire("invoices:2026-11")
            .await?;
        // A crash and restart of a master does not free it: with AOF its key comes back.
        cluster.kill(0).await?;
        cluster.start_node(0).await?;
        let sent = AtomicUsize::new(0);

        assert_eq!(send_invoices(&lock, &sent).await?, Run::HeldElsewhere);
        assert_eq!(sent.load(Ordering::SeqCst), 0);
        other_instance.release().await;
        assert_eq!(send_invoices(&lock, &sent).await?, Run::Done);
        Ok(())
    }

    #[tokio::test]
    async fn fails_without_doing_the_work_when_a_majority_is_gone() -> TestResult {
        let mut cluster = TestCluster::masters(5).await?;
        let lock = invoice_lock(cluster.urls())?;
        cluster.kill(0).await?;
        cluster.kill(1).await?;
        // A hung master: its proxy accepts connections and never answers.
        if let Some(proxy) = cluster.proxy(2) {
            proxy.blackhole();
        }
        let sent = AtomicUsize::new(0);

        let run = send_invoices(&lock, &sent).await;

        assert!(matches!(run, Err(Error::Unavailable { .. })), "{run:?}");
        assert_eq!(sent.load(Ordering::SeqCst), 0);
        Ok(())
    }
}
