//! `--only single`: the single-node lock against the same commands over plain redis-rs, at one
//! task and at 64, on one fresh local node, in one run: against `raw-1` (`TCP_NODELAY`, as the
//! lock) and `raw-1-nagle` (redis-rs's default socket), and the lock without `TCP_NODELAY`
//! (`single-nagle`) against the latter, interleaved in rounds. It takes about
//! 20 s (`--quick`: 5 s), so a change to how the lock talks to a node can be measured before
//! and after without the whole bench.

use quorumlock::Patience;
use quorumlock::{Lock, LockOptions};
use quorumlock_harness::{ClusterOptions, Persistence, RawFloor, TestCluster};

use super::contender::Contender;
use super::plan::Plan;
use super::progress::Progress;
use super::report::{Machine, Report, cpu_model, redis_version};
use super::scenarios::{self, Subject};
use super::stats::fill_ratios;
use super::table::render;
use super::targets::single_targets;
use super::{BenchArgs, preflight};

/// The floors the single-node lock is measured against: the lock's commands over one plain
/// redis-rs connection with `TCP_NODELAY` on (`Some(true)`), and with redis-rs's default socket
/// (`None`: Nagle on), as a user of redis-rs gets it.
pub(super) const FLOORS: [(&str, Option<bool>); 2] = [("raw-1", Some(true)), ("raw-1-nagle", None)];

/// The raw floors over `url`, named as in [`FLOORS`].
pub(super) async fn floors(url: &str) -> Result<Vec<(String, Contender)>, String> {
    let mut floors = Vec::with_capacity(FLOORS.len());
    for (name, nodelay) in FLOORS {
        let floor = RawFloor::connect(&[url.to_owned()], nodelay)
            .await
            .map_err(|e| format!("{name}: connecting: {e}"))?;
        floors.push((name.to_owned(), Contender::Raw(floor)));
    }
    Ok(floors)
}

/// The machine's load average over the last minute, as `/proc/loadavg` says (Linux).
fn load() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next().map(str::to_owned)
}

/// Runs `--only single`.
pub(super) async fn run_single_alone(args: &BenchArgs, mut plan: Plan) -> Result<(), String> {
    eprintln!("starting 1 local redis-server process on 127.0.0.1 …");
    let cluster = TestCluster::start(
        ClusterOptions::default()
            .persistence(Persistence::AofAlways)
            .nodes(1),
    )
    .await
    .map_err(|e| format!("starting a local Redis master: {e}"))?;
    let Some(url) = cluster.urls().first().cloned() else {
        return Err("no node URL".to_owned());
    };
    let load_before = load();
    let prefix = format!(
        "quorumlock-bench-single:{}:{:08x}:",
        std::process::id(),
        rand::random::<u32>()
    );
    let options = LockOptions::new()
        .ttl(args.ttl)
        .patience(Patience::Once)
        .key_prefix(prefix.into_bytes());
    let single =
        Lock::new([url.clone()], options.clone()).map_err(|e| format!("single-node lock: {e}"))?;
    // Like for like with `raw-1-nagle`: the lock on redis-rs's default socket.
    let nagle = Lock::new([url.clone()], options.tcp_nodelay(false))
        .map_err(|e| format!("single-node lock without TCP_NODELAY: {e}"))?;
    let subjects = [
        Subject {
            name: "single".to_owned(),
            lock: single.clone(),
            plain: None,
        },
        Subject {
            name: "single-nagle".to_owned(),
            lock: nagle.clone(),
            plain: None,
        },
    ];
    for subject in &subjects {
        preflight(subject).await?;
    }
    let references = floors(&url).await?;
    // The targets are set at 64 tasks; the other steps would only lengthen the run.
    plan.tasks = vec![64];
    let progress = Progress::new((subjects.len() * 2 + references.len()) as u64);
    let mut rows = scenarios::sequential(&subjects, &references, &plan, &progress).await?;
    let pair = [
        ("single", Contender::Lock(single.clone())),
        ("single-nagle", Contender::Lock(nagle.clone())),
    ];
    rows.extend(scenarios::throughput(&pair, &references, &plan, &progress).await);
    progress.finish();
    fill_ratios(&mut rows);
    let targets = single_targets(&rows);
    let machine = Machine {
        nproc: std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model: cpu_model(),
        redis_version: redis_version(&url).await,
    };
    let notes = vec![
        "local node: appendonly yes, appendfsync always, data on tmpfs (restart guard on)"
            .to_owned(),
        format!(
            "load average (1 min) at the start {}, at the end {}",
            load_before.as_deref().unwrap_or("n/a"),
            load().as_deref().unwrap_or("n/a")
        ),
    ];
    let report = Report {
        mode: "local, --only single".to_owned(),
        quick: args.quick,
        machine,
        ttl_ms: u64::try_from(args.ttl.as_millis()).unwrap_or(u64::MAX),
        node_timeout_ms: u64::try_from(single.node_timeout().as_millis()).unwrap_or(u64::MAX),
        plan,
        rows,
        targets,
        kept: None,
        contended: None,
        verbs: None,
        rwlock: None,
        notes,
    };
    print!("{}", render(&report));
    if let Some(path) = &args.json {
        report.write_json(path)?;
        println!("raw results written to {}", path.display());
    }
    drop(cluster);
    Ok(())
}
