//! [`Cluster`]: a Redis Cluster as one node of the lock: its shards (a [`Server`] each, with its
//! own connection, restart guard and `run_id` claim), and the slot map that says which shard
//! serves a key. The map is read with `CLUSTER SLOTS` from a seed or a known shard: first when a
//! request needs it, again (one read at a time, in the background) after a redirection or a
//! shard's failure; a `MOVED` moves its slot at once.
//!
//! Why not redis-rs's cluster connection: it retries and re-routes requests on its own, over
//! connections the lock cannot see, so the lock could no longer tell which server ran a request
//! (one server, one vote; the restart guard) or over which connection (the ordering rule).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use redis::{ConnectionAddr, ConnectionInfo, Value};

use super::connection::{Lane, Server};
use crate::error::ConfigError;
use crate::outcome::NodeError;
use crate::rules::identity::{Claims, Endpoint};
use crate::rules::slots::{SlotMap, key_slot};
use crate::settings::Settings;

/// A read of the slot map in flight, awaited by every request that needs it meanwhile.
type Reading = Shared<BoxFuture<'static, Result<(), NodeError>>>;

/// A Redis Cluster node of the lock.
pub(crate) struct Cluster {
    index: usize,
    /// The first seed's details, with each shard's address put in: how every shard is reached.
    template: ConnectionInfo,
    settings: Settings,
    claims: Arc<Claims>,
    /// The seeds' endpoints, for the configuration's duplicate check.
    endpoints: Vec<Endpoint>,
    /// The first seed, whose server hears the lock's wake-ups.
    seed: Arc<Server>,
    state: Mutex<State>,
    /// The shards' connection generations, numbered together: a generation names one
    /// connection of the node, whichever shard it is to (the ordering rule compares them).
    generations: Arc<AtomicU64>,
}

/// The shards known (seeds first), the slot map, and the read of it in flight.
struct State {
    shards: Vec<Arc<Server>>,
    slots: SlotMap,
    reading: Option<Reading>,
}

impl Cluster {
    /// Cluster node `index`, reached through `seeds` (at least one). Nothing is sent until the
    /// first request.
    pub(crate) fn new(
        index: usize,
        seeds: Vec<ConnectionInfo>,
        settings: &Settings,
        claims: &Arc<Claims>,
    ) -> Result<Cluster, ConfigError> {
        let template = seeds.first().cloned().ok_or(ConfigError::InvalidNode {
            index,
            reason: "a cluster node needs at least one seed".to_owned(),
        })?;
        let generations = Arc::default();
        let shards = seeds
            .into_iter()
            .enumerate()
            .map(|(shard, info)| {
                Server::new(index, shard, info, settings, claims, &generations).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let endpoints = shards.iter().map(|shard| shard.endpoint()).collect();
        let seed = shards.first().cloned().ok_or(ConfigError::InvalidNode {
            index,
            reason: "a cluster node needs at least one seed".to_owned(),
        })?;
        Ok(Cluster {
            index,
            template,
            settings: settings.clone(),
            claims: Arc::clone(claims),
            endpoints,
            seed,
            state: Mutex::new(State {
                shards,
                slots: SlotMap::default(),
                reading: None,
            }),
            generations,
        })
    }

    /// The seeds' endpoints.
    pub(crate) fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The first seed, whose server hears the lock's wake-ups (a cluster's `PUBLISH` reaches
    /// every shard).
    pub(crate) fn first_seed(&self) -> &Server {
        &self.seed
    }

    /// Starts `lane`'s connection to the shard serving `key`'s slot, if the map names one
    /// (nothing is read for it).
    pub(crate) fn warm(&self, lane: Lane, key: &[u8]) {
        if let Some(server) = self.lock().owner(key_slot(key)) {
            server.warm(lane);
        }
    }

    /// The shard serving `key`'s slot, reading the map first if it was never read or the slot
    /// is not in it (within the connect timeout).
    pub(crate) async fn server_for(self: &Arc<Self>, key: &[u8]) -> Result<Arc<Server>, NodeError> {
        let slot = key_slot(key);
        let mut read = false;
        loop {
            let reading = {
                let mut state = self.lock();
                if let Some(server) = state.owner(slot) {
                    return Ok(server);
                }
                if read {
                    return Err(NodeError::Server {
                        code: "CLUSTERDOWN".to_owned(),
                        message: format!("no shard serves hash slot {slot}"),
                    });
                }
                self.read_map(&mut state)
            };
            read = true;
            tokio::time::timeout(self.settings.connect_timeout, reading)
                .await
                .map_err(|_elapsed| NodeError::Timeout(self.settings.connect_timeout))??;
        }
    }

    /// A redirection said `slot` is served at `addr` now: the map says so too, and is read
    /// again in the background to learn the rest of the move. The shard at `addr`.
    pub(crate) fn moved(self: &Arc<Self>, slot: u16, addr: &str) -> Result<Arc<Server>, NodeError> {
        let mut state = self.lock();
        let (shard, server) = self.shard_at(&mut state, addr)?;
        state.slots.set(slot, shard);
        drop(self.read_map(&mut state));
        Ok(server)
    }

    /// The shard at `addr` (an `ASK` redirection's), known or new.
    pub(crate) fn server_at(&self, addr: &str) -> Result<Arc<Server>, NodeError> {
        let mut state = self.lock();
        self.shard_at(&mut state, addr).map(|(_, server)| server)
    }

    /// After a request failed in a way a changed map explains (a shard gone, `CLUSTERDOWN`,
    /// `TRYAGAIN`): the map is read again in the background.
    pub(crate) fn failed(self: &Arc<Self>, error: &NodeError) {
        let stale = error.breaks_connection()
            || matches!(error, NodeError::Timeout(_) | NodeError::ConnectionRefused)
            || matches!(error, NodeError::Server { code, .. }
                if matches!(code.as_str(), "CLUSTERDOWN" | "TRYAGAIN" | "MOVED" | "ASK"));
        if stale {
            let mut state = self.lock();
            drop(self.read_map(&mut state));
        }
    }

    /// The read of the map in flight, or a new one, started as a task of its own so it ends
    /// even when every request waiting for it has given up.
    fn read_map(self: &Arc<Self>, state: &mut State) -> Reading {
        if let Some(reading) = &state.reading {
            return reading.clone();
        }
        let cluster = Arc::clone(self);
        let task = tokio::spawn(async move {
            let result = cluster.read_slots().await;
            let mut state = cluster.lock();
            state.reading = None;
            match result {
                Ok(slots) => {
                    state.slots = slots;
                    Ok(())
                }
                Err(error) => {
                    tracing::debug!(node = cluster.index, %error, "reading the slot map failed");
                    Err(error)
                }
            }
        });
        let reading = async move {
            task.await
                .unwrap_or_else(|err| Err(NodeError::Connection(format!("slot map task: {err}"))))
        }
        .boxed()
        .shared();
        state.reading = Some(reading.clone());
        reading
    }

    /// `CLUSTER SLOTS` from the known shards in turn, until one answers: its masters' ranges
    /// as a map (new shards added).
    async fn read_slots(self: &Arc<Self>) -> Result<SlotMap, NodeError> {
        let shards = self.lock().shards.clone();
        let mut last = NodeError::Connection("no shard to read the slot map from".to_owned());
        for server in shards {
            let mut command = redis::cmd("CLUSTER");
            command.arg("SLOTS");
            let reply = server
                .run(|mut connection, _generation| async move {
                    connection
                        .send_packed_command(&command)
                        .await
                        .and_then(Value::extract_error)
                })
                .await;
            let host = server.addr().rsplit_once(':').map_or("", |(host, _)| host);
            let ranges = match reply.and_then(|reply| parse_slots(reply, host)) {
                Ok(ranges) => ranges,
                Err(error) => {
                    last = error;
                    continue;
                }
            };
            let mut state = self.lock();
            let mut map = Vec::with_capacity(ranges.len());
            for (first, last_slot, addr) in ranges {
                let (shard, _) = self.shard_at(&mut state, &addr)?;
                map.push((first, last_slot, shard));
            }
            return Ok(SlotMap::from_ranges(map));
        }
        Err(last)
    }

    /// The shard at `addr` (`host:port`) and its number, made (and numbered) if new.
    fn shard_at(&self, state: &mut State, addr: &str) -> Result<(u16, Arc<Server>), NodeError> {
        if let Some(found) = state
            .shards
            .iter()
            .position(|shard| &**shard.addr() == addr)
        {
            let server = state.shards.get(found).cloned();
            let number = u16::try_from(found).ok();
            if let (Some(server), Some(number)) = (server, number) {
                return Ok((number, server));
            }
        }
        let number = state.shards.len();
        let unusable = |reason: String| NodeError::Protocol(format!("shard {addr}: {reason}"));
        let shard = u16::try_from(number).map_err(|_| unusable("too many shards".to_owned()))?;
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
            .ok_or_else(|| unusable("not host:port".to_owned()))?;
        let info = with_address(&self.template, host, port)
            .ok_or_else(|| unusable("a cluster's seeds must be TCP addresses".to_owned()))?;
        let server = Server::new(
            self.index,
            number,
            info,
            &self.settings,
            &self.claims,
            &self.generations,
        )
        .map(Arc::new)
        .map_err(|error| unusable(error.to_string()))?;
        state.shards.push(Arc::clone(&server));
        Ok((shard, server))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn owner(&self, slot: u16) -> Option<Arc<Server>> {
        let shard = self.slots.owner(slot)?;
        self.shards.get(usize::from(shard)).cloned()
    }
}

/// The template's login and TLS settings at `host:port`; `None` for a Unix socket.
fn with_address(template: &ConnectionInfo, host: &str, port: u16) -> Option<ConnectionInfo> {
    let addr = match template.addr() {
        ConnectionAddr::Tcp(..) => ConnectionAddr::Tcp(host.to_owned(), port),
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => return None,
    };
    Some(template.clone().set_addr(addr))
}

/// `CLUSTER SLOTS`'s masters: `(first slot, last slot, "host:port")` per range. A master listed
/// without a host (`""`, or `?` when unknown) is at the host that answered.
fn parse_slots(reply: Value, asked: &str) -> Result<Vec<(u16, u16, String)>, NodeError> {
    let bad = |what: &str| NodeError::Protocol(format!("CLUSTER SLOTS: {what}"));
    let Value::Array(ranges) = reply else {
        return Err(bad("not an array"));
    };
    ranges
        .into_iter()
        .map(|range| {
            let Value::Array(fields) = range else {
                return Err(bad("a range is not an array"));
            };
            let mut fields = fields.into_iter();
            let mut slot = || match fields.next() {
                Some(Value::Int(slot)) => u16::try_from(slot).map_err(|_| bad("slot out of range")),
                _ => Err(bad("no slot number")),
            };
            let (first, last) = (slot()?, slot()?);
            let Some(Value::Array(master)) = fields.next() else {
                return Err(bad("a range without its master"));
            };
            let mut master = master.into_iter();
            let host = match master.next() {
                Some(Value::BulkString(host)) => String::from_utf8_lossy(&host).into_owned(),
                Some(Value::SimpleString(host)) => host,
                _ => return Err(bad("a master without a host")),
            };
            let Some(Value::Int(port)) = master.next() else {
                return Err(bad("a master without a port"));
            };
            let host = if host.is_empty() || host == "?" {
                asked.to_owned()
            } else {
                host
            };
            Ok((first, last, format!("{host}:{port}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_slots_is_read_as_master_ranges() {
        let master = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                master("127.0.0.1", 7000),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(16383), master("", 7001)]),
        ]);
        assert_eq!(
            parse_slots(reply, "10.0.0.9").unwrap(),
            [
                (0, 5460, "127.0.0.1:7000".to_owned()),
                (5461, 16383, "10.0.0.9:7001".to_owned())
            ]
        );
        assert!(parse_slots(Value::Int(1), "h").is_err());
        assert!(
            parse_slots(
                Value::Array(vec![Value::Array(vec![Value::Int(70000)])]),
                "h"
            )
            .is_err()
        );
    }
}
