//! The election section (issue 34), on five local nodes that persist every write: the quorum
//! round trip (a free key's `try_acquire`), back to back and once before each hand-over; the
//! hand-over after a resignation (the leader resigns, a candidate waiting in another `Lock` is
//! elected), against the round trips taken beside it; the same with an observer in a third
//! `Lock`, and how long after the new leader was elected it hears of it; and the fail-over
//! when the leader's process is killed (a `quorumlock elect` child, SIGKILL: nothing resigns,
//! the candidate is elected once the lease has run out). The round trip and the hand-over are
//! measured again through the nodes' proxies, each delaying every byte by a millisecond each
//! way: there the network sets the pace, not five servers and the client sharing the machine's
//! CPUs. Every loop is bounded in count and time.
//!
//! A hand-over comes after a pause (the candidate has settled into its wait), and on this
//! machine the first round trip after a pause costs about twice one of a busy loop; so the
//! targets divide by round trips taken after the same pause, one before each hand-over. The
//! hand-over's own target has no observer: an observer's reads of five nodes, in the same
//! process on the same two CPUs, land in the middle of the hand-over (its row is shown beside).

use std::fmt::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use quorumlock::{Election, ElectionOptions, Lock, LockOptions};
use quorumlock_harness::TestCluster;
use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use serde::Serialize;

use super::faults::set_latency;
use super::loops::timed_acquire;
use super::plan::NET_ONE_WAY;
use super::stats::{Row, Tally, latency_table, record};
use super::targets::{Target, at_most};
use crate::text_table::aligned;

/// The hand-over rows' lease: long, so that only a wake-up elects the next leader in time.
const SLOW_LEASE: Duration = Duration::from_secs(30);
/// The fail-over rows' lease, renew deadline and retry period.
const FAILOVER_LEASE: Duration = Duration::from_secs(1);
/// How long the machine is left quiet before a round trip beside a hand-over and before the
/// resignation: what the last round sent (an observer's read, an unsubscription) and the
/// candidate's first steps (its subscription, an attempt, an expiry read) are answered by then.
const SETTLE: Duration = Duration::from_millis(5);
/// How long any one wait in the section lasts at most.
const CAP: Duration = Duration::from_secs(20);

/// What the section measured.
#[derive(Debug, Serialize)]
pub(super) struct ElectionBench {
    /// A free key's `try_acquire` (one quorum round trip), then its release, back to back.
    rtt: Row,
    /// As `rtt`, one before each hand-over (after a pause, before the next candidate starts).
    rtt_beside: Row,
    /// From the leader's `resign()` call to the waiting candidate's `campaign` returning,
    /// nobody observing.
    after_resign: Row,
    /// As `rtt_beside`, in the series with an observer.
    watched_rtt: Row,
    /// As `after_resign`, an observer in the same process reading each change.
    watched_after_resign: Row,
    /// From a new leader's `campaign` returning to an observer's `changed()` returning it.
    observed: Row,
    /// From SIGKILL to the leader's process to the waiting candidate's `campaign` returning.
    failover: Row,
    /// As `rtt_beside`, through the proxies (a millisecond each way).
    net_rtt: Row,
    /// As `after_resign`, through the proxies.
    net_after_resign: Row,
}

/// Runs the section on the five nodes at `urls` (they persist every write), and its rows through
/// the proxies on `cluster`'s, the same servers (each proxy adds no delay until those rows).
pub(super) async fn election(
    urls: &[String],
    cluster: &TestCluster,
    quick: bool,
) -> Result<ElectionBench, String> {
    let (handovers, failovers, cycles) = if quick {
        (20, 3, 300)
    } else {
        (100, 10, 2_000)
    };
    let run = format!("{:08x}", rand::random::<u32>());
    let (rtt, series) = Series::warmed(urls, &run, cycles).await?;
    let plain = series.handovers(None, handovers).await?;
    let observer = election_lock(urls, &run)?;
    let watched = series.handovers(Some(&observer), handovers).await?;
    let proxied = cluster.urls();
    set_latency(cluster, NET_ONE_WAY);
    // The back-to-back round trips only warm the proxied connections here.
    let net = async {
        let (_, series) = Series::warmed(&proxied, &run, cycles / 10).await?;
        series.handovers(None, handovers / 2).await
    }
    .await;
    set_latency(cluster, Duration::ZERO);
    let net = net?;
    // The child `quorumlock elect` uses the default key prefixes: so does its candidate, under
    // a name of this run's.
    let failover_lock = Lock::new(
        urls.iter().cloned(),
        LockOptions::new().ttl(FAILOVER_LEASE).fencing(true),
    )
    .map_err(|e| format!("election: {e}"))?;
    let failover =
        failovers_of(&failover_lock, urls, &format!("failover-{run}"), failovers).await?;
    Ok(ElectionBench {
        rtt: Row::new(
            "election/rtt",
            "free key, 1 task",
            "quorum-5",
            "try_acquire",
            rtt,
        ),
        rtt_beside: Row::new(
            "election/rtt-beside",
            "free key, 1 task, one before each hand-over",
            "quorum-5",
            "try_acquire",
            plain.rtt_beside,
        ),
        after_resign: Row::new(
            "election/after-resign",
            "leader resigns, 1 candidate waiting",
            "quorum-5",
            "hand-over",
            plain.after_resign,
        ),
        watched_rtt: Row::new(
            "election/watched-rtt",
            "free key, 1 task, one before each hand-over, 1 observer",
            "quorum-5",
            "try_acquire",
            watched.rtt_beside,
        ),
        watched_after_resign: Row::new(
            "election/watched-after-resign",
            "leader resigns, 1 candidate waiting, 1 observer",
            "quorum-5",
            "hand-over",
            watched.after_resign,
        ),
        observed: Row::new(
            "election/observed",
            "1 observer, after each hand-over",
            "quorum-5",
            "heard",
            watched.observed,
        ),
        failover: Row::new(
            "election/failover",
            "leader's process killed, lease 1 s",
            "quorum-5",
            "fail-over",
            failover,
        ),
        net_rtt: Row::new(
            "election/net-rtt",
            "free key, 1 task, one before each hand-over, 1 ms each way",
            "quorum-5",
            "try_acquire",
            net.rtt_beside,
        ),
        net_after_resign: Row::new(
            "election/net-after-resign",
            "leader resigns, 1 candidate waiting, 1 ms each way",
            "quorum-5",
            "hand-over",
            net.after_resign,
        ),
    })
}

/// What one series of hand-overs measured.
struct Handovers {
    /// A quorum round trip before each hand-over.
    rtt_beside: Tally,
    after_resign: Tally,
    /// An observer's delays (none in a series without one).
    observed: Tally,
}

/// The locks of one series of hand-overs: two candidates, and an unfenced lock whose free keys'
/// acquisitions are the round trips taken beside them.
struct Series {
    candidates: [Lock; 2],
    unfenced: Lock,
}

impl Series {
    /// The series' locks on the nodes at `urls` for run `run`, and `cycles` quorum round trips
    /// back to back on them (which also warm their connections).
    async fn warmed(urls: &[String], run: &str, cycles: u64) -> Result<(Tally, Series), String> {
        // One quorum round trip: an unfenced lock's acquisition (a fenced one adds its
        // write-back).
        let unfenced = Lock::new(
            urls.iter().cloned(),
            LockOptions::new()
                .ttl(SLOW_LEASE)
                .key_prefix(format!("quorumlock-bench-election:{run}:")),
        )
        .map_err(|e| format!("election: {e}"))?;
        let mut rtt = Tally::new();
        round_trip(&unfenced, &mut rtt, "rtt", cycles).await;
        let candidates = [election_lock(urls, run)?, election_lock(urls, run)?];
        Ok((
            rtt,
            Series {
                candidates,
                unfenced,
            },
        ))
    }

    /// `rounds` hand-overs between the candidates, `observer`, if any, observing.
    async fn handovers(&self, observer: Option<&Lock>, rounds: u64) -> Result<Handovers, String> {
        handovers_of(&self.candidates, observer, &self.unfenced, rounds).await
    }
}

/// A fenced lock on the nodes at `urls` for run `run`'s elections.
fn election_lock(urls: &[String], run: &str) -> Result<Lock, String> {
    Lock::new(
        urls.iter().cloned(),
        LockOptions::new()
            .ttl(SLOW_LEASE)
            .fencing(true)
            .key_prefix(format!("quorumlock-bench-election:{run}:"))
            .fence_prefix(format!("quorumlock-bench-election-fence:{run}:")),
    )
    .map_err(|e| format!("election: {e}"))
}

/// `cycles` acquisitions of free keys named `{name}:{n}`, timed into `tally`, each released.
async fn round_trip(lock: &Lock, tally: &mut Tally, name: &str, cycles: u64) {
    let cap = Instant::now() + CAP;
    for n in 0..cycles {
        timed_acquire(lock, &format!("{name}:{n}"), tally).await;
        if Instant::now() > cap {
            break;
        }
    }
}

/// The election timing of a lease of `lease`.
fn options(lease: Duration) -> ElectionOptions {
    ElectionOptions::new()
        .lease_duration(lease)
        .renew_deadline(lease * 2 / 3)
        .retry_period(lease / 4)
}

/// `rounds` hand-overs between the two `candidates` (each resigns to the other in turn), each
/// after a round trip on `unfenced`; `observer`, if any, observing.
async fn handovers_of(
    candidates: &[Lock; 2],
    observer: Option<&Lock>,
    unfenced: &Lock,
    rounds: u64,
) -> Result<Handovers, String> {
    let elect =
        |lock: &Lock| Election::new(lock, "leader", options(SLOW_LEASE)).map_err(|e| e.to_string());
    let elections = [elect(&candidates[0])?, elect(&candidates[1])?];
    let (heard_tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let watching = match observer {
        Some(lock) => {
            let mut observer = elect(lock)?.observe().await;
            Some(tokio::spawn(async move {
                for _ in 0..rounds.saturating_mul(4) {
                    // Nobody leads for a moment between two leaders; a failed read is tried
                    // again.
                    if let Ok(Some(leader)) = observer.changed().await
                        && heard_tx.send((leader.term, Instant::now())).is_err()
                    {
                        break;
                    }
                }
            }))
        }
        None => None,
    };
    let (mut rtt_beside, mut after_resign, mut observed) =
        (Tally::new(), Tally::new(), Tally::new());
    let mut leader = elections[0]
        .campaign("0")
        .await
        .map_err(|e| format!("election: first campaign: {e}"))?;
    for round in 0..rounds {
        tokio::time::sleep(SETTLE).await;
        round_trip(unfenced, &mut rtt_beside, &format!("beside:{round}"), 1).await;
        let next = &elections[usize::from(round % 2 == 0)];
        let waiting = &candidates[usize::from(round % 2 == 0)];
        let candidate = next.clone();
        let campaign = tokio::spawn(async move {
            let result = candidate.campaign("next").await;
            (result, Instant::now())
        });
        // The candidate waits (its first attempt refused) before the leader resigns.
        let cap = Instant::now() + CAP;
        while waiting.waiters("leader") == 0 && Instant::now() < cap {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        tokio::time::sleep(SETTLE).await;
        let resigned = Instant::now();
        leader.resign().await;
        let (result, elected) = campaign.await.map_err(|e| e.to_string())?;
        leader = result.map_err(|e| format!("election: campaign: {e}"))?;
        record(&mut after_resign.hist, elected - resigned);
        // What the observer heard of this term (skipping "no leader" and older terms).
        let until = Instant::now() + CAP;
        while watching.is_some()
            && let Ok(Some((term, at))) = tokio::time::timeout_at(until.into(), heard.recv()).await
        {
            if term == leader.term() {
                record(&mut observed.hist, at.saturating_duration_since(elected));
                break;
            }
        }
    }
    leader.resign().await;
    if let Some(watching) = watching {
        watching.abort();
    }
    for lock in candidates.iter().chain(observer) {
        lock.settle().await;
    }
    Ok(Handovers {
        rtt_beside,
        after_resign,
        observed,
    })
}

/// `rounds` fail-overs: a `quorumlock elect` child leads (its command is `sleep`), a candidate
/// waits, the child gets SIGKILL: the time until the candidate is elected.
async fn failovers_of(
    lock: &Lock,
    urls: &[String],
    name: &str,
    rounds: u64,
) -> Result<Tally, String> {
    let election = Election::new(lock, name, options(FAILOVER_LEASE)).map_err(|e| e.to_string())?;
    let program = std::env::current_exe().map_err(|e| format!("election: {e}"))?;
    let mut tally = Tally::new();
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    for _ in 0..rounds {
        // The child's command prints its process group, then sleeps.
        let mut child = tokio::process::Command::new(&program)
            .args(["elect", name, "--nodes", &urls.join(",")])
            .args(["--lease-duration", &ms(FAILOVER_LEASE)])
            .args(["--renew-deadline", &ms(FAILOVER_LEASE * 2 / 3)])
            .args(["--retry-period", &ms(FAILOVER_LEASE / 4)])
            .args(["--", "sh", "-c", "echo $$; exec sleep 60"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("election: starting the leader: {e}"))?;
        let group = read_group(&mut child).await;
        let candidate = election.clone();
        let campaign = tokio::spawn(async move {
            let result = candidate.campaign("candidate").await;
            (result, Instant::now())
        });
        let cap = Instant::now() + CAP;
        while lock.waiters(name) == 0 && Instant::now() < cap {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let killed = Instant::now();
        let pid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(Pid::from_raw);
        if let Some(pid) = pid {
            let _ = kill_process(pid, Signal::KILL);
        }
        if let Some(group) = group {
            let _ = kill_process_group(group, Signal::KILL);
        }
        let _ = child.wait().await;
        match tokio::time::timeout(CAP, campaign).await {
            Ok(Ok((Ok(leadership), elected))) => {
                record(&mut tally.hist, elected - killed);
                leadership.resign().await;
            }
            _ => tally.errors += 1,
        }
    }
    lock.settle().await;
    Ok(tally)
}

/// The process group the child's command printed (it leads its own), once the child leads.
async fn read_group(child: &mut tokio::process::Child) -> Option<Pid> {
    use tokio::io::AsyncBufReadExt;
    let stdout = child.stdout.take()?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(CAP, lines.next_line())
        .await
        .ok()?
        .ok()??;
    line.trim()
        .parse::<i32>()
        .ok()
        .filter(|&pid| pid > 1)
        .and_then(Pid::from_raw)
}

impl ElectionBench {
    /// Issue 34's targets: the hand-over after a resignation against the round trips taken
    /// beside it, the fail-over against the lease and such a round trip (what is left of the
    /// worst one once the lease is taken off, in round trips), an observer's p99.
    pub(super) fn targets(&self) -> Vec<Target> {
        let rtt = self.rtt_beside.p50_us;
        let lease_us = FAILOVER_LEASE.as_secs_f64() * 1e6;
        vec![
            at_most(
                "election: hand-over after a resignation p50 / quorum round trip p50 beside it"
                    .to_owned(),
                (rtt > 0.0).then(|| self.after_resign.p50_us / rtt),
                2.5,
                "2.5",
            ),
            at_most(
                "election: fail-over (leader killed) max, less the lease, in quorum round trips"
                    .to_owned(),
                (self.failover.samples > 0 && rtt > 0.0)
                    .then(|| (self.failover.max_us - lease_us) / rtt),
                1.0,
                "1",
            ),
            at_most(
                "election: hand-over after a resignation p50 / quorum round trip p50, \
                 1 ms each way"
                    .to_owned(),
                (self.net_rtt.p50_us > 0.0)
                    .then(|| self.net_after_resign.p50_us / self.net_rtt.p50_us),
                2.5,
                "2.5",
            ),
            at_most(
                "election: an observer hears the new leader, p99 (ms)".to_owned(),
                (self.observed.samples > 0).then(|| self.observed.p99_us / 1e3),
                5.0,
                "5",
            ),
        ]
    }
}

/// The section's table.
pub(super) fn render(bench: &ElectionBench) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nleader election (Election), 5 local nodes (AOF always)\n"
    );
    let rows = [
        ("quorum round trip (free key, try_acquire)", &bench.rtt),
        (
            "quorum round trip, one before each hand-over",
            &bench.rtt_beside,
        ),
        ("hand-over after resign (lease 30 s)", &bench.after_resign),
        (
            "round trip before each hand-over, 1 observer",
            &bench.watched_rtt,
        ),
        (
            "hand-over after resign, 1 observer",
            &bench.watched_after_resign,
        ),
        ("observer hears the new leader", &bench.observed),
        (
            "fail-over, leader's process killed (lease 1 s)",
            &bench.failover,
        ),
        (
            "round trip before each hand-over, 1 ms each way",
            &bench.net_rtt,
        ),
        (
            "hand-over after resign, 1 ms each way",
            &bench.net_after_resign,
        ),
    ];
    let rows = rows.map(|(label, row)| (label.to_owned(), row));
    out.push_str(&aligned(&latency_table("samples", rows), 1));
    out
}
