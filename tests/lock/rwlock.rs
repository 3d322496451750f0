//! Read-write locks (`Request::read`, `Request::write`): readers share, a writer excludes
//! everyone, each decided per node atomically and won by the quorum rule; a writer that readers
//! keep out keeps new readers out (writer preference); a reader's crash frees only its share;
//! waiters of both sides are woken by releases and expiry; a write guard downgrades with no gap.

use std::time::Duration;

use quorumlock::{ConfigError, Error, Guard, Lock, Owner, Patience, Request, Resources};
use quorumlock_harness::TestCluster;
use redis::AsyncCommands;

use crate::common::*;

/// One attempt each, with TTLs long enough to outlast the waits (a wake-up, not the expiry,
/// must let the waiters in).
fn long() -> quorumlock::LockOptions {
    once().max_ttl(Duration::from_secs(120))
}

fn read(name: &str) -> Request<'_> {
    Request::from(name).read()
}

fn write(name: &str) -> Request<'_> {
    Request::from(name).write()
}

/// A guard, or the panic message naming what came instead.
fn granted(result: Result<Guard, Error>, what: &str) -> Guard {
    result.unwrap_or_else(|error| panic!("{what}: {error}"))
}

fn held(result: Result<Guard, Error>, what: &str) {
    match result {
        Err(Error::Held { resource, .. }) => assert_eq!(resource, b"doc", "{what}"),
        other => panic!("{what}: expected Held, got {other:?}"),
    }
}

#[tokio::test]
async fn a_side_is_checked_before_anything_is_sent() {
    // Nothing listens on port 1: a request sent there would fail as unavailable, not config.
    let lock = Lock::new(["redis://127.0.0.1:1"], once()).unwrap();
    let refused = async |request: Request<'_>| match lock.try_acquire(request).await {
        Err(Error::Config(error)) => error,
        other => panic!("{other:?}"),
    };
    let set = Resources::new(["a", "b"]).unwrap();
    assert_eq!(
        refused(Request::from(&set).read()).await,
        ConfigError::SideWith { with: "a set" }
    );
    assert_eq!(
        refused(write("doc").permits(2)).await,
        ConfigError::SideWith { with: "permits" }
    );
    assert_eq!(
        refused(read("doc").owner(Owner::new())).await,
        ConfigError::SideWith { with: "an owner" }
    );
    assert_eq!(refused(read("")).await, ConfigError::EmptyResource);
}

// promise: rwlock-sides
#[tokio::test]
async fn readers_share_and_a_writer_waits_for_the_last_of_them() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once()).await;
        let first = granted(lock.acquire(read("doc")).await, "a first reader");
        let second = granted(lock.acquire(read("doc")).await, "a second reader");
        assert_eq!(first.resource(), b"doc");
        assert_eq!(first.fence(), None);
        held(
            lock.acquire(write("doc")).await,
            "a writer beside two readers",
        );
        first.release().await;
        held(
            lock.acquire(write("doc")).await,
            "a writer beside one reader",
        );
        second.release().await;
        let writer = granted(lock.acquire(write("doc")).await, "a writer alone");
        held(lock.acquire(read("doc")).await, "a reader beside a writer");
        held(lock.acquire(write("doc")).await, "a second writer");
        // A writer key is the resource's lock key: a plain lock of the name is kept out too.
        held(lock.acquire("doc").await, "a lock beside a writer");
        writer.release().await;
        // A release returns once a quorum is free; the rest finish in the background.
        lock.settle().await;
        // Nothing left on any node: keys, the readers' set, the writer's mark.
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

// promise: rwlock-writer-preference
#[tokio::test]
async fn a_writer_kept_out_by_readers_keeps_new_readers_out() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, once()).await;
        let reader = granted(lock.acquire(read("doc")).await, "a reader");
        held(lock.acquire(write("doc")).await, "a writer beside a reader");
        held(
            lock.acquire(read("doc")).await,
            "a new reader behind a waiting writer",
        );
        reader.release().await;
        let writer = granted(lock.acquire(write("doc")).await, "the writer");
        writer.release().await;
        let reader = granted(
            lock.acquire(read("doc")).await,
            "a reader once the writer is in and out",
        );
        reader.release().await;
    })
    .await;
}

// promise: rwlock-reader-expiry
#[tokio::test]
async fn a_crashed_readers_share_expires_alone_and_wakes_the_writer() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, long()).await;
        let lasting = granted(
            lock.acquire(read("doc").ttl(Duration::from_secs(30))).await,
            "a lasting reader",
        );
        let crashed = granted(
            lock.acquire(read("doc").ttl(Duration::from_millis(300)))
                .await,
            "a reader that crashes",
        );
        // Every node's copy of its key (and a mark it made a writer leave) is gone by then.
        let crashed_gone = tokio::time::Instant::now() + Duration::from_millis(300);
        // A crash: the guard is never released, its key stays until its TTL.
        std::mem::forget(crashed);
        lasting.release().await;
        // The writer is told of no release: only the crashed reader's expiry, which the
        // writer's mark on the nodes lasts until, lets it in well within its wait.
        let writer = granted(
            lock.acquire(write("doc").patience(Patience::Wait(Duration::from_secs(20))))
                .await,
            "a writer after the crashed reader's TTL",
        );
        writer.release().await;
        lock.settle().await;
        tokio::time::sleep_until(crashed_gone).await;
        assert_only_dead_readers_left(&cluster).await;
    })
    .await;
}

/// What a crashed reader may leave, as ARCHITECTURE says: its token in the readers' set of a
/// node that the writer reached before the reader's key expired there (the quorum was free
/// already; the set is pruned by the next writer or one reader's release in 16), never a key
/// that lives.
/// `KEYS` reads as the server does: a key that has expired is not listed.
async fn assert_only_dead_readers_left(cluster: &TestCluster) {
    for node in 0..cluster.len() {
        let mut connection = cluster.connection(node).await.unwrap();
        let keys: Vec<String> = connection.keys("quorumlock:*").await.unwrap();
        for key in keys {
            let Some(writer) = key.strip_suffix(":rw-readers") else {
                panic!("node {node} kept {key}");
            };
            let tokens: Vec<String> = connection.smembers(&key).await.unwrap();
            for token in tokens {
                let reader = format!("{writer}:rw-read:{token}");
                let live: bool = connection.exists(&reader).await.unwrap();
                assert!(!live, "node {node} kept a live reader {reader}");
            }
        }
    }
}

// promise: rwlock-woken
#[tokio::test]
async fn a_waiting_writer_is_woken_by_the_last_readers_release() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, long()).await;
        // The reader's TTL outlasts the writer's wait: only the release's wake-up lets it in.
        let reader = granted(
            lock.acquire(read("doc").ttl(Duration::from_secs(60))).await,
            "a reader",
        );
        let writing = tokio::spawn({
            let lock = lock.clone();
            async move {
                lock.acquire(write("doc").patience(Patience::Wait(Duration::from_secs(20))))
                    .await
            }
        });
        waiting(&lock, "doc", 1).await;
        reader.release().await;
        let writer = granted(writing.await.unwrap(), "the waiting writer");
        writer.release().await;
    })
    .await;
}

// promise: rwlock-woken
#[tokio::test]
async fn waiting_readers_are_all_woken_by_the_writers_release() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, long()).await;
        let writer = granted(
            lock.acquire(write("doc").ttl(Duration::from_secs(60)))
                .await,
            "a writer",
        );
        let readers: Vec<_> = (0..6)
            .map(|_| {
                let lock = lock.clone();
                tokio::spawn(async move {
                    lock.acquire(read("doc").patience(Patience::Wait(Duration::from_secs(20))))
                        .await
                })
            })
            .collect();
        waiting(&lock, "doc", 6).await;
        writer.release().await;
        let mut guards = Vec::new();
        for reader in readers {
            guards.push(granted(reader.await.unwrap(), "a waiting reader"));
        }
        // All six hold at once: each of the three nodes publishes the release once, so waking
        // one reader per message would leave three to their expiry bound, past the wait.
        assert!(guards.iter().all(Guard::is_valid));
        for guard in guards {
            guard.release().await;
        }
    })
    .await;
}

// promise: rwlock-downgrade
#[tokio::test]
async fn a_write_guard_downgrades_to_a_read_guard_with_no_gap() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once().fencing(true)).await;
        let writer = granted(lock.acquire(write("doc")).await, "a writer");
        assert_eq!(writer.fence(), Some(1));
        let until = writer.valid_until();
        let reading = granted(writer.downgrade().await, "the downgrade");
        assert_eq!(reading.resource(), b"doc");
        assert_eq!(reading.fence(), None);
        // The same moment on the lease clock (as an `Instant`, to the conversion's nanoseconds).
        let gap = reading.valid_until().max(until) - reading.valid_until().min(until);
        assert!(gap < Duration::from_millis(1), "{gap:?}");
        let other = granted(lock.acquire(read("doc")).await, "another reader");
        held(
            lock.acquire(write("doc")).await,
            "a writer beside the downgraded reader",
        );
        match reading.downgrade().await {
            Err(Error::Config(ConfigError::NotAWriteGuard)) => {}
            other => panic!("a read guard's downgrade: {other:?}"),
        }
        other.release().await;
        // The downgraded reader was released as a dropped guard is.
        lock.settle().await;
        let writer = granted(lock.acquire(write("doc")).await, "the next writer");
        assert_eq!(writer.fence(), Some(2));
        writer.release().await;
        lock.settle().await;
        assert_no_lock_keys(&cluster).await;
    })
    .await;
}

#[tokio::test]
async fn a_read_guard_extends_and_its_release_leaves_nothing() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, long()).await;
        let mut reader = granted(
            lock.acquire(read("doc").ttl(Duration::from_secs(2))).await,
            "a reader",
        );
        reader.extend(Duration::from_secs(30)).await.unwrap();
        assert!(reader.remaining() > Duration::from_secs(2));
        // On a quorum: a request not yet sent when the acquisition was decided never is.
        let mut extended = 0;
        for node in 0..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let left: i64 = redis::cmd("PTTL")
                .arg(reader.key())
                .query_async(&mut connection)
                .await
                .unwrap();
            extended += usize::from(left > 2_000);
        }
        assert!(
            extended >= 2,
            "the reader's own key was extended on {extended} nodes"
        );
        let report = reader.release().await;
        assert!(report.held >= 2);
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// A caller's first read sets its key before it looks (three native commands per node, no
/// script): refused where a writer holds, it has set its key there all the same, and its
/// clean-up deletes it.
// promise: rwlock-sides
#[tokio::test]
async fn a_refused_first_read_leaves_nothing_behind() {
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once()).await;
        let writer = granted(lock.acquire(write("doc")).await, "a writer");
        // Several, each a first read that sets its key there.
        for _ in 0..4 {
            held(
                lock.acquire(read("doc")).await,
                "a reader beside the writer",
            );
        }
        writer.release().await;
        lock.settle().await;
        assert_no_lock_keys(&cluster).await;
    })
    .await;
}

/// A writer queued behind a reader that its own side's mark keeps out still contends: the
/// reader waits for the writer, so a writer that waited for the reader's turn would wait for
/// the mark's expiry (the long reader's TTL), past both waits.
// promise: rwlock-woken
#[tokio::test]
async fn a_writer_queued_behind_a_reader_its_mark_keeps_out_still_gets_in() {
    bounded(async {
        let (_cluster, lock) = quorum_lock(3, long()).await;
        let first = granted(
            lock.acquire(read("doc").ttl(Duration::from_secs(60))).await,
            "a long reader",
        );
        // A writer that gives up at once leaves its mark, as long as the reader's TTL.
        held(
            lock.try_acquire(write("doc")).await,
            "a writer beside a reader",
        );
        let patient = |request: Request<'static>| {
            let lock = lock.clone();
            let request = request.patience(Patience::Wait(Duration::from_secs(20)));
            tokio::spawn(async move { lock.acquire(request).await })
        };
        let reader = patient(Request::from("doc").read());
        waiting(&lock, "doc", 1).await;
        let writer = patient(Request::from("doc").write());
        waiting(&lock, "doc", 2).await;
        first.release().await;
        let writer = granted(writer.await.unwrap(), "the writer behind the reader");
        writer.release().await;
        let reader = granted(reader.await.unwrap(), "the reader, once the writer left");
        reader.release().await;
    })
    .await;
}
