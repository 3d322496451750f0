//! A member's slot map: forming a member from fresh shards (`CLUSTER ADDSLOTSRANGE`, `CLUSTER
//! MEET`), reading `CLUSTER SLOTS`, and waiting, bounded, until every shard of a member is
//! `cluster_state:ok` and they all agree on one map covering every slot.

use redis::Value;
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;
use tracing::debug;

use super::ADMIN_TIMEOUT;
use crate::error::HarnessError;
use crate::probe::{ProbeBackoff, connect_plain};

/// Slots of a Redis Cluster.
pub(super) const SLOTS: u32 = 16384;

/// Which port serves which slots: ranges `(first, last, port)`, sorted, one entry per range
/// of `CLUSTER SLOTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SlotMap {
    ranges: Vec<(u16, u16, u16)>,
}

impl SlotMap {
    /// The port of the shard serving `slot`.
    pub(super) fn port_of(&self, slot: u16) -> Option<u16> {
        self.ranges
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|&(_, _, port)| port)
    }

    /// How many slots the shard on `port` serves.
    pub(super) fn slots_of(&self, port: u16) -> usize {
        self.ranges
            .iter()
            .filter(|&&(_, _, owner)| owner == port)
            .map(|&(first, last, _)| usize::from(last - first) + 1)
            .sum()
    }

    /// What is wrong with the map if it does not cover every slot exactly once.
    fn coverage_gap(&self) -> Option<String> {
        let mut next: u32 = 0;
        for &(first, last, _) in &self.ranges {
            if u32::from(first) != next {
                return Some(format!("slot {next} is not served"));
            }
            next = u32::from(last) + 1;
        }
        (next != SLOTS).then(|| format!("slots from {next} on are not served"))
    }
}

/// `CLUSTER SLOTS` of the shard behind `connection`, as a [`SlotMap`].
pub(super) async fn read_slot_map(
    member: usize,
    connection: &mut MultiplexedConnection,
) -> Result<SlotMap, HarnessError> {
    let reply: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(connection)
        .await?;
    parse_slots(&reply).ok_or_else(|| HarnessError::ClusterReply {
        member,
        reason: format!("unexpected CLUSTER SLOTS reply: {reply:?}"),
    })
}

/// `[[first, last, [ip, port, id, …], replicas…], …]`; only the master's port is kept.
fn parse_slots(reply: &Value) -> Option<SlotMap> {
    let Value::Array(entries) = reply else {
        return None;
    };
    let int = |value: &Value| match value {
        Value::Int(number) => u16::try_from(*number).ok(),
        _ => None,
    };
    let mut ranges = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(fields) = entry else {
            return None;
        };
        let (first, last) = (int(fields.first()?)?, int(fields.get(1)?)?);
        let Value::Array(master) = fields.get(2)? else {
            return None;
        };
        ranges.push((first, last, int(master.get(1)?)?));
    }
    ranges.sort_unstable();
    Some(SlotMap { ranges })
}

/// Makes one cluster of fresh shards (`(port, bus port)` each, in shard order): shard `i` gets
/// config epoch `i + 1` (distinct epochs, as `redis-cli --cluster create` gives, so no
/// collision has to be resolved) and the `i`-th even share of the slots, then shard 0 meets
/// every other. Waits until the member is ready; gives the shards' node ids, in shard order.
pub(super) async fn form_member(
    member: usize,
    shards: &[(u16, u16)],
    timeout: std::time::Duration,
) -> Result<Vec<String>, HarnessError> {
    let count = u32::try_from(shards.len()).map_err(|_| HarnessError::InvalidClusterShape {
        members: member + 1,
        shards: shards.len(),
    })?;
    let mut ids = Vec::with_capacity(shards.len());
    let mut first = None;
    for (index, &(port, _)) in (0_u32..).zip(shards) {
        let mut connection = connect_plain(port, ADMIN_TIMEOUT).await?;
        let id: String = redis::cmd("CLUSTER")
            .arg("MYID")
            .query_async(&mut connection)
            .await?;
        let () = redis::cmd("CLUSTER")
            .arg("SET-CONFIG-EPOCH")
            .arg(index + 1)
            .query_async(&mut connection)
            .await?;
        let () = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(index * SLOTS / count)
            .arg((index + 1) * SLOTS / count - 1)
            .query_async(&mut connection)
            .await?;
        ids.push(id);
        if first.is_none() {
            first = Some(connection);
        }
    }
    if let Some(mut connection) = first {
        for &(port, bus_port) in shards.iter().skip(1) {
            let () = redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(port)
                .arg(bus_port)
                .query_async(&mut connection)
                .await?;
        }
    }
    let ports: Vec<u16> = shards.iter().map(|&(port, _)| port).collect();
    wait_until_agreed(member, &ports, timeout, |map| {
        // Every shard serves its share: the map names them all.
        match ports.iter().find(|&&port| map.slots_of(port) == 0) {
            Some(port) => Err(format!("port {port} serves no slot yet")),
            None => Ok(()),
        }
    })
    .await?;
    debug!(member, ?ports, "redis cluster member formed");
    Ok(ids)
}

/// Waits (at most `timeout`, in a bounded number of probes) until every shard on `ports` says
/// `cluster_state:ok` and knows exactly `ports.len()` nodes, all of them give the same
/// `CLUSTER SLOTS`, that map covers every slot, and `expect` accepts it. Gives the map.
pub(super) async fn wait_until_agreed(
    member: usize,
    ports: &[u16],
    timeout: std::time::Duration,
    expect: impl Fn(&SlotMap) -> Result<(), String>,
) -> Result<SlotMap, HarnessError> {
    let started = Instant::now();
    let mut backoff = ProbeBackoff::until(started + timeout);
    loop {
        let last = match check_member(member, ports).await {
            Ok(map) => match expect(&map) {
                Ok(()) => return Ok(map),
                Err(wrong) => wrong,
            },
            Err(wrong) => wrong,
        };
        if !backoff.wait().await {
            return Err(HarnessError::ClusterNotReady {
                member,
                waited: started.elapsed(),
                last,
            });
        }
    }
}

/// One round of [`wait_until_agreed`]'s checks; the error says what is not right yet.
async fn check_member(member: usize, ports: &[u16]) -> Result<SlotMap, String> {
    let mut agreed: Option<SlotMap> = None;
    for &port in ports {
        let wrong = |what: &dyn std::fmt::Display| format!("port {port}: {what}");
        let mut connection = connect_plain(port, ADMIN_TIMEOUT)
            .await
            .map_err(|err| wrong(&err))?;
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut connection)
            .await
            .map_err(|err| wrong(&err))?;
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
                .unwrap_or("")
                .to_owned()
        };
        if field("cluster_state") != "ok" {
            return Err(wrong(&format!("cluster_state:{}", field("cluster_state"))));
        }
        if field("cluster_known_nodes") != ports.len().to_string() {
            return Err(wrong(&format!(
                "knows {} nodes, not {}",
                field("cluster_known_nodes"),
                ports.len()
            )));
        }
        let map = read_slot_map(member, &mut connection)
            .await
            .map_err(|err| wrong(&err))?;
        if let Some(gap) = map.coverage_gap() {
            return Err(wrong(&gap));
        }
        match &agreed {
            Some(first) if *first != map => {
                return Err(wrong(&format!(
                    "slot map {:?} differs from port {}'s {:?}",
                    map.ranges, ports[0], first.ranges
                )));
            }
            Some(_) => {}
            None => agreed = Some(map),
        }
    }
    agreed.ok_or_else(|| "no shard to ask".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(b"127.0.0.1".to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    #[test]
    fn a_slots_reply_becomes_sorted_ranges_that_cover_every_slot() {
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(8192), Value::Int(16383), node(7002)]),
            Value::Array(vec![Value::Int(0), Value::Int(8191), node(7001)]),
        ]);
        let map = parse_slots(&reply).unwrap();
        assert_eq!(map.coverage_gap(), None);
        assert_eq!(map.port_of(0), Some(7001));
        assert_eq!(map.port_of(16383), Some(7002));
        assert_eq!(map.slots_of(7002), 8192);
    }

    #[test]
    fn a_missing_slot_is_a_gap() {
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Int(1),
            Value::Int(16383),
            node(7001),
        ])]);
        let map = parse_slots(&reply).unwrap();
        assert_eq!(map.coverage_gap().as_deref(), Some("slot 0 is not served"));
    }
}
