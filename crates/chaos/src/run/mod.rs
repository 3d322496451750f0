//! Running a scenario: a cluster (or the user's nodes), the contending clients, the scenario's
//! faults, and the history they leave, checked.
//!
//! Below this file: [`options`] (how to run), [`error`], [`workload`] (the clients) over
//! [`store`] (the protected store), [`faults`] (the fault schedule) over [`clocks`] (the clock
//! faults), [`drift`] (the drifting clocks) and [`checks`] (each fault's proof that it took
//! effect; the TTL adapted to the restart time), [`failover`] (the address switches of
//! [`Scenario::Failover`]), [`nemesis`] (the executor of
//! [`Scenario::Random`]'s schedule), [`cluster_members`] (the clients, faults and check of
//! [`Scenario::ClusterMembers`], on Redis Cluster members), [`lifecycle`] (the steps both kinds
//! of run share: base lock options, warm-up, store clients, wind-down, the check), [`stalls`]
//! (the probe of the clients' runtime), and [`report`] (what a run returns).
//!
//! (Just over 500 lines: `run_on` wires every scenario's clients, faults and self-checks in one
//! place, where each can be read against the others; its pieces live in the modules above.)

mod checks;
mod clocks;
mod cluster_members;
mod drift;
mod error;
mod failover;
mod faults;
mod inject;
mod lifecycle;
mod nemesis;
mod options;
mod report;
mod stalls;
mod store;
mod workload;

use std::sync::Arc;
use std::time::Instant;

use quorumlock::{Lock, NodeReply};
use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
use tokio::task::JoinSet;

use crate::checker::CheckReport;
use crate::history::{Clock, History, ReadWrite, Recorder, Rejection, Semaphore};
use crate::nemesis::Schedule;
use crate::scenario::Scenario;
use checks::{ttl_for_restarts, up_for_a_while};
use clocks::{with_fast_clocks, with_jumping_clocks};
use drift::{ttl_for_drift, with_drifting_clocks};
use faults::Faults;
use inject::waiters_in_turn;
use store::Store;
use workload::{
    Client, ClientPlan, PAUSE_LABEL, SEMAPHORE, bulk_resources, keep_many, leaders_elected,
    many_kept_at_once, semaphore_full, sides_used, ttl_for_leases, waited_in_turn,
    warm_up_resource,
};

pub use cluster_members::{SHARD_KILLED_LABEL, SLOT_MIGRATED_LABEL};
pub use error::ChaosError;
pub use options::RunOptions;
pub use report::{ExpectedVsObserved, ScenarioReport};

/// Nodes of a cluster the runner starts itself (the scenarios name nodes 0–4).
pub const LOCAL_NODES: usize = 5;
/// Runs `scenario` as `options` say: on a local cluster it starts (and always stops, also on
/// error), or on the user's nodes for scenarios that need no node control. Either way the
/// protected writes go to a store of its own, a local `redis-server` it starts (with the
/// backend of [`RunOptions::cluster`]) and stops. [`Scenario::ClusterMembers`] runs on three
/// local Redis Clusters of three shards each instead (processes, whatever the backend; the
/// `redis-server` of `QUORUMLOCK_REDIS_SERVER` or `PATH`), started and stopped the same way.
///
/// Needs a multi-threaded Tokio runtime with I/O and time.
pub async fn run(scenario: Scenario, options: &RunOptions) -> Result<ScenarioReport, ChaosError> {
    options.validate()?;
    if options.nodes.is_some() && scenario.needs_node_control() {
        return Err(ChaosError::NeedsNodeControl(scenario));
    }
    // Dropping the store (here, or while unwinding) stops its server.
    let store = Store::start(&options.cluster).await?;
    if let Some(urls) = &options.nodes {
        let target = format!("{} given nodes", urls.len());
        return run_on(
            scenario,
            options,
            &store,
            urls.clone(),
            None,
            target,
            Vec::new(),
        )
        .await;
    }
    if scenario == Scenario::ClusterMembers {
        return cluster_members::run(options, &store).await;
    }
    let mut notes = Vec::new();
    let mut cluster = match TestCluster::start(cluster_options(scenario, options, true)).await {
        Ok(cluster) => cluster,
        Err(error) if scenario == Scenario::ClockFast => {
            notes.push(format!(
                "could not start nodes with fast clocks ({error}); emulating them instead"
            ));
            TestCluster::start(cluster_options(scenario, options, false)).await?
        }
        Err(error) => return Err(error.into()),
    };
    let urls = failover::client_urls(cluster.urls());
    let target = format!("{LOCAL_NODES} local nodes behind fault proxies");
    match scenario {
        Scenario::Failover => failover::standing_by(&cluster, &mut notes).await?,
        Scenario::ClockJumpMinority => up_for_a_while(&cluster, &[0, 1], &mut notes).await?,
        _ => {}
    }
    if persistence(scenario, options) == Persistence::AofAlways {
        notes.push("every node: appendonly yes, appendfsync always (data on tmpfs)".to_owned());
    }
    let restarts = matches!(
        scenario,
        Scenario::RestartNoPersistence
            | Scenario::RestartGuarded
            | Scenario::RestartDelayed
            | Scenario::RestartAof
    );
    let options = &if restarts {
        ttl_for_restarts(&mut cluster, options, &mut notes).await?
    } else if scenario == Scenario::ClockDrift {
        ttl_for_drift(options, &mut notes)
    } else if scenario == Scenario::ManyLeases {
        ttl_for_leases(options, &mut notes)
    } else {
        options.clone()
    };
    // Dropping the cluster (here, or while unwinding) kills every process and proxy it started.
    run_on(
        scenario,
        options,
        &store,
        urls,
        Some(&mut cluster),
        target,
        notes,
    )
    .await
}

/// The cluster for a scenario: five nodes behind proxies, with persistence where it matters,
/// (if `clocks`) fast clocks on nodes 0–2 for [`Scenario::ClockFast`], and clocks that can
/// jump for the clock-jump scenarios.
fn cluster_options(scenario: Scenario, options: &RunOptions, clocks: bool) -> ClusterOptions {
    let cluster = options
        .cluster
        .clone()
        .nodes(LOCAL_NODES + failover::standbys(scenario))
        .proxies(true)
        .persistence(persistence(scenario, options));
    match scenario {
        Scenario::ClockFast if clocks => with_fast_clocks(cluster),
        Scenario::ClockDrift => with_drifting_clocks(cluster),
        Scenario::ClockJumpMinority | Scenario::ClockJumpMajority => {
            with_jumping_clocks(cluster, scenario)
        }
        _ => cluster,
    }
}

/// What the nodes keep across a restart: everything in `restart-aof`, in `election` (its terms
/// are fences, which grow across restarts only on nodes that keep them: the nemesis restarts
/// majorities at once, beyond what `fence_volatile_nodes` recovers from, `docs/fencing.md`),
/// and in `random` when the restart guard is off (its kills stay safe only if no restarted node
/// forgets a key; see [`crate::nemesis`]); nothing elsewhere.
fn persistence(scenario: Scenario, options: &RunOptions) -> Persistence {
    match scenario {
        Scenario::RestartAof | Scenario::Election => Persistence::AofAlways,
        Scenario::Random
        | Scenario::Sets
        | Scenario::Semaphore
        | Scenario::ReadWrite
        | Scenario::ManyLeases
            if !options.restart_guard_for(scenario) =>
        {
            Persistence::AofAlways
        }
        _ => Persistence::None,
    }
}

/// Runs the clients on `urls` (and, on a local `cluster`, the scenario's faults) until the
/// deadline, lets them wind down, and checks the history they left.
async fn run_on(
    scenario: Scenario,
    options: &RunOptions,
    store: &Store,
    urls: Vec<String>,
    cluster: Option<&mut TestCluster>,
    target: String,
    mut notes: Vec<String>,
) -> Result<ScenarioReport, ChaosError> {
    let run_id = format!("{scenario}:{:08x}", rand::random::<u32>());
    let prefix = format!("quorumlock:chaos:{run_id}:");
    // A semaphore's resources are its slots, so each slot's register is written as a resource's.
    let semaphore = (scenario == Scenario::Semaphore).then(|| {
        Semaphore::new(
            SEMAPHORE,
            u32::try_from(options.resources).unwrap_or(u32::MAX),
        )
    });
    let resources: Vec<String> = (0..options.resources)
        .map(|i| match &semaphore {
            Some(semaphore) => format!("{}:{i}", semaphore.name),
            None => format!("res-{i}"),
        })
        .collect();
    let restart_guard = options.restart_guard_for(scenario);
    let fencing = options.fencing_for(scenario);
    let mut lock_options = lifecycle::lock_options(options, prefix.clone(), restart_guard);
    if !restart_guard {
        notes.push(
            "restart guard off (LockOptions::restart_guard(false)): restarted nodes vote at once"
                .to_owned(),
        );
    }
    if fencing {
        // Fresh counters per run, so that fences start at 1 against a fresh store.
        lock_options = lock_options
            .fencing(true)
            .fence_prefix(format!("quorumlock:chaos-fence:{run_id}:"));
        // Only nodes that persist every write vote for fences by default; where they do not
        // (or may not), no node would vote, so they are allowed, and the note says so.
        let volatile = if options.nodes.is_some() {
            Some("the given nodes' persistence is not known")
        } else if persistence(scenario, options) != Persistence::AofAlways {
            Some("these nodes do not persist every write")
        } else {
            None
        };
        match volatile {
            Some(why) => {
                lock_options = lock_options.fence_volatile_nodes(true);
                notes.push(format!(
                    "fencing on, with fence_volatile_nodes ({why}): a node's counter is \
                     trusted only in the server run that wrote it, and recovered after a restart"
                ));
            }
            None => notes.push("fencing on; every node persists every write".to_owned()),
        }
    }
    let locks = (0..options.clients)
        .map(|_| Lock::new(urls.clone(), lock_options.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    // The fence counters never expire: on nodes the runner did not start, delete them after.
    let counters_to_delete = (fencing && options.nodes.is_some())
        .then(|| locks.first().cloned())
        .flatten();
    if restart_guard {
        lifecycle::warm_up_all(&locks, &mut notes).await;
    }
    let store_clients = lifecycle::store_clients(store, locks.len()).await?;
    let recorder = Recorder::new(Clock::start());
    if let Some(semaphore) = &semaphore {
        recorder.semaphore(semaphore.clone());
    }
    let sides = scenario == Scenario::ReadWrite;
    if sides {
        for resource in &resources {
            recorder.read_write(ReadWrite::new(resource.clone()));
        }
    }
    let waiting = scenario == Scenario::Waiters;
    if let Some(lock) = locks.first().filter(|_| waiting) {
        recorder.set_wait_slack(lock.attempt_bound());
    }
    let started = Instant::now();
    let deadline = started + options.duration;
    let stall = matches!(
        scenario,
        Scenario::ClientStall | Scenario::ClientStallFenced
    );
    let keep_alive = matches!(scenario, Scenario::KeepAliveLoss | Scenario::ManyLeases);
    let many = scenario == Scenario::ManyLeases;
    let plan = Arc::new(ClientPlan::new(
        resources.clone(),
        options.writes_per_hold.max(1),
        options.ttl,
        deadline,
        (stall, keep_alive),
        recorder.clone(),
    ));
    // Beside the clients on their runtime until they are wound down (a JoinSet: dropped on an
    // early return, it aborts the probe).
    let mut probe = JoinSet::new();
    let wound_down = deadline + options.ttl * 2 + lifecycle::WIND_DOWN_GRACE;
    probe.spawn(stalls::watch(recorder.clone(), wound_down));
    let mut clients = JoinSet::new();
    for (id, (lock, store)) in locks.into_iter().zip(store_clients).enumerate() {
        if many {
            let bulk = bulk_resources(id, options.clients, options.leases_per_client());
            clients.spawn(keep_many(id, lock.clone(), Arc::clone(&plan), bulk));
        }
        let Some(client) = Client::new(id, Arc::clone(&plan), store) else {
            continue;
        };
        if scenario == Scenario::NoLock {
            clients.spawn(client.run_without_lock());
        } else if waiting {
            clients.spawn(client.wait_in_turn(lock));
        } else if scenario == Scenario::Sets {
            clients.spawn(client.take_sets(lock));
        } else if let Some(semaphore) = &semaphore {
            clients.spawn(client.take_permits(lock, semaphore.clone()));
        } else if sides {
            clients.spawn(client.take_sides(lock));
        } else if scenario == Scenario::Election {
            clients.spawn(client.campaign(lock));
        } else {
            clients.spawn(client.run(lock));
        }
    }

    let in_turn = waiting.then(|| waiters_in_turn(options.duration, options.ttl, LOCAL_NODES));
    let nemesis = matches!(
        scenario,
        Scenario::Random
            | Scenario::Sets
            | Scenario::Semaphore
            | Scenario::ReadWrite
            | Scenario::Election
            | Scenario::ManyLeases
    )
    .then(|| {
        let seed = options.seed.unwrap_or_else(rand::random);
        let schedule = Schedule::generate(seed, options.duration, options.ttl, LOCAL_NODES);
        notes.push(format!(
            "{} (replay: --scenario {} --seed {seed} --duration {:?} --ttl {:?})",
            schedule.summary(),
            scenario.name(),
            options.duration,
            options.ttl
        ));
        schedule
    });
    let faults = Faults {
        recorder: &recorder,
        deadline,
        ttl: options.ttl,
        nemesis: nemesis.as_ref().or(in_turn.as_ref()),
    };
    // On error, returning drops `clients`, which aborts every client task.
    match cluster {
        Some(cluster) => {
            let keys = resources
                .iter()
                .map(|r| format!("{prefix}{r}").into_bytes())
                .collect();
            faults.inject(scenario, cluster, keys, &mut notes).await?;
        }
        None => faults.sleep_until(deadline).await,
    }
    faults.sleep_until(deadline).await;

    lifecycle::wind_down(&mut clients, options, &mut notes).await;
    probe.shutdown().await;
    if let Some(lock) = counters_to_delete {
        delete_fence_counters(&lock, &resources, options.clients, &mut notes).await;
    }
    let (history, check) =
        lifecycle::checked(&recorder, store, &resources, deadline, &mut notes).await?;
    let mut self_check = || -> Result<(), ChaosError> {
        if stall && fencing {
            stall_rejected(&history, &check, &mut notes)?;
        }
        if scenario == Scenario::KeepAliveLoss {
            kept_holds_lost(&history, &check, &mut notes)?;
        }
        if many {
            let bulk = options.leases_per_client().saturating_mul(options.clients);
            many_kept_at_once(&history, &check, bulk, &mut notes)?;
        }
        if waiting {
            waited_in_turn(&history, &check, options.ttl, &mut notes)?;
        }
        if semaphore.is_some() {
            semaphore_full(&check, &mut notes)?;
        }
        if sides {
            sides_used(&check, &mut notes)?;
        }
        if scenario == Scenario::Election {
            leaders_elected(&check, &mut notes)?;
        }
        Ok(())
    };
    match self_check() {
        // Under a defect a run may never get where its self-check looks (one that only costs
        // availability leaves keys behind, and fewer hold): the mutation score asks whether the
        // defect was caught, so that is a note, not a run that could not be made. CI's short
        // score once failed so (semaphore, no-release-on-failure: at most 2 of 3 permits).
        Err(ChaosError::EffectNotShown { evidence, .. }) if options.defect.is_some() => {
            notes.push(format!("self-check not met under the defect: {evidence}"));
        }
        other => other?,
    }
    Ok(ScenarioReport {
        scenario,
        expected_safe: options.expected_safe(scenario),
        restart_guard,
        fencing,
        defect: options.defect,
        description: scenario.description().to_owned(),
        target,
        ttl_ms: u64::try_from(options.ttl.as_millis()).unwrap_or(u64::MAX),
        clients: options.clients,
        resources: options.resources,
        notes,
        seed: nemesis.as_ref().map(|schedule| schedule.seed),
        nemesis: nemesis.or(in_turn),
        check,
        history,
    })
}

/// The self-check of a fenced client stall: the store rejected some late write. A run that is
/// otherwise clean but rejected nothing fails ([`ChaosError::ClientFaultNotInEffect`]): its
/// stalls never produced a late write, so it proved nothing about fencing. (One that is not
/// clean is reported as it is: the checker's findings say more.)
fn stall_rejected(
    history: &History,
    check: &CheckReport,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    let pauses = history
        .faults
        .iter()
        .filter(|fault| fault.label == PAUSE_LABEL)
        .count();
    let rejected_for = |reason| {
        history
            .writes
            .iter()
            .filter(|write| write.rejected == Some(reason))
            .count()
    };
    let evidence = format!(
        "{pauses} client pause(s); the store rejected {} write(s): {} with an older fence, {} \
         after the value changed",
        check.rejected_writes,
        rejected_for(Rejection::OlderFence),
        rejected_for(Rejection::ValueChanged)
    );
    if check.rejected_writes == 0 && check.is_safe() {
        return Err(ChaosError::ClientFaultNotInEffect {
            fault: PAUSE_LABEL.to_owned(),
            evidence: format!("{evidence}: the stall never produced a late write"),
        });
    }
    notes.push(format!("self-check: {evidence}"));
    Ok(())
}

/// The self-check of [`Scenario::KeepAliveLoss`]: some hold kept alive was lost (else the
/// faults never took a majority away mid-hold, and the run proved nothing about the lost
/// signal), and after every fault a later holder got the lock. A run that is otherwise clean but
/// shows neither fails ([`ChaosError::EffectNotShown`]); one with findings is reported as it
/// is. The notes count the kept holds, the extended and the lost ones, the least slack a lost
/// signal left before the end of its validity, and how soon after each heal the lock was taken.
/// (Its faults are the only ones in the history: no client faults in this scenario.)
fn kept_holds_lost(
    history: &History,
    check: &CheckReport,
    notes: &mut Vec<String>,
) -> Result<(), ChaosError> {
    let kept = check.keep_alive;
    let margin_ms = history
        .holds
        .iter()
        .filter_map(|hold| hold.keep_alive.as_ref())
        .map(|lease| lease.margin_us)
        .min()
        .map_or_else(|| "-".to_owned(), |us| format!("{:.1}", us as f64 / 1e3));
    let slack_ms = kept
        .min_slack_us
        .map_or_else(|| "-".to_owned(), |us| format!("{:.1}", us as f64 / 1e3));
    // After each fault: the first grant after its middle, as its distance in ms from the
    // recorded heal, if any came. Nobody can win a quorum while the packets of all three nodes
    // are dropped; a grant can come just as the fault starts (decided before the rules were in
    // place), and while the rules are removed node after node, before the heal is recorded
    // (then the distance is negative).
    let regained: Vec<Option<f64>> = history
        .faults
        .iter()
        .filter_map(|fault| Some((fault.start_us, fault.end_us?)))
        .map(|(start, healed)| {
            let middle = start + (healed.saturating_sub(start)) / 2;
            history
                .holds
                .iter()
                .filter(|hold| hold.acquired_us >= middle)
                .map(|hold| hold.acquired_us)
                .min()
                .map(|granted| (granted as f64 - healed as f64) / 1e3)
        })
        .collect();
    let unregained = regained.iter().filter(|after| after.is_none()).count();
    let range_ms = regained
        .iter()
        .flatten()
        .fold(None, |range: Option<(f64, f64)>, &after| {
            Some(range.map_or((after, after), |(soonest, slowest)| {
                (soonest.min(after), slowest.max(after))
            }))
        })
        .map_or_else(
            || "-".to_owned(),
            |(soonest, slowest)| format!("{soonest:+.0}..{slowest:+.0}"),
        );
    let evidence = format!(
        "{} hold(s) kept alive, {} extended at least once, {} lost ({} expired, {} taken, {} \
         other); the least slack between a lost signal and the end of its validity {slack_ms} ms \
         (margin {margin_ms} ms); a later holder got the lock after {} of {} fault(s), \
         {range_ms} ms from the recorded heal (negative: while the nodes' \
         rules were being removed)",
        kept.holds,
        kept.extended,
        kept.lost,
        kept.lost_expired,
        kept.lost_taken,
        kept.lost_other,
        regained.len() - unregained,
        regained.len(),
    );
    if check.is_safe() && (kept.lost == 0 || regained.is_empty() || unregained > 0) {
        return Err(ChaosError::EffectNotShown {
            scenario: Scenario::KeepAliveLoss,
            evidence: format!(
                "{evidence}: {}",
                if kept.lost == 0 {
                    "no hold kept alive was lost"
                } else {
                    "no later holder got the lock after a fault"
                }
            ),
        });
    }
    notes.push(format!("self-check: {evidence}"));
    Ok(())
}

/// Deletes the fence counters a run left on nodes it did not start (the resources', and the
/// warm-up's of each of `clients`), and notes any node that could not be asked.
async fn delete_fence_counters(
    lock: &Lock,
    resources: &[String],
    clients: usize,
    notes: &mut Vec<String>,
) {
    let warm_ups = (0..clients).map(warm_up_resource);
    let mut failed = 0;
    for resource in resources.iter().cloned().chain(warm_ups) {
        let outcomes = lock.delete_fence_counter(&resource).await;
        failed += outcomes.map_or(1, |outcomes| {
            outcomes
                .iter()
                .filter(|outcome| matches!(outcome.reply, NodeReply::Failed(_)))
                .count()
        });
    }
    if failed > 0 {
        notes.push(format!(
            "{failed} fence counter deletion(s) failed; the counters stay under \
             quorumlock:chaos-fence:"
        ));
    }
}
