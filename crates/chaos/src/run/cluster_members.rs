//! [`Scenario::ClusterMembers`]: the contending clients of every scenario (`workload.rs`), the
//! protected store (`store.rs`), the recorded history and the checker, on a lock whose three
//! nodes are local Redis Clusters of three shards each ([`RedisClusters`]) instead of the five
//! masters of a [`TestCluster`](quorumlock_harness::TestCluster); and its faults, done to those
//! clusters' shards and slots.
//!
//! Each cycle of faults: member `c mod 3` loses the shard serving the slot of one resource
//! (SIGKILL, proved gone), and while it is down member `c + 1 mod 3` migrates the slot of every
//! resource, one after the other, to its next shard: `CLUSTER SETSLOT … IMPORTING/MIGRATING`, a
//! quarter TTL with the keys still on the source, the keys moved (the source answers `ASK`), a
//! quarter TTL more, then the slot handed over (`MOVED`), proved by the new slot map. Then the
//! killed shard is restarted (its append-only file gives it back its keys; that takes 2–4 s, and
//! may end after the clients stopped) and, a TTL later, the next cycle starts if it still fits
//! before the deadline. The first cycle always runs, one TTL into the run, so that even a 2 s
//! run has a kill, a restart and the migrations; a run without any fails its self-check
//! ([`ChaosError::EffectNotShown`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::{Lock, NodeConfig};
use quorumlock_harness::{RedisClusters, RedisClustersOptions};
use tokio::task::JoinSet;

use super::checks::process_gone;
use super::faults::{Faults, MAX_CYCLES};
use super::store::Store;
use super::workload::{Client, ClientPlan};
use super::{ChaosError, RunOptions, ScenarioReport, lifecycle};
use crate::history::{Clock, Recorder};
use crate::scenario::Scenario;

/// The quorum members: independent Redis Clusters.
const MEMBERS: usize = 3;
/// Shards (masters, no replicas) per member.
const SHARDS: usize = 3;

/// What a shard restart takes at least: a master waits about 2 s after a start before it takes
/// writes (`RedisClusters::restart_shard`).
const RESTART_TIME: Duration = Duration::from_secs(2);

/// The label of a killed shard among the history's faults; the window ends when the shard is
/// back (restarted, serving its slots).
pub const SHARD_KILLED_LABEL: &str = "shard killed";
/// The label of a slot migration among the history's faults: from `SETSLOT … MIGRATING` until
/// the target serves the slot.
pub const SLOT_MIGRATED_LABEL: &str = "slot migrated";

/// What the faults did, for the notes.
#[derive(Debug, Default)]
struct Tally {
    kills: usize,
    restarts: usize,
    migrations: usize,
    keys_moved: usize,
}

/// Runs [`Scenario::ClusterMembers`] as `options` say (TTL, clients, resources, writes per hold,
/// restart guard, fencing, defect), with the protected writes going to `store`. The clusters
/// are stopped when this returns, also on error.
pub(super) async fn run(options: &RunOptions, store: &Store) -> Result<ScenarioReport, ChaosError> {
    let scenario = Scenario::ClusterMembers;
    // Dropping the clusters (on return, or while unwinding) kills every shard they started.
    let mut clusters = RedisClusters::start(
        RedisClustersOptions::default()
            .members(MEMBERS)
            .shards(SHARDS),
    )
    .await?;
    let mut notes = vec![format!(
        "{MEMBERS} Redis Clusters of {SHARDS} shards each, every shard appendonly yes, \
         appendfsync always"
    )];
    let run_id = format!("{scenario}:{:08x}", rand::random::<u32>());
    let prefix = format!("quorumlock:chaos:{run_id}:");
    let resources: Vec<String> = (0..options.resources).map(|i| format!("res-{i}")).collect();
    let restart_guard = options.restart_guard_for(scenario);
    let fencing = options.fencing_for(scenario);
    let mut lock_options = lifecycle::lock_options(options, prefix, restart_guard);
    if fencing {
        // Every shard persists every write, so every one may vote for fences.
        lock_options = lock_options
            .fencing(true)
            .fence_prefix(format!("quorumlock:chaos-fence:{run_id}:"));
        notes.push("fencing on; every shard persists every write".to_owned());
    }
    let locks = (0..options.clients)
        .map(|_| {
            let members = (0..MEMBERS).map(|m| NodeConfig::cluster(clusters.seed_urls(m)));
            Lock::new(members, lock_options.clone())
        })
        .collect::<Result<Vec<_>, _>>()?;
    if restart_guard {
        lifecycle::warm_up_all(&locks, &mut notes).await;
    }
    // The slots the resources live in: a lock key holds its resource's name as its hash tag,
    // so `{name}` hashes as the key does.
    let mut slots = BTreeSet::new();
    for resource in &resources {
        slots.insert(
            clusters
                .key_slot(format!("{{{resource}}}").as_bytes())
                .await?,
        );
    }
    let slots: Vec<u16> = slots.into_iter().collect();

    let store_clients = lifecycle::store_clients(store, locks.len()).await?;
    let recorder = Recorder::new(Clock::start());
    let deadline = Instant::now() + options.duration;
    let plan = Arc::new(ClientPlan::new(
        resources.clone(),
        options.writes_per_hold.max(1),
        options.ttl,
        deadline,
        (false, false),
        recorder.clone(),
    ));
    let mut clients = JoinSet::new();
    for (id, (lock, store)) in locks.into_iter().zip(store_clients).enumerate() {
        if let Some(client) = Client::new(id, Arc::clone(&plan), store) {
            clients.spawn(client.run(lock));
        }
    }
    let faults = Faults {
        recorder: &recorder,
        deadline,
        ttl: options.ttl,
        nemesis: None,
    };
    // On error, returning drops `clients` (aborting every task) and then the clusters.
    let tally = inject(&faults, &mut clusters, &slots).await?;
    if tally.kills == 0 {
        return Err(ChaosError::EffectNotShown {
            scenario,
            evidence: format!(
                "no shard was killed: the run ({:?}) ended before the first cycle (after one \
                 TTL)",
                options.duration
            ),
        });
    }
    notes.push(format!(
        "faults: {} shard(s) killed, {} restarted; {} slot migration(s) (slots {slots:?}), \
         {} key(s) moved",
        tally.kills, tally.restarts, tally.migrations, tally.keys_moved
    ));
    faults.sleep_until(deadline).await;

    lifecycle::wind_down(&mut clients, options, &mut notes).await;
    let (history, check) =
        lifecycle::checked(&recorder, store, &resources, deadline, &mut notes).await?;
    Ok(ScenarioReport {
        scenario,
        expected_safe: options.expected_safe(scenario),
        restart_guard,
        fencing,
        defect: options.defect,
        description: scenario.description().to_owned(),
        target: format!("{MEMBERS} local Redis Clusters × {SHARDS} shards"),
        ttl_ms: u64::try_from(options.ttl.as_millis()).unwrap_or(u64::MAX),
        clients: options.clients,
        resources: options.resources,
        notes,
        seed: None,
        nemesis: None,
        check,
        history,
    })
}

/// The fault cycles (see the module's doc) until the deadline, each recorded and proved.
async fn inject(
    faults: &Faults<'_>,
    clusters: &mut RedisClusters,
    slots: &[u16],
) -> Result<Tally, ChaosError> {
    let t = faults.ttl;
    let mut tally = Tally::default();
    let Some(&first) = slots.first() else {
        return Ok(tally);
    };
    for cycle in 0..MAX_CYCLES as usize {
        faults.sleep(t).await;
        // The first cycle always runs (if the clients still do), so that a short run has its
        // faults too; a later one only if it ends before the deadline.
        if !faults.fits(Duration::ZERO) || (cycle > 0 && !faults.fits(cycle_span(t, slots))) {
            break;
        }
        let killed = cycle % MEMBERS;
        let migrating = (cycle + 1) % MEMBERS;
        let slot = slots.get(cycle % slots.len()).copied().unwrap_or(first);
        let shard = clusters.shard_of_slot(killed, slot).await?;
        let node = killed * SHARDS + shard;
        let pid = clusters
            .shard_pid(killed, shard)?
            .ok_or_else(|| not_in_effect("kill", node, "no shard process to kill".to_owned()))?;
        let down = faults.recorder.fault(SHARD_KILLED_LABEL, &[killed]);
        clusters.kill_shard(killed, shard).await?;
        process_gone(pid, node)?;
        tally.kills += 1;
        for &slot in slots {
            tally.keys_moved += migrate(faults, clusters, migrating, slot).await?;
            tally.migrations += 1;
        }
        clusters.restart_shard(killed, shard).await?;
        faults.recorder.lift(down);
        if clusters.shard_pid(killed, shard)?.is_none() {
            return Err(not_in_effect(
                "restart",
                node,
                "no shard process after the restart".to_owned(),
            ));
        }
        tally.restarts += 1;
    }
    Ok(tally)
}

/// About how long a fault cycle takes: ½ TTL and the commands per slot migrated, and the
/// restart (2 s if the shard is back before the others count it as failed, 4 s after).
fn cycle_span(ttl: Duration, slots: &[u16]) -> Duration {
    let per_slot = ttl / 2 + Duration::from_millis(20);
    per_slot * u32::try_from(slots.len()).unwrap_or(u32::MAX) + RESTART_TIME
}

/// Moves `slot` of `member` to its next shard, mid-way for a while at each step, and proves
/// that the target serves it after. Gives how many keys moved.
async fn migrate(
    faults: &Faults<'_>,
    clusters: &RedisClusters,
    member: usize,
    slot: u16,
) -> Result<usize, ChaosError> {
    let from = clusters.shard_of_slot(member, slot).await?;
    let to = (from + 1) % SHARDS;
    let window = faults.recorder.fault(SLOT_MIGRATED_LABEL, &[member]);
    let migration = clusters.begin_migration(member, slot, to).await?;
    // Keys on the source, the slot MIGRATING: new keys go to the target after ASK.
    pause(faults.ttl / 4).await;
    let moved = migration.move_keys().await?;
    // Every key on the target: the source answers ASK for all of them.
    pause(faults.ttl / 4).await;
    migration.finish().await?;
    faults.recorder.lift(window);
    let serving = clusters.shard_of_slot(member, slot).await?;
    if serving != to {
        return Err(not_in_effect(
            "slot migration",
            member * SHARDS + from,
            format!("slot {slot} is served by shard {serving}, not {to}"),
        ));
    }
    Ok(moved)
}

/// Sleeps for `duration`, past the deadline too: a migration begun is always finished with
/// its pauses (they are short), so that its steps are each in effect for a while.
async fn pause(duration: Duration) {
    tokio::time::sleep(duration).await;
}

/// A fault on shard process `node` (shard `s` of member `m` is `m × 3 + s`) that did not
/// take effect.
fn not_in_effect(fault: &str, node: usize, evidence: String) -> ChaosError {
    ChaosError::FaultNotInEffect {
        fault: fault.to_owned(),
        node,
        evidence,
    }
}
