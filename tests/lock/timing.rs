//! The lock's timing rules, against real Redis, with the time a round takes imposed by the test
//! itself: every reply of a quorum delayed by the fault proxies, so the round trip is a known
//! lower bound on the elapsed time, whatever the machine's speed.
//!
//! - an acquisition grants at most `ttl − elapsed − drift` (drift = 1 % of the TTL + 2 ms), and
//!   the elapsed time includes connecting to the nodes when the acquisition had to connect;
//! - an extension grants at most its TTL less its own round and the drift;
//! - a kept lock whose extensions fail is reported lost before its validity ends;
//! - a restarted node that does not persist every write is refused for what is left of the
//!   restart guard's period after the uptime it surely had, and the `left` the lock reports
//!   stays within the bounds that rule gives.
//!
//! Every bound follows from a delay the test imposes (or a restart it makes), so it only gets
//! safer on a slower machine.

use std::time::{Duration, Instant};

use quorumlock::{Error, Guard, KeepAlive, Lock, LockOptions, Lost, NodeReply};
use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};

use crate::common::{
    acquire_once_voting, assert_no_keys, bounded, once, proxied_cluster, recovering,
};

/// What each proxy adds to every chunk, each way.
const ONE_WAY: Duration = Duration::from_millis(100);

/// What one request and its reply take at least through the proxies.
const ROUND_TRIP: Duration = Duration::from_millis(200);

/// The keeper's largest lead: how far ahead of a trusted deadline it may mark a lease lost
/// after its own timers fired late (`docs/chaos.md`, "The keeper's lead").
const MAX_LEAD: Duration = Duration::from_millis(100);

/// The drift the lock allows for a lease of `ttl` with the default drift factor (1 %): 1 % of
/// the TTL plus 2 ms for Redis' millisecond expiry resolution (`src/rules/validity.rs`).
fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

fn set_latency(cluster: &TestCluster, latency: Duration) {
    for node in 0..cluster.len() {
        cluster.proxy(node).unwrap().set_latency(latency);
    }
}

/// The earliest of a few readings of an instant on the lease clock mapped to `Instant`. Each
/// reading maps it anew (two clock reads), and a reader preempted between the two sees it late;
/// the earliest reading is the mapping without that delay, so a bound checked on it is not
/// loosened by the machine's scheduling.
fn earliest(read: impl Fn() -> Instant) -> Instant {
    (0..5).map(|_| read()).min().unwrap()
}

/// How long `guard` may be relied on from `from`.
fn validity_from(guard: &Guard, from: Instant) -> Duration {
    earliest(|| guard.valid_until()).saturating_duration_since(from)
}

/// A quorum of three behind proxies, and a lock over it.
async fn slow_quorum(options: LockOptions) -> (TestCluster, Lock) {
    let cluster = proxied_cluster(3).await;
    let lock = Lock::new(cluster.urls(), options).unwrap();
    (cluster, lock)
}

/// Connects the lock to every node (identifying each), with no latency, so that the next
/// round costs exactly one round trip.
async fn warm_up(lock: &Lock) {
    crate::common::warm_up(lock).await;
    lock.settle().await;
}

/// Every reply of the quorum comes at least a round trip after its request: the grant's
/// validity, counted from the moment the round was decided, is at most the TTL less that round
/// trip and the drift. (Computed as if the round took no time, it would be 200 ms longer.)
// promise: conservative-validity
#[tokio::test]
async fn an_acquisition_grants_at_most_the_ttl_less_its_round_trip_and_the_drift() {
    bounded(async {
        let ttl = Duration::from_secs(1);
        let (cluster, lock) = slow_quorum(once().ttl(ttl)).await;
        warm_up(&lock).await;
        set_latency(&cluster, ONE_WAY);

        let before = Instant::now();
        let guard = lock.try_acquire("slow").await.unwrap();
        // The premise: the round took at least the round trip the proxies impose.
        assert!(
            guard.decided_at() >= before + ROUND_TRIP,
            "decided {:?} after the call",
            guard.decided_at() - before
        );
        let granted = validity_from(&guard, guard.decided_at());
        assert!(
            granted <= ttl - ROUND_TRIP - drift(ttl),
            "granted {granted:?} of a {ttl:?} lease whose round took at least {ROUND_TRIP:?}"
        );

        set_latency(&cluster, Duration::ZERO);
        guard.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// The lease clock starts before the lock connects: a first acquisition also connects to each
/// node and identifies it (one round trip for `INFO` and `CONFIG GET` before anything may be
/// sent), so it grants at most the TTL less two round trips and the drift.
#[tokio::test]
async fn a_first_acquisition_also_pays_for_connecting_and_identifying_the_nodes() {
    bounded(async {
        let ttl = Duration::from_secs(1);
        let (cluster, lock) = slow_quorum(once().ttl(ttl)).await;
        set_latency(&cluster, ONE_WAY);

        let guard = lock.try_acquire("cold").await.unwrap();
        let granted = validity_from(&guard, guard.decided_at());
        assert!(
            granted <= ttl - 2 * ROUND_TRIP - drift(ttl),
            "granted {granted:?} of a {ttl:?} lease won over new connections"
        );

        set_latency(&cluster, Duration::ZERO);
        guard.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// An extension is a round of its own: slowed by the proxies after the acquisition, it grants at
/// most the extension's TTL (here half the lock's) less its round trip and the drift of that
/// TTL. (The first extension over a connection may take more round trips, to load its script:
/// that only shortens the validity.) The guard does not say when the extension was decided;
/// counted from when `extend` returned, a little later, the validity can only be shorter, so the
/// bound must hold there too.
// promise: conservative-validity
#[tokio::test]
async fn an_extension_grants_at_most_its_ttl_less_its_round_trip_and_the_drift() {
    bounded(async {
        let (cluster, lock) = slow_quorum(once().ttl(Duration::from_secs(2))).await;
        warm_up(&lock).await;
        let mut guard = lock.try_acquire("extended").await.unwrap();
        set_latency(&cluster, ONE_WAY);

        let extension = Duration::from_secs(1);
        let before = Instant::now();
        guard.extend(extension).await.unwrap();
        let returned = Instant::now();
        assert!(
            returned >= before + ROUND_TRIP,
            "the extension took {:?}",
            returned - before
        );
        let granted = validity_from(&guard, returned);
        assert!(
            granted <= extension - ROUND_TRIP - drift(extension),
            "granted {granted:?} by a {extension:?} extension whose round took at least \
             {ROUND_TRIP:?}"
        );
        assert!(guard.is_valid(), "{guard:?}");

        set_latency(&cluster, Duration::ZERO);
        guard.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// A majority black-holed before the keep-alive starts: no extension can succeed, so the
/// acquisition's validity is the last the lease has. The lost signal comes at the trusted
/// deadline (the validity less the margin, 50 ms for this TTL), so strictly before that
/// validity ends: a holder that stops at the signal never outlives its lease.
#[tokio::test]
async fn a_kept_lock_whose_extensions_fail_is_reported_lost_before_its_validity_ends() {
    bounded(async {
        // 2 % of 2.5 s: the largest margin (50 ms), so that the tokio timer firing a little late
        // on a loaded machine still fires before the validity ends.
        let ttl = Duration::from_millis(2_500);
        let options = once().ttl(ttl).node_timeout(Duration::from_millis(200));
        let (cluster, lock) = slow_quorum(options).await;
        warm_up(&lock).await;
        let guard = lock.try_acquire("kept").await.unwrap();
        let validity_ends = earliest(|| guard.valid_until());
        cluster.proxy(0).unwrap().blackhole();
        cluster.proxy(1).unwrap().blackhole();

        let kept = guard.keep_alive(KeepAlive::new()).unwrap();
        let lost = kept.lost().await;
        let lost_at = Instant::now();

        assert!(matches!(lost, Lost::Expired { .. }), "{lost}");
        assert_eq!(kept.extensions(), 0, "no extension reached a quorum");
        assert!(
            lost_at < validity_ends,
            "lost {:?} after the validity ended",
            lost_at - validity_ends
        );
        // Not early either: at the trusted deadline the lease itself reports, or ahead of it by
        // no more than the keeper's lead (at most 100 ms, as late as its own timers fired on a
        // loaded machine). A lease given up at its first failed extension would be ~1.4 s early.
        let trusted_until = earliest(|| kept.valid_until());
        assert!(
            trusted_until <= lost_at + MAX_LEAD,
            "lost {:?} before the trusted deadline",
            trusted_until - lost_at
        );
        assert!(!kept.is_valid());
        kept.release().await;
    })
    .await;
}

/// Nodes that run AOF but fsync only every second (`appendfsync everysec`) may lose the last
/// writes in a crash, so the restart guard treats them as nodes without persistence.
async fn everysec_cluster(nodes: usize) -> TestCluster {
    let aof_everysec = ["--appendonly", "yes", "--appendfsync", "everysec"];
    TestCluster::start(
        ClusterOptions::default()
            .nodes(nodes)
            .persistence(Persistence::None)
            .extra_args(aof_everysec.map(String::from).to_vec()),
    )
    .await
    .expect("start redis-server processes")
}

/// The commands a node has run since it started (`INFO commandstats`), read directly.
async fn commands_run(cluster: &TestCluster, node: usize) -> String {
    let mut connection = cluster.connection(node).await.unwrap();
    redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut connection)
        .await
        .unwrap()
}

/// How long the restarted node is left up before the lock reconnects to it.
const UP_BEFORE_RECONNECT: Duration = Duration::from_millis(2_500);

/// A node with AOF `everysec`, restarted, is refused (`Recovering`, no `SET` sent) with the
/// `left` the rule gives from what the node itself reports on reconnect: what is left of the
/// guard period (`max_ttl` + drift) after the uptime it surely had (its whole-second
/// `uptime_in_seconds`, less the second by which that can exceed the real uptime).
///
/// So, with S the node's start (after `start_node` was called, before it returned), R the
/// reconnect and C the check (before the acquisition returned):
/// - at least the period less the time since S, since the surely-had uptime is at most the real
///   one: `left ≥ period − (returned − start_called)`;
/// - at most the period less one second: it was up for more than 2.5 s at R, so it reports at
///   least 2 s (whole seconds, less than one off the real uptime), and surely had 1 s.
#[tokio::test]
async fn a_restarted_node_without_every_write_fsynced_is_refused_for_what_is_left_of_the_guard() {
    bounded(async {
        let ttl = Duration::from_secs(4);
        let mut cluster = everysec_cluster(3).await;
        // All three needed: each acquisition waits for node 0's own answer, so the one that
        // reconnects to it reports what the restarted node said (with a majority of two, the
        // other nodes could decide it while node 0 is still being identified).
        let lock = Lock::new(cluster.urls(), once().ttl(ttl).quorum_size(3)).unwrap();
        let period = lock.restart_guard_period().unwrap();
        assert_eq!(period, ttl + drift(ttl), "max_ttl (the TTL) + 1 % + 2 ms");
        // The fresh nodes are held back too: once they vote, the lock's connections are past
        // their guard, and what node 0 reports next comes from its restart.
        acquire_once_voting(&lock, "warm-up").await.release().await;
        lock.settle().await;

        cluster.kill(0).await.unwrap();
        let start_called = Instant::now();
        cluster.start_node(0).await.unwrap();
        tokio::time::sleep(UP_BEFORE_RECONNECT).await;

        // The first request to node 0 may fail on the connection the restart broke; the next
        // one reconnects, and is refused without anything sent: the lock is unavailable.
        let mut replies = Vec::new();
        let mut seen = None;
        for round in 0..3 {
            let error = lock
                .try_acquire(format!("refused-{round}"))
                .await
                .unwrap_err();
            let returned = Instant::now();
            let reply = error.outcomes()[0].reply.clone();
            assert_ne!(reply, NodeReply::Ours, "round {round}: {error}");
            if let Some(left) = recovering(&error.outcomes()[0]) {
                assert!(matches!(error, Error::Unavailable { .. }), "{error}");
                seen = Some((returned, left));
                break;
            }
            replies.push(reply);
        }
        let (returned, left) =
            seen.unwrap_or_else(|| panic!("node 0 never recovering: {replies:?}"));
        let since_start = returned - start_called;
        assert!(
            left >= period.saturating_sub(since_start),
            "left {left:?}, {since_start:?} after the restart began, of {period:?}"
        );
        assert!(
            left <= period - Duration::from_secs(1),
            "left {left:?} of {period:?}: the uptime the node surely had does not count"
        );
        lock.settle().await;
        // One attempt per acquisition: the acquire request is `SET NX PX`. (The release after
        // an attempt that failed on the broken connection does reach the node, over the new
        // connection: a compare-and-delete, which cannot set a key.)
        let commands = commands_run(&cluster, 0).await;
        assert!(
            !commands.contains("cmdstat_set:"),
            "an acquire request reached the restarted node 0:\n{commands}"
        );
    })
    .await;
}
