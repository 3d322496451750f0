//! A SQLite table protected by the lock's fence: a holder that pauses past its validity and
//! writes late is refused by the store, and the later holder's write stands.
//!
//! Client A acquires (fence 1 on a fresh cluster), checks that its lock is valid, and then
//! pauses (a GC pause, a stopped VM) until its validity has run out. Client B acquires (a
//! higher fence), writes, and releases. A wakes up and writes with its old fence: the store's
//! `WHERE last_fence < ?` changes no row. The lock alone cannot stop that write; the store can.
//!
//! Run with `cargo run --example fenced_sqlite` (needs `redis-server` on PATH; SQLite is built
//! in). `tests/fenced_store.rs` runs the same two clients and checks the outcome.
// Test and demo code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use quorumlock::Patience;
use std::error::Error;
use std::time::Duration;

use quorumlock::{Guard, Lock, LockOptions, RetryPolicy};
use quorumlock_harness::{ClusterOptions, HarnessError, Persistence, TestCluster};
use rusqlite::{Connection, OptionalExtension, params};

/// The resource both clients lock: the report row with id [`REPORT`].
const RESOURCE: &str = "reports:1";
/// The id of the protected row.
const REPORT: i64 = 1;

/// The protected store: a table whose rows remember the highest fence that wrote them.
pub struct Store {
    db: Connection,
}

/// A report row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// What the last accepted write put there.
    pub body: String,
    /// The fence of the last accepted write (0: never written under the lock).
    pub last_fence: u64,
}

impl Store {
    /// An in-memory database with one report row, never written under the lock.
    pub fn open() -> rusqlite::Result<Store> {
        let db = Connection::open_in_memory()?;
        db.execute_batch(
            "CREATE TABLE reports (
                 id INTEGER PRIMARY KEY,
                 body TEXT NOT NULL,
                 last_fence INTEGER NOT NULL
             );
             INSERT INTO reports (id, body, last_fence) VALUES (1, 'empty', 0);",
        )?;
        Ok(Store { db })
    }

    /// Writes `body` under `fence`: one statement, so the check and the write are one atomic
    /// step. Answers whether the row was written; a fence not above the row's last one (an
    /// earlier holder's, or the same holder writing twice) changes nothing.
    pub fn write(&self, id: i64, body: &str, fence: u64) -> rusqlite::Result<bool> {
        let changed = self.db.execute(
            "UPDATE reports SET body = ?1, last_fence = ?2 WHERE id = ?3 AND last_fence < ?2",
            params![body, fence, id],
        )?;
        Ok(changed == 1)
    }

    /// The row `id`, if there is one.
    pub fn read(&self, id: i64) -> rusqlite::Result<Option<Report>> {
        self.db
            .query_row(
                "SELECT body, last_fence FROM reports WHERE id = ?1",
                params![id],
                |row| {
                    Ok(Report {
                        body: row.get(0)?,
                        last_fence: row.get(1)?,
                    })
                },
            )
            .optional()
    }
}

/// What happened to the two clients' writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The fence of A, the client that paused.
    pub fence_a: u64,
    /// The fence of B, the client that acquired while A was paused.
    pub fence_b: u64,
    /// Whether the store accepted B's write.
    pub b_written: bool,
    /// Whether the store accepted A's late write (it must not).
    pub late_write_accepted: bool,
    /// The row at the end.
    pub report: Report,
}

/// Three local masters that persist every write (AOF, `appendfsync always`): with fencing on,
/// only such nodes vote, since a fence counter must survive a crash.
pub async fn start_cluster() -> Result<TestCluster, HarnessError> {
    TestCluster::start(
        ClusterOptions::default()
            .nodes(3)
            .persistence(Persistence::AofAlways),
    )
    .await
}

/// The lock options of both clients: fencing on, a short TTL so that A's pause outlasts it,
/// and retries so that B waits for A's keys to expire.
fn options() -> LockOptions {
    LockOptions::new()
        .fencing(true)
        .ttl(Duration::from_secs(1))
        .node_timeout(Duration::from_millis(250))
        .connect_timeout(Duration::from_secs(1))
        .patience(Patience::Retry(
            RetryPolicy::new()
                .attempts(100)
                .delay(Duration::from_millis(20))
                .jitter(Duration::from_millis(20))
                .max_wait(Duration::from_secs(5)),
        ))
}

/// The fence of a guard from a lock with fencing on.
fn fence_of(guard: &Guard) -> Result<u64, Box<dyn Error>> {
    guard
        .fence()
        .ok_or_else(|| "fencing is on, so every guard has a fence".into())
}

/// Runs the two clients against the masters at `urls` and a fresh store.
pub async fn two_clients(urls: &[String]) -> Result<Outcome, Box<dyn Error>> {
    let store = Store::open()?;
    // Two clients, as two processes would be: each its own `Lock`, so its own connections.
    let client_a = Lock::new(urls.to_vec(), options())?;
    let client_b = Lock::new(urls.to_vec(), options())?;

    let guard_a = client_a.acquire(RESOURCE).await?;
    let fence_a = fence_of(&guard_a)?;
    println!("A acquired {RESOURCE} with fence {fence_a}");
    if !guard_a.is_valid() {
        return Err("A's lock ran out before its pause".into());
    }
    println!("A checked is_valid() = true, and pauses before its write …");
    // The pause: longer than what is left of A's validity. A still holds its guard and its
    // fence, and will write as if nothing happened.
    tokio::time::sleep(guard_a.remaining() + Duration::from_millis(1)).await;
    println!(
        "… A's validity has run out (is_valid() = {}); A does not know, it is paused",
        guard_a.is_valid()
    );

    // B retries until A's keys have expired on a quorum of nodes.
    let guard_b = client_b.acquire(RESOURCE).await?;
    let fence_b = fence_of(&guard_b)?;
    println!("B acquired {RESOURCE} with fence {fence_b}");
    let b_written = store.write(REPORT, "written by B", fence_b)?;
    println!(
        "B writes with fence {fence_b}: {}",
        if b_written { "accepted" } else { "refused" }
    );
    guard_b.release().await;

    // A wakes up and does the write it was about to do.
    let late_write_accepted = store.write(REPORT, "written by A, late", fence_a)?;
    if late_write_accepted {
        println!("A writes late with fence {fence_a}: ACCEPTED (the store failed to fence it)");
    } else {
        println!(
            "A writes late with fence {fence_a}: REJECTED, 0 rows changed \
             (the row already holds fence {fence_b})"
        );
    }
    // A's keys are long gone: its release finds nothing of its own.
    guard_a.release().await;
    client_a.settle().await;
    client_b.settle().await;

    let report = store
        .read(REPORT)?
        .ok_or("the report row has disappeared")?;
    println!(
        "the row: {:?}, last_fence {}",
        report.body, report.last_fence
    );
    Ok(Outcome {
        fence_a,
        fence_b,
        b_written,
        late_write_accepted,
        report,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let cluster = start_cluster().await?;
    let outcome = two_clients(&cluster.urls()).await?;
    if outcome.late_write_accepted || !outcome.b_written {
        return Err("the store did not keep B's write against A's late one".into());
    }
    Ok(())
}
