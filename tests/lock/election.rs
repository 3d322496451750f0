//! Leader election against real servers: a candidate waits for the leader and is elected by
//! its resignation (not the lease's expiry) with a larger term; another process reads the
//! leader and hears each change; the work run while leading ends with a resignation; a leader
//! cut off from its nodes steps down at its renew deadline; the configuration refusals.

use std::time::Duration;

use quorumlock::{
    ConfigError, Election, ElectionOptions, Error, Lock, LockOptions, Lost, NodeError,
};
use tokio::time::Instant;

use crate::common::{
    assert_no_keys, bounded, cluster, failed_with, once, volatile_cluster, waiting,
};

/// Timing long enough that neither an expiry nor a re-read on the retry period can happen
/// within a test's bound: what happens, a wake-up made happen.
fn slow() -> (LockOptions, ElectionOptions) {
    let s = Duration::from_secs;
    (
        once().fencing(true).ttl(s(600)),
        ElectionOptions::new()
            .lease_duration(s(600))
            .renew_deadline(s(400))
            .retry_period(s(200)),
    )
}

/// A leads; B campaigns and waits; A resigns and B is elected at once with a larger term; an
/// observer in a third process hears A, then B (perhaps with "nobody" between), then nobody.
// promise: election-resign
// promise: election-term
// promise: election-observe
#[tokio::test]
async fn a_resignation_elects_the_waiting_candidate_with_a_larger_term() {
    bounded(async {
        let servers = cluster(3).await;
        let (lock_options, options) = slow();
        let process = || Lock::new(servers.urls(), lock_options.clone()).unwrap();
        let (a, b, c) = (process(), process(), process());
        let elect = |lock: &Lock| Election::new(lock, "scheduler", options.clone()).unwrap();
        // The observer waits in a task of its own, so each change must wake it.
        let mut observer = elect(&c).observe().await;
        let (told, mut changes) = tokio::sync::mpsc::unbounded_channel();
        let watching =
            tokio::spawn(
                async move { while told.send(observer.changed().await.unwrap()).is_ok() {} },
            );
        assert_eq!(changes.recv().await.unwrap(), None);

        let first = elect(&a).campaign("a:8080").await.unwrap();
        let first_term = first.term();
        let seen = changes.recv().await.unwrap().expect("a leads");
        assert_eq!((seen.term, &seen.value[..]), (first_term, &b"a:8080"[..]));
        assert_eq!(
            elect(&c).leader().await.unwrap().map(|l| l.term),
            Some(first_term)
        );

        let candidate = elect(&b);
        let second = tokio::spawn(async move { candidate.campaign("b:8080").await });
        waiting(&b, "scheduler", 1).await;
        first.resign().await;
        let second = second.await.unwrap().unwrap();
        assert!(second.term() > first_term, "terms grow");
        // B may be heard first with the fence a quorum of its grants took, below its term until
        // its write-back lands (a retried attempt raised some counters twice); never A's term.
        let next = loop {
            let Some(leader) = changes.recv().await.unwrap() else {
                continue;
            };
            if leader.term == second.term() {
                break leader;
            }
            assert!(
                first_term < leader.term && leader.term < second.term(),
                "heard term {} between {first_term} and {}",
                leader.term,
                second.term()
            );
            assert_eq!(&leader.value[..], b"b:8080");
        };
        assert_eq!(&next.value[..], b"b:8080");

        second.resign().await;
        assert_eq!(changes.recv().await.unwrap(), None);
        watching.abort();
        assert_eq!(elect(&a).leader().await.unwrap(), None);
    })
    .await;
}

/// Nodes whose counters are out of step (10, 20, 30) each grant with a fence of their own, so
/// each writes the candidate's record with a term of its own: the write-back rewrites them with
/// the quorum's term, and the leader read is the candidate's term, never one node's.
// promise: election-term
#[tokio::test]
async fn a_term_the_grants_disagree_on_is_settled_by_the_write_back() {
    bounded(async {
        let servers = cluster(3).await;
        let (lock_options, options) = slow();
        for node in 0..3 {
            let mut direct = servers.connection(node).await.unwrap();
            let () = redis::cmd("SET")
                .arg("quorumlock-fence:scheduler")
                .arg((node + 1) * 10)
                .query_async(&mut direct)
                .await
                .unwrap();
        }
        let lock = Lock::new(servers.urls(), lock_options).unwrap();
        let election = Election::new(&lock, "scheduler", options).unwrap();
        let leadership = election.campaign("a:8080").await.unwrap();
        assert!(
            matches!(leadership.term(), 21 | 31),
            "the highest of the deciding grants: {}",
            leadership.term()
        );
        let leader = election.leader().await.unwrap().expect("a leader");
        assert_eq!(leader.term, leadership.term());
        leadership.resign().await;
    })
    .await;
}

/// `lead` runs the work with the term as the lease's fence, and resigns when it ends: the
/// next candidate is elected at once.
// promise: election-resign
#[tokio::test]
async fn leading_ends_in_a_resignation() {
    bounded(async {
        let servers = cluster(3).await;
        let (lock_options, options) = slow();
        let lock = Lock::new(servers.urls(), lock_options).unwrap();
        let election = Election::new(&lock, "cron", options).unwrap();
        let term = election
            .lead("here", async |lease| lease.fence())
            .await
            .unwrap()
            .expect("a term");
        assert_eq!(election.leader().await.unwrap(), None);
        let next = election.campaign("here").await.unwrap();
        assert!(next.term() > term);
        next.resign().await;
    })
    .await;
}

/// A leader whose majority of nodes froze cannot renew, and steps down at its renew deadline
/// (2 s after its last renewal began), not at its lease's end (6 s): the lease is trusted only
/// until then, and its lost signal comes then.
// promise: election-renew-deadline
#[tokio::test]
async fn a_leader_cut_off_steps_down_at_its_renew_deadline() {
    bounded(async {
        let mut servers = cluster(3).await;
        let ms = Duration::from_millis;
        let lock = Lock::new(
            servers.urls(),
            once()
                .fencing(true)
                .ttl(ms(6_000))
                .node_timeout(ms(200))
                .connect_timeout(ms(200)),
        )
        .unwrap();
        let options = ElectionOptions::new()
            .lease_duration(ms(6_000))
            .renew_deadline(ms(2_000))
            .retry_period(ms(500));
        let leadership = Election::new(&lock, "cut", options)
            .unwrap()
            .campaign("me")
            .await
            .unwrap();
        servers.pause(0).unwrap();
        servers.pause(1).unwrap();
        // The acquisition began before this: trusted until 2 s after it at the latest. No
        // extension succeeds from now on, so this stays.
        let deadline = Instant::now().into_std() + ms(2_000);
        let trusted_until = leadership.valid_until();
        let lost = leadership.lost().await;
        servers.resume(0).unwrap();
        servers.resume(1).unwrap();
        assert!(matches!(lost, Lost::Expired { .. }), "{lost:?}");
        assert!(
            trusted_until <= deadline,
            "trusted {:?} past the renew deadline",
            trusted_until - deadline
        );
    })
    .await;
}

/// Nodes that do not persist every write cannot vote for a term (a fence): a campaign over them
/// fails at once with every node's `NotDurable`, rather than waiting for ever, and leaves no key.
// promise: wait-ends-on-permanent
#[tokio::test]
async fn a_campaign_over_nodes_that_cannot_vote_fails_at_once() {
    bounded(async {
        let servers = volatile_cluster(3).await;
        let (lock_options, options) = slow();
        let lock = Lock::new(servers.urls(), lock_options).unwrap();
        let election = Election::new(&lock, "scheduler", options).unwrap();
        // A hang guard, not a speed bound: the campaign fails on its first attempt.
        let campaign = tokio::time::timeout(Duration::from_secs(20), election.campaign("a"));
        let error = campaign.await.expect("the campaign waited").unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        assert!(error.is_permanent(), "{error}");
        let not_durable = failed_with(error.outcomes(), NodeError::NotDurable);
        assert!(not_durable >= 2, "{error}");
        lock.settle().await;
        assert_no_keys(&servers, 0..3).await;
    })
    .await;
}

/// An election needs fencing (its terms are fences), settings in order, and a lease the
/// lock's restart guard covers.
#[tokio::test]
async fn an_election_needs_fencing_ordered_settings_and_a_covered_lease() {
    let urls = [
        "redis://127.0.0.1:1",
        "redis://127.0.0.1:2",
        "redis://127.0.0.1:3",
    ];
    let refusal = |options: LockOptions, election: ElectionOptions| {
        let lock = Lock::new(urls, options).unwrap();
        match Election::new(&lock, "e", election) {
            Err(Error::Config(error)) => error,
            other => panic!("{other:?}"),
        }
    };
    let s = Duration::from_secs;
    let fenced = LockOptions::new().ttl(s(15)).fencing(true);
    assert_eq!(
        refusal(LockOptions::new().ttl(s(15)), ElectionOptions::new()),
        ConfigError::ElectionWithoutFencing
    );
    assert!(matches!(
        refusal(fenced.clone(), ElectionOptions::new().retry_period(s(10))),
        ConfigError::InvalidElection { .. }
    ));
    assert_eq!(
        refusal(LockOptions::new().fencing(true), ElectionOptions::new()),
        ConfigError::TtlAboveMaxTtl {
            ttl: s(15),
            max_ttl: s(10)
        }
    );
    let lock = Lock::new(urls, fenced).unwrap();
    assert!(matches!(
        Election::new(&lock, "", ElectionOptions::new()),
        Err(Error::Config(ConfigError::EmptyResource))
    ));
}
