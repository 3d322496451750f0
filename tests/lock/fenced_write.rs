//! `FencedWrite` against real servers: a write on a store of the application's own (a Redis that
//! is not a lock node) runs only under a fence at least the highest seen there, so a deposed
//! holder's late write is refused and the later holder's stands; a write the store refuses
//! leaves the highest fence as it was.

use std::time::Duration;

use quorumlock::{Fenced, FencedWrite, Lock, NodeError, Patience, Request};
use redis::AsyncCommands;

use crate::common::{bounded, cluster, once};

fn set(value: &str) -> redis::Cmd {
    let mut write = redis::cmd("SET");
    write.arg("report").arg(value);
    write
}

/// A holds the lock and writes twice (equal fences are its own); its lease runs out while it
/// is paused, B takes the lock (woken by the expiry) and writes; A's late write is refused with
/// B's fence, and the store keeps B's value.
// promise: fenced-store
#[tokio::test]
async fn a_deposed_holders_late_write_is_refused_and_the_later_holders_stands() {
    bounded(async {
        let servers = cluster(4).await;
        let urls = servers.urls();
        let lock = Lock::new(&urls[..3], once().fencing(true)).unwrap();
        let mut store = servers.connection(3).await.unwrap();

        let a = lock
            .acquire(Request::from("report").ttl(Duration::from_millis(200)))
            .await
            .unwrap();
        let a_write = FencedWrite::of(&a, "report:fence").unwrap();
        for value in ["a1", "a2"] {
            let written = a_write.run(&mut store, &set(value)).await.unwrap();
            assert!(matches!(written, Fenced::Written(_)), "{written:?}");
        }
        // A pauses: it neither extends nor releases, and B waits out its keys.
        std::mem::forget(a);
        let b = lock
            .acquire(Request::from("report").patience(Patience::Wait(Duration::from_secs(10))))
            .await
            .unwrap();
        let b_write = FencedWrite::of(&b, "report:fence").unwrap();
        assert!(b.fence() > Some(a_write.fence()));
        let written = b_write.run(&mut store, &set("b")).await.unwrap();
        assert!(matches!(written, Fenced::Written(_)), "{written:?}");

        let late = a_write.run(&mut store, &set("a late")).await.unwrap();
        assert_eq!(
            late,
            Fenced::Refused {
                highest: b.fence().unwrap()
            }
        );
        let value: String = store.get("report").await.unwrap();
        assert_eq!(value, "b");
        b.release().await;
    })
    .await;
}

/// A write the store refuses (`WRONGTYPE`) is that error, and the fence it carried is not
/// recorded: a lower fence still writes afterwards. A fence key holding something else is the
/// script's `FENCE` error, and nothing is written.
#[tokio::test]
async fn a_refused_write_records_no_fence_and_a_foreign_fence_key_is_an_error() {
    bounded(async {
        let servers = cluster(1).await;
        let mut store = servers.connection(0).await.unwrap();
        let _: () = store.rpush("list", "x").await.unwrap();
        let mut incr = redis::cmd("INCR");
        incr.arg("list");
        let refused = FencedWrite::new("fence", 9).run(&mut store, &incr).await;
        assert!(
            matches!(refused, Err(NodeError::WrongType(_))),
            "{refused:?}"
        );
        let stored: Option<u64> = store.get("fence").await.unwrap();
        assert_eq!(stored, None);
        let written = FencedWrite::new("fence", 3)
            .run(&mut store, &set("after"))
            .await
            .unwrap();
        assert!(matches!(written, Fenced::Written(_)), "{written:?}");

        let _: () = store.set("foreign", "not a number").await.unwrap();
        let foreign = FencedWrite::new("foreign", 1)
            .run(&mut store, &set("never"))
            .await;
        assert!(
            matches!(&foreign, Err(NodeError::Server { code, .. }) if code == "FENCE"),
            "{foreign:?}"
        );
        let value: String = store.get("report").await.unwrap();
        assert_eq!(value, "after");
    })
    .await;
}
