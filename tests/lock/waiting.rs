//! Waiting for a held lock (`Patience::Wait`): woken by a release anywhere or by the
//! holder's keys expiring, never by a poll timer; served in arrival order within one `Lock`;
//! never hung past the caller's own deadline.
//!
//! Each waiter's lock has a TTL far longer than its wait, and no holder's key expires within
//! the wait unless the test says so: a waiter that was not woken by the event under test would
//! sleep past its deadline and fail, whatever the machine's speed.

use quorumlock::{Patience, Request};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorumlock::{Error, KeyFormat, Lock, LockOptions, NodeError, NodeReply};
use quorumlock_harness::TestCluster;

use crate::common::{
    assert_no_keys, bounded, cluster, command_calls, key, once, proxied_cluster, require_password,
    until,
};

/// A TTL longer than any wait here: a waiter that falls back on its own TTL misses its deadline.
const LONG_TTL: Duration = Duration::from_secs(60);

/// Subscribers to `channel` on node `node`, read directly.
async fn subscribers(cluster: &TestCluster, node: usize, channel: &[u8]) -> i64 {
    let mut connection = cluster.connection(node).await.unwrap();
    let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut connection)
        .await
        .unwrap();
    match reply.get(1) {
        Some(redis::Value::Int(count)) => *count,
        other => panic!("PUBSUB NUMSUB: {other:?}"),
    }
}

/// Waits until every node has `count` subscribers to `channel` (at most 10 s).
async fn subscribed_everywhere(cluster: &TestCluster, channel: &[u8], count: i64) {
    let everywhere = quorumlock_harness::eventually(Duration::from_secs(10), async || {
        for node in 0..cluster.len() {
            if subscribers(cluster, node, channel).await != count {
                return false;
            }
        }
        true
    });
    assert!(
        everywhere.await,
        "not {count} subscribers to {channel:?} on every node"
    );
}

/// Another client's key on every node, as a holder that crashed and never releases leaves it.
async fn held_elsewhere(cluster: &TestCluster, key: &[u8], ttl: Duration) {
    for node in 0..cluster.len() {
        let mut connection = cluster.connection(node).await.unwrap();
        let () = redis::cmd("SET")
            .arg(key)
            .arg("another-client")
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap())
            .query_async(&mut connection)
            .await
            .unwrap();
    }
}

// promise: waiters-woken
#[tokio::test]
async fn a_waiter_is_woken_by_another_clients_release() {
    bounded(async {
        let cluster = cluster(3).await;
        let holder = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let waiter = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let held = holder.try_acquire("job").await.unwrap();
        let waiting = tokio::spawn(async move {
            let result = waiter
                .acquire(Request::from("job").patience(Patience::Wait(Duration::from_secs(20))))
                .await;
            (waiter, result)
        });
        subscribed_everywhere(&cluster, &key("job"), 1).await;
        held.release().await;
        let (waiter, result) = waiting.await.unwrap();
        let guard = result.expect("woken by the release, 59 s before the key would expire");
        guard.release().await;
        // Nobody waits any more: nothing stays subscribed.
        subscribed_everywhere(&cluster, &key("job"), 0).await;
        assert_eq!(waiter.waiters("job"), 0);
    })
    .await;
}

/// In one process the next holder is known: it is woken as soon as the release is handed to
/// the nodes' connections, so its `SET NX` follows the release there, in the same round trip,
/// not a round later. Seen on the servers, behind proxies that delay every byte by a second each
/// way: the waiter's key stands on a node (read directly) a second after the release went out,
/// while the release's own replies, and every node's published release, are still on their way
/// back. Woken by either of those instead, its key would come a second after the release
/// returned.
#[tokio::test]
async fn a_waiter_of_the_same_lock_follows_the_release_on_each_connection() {
    bounded(async {
        let cluster = proxied_cluster(3).await;
        let lock = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let held = lock.try_acquire("job").await.unwrap();
        let holders_token = held.token().as_str().to_owned();
        let waiting = {
            let lock = lock.clone();
            tokio::spawn(async move {
                lock.acquire(Request::from("job").patience(Patience::Wait(Duration::from_secs(60))))
                    .await
            })
        };
        subscribed_everywhere(&cluster, &key("job"), 1).await;
        for node in 0..cluster.len() {
            cluster
                .proxy(node)
                .unwrap()
                .set_latency(Duration::from_secs(1));
        }
        let releasing = tokio::spawn(held.release());
        let followed = quorumlock_harness::eventually(Duration::from_secs(4), async || {
            let mut connection = cluster.connection(0).await.unwrap();
            let value: Option<String> = redis::cmd("GET")
                .arg(key("job"))
                .query_async(&mut connection)
                .await
                .unwrap();
            value.is_some_and(|token| token != holders_token) && !releasing.is_finished()
        })
        .await;
        assert!(
            followed,
            "the waiter's key did not stand on a node before the release returned"
        );
        let guard = waiting.await.unwrap().expect("the waiter wins");
        // It returned once a quorum was free of the holder's key.
        assert!(releasing.await.unwrap().held >= 2);
        guard.release().await;
    })
    .await;
}

/// Another Redlock client (pottery's key format) holds the lock and releases it by deleting its
/// keys, publishing nothing: the waiter finds the lock free at its re-check, 100 ms by default
/// for a peer's format, long before the holder's keys would expire (60 s) or its own wait ends
/// (5 s).
// promise: interop-recheck
#[tokio::test]
async fn a_peers_release_that_publishes_nothing_is_found_by_the_recheck() {
    bounded(async {
        let cluster = cluster(3).await;
        let key = b"redlock:job";
        held_elsewhere(&cluster, key, LONG_TTL).await;
        let options = once().ttl(LONG_TTL).key_format(KeyFormat::Pottery);
        let waiter = Lock::new(cluster.urls(), options).unwrap();
        let waiting = tokio::spawn(async move {
            waiter
                .acquire(Request::from("job").patience(Patience::Wait(Duration::from_secs(5))))
                .await
        });
        // Refused once and waiting: subscribed, to a channel nobody will publish on.
        subscribed_everywhere(&cluster, key, 1).await;
        for node in 0..cluster.len() {
            let mut connection = cluster.connection(node).await.unwrap();
            let deleted: i64 = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut connection)
                .await
                .unwrap();
            assert_eq!(deleted, 1);
        }
        let guard = waiting
            .await
            .unwrap()
            .expect("the re-check finds the keys gone before the wait's end");
        assert_eq!(guard.resource(), b"job");
        guard.release().await;
    })
    .await;
}

/// Nobody releases: the waiter sleeps until the keys expire, reading their time left after its
/// refused attempt, not again and again. (Broken on purpose by ending the expiry sleep at once:
/// node 0 is asked for the key's `PTTL` hundreds of times.)
// promise: waiters-woken
#[tokio::test]
async fn a_waiter_is_woken_when_the_holders_keys_expire() {
    bounded(async {
        let cluster = cluster(3).await;
        held_elsewhere(&cluster, &key("job"), Duration::from_millis(1_500)).await;
        let waiter = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let guard = waiter
            .acquire(Request::from("job").patience(Patience::Wait(Duration::from_secs(20))))
            .await
            .expect("no release is ever published: woken by the keys' expiry");
        let reads = command_calls(&cluster, 0, "pttl").await;
        assert!(
            (1..=3).contains(&reads),
            "{reads} reads of the expiry: one after each refused attempt"
        );
        guard.release().await;
    })
    .await;
}

/// The waiter reads the keys' expiry again just before it: a holder that extended its lease
/// while the waiter slept is found by that read, and the waiter sleeps on without sending an
/// attempt bound to be refused. An attempt at a lock is a `SET` on each node (the read is a
/// script). (Broken on purpose by never reading again: node 0 then sees a second attempt,
/// refused, at the first expiry.)
#[tokio::test]
async fn a_waiter_reads_the_expiry_again_before_it_and_sleeps_on_past_an_extension() {
    bounded(async {
        let cluster = cluster(3).await;
        held_elsewhere(&cluster, &key("job"), Duration::from_millis(1_500)).await;
        let waiter = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let acquiring = tokio::spawn(async move {
            let result = waiter
                .acquire(Request::from("job").patience(Patience::Wait(Duration::from_secs(20))))
                .await;
            (waiter, result)
        });
        // Its first attempt was refused and it has read the expiry: it sleeps until it.
        let read = quorumlock_harness::eventually(Duration::from_secs(10), async || {
            command_calls(&cluster, 0, "pttl").await > 0
        });
        assert!(read.await, "the waiter reads the expiry after its refusal");
        let attempts_before = command_calls(&cluster, 0, "set").await;
        // The holder extends its lease, as its keep-alive would.
        for node in 0..cluster.len() {
            let mut connection = cluster.connection(node).await.unwrap();
            let extended: i64 = redis::cmd("PEXPIRE")
                .arg(key("job"))
                .arg(3_000)
                .query_async(&mut connection)
                .await
                .unwrap();
            assert_eq!(extended, 1, "the holder's key is still there to extend");
        }
        let (waiter, result) = acquiring.await.unwrap();
        let guard = result.expect("woken by the keys' expiry after the extension");
        assert_eq!(
            command_calls(&cluster, 0, "set").await - attempts_before,
            1,
            "one attempt after the extension, the one that won: none at the first expiry"
        );
        guard.release().await;
        waiter.settle().await;
    })
    .await;
}

/// A re-check that comes before the keys expire is kept: the waiter tries at each re-check,
/// one read of the expiry after each refusal and no second read pushing the next re-check out.
/// (Broken on purpose by reading again 10 ms before each re-check and counting the re-check
/// from that read: twice as many reads as attempts.)
#[tokio::test]
async fn a_recheck_before_the_expiry_is_kept_with_one_read_per_refusal() {
    bounded(async {
        let cluster = cluster(3).await;
        held_elsewhere(&cluster, &key("job"), LONG_TTL).await;
        let options = once().ttl(LONG_TTL).recheck(Duration::from_millis(50));
        let waiter = Lock::new(cluster.urls(), options).unwrap();
        let result = waiter
            .acquire(Request::from("job").patience(Patience::Wait(Duration::from_secs(1))))
            .await;
        assert!(matches!(result, Err(Error::Held { .. })), "{result:?}");
        waiter.settle().await;
        // One `SET` was the holder's own, written here.
        let attempts = command_calls(&cluster, 0, "set").await - 1;
        let reads = command_calls(&cluster, 0, "pttl").await;
        assert!(
            attempts >= 3,
            "{attempts} attempts in a second of 50 ms re-checks"
        );
        assert!(
            reads <= attempts,
            "{reads} reads of the expiry for {attempts} attempts: one after each refusal"
        );
    })
    .await;
}

#[tokio::test]
async fn a_killed_subscription_is_made_again_and_its_waiter_still_gets_the_lock() {
    bounded(async {
        let cluster = cluster(3).await;
        let holder = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let waiter = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let held = holder.try_acquire("job").await.unwrap();
        let waiting = tokio::spawn(async move {
            waiter
                .acquire(Request::from("job").patience(Patience::Wait(Duration::from_secs(20))))
                .await
        });
        subscribed_everywhere(&cluster, &key("job"), 1).await;
        for node in 0..cluster.len() {
            let mut connection = cluster.connection(node).await.unwrap();
            let killed: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("pubsub")
                .query_async(&mut connection)
                .await
                .unwrap();
            assert_eq!(
                killed, 1,
                "node {node}: the waiter's one subscription connection"
            );
        }
        // Made again, with the same channel.
        subscribed_everywhere(&cluster, &key("job"), 1).await;
        held.release().await;
        let guard = waiting
            .await
            .unwrap()
            .expect("woken after the subscription came back");
        guard.release().await;
    })
    .await;
}

// promise: waiters-woken
#[tokio::test]
async fn waiters_of_one_lock_are_served_in_arrival_order() {
    bounded(async {
        let cluster = cluster(3).await;
        held_elsewhere(&cluster, &key("job"), LONG_TTL).await;
        let lock = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for arrival in 0..6 {
            let (waiter, served) = (lock.clone(), Arc::clone(&served));
            tasks.push(tokio::spawn(async move {
                let guard = waiter
                    .acquire(Request::from("job").patience(Patience::Wait(Duration::from_secs(60))))
                    .await
                    .unwrap();
                served.lock().unwrap().push(arrival);
                guard.release().await;
            }));
            // The next one arrives only once this one is queued.
            while lock.waiters("job") <= arrival {
                tokio::task::yield_now().await;
            }
        }
        // The other client's holder releases (its key is deleted, and a release published).
        for node in 0..cluster.len() {
            let mut connection = cluster.connection(node).await.unwrap();
            let () = redis::cmd("DEL")
                .arg(key("job"))
                .query_async(&mut connection)
                .await
                .unwrap();
            let _: i64 = redis::cmd("PUBLISH")
                .arg(key("job"))
                .arg("")
                .query_async(&mut connection)
                .await
                .unwrap();
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*served.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
    })
    .await;
}

// promise: waiters-woken
#[tokio::test]
async fn a_waiter_gives_up_by_its_own_deadline_and_leaves_nothing_subscribed() {
    bounded(async {
        let cluster = cluster(3).await;
        let holder = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let waiter = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let held = holder.try_acquire("job").await.unwrap();
        let started = Instant::now();
        let error = waiter
            .acquire(Request::from("job").patience(Patience::Wait(Duration::from_millis(300))))
            .await
            .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(matches!(error, Error::Held { .. }), "{error}");
        assert_eq!(waiter.waiters("job"), 0);
        subscribed_everywhere(&cluster, &key("job"), 0).await;
        held.release().await;
    })
    .await;
}

/// Two of three nodes refuse the lock's password: no quorum until someone changes them. A
/// waiting acquisition, a retrying one and a semaphore's retrying one each return that at once
/// instead of trying for the ten minutes they were given, and leave no key.
// promise: wait-ends-on-permanent
#[tokio::test]
async fn an_error_no_retry_can_cure_ends_a_wait_and_a_retry_at_once() {
    bounded(async {
        let cluster = cluster(3).await;
        for node in 1..3 {
            require_password(&cluster, node, "s3cret").await;
        }
        let lock = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let minutes = Duration::from_secs(600);
        let many = quorumlock::RetryPolicy::new()
            .attempts(600)
            .delay(Duration::from_secs(1))
            .max_wait(minutes);
        let requests = [
            Request::from("job").patience(Patience::Wait(minutes)),
            Request::from("job").patience(Patience::Retry(many.clone())),
            Request::from("pool")
                .permits(2)
                .patience(Patience::Retry(many)),
        ];
        for request in requests {
            // A hang guard, not a speed bound: each call returns after its first attempt.
            let call = tokio::time::timeout(Duration::from_secs(20), lock.acquire(request));
            let error = call.await.expect("the call kept trying").unwrap_err();
            assert!(error.is_permanent(), "{error}");
            let refused = error
                .outcomes()
                .iter()
                .filter(|o| matches!(o.reply, NodeReply::Failed(NodeError::Auth(_))))
                .count();
            assert_eq!(refused, 2, "{error}");
        }
        lock.settle().await;
        assert_no_keys(&cluster, 0..1).await;
    })
    .await;
}

/// A waiter woken by the holder's release finds another kind of value where two of three nodes
/// keep the fence counter (`WRONGTYPE` in the fenced attempt's script): its wait ends with that
/// error at once, not at its deadline ten minutes on.
// promise: wait-ends-on-permanent
#[tokio::test]
async fn an_error_no_retry_can_cure_found_while_waiting_ends_the_wait() {
    bounded(async {
        let cluster = cluster(3).await;
        let options = once().ttl(LONG_TTL).fencing(true);
        let holder = Lock::new(cluster.urls(), options.clone()).unwrap();
        let waiter = Lock::new(cluster.urls(), options).unwrap();
        let held = holder.try_acquire("job").await.unwrap();
        let minutes = Request::from("job").patience(Patience::Wait(Duration::from_secs(600)));
        let waiting_call = tokio::spawn(async move { waiter.acquire(minutes).await });
        until(async || command_calls(&cluster, 0, "subscribe").await > 0).await;
        // Someone else's hash where two nodes keep the resource's fence counter.
        for node in 1..3 {
            let mut connection = cluster.connection(node).await.unwrap();
            let _: () = redis::pipe()
                .del("quorumlock-fence:job")
                .hset("quorumlock-fence:job", "field", "value")
                .query_async(&mut connection)
                .await
                .unwrap();
        }
        held.release().await;
        // A hang guard, not a speed bound: the woken attempt's error ends the wait.
        let woken = tokio::time::timeout(Duration::from_secs(20), waiting_call);
        let error = woken
            .await
            .expect("the waiter kept trying")
            .unwrap()
            .unwrap_err();
        assert!(error.is_permanent(), "{error}");
        let wrong = error
            .outcomes()
            .iter()
            .filter(|o| matches!(o.reply, NodeReply::Failed(NodeError::WrongType(_))))
            .count();
        assert_eq!(wrong, 2, "{error}");
    })
    .await;
}

// promise: no-panics
#[tokio::test]
async fn extreme_waits_and_timeouts_are_handled_not_panics() {
    bounded(async {
        let cluster = cluster(3).await;
        let lock = Lock::new(
            cluster.urls(),
            once().ttl(LONG_TTL).connect_timeout(Duration::MAX),
        )
        .unwrap();
        for wait in [Duration::ZERO, Duration::MAX] {
            let guard = lock
                .acquire(Request::from("free").patience(Patience::Wait(wait)))
                .await
                .unwrap();
            guard.release().await;
        }
        assert!(matches!(
            lock.acquire(Request::from("").patience(Patience::Wait(Duration::MAX)))
                .await,
            Err(Error::Config(_))
        ));
    })
    .await;
}

/// A default `acquire` of a free lock is one attempt: it subscribes to nothing, on no node.
/// (Broken on purpose by always joining the queue first: the SUBSCRIBE count goes up.)
// promise: free-lock-one-attempt
#[tokio::test]
async fn a_default_acquire_of_a_free_lock_tries_first_and_subscribes_to_nothing() {
    bounded(async {
        let cluster = cluster(3).await;
        let lock = Lock::new(cluster.urls(), LockOptions::new().ttl(LONG_TTL)).unwrap();
        for resource in ["free", "free", "other"] {
            lock.acquire(resource).await.unwrap().release().await;
        }
        let set = quorumlock::Resources::new(["s1", "s2"]).unwrap();
        lock.acquire(&set).await.unwrap().release().await;
        for node in 0..cluster.len() {
            assert_eq!(
                command_calls(&cluster, node, "subscribe").await,
                0,
                "node {node} was sent SUBSCRIBE for a free lock"
            );
        }
    })
    .await;
}

/// A set's waiter is queued and woken by another client's release of any one of its resources:
/// the holder's key outlives the wait, so only the wake-up gets it in time. (Broken on purpose
/// by subscribing only a set's first key: the waiter sleeps past its deadline.)
#[tokio::test]
async fn a_sets_waiter_is_woken_by_another_clients_release_of_one_of_its_resources() {
    bounded(async {
        let cluster = cluster(3).await;
        let holder = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let waiter = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let held = holder.try_acquire("q").await.unwrap();
        let waiting = tokio::spawn({
            let waiter = waiter.clone();
            async move {
                let set = quorumlock::Resources::new(["p", "q"]).unwrap();
                let request = Request::from(&set).patience(Patience::Wait(Duration::from_secs(20)));
                waiter.acquire(request).await
            }
        });
        crate::common::waiting(&waiter, "q", 1).await;
        assert_eq!(
            waiter.waiters("p"),
            1,
            "queued for each resource of the set"
        );
        // Released only once the waiter sleeps: refused after its subscription, it read both
        // keys' expiry on node 0.
        until(async || command_calls(&cluster, 0, "pttl").await >= 2).await;
        held.release().await;
        let guard = waiting.await.unwrap().unwrap();
        assert_eq!(guard.resources().count(), 2);
        assert_eq!(waiter.waiters("q"), 0, "it left every queue");
        guard.release().await;
    })
    .await;
}

/// One node of five hangs (SIGSTOP, after the connection is made: TCP still answers) and its
/// node and connect timeouts are longer than the waiter's whole wait: the waiter, subscribed on
/// the four others, still gets the lock when it is released. (Broken on purpose by waiting for
/// every node's confirmation: the waiter spends its wait on the hung node and never tries again.)
// promise: bounded-waits
#[tokio::test]
async fn a_hung_minority_never_holds_up_a_waiter() {
    bounded(async {
        let mut cluster = cluster(5).await;
        let slow = LockOptions::new()
            .ttl(LONG_TTL)
            .node_timeout(Duration::from_secs(8))
            .connect_timeout(Duration::from_secs(8));
        let holder = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let waiter = Lock::new(cluster.urls(), slow).unwrap();
        let held = holder.try_acquire("job").await.unwrap();
        cluster.pause(4).unwrap();
        let waiting = tokio::spawn({
            let waiter = waiter.clone();
            async move {
                let request = Request::from("job").patience(Patience::Wait(Duration::from_secs(4)));
                waiter.acquire(request).await
            }
        });
        // Released only once the waiter sleeps: refused after its subscription, it read the
        // key's expiry on node 0. A release while that attempt is in flight can leave it
        // undecided (two grants, two refusals) until the hung node's timeout, past the wait.
        until(async || command_calls(&cluster, 0, "pttl").await >= 1).await;
        held.release().await;
        let result = waiting.await.unwrap();
        cluster.resume(4).unwrap();
        let guard = result.unwrap();
        guard.release().await;
    })
    .await;
}

/// Clients connected to each node, of `kind` (`"pubsub"`) or of any kind, less the connection
/// that asks.
async fn clients(cluster: &TestCluster, kind: Option<&str>) -> Vec<usize> {
    let mut counts = Vec::new();
    for node in 0..cluster.len() {
        let mut connection = cluster.connection(node).await.unwrap();
        let mut list = redis::cmd("CLIENT");
        list.arg("LIST");
        if let Some(kind) = kind {
            list.arg("TYPE").arg(kind);
        }
        let listed: String = list.query_async(&mut connection).await.unwrap();
        let mine = usize::from(kind.is_none());
        counts.push(listed.lines().count().saturating_sub(mine));
    }
    counts
}

/// A lock's subscription connections close when its last waiter has left (after a second's
/// linger), and a dropped `Lock` leaves no connection of any kind on the nodes. (Broken on purpose by keeping the connection
/// when the last channel is unsubscribed: the pub/sub clients stay.)
#[tokio::test]
async fn no_connection_outlives_its_waiters_or_its_lock() {
    bounded(async {
        let cluster = cluster(3).await;
        let before = clients(&cluster, None).await;
        let holder = Lock::new(cluster.urls(), once().ttl(LONG_TTL)).unwrap();
        let waiter = Lock::new(cluster.urls(), LockOptions::new().ttl(LONG_TTL)).unwrap();
        let held = holder.try_acquire("job").await.unwrap();
        let waiting = tokio::spawn({
            let waiter = waiter.clone();
            async move {
                let request =
                    Request::from("job").patience(Patience::Wait(Duration::from_secs(20)));
                waiter.acquire(request).await
            }
        });
        subscribed_everywhere(&cluster, &key("job"), 1).await;
        assert_eq!(clients(&cluster, Some("pubsub")).await, [1, 1, 1]);
        held.release().await;
        let guard = waiting.await.unwrap().unwrap();
        guard.release().await;
        // Each lock keeps its one data connection per node, and nothing else: a connection whose
        // last channel was unsubscribed is a plain client again, so all are counted.
        let with_locks: Vec<usize> = before.iter().map(|count| count + 2).collect();
        let closed = quorumlock_harness::eventually(Duration::from_secs(10), async || {
            clients(&cluster, None).await == with_locks
        });
        assert!(
            closed.await,
            "{:?} clients per node with both locks alive, {with_locks:?} expected",
            clients(&cluster, None).await
        );

        for lock in [holder, waiter] {
            lock.settle().await;
            drop(lock);
        }
        let gone = quorumlock_harness::eventually(Duration::from_secs(10), async || {
            clients(&cluster, None).await == before
        });
        assert!(
            gone.await,
            "{:?} clients per node left, {before:?} before the locks",
            clients(&cluster, None).await
        );
    })
    .await;
}
