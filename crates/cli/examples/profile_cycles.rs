//! A profiling subject: N acquire+release cycles of one of four clients, with the allocations per
//! cycle counted; meant to be run under callgrind, which counts the instructions (see "Profile"
//! in docs/benchmarks.md).
//!
//! ```sh
//! cargo build --release -p quorumlock-cli --example profile_cycles
//! # SUBJECT: single | raw-1 | quorum-5 | read-5 | raw-5; CYCLES: how many counted cycles
//! target/release/examples/profile_cycles SUBJECT CYCLES [--tasks N] [--tcp-nodelay BOOL] [URL ...]
//! valgrind --tool=callgrind target/release/examples/profile_cycles quorum-5 3000 URL1 … URL5
//! ```
//!
//! Without URLs it starts five local `redis-server` masters (AOF `appendfsync always`, so the
//! restart guard lets them vote at once) and stops them at the end; with URLs (five for the
//! quorum subjects, the first one for the single-node ones) it uses those, which keeps server
//! start-up out of a profile. The subjects:
//!
//! - `single`: `Lock::single`, `try_acquire` + `release`;
//! - `raw-1`: `SET NX PX` + the compare-and-delete script over one redis-rs connection, no lock
//!   logic (`quorumlock_harness::RawFloor`, the floor under `single` that `quorumlock bench`
//!   measures too);
//! - `quorum-5`: `Lock::quorum` over five nodes;
//! - `read-5`: the same lock's reads (`Request::read`), the read side of a read-write lock;
//! - `raw-5`: the same commands fanned out to five connections, deciding at the third yes (the
//!   floor under `quorum-5`).
//!
//! Every subject gets the same untimed warm-up, then the cycles, each on a fresh key. The
//! instructions of one cycle are the difference of two callgrind totals with different
//! `CYCLES`, divided by the difference of the counts: set-up and warm-up cancel out. One task
//! runs on a current-thread runtime, which keeps that count repeatable (no work stealing, no
//! idle workers); `--tasks N` splits the cycles among N tasks on the multi-threaded runtime and
//! reports cycles per second, a wall-clock figure (noisy on a shared machine). `--tcp-nodelay`
//! sets `TCP_NODELAY` for every subject; by default each keeps its own (on for the lock, off
//! for raw redis-rs connections; `quorumlock bench` turns it on for its floors).

use quorumlock::Patience;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::{Lock, LockOptions, Request};
use quorumlock_harness::{ClusterOptions, CountingAllocator, Persistence, RawFloor, TestCluster};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator::new();

/// Untimed cycles before counting: connections made, scripts loaded, caches warm.
const WARMUP: u64 = 200;

/// Nodes of the quorum subjects.
const QUORUM_NODES: usize = 5;

/// Which client runs the cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    Single,
    Raw1,
    Quorum5,
    Read5,
    Raw5,
}

impl Subject {
    fn parse(name: &str) -> Option<Subject> {
        match name {
            "single" => Some(Subject::Single),
            "raw-1" => Some(Subject::Raw1),
            "quorum-5" => Some(Subject::Quorum5),
            "read-5" => Some(Subject::Read5),
            "raw-5" => Some(Subject::Raw5),
            _ => None,
        }
    }

    fn nodes(self) -> usize {
        match self {
            Subject::Single | Subject::Raw1 => 1,
            Subject::Quorum5 | Subject::Read5 | Subject::Raw5 => QUORUM_NODES,
        }
    }
}

/// One acquire+release cycle of a subject, on a key of its own.
enum Client {
    /// A lock, and whether its cycles are reads.
    Lock(Lock, bool),
    Raw(RawFloor),
}

impl Client {
    async fn connect(run: &Run) -> Result<Client, String> {
        let subject = run.subject;
        let urls = run.urls.get(..subject.nodes()).ok_or("too few URLs")?;
        match subject {
            Subject::Single | Subject::Quorum5 | Subject::Read5 => {
                let prefix = format!("profile:{}:", std::process::id());
                // The timeouts are raised from the defaults (50 ms each with this TTL) only
                // because a client under valgrind runs some 50 times slower: the code path is
                // the same.
                let mut options = LockOptions::new()
                    .ttl(Duration::from_secs(10))
                    .node_timeout(Duration::from_secs(1))
                    .connect_timeout(Duration::from_secs(5))
                    .patience(Patience::Once)
                    .key_prefix(prefix.into_bytes());
                if let Some(nodelay) = run.tcp_nodelay {
                    options = options.tcp_nodelay(nodelay);
                }
                let lock = if subject == Subject::Single {
                    Lock::new([urls[0].clone()], options)
                } else {
                    Lock::new(urls.iter().cloned(), options)
                };
                lock.map(|lock| Client::Lock(lock, subject == Subject::Read5))
                    .map_err(|e| e.to_string())
            }
            Subject::Raw1 | Subject::Raw5 => RawFloor::connect(urls, run.tcp_nodelay)
                .await
                .map(Client::Raw)
                .map_err(|e| e.to_string()),
        }
    }

    /// One cycle; true when it acquired and released.
    async fn cycle(&self, key: &str) -> bool {
        match self {
            Client::Lock(lock, read) => match lock.try_acquire(request(key, *read)).await {
                Ok(guard) => guard.release().await.held >= lock.quorum_size(),
                Err(_) => false,
            },
            Client::Raw(floor) => floor.cycle(key).await,
        }
    }
}

/// A lock's request for `key`: a read of it, or the lock itself.
fn request(key: &str, read: bool) -> Request<'_> {
    if read {
        Request::from(key).read()
    } else {
        Request::from(key)
    }
}

/// Runs `cycles` cycles on fresh keys `{tag}:{i}`; returns the failures.
async fn run_cycles(client: &Client, tag: &str, cycles: u64) -> u64 {
    let mut key = String::new();
    let mut failed = 0;
    for i in 0..cycles {
        key.clear();
        let _ = write!(key, "{tag}:{i}");
        if !client.cycle(&key).await {
            failed += 1;
        }
    }
    failed
}

/// What to run, from the command line.
struct Run {
    subject: Subject,
    cycles: u64,
    tasks: u64,
    /// `TCP_NODELAY` for every subject; each client's own default if `None` (on for the lock,
    /// off for raw redis-rs connections).
    tcp_nodelay: Option<bool>,
    urls: Vec<String>,
}

impl Run {
    const USAGE: &str = "usage: profile_cycles single|raw-1|quorum-5|read-5|raw-5 CYCLES \
                         [--tasks N] [--tcp-nodelay true|false] [URL ...]";

    fn parse(mut args: impl Iterator<Item = String>) -> Result<Run, String> {
        let (Some(subject), Some(cycles)) = (
            args.next().as_deref().and_then(Subject::parse),
            args.next().and_then(|n| n.parse::<u64>().ok()),
        ) else {
            return Err(Run::USAGE.to_owned());
        };
        let mut run = Run {
            subject,
            cycles,
            tasks: 1,
            tcp_nodelay: None,
            urls: Vec::new(),
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--tasks" => {
                    run.tasks = args
                        .next()
                        .and_then(|n| n.parse().ok())
                        .filter(|tasks| *tasks >= 1)
                        .ok_or("--tasks needs a count of at least 1")?;
                }
                "--tcp-nodelay" => {
                    run.tcp_nodelay = Some(
                        args.next()
                            .and_then(|b| b.parse().ok())
                            .ok_or("--tcp-nodelay needs true or false")?,
                    );
                }
                _ => run.urls.push(arg),
            }
        }
        Ok(run)
    }
}

/// The warm-up, then the counted cycles; prints the figures.
async fn run(run: &Run) -> Result<(), String> {
    let Run {
        subject,
        cycles,
        tasks,
        ..
    } = *run;
    let client = Arc::new(Client::connect(run).await?);
    let failed = run_cycles(&client, "warm", WARMUP).await;
    if failed > 0 {
        return Err(format!("{failed} of {WARMUP} warm-up cycles failed"));
    }
    let before = ALLOC.allocations();
    let started = Instant::now();
    let failed = if tasks == 1 {
        run_cycles(&client, "timed", cycles).await
    } else {
        let handles: Vec<_> = (0..tasks)
            .map(|task| {
                let client = Arc::clone(&client);
                tokio::spawn(async move {
                    run_cycles(&client, &format!("timed-{task}"), cycles / tasks).await
                })
            })
            .collect();
        let mut failed = 0;
        for handle in handles {
            failed += handle.await.map_err(|e| format!("task: {e}"))?;
        }
        failed
    };
    let wall = started.elapsed();
    let allocations = ALLOC.allocations().saturating_sub(before);
    if let Client::Lock(lock, _) = &*client {
        let _ = tokio::time::timeout(Duration::from_secs(5), lock.settle()).await;
    }
    let cycles = cycles / tasks * tasks;
    println!(
        "{subject:?}: {cycles} cycles in {tasks} task(s), {failed} failed, {:.1} allocations/cycle, \
         {:.1} µs/cycle, {:.0} cycles/s",
        allocations as f64 / cycles.max(1) as f64,
        wall.as_secs_f64() * 1e6 / cycles.max(1) as f64,
        cycles as f64 / wall.as_secs_f64(),
    );
    if failed > 0 {
        return Err(format!("{failed} of {cycles} cycles failed"));
    }
    Ok(())
}

/// Starts the local servers unless URLs were given, then runs the cycles.
async fn start_and_run(mut run: Run) -> Result<(), String> {
    // Kept alive until the end: the local servers stop when it is dropped.
    let mut cluster = None;
    if run.urls.is_empty() {
        let started = TestCluster::start(
            ClusterOptions::default()
                .nodes(QUORUM_NODES)
                .persistence(Persistence::AofAlways),
        )
        .await
        .map_err(|e| format!("starting local redis-server masters: {e}"))?;
        run.urls = cluster.insert(started).urls();
    }
    let result = self::run(&run).await;
    drop(cluster);
    result
}

fn main() -> ExitCode {
    // As the `quorumlock` binary does, so that the library's tracing call sites cost what they
    // cost there.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let result = Run::parse(std::env::args().skip(1)).and_then(|run| {
        // One task: a current-thread runtime, for repeatable instruction counts. Several: the
        // multi-threaded runtime that `quorumlock bench` runs its throughput rows on.
        let runtime = if run.tasks == 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
        };
        runtime
            .map_err(|e| format!("building the runtime: {e}"))?
            .block_on(start_and_run(run))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
