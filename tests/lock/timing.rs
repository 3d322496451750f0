//! The lock's timing rules, against real Redis, with the time a round takes imposed by the test
//! itself: every reply of a quorum delayed by the fault proxies, so the round trip is a known
//! lower bound on the elapsed time, whatever the machine's speed.
//!
//! - an acquisition grants at most `ttl − elapsed − drift` (drift = 1 % of the TTL + 2 ms), and
//!   the elapsed time includes connecting to the nodes when the acquisition had to connect;
//! - an extension grants at most its TTL less its own round and the drift;
//! - a kept lock whose extensions fail is reported lost before its validity ends.
//!
//! Every bound follows from a delay the test imposes, so it only gets safer on a slower
//! machine.

use std::time::{Duration, Instant};

use quorumlock::{Guard, KeepAlive, Lock, LockOptions, Lost};
use quorumlock_harness::TestCluster;

use crate::common::{assert_no_keys, bounded, once, proxied_cluster};

/// What each proxy adds to every chunk, each way.
const ONE_WAY: Duration = Duration::from_millis(100);

/// What one request and its reply take at least through the proxies.
const ROUND_TRIP: Duration = Duration::from_millis(200);

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
    let lock = Lock::quorum(cluster.urls(), options).unwrap();
    (cluster, lock)
}

/// Connects the lock to every node (identifying each), with no latency, so that the next
/// round costs exactly one round trip.
async fn warm_up(lock: &Lock) {
    lock.try_acquire("warm-up").await.unwrap().release().await;
    lock.settle().await;
}

/// Every reply of the quorum comes at least a round trip after its request: the grant's
/// validity, counted from the moment the round was decided, is at most the TTL less that round
/// trip and the drift. (Computed as if the round took no time, it would be 200 ms longer.)
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
        // Not early either: at the trusted deadline the lease itself reports, or after it.
        let trusted_until = earliest(|| kept.valid_until());
        assert!(
            trusted_until <= lost_at,
            "lost {:?} before the trusted deadline",
            trusted_until - lost_at
        );
        assert!(!kept.is_valid());
        kept.release().await;
    })
    .await;
}
