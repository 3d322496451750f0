//! [`Scenario::Failover`](crate::Scenario::Failover): the addresses of nodes 0–2 (their fault
//! proxies) are switched to other servers that have been up for a while and lack the latest
//! writes, and the old connections are cut, while holds are taken and held. On the process
//! backend each of those servers is a real promoted replica: a replica of the server it
//! replaces (`REPLICAOF`), promoted (`REPLICAOF NO ONE`) before a hold is taken that it then
//! misses. On the docker backend it is a plain standby master, which never had any of the
//! lock's keys (the containers reach each other's servers only through ports published on the
//! host's loopback, which a container's own loopback is not). Either way the lock must let the
//! new servers sit out (`NodeError::Replaced`) for the TTL plus the drift.
//!
//! The standbys are three more servers of the run's cluster (nodes 5–7, past the
//! [`LOCAL_NODES`] the clients use); after each switch the replaced servers keep running and
//! become the standbys of the next one, so every switch after the first is a switch back.

use std::time::{Duration, Instant};

use quorumlock_harness::{Backend, TestCluster};
use redis::aio::MultiplexedConnection;

use super::LOCAL_NODES;
use super::checks::{not_in_effect, proxied_connection};
use super::error::ChaosError;
use super::faults::{Faults, MAX_CYCLES, proxy};
use crate::scenario::Scenario;

/// The nodes whose addresses are switched: a majority.
pub(super) const SWITCHED: [usize; 3] = [0, 1, 2];
/// The standby servers the run's cluster has beyond the clients' nodes, one per switched node.
const STANDBYS: usize = SWITCHED.len();

/// How many standby servers `scenario`'s cluster needs beyond the clients' nodes.
pub(super) fn standbys(scenario: Scenario) -> usize {
    if scenario == Scenario::Failover {
        STANDBYS
    } else {
        0
    }
}
/// How long the standbys have been up before the run: so long that the lock cannot take the
/// first switch for a restart (the server reports whole seconds, the lock trusts one less).
const STANDBY_UPTIME: Duration = Duration::from_secs(2);
/// How long a replica may take to finish its first sync.
const SYNC_WAIT: Duration = Duration::from_secs(5);
const SYNC_POLL: Duration = Duration::from_millis(5);
/// How often the cycle looks for a hold the promoted replica missed.
const MISSED_POLL: Duration = Duration::from_millis(2);

/// The standby of switched node `position` (0–2) at the start of the run.
fn first_standby(position: usize) -> usize {
    LOCAL_NODES + position
}

/// Before the run: waits until every standby has been up for [`STANDBY_UPTIME`], and lets every
/// server of `cluster` start a replica's sync at once (not after Redis's default 5 s wait for
/// more replicas). Notes what it found.
pub(super) async fn standing_by(
    cluster: &TestCluster,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    let mut least = Duration::MAX;
    for position in 0..STANDBYS {
        let standby = first_standby(position);
        let up = cluster.wait_for_uptime(standby, STANDBY_UPTIME).await?;
        if up < STANDBY_UPTIME {
            return Err(not_in_effect(
                "standby up for a while",
                standby,
                format!("uptime {up:?} after waiting for {STANDBY_UPTIME:?}"),
            ));
        }
        least = least.min(up);
    }
    for server in 0..cluster.len() {
        let mut connection = cluster.connection(server).await?;
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("repl-diskless-sync-delay")
            .arg(0)
            .query_async(&mut connection)
            .await?;
    }
    notes.push(format!(
        "standbys (servers {}–{}) up for at least {} s before the run",
        LOCAL_NODES,
        LOCAL_NODES + STANDBYS - 1,
        least.as_secs()
    ));
    Ok(())
}

/// The `run_id` a connection's server reports.
async fn run_id(connection: &mut MultiplexedConnection) -> Result<String, ChaosError> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(connection)
        .await?;
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(|id| id.trim().to_owned())
        .unwrap_or_default())
}

/// Makes server `standby` a replica of server `primary` and waits until its first sync is
/// done (bounded by [`SYNC_WAIT`]), then promotes it: a master again, with the primary's data
/// as of now, that will miss every write after this.
async fn replicate_then_promote(
    cluster: &TestCluster,
    standby: usize,
    primary: usize,
) -> Result<(), ChaosError> {
    let mut connection = cluster.connection(standby).await?;
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(cluster.port(primary)?)
        .query_async(&mut connection)
        .await?;
    let until = Instant::now() + SYNC_WAIT;
    let polls = SYNC_WAIT.as_millis() / SYNC_POLL.as_millis().max(1) + 1;
    let mut synced = false;
    for _ in 0..polls {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut connection)
            .await?;
        if info
            .lines()
            .any(|line| line.trim() == "master_link_status:up")
            && info
                .lines()
                .any(|line| line.trim() == "master_sync_in_progress:0")
        {
            synced = true;
            break;
        }
        if Instant::now() >= until {
            break;
        }
        tokio::time::sleep(SYNC_POLL).await;
    }
    let () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(&mut connection)
        .await?;
    if synced {
        Ok(())
    } else {
        Err(not_in_effect(
            "replica of the serving server",
            standby,
            format!("no finished sync with server {primary} within {SYNC_WAIT:?}"),
        ))
    }
}

impl Faults<'_> {
    /// The failover cycle, until the deadline: (process backend) each standby becomes a
    /// replica of the server it will replace and is promoted; a hold is awaited that the
    /// standbys miss (a lock key on the serving server of node 0 with at least half a TTL left
    /// that its standby does not hold, at most one TTL of waiting); the proxies of nodes 0–2
    /// are switched to the standbys and their connections cut. Each switch is proved: a new
    /// connection through the proxy reaches a server with another `run_id`, the standby's. The
    /// switched servers then sit out the TTL plus the drift for every client (recorded as the
    /// fault's window, one TTL), and the replaced ones become the next standbys.
    pub(super) async fn failovers(
        &self,
        cluster: &TestCluster,
        keys: &[Vec<u8>],
        notes: &mut Vec<String>,
    ) -> Result<(), ChaosError> {
        let t = self.ttl;
        let replicas = cluster.backend() == Backend::Process;
        let urls = cluster.urls();
        // Per switched node: the server behind its proxy now, and its standby.
        let mut serving: Vec<(usize, usize)> = SWITCHED
            .iter()
            .enumerate()
            .map(|(position, &node)| (node, first_standby(position)))
            .collect();
        // Every server's own address, as its proxy forwarded to it before any switch.
        let addresses = (0..cluster.len())
            .map(|server| Ok(proxy(cluster, server)?.upstream()))
            .collect::<Result<Vec<_>, ChaosError>>()?;
        let (mut switches, mut timed, mut cycles, mut missed_keys) = (0, 0, 0, 0);
        for _ in 0..MAX_CYCLES {
            self.sleep(t / 2).await;
            if !self.fits(t * 5 / 2) {
                break;
            }
            if replicas {
                for &(current, standby) in &serving {
                    replicate_then_promote(cluster, standby, current).await?;
                }
            }
            cycles += 1;
            // Read before the wait, so that the switch follows the missed hold at once.
            let mut before = Vec::with_capacity(SWITCHED.len());
            for &node in &SWITCHED {
                let url = urls.get(node).ok_or(ChaosError::NoProxy(node))?;
                before.push(run_id(&mut proxied_connection(url).await?).await?);
            }
            if self.missed_hold(cluster, serving[0], keys).await? {
                timed += 1;
            }
            let label = if replicas {
                "switched to a promoted replica"
            } else {
                "switched to a standby"
            };
            let fault = self.recorder.fault(label, &SWITCHED);
            let switched_at = Instant::now();
            for (&node, &(_, standby)) in SWITCHED.iter().zip(&serving) {
                let to = *addresses.get(standby).ok_or(ChaosError::NoProxy(standby))?;
                let proxy = proxy(cluster, node)?;
                proxy.switch_upstream(to);
                proxy.cut().await;
            }
            // The replaced servers still hold what they held: counted after the switch.
            for &(current, standby) in &serving {
                missed_keys += missed(cluster, current, standby, keys).await?;
            }
            for ((&node, &(_, standby)), old) in SWITCHED.iter().zip(&serving).zip(&before) {
                let url = urls.get(node).ok_or(ChaosError::NoProxy(node))?;
                let now = run_id(&mut proxied_connection(url).await?).await?;
                let expected = run_id(&mut cluster.connection(standby).await?).await?;
                if now == *old || now != expected {
                    return Err(not_in_effect(
                        label,
                        node,
                        format!(
                            "run_id through the proxy {old} before, {now} after; the standby's \
                             is {expected}"
                        ),
                    ));
                }
                switches += 1;
            }
            // The new servers sit out the TTL plus the drift: the holds they missed end meanwhile.
            self.sleep_until(switched_at + t).await;
            self.recorder.lift(fault);
            for pair in &mut serving {
                *pair = (pair.1, pair.0);
            }
        }
        notes.push(format!(
            "self-check: {switches} address switches of nodes {SWITCHED:?} in {cycles} cycles, \
             each to {}, the run_id through the proxy changed to the new server's each time; \
             {timed} of {cycles} cycles switched while a hold was held that the new servers \
             lacked ({missed_keys} lock keys missing on them at the switches)",
            if replicas {
                "a replica of the old server promoted before the latest hold"
            } else {
                "a standby master that never had the lock's keys"
            },
        ));
        Ok(())
    }

    /// Waits until the serving server of `pair` holds a lock key with at least half a TTL left
    /// that its standby lacks (or holds with another token): a hold taken after the standby's
    /// promotion, still valid for a while. `false` if none came within one TTL (or by the
    /// deadline).
    async fn missed_hold(
        &self,
        cluster: &TestCluster,
        (current, standby): (usize, usize),
        keys: &[Vec<u8>],
    ) -> Result<bool, ChaosError> {
        let mut serving = cluster.connection(current).await?;
        let mut standing_by = cluster.connection(standby).await?;
        let half_ms = i64::try_from((self.ttl / 2).as_millis()).unwrap_or(i64::MAX);
        let until = (Instant::now() + self.ttl).min(self.deadline);
        let polls = self.ttl.as_millis() / MISSED_POLL.as_millis().max(1) + 1;
        for _ in 0..polls {
            for key in keys {
                let (token, left): (Option<String>, i64) = redis::pipe()
                    .get(key.as_slice())
                    .pttl(key.as_slice())
                    .query_async(&mut serving)
                    .await?;
                if token.is_none() || left < half_ms {
                    continue;
                }
                let theirs: Option<String> = redis::cmd("GET")
                    .arg(key.as_slice())
                    .query_async(&mut standing_by)
                    .await?;
                if theirs != token {
                    return Ok(true);
                }
            }
            if Instant::now() >= until {
                break;
            }
            tokio::time::sleep(MISSED_POLL).await;
        }
        Ok(false)
    }
}

/// How many of the lock's `keys` server `current` holds that server `standby` lacks (or holds
/// with another token).
async fn missed(
    cluster: &TestCluster,
    current: usize,
    standby: usize,
    keys: &[Vec<u8>],
) -> Result<usize, ChaosError> {
    let mut serving = cluster.connection(current).await?;
    let mut standing_by = cluster.connection(standby).await?;
    let mut count = 0;
    for key in keys {
        let ours: Option<String> = redis::cmd("GET")
            .arg(key.as_slice())
            .query_async(&mut serving)
            .await?;
        if ours.is_none() {
            continue;
        }
        let theirs: Option<String> = redis::cmd("GET")
            .arg(key.as_slice())
            .query_async(&mut standing_by)
            .await?;
        if theirs != ours {
            count += 1;
        }
    }
    Ok(count)
}

/// The cluster's URLs the clients use: its first [`LOCAL_NODES`] (the standbys are only ever
/// reached through the switched proxies).
pub(super) fn client_urls(mut urls: Vec<String>) -> Vec<String> {
    urls.truncate(LOCAL_NODES);
    urls
}
