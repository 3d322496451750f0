//! A measuring tool: acquire+release throughput of a lock over three Redis Cluster members of one
//! shard each, then over three members of three shards each, in one run, with every shard's
//! server CPU, so that how the load spreads shows on a small machine even when the machine, not
//! a server, caps the cycles per second (see "Redis Cluster members: 1 shard against 3 per
//! member" in docs/benchmarks.md).
//!
//! ```sh
//! cargo run --release -p quorumlock-cli --example cluster_scale -- [--seconds S] [--tasks T]
//! ```
//!
//! For each layout it starts the members (local `redis-server --cluster-enabled yes` processes
//! on 127.0.0.1, AOF `appendfsync always`, through `quorumlock_harness::RedisClusters`), builds
//! one `Lock` over them (`NodeConfig::cluster` per member), and runs `T` tasks (default 32),
//! each doing `try_acquire` + `release` over resources of its own among 1024 names (no
//! contention), for 1 s of warm-up, 1 s without cycles (each shard's idle CPU), and then `S` s
//! (default 5, at most 60) that are counted. Before and after the counted window it reads every
//! shard's `INFO cpu` (`used_cpu_sys + used_cpu_user`) and `INFO stats`
//! (`total_commands_processed`, `total_reads_processed`), the client's own CPU
//! (`CLOCK_PROCESS_CPUTIME_ID`) and the machine's (`/proc/stat`). Then it stops that layout's
//! servers (dropping `RedisClusters` kills them, also on an error) and starts the next.
//!
//! Over 500 lines because it is one self-contained measuring run: the load, the readings of
//! shards, client and machine, and the table, read top to bottom in the order they happen.
//!
//! It prints, per layout, the cycles per second and the CPU of the client, the servers and the
//! machine; per shard, its utilisation (CPU seconds per wall second: 1.0 is one core, all a
//! shard's single command thread can use), its CPU µs, commands and read events per cycle; the
//! ratios of the 3-shard layout to the 1-shard one; and what limited the cycles per second as
//! far as those figures tell (a saturated shard, the machine's CPUs, or neither).

use quorumlock::Patience;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use quorumlock::{Lock, LockOptions, NodeConfig};
use quorumlock_harness::{RedisClusters, RedisClustersOptions};
use redis::aio::MultiplexedConnection;

/// Quorum members in both layouts.
const MEMBERS: usize = 3;
/// Distinct resource names, shared out among the tasks (task `t` takes `t`, `t + T`, …).
const RESOURCES: usize = 1024;
/// Cycles before counting: connections made, slot maps fetched, scripts cached.
const WARMUP: Duration = Duration::from_secs(1);
/// Upper bound of the counted window.
const MAX_SECONDS: u64 = 60;
/// Bound on one task's cycles in one window, besides its time.
const MAX_CYCLES_PER_TASK: u64 = 50_000_000;
/// Bound on reading one shard's counters, and on the lock's settling at the end.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Above this utilisation a shard (one command thread) counts as saturated.
const SATURATED_SHARD: f64 = 0.9;
/// Above this share of the machine's cores, client and servers together count as CPU-bound.
const SATURATED_MACHINE: f64 = 0.85;

/// What to run, from the command line.
#[derive(Debug, Clone, Copy)]
struct Args {
    seconds: u64,
    tasks: usize,
}

impl Args {
    const USAGE: &str = "usage: cluster_scale [--seconds S (1-60, default 5)] \
                         [--tasks T (1-1024, default 32)]";

    fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut parsed = Args {
            seconds: 5,
            tasks: 32,
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--seconds" => {
                    parsed.seconds = args
                        .next()
                        .and_then(|s| s.parse().ok())
                        .filter(|s| (1..=MAX_SECONDS).contains(s))
                        .ok_or(Args::USAGE)?;
                }
                "--tasks" => {
                    parsed.tasks = args
                        .next()
                        .and_then(|t| t.parse().ok())
                        .filter(|t| (1..=RESOURCES).contains(t))
                        .ok_or(Args::USAGE)?;
                }
                _ => return Err(Args::USAGE.to_owned()),
            }
        }
        Ok(parsed)
    }
}

/// One shard's counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    /// `used_cpu_sys + used_cpu_user`, seconds.
    cpu: f64,
    /// `total_commands_processed`.
    commands: u64,
    /// `total_reads_processed`: read events handled, each a read of what a connection had sent
    /// (however many commands that was).
    reads: u64,
}

/// `field:value` from an `INFO` reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

async fn read_counters(connection: &mut MultiplexedConnection) -> Result<Counters, String> {
    let read = async {
        let cpu: String = redis::cmd("INFO")
            .arg("cpu")
            .query_async(connection)
            .await
            .map_err(|e| format!("INFO cpu: {e}"))?;
        let stats: String = redis::cmd("INFO")
            .arg("stats")
            .query_async(connection)
            .await
            .map_err(|e| format!("INFO stats: {e}"))?;
        let seconds = |field| {
            info_field(&cpu, field)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or(format!("no {field} in INFO cpu"))
        };
        Ok(Counters {
            cpu: seconds("used_cpu_sys")? + seconds("used_cpu_user")?,
            commands: info_field(&stats, "total_commands_processed")
                .and_then(|v| v.parse().ok())
                .ok_or("no total_commands_processed in INFO stats")?,
            reads: info_field(&stats, "total_reads_processed")
                .and_then(|v| v.parse().ok())
                .ok_or("no total_reads_processed in INFO stats")?,
        })
    };
    tokio::time::timeout(ADMIN_TIMEOUT, read)
        .await
        .map_err(|_| format!("INFO not answered within {ADMIN_TIMEOUT:?}"))?
}

/// Every shard's counters, `[member][shard]`, read all at once.
async fn snapshot(
    connections: &mut [Vec<MultiplexedConnection>],
) -> Result<Vec<Vec<Counters>>, String> {
    let members = connections
        .iter_mut()
        .map(|shards| futures::future::try_join_all(shards.iter_mut().map(read_counters)));
    futures::future::try_join_all(members).await
}

/// This process's CPU time so far, seconds: the client's, since the servers are processes of
/// their own.
fn client_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// The `cpu` line of `/proc/stat`: jiffies of all CPUs so far by kind (user, nice, system,
/// idle, iowait, irq, softirq, steal, …), empty where there is no such file.
fn machine_jiffies() -> Vec<u64> {
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("cpu "))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The whole machine's CPU in a window, in cores, from two [`machine_jiffies`].
#[derive(Debug, Clone, Copy)]
struct Machine {
    /// All but idle and iowait.
    busy: f64,
    /// Processes at a positive nice value (the client and the servers run at the caller's).
    niced: f64,
    /// Interrupts and softirqs (loopback TCP is largely softirq), charged to no process.
    interrupts: f64,
}

impl Machine {
    fn between(before: &[u64], after: &[u64]) -> Option<Machine> {
        let delta = |i: usize| {
            after
                .get(i)
                .zip(before.get(i))
                .map_or(0, |(a, b)| a.saturating_sub(*b)) as f64
        };
        let total: f64 = (0..after.len().min(8)).map(delta).sum();
        if total <= 0.0 {
            return None;
        }
        let cores = cores() as f64 / total;
        Some(Machine {
            busy: (total - delta(3) - delta(4)) * cores,
            niced: delta(1) * cores,
            interrupts: (delta(5) + delta(6)) * cores,
        })
    }
}

/// Cycles that acquired and released on a quorum, cycles that did not, and the first error.
#[derive(Debug, Default)]
struct Cycles {
    done: u64,
    failed: u64,
    first_error: Option<String>,
}

/// `tasks` tasks doing acquire+release cycles on their own resources until `window` has passed.
async fn run_cycles(lock: &Lock, tasks: usize, window: Duration) -> Result<Cycles, String> {
    let deadline = Instant::now() + window;
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let lock = lock.clone();
            let names: Vec<String> = (task..RESOURCES)
                .step_by(tasks)
                .map(|n| format!("scale-{n}"))
                .collect();
            tokio::spawn(async move {
                let mut cycles = Cycles::default();
                for i in 0..MAX_CYCLES_PER_TASK {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let name = &names[i as usize % names.len()];
                    let error = match lock.try_acquire(name).await {
                        Ok(guard) => {
                            let report = guard.release().await;
                            if report.held >= lock.quorum_size() {
                                cycles.done += 1;
                                continue;
                            }
                            format!("release held on {} nodes only", report.held)
                        }
                        Err(e) => e.to_string(),
                    };
                    cycles.failed += 1;
                    cycles.first_error.get_or_insert(error);
                }
                cycles
            })
        })
        .collect();
    let mut total = Cycles::default();
    for handle in handles {
        let cycles = handle.await.map_err(|e| format!("task: {e}"))?;
        total.done += cycles.done;
        total.failed += cycles.failed;
        if total.first_error.is_none() {
            total.first_error = cycles.first_error;
        }
    }
    Ok(total)
}

/// What one layout measured.
#[derive(Debug)]
struct Layout {
    shards: usize,
    cycles: Cycles,
    /// Wall time of the counted window, seconds.
    wall: f64,
    /// The client's CPU in the window, seconds.
    client_cpu: f64,
    /// Each shard's CPU seconds and commands in the window, `[member][shard]`.
    per_shard: Vec<Vec<Counters>>,
    /// Each shard's utilisation over one second without cycles, after the warm-up.
    idle: Vec<Vec<f64>>,
    /// The whole machine's CPU in the window (every process), if known.
    machine: Option<Machine>,
}

impl Layout {
    fn name(&self) -> String {
        let plural = if self.shards == 1 { "" } else { "s" };
        format!("{MEMBERS} × {} shard{plural}", self.shards)
    }

    fn cycles_per_second(&self) -> f64 {
        self.cycles.done as f64 / self.wall
    }

    fn all_shards(&self) -> impl Iterator<Item = &Counters> {
        self.per_shard.iter().flatten()
    }

    /// The highest shard utilisation (CPU seconds per wall second).
    fn busiest_utilisation(&self) -> f64 {
        self.all_shards()
            .map(|c| c.cpu / self.wall)
            .fold(0.0, f64::max)
    }

    /// The highest shard CPU per cycle, µs.
    fn busiest_us_per_cycle(&self) -> f64 {
        self.all_shards()
            .map(|c| self.us_per_cycle(c.cpu))
            .fold(0.0, f64::max)
    }

    /// The servers' CPU in the window, in cores.
    fn server_cores(&self) -> f64 {
        self.all_shards().map(|c| c.cpu).sum::<f64>() / self.wall
    }

    fn us_per_cycle(&self, cpu: f64) -> f64 {
        cpu * 1e6 / self.cycles.done.max(1) as f64
    }

    /// What limited the cycles per second, as far as the CPU figures tell.
    fn limit(&self, cores: usize, tasks: usize) -> String {
        let (client, servers) = (self.client_cpu / self.wall, self.server_cores());
        let machine = self.machine.unwrap_or(Machine {
            busy: client + servers,
            niced: 0.0,
            interrupts: 0.0,
        });
        let busy = machine.busy.max(client + servers);
        let rest = (busy - client - servers - machine.niced - machine.interrupts).max(0.0);
        let busiest = self.busiest_utilisation();
        let split = format!(
            "client {client:.2} + servers {servers:.2} + interrupts {:.2} + niced processes \
             {:.2} + others {rest:.2} = {busy:.2} of {cores} cores",
            machine.interrupts, machine.niced,
        );
        if busiest >= SATURATED_SHARD {
            format!("the busiest shard (one command thread at {busiest:.2} of a core); {split}")
        } else if busy >= SATURATED_MACHINE * cores as f64 {
            format!("the machine's CPUs, not a shard (busiest {busiest:.2} of a core): {split}")
        } else {
            format!(
                "no CPU saturated ({split}, busiest shard {busiest:.2} of a core): the latency of \
                 a cycle with {tasks} tasks in flight"
            )
        }
    }
}

/// Starts `shards` shards per member, runs the warm-up and the counted window, stops them.
async fn measure(shards: usize, args: Args) -> Result<Layout, String> {
    // Dropped on every return, which kills and reaps the servers.
    let clusters = RedisClusters::start(
        RedisClustersOptions::default()
            .members(MEMBERS)
            .shards(shards),
    )
    .await
    .map_err(|e| format!("starting {MEMBERS} members of {shards} shard(s): {e}"))?;
    // Raised timeouts (the defaults with this TTL are 50 ms per node) so that a scheduling
    // hiccup on a loaded machine costs no cycle; one attempt per cycle.
    let options = LockOptions::new()
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(5))
        .patience(Patience::Once);
    let lock = Lock::new(
        (0..MEMBERS).map(|member| NodeConfig::cluster(clusters.seed_urls(member))),
        options,
    )
    .map_err(|e| format!("the lock over the members: {e}"))?;
    let mut connections = Vec::with_capacity(MEMBERS);
    for member in 0..MEMBERS {
        let mut of_member = Vec::with_capacity(shards);
        for shard in 0..shards {
            of_member.push(
                clusters
                    .shard_connection(member, shard)
                    .await
                    .map_err(|e| format!("connecting to member {member} shard {shard}: {e}"))?,
            );
        }
        connections.push(of_member);
    }

    let warm = run_cycles(&lock, args.tasks, WARMUP).await?;
    if warm.done == 0 {
        return Err(format!(
            "no warm-up cycle succeeded ({} failed): {}",
            warm.failed,
            warm.first_error.unwrap_or_default()
        ));
    }

    // A second without cycles: what the shards use with nothing to serve (cron, cluster bus).
    let idle_before = snapshot(&mut connections).await?;
    let idle_started = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_after = snapshot(&mut connections).await?;
    let idle_wall = idle_started.elapsed().as_secs_f64();
    let idle = differences(&idle_before, &idle_after)
        .iter()
        .map(|shards| shards.iter().map(|c| c.cpu / idle_wall).collect())
        .collect();

    let before = snapshot(&mut connections).await?;
    let machine_before = machine_jiffies();
    let (started, client_before) = (Instant::now(), client_cpu());
    let cycles = run_cycles(&lock, args.tasks, Duration::from_secs(args.seconds)).await?;
    let (wall, client_after) = (started.elapsed().as_secs_f64(), client_cpu());
    let machine_after = machine_jiffies();
    let after = snapshot(&mut connections).await?;

    let _ = tokio::time::timeout(ADMIN_TIMEOUT, lock.settle()).await;
    let machine = Machine::between(&machine_before, &machine_after);
    drop(lock);
    drop(clusters);
    Ok(Layout {
        shards,
        cycles,
        wall,
        client_cpu: client_after - client_before,
        per_shard: differences(&before, &after),
        idle,
        machine,
    })
}

/// `after - before`, shard by shard.
fn differences(before: &[Vec<Counters>], after: &[Vec<Counters>]) -> Vec<Vec<Counters>> {
    before
        .iter()
        .zip(after)
        .map(|(before, after)| {
            before
                .iter()
                .zip(after)
                .map(|(b, a)| Counters {
                    cpu: a.cpu - b.cpu,
                    commands: a.commands.saturating_sub(b.commands),
                    reads: a.reads.saturating_sub(b.reads),
                })
                .collect()
        })
        .collect()
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn print_report(args: Args, cores: usize, layouts: &[Layout]) {
    println!();
    println!(
        "{MEMBERS} members, {} tasks, {RESOURCES} resources (no contention), {} s counted after \
         {} s of warm-up; {cores} CPUs; load average now {}",
        args.tasks,
        args.seconds,
        WARMUP.as_secs(),
        load_average(),
    );
    println!();
    println!(
        "{:<14} {:>10} {:>7} {:>12} {:>13} {:>14} {:>14} {:>15}",
        "layout",
        "cycles/s",
        "failed",
        "client cores",
        "server cores",
        "machine cores",
        "client µs/cyc",
        "member µs/cyc"
    );
    for layout in layouts {
        let member_us: Vec<String> = layout
            .per_shard
            .iter()
            .map(|shards| {
                format!(
                    "{:.1}",
                    layout.us_per_cycle(shards.iter().map(|c| c.cpu).sum())
                )
            })
            .collect();
        println!(
            "{:<14} {:>10.0} {:>7} {:>12.2} {:>13.2} {:>14} {:>14.1} {:>15}",
            layout.name(),
            layout.cycles_per_second(),
            layout.cycles.failed,
            layout.client_cpu / layout.wall,
            layout.server_cores(),
            layout
                .machine
                .map_or_else(|| "?".to_owned(), |m| format!("{:.2}", m.busy)),
            layout.us_per_cycle(layout.client_cpu),
            member_us.join(" "),
        );
    }
    println!();
    println!(
        "{:<14} {:>6} {:>5} {:>9} {:>12} {:>14} {:>10} {:>14}",
        "per shard",
        "member",
        "shard",
        "CPU/wall",
        "CPU µs/cyc",
        "commands/cyc",
        "reads/cyc",
        "idle CPU/wall"
    );
    for layout in layouts {
        for (member, shards) in layout.per_shard.iter().enumerate() {
            for (shard, counters) in shards.iter().enumerate() {
                let idle = layout.idle[member].get(shard).copied().unwrap_or(0.0);
                println!(
                    "{:<14} {:>6} {:>5} {:>9.3} {:>12.1} {:>14.2} {:>10.3} {:>14.3}",
                    layout.name(),
                    member,
                    shard,
                    counters.cpu / layout.wall,
                    layout.us_per_cycle(counters.cpu),
                    counters.commands as f64 / layout.cycles.done.max(1) as f64,
                    counters.reads as f64 / layout.cycles.done.max(1) as f64,
                    idle,
                );
            }
        }
    }
    println!();
    if let [one, three] = layouts {
        println!("3 shards ÷ 1 shard:");
        println!(
            "  throughput                      {:.2}  ({:.0} / {:.0} cycles/s)",
            three.cycles_per_second() / one.cycles_per_second(),
            three.cycles_per_second(),
            one.cycles_per_second(),
        );
        println!(
            "  busiest shard's utilisation     {:.2}  ({:.2} / {:.2} of a core)",
            three.busiest_utilisation() / one.busiest_utilisation(),
            three.busiest_utilisation(),
            one.busiest_utilisation(),
        );
        println!(
            "  busiest shard's CPU per cycle   {:.2}  ({:.1} / {:.1} µs)",
            three.busiest_us_per_cycle() / one.busiest_us_per_cycle(),
            three.busiest_us_per_cycle(),
            one.busiest_us_per_cycle(),
        );
        let busiest_commands = |l: &Layout| {
            l.all_shards().map(|c| c.commands).max().unwrap_or(0) as f64
                / l.cycles.done.max(1) as f64
        };
        println!(
            "  busiest shard's commands per cycle  {:.2}  ({:.2} / {:.2})",
            busiest_commands(three) / busiest_commands(one),
            busiest_commands(three),
            busiest_commands(one),
        );
        let busiest_reads = |l: &Layout| {
            l.all_shards().map(|c| c.reads).max().unwrap_or(0) as f64 / l.cycles.done.max(1) as f64
        };
        println!(
            "  busiest shard's reads per cycle     {:.3}  ({:.3} / {:.3})",
            busiest_reads(three) / busiest_reads(one),
            busiest_reads(three),
            busiest_reads(one),
        );
        let member_total =
            |l: &Layout| l.us_per_cycle(l.all_shards().map(|c| c.cpu).sum()) / MEMBERS as f64;
        println!(
            "  a member's CPU per cycle, all its shards  {:.2}  ({:.1} / {:.1} µs)",
            member_total(three) / member_total(one),
            member_total(three),
            member_total(one),
        );
        println!();
    }
    for layout in layouts {
        println!(
            "limited by, {}: {}",
            layout.name(),
            layout.limit(cores, args.tasks),
        );
        if let Some(error) = &layout.cycles.first_error {
            println!("  first failure: {error}");
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let cores = cores();
    let mut layouts = Vec::with_capacity(2);
    for shards in [1, 3] {
        eprintln!(
            "cluster_scale: {MEMBERS} members × {shards} shard(s), {} tasks…",
            args.tasks
        );
        layouts.push(measure(shards, args).await?);
    }
    print_report(args, cores, &layouts);
    Ok(())
}

fn main() -> ExitCode {
    let result = Args::parse(std::env::args().skip(1)).and_then(|args| {
        // The multi-threaded runtime, one worker per core, as `quorumlock bench` runs its
        // throughput rows.
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("building the runtime: {e}"))?
            .block_on(run(args))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
