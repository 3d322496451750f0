//! `cluster-members` against real Redis Clusters (three members of three local
//! `redis-server --cluster-enabled yes` shards each): a short run, bounded in time, in which the
//! checker finds no overlap and no stale write, some acquisitions are won, and the faults
//! (shards killed and restarted, slots migrated) were really done.

use std::time::Duration;

use quorumlock_chaos::{
    ExpectedVsObserved, RunOptions, SHARD_KILLED_LABEL, SLOT_MIGRATED_LABEL, Scenario, run,
};

/// Far more than the run (4 s) with nine shards to start, a restart (2–4 s) and the wind-down.
const BOUND: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_members_stay_safe_through_a_killed_shard_and_migrating_slots() {
    let options = RunOptions::new().duration(Duration::from_secs(4));
    let report = tokio::time::timeout(BOUND, run(Scenario::ClusterMembers, &options))
        .await
        .expect("the run ends in time")
        .expect("the run completes");
    let check = &report.check;
    let faults = &report.history.faults;
    let done = |label: &str| {
        faults
            .iter()
            .filter(|fault| fault.label == label && fault.end_us.is_some())
            .count()
    };
    let (kills, migrations) = (done(SHARD_KILLED_LABEL), done(SLOT_MIGRATED_LABEL));
    eprintln!(
        "cluster-members: acquired {} holds {} writes {} violations {} stale writes {} \
         kills (restarted) {kills} migrations {migrations} notes {:?}",
        check.availability.acquired,
        check.holds,
        check.writes,
        check.violations.len(),
        check.stale_writes.len(),
        report.notes
    );
    assert!(
        check.violations.is_empty(),
        "overlapping holders: {:#?}",
        check.violations
    );
    assert!(
        check.stale_writes.is_empty(),
        "stale writes: {:#?}",
        check.stale_writes
    );
    assert!(check.is_safe(), "{check:#?}");
    assert_eq!(
        report.expected_vs_observed(),
        ExpectedVsObserved::AsExpected
    );
    assert!(check.availability.acquired > 0, "no acquisition won");
    assert!(kills >= 1, "no shard killed and restarted: {faults:?}");
    assert!(migrations >= 1, "no slot migrated: {faults:?}");
}
