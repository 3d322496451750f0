//! Criterion benchmarks: the quorum lock against the single-node lock, on local `redis-server`
//! processes started by [`TestCluster`] (127.0.0.1 only).
//!
//! Run with `cargo bench --bench lock` (about three minutes on 2 cores). Groups:
//!
//! - `cycle`: one task, acquire + release (a fresh key each cycle); `single` vs `quorum-3/5/7`,
//!   and `quorum-5-fenced`: `quorum-5` with fencing on (the fenced acquire script; its
//!   write-back round only where the counters disagree, never on a fresh key), on the same nodes
//!   in the same run.
//! - `raw-floor`: the same commands over redis-rs alone, no lock logic, on 1 and 5 nodes: the
//!   floor under `cycle/single` and `cycle/quorum-5` on this machine.
//! - `throughput/{1,16,64}`: that many tasks cycling on distinct keys; the reported time is
//!   wall time per cycle (all tasks together), so elements/s is the throughput.
//! - `handoff`: 4 tasks wanting one key; one sample is the time from a holder starting its
//!   release to the next holder's successful acquire.
//! - `faults`: acquire only (the guard is dropped, and so released in the background, outside
//!   the timed section; background releases are awaited untimed every 128 acquisitions) on 5
//!   nodes behind fault proxies: healthy, 2 of 5 with +20 ms round trips, 1 of 5 blackholed.
//!
//! After the groups it prints allocations per acquire+release cycle, counted by a counting
//! global allocator ([`CountingAllocator`]). Nothing here asserts on time.
// Test and demo code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use quorumlock::{Patience, Request};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use quorumlock::{Lock, LockOptions, RetryPolicy};
use quorumlock_harness::{ClusterOptions, CountingAllocator, Persistence, RawFloor, TestCluster};
use tokio::runtime::Runtime;

/// Counts allocations (all threads), for the allocations-per-cycle figure.
#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator::new();

/// Background releases left outstanding in the `faults` group before an untimed wait.
const SETTLE_EVERY: u64 = 128;
/// Tasks contending in the `handoff` group.
const CONTENDERS: usize = 4;
/// How long a hand-off holder keeps the lock, and rests after releasing.
const HOLD: Duration = Duration::from_micros(500);

/// The servers and the locks over them.
struct Env {
    /// Seven direct masters: `single` uses the first, `quorum-N` (and `quorum-5-fenced`) the
    /// first N.
    direct: TestCluster,
    /// Five masters behind fault proxies, for the `faults` group.
    proxied: TestCluster,
    locks: Vec<(String, Lock)>,
    proxied_lock: Lock,
}

fn options() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(10))
        .patience(Patience::Once)
        .key_prefix(format!("quorumlock-criterion:{}:", std::process::id()))
}

impl Env {
    async fn start() -> Env {
        // AOF appendfsync always, on tmpfs (the fsync costs nothing): the restart guard, on as
        // by default, lets the fresh nodes vote at once.
        let aof = ClusterOptions::default().persistence(Persistence::AofAlways);
        let direct = TestCluster::start(aof.clone().nodes(7))
            .await
            .expect("start 7 redis-server processes (is redis-server installed?)");
        let proxied = TestCluster::start(aof.nodes(5).proxies(true))
            .await
            .expect("start 5 redis-server processes behind proxies");
        let urls = direct.urls();
        let mut locks = vec![(
            "single".to_owned(),
            Lock::new([urls[0].clone()], options()).expect("single lock"),
        )];
        for n in [3, 5, 7] {
            let lock = Lock::new(urls[..n].to_vec(), options()).expect("quorum lock");
            locks.push((format!("quorum-{n}"), lock));
        }
        // Its fence counters never expire; the servers, and so the counters, die with the run.
        let fenced = Lock::new(urls[..5].to_vec(), options().fencing(true)).expect("fenced lock");
        locks.push(("quorum-5-fenced".to_owned(), fenced));
        let proxied_lock = Lock::new(proxied.urls(), options()).expect("proxied lock");
        Env {
            direct,
            proxied,
            locks,
            proxied_lock,
        }
    }

    fn lock(&self, name: &str) -> &Lock {
        &self
            .locks
            .iter()
            .find(|(n, _)| n == name)
            .expect("known lock")
            .1
    }
}

/// One acquire+release on `key`. Callers use a fresh key per cycle, so that a release lost to
/// a timeout cannot make the next cycle's acquire fail.
async fn cycle(lock: &Lock, key: &str) {
    let guard = lock.try_acquire(key).await.expect("uncontended acquire");
    guard.release().await;
}

/// Cycles `from..to`, each on key `{base}:{i}`, written into a reused buffer.
async fn cycles(lock: &Lock, base: &str, range: std::ops::Range<u64>) {
    let mut key = String::new();
    for i in range {
        key.clear();
        let _ = write!(key, "{base}:{i}");
        cycle(lock, &key).await;
    }
}

async fn warm_up(lock: &Lock) {
    cycles(lock, "warm", 0..50).await;
}

fn bench_cycle(c: &mut Criterion, rt: &Runtime, env: &Env) {
    let mut group = c.benchmark_group("cycle");
    for (name, lock) in &env.locks {
        rt.block_on(warm_up(lock));
        let mut run = 0u64;
        group.bench_function(name.as_str(), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    run += 1;
                    let base = format!("cycle:{run}");
                    let started = Instant::now();
                    cycles(lock, &base, 0..iters).await;
                    started.elapsed()
                })
            })
        });
    }
    group.finish();
}

/// `raw-1` and `raw-5`: what one node and a five-node fan-out cost over redis-rs alone, the
/// floor under `cycle/single` and `cycle/quorum-5` on this machine.
fn bench_raw(c: &mut Criterion, rt: &Runtime, env: &Env) {
    let urls = env.direct.urls();
    let mut group = c.benchmark_group("raw-floor");
    for n in [1usize, 5] {
        let floor = rt
            .block_on(RawFloor::connect(&urls[..n], None))
            .expect("connect");
        let mut run = 0u64;
        group.bench_function(format!("raw-{n}"), |b| {
            b.iter_custom(|iters| {
                run += 1;
                rt.block_on(async {
                    let mut key = String::new();
                    let started = Instant::now();
                    for i in 0..iters {
                        key.clear();
                        let _ = write!(key, "raw:{run}:{i}");
                        assert!(floor.cycle(&key).await, "raw cycle {key} failed");
                    }
                    started.elapsed()
                })
            })
        });
    }
    group.finish();
}

fn bench_throughput(c: &mut Criterion, rt: &Runtime, env: &Env) {
    for tasks in [1usize, 16, 64] {
        let mut group = c.benchmark_group(format!("throughput/{tasks}"));
        group.throughput(Throughput::Elements(1));
        for name in ["single", "quorum-5"] {
            let lock = env.lock(name);
            let mut run = 0u64;
            group.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    run += 1;
                    rt.block_on(async {
                        let per_task = iters.div_ceil(tasks as u64);
                        let started = Instant::now();
                        let handles: Vec<_> = (0..tasks)
                            .map(|task| {
                                let lock = lock.clone();
                                tokio::spawn(async move {
                                    let base = format!("tp:{run}:{task}");
                                    cycles(&lock, &base, 0..per_task).await;
                                })
                            })
                            .collect();
                        for handle in handles {
                            handle.await.expect("throughput task");
                        }
                        // Report the time per `iters` cycles, whatever the rounding up did.
                        let done = per_task * tasks as u64;
                        started.elapsed().mul_f64(iters as f64 / done as f64)
                    })
                })
            });
        }
        group.finish();
    }
}

/// Runs `CONTENDERS` tasks on one key until `handoffs` hand-offs were seen (or 60 s passed),
/// and returns the sum of the hand-off times.
async fn handoffs(lock: &Lock, handoffs: u64) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(60);
    let last_release: Arc<Mutex<Option<Instant>>> = Arc::default();
    let state = Arc::new(Mutex::new((0u64, Duration::ZERO)));
    let policy = RetryPolicy::new()
        .attempts(u32::MAX)
        .delay(Duration::from_micros(200))
        .jitter(Duration::from_micros(800))
        .max_wait(Duration::from_secs(61));
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let (lock, policy) = (lock.clone(), policy.clone());
            let (last_release, state) = (Arc::clone(&last_release), Arc::clone(&state));
            tokio::spawn(async move {
                loop {
                    if Instant::now() >= deadline
                        || state.lock().unwrap_or_else(PoisonError::into_inner).0 >= handoffs
                    {
                        return;
                    }
                    let cancel = tokio::time::sleep_until(deadline.into());
                    let Ok(guard) = lock
                        .acquire_until(
                            Request::from("handoff").patience(Patience::Retry(policy.clone())),
                            cancel,
                        )
                        .await
                    else {
                        continue;
                    };
                    let now = Instant::now();
                    if let Some(previous) = last_release
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take()
                    {
                        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                        if state.0 < handoffs {
                            state.0 += 1;
                            state.1 += now - previous;
                        }
                    }
                    tokio::time::sleep(HOLD).await;
                    *last_release.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(Instant::now());
                    guard.release().await;
                    tokio::time::sleep(HOLD).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("hand-off task");
    }
    let (done, total) = *state.lock().unwrap_or_else(PoisonError::into_inner);
    // Scale to the requested count should the deadline have cut the run short.
    if done == 0 {
        Duration::from_secs(60)
    } else {
        total.mul_f64(handoffs as f64 / done as f64)
    }
}

fn bench_handoff(c: &mut Criterion, rt: &Runtime, env: &Env) {
    let mut group = c.benchmark_group(format!("handoff/{CONTENDERS}-contenders"));
    for name in ["single", "quorum-5"] {
        let lock = env.lock(name);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| rt.block_on(handoffs(lock, iters)))
        });
    }
    group.finish();
}

/// `iters` acquisitions of fresh keys, timed alone.
async fn acquires(lock: &Lock, tag: &str, iters: u64) -> Duration {
    let mut timed = Duration::ZERO;
    for i in 0..iters {
        let key = format!("{tag}:{i}");
        let started = Instant::now();
        let guard = lock.try_acquire(&key).await.expect("acquire");
        timed += started.elapsed();
        // Released in the background, outside the timed section.
        drop(guard);
        if i % SETTLE_EVERY == SETTLE_EVERY - 1 {
            lock.settle().await;
        }
    }
    lock.settle().await;
    timed
}

fn bench_faults(c: &mut Criterion, rt: &Runtime, env: &Env) {
    let mut group = c.benchmark_group("faults/acquire");
    let lock = &env.proxied_lock;
    let proxy = |i| env.proxied.proxy(i).expect("proxied node");
    rt.block_on(warm_up(lock));
    let mut run = 0u64;
    let mut bench = |group: &mut criterion::BenchmarkGroup<'_, _>, name: &str| {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                run += 1;
                rt.block_on(acquires(lock, &format!("f{run}"), iters))
            })
        });
    };
    bench(&mut group, "healthy");
    // +10 ms each way: +20 ms per round trip on 2 of 5 nodes.
    proxy(3).set_latency(Duration::from_millis(10));
    proxy(4).set_latency(Duration::from_millis(10));
    bench(&mut group, "2-of-5-slow");
    proxy(3).set_latency(Duration::ZERO);
    proxy(4).set_latency(Duration::ZERO);
    proxy(4).blackhole();
    bench(&mut group, "1-of-5-hung");
    rt.block_on(async {
        proxy(4).heal().await.expect("heal");
        proxy(4).cut().await;
    });
    group.finish();
}

fn report_allocations(rt: &Runtime, env: &Env) {
    println!("\nallocations per acquire+release cycle (whole process, 1000 cycles):");
    for (name, lock) in &env.locks {
        let per_cycle = rt.block_on(async {
            warm_up(lock).await;
            // Keys formatted into a reused buffer: no allocation of the loop's own.
            let before = ALLOC.allocations();
            cycles(lock, "alloc", 0..1000).await;
            (ALLOC.allocations() - before) as f64 / 1000.0
        });
        println!("  {name:<16} {per_cycle:>7.1}");
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let env = rt.block_on(Env::start());
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_cycle(&mut c, &rt, &env);
    bench_raw(&mut c, &rt, &env);
    bench_throughput(&mut c, &rt, &env);
    bench_handoff(&mut c, &rt, &env);
    bench_faults(&mut c, &rt, &env);
    report_allocations(&rt, &env);
    c.final_summary();
    // The clusters kill and reap their servers when dropped, on the runtime's thread.
    rt.block_on(async move { drop(env) });
}
