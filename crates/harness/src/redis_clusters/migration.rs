//! Moving slots between the shards of a member: [`Migration`], one slot moved by hand
//! (`CLUSTER SETSLOT … IMPORTING / MIGRATING / NODE`, `MIGRATE … KEYS`) so a test can act
//! while it is mid-way ([`RedisClusters::begin_migration`]), and `redis-cli --cluster reshard`
//! for many slots at once ([`RedisClusters::reshard`]).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tracing::info;

use super::slots::wait_until_agreed;
use super::{ADMIN_TIMEOUT, BULK_TIMEOUT, CLUSTER_READY_TIMEOUT, RedisClusters, Shard};
use crate::error::HarnessError;
use crate::probe::connect_plain;

/// Keys asked for per `CLUSTER GETKEYSINSLOT`, and so moved per `MIGRATE`.
const MIGRATE_BATCH: usize = 100;
/// Bound on `MIGRATE` calls per [`Migration::move_keys`].
const MAX_MIGRATE_BATCHES: usize = 10_000;
/// `MIGRATE`'s own timeout for reaching the target, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 2000;
/// How long `redis-cli --cluster reshard` may run.
const RESHARD_TIMEOUT: Duration = Duration::from_secs(60);

impl RedisClusters {
    /// Starts moving `slot` of `member` to shard `to_shard`: `CLUSTER SETSLOT <slot> IMPORTING`
    /// on the target, then `MIGRATING` on the shard serving it (in that order, as Redis
    /// requires). The slot's keys stay where they are until [`Migration::move_keys`] or
    /// [`Migration::finish`]; meanwhile the source answers `ASK` for keys it no longer has.
    ///
    /// # Errors
    ///
    /// [`HarnessError::ClusterReply`] if the target already serves the slot;
    /// [`HarnessError::Redis`] if a shard refuses.
    pub async fn begin_migration(
        &self,
        member: usize,
        slot: u16,
        to_shard: usize,
    ) -> Result<Migration, HarnessError> {
        let target = self.shard(member, to_shard)?.shard_ref();
        let from_shard = self.shard_of_slot(member, slot).await?;
        if from_shard == to_shard {
            return Err(HarnessError::ClusterReply {
                member,
                reason: format!("slot {slot} is already served by shard {to_shard}"),
            });
        }
        let source = self.shard(member, from_shard)?.shard_ref();
        let all = self
            .member(member)?
            .shards
            .iter()
            .map(Shard::shard_ref)
            .collect();
        Migration::begin(member, slot, source, target, all).await
    }

    /// Moves `slots` slots of `member` from one shard to another with `redis-cli --cluster
    /// reshard` (keys and all), and returns once every shard agrees on the new map.
    ///
    /// # Errors
    ///
    /// [`HarnessError::RedisCli`] if `redis-cli` fails or runs for more than 60 s;
    /// [`HarnessError::ClusterNotReady`] if the shards do not agree within 20 s.
    pub async fn reshard(
        &self,
        member: usize,
        from_shard: usize,
        to_shard: usize,
        slots: usize,
    ) -> Result<(), HarnessError> {
        let from = self.shard(member, from_shard)?.shard_ref();
        let to = self.shard(member, to_shard)?.shard_ref();
        let ports = self.member_ports(member)?;
        // redis-cli refuses to reshard a cluster whose nodes disagree.
        let before = wait_until_agreed(member, &ports, CLUSTER_READY_TIMEOUT, |_| Ok(())).await?;
        let expected = before.slots_of(to.port) + slots;
        run_reshard(&self.redis_cli, &from, &to, slots).await?;
        wait_until_agreed(member, &ports, CLUSTER_READY_TIMEOUT, |map| {
            let has = map.slots_of(to.port);
            if has == expected {
                Ok(())
            } else {
                Err(format!(
                    "shard {to_shard} serves {has} slots, not {expected}"
                ))
            }
        })
        .await?;
        info!(member, from_shard, to_shard, slots, "resharded");
        Ok(())
    }
}

/// A shard as a migration addresses it: its port and cluster node id.
#[derive(Debug, Clone)]
pub(super) struct ShardRef {
    pub(super) port: u16,
    pub(super) id: String,
}

/// A slot mid-migration (source `MIGRATING`, target `IMPORTING`), for tests that act while it
/// is; from [`RedisClusters::begin_migration`](crate::RedisClusters::begin_migration).
///
/// While it lasts, the source serves the slot's keys it still has and answers `ASK` for the
/// others; the target serves them only after `ASKING`. [`move_keys`](Self::move_keys) moves
/// the keys, [`finish`](Self::finish) hands the slot to the target. Dropping it unfinished
/// leaves the slot open (as a crashed resharding would).
#[derive(Debug)]
pub struct Migration {
    member: usize,
    slot: u16,
    source: ShardRef,
    target: ShardRef,
    /// Every shard of the member, the source and target among them, in shard order.
    shards: Vec<ShardRef>,
}

impl Migration {
    /// `CLUSTER SETSLOT <slot> IMPORTING <source>` on the target, then `MIGRATING <target>` on
    /// the source.
    pub(super) async fn begin(
        member: usize,
        slot: u16,
        source: ShardRef,
        target: ShardRef,
        shards: Vec<ShardRef>,
    ) -> Result<Migration, HarnessError> {
        let mut to = connect_plain(target.port, ADMIN_TIMEOUT).await?;
        let () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("IMPORTING")
            .arg(&source.id)
            .query_async(&mut to)
            .await?;
        let mut from = connect_plain(source.port, ADMIN_TIMEOUT).await?;
        let () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("MIGRATING")
            .arg(&target.id)
            .query_async(&mut from)
            .await?;
        info!(
            member,
            slot,
            from = source.port,
            to = target.port,
            "slot migration begun"
        );
        Ok(Migration {
            member,
            slot,
            source,
            target,
            shards,
        })
    }

    /// The slot being moved.
    #[must_use]
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// Moves every key of the slot still on the source to the target: `CLUSTER GETKEYSINSLOT`
    /// and `MIGRATE … KEYS` in batches of 100, at most 10 000 batches and 60 s in all. Gives
    /// how many keys moved.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Redis`] if a shard refuses; [`HarnessError::ClusterReply`] if keys are
    /// still left after the last batch or the time is up.
    pub async fn move_keys(&self) -> Result<usize, HarnessError> {
        tokio::time::timeout(BULK_TIMEOUT, self.migrate_batches())
            .await
            .map_err(|_| HarnessError::ClusterReply {
                member: self.member,
                reason: format!("slot {}: keys not moved after {BULK_TIMEOUT:?}", self.slot),
            })?
    }

    async fn migrate_batches(&self) -> Result<usize, HarnessError> {
        let mut from = connect_plain(self.source.port, ADMIN_TIMEOUT).await?;
        let mut moved = 0;
        for _ in 0..MAX_MIGRATE_BATCHES {
            let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(self.slot)
                .arg(MIGRATE_BATCH)
                .query_async(&mut from)
                .await?;
            if keys.is_empty() {
                return Ok(moved);
            }
            // `OK`, or `NOKEY` (a status, not an error) when every key expired or was deleted
            // in between: nothing moved.
            let reply: String = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.target.port)
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT_MS)
                .arg("KEYS")
                .arg(&keys)
                .query_async(&mut from)
                .await?;
            if reply != "NOKEY" {
                moved += keys.len();
            }
        }
        Err(HarnessError::ClusterReply {
            member: self.member,
            reason: format!(
                "slot {} still has keys after {MAX_MIGRATE_BATCHES} MIGRATE batches",
                self.slot
            ),
        })
    }

    /// Moves the keys left ([`move_keys`](Self::move_keys)), then `CLUSTER SETSLOT <slot> NODE
    /// <target>` on the target, the source and every other shard, and returns once every shard
    /// agrees that the target serves the slot.
    ///
    /// # Errors
    ///
    /// As [`move_keys`](Self::move_keys); [`HarnessError::ClusterNotReady`] if the shards do
    /// not agree within 20 s.
    pub async fn finish(self) -> Result<(), HarnessError> {
        self.move_keys().await?;
        let others = self
            .shards
            .iter()
            .filter(|shard| shard.port != self.source.port && shard.port != self.target.port);
        for shard in [&self.target, &self.source].into_iter().chain(others) {
            let mut connection = connect_plain(shard.port, ADMIN_TIMEOUT).await?;
            let () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(self.slot)
                .arg("NODE")
                .arg(&self.target.id)
                .query_async(&mut connection)
                .await?;
        }
        let ports: Vec<u16> = self.shards.iter().map(|shard| shard.port).collect();
        wait_until_agreed(self.member, &ports, CLUSTER_READY_TIMEOUT, |map| match map
            .port_of(self.slot)
        {
            Some(port) if port == self.target.port => Ok(()),
            other => Err(format!(
                "slot {} served by port {other:?}, not {}",
                self.slot, self.target.port
            )),
        })
        .await?;
        info!(
            member = self.member,
            slot = self.slot,
            to = self.target.port,
            "slot migration finished"
        );
        Ok(())
    }
}

/// `redis-cli --cluster reshard 127.0.0.1:<from port> --cluster-from <from> --cluster-to <to>
/// --cluster-slots <slots> --cluster-yes`, bounded by [`RESHARD_TIMEOUT`].
pub(super) async fn run_reshard(
    redis_cli: &Path,
    from: &ShardRef,
    to: &ShardRef,
    slots: usize,
) -> Result<(), HarnessError> {
    let args = [
        "--cluster".to_owned(),
        "reshard".to_owned(),
        format!("127.0.0.1:{}", from.port),
        "--cluster-from".to_owned(),
        from.id.clone(),
        "--cluster-to".to_owned(),
        to.id.clone(),
        "--cluster-slots".to_owned(),
        slots.to_string(),
        "--cluster-yes".to_owned(),
    ];
    let failed = |reason: String| HarnessError::RedisCli {
        args: args.join(" "),
        reason,
    };
    let child = tokio::process::Command::new(redis_cli)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| failed(format!("could not run {}: {err}", redis_cli.display())))?;
    let output = tokio::time::timeout(RESHARD_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| failed(format!("still running after {RESHARD_TIMEOUT:?}")))??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // redis-cli exits 0 on some errors it only prints, such as a node refusing a command.
    if !output.status.success() || stdout.contains("[ERR]") {
        return Err(failed(format!(
            "{}; output:\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(())
}
