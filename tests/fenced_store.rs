//! The fenced SQLite example (`examples/fenced_sqlite.rs`) as a test, against real Redis: a
//! holder that paused past its validity writes late and the store refuses it, while the later
//! holder's write stands.
// Test and demo code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The example itself, so that CI runs the code it shows; its `main` is the example's only.
#[allow(dead_code)]
#[path = "../examples/fenced_sqlite.rs"]
mod fenced_sqlite;

use std::time::Duration;

use fenced_sqlite::{Report, Store, start_cluster, two_clients};

/// The whole example, bounded so that a hang fails the test instead of stalling CI.
// promise: fenced-store
#[tokio::test]
async fn a_paused_holders_late_write_is_refused_and_the_later_holders_write_stands() {
    let cluster = start_cluster().await.expect("start redis-server processes");
    let outcome = tokio::time::timeout(Duration::from_secs(60), two_clients(&cluster.urls()))
        .await
        .expect("the example finished within its bound")
        .expect("the example ran");
    assert!(
        outcome.fence_a < outcome.fence_b,
        "the later holder has the larger fence: {outcome:?}"
    );
    assert!(outcome.b_written, "B's write was accepted: {outcome:?}");
    assert!(
        !outcome.late_write_accepted,
        "A's late write was refused: {outcome:?}"
    );
    assert_eq!(
        outcome.report,
        Report {
            body: "written by B".to_owned(),
            last_fence: outcome.fence_b,
        }
    );
}

/// The store's check alone: a higher fence writes, an equal or lower one changes nothing.
// promise: fenced-store
#[test]
fn the_store_accepts_only_a_fence_above_the_rows_last() {
    let store = Store::open().unwrap();
    assert!(store.write(1, "five", 5).unwrap());
    assert!(!store.write(1, "five again", 5).unwrap());
    assert!(!store.write(1, "three", 3).unwrap());
    assert!(store.write(1, "six", 6).unwrap());
    assert_eq!(
        store.read(1).unwrap(),
        Some(Report {
            body: "six".to_owned(),
            last_fence: 6
        })
    );
    assert!(!store.write(2, "no such row", 9).unwrap());
    assert_eq!(store.read(2).unwrap(), None);
}
