//! The clock faults. [`Scenario::ClockFast`](crate::Scenario::ClockFast): nodes 0–2 count
//! time [`FAST_CLOCK_RATE`] times too fast, for real (libfaketime, through the cluster options)
//! or, where that is not available, emulated by shortening every new key's expiry. The clock
//! jumps of [`Scenario::ClockJumpMinority`](crate::Scenario::ClockJumpMinority) and
//! [`Scenario::ClockJumpMajority`](crate::Scenario::ClockJumpMajority): wall clocks stepped
//! ahead and back at run time (libfaketime reading an offset file), each jump measured with
//! `TIME`.

use std::time::{Duration, Instant};

use quorumlock_harness::{ClusterOptions, TestCluster};
use redis::aio::MultiplexedConnection;

use super::checks::{clock_jumped, clock_offset_ms};
use super::error::ChaosError;
use super::faults::{Faults, MAX_CYCLES, heal};
use crate::history::Recorder;
use crate::scenario::Scenario;

/// Speed factor of the fast clocks.
const FAST_CLOCK_RATE: f64 = 10.0;
/// The nodes whose clocks run fast.
const FAST_NODES: [usize; 3] = [0, 1, 2];
/// How long the clock-rate check watches a node's clock.
const CLOCK_CHECK: Duration = Duration::from_millis(100);
/// How often the clock emulation looks for new keys.
const SKEW_POLL: Duration = Duration::from_millis(2);

/// The nodes whose wall clocks jump in `scenario` (none for the others).
pub(super) fn jumping_nodes(scenario: Scenario) -> &'static [usize] {
    match scenario {
        Scenario::ClockJumpMinority => &[3, 4],
        Scenario::ClockJumpMajority => &[0, 1, 2],
        _ => &[],
    }
}

/// `cluster` with the clocks of `scenario`'s [`jumping_nodes`] able to jump.
pub(super) fn with_jumping_clocks(
    mut cluster: ClusterOptions,
    scenario: Scenario,
) -> ClusterOptions {
    for &node in jumping_nodes(scenario) {
        cluster = cluster.clock_jumps(node);
    }
    cluster
}

/// Sets the clocks of `nodes` to `offset_ms` ahead of real time, proving each jump of
/// `jump_ms` with `TIME` before and after; the measured jumps go to `measured`.
pub(super) async fn jump_clocks(
    cluster: &TestCluster,
    nodes: &[usize],
    connections: &mut [MultiplexedConnection],
    offset_ms: i64,
    jump_ms: i64,
    measured: &mut Vec<i128>,
) -> Result<(), ChaosError> {
    for (&node, connection) in nodes.iter().zip(connections.iter_mut()) {
        let before = clock_offset_ms(connection).await?;
        cluster.set_clock_offset(node, offset_ms)?;
        let after = clock_offset_ms(connection).await?;
        measured.push(clock_jumped(node, before, after, i128::from(jump_ms))?);
    }
    Ok(())
}

/// `cluster` with the clocks of nodes 0–2 running [`FAST_CLOCK_RATE`] times too fast.
pub(super) fn with_fast_clocks(mut cluster: ClusterOptions) -> ClusterOptions {
    for node in FAST_NODES {
        cluster = cluster.clock_rate(node, FAST_CLOCK_RATE);
    }
    cluster
}

/// Nodes 0–2 count time [`FAST_CLOCK_RATE`] times too fast until `deadline`: every key they
/// store expires after TTL / rate.
///
/// Where the nodes' clocks do not actually run fast (measured with `TIME`), it is emulated: a
/// key's expiry is shortened to a tenth of what is left as soon as it is seen (within a few
/// milliseconds), which is what a node clock running that fast does to it.
pub(super) async fn fast_clocks(
    cluster: &TestCluster,
    keys: Vec<Vec<u8>>,
    recorder: &Recorder,
    deadline: Instant,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    let nodes = FAST_NODES;
    let mut connections = node_connections(cluster, &nodes).await?;
    let rates = futures::future::try_join_all(connections.iter_mut().map(clock_rate)).await?;
    if rates.iter().all(|&rate| rate > FAST_CLOCK_RATE / 2.0) {
        notes.push(format!(
            "clocks of nodes 0,1,2 run fast (libfaketime); measured rates {}",
            rates
                .iter()
                .map(|rate| format!("×{rate:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let fault = recorder.fault(format!("clock ×{FAST_CLOCK_RATE}"), &nodes);
        tokio::time::sleep_until(deadline.into()).await;
        recorder.lift(fault);
        return Ok(());
    }
    notes.push(format!(
        "clock ×{FAST_CLOCK_RATE} emulated (node clocks measured at ×{:.1}): each new key's \
         remaining TTL is divided by {FAST_CLOCK_RATE} within {SKEW_POLL:?} of being set",
        rates.first().copied().unwrap_or(1.0)
    ));
    let fault = recorder.fault(format!("clock ×{FAST_CLOCK_RATE}"), &nodes);
    let script = redis::Script::new(SHORTEN_NEW_KEY);
    // The token last shortened, per node and key.
    let mut seen: Vec<Vec<Option<String>>> = vec![vec![None; keys.len()]; nodes.len()];
    let polls = deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        / SKEW_POLL.as_millis().max(1)
        + 1;
    for _ in 0..polls {
        if Instant::now() >= deadline {
            break;
        }
        for (connection, seen) in connections.iter_mut().zip(seen.iter_mut()) {
            for (key, last) in keys.iter().zip(seen.iter_mut()) {
                let token: Option<String> = script
                    .key(key.as_slice())
                    .arg(last.as_deref().unwrap_or(""))
                    .arg(FAST_CLOCK_RATE)
                    .invoke_async(connection)
                    .await?;
                if token.is_some() {
                    *last = token;
                }
            }
        }
        tokio::time::sleep(SKEW_POLL).await;
    }
    recorder.lift(fault);
    Ok(())
}

/// How fast a node's wall clock runs against ours, watched over [`CLOCK_CHECK`].
async fn clock_rate(connection: &mut MultiplexedConnection) -> Result<f64, ChaosError> {
    let start = best_reading(connection).await?;
    tokio::time::sleep(CLOCK_CHECK).await;
    let end = best_reading(connection).await?;
    Ok(rate_between(&start, &end).unwrap_or(1.0))
}

/// A connection to each of `nodes`, in order, for reading their clocks.
pub(super) async fn node_connections(
    cluster: &TestCluster,
    nodes: &[usize],
) -> Result<Vec<MultiplexedConnection>, ChaosError> {
    let mut connections = Vec::with_capacity(nodes.len());
    for &node in nodes {
        connections.push(cluster.connection(node).await?);
    }
    Ok(connections)
}

/// How fast the node's clock ran against ours between two readings (`None` if ours did not
/// move).
pub(super) fn rate_between(start: &Reading, end: &Reading) -> Option<f64> {
    let ours = end.at.saturating_duration_since(start.at).as_secs_f64();
    (ours > 0.0).then(|| (end.node_secs - start.node_secs) / ours)
}

/// How many times a clock is read at each end of the measurement; the reading with the
/// shortest round trip counts (the least blurred by a loaded machine).
const CLOCK_READS: usize = 5;

/// One reading of a node's wall clock.
pub(super) struct Reading {
    /// Our clock halfway through the round trip that read it.
    at: Instant,
    /// The node's `TIME`, in seconds.
    node_secs: f64,
    /// The round trip.
    round_trip: Duration,
}

/// Of [`CLOCK_READS`] readings of the node's clock, the one with the shortest round trip.
pub(super) async fn best_reading(
    connection: &mut MultiplexedConnection,
) -> Result<Reading, ChaosError> {
    let mut best = read_clock(connection).await?;
    for _ in 1..CLOCK_READS {
        let reading = read_clock(connection).await?;
        if reading.round_trip < best.round_trip {
            best = reading;
        }
    }
    Ok(best)
}

/// Reads the node's clock once (`TIME`).
async fn read_clock(connection: &mut MultiplexedConnection) -> Result<Reading, ChaosError> {
    let sent = Instant::now();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(connection).await?;
    let round_trip = sent.elapsed();
    Ok(Reading {
        at: sent + round_trip / 2,
        node_secs: secs as f64 + micros as f64 / 1e6,
        round_trip,
    })
}

/// Divides the remaining TTL of `KEYS[1]` by `ARGV[2]` unless its value is `ARGV[1]` (already
/// done); returns the value, or nil if there is no key.
const SHORTEN_NEW_KEY: &str = r"
local value = redis.call('GET', KEYS[1])
if not value then return nil end
if value ~= ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    redis.call('PEXPIRE', KEYS[1], math.max(1, math.floor(left / tonumber(ARGV[2]))))
  end
end
return value
";

/// Where an aimed clock jump ([`Scenario::ClockJumpMinority`]) aims: it cuts `cut` off (proxy:
/// cut and refuse) for one TTL and until a hold has just been taken (its key on node `fresh_on`
/// is fresh), so that the hold's keys sit on the other nodes only, then heals `cut` and jumps
/// at once: the jumping nodes drop the hold's keys, and a contender wins them and `cut`.
pub(super) struct Aim<'a> {
    pub(super) cut: &'a [usize],
    pub(super) fresh_on: usize,
    pub(super) keys: &'a [Vec<u8>],
}

impl Faults<'_> {
    /// Clocks of `nodes` jump 2 TTL ahead, and 2 TTL later back, in cycles; every jump measured
    /// with `TIME` (the range goes to `notes`). With an `aim`, each jump comes right after a
    /// hold was taken while the aim's nodes were cut off (see [`Aim`]).
    pub(super) async fn clock_jumps(
        &self,
        cluster: &TestCluster,
        nodes: &[usize],
        aim: Option<Aim<'_>>,
        notes: &mut Vec<String>,
    ) -> Result<(), ChaosError> {
        let t = self.ttl;
        let jump_ms = i64::try_from((t * 2).as_millis()).unwrap_or(i64::MAX);
        let mut connections = node_connections(cluster, nodes).await?;
        let (mut ahead, mut back) = (Vec::new(), Vec::new());
        let (mut cycles, mut timed) = (0, 0);
        for _ in 0..MAX_CYCLES {
            let pause = if aim.is_some() { t / 2 } else { t };
            self.sleep(pause).await;
            // Aimed: the cut (one TTL), a hold just taken (up to one more), and the jump.
            let cycle = if aim.is_some() { t * 4 } else { t * 5 / 2 };
            if !self.fits(cycle) {
                break;
            }
            if let Some(aim) = &aim {
                let cut = self.recorder.fault("cut + refused", aim.cut);
                self.partition(cluster, aim.cut).await?;
                self.sleep(t).await;
                if self.fresh_hold(cluster, aim.fresh_on, aim.keys).await? {
                    timed += 1;
                }
                heal(cluster, aim.cut).await?;
                self.recorder.lift(cut);
            }
            cycles += 1;
            let fault = self.recorder.fault(format!("clock +{jump_ms} ms"), nodes);
            let jumped_at = Instant::now();
            jump_clocks(
                cluster,
                nodes,
                &mut connections,
                jump_ms,
                jump_ms,
                &mut ahead,
            )
            .await?;
            self.sleep_until(jumped_at + t * 2).await;
            jump_clocks(cluster, nodes, &mut connections, 0, -jump_ms, &mut back).await?;
            self.recorder.lift(fault);
        }
        let range = |measured: &[i128]| match (measured.iter().min(), measured.iter().max()) {
            (Some(min), Some(max)) => format!("{min:+}..{max:+} ms"),
            _ => "none".to_owned(),
        };
        notes.push(format!(
            "self-check: {} clock jumps of ±{jump_ms} ms on nodes {nodes:?} (libfaketime), \
             measured with TIME: ahead {}, back {}{}",
            ahead.len() + back.len(),
            range(&ahead),
            range(&back),
            match &aim {
                Some(aim) => format!(
                    "; {timed} of {cycles} jumps came right after a hold was taken while nodes \
                     {:?} were cut off",
                    aim.cut
                ),
                None => String::new(),
            }
        ));
        Ok(())
    }
}
