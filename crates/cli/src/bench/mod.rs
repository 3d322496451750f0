//! `quorumlock bench`: the quorum lock against the single-node lock, side by side in one run,
//! the quorum lock with fencing on against the same lock without, and both against the raw
//! commands they send and against rslock over the same nodes.
//!
//! Every scenario runs the single-node lock and the quorum lock in the same process, on the same
//! machine, interleaved in rounds, so that the ratios between them are fair even when the
//! machine's speed drifts during the run. Latencies go into HDR histograms; a table prints every
//! figure with its ratio to the single-node baseline, and optionally JSON and SVG plots.
//!
//! Without `--nodes` everything runs against local `redis-server` processes on 127.0.0.1 that
//! the command starts and stops itself. Every loop is bounded both in count and in time.
//!
//! Over 500 lines: the command's flags, the whole run in its order, and each `--only` entry
//! point share the run's set-up (nodes, report, targets); every section's measurement is a file
//! of its own.

mod alloc;
mod cdf;
mod contended;
mod contender;
mod election;
mod faults;
mod fencing;
mod kept;
mod kept_alone;
mod loops;
mod network;
mod plan;
mod plots;
mod progress;
mod report;
mod rslock;
mod rwlock;
mod saturation;
mod scenarios;
mod sets;
mod stats;
mod table;
mod targets;
mod verbs;

pub use self::contended::child::{WaitersArgs, run_waiters};

use quorumlock::Patience;
use std::path::PathBuf;
use std::time::Duration;

use quorumlock::{Lock, LockOptions};
use quorumlock_harness::{ClusterOptions, Persistence, RawFloor, TestCluster};

use crate::flags::{self, NODES_ENV};

use self::rslock::Rslock;
use contender::Contender;
use faults::fault_scenarios;
use plan::{Plan, TARGET_NODES};
use plots::write_plots;
use progress::Progress;
use report::{Machine, Report, cpu_model, redis_version};
use scenarios::Subject;
use stats::fill_ratios;
use table::{render, render_targets};
use targets::evaluate_targets;

/// Compare the quorum lock with the single-node lock, side by side in one run (with the raw
/// commands they send, and rslock, over the same nodes).
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  quorumlock bench --quick
  quorumlock bench --json bench.json --plots bench-plots/
  quorumlock bench --ttl 2s --contenders 32
  quorumlock bench --only contended
  quorumlock bench --only sets
  quorumlock bench --only single
  quorumlock bench --only kept
  quorumlock bench --only verbs
  quorumlock bench --only rwlock
  quorumlock bench --only election
  quorumlock bench --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379")]
pub struct BenchArgs {
    /// Comma-separated node URLs of your own deployment (redis://host:port). The first one is
    /// the single-node baseline, all of them form the quorum. Scenarios that need fault proxies
    /// (slow minority, hung node) are skipped. Without it, local redis-server processes on
    /// 127.0.0.1 are started and stopped.
    #[arg(long, value_delimiter = ',', env = NODES_ENV)]
    nodes: Vec<String>,
    /// A short run: the whole command finishes in well under a minute.
    #[arg(long)]
    quick: bool,
    /// Write the raw results (every figure, CDF points, machine facts) as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write SVG plots (latency CDFs per scenario, throughput bars) into this directory.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// Tasks contending for one key in the hand-off scenario.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(2..=256))]
    contenders: u16,
    /// Lock TTL, from 1ms to 24h, e.g. `10s`, `500ms` (the per-node timeout defaults to TTL / 10,
    /// at most 50 ms).
    #[arg(long, default_value = "10s", value_parser = ttl)]
    ttl: Duration,
    /// Run one section alone (on local nodes only): its table and targets, nothing else.
    #[arg(long, value_enum, conflicts_with = "nodes")]
    only: Option<Section>,
    /// With `--only kept`: instead of its usual runs, one run per count given (comma-separated),
    /// each that many leases at a TTL of 3 s held for 60 s (10 s with `--quick`), to find the
    /// most this machine keeps.
    #[arg(long, value_delimiter = ',', requires = "only", value_name = "COUNT")]
    leases: Vec<usize>,
}

/// A section `--only` runs alone.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    /// Waiters wanting one key over five local nodes (waiting, polling, rslock), and 16
    /// waiters wanting one of 4 permits of a semaphore.
    Contended,
    /// Sets of 1, 4 and 16 resources beside as many single locks in sequence.
    Sets,
    /// The single-node lock against its raw floors (with and without `TCP_NODELAY`), one task
    /// and 64, on one local node.
    Single,
    /// Many leases kept alive at once on five local nodes (100,000 at a TTL of 3 s, 10,000 at
    /// 30 s), with an unrelated acquire's latency beside them.
    Kept,
    /// The default `acquire` (patience: wait) against `try_acquire`, on five local nodes behind
    /// proxies: one task, 64 tasks, one node hung.
    Verbs,
    /// A read-write lock on five local nodes: a free read against a free lock, and one writer
    /// among 15 readers.
    Rwlock,
    /// Leader election on five local nodes: the hand-over after a resignation, what an
    /// observer hears, the fail-over when the leader's process is killed.
    Election,
}

/// The longest `--ttl`.
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses `--ttl`: a duration from 1 ms to [`MAX_TTL`].
fn ttl(text: &str) -> Result<Duration, String> {
    let ttl = flags::duration(text)?;
    if ttl < Duration::from_millis(1) || ttl > MAX_TTL {
        return Err(format!("{text} is not between 1ms and 24h"));
    }
    Ok(ttl)
}

/// The resource of every lock's first acquire.
const PREFLIGHT: &str = "preflight";

/// One acquire and release of [`PREFLIGHT`]: the reason, if the nodes cannot be locked on.
async fn preflight(subject: &Subject) -> Result<(), String> {
    let guard = subject
        .lock
        .try_acquire(PREFLIGHT)
        .await
        .map_err(|e| format!("{}: a first acquire failed: {e}", subject.name))?;
    guard.release().await;
    Ok(())
}

/// The raw floor `name` over `urls`, with `TCP_NODELAY` on like the lock's sockets, so that it
/// sends the same bytes the same way.
async fn raw_floor(name: &str, urls: &[String]) -> Result<RawFloor, String> {
    RawFloor::connect(urls, Some(true))
        .await
        .map_err(|e| format!("{name}: connecting: {e}"))
}

/// Runs `quorumlock bench`.
pub async fn run(args: BenchArgs) -> Result<(), String> {
    let plan = Plan::new(args.quick);
    match args.only {
        Some(Section::Contended) => return run_contended_alone(&args, plan).await,
        Some(Section::Sets) => return run_sets_alone(&args, &plan).await,
        Some(Section::Single) => return saturation::run_single_alone(&args, plan).await,
        Some(Section::Kept) => return kept_alone::run(args.quick, &args.leases).await,
        Some(Section::Verbs) => return run_verbs_alone(args.quick).await,
        Some(Section::Rwlock) => return run_rwlock_alone(args).await,
        Some(Section::Election) => return run_election_alone(args.quick).await,
        None => {}
    }
    let ttl = args.ttl;
    let run = format!("{}:{:08x}", std::process::id(), rand::random::<u32>());
    let prefix = format!("quorumlock-bench:{run}:");
    let fence_prefix = format!("quorumlock-bench-fence:{run}:");
    let options = LockOptions::new()
        .ttl(ttl)
        .patience(Patience::Once)
        .key_prefix(prefix.into_bytes());
    let mut notes = Vec::new();

    // Where the nodes are. `_direct` and `proxied` keep the local servers alive until the end.
    let local = args.nodes.is_empty();
    let (mut direct, proxied, urls) = if local {
        eprintln!("starting 7 + 5 local redis-server processes on 127.0.0.1 …");
        // AOF appendfsync always (on tmpfs: the fsync costs nothing), so that the restart
        // guard, on as by default, lets the fresh nodes vote at once.
        let aof = ClusterOptions::default().persistence(Persistence::AofAlways);
        let direct = TestCluster::start(aof.clone().nodes(7))
            .await
            .map_err(|e| format!("starting local Redis masters: {e}"))?;
        let proxied = TestCluster::start(aof.nodes(TARGET_NODES).proxies(true))
            .await
            .map_err(|e| format!("starting local Redis masters behind fault proxies: {e}"))?;
        notes.push(
            "local nodes: appendonly yes, appendfsync always, data on tmpfs (restart guard on)"
                .to_owned(),
        );
        let urls = direct.urls();
        (Some(direct), Some(proxied), urls)
    } else {
        notes.push(
            "--nodes given: the slow-minority and hung-node scenarios need local fault proxies \
             and were skipped"
                .to_owned(),
        );
        (None, None, args.nodes.clone())
    };
    let Some(first_url) = urls.first().cloned() else {
        return Err("no node URLs".to_owned());
    };
    let version = redis_version(&first_url).await;

    let single = Lock::new([first_url.clone()], options.clone())
        .map_err(|e| format!("single-node lock: {e}"))?;
    let mut subjects = vec![Subject {
        name: "single".to_owned(),
        lock: single.clone(),
        plain: None,
    }];
    let sizes: Vec<usize> = if local {
        vec![3, 5, 7]
    } else {
        vec![urls.len()]
    };
    for &n in &sizes {
        let lock = Lock::new(urls.iter().take(n).cloned(), options.clone())
            .map_err(|e| format!("quorum lock over {n} nodes: {e}"))?;
        subjects.push(Subject {
            name: format!("quorum-{n}"),
            lock,
            plain: None,
        });
    }
    let main_n = if local { TARGET_NODES } else { urls.len() };
    let main_name = format!("quorum-{main_n}");
    let quorum_main = subjects
        .iter()
        .find(|s| s.name == main_name)
        .map(|s| s.lock.clone())
        .ok_or_else(|| "no main quorum lock".to_owned())?;

    // Fail early, with the reason, when the nodes cannot be locked on at all.
    for subject in &subjects {
        preflight(subject).await?;
    }
    // The main quorum lock with fencing on, beside the plain one in the sequential rounds; left
    // out, with a note, where fencing cannot work (nodes that do not persist every write).
    let fenced = fencing::fenced_subject(
        urls.iter().take(main_n).cloned(),
        &options,
        &fence_prefix,
        &main_name,
    )?;
    let fenced_lock = fenced.lock.clone();
    match preflight(&fenced).await {
        Ok(()) => subjects.push(fenced),
        Err(e) => notes.push(format!("{e}: measured without fencing")),
    }

    let machine = Machine {
        nproc: std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model: cpu_model(),
        redis_version: version,
    };

    // What our locks are measured against in the same rounds: the raw commands over one node (with
    // TCP_NODELAY, as the lock, and with redis-rs's default socket) and over the main quorum's
    // nodes (with TCP_NODELAY), rslock over those nodes as a
    // new user gets it (redis-rs's default: Nagle on), and the like-for-like pair: rslock with
    // TCP_NODELAY, our quorum lock without.
    let main_urls = urls.get(..main_n).unwrap_or(&urls);
    let rslock = |name: String, nodelay: bool| -> Result<(String, Contender), String> {
        let prefix = format!("quorumlock-bench-rslock:{run}:");
        let rslock = Rslock::new(&name, main_urls, ttl, prefix, nodelay)?;
        Ok((name, Contender::Rslock(rslock)))
    };
    let nagle = Lock::new(
        main_urls.iter().cloned(),
        options.clone().tcp_nodelay(false),
    )
    .map_err(|e| format!("quorum lock without TCP_NODELAY: {e}"))?;
    let mut references = saturation::floors(&first_url).await?;
    references.extend([
        (
            format!("raw-{main_n}"),
            Contender::Raw(raw_floor(&format!("raw-{main_n}"), main_urls).await?),
        ),
        rslock(format!("rslock-{main_n}"), false)?,
        rslock(format!("rslock-{main_n}-nodelay"), true)?,
        (format!("{main_name}-nagle"), Contender::Lock(nagle)),
    ]);

    let steps = subjects.len() as u64 * 2
        + plan.tasks.len() as u64 * 2
        + references.len() as u64
        + 2
        + if local { 11 + contended::steps() } else { 0 };
    let progress = Progress::new(steps);

    // 1. Sequential acquire+release, 2. allocations per cycle.
    let mut rows = scenarios::sequential(&subjects, &references, &plan, &progress).await?;
    scenarios::allocations(&subjects, &mut rows, &plan, &progress).await;

    // 3. Throughput with 1, 16, 64 tasks on distinct keys (the references beside them at 64), and
    // 4. contended hand-off: the single-node and quorum locks alternate in rounds, like the
    // sequential cycles.
    let pair = [
        ("single", Contender::Lock(single.clone())),
        (main_name.as_str(), Contender::Lock(quorum_main.clone())),
    ];
    rows.extend(scenarios::throughput(&pair, &references, &plan, &progress).await);
    let pair = [("single", &single), (main_name.as_str(), &quorum_main)];
    let contenders = usize::from(args.contenders);
    rows.extend(scenarios::handoff(&pair, contenders, &plan, &progress).await);

    // 5. Faults: 2 of 5 slow, 1 of 5 hung, against the same proxied cluster healthy.
    if let Some(cluster) = &proxied {
        let faults = fault_scenarios(cluster, &single, &options, &plan, &progress).await?;
        rows.extend(faults);
        // 5b. Each node at its own round trip: how close the locks come to the network's limit.
        rows.extend(network::network_limit(cluster, &options, &plan, &progress).await?);
    }
    // 6. What keeping many guards alive costs, on the local five nodes only: on nodes of your
    // own it would hold thousands of keys there.
    let kept = match direct.as_mut() {
        Some(cluster) => {
            let servers: Vec<u32> = (0..TARGET_NODES)
                .filter_map(|node| cluster.pid(node).ok().flatten())
                .collect();
            let lock = Lock::new(
                urls.iter().take(TARGET_NODES).cloned(),
                options.clone().ttl(Duration::from_millis(plan.kept_ttl_ms)),
            )
            .map_err(|e| format!("kept guards: {e}"))?;
            progress.step(format!("{} kept guards", plan.kept_guards));
            let cost = kept::kept_guards(
                &lock,
                &servers,
                plan.kept_guards,
                Duration::from_millis(plan.kept_hold_ms),
                None,
            )
            .await?;
            Some(cost)
        }
        None => None,
    };
    // 6b. Sets of resources beside single locks in sequence, on the local five nodes.
    let sets = match direct.as_ref() {
        Some(cluster) => {
            progress.step("sets of resources".to_owned());
            let lock = Lock::new(urls.iter().take(TARGET_NODES).cloned(), options.clone())
                .map_err(|e| format!("sets: {e}"))?;
            let cap = Duration::from_millis(plan.cycle_cap_ms);
            Some(sets::sets(cluster, &lock, sets::cycles(args.quick), plan.rounds, cap).await?)
        }
        None => None,
    };
    // 7. Waiters wanting one key: waiting, polling, rslock; in one process and in four. Also on
    // the local five nodes only.
    let contended = match direct.as_ref() {
        Some(_) => {
            let five = urls.get(..TARGET_NODES).unwrap_or(&urls);
            let prefix = format!("quorumlock-bench-contended:{run}:");
            let net = proxied.as_ref();
            Some(contended::contended(five, net, ttl, &prefix, &plan, &progress).await?)
        }
        None => {
            notes.push(
                "--nodes given: the contended section runs on the local nodes only and was \
                 skipped"
                    .to_owned(),
            );
            None
        }
    };
    // 8. The default acquire against try_acquire, on five local nodes of its own.
    let verbs = if local {
        progress.step("acquire against try_acquire".to_owned());
        Some(verbs::verbs(args.quick).await?)
    } else {
        None
    };
    // 9. A read-write lock: a free read, and a writer among readers, on the local five nodes.
    let rwlock = match direct.as_ref() {
        Some(_) => {
            progress.step("read-write lock".to_owned());
            let five = urls.get(..TARGET_NODES).unwrap_or(&urls);
            Some(rwlock::rwlock(five, proxied.as_ref(), ttl, args.quick).await?)
        }
        None => None,
    };
    progress.finish();
    // Fence counters never expire: delete the ones this run made, also on nodes of your own.
    let resources = scenarios::subject_resources(&plan).chain([PREFLIGHT.to_owned()]);
    let left = fencing::delete_counters(&fenced_lock, resources).await;
    if left > 0 {
        notes.push(format!(
            "{left} fence counters under {fence_prefix} could not be deleted on every node"
        ));
    }

    fill_ratios(&mut rows);
    let mut targets = evaluate_targets(&rows, main_n, local);
    targets.extend(network::targets(&rows));
    if let Some(contended) = &contended {
        targets.extend(contended::targets(contended));
    }
    if let Some(verbs) = &verbs {
        targets.extend(verbs.targets());
    }
    if let Some(rwlock) = &rwlock {
        targets.extend(rwlock.targets());
    }
    let node_timeout_ms = u64::try_from(quorum_main.node_timeout().as_millis()).unwrap_or(u64::MAX);
    let report = Report {
        mode: if local {
            "local".to_owned()
        } else {
            "nodes".to_owned()
        },
        quick: args.quick,
        machine,
        plan,
        ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        node_timeout_ms,
        rows,
        targets,
        kept,
        contended,
        verbs,
        rwlock,
        notes,
    };
    print!("{}", render(&report));
    if let Some(verbs) = &report.verbs {
        print!("{}", verbs::render(verbs));
    }
    if let Some(sets) = &sets {
        print!("{}", sets::render(sets));
    }
    if let Some(rwlock) = &report.rwlock {
        print!("{}", rwlock::render(rwlock));
    }

    if let Some(path) = &args.json {
        report.write_json(path)?;
        println!("raw results written to {}", path.display());
    }
    if let Some(dir) = &args.plots {
        let mut written = write_plots(dir, &report)?;
        written.extend(network::write_plots(dir, &report.rows)?);
        if let Some(contended) = &report.contended {
            written.extend(contended::write_plots(dir, contended)?);
        }
        println!("plots written to {}: {}", dir.display(), written.join(", "));
    }
    // Dropping the clusters kills and reaps every server and proxy started above.
    drop((direct, proxied));
    Ok(())
}

/// Five fresh local nodes (AOF `always`, so they vote at once) for a section run alone, their
/// URLs and the servers' version.
async fn five_local_nodes() -> Result<(TestCluster, Vec<String>, String), String> {
    eprintln!("starting {TARGET_NODES} local redis-server processes on 127.0.0.1 …");
    let aof = ClusterOptions::default().persistence(Persistence::AofAlways);
    let cluster = TestCluster::start(aof.nodes(TARGET_NODES))
        .await
        .map_err(|e| format!("starting local Redis masters: {e}"))?;
    let urls = cluster.urls();
    let Some(first_url) = urls.first() else {
        return Err("no node URLs".to_owned());
    };
    let version = redis_version(first_url).await;
    Ok((cluster, urls, version))
}

/// Five fresh local nodes as `five_local_nodes`, each behind a proxy that adds no delay until
/// asked; the URLs are the servers' own.
async fn five_local_nodes_behind_proxies() -> Result<(TestCluster, Vec<String>, String), String> {
    eprintln!(
        "starting {TARGET_NODES} local redis-server processes on 127.0.0.1, each behind a proxy …"
    );
    let aof = ClusterOptions::default().persistence(Persistence::AofAlways);
    let cluster = TestCluster::start(aof.nodes(TARGET_NODES).proxies(true))
        .await
        .map_err(|e| format!("starting local Redis masters behind proxies: {e}"))?;
    let urls = (0..cluster.len())
        .map(|i| cluster.direct_url(i))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let Some(first_url) = urls.first() else {
        return Err("no node URLs".to_owned());
    };
    let version = redis_version(first_url).await;
    Ok((cluster, urls, version))
}

/// `--only verbs`: the verbs section alone, with its targets.
async fn run_verbs_alone(quick: bool) -> Result<(), String> {
    let verbs = verbs::verbs(quick).await?;
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "\nquorumlock bench --only verbs ({}) — {nproc} CPUs ({})",
        if quick { "quick" } else { "full" },
        cpu_model(),
    );
    print!("{}", verbs::render(&verbs));
    print!("{}", render_targets(&verbs.targets()));
    Ok(())
}

/// `--only rwlock`: the read-write lock section alone, on five fresh local nodes.
async fn run_rwlock_alone(args: BenchArgs) -> Result<(), String> {
    let (cluster, urls, version) = five_local_nodes_behind_proxies().await?;
    let bench = rwlock::rwlock(&urls, Some(&cluster), args.ttl, args.quick).await?;
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "\nquorumlock bench --only rwlock ({}) — {nproc} CPUs ({}), redis {version}; ttl {} ms",
        if args.quick { "quick" } else { "full" },
        cpu_model(),
        args.ttl.as_millis()
    );
    print!("{}", rwlock::render(&bench));
    print!("{}", render_targets(&bench.targets()));
    drop(cluster);
    Ok(())
}

/// `--only election`: the election section alone, on five fresh local nodes behind proxies.
async fn run_election_alone(quick: bool) -> Result<(), String> {
    let (cluster, urls, version) = five_local_nodes_behind_proxies().await?;
    let bench = election::election(&urls, &cluster, quick).await?;
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "\nquorumlock bench --only election ({}) — {nproc} CPUs ({}), redis {version}",
        if quick { "quick" } else { "full" },
        cpu_model(),
    );
    print!("{}", election::render(&bench));
    print!("{}", render_targets(&bench.targets()));
    drop(cluster);
    Ok(())
}

/// `--only sets`: the sets section alone, on five fresh local nodes.
async fn run_sets_alone(args: &BenchArgs, plan: &Plan) -> Result<(), String> {
    let (cluster, urls, version) = five_local_nodes().await?;
    let lock = Lock::new(
        urls,
        LockOptions::new().ttl(args.ttl).patience(Patience::Once),
    )
    .map_err(|e| format!("sets: {e}"))?;
    let cap = Duration::from_millis(plan.cycle_cap_ms);
    let sets = sets::sets(&cluster, &lock, sets::cycles(args.quick), plan.rounds, cap).await?;
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "\nquorumlock bench --only sets ({}) — {nproc} CPUs ({}), redis {version}; ttl {} ms",
        if args.quick { "quick" } else { "full" },
        cpu_model(),
        args.ttl.as_millis()
    );
    print!("{}", sets::render(&sets));
    drop(cluster);
    Ok(())
}

/// `--only contended`: the contended section alone, on five fresh local nodes, so that it can
/// be measured again and again (before and after a change) in minutes, not the whole bench.
async fn run_contended_alone(args: &BenchArgs, plan: Plan) -> Result<(), String> {
    let (cluster, urls, version) = five_local_nodes_behind_proxies().await?;
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    let prefix = format!(
        "quorumlock-bench-contended:{}:{:08x}:",
        std::process::id(),
        rand::random::<u32>()
    );
    let progress = Progress::new(contended::steps());
    let net = Some(&cluster);
    let contended = contended::contended(&urls, net, args.ttl, &prefix, &plan, &progress).await?;
    progress.finish();
    println!(
        "\nquorumlock bench --only contended ({}) — {nproc} CPUs ({}), redis {version}; ttl {} ms",
        if args.quick { "quick" } else { "full" },
        cpu_model(),
        args.ttl.as_millis()
    );
    print!("{}", contended::render(&contended));
    print!("{}", render_targets(&contended::targets(&contended)));
    drop(cluster);
    Ok(())
}
