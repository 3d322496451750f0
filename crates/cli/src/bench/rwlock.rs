//! The read-write lock section (issue 33), on five local nodes: a read acquisition of a free
//! read-write lock against a lock's acquisition of a free key (one task, the two alternating call
//! by call, so that a slow spell of the machine falls on both alike); and 15 readers and 1 writer
//! of one read-write lock in one process, every call waiting (`Patience::Wait`), readers holding
//! 1–10 ms one after another without a pause (the stream that starves a writer under reader
//! preference), the writer 1 ms every 5–20 ms: the writer's wait against the longest read hold, and
//! exclusion counted in the process. Given nodes behind proxies, the free read and lock again
//! through them, a millisecond each way: there the network sets the pace, not five servers and
//! the client sharing the machine's CPUs. Every loop is bounded in count and time.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use quorumlock::{Lock, LockOptions, Patience, Request};
use quorumlock_harness::TestCluster;
use serde::Serialize;

use super::faults::set_latency;
use super::plan::NET_ONE_WAY;
use super::stats::{Row, Tally, latency_table, new_histogram, record};
use super::targets::{Target, at_most};
use crate::text_table::aligned;

/// Readers of the mixed rows, and the longest a reader holds.
const READERS: usize = 15;
const LONGEST_READ_HOLD: Duration = Duration::from_millis(10);
/// How long the writer holds, and the pause before each of its calls.
const WRITE_HOLD: Duration = Duration::from_millis(1);
const WRITER_PAUSE_MS: (u64, u64) = (5, 20);
/// How long any call waits at most.
const WAIT: Duration = Duration::from_secs(10);
/// A cap on any one loop, whatever its count.
const LOOP_CAP: Duration = Duration::from_secs(20);

/// How much the section measures.
struct Sizes {
    rounds: u64,
    /// One task's acquisitions per kind and round.
    cycles: u64,
    /// The mixed rows' time per round.
    slice: Duration,
}

/// What the section measured.
#[derive(Debug, Serialize)]
pub(super) struct RwBench {
    /// A read acquisition of a free read-write lock, and a lock's of a free key.
    free: Vec<Row>,
    /// The same through the proxies, a millisecond each way (empty without proxies).
    net_free: Vec<Row>,
    /// The writer's waits (call to guard) among 15 readers.
    writer_wait: Row,
    /// The readers' waits among them.
    reader_wait: Row,
    /// Reads and writes granted in the mixed rows.
    reads: u64,
    writes: u64,
    /// The most readers the process held at once.
    most_readers: usize,
    /// Moments a writer held beside another holder, as the process saw them (0 on a correct
    /// lock).
    overlaps: u64,
}

/// Runs the section on the five nodes at `urls`, with `ttl`; the free rows again through the
/// proxies of `net`'s five nodes, if given.
pub(super) async fn rwlock(
    urls: &[String],
    net: Option<&TestCluster>,
    ttl: Duration,
    quick: bool,
) -> Result<RwBench, String> {
    let sizes = if quick {
        Sizes {
            rounds: 2,
            cycles: 200,
            slice: Duration::from_secs(1),
        }
    } else {
        Sizes {
            rounds: 6,
            cycles: 1_000,
            slice: Duration::from_secs(3),
        }
    };
    let prefix = format!("quorumlock-bench-rwlock:{:08x}:", rand::random::<u32>());
    let lock_on = |urls: &[String]| {
        Lock::new(
            urls.iter().cloned(),
            LockOptions::new()
                .ttl(ttl)
                .patience(Patience::Wait(WAIT))
                .key_prefix(prefix.clone()),
        )
        .map_err(|e| format!("rwlock: {e}"))
    };
    let lock = lock_on(urls)?;
    warm(&lock).await;
    let mut free = [Tally::new(), Tally::new()];
    let mut mixed = Mixed::new();
    for round in 0..sizes.rounds {
        free_round(
            &lock,
            &format!("free:{round}"),
            round,
            sizes.cycles,
            &mut free,
        )
        .await;
        mixed
            .round(&lock, &format!("mixed:{round}"), sizes.slice)
            .await;
    }
    lock.settle().await;
    let scenario = "1 task, free keys";
    let rows = |[lock_tally, read_tally]: [Tally; 2], id: &str, scenario: &str| {
        vec![
            Row::new(
                &format!("{id}/lock"),
                scenario,
                "lock",
                "acquire",
                lock_tally,
            ),
            Row::new(
                &format!("{id}/read"),
                scenario,
                "read",
                "acquire",
                read_tally,
            ),
        ]
    };
    let net_free = match net {
        Some(cluster) => {
            let lock = lock_on(&cluster.urls())?;
            warm(&lock).await;
            set_latency(cluster, NET_ONE_WAY);
            let mut tallies = [Tally::new(), Tally::new()];
            for round in 0..2 {
                let cycles = sizes.cycles / 10;
                free_round(&lock, &format!("net:{round}"), round, cycles, &mut tallies).await;
            }
            set_latency(cluster, Duration::ZERO);
            lock.settle().await;
            rows(
                tallies,
                "rwlock/net-free",
                "1 task, free keys, 1 ms each way",
            )
        }
        None => Vec::new(),
    };
    Ok(RwBench {
        free: rows(free, "rwlock/free", scenario),
        net_free,
        writer_wait: Row::new(
            "rwlock/mixed/writer",
            "15 readers + 1 writer, 1 process",
            "write",
            "wait",
            mixed.writer,
        ),
        reader_wait: Row::new(
            "rwlock/mixed/readers",
            "15 readers + 1 writer, 1 process",
            "read",
            "wait",
            mixed.readers,
        ),
        reads: mixed.reads,
        writes: mixed.writes,
        most_readers: mixed.most_readers,
        overlaps: mixed.overlaps,
    })
}

/// Connections made and scripts cached before anything is timed.
async fn warm(lock: &Lock) {
    for read in [false, true] {
        cycle(lock, "warm", read, &mut Tally::new()).await;
    }
}

/// `cycles` free keys taken by a lock's acquisition and by a read, one of each in turn (blocks
/// of a thousand each gave ratios from 1.14 to 1.39 in five runs of the same build, as the
/// machine's pace drifted between the blocks), the first kind alternating with `round`.
async fn free_round(lock: &Lock, keys: &str, round: u64, cycles: u64, tallies: &mut [Tally; 2]) {
    let order = if round.is_multiple_of(2) {
        [false, true]
    } else {
        [true, false]
    };
    let cap = Instant::now() + LOOP_CAP;
    for n in 0..cycles {
        for read in order {
            let key = format!("{keys}:{read}:{n}");
            cycle(lock, &key, read, &mut tallies[usize::from(read)]).await;
        }
        if Instant::now() > cap {
            break;
        }
    }
}

/// One acquisition of `key` (a read of it, or a lock of it), timed, and its release.
async fn cycle(lock: &Lock, key: &str, read: bool, tally: &mut Tally) {
    let request = if read {
        Request::from(key).read()
    } else {
        Request::from(key)
    };
    let started = Instant::now();
    let result = lock.acquire(request).await;
    let elapsed = started.elapsed();
    match result {
        Ok(guard) => {
            record(&mut tally.hist, elapsed);
            tally.wall += elapsed;
            guard.release().await;
        }
        Err(_) => tally.errors += 1,
    }
}

/// The mixed rows' tallies over their rounds.
struct Mixed {
    writer: Tally,
    readers: Tally,
    reads: u64,
    writes: u64,
    most_readers: usize,
    overlaps: u64,
}

/// Who holds the lock now, as the process sees it: readers, and whether the writer does.
#[derive(Default)]
struct Holding {
    readers: AtomicUsize,
    writer: AtomicUsize,
    most_readers: AtomicUsize,
    overlaps: AtomicU64,
}

impl Holding {
    /// A holder of one side comes in; whether the other side (or another writer) was in.
    fn enter(&self, read: bool) {
        let beside = if read {
            self.readers.fetch_add(1, Ordering::SeqCst);
            let now = self.readers.load(Ordering::SeqCst);
            self.most_readers.fetch_max(now, Ordering::SeqCst);
            self.writer.load(Ordering::SeqCst) > 0
        } else {
            self.writer.fetch_add(1, Ordering::SeqCst) > 0
                || self.readers.load(Ordering::SeqCst) > 0
        };
        if beside {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self, read: bool) {
        let side = if read { &self.readers } else { &self.writer };
        side.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Mixed {
    fn new() -> Mixed {
        Mixed {
            writer: Tally::new(),
            readers: Tally::new(),
            reads: 0,
            writes: 0,
            most_readers: 0,
            overlaps: 0,
        }
    }

    /// One round: 15 readers and a writer of `key` for `slice`.
    async fn round(&mut self, lock: &Lock, key: &str, slice: Duration) {
        let end = Instant::now() + slice;
        let holding = Arc::new(Holding::default());
        let task = |read: bool| {
            let (lock, key, holding) = (lock.clone(), key.to_owned(), Arc::clone(&holding));
            tokio::spawn(async move { side(&lock, &key, read, &holding, end).await })
        };
        let readers: Vec<_> = (0..READERS).map(|_| task(true)).collect();
        let writer = task(false);
        for (read, handle) in readers
            .into_iter()
            .map(|handle| (true, handle))
            .chain([(false, writer)])
        {
            let (tally, granted) = if read {
                (&mut self.readers, &mut self.reads)
            } else {
                (&mut self.writer, &mut self.writes)
            };
            match tokio::time::timeout(slice + LOOP_CAP, handle).await {
                Ok(Ok((hist, errors))) => {
                    *granted += hist.len();
                    let _ = tally.hist.add(&hist);
                    tally.errors += errors;
                }
                _ => tally.errors += 1,
            }
        }
        self.writer.wall += slice;
        self.readers.wall += slice;
        self.most_readers = self
            .most_readers
            .max(holding.most_readers.load(Ordering::SeqCst));
        self.overlaps += holding.overlaps.load(Ordering::SeqCst);
    }
}

/// One side's task until `end`: wait for the side, hold it, release; a reader again at once, the
/// writer after a pause. Its waits and failed calls.
async fn side(
    lock: &Lock,
    key: &str,
    read: bool,
    holding: &Holding,
    end: Instant,
) -> (Histogram<u64>, u64) {
    let (mut waits, mut errors) = (new_histogram(), 0);
    while Instant::now() < end {
        let hold = if read {
            Duration::from_micros(rand::random_range(1_000..=10_000))
        } else {
            let (low, high) = WRITER_PAUSE_MS;
            tokio::time::sleep(Duration::from_millis(rand::random_range(low..=high))).await;
            WRITE_HOLD
        };
        let request = Request::from(key);
        let request = if read {
            request.read()
        } else {
            request.write()
        };
        let started = Instant::now();
        match lock.acquire(request).await {
            Ok(guard) => {
                record(&mut waits, started.elapsed());
                holding.enter(read);
                tokio::time::sleep(hold).await;
                holding.leave(read);
                guard.release().await;
            }
            Err(_) => errors += 1,
        }
    }
    (waits, errors)
}

impl RwBench {
    /// Issue 33's targets: the writer's wait p99 against the longest read hold, a free read
    /// against a free lock, and exclusion.
    pub(super) fn targets(&self) -> Vec<Target> {
        let longest_us = LONGEST_READ_HOLD.as_secs_f64() * 1e6;
        let read_per_lock = |rows: &[Row]| match rows {
            [lock, read] if lock.p50_us > 0.0 => Some(read.p50_us / lock.p50_us),
            _ => None,
        };
        let net = (!self.net_free.is_empty()).then(|| {
            at_most(
                "read-write lock: free read acquire p50 / free lock acquire p50, 1 ms each way"
                    .to_owned(),
                read_per_lock(&self.net_free),
                1.1,
                "1.1",
            )
        });
        let mut targets = vec![
            at_most(
                "read-write lock, 15 readers + 1 writer: writer wait p99 / longest read hold"
                    .to_owned(),
                Some(self.writer_wait.p99_us / longest_us),
                2.0,
                "2",
            ),
            at_most(
                "read-write lock: free read acquire p50 / free lock acquire p50".to_owned(),
                read_per_lock(&self.free),
                1.1,
                "1.1",
            ),
            at_most(
                "read-write lock, 15 readers + 1 writer: a writer beside another holder".to_owned(),
                Some(self.overlaps as f64),
                0.0,
                "0",
            ),
        ];
        targets.extend(net);
        targets
    }
}

/// The section's tables.
pub(super) fn render(bench: &RwBench) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nread-write lock (Request::read / Request::write), 5 local nodes\n"
    );
    let rows = bench
        .free
        .iter()
        .map(|row| (format!("free key, {} acquire", row.lock), row))
        .chain(bench.net_free.iter().map(|row| {
            (
                format!("free key, {} acquire, 1 ms each way", row.lock),
                row,
            )
        }))
        .chain([
            (
                "1 writer among 15 readers, wait".to_owned(),
                &bench.writer_wait,
            ),
            (
                "15 readers beside 1 writer, wait".to_owned(),
                &bench.reader_wait,
            ),
        ]);
    out.push_str(&aligned(&latency_table("calls", rows), 2));
    let _ = writeln!(
        out,
        "\nmixed rows: readers hold 1–10 ms and call again at once, the writer holds 1 ms every \
         5–20 ms, every call\nPatience::Wait; {} reads and {} writes granted, at most {} readers \
         at once, {} time(s) a writer held\nbeside another holder (as the process saw it).",
        bench.reads, bench.writes, bench.most_readers, bench.overlaps
    );
    out
}
