//! [`RedisClusters`]: several independent local Redis Clusters, each one quorum member of a lock
//! and each made of several shards (masters without replicas), and the shard-level faults and
//! slot moves a test of a lock over Redis Cluster members needs. Each shard is a process node of
//! the process backend (`process.rs`, started in `redis_clusters/shard.rs`); forming a member
//! and reading its slot map is in `redis_clusters/slots.rs`, moving slots in
//! `redis_clusters/migration.rs`, the options in `redis_clusters/options.rs`.

mod migration;
mod options;
mod shard;
mod slots;

use std::path::PathBuf;
use std::sync::PoisonError;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tracing::info;

pub use self::migration::Migration;
pub use self::options::RedisClustersOptions;
use self::shard::{Shard, start_shard};
use self::slots::{SlotMap, form_member, wait_until_agreed};
use crate::error::HarnessError;
use crate::port::redis_url;
use crate::probe::connect_plain;

/// Connect and response timeout of the harness's own commands to a shard, and of
/// [`RedisClusters::shard_connection`].
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a member may take to agree on its slot map (after a start, restart or slot move).
const CLUSTER_READY_TIMEOUT: Duration = Duration::from_secs(20);
/// `--cluster-node-timeout`: how long a shard may be unreachable before the others count it
/// as failing.
const NODE_TIMEOUT_MS: u32 = 2000;
/// Keys asked for per `SCAN` call by [`RedisClusters::keys`], and the bound on calls per shard.
const SCAN_COUNT: usize = 1000;
const MAX_SCANS: usize = 100_000;
/// Time bound of the bulk operations: [`RedisClusters::keys`], [`Migration::move_keys`].
const BULK_TIMEOUT: Duration = Duration::from_secs(60);

/// Several independent local Redis Clusters on 127.0.0.1, for tests: each is one quorum
/// member of a lock, made of [`shards`](Self::shards) masters without replicas that split the
/// 16384 slots between them.
///
/// Members never meet each other: each is a cluster of its own. Members and shards are
/// addressed by 0-based index; an index out of range gives [`HarnessError::NoSuchShard`]. In
/// errors about one process (`node` fields), shard `s` of member `m` is node
/// `m * shards + s`.
///
/// Every shard runs `redis-server --cluster-enabled yes` with AOF (`appendfsync always`) in its
/// own temporary directory, where its `nodes.conf` is kept too, so a killed and restarted shard
/// comes back with its keys and its place in the cluster. Dropping the value SIGKILLs and reaps
/// every process it started and deletes the directories, also while a failing test unwinds.
///
/// Must be started and used on a Tokio runtime with I/O and time enabled.
///
/// ```no_run
/// # async fn demo() -> Result<(), quorumlock_harness::HarnessError> {
/// use quorumlock_harness::{RedisClusters, RedisClustersOptions};
///
/// // Three members of three shards each.
/// let mut clusters = RedisClusters::start(RedisClustersOptions::default()).await?;
/// let seeds: Vec<Vec<String>> = (0..clusters.members())
///     .map(|member| clusters.seed_urls(member))
///     .collect();
/// // ... hand `seeds` to the lock under test: one cluster client per member ...
///
/// // Member 0 loses the shard that serves the lock's key, then gets it back with its keys.
/// let slot = clusters.key_slot(b"my-lock").await?;
/// let shard = clusters.shard_of_slot(0, slot).await?;
/// clusters.kill_shard(0, shard).await?;
/// clusters.restart_shard(0, shard).await?;
///
/// // The key's slot moves to another shard of member 1, mid-way first.
/// let to = (clusters.shard_of_slot(1, slot).await? + 1) % clusters.shards();
/// let migration = clusters.begin_migration(1, slot, to).await?;
/// migration.move_keys().await?; // the source now answers ASK for the key
/// migration.finish().await?; // the target serves the slot
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RedisClusters {
    members: Vec<Member>,
    shards: usize,
    redis_cli: PathBuf,
}

/// One member: its shards, in shard order.
#[derive(Debug)]
struct Member {
    shards: Vec<Shard>,
}

impl RedisClusters {
    /// Starts every shard of every member (all at once), forms each member into a cluster of
    /// its own (slots assigned with `CLUSTER ADDSLOTSRANGE`, shards joined with `CLUSTER
    /// MEET`), and returns once every shard of every member says `cluster_state:ok` and all
    /// shards of a member agree on a slot map covering all 16384 slots.
    ///
    /// # Errors
    ///
    /// [`HarnessError::InvalidClusterShape`] for no member or no shard; as
    /// [`TestCluster::start`](crate::TestCluster::start) for starting the processes;
    /// [`HarnessError::ClusterNotReady`] if a member does not agree on its slots within 20 s;
    /// [`HarnessError::Redis`] if a shard refuses a command. Whatever was started is killed
    /// before returning.
    pub async fn start(options: RedisClustersOptions) -> Result<RedisClusters, HarnessError> {
        tokio::runtime::Handle::try_current().map_err(|_| HarnessError::NoRuntime)?;
        if options.members == 0 || options.shards == 0 {
            return Err(HarnessError::InvalidClusterShape {
                members: options.members,
                shards: options.shards,
            });
        }
        let started = tokio::time::Instant::now();
        let shards = options.shards;
        let starts = (0..options.members * shards).map(|node| start_shard(&options.node, node));
        // On failure the shards that did start are dropped, which kills them.
        let mut all = futures::future::try_join_all(starts).await?.into_iter();
        let mut members: Vec<Member> = (0..options.members)
            .map(|_| Member {
                shards: all.by_ref().take(shards).collect(),
            })
            .collect();
        let forming = members
            .iter()
            .enumerate()
            .map(|(index, member)| async move {
                let ports: Vec<(u16, u16)> = member
                    .shards
                    .iter()
                    .map(|shard| (shard.port, shard.bus_port))
                    .collect();
                form_member(index, &ports, CLUSTER_READY_TIMEOUT).await
            });
        let ids = futures::future::try_join_all(forming).await?;
        for (member, ids) in members.iter_mut().zip(ids) {
            for (shard, id) in member.shards.iter_mut().zip(ids) {
                shard.id = id;
            }
        }
        info!(
            members = members.len(),
            shards,
            ports = ?members
                .iter()
                .map(|member| member.shards.iter().map(|shard| shard.port).collect::<Vec<_>>())
                .collect::<Vec<_>>(),
            elapsed = ?started.elapsed(),
            "redis clusters started"
        );
        Ok(RedisClusters {
            members,
            shards,
            redis_cli: options.redis_cli,
        })
    }

    /// Number of members (independent Redis Clusters).
    #[must_use]
    pub fn members(&self) -> usize {
        self.members.len()
    }

    /// Number of shards per member.
    #[must_use]
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// `redis://127.0.0.1:<port>` of every shard of `member`, in shard order: the seed nodes a
    /// cluster client of that member starts from. Empty if `member` is out of range.
    #[must_use]
    pub fn seed_urls(&self, member: usize) -> Vec<String> {
        self.members.get(member).map_or_else(Vec::new, |member| {
            member
                .shards
                .iter()
                .map(|shard| redis_url(shard.port))
                .collect()
        })
    }

    /// `redis://127.0.0.1:<port>` of one shard.
    pub fn shard_url(&self, member: usize, shard: usize) -> Result<String, HarnessError> {
        Ok(redis_url(self.shard(member, shard)?.port))
    }

    /// The process id of one shard's `redis-server`, or `None` if it is not running (killed, or
    /// exited by itself).
    pub fn shard_pid(&self, member: usize, shard: usize) -> Result<Option<u32>, HarnessError> {
        self.shard(member, shard)?
            .server
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pid()
    }

    /// A plain connection to one shard (not a cluster client: it follows no redirection), to
    /// look at that shard alone. Connecting and every reply are bounded by 5 s.
    pub async fn shard_connection(
        &self,
        member: usize,
        shard: usize,
    ) -> Result<MultiplexedConnection, HarnessError> {
        let port = self.shard(member, shard)?.port;
        Ok(connect_plain(port, ADMIN_TIMEOUT).await?)
    }

    /// The slot of `key` (`CLUSTER KEYSLOT` on any running shard).
    ///
    /// # Errors
    ///
    /// [`HarnessError::ClusterReply`] if no shard runs.
    pub async fn key_slot(&self, key: &[u8]) -> Result<u16, HarnessError> {
        let (member, port) = self
            .members
            .iter()
            .enumerate()
            .find_map(|(index, member)| {
                let shard = member.shards.iter().find(|shard| {
                    // One that cannot be asked counts as not running.
                    shard.is_running().unwrap_or(false)
                })?;
                Some((index, shard.port))
            })
            .ok_or_else(|| HarnessError::ClusterReply {
                member: 0,
                reason: "no shard of any member is running".to_owned(),
            })?;
        let mut connection = connect_plain(port, ADMIN_TIMEOUT).await?;
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut connection)
            .await?;
        u16::try_from(slot).map_err(|_| HarnessError::ClusterReply {
            member,
            reason: format!("CLUSTER KEYSLOT answered {slot}"),
        })
    }

    /// Which shard of `member` serves `slot` now, from a running shard's `CLUSTER SLOTS`.
    ///
    /// # Errors
    ///
    /// [`HarnessError::ClusterReply`] if no shard of the member runs or none serves the slot.
    pub async fn shard_of_slot(&self, member: usize, slot: u16) -> Result<usize, HarnessError> {
        let map = self.slot_map(member).await?;
        self.shard_serving(member, &map, slot)
    }

    /// SIGKILLs one shard and reaps it; nothing if it is not running. Its slots then fail
    /// (connections to it are refused, and once the other shards count it as failed, after
    /// about 2 s, the whole member answers `CLUSTERDOWN`), while other members go on.
    pub async fn kill_shard(&mut self, member: usize, shard: usize) -> Result<(), HarnessError> {
        let node = self.node_index(member, shard);
        let shard = self.shard_mut(member, shard)?;
        shard
            .server
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .kill(node)
            .await
    }

    /// Starts a killed shard again on its own port, in its own directory: its `nodes.conf`
    /// gives it back its node id and slots, its append-only file its keys. Returns once it
    /// serves its slots again: every shard of the member says `cluster_state:ok` and they agree
    /// on the slot map. (Once the other shards have counted it as failed, they keep it so for
    /// twice the node timeout, 4 s, so a restart after that takes about 4 s; sooner, about 2 s,
    /// the time a master waits before it takes writes after a start.)
    ///
    /// # Errors
    ///
    /// [`HarnessError::AlreadyRunning`] if it runs; as for starting a node; and
    /// [`HarnessError::ClusterNotReady`] if the member does not recover within 20 s.
    pub async fn restart_shard(&mut self, member: usize, shard: usize) -> Result<(), HarnessError> {
        let node = self.node_index(member, shard);
        let entry = self.shard_mut(member, shard)?;
        let port = entry.port;
        entry
            .server
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .start_again(&entry.options, node, port)
            .await?;
        let ports = self.member_ports(member)?;
        wait_until_agreed(member, &ports, CLUSTER_READY_TIMEOUT, |_| Ok(())).await?;
        Ok(())
    }

    /// Every key on every running shard of `member` (`SCAN`, at most 100 000 calls per shard
    /// and 60 s in all; a key may show twice if it moves while this runs).
    ///
    /// # Errors
    ///
    /// [`HarnessError::ClusterReply`] if the scan is not done within those bounds;
    /// [`HarnessError::Redis`] if a running shard cannot be asked.
    pub async fn keys(&self, member: usize) -> Result<Vec<Vec<u8>>, HarnessError> {
        tokio::time::timeout(BULK_TIMEOUT, self.scan_keys(member))
            .await
            .map_err(|_| HarnessError::ClusterReply {
                member,
                reason: format!("SCAN of its shards not done after {BULK_TIMEOUT:?}"),
            })?
    }

    async fn scan_keys(&self, member: usize) -> Result<Vec<Vec<u8>>, HarnessError> {
        let mut keys = Vec::new();
        for shard in &self.member(member)?.shards {
            if !shard.is_running()? {
                continue;
            }
            let mut connection = connect_plain(shard.port, ADMIN_TIMEOUT).await?;
            let mut cursor: u64 = 0;
            let mut scans = 0;
            loop {
                let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .query_async(&mut connection)
                    .await?;
                keys.extend(batch);
                cursor = next;
                scans += 1;
                if cursor == 0 {
                    break;
                }
                if scans >= MAX_SCANS {
                    return Err(HarnessError::ClusterReply {
                        member,
                        reason: format!("SCAN of port {} not done after {scans} calls", shard.port),
                    });
                }
            }
        }
        Ok(keys)
    }

    /// The slot map as a running shard of `member` sees it.
    async fn slot_map(&self, member: usize) -> Result<SlotMap, HarnessError> {
        for shard in &self.member(member)?.shards {
            if shard.is_running()? {
                let mut connection = connect_plain(shard.port, ADMIN_TIMEOUT).await?;
                return slots::read_slot_map(member, &mut connection).await;
            }
        }
        Err(HarnessError::ClusterReply {
            member,
            reason: "no shard is running".to_owned(),
        })
    }

    /// The index of the shard of `member` that `map` says serves `slot`.
    fn shard_serving(
        &self,
        member: usize,
        map: &SlotMap,
        slot: u16,
    ) -> Result<usize, HarnessError> {
        let unserved = || HarnessError::ClusterReply {
            member,
            reason: format!("no shard serves slot {slot}"),
        };
        let port = map.port_of(slot).ok_or_else(unserved)?;
        self.member(member)?
            .shards
            .iter()
            .position(|shard| shard.port == port)
            .ok_or_else(unserved)
    }

    fn member_ports(&self, member: usize) -> Result<Vec<u16>, HarnessError> {
        Ok(self
            .member(member)?
            .shards
            .iter()
            .map(|shard| shard.port)
            .collect())
    }

    fn node_index(&self, member: usize, shard: usize) -> usize {
        member * self.shards + shard
    }

    fn member(&self, member: usize) -> Result<&Member, HarnessError> {
        self.members
            .get(member)
            .ok_or(HarnessError::NoSuchShard { member, shard: 0 })
    }

    fn shard(&self, member: usize, shard: usize) -> Result<&Shard, HarnessError> {
        self.member(member)?
            .shards
            .get(shard)
            .ok_or(HarnessError::NoSuchShard { member, shard })
    }

    fn shard_mut(&mut self, member: usize, shard: usize) -> Result<&mut Shard, HarnessError> {
        self.members
            .get_mut(member)
            .and_then(|entry| entry.shards.get_mut(shard))
            .ok_or(HarnessError::NoSuchShard { member, shard })
    }
}
