//! The scenario at the network's limit (issue 12, point 3): the five proxied nodes each at its
//! own round trip with jitter, and acquire, extend and release timed against the earliest moment
//! any Redlock could decide: when the quorum-th fastest node has answered. The single-node lock
//! is timed the same way against one round trip to its node.
//!
//! The limit is measured, not computed from the proxies' settings: each hop through a proxy
//! costs some time of its own, and the jitter is random. Right before each timed operation one
//! sample of its lock's limit is taken through the same proxies: a `PING` to each of the lock's
//! nodes at once, over plain redis-rs connections, timed to the quorum-th reply. Each node's own
//! round trip is recorded from the same samples, so the report shows what every proxy really
//! gave.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use quorumlock::{Guard, Lock, LockOptions};
use quorumlock_harness::{FaultProxy, TestCluster, raw_connection};
use redis::aio::MultiplexedConnection;

use super::cdf::{Mark, plot_cdf_marked};
use super::loops::{settle, warm_up};
use super::plan::Plan;
use super::progress::Progress;
use super::stats::{Row, Tally, record};
use super::targets::Target;
use crate::units::fmt_us;

/// The round trip each proxied node is set to, node 0 first, in µs: half of it is added to
/// every chunk in each direction.
const RTTS_US: [u64; 5] = [200, 500, 1_000, 2_000, 5_000];
/// Jitter: each chunk gets up to a fifth of its node's one-way delay more, drawn uniformly.
const JITTER_DIVISOR: u32 = 5;
/// The node of the single-node lock: the median round trip (1 ms).
const SINGLE_NODE: usize = 2;
/// Connect and response timeout of the `PING` connections.
const PING_TIMEOUT: Duration = Duration::from_secs(1);
/// Untimed limit samples before the measurement, so the `PING` connections are warm.
const PING_WARMUP: usize = 20;
/// The target: an operation's percentile at most this times its limit's …
const SLACK_RATIO: f64 = 1.05;
/// … plus this, in µs.
const SLACK_US: f64 = 50.0;

/// The timed operations, in the order each iteration runs them.
#[derive(Debug, Clone, Copy)]
enum Op {
    Acquire,
    Extend,
    Release,
}

impl Op {
    const ALL: [Op; 3] = [Op::Acquire, Op::Extend, Op::Release];

    /// The stem of its row ids.
    fn stem(self) -> &'static str {
        match self {
            Op::Acquire => "netlim-acq",
            Op::Extend => "netlim-ext",
            Op::Release => "netlim-rel",
        }
    }

    /// What one sample of its rows is.
    fn name(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Extend => "extend",
            Op::Release => "release",
        }
    }
}

/// One of the two locks measured, and how its limit is sampled.
struct Subject {
    /// Its row-id suffix: `quorum-5` or `single`.
    name: &'static str,
    /// The row-id suffix of its limit: `limit-5` or `limit-1`.
    limit_name: &'static str,
    /// The `lock` column of its rows.
    label: String,
    /// The `lock` column of its limit's rows.
    limit_label: String,
    lock: Lock,
    /// A `PING` connection to each of its nodes, with the node's index.
    pings: Vec<(usize, MultiplexedConnection)>,
    /// The reply that decides: the lock's quorum.
    quorum: usize,
    /// Whether its samples also go into each node's round-trip row: only the quorum's, whose
    /// samples ask all five nodes at once.
    per_node: bool,
}

/// What one subject added up to in one operation: the lock's latencies, and its limit's.
struct Pair {
    lock: Tally,
    limit: Tally,
}

/// Everything measured: per operation, a [`Pair`] per subject; and each node's round trip.
struct Tallies {
    ops: [[Pair; 2]; 3],
    nodes: [Tally; 5],
}

/// The five proxied nodes at 0.2, 0.5, 1, 2 and 5 ms round trips with jitter: acquire, extend
/// and release on a quorum lock over all five and a single-node lock on the median node, each
/// beside a sample of its limit. The proxies are healed afterwards, also when it failed.
pub(super) async fn network_limit(
    cluster: &TestCluster,
    options: &LockOptions,
    plan: &Plan,
    progress: &Progress,
) -> Result<Vec<Row>, String> {
    let proxies = (0..RTTS_US.len())
        .map(|i| {
            cluster
                .proxy(i)
                .ok_or_else(|| format!("the local cluster has no proxy for node {i}"))
        })
        .collect::<Result<Vec<&FaultProxy>, String>>()?;
    progress.step("at the network's limit: nodes at 0.2, 0.5, 1, 2, 5 ms".to_owned());
    for (proxy, rtt_us) in proxies.iter().zip(RTTS_US) {
        let one_way = Duration::from_micros(rtt_us / 2);
        proxy.set_latency(one_way);
        proxy.set_jitter(one_way / JITTER_DIVISOR);
    }
    let measured = measure(&cluster.urls(), options, plan).await;
    let mut healed = Ok(());
    for proxy in proxies {
        if let Err(e) = proxy.heal().await {
            healed = Err(format!("healing a fault proxy: {e}"));
        }
    }
    progress.done(1);
    let rows = measured?;
    healed?;
    Ok(rows)
}

/// Builds the two subjects on the proxied `urls` and runs the bounded, interleaved loop.
async fn measure(urls: &[String], options: &LockOptions, plan: &Plan) -> Result<Vec<Row>, String> {
    if urls.len() != RTTS_US.len() {
        return Err(format!(
            "the network-limit scenario needs {} proxied nodes, not {}",
            RTTS_US.len(),
            urls.len()
        ));
    }
    let mut pings = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        pings.push((i, connect(url).await?));
    }
    let quorum = Lock::new(urls.iter().cloned(), options.clone())
        .map_err(|e| format!("quorum lock at the network's limit: {e}"))?;
    let single_url = urls[SINGLE_NODE].clone();
    let single = Lock::new([single_url.clone()], options.clone())
        .map_err(|e| format!("single-node lock at the network's limit: {e}"))?;
    let single_rtt = fmt_us(RTTS_US[SINGLE_NODE] as f64);
    let subjects = [
        Subject {
            name: "quorum-5",
            limit_name: "limit-5",
            label: "quorum-5 (proxied)".to_owned(),
            limit_label: format!("limit: PING reply {} of 5", quorum.quorum_size()),
            quorum: quorum.quorum_size(),
            lock: quorum,
            pings,
            per_node: true,
        },
        Subject {
            name: "single",
            limit_name: "limit-1",
            label: format!("single (node {SINGLE_NODE}, {single_rtt}, proxied)"),
            limit_label: format!("limit: PING node {SINGLE_NODE}"),
            quorum: 1,
            lock: single,
            pings: vec![(SINGLE_NODE, connect(&single_url).await?)],
            per_node: false,
        },
    ];
    let mut tallies = Tallies {
        ops: Op::ALL.map(|_| {
            [(); 2].map(|()| Pair {
                lock: Tally::new(),
                limit: Tally::new(),
            })
        }),
        nodes: RTTS_US.map(|_| Tally::new()),
    };
    for subject in &subjects {
        warm_up(&subject.lock, "netlim-warm").await;
        let (mut limit, mut nodes) = (Tally::new(), RTTS_US.map(|_| Tally::new()));
        for _ in 0..PING_WARMUP {
            sample_limit(subject, &mut limit, &mut nodes).await;
        }
    }

    let ttl = subjects[0].lock.ttl();
    let cap = Duration::from_millis(plan.net_limit_cap_ms);
    let started = Instant::now();
    for i in 0..plan.net_limit_ops {
        if started.elapsed() >= cap {
            break;
        }
        let mut guards: [Option<Guard>; 2] = [None, None];
        for ((subject, pair), guard) in subjects.iter().zip(&mut tallies.ops[0]).zip(&mut guards) {
            sample_limit(subject, &mut pair.limit, &mut tallies.nodes).await;
            let key = format!("netlim:{}:{i}", subject.name);
            let t = Instant::now();
            match subject.lock.try_acquire(&key).await {
                Ok(acquired) => {
                    timed(&mut pair.lock, t.elapsed());
                    *guard = Some(acquired);
                }
                Err(_) => pair.lock.errors += 1,
            }
        }
        for ((subject, pair), guard) in subjects.iter().zip(&mut tallies.ops[1]).zip(&mut guards) {
            sample_limit(subject, &mut pair.limit, &mut tallies.nodes).await;
            if let Some(guard) = guard.as_mut() {
                let t = Instant::now();
                match guard.extend(ttl).await {
                    Ok(()) => timed(&mut pair.lock, t.elapsed()),
                    Err(_) => pair.lock.errors += 1,
                }
            }
        }
        for ((subject, pair), guard) in subjects.iter().zip(&mut tallies.ops[2]).zip(&mut guards) {
            sample_limit(subject, &mut pair.limit, &mut tallies.nodes).await;
            if let Some(guard) = guard.take() {
                let t = Instant::now();
                let report = guard.release().await;
                let elapsed = t.elapsed();
                if report.held >= subject.lock.quorum_size() {
                    timed(&mut pair.lock, elapsed);
                } else {
                    pair.lock.errors += 1;
                }
            }
        }
        // The slower nodes' releases finish in the background: not into the next iteration.
        for subject in &subjects {
            settle(&subject.lock).await;
        }
    }
    Ok(rows(&subjects, tallies))
}

/// A `PING` connection to `url` as the lock makes its own: `TCP_NODELAY`, timeouts bounded.
async fn connect(url: &str) -> Result<MultiplexedConnection, String> {
    raw_connection(url, Some(true), PING_TIMEOUT)
        .await
        .map_err(|e| format!("PING connection to {url}: {e}"))
}

/// One sample of `subject`'s limit: a `PING` to each of its nodes at once, timed to the
/// quorum-th reply, into `limit`; each node's own round trip into `nodes` if the subject's
/// samples go there. Waits for every reply (each bounded by [`PING_TIMEOUT`]), so none is in
/// flight afterwards.
async fn sample_limit(subject: &Subject, limit: &mut Tally, nodes: &mut [Tally; 5]) {
    let started = Instant::now();
    let mut replies: FuturesUnordered<_> = subject
        .pings
        .iter()
        .map(|(node, connection)| {
            let mut connection = connection.clone();
            async move {
                let reply = redis::cmd("PING")
                    .query_async::<String>(&mut connection)
                    .await;
                (*node, reply.is_ok_and(|r| r == "PONG"), started.elapsed())
            }
        })
        .collect();
    let mut answered = 0;
    while let Some((node, ok, elapsed)) = replies.next().await {
        let own = nodes.get_mut(node).filter(|_| subject.per_node);
        if ok {
            answered += 1;
            if answered == subject.quorum {
                timed(limit, elapsed);
            }
            if let Some(own) = own {
                timed(own, elapsed);
            }
        } else if let Some(own) = own {
            own.errors += 1;
        }
    }
    if answered < subject.quorum {
        limit.errors += 1;
    }
}

/// Records one timed sample; `wall` adds up the time inside the timed calls.
fn timed(tally: &mut Tally, elapsed: Duration) {
    record(&mut tally.hist, elapsed);
    tally.wall += elapsed;
}

/// The rows: per operation each lock then its limit; then each node's round trip.
fn rows(subjects: &[Subject; 2], tallies: Tallies) -> Vec<Row> {
    let rtts = RTTS_US.map(|us| fmt_us(us as f64)).join(", ");
    let mut rows = Vec::new();
    for (op, pairs) in Op::ALL.into_iter().zip(tallies.ops) {
        let scenario = format!("{}, nodes at {rtts} RTT + jitter", op.name());
        for (subject, pair) in subjects.iter().zip(pairs) {
            let stem = op.stem();
            rows.push(Row::new(
                &format!("{stem}/{}", subject.name),
                &scenario,
                &subject.label,
                op.name(),
                pair.lock,
            ));
            rows.push(Row::new(
                &format!("{stem}/{}", subject.limit_name),
                &scenario,
                &subject.limit_label,
                "limit",
                pair.limit,
            ));
        }
    }
    for (node, (tally, rtt_us)) in tallies.nodes.into_iter().zip(RTTS_US).enumerate() {
        let one_way = Duration::from_micros(rtt_us / 2);
        rows.push(Row::new(
            &format!("netlim-rtt/node-{node}"),
            "PING round trip, the 5 at once",
            &format!(
                "node {node}: {} set, jitter ≤ {} µs each way",
                fmt_us(rtt_us as f64),
                (one_way / JITTER_DIVISOR).as_micros()
            ),
            "round trip",
            tally,
        ));
    }
    rows
}

/// The targets: for each operation and each lock, its p50 and p99 at most 5 % + 50 µs over its
/// limit's. Measured as the excess over the limit in µs. None where the scenario did not run.
pub(super) fn targets(rows: &[Row]) -> Vec<Target> {
    let get = |id: String| rows.iter().find(|r| r.id == id && r.samples > 0);
    let mut targets = Vec::new();
    for op in Op::ALL {
        for (lock, limit) in [("quorum-5", "limit-5"), ("single", "limit-1")] {
            let Some(bound) = get(format!("{}/{limit}", op.stem())) else {
                continue;
            };
            let row = get(format!("{}/{lock}", op.stem()));
            let percentiles = [
                ("p50", bound.p50_us, row.map(|r| r.p50_us)),
                ("p99", bound.p99_us, row.map(|r| r.p99_us)),
            ];
            for (name, limit_us, value_us) in percentiles {
                let allowance = (SLACK_RATIO - 1.0) * limit_us + SLACK_US;
                let measured = value_us.map(|v| v - limit_us);
                targets.push(Target {
                    name: format!("net limit: {lock} {} {name} − limit, µs", op.name()),
                    limit: format!("<= {allowance:.0}: 5 % of {} + 50 µs", fmt_us(limit_us)),
                    measured,
                    met: measured.map(|excess| excess <= allowance),
                });
            }
        }
    }
    targets
}

/// Per operation a CDF of both locks and both limits, with dashed lines at each limit's p50 and
/// p99; and the nodes' own round trips. Returns the files written.
pub(super) fn write_plots(dir: &Path, rows: &[Row]) -> Result<Vec<String>, String> {
    let mut groups: Vec<(String, String, String)> = Op::ALL
        .into_iter()
        .map(|op| {
            (
                format!("cdf-netlimit-{}.svg", op.name()),
                format!(
                    "{} at the network's limit (nodes at 0.2–5 ms RTT + jitter)",
                    op.name()
                ),
                format!("{}/", op.stem()),
            )
        })
        .collect();
    groups.push((
        "cdf-netlimit-nodes.svg".to_owned(),
        "PING round trip per node, set to 0.2, 0.5, 1, 2, 5 ms + jitter".to_owned(),
        "netlim-rtt/".to_owned(),
    ));
    let mut written = Vec::new();
    for (file, title, prefix) in groups {
        let plotted: Vec<&Row> = rows
            .iter()
            .filter(|r| r.id.starts_with(&prefix) && r.samples > 0)
            .collect();
        if plotted.is_empty() {
            continue;
        }
        let marks: Vec<Mark> = plotted
            .iter()
            .enumerate()
            .filter(|(_, r)| r.id.contains("/limit-"))
            .flat_map(|(row, r)| {
                [("p50", r.p50_us), ("p99", r.p99_us)].map(|(name, x_us)| Mark {
                    x_us,
                    row,
                    label: format!("{} {name} {}", r.lock, fmt_us(x_us)),
                })
            })
            .collect();
        plot_cdf_marked(&dir.join(&file), &title, &plotted, &marks)?;
        written.push(file);
    }
    Ok(written)
}
