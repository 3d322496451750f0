//! The metrics the lock records (feature `metrics`), read back from a debugging recorder
//! against real Redis: a won and a held acquisition, a node that is down, the restart guard
//! holding a fresh node back, a kept lease, and a keep-alive that falls behind.
//!
//! Its own binary, with the recorder installed globally once (it is its own process), so that
//! what the lock records from its spawned tasks (connections, the keeper, background releases)
//! on any thread is seen, and no other test's lock adds to the counts.
// Test code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The lock tests' helpers; this binary uses a few of them.
#[allow(dead_code)]
#[path = "lock/common.rs"]
mod common;

use std::collections::HashMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use quorumlock::{Error, KeepAlive, Lock};

use crate::common::*;

/// What the lock recorded: each snapshot of the debugging recorder takes its counters and
/// histograms and sets its gauges back to zero, so they are summed here.
struct Recorded {
    snapshotter: Snapshotter,
    /// Every gauge's value, summed over the snapshots.
    gauges: HashMap<String, f64>,
    /// Counters and histograms snapshot since the last look.
    pending: HashMap<String, DebugValue>,
}

/// One look: counter values and histogram samples since the previous one, by `name{labels}`.
struct Look(HashMap<String, DebugValue>);

impl Recorded {
    fn install() -> Recorded {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        Recorded {
            snapshotter,
            gauges: HashMap::new(),
            pending: HashMap::new(),
        }
    }

    /// What was recorded since the last look.
    fn look(&mut self) -> Look {
        self.snapshot();
        Look(std::mem::take(&mut self.pending))
    }

    /// Takes a snapshot into `gauges` and `pending`.
    fn snapshot(&mut self) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let (_, key) = key.into_parts();
            let mut labels: Vec<String> = key
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            labels.sort();
            let name = if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            };
            match (value, self.pending.get_mut(&name)) {
                (DebugValue::Gauge(value), _) => {
                    *self.gauges.entry(name).or_default() += value.into_inner();
                }
                (DebugValue::Counter(more), Some(DebugValue::Counter(count))) => *count += more,
                (DebugValue::Histogram(more), Some(DebugValue::Histogram(samples))) => {
                    samples.extend(more);
                }
                (value, _) => {
                    self.pending.insert(name, value);
                }
            }
        }
    }

    /// A gauge's value now.
    fn gauge(&mut self, name: &str) -> f64 {
        self.snapshot();
        self.gauges.get(name).copied().unwrap_or_default()
    }
}

impl Look {
    /// A counter's increments in this look (0 if it was not touched).
    fn counter(&self, name: &str) -> u64 {
        match self.0.get(name) {
            Some(DebugValue::Counter(count)) => *count,
            None => 0,
            Some(other) => panic!("{name} is no counter: {other:?}"),
        }
    }

    /// How many samples a histogram got in this look.
    fn samples(&self, name: &str) -> usize {
        match self.0.get(name) {
            Some(DebugValue::Histogram(samples)) => samples.len(),
            None => 0,
            Some(other) => panic!("{name} is no histogram: {other:?}"),
        }
    }

    /// The sum of the increments of every counter whose name (with labels) starts with `prefix`.
    fn counters(&self, prefix: &str) -> u64 {
        self.0
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(name, _)| self.counter(name))
            .sum()
    }
}

impl std::fmt::Debug for Look {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.0.iter().collect();
        names.sort_by(|a, b| a.0.cmp(b.0));
        f.debug_map().entries(names).finish()
    }
}

/// Every case in one test, in turn, each reading only what it recorded.
#[tokio::test]
async fn the_lock_records_its_outcomes() {
    let mut recorded = Recorded::install();
    bounded(async {
        let (cluster, lock) = quorum_lock(3, once()).await;
        warm_up(&lock).await;
        drop(recorded.look());

        won(&mut recorded, &lock).await;
        held(&mut recorded, &lock).await;
        kept(&mut recorded, &lock).await;
        node_down(&mut recorded, &cluster.urls()).await;
        sat_out(&mut recorded).await;
        behind(&mut recorded).await;
    })
    .await;
}

/// A won acquisition and its release: one count and one duration sample, for the quorum.
async fn won(recorded: &mut Recorded, lock: &Lock) {
    let guard = lock.try_acquire("won").await.unwrap();
    guard.release().await;
    lock.settle().await;
    let look = recorded.look();
    assert_eq!(
        look.counter("quorumlock_acquisitions_total{outcome=won,topology=quorum}"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.counters("quorumlock_acquisitions_total"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.samples("quorumlock_acquire_duration_seconds{outcome=won,topology=quorum}"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.counter("quorumlock_releases_total{via=release}"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.counters("quorumlock_node_errors_total"),
        0,
        "{look:#?}"
    );
}

/// An acquisition of a resource another guard holds is counted as held, with its duration; a
/// dropped guard's release is counted as such.
async fn held(recorded: &mut Recorded, lock: &Lock) {
    let holder = lock.try_acquire("taken").await.unwrap();
    lock.settle().await;
    drop(recorded.look());

    let error = lock.try_acquire("taken").await.unwrap_err();
    assert!(matches!(error, Error::Held { .. }), "{error}");
    lock.settle().await;
    let look = recorded.look();
    assert_eq!(
        look.counter("quorumlock_acquisitions_total{outcome=held,topology=quorum}"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.counters("quorumlock_acquisitions_total"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.samples("quorumlock_acquire_duration_seconds{outcome=held,topology=quorum}"),
        1,
        "{look:#?}"
    );

    drop(holder);
    lock.settle().await;
    let look = recorded.look();
    assert_eq!(
        look.counter("quorumlock_releases_total{via=drop}"),
        1,
        "{look:#?}"
    );
}

/// A kept lease is on the gauge while it is kept, and off once released.
async fn kept(recorded: &mut Recorded, lock: &Lock) {
    assert_eq!(recorded.gauge("quorumlock_kept_leases"), 0.0);
    let kept = lock
        .try_acquire("kept")
        .await
        .unwrap()
        .keep_alive(KeepAlive::new())
        .unwrap();
    assert_eq!(recorded.gauge("quorumlock_kept_leases"), 1.0);
    kept.release().await;
    lock.settle().await;
    assert_eq!(recorded.gauge("quorumlock_kept_leases"), 0.0);
    let look = recorded.look();
    assert_eq!(
        look.counters("quorumlock_lost_signals_total"),
        0,
        "{look:#?}"
    );
}

/// A node nothing listens at (port 1 on 127.0.0.1) fails its request as refused; the three
/// others still make the quorum of a lock over four.
async fn node_down(recorded: &mut Recorded, urls: &[String]) {
    let mut urls = urls.to_vec();
    urls.push("redis://127.0.0.1:1".to_owned());
    let lock = Lock::new(urls, once()).unwrap();
    drop(recorded.look());

    let guard = lock.try_acquire("one-down").await.unwrap();
    guard.release().await;
    lock.settle().await;
    let look = recorded.look();
    assert_eq!(
        look.counter("quorumlock_node_errors_total{kind=connection_refused}"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.counters("quorumlock_node_errors_total"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.counter("quorumlock_acquisitions_total{outcome=won,topology=quorum}"),
        1,
        "{look:#?}"
    );
}

/// A node that just started without persistence is held back by the restart guard: one
/// sit-out, its node error, and a single-node lock that is unavailable.
async fn sat_out(recorded: &mut Recorded) {
    let fresh = volatile_cluster(1).await;
    let lock = Lock::new([fresh.urls()[0].clone()], once()).unwrap();
    drop(recorded.look());

    let error = lock.try_acquire("fresh").await.unwrap_err();
    assert!(matches!(error, Error::Unavailable { .. }), "{error}");
    lock.settle().await;
    let look = recorded.look();
    assert_eq!(
        look.counter("quorumlock_restart_guard_sit_outs_total"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.counter("quorumlock_node_errors_total{kind=recovering}"),
        1,
        "{look:#?}"
    );
    assert_eq!(
        look.counter("quorumlock_acquisitions_total{outcome=unavailable,topology=single}"),
        1,
        "{look:#?}"
    );
}

/// A keeper that falls behind says so: with a majority frozen under batches that wait for its
/// answer (a long node timeout), the leases falling due meanwhile wait for room and go out
/// late, and `quorumlock_keep_alive_late_total` counts them; once the nodes answer, none is
/// late any more and no lease was lost. (Broken on purpose by never counting.)
async fn behind(recorded: &mut Recorded) {
    let mut cluster = cluster(3).await;
    let options = once()
        .ttl(Duration::from_secs(6))
        .node_timeout(Duration::from_secs(2));
    let lock = Lock::new(cluster.urls(), options).unwrap();
    let every = KeepAlive::new().every(Duration::from_millis(200));
    let kept = kept_leases(&lock, "behind:", 1_200, every).await;
    until(async || kept.iter().all(|lease| lease.extensions() >= 2)).await;
    assert_eq!(
        recorded.look().counter("quorumlock_keep_alive_late_total"),
        0
    );
    cluster.pause(0).unwrap();
    cluster.pause(1).unwrap();
    let mut late = 0;
    let behind = quorumlock_harness::eventually(Duration::from_secs(10), async || {
        late += recorded.look().counter("quorumlock_keep_alive_late_total");
        late > 0
    })
    .await;
    cluster.resume(0).unwrap();
    cluster.resume(1).unwrap();
    assert!(
        behind,
        "no late extension counted while a majority was frozen"
    );
    // Every lease extended twice more since the nodes answer again.
    let extended: Vec<u64> = kept.iter().map(|lease| lease.extensions()).collect();
    until(async || {
        kept.iter()
            .zip(&extended)
            .all(|(lease, &was)| lease.extensions() >= was + 2)
    })
    .await;
    drop(recorded.look());
    let after = kept
        .iter()
        .map(|lease| lease.extensions())
        .max()
        .unwrap_or(0);
    until(async || kept.iter().all(|lease| lease.extensions() > after)).await;
    assert_eq!(
        recorded.look().counter("quorumlock_keep_alive_late_total"),
        0
    );
    assert!(kept.iter().all(|lease| lease.is_valid()));
    for lease in kept {
        lease.release().await;
    }
    lock.settle().await;
    let look = recorded.look();
    assert_eq!(
        look.counters("quorumlock_lost_signals_total"),
        0,
        "{look:#?}"
    );
}
