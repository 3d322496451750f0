//! Self-checks: every fault proves that it took effect, so that a scenario which shows nothing
//! cannot be a fault that silently did nothing. A killed node's process is gone, a frozen one
//! is stopped and silent, a partitioned one is silent, a node restarted without persistence
//! has lost its data (and one with AOF kept it), a clock moved by what it was told, latency is
//! there when measured through the proxy. A failed proof is [`ChaosError::FaultNotInEffect`];
//! what was measured goes into the report's notes.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quorumlock_harness::{Backend, TestCluster};
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

use super::error::ChaosError;
use super::options::RunOptions;

/// How long a probe waits for an answer from a node that must not give one.
const SILENCE_PROBE: Duration = Duration::from_millis(100);
/// Response timeout of the probes that must be answered (a slowed node included).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a SIGSTOP may take to show as state `T`, and how often that is looked at.
const STOP_WAIT: Duration = Duration::from_secs(1);
const STOP_POLL: Duration = Duration::from_millis(1);
/// The TTL of a restart scenario is at least this many restart times: a holder keeps the lock
/// for 50–95 % of its validity, so a hold taken just before a restart then mostly outlives it,
/// and the cycle (TTL apart, TTL cut off, two restarts) still fits into a 10 s run once on a
/// backend whose restart takes a second.
const RESTARTS_PER_TTL: u32 = 2;
/// The key a restart check leaves on a node before it goes down.
const RESTART_MARKER: &str = "quorumlock:chaos:restart-marker";

/// `Err(FaultNotInEffect)` for `fault` on `node`, with what was seen instead.
pub(super) fn not_in_effect(fault: &str, node: usize, evidence: impl Into<String>) -> ChaosError {
    ChaosError::FaultNotInEffect {
        fault: fault.to_owned(),
        node,
        evidence: evidence.into(),
    }
}

/// Proves that `node` does not answer: a new connection and a PING get no reply within
/// [`SILENCE_PROBE`] (a refused connection or any answer fails the proof).
pub(super) async fn silent(
    cluster: &TestCluster,
    node: usize,
    fault: &str,
) -> Result<(), ChaosError> {
    let probe = async {
        let mut connection = cluster.connection(node).await?;
        let pong: String = redis::cmd("PING").query_async(&mut connection).await?;
        Ok::<_, ChaosError>(pong)
    };
    match tokio::time::timeout(SILENCE_PROBE, probe).await {
        Err(_elapsed) => Ok(()),
        Ok(Ok(pong)) => Err(not_in_effect(fault, node, format!("PING answered {pong}"))),
        Ok(Err(ChaosError::Harness(err))) if is_timeout(&err) => Ok(()),
        Ok(Err(err)) => Err(not_in_effect(
            fault,
            node,
            format!("the probe failed at once instead of timing out: {err}"),
        )),
    }
}

fn is_timeout(err: &quorumlock_harness::HarnessError) -> bool {
    matches!(err, quorumlock_harness::HarnessError::Redis(err) if err.is_timeout())
}

/// The server process of `node` before a kill, to prove afterwards that it is gone.
pub(super) fn server_pid(cluster: &mut TestCluster, node: usize) -> Result<u32, ChaosError> {
    cluster
        .pid(node)?
        .ok_or_else(|| not_in_effect("kill", node, "no server process to kill"))
}

/// Proves that the killed server process `pid` of `node` no longer exists.
pub(super) fn process_gone(pid: u32, node: usize) -> Result<(), ChaosError> {
    match process_state(pid) {
        None => Ok(()),
        Some(state) => Err(not_in_effect(
            "kill",
            node,
            format!("process {pid} still exists (state {state})"),
        )),
    }
}

/// Proves that `node` is frozen: on the process backend its process is stopped (state `T` in
/// `/proc/PID/stat`, which a SIGSTOP reaches a moment after `kill` returns, so it is polled for
/// up to [`STOP_WAIT`]); on every backend it does not answer.
pub(super) async fn frozen(cluster: &mut TestCluster, node: usize) -> Result<(), ChaosError> {
    if cluster.backend() == Backend::Process {
        let pid = cluster
            .pid(node)?
            .ok_or_else(|| not_in_effect("SIGSTOP", node, "not running"))?;
        let polls = STOP_WAIT.as_millis() / STOP_POLL.as_millis().max(1) + 1;
        let mut state = process_state(pid);
        for _ in 0..polls {
            if matches!(state, Some('T' | 't')) {
                break;
            }
            tokio::time::sleep(STOP_POLL).await;
            state = process_state(pid);
        }
        if !matches!(state, Some('T' | 't')) {
            return Err(not_in_effect(
                "SIGSTOP",
                node,
                format!("process {pid} in state {state:?} after {STOP_WAIT:?}, not T"),
            ));
        }
    }
    silent(cluster, node, "SIGSTOP").await
}

/// The state letter of process `pid` (`/proc/PID/stat`, after the command name), or `None`
/// if there is no such process.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Leaves a marker key without expiry on `node`, before it is killed.
pub(super) async fn mark_before_restart(
    cluster: &TestCluster,
    node: usize,
) -> Result<(), ChaosError> {
    let mut connection = cluster.connection(node).await?;
    let () = redis::cmd("SET")
        .arg(RESTART_MARKER)
        .arg(1)
        .query_async(&mut connection)
        .await?;
    Ok(())
}

/// Proves that `node`, just restarted, lost its data (`keeps_data` false: the marker is gone)
/// or kept it (`keeps_data` true: the marker is there).
pub(super) async fn restarted_as_expected(
    cluster: &TestCluster,
    node: usize,
    keeps_data: bool,
) -> Result<(), ChaosError> {
    let mut connection = cluster.connection(node).await?;
    let exists: bool = redis::cmd("EXISTS")
        .arg(RESTART_MARKER)
        .query_async(&mut connection)
        .await?;
    if exists == keeps_data {
        return Ok(());
    }
    let (fault, evidence) = if keeps_data {
        ("restart with AOF", "the key set before the kill is gone")
    } else {
        (
            "restart without persistence",
            "the key set before the kill is still there",
        )
    };
    Err(not_in_effect(fault, node, evidence))
}

/// `options` with a TTL of at least [`RESTARTS_PER_TTL`] restart times, so that a node
/// restarted "at once" is back while the holds it forgot are still valid (else the restart
/// scenarios are all in effect `restart-delayed`). The restart time is measured here, by
/// restarting node 1 (SIGKILL or `docker kill`, start, answering) before the run; the note
/// says what was measured and what it did to the TTL.
pub(super) async fn ttl_for_restarts(
    cluster: &mut TestCluster,
    options: &RunOptions,
    notes: &mut Vec<String>,
) -> Result<RunOptions, ChaosError> {
    let started = Instant::now();
    cluster.kill(1).await?;
    cluster.start_node(1).await?;
    let restart = started.elapsed();
    let needed = restart * RESTARTS_PER_TTL;
    let restart_ms = restart.as_secs_f64() * 1e3;
    if needed <= options.ttl {
        notes.push(format!(
            "a restart takes {restart_ms:.0} ms here; ttl {} ms kept",
            options.ttl.as_millis()
        ));
        return Ok(options.clone());
    }
    // Up to the next 100 ms.
    let ttl = Duration::from_millis(
        needed
            .as_millis()
            .div_ceil(100)
            .saturating_mul(100)
            .try_into()
            .unwrap_or(u64::MAX),
    );
    notes.push(format!(
        "ttl scaled to {:.1} s (≥ {RESTARTS_PER_TTL}× a restart): a restart takes {:.2} s here",
        ttl.as_secs_f64(),
        restart.as_secs_f64()
    ));
    Ok(options.clone().ttl(ttl))
}

/// How far `connection`'s node clock is ahead of ours (`TIME` against the system clock), in
/// milliseconds; negative if behind.
pub(super) async fn clock_offset_ms(
    connection: &mut MultiplexedConnection,
) -> Result<i128, ChaosError> {
    let (secs, micros): (i128, i128) = redis::cmd("TIME").query_async(connection).await?;
    let ours = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros().try_into().unwrap_or(i128::MAX));
    Ok((secs * 1_000_000 + micros - ours) / 1000)
}

/// Proves that a clock jump of `expected_ms` took effect on `node`: the offset measured before
/// and after moved by at least half of it, in its direction. Returns the measured jump.
pub(super) fn clock_jumped(
    node: usize,
    before_ms: i128,
    after_ms: i128,
    expected_ms: i128,
) -> Result<i128, ChaosError> {
    let measured = after_ms - before_ms;
    if measured.signum() == expected_ms.signum() && measured.abs() * 2 >= expected_ms.abs() {
        Ok(measured)
    } else {
        Err(not_in_effect(
            "clock jump",
            node,
            format!("told to jump {expected_ms:+} ms, measured {measured:+} ms"),
        ))
    }
}

/// A connection through the fault proxy at `url`, to measure the latency a client sees.
pub(super) async fn proxied_connection(url: &str) -> Result<MultiplexedConnection, ChaosError> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(ANSWER_TIMEOUT))
        .set_response_timeout(Some(ANSWER_TIMEOUT));
    Ok(redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// One PING's round trip on `connection`.
pub(super) async fn round_trip(
    connection: &mut MultiplexedConnection,
) -> Result<Duration, ChaosError> {
    let started = Instant::now();
    let _: String = redis::cmd("PING").query_async(connection).await?;
    Ok(started.elapsed())
}

/// Proves that latency of `added` each way is in effect on `node`: a round trip measured inside
/// its window took at least 90 % of twice that.
pub(super) fn latency_in_effect(
    node: usize,
    added: Duration,
    measured: Duration,
) -> Result<(), ChaosError> {
    if measured * 10 >= added * 2 * 9 {
        Ok(())
    } else {
        Err(not_in_effect(
            &format!("+{} ms each way", added.as_millis()),
            node,
            format!(
                "a PING through its proxy took {:.1} ms",
                measured.as_secs_f64() * 1e3
            ),
        ))
    }
}

/// The median of `samples` in milliseconds (0 for none).
pub(super) fn median_ms(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |median| median.as_secs_f64() * 1e3)
}

/// How long the nodes a scenario cuts off and heals must have been up before the run, so that
/// a client reconnecting after the heal can tell that they did not restart meanwhile: the
/// server reports whole seconds, the restart guard trusts one less, and a node surely up for
/// the TTL plus the drift votes at once.
const UP_BEFORE_A_CUT: Duration = Duration::from_secs(2);

/// Waits until `nodes` have been up for [`UP_BEFORE_A_CUT`] (bounded by the harness's wait),
/// and notes it. Without it the first aimed cycle of
/// `clock-jump-minority` finds the healed nodes sitting out (`Recovering`), so its
/// contenders cannot get in and the cycle shows nothing.
pub(super) async fn up_for_a_while(
    cluster: &TestCluster,
    nodes: &[usize],
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    for &node in nodes {
        let up = cluster.wait_for_uptime(node, UP_BEFORE_A_CUT).await?;
        if up < UP_BEFORE_A_CUT {
            return Err(not_in_effect(
                "up for a while before the run",
                node,
                format!("uptime {up:?} after waiting for {UP_BEFORE_A_CUT:?}"),
            ));
        }
    }
    notes.push(format!(
        "nodes {nodes:?} up for at least {} s before the run: a client reconnecting after \
         their cut knows they did not restart",
        UP_BEFORE_A_CUT.as_secs()
    ));
    Ok(())
}
