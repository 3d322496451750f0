//! Moving slots between the shards of a member: [`Migration`], one slot moved by hand
//! (`CLUSTER SETSLOT … IMPORTING / MIGRATING / NODE`, `MIGRATE … KEYS`) so a test can act
//! while it is mid-way, and `redis-cli --cluster reshard` for many slots at once.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tracing::info;

use super::slots::wait_until_agreed;
use super::{ADMIN_TIMEOUT, CLUSTER_READY_TIMEOUT};
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
    /// and `MIGRATE … KEYS` in batches of 100, at most 10 000 batches. Gives how many keys
    /// moved.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Redis`] if a shard refuses; [`HarnessError::ClusterReply`] if keys are
    /// still left after the last batch.
    pub async fn move_keys(&self) -> Result<usize, HarnessError> {
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
            let () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.target.port)
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT_MS)
                .arg("KEYS")
                .arg(&keys)
                .query_async(&mut from)
                .await
                .or_else(|err| match err.code() {
                    // Every key expired or was deleted in between: nothing to move.
                    Some("NOKEY") => Ok(()),
                    _ => Err(err),
                })?;
            moved += keys.len();
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
