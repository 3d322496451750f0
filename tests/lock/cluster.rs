//! Redis Clusters as the lock's nodes: three members of three shards each (local
//! `redis-server --cluster-enabled yes` processes, no replicas). A resource's vote in a member
//! comes from the shard serving its slot; a killed shard costs that member its slots only; a
//! slot that migrates (keys moved, `ASK`, then `MOVED`) while keys are held and while
//! acquisitions run neither loses nor doubles a vote, and nothing is left behind.

use quorumlock::Patience;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use quorumlock::{
    ConfigError, Error, KeepAlive, Lock, LockOptions, NodeConfig, NodeError, NodeReply, Resources,
    RetryPolicy,
};
use quorumlock_harness::{RedisClusters, RedisClustersOptions};

use crate::common::{bounded, holders};

/// Three members of `shards` shards each.
async fn clusters(shards: usize) -> RedisClusters {
    RedisClusters::start(RedisClustersOptions::default().members(3).shards(shards))
        .await
        .expect("start local Redis Clusters")
}

/// A lock whose nodes are the members, each given by all its shards as seeds.
fn cluster_lock(clusters: &RedisClusters, options: LockOptions) -> Lock {
    let nodes =
        (0..clusters.members()).map(|member| NodeConfig::cluster(clusters.seed_urls(member)));
    Lock::new(nodes, options).expect("a lock over cluster members")
}

fn options() -> LockOptions {
    LockOptions::new()
        .ttl(Duration::from_secs(10))
        .node_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2))
        .patience(Patience::Once)
}

/// As [`options`], retrying often: for callers contending for a few resources.
fn contended() -> LockOptions {
    options().patience(Patience::Retry(
        RetryPolicy::new()
            .attempts(200)
            .delay(Duration::from_millis(2))
            .jitter(Duration::from_millis(5)),
    ))
}

/// The lock key of `resource` on a lock with cluster members: the name is the hash tag.
fn key(resource: &str) -> Vec<u8> {
    format!("quorumlock:{{{resource}}}").into_bytes()
}

/// Every key left on every member.
async fn leftovers(clusters: &RedisClusters) -> Vec<(usize, String)> {
    let mut left = Vec::new();
    for member in 0..clusters.members() {
        for key in clusters.keys(member).await.unwrap() {
            left.push((member, String::from_utf8_lossy(&key).into_owned()));
        }
    }
    left
}

/// Once the lock's background releases are done, no key of any member is left.
async fn nothing_left(lock: &Lock, clusters: &RedisClusters) {
    lock.settle().await;
    assert_eq!(leftovers(clusters).await, [], "keys left behind");
}

/// A resource whose slot member 0's shard `shard` serves.
async fn resource_on(clusters: &RedisClusters, shard: usize, name: &str) -> String {
    for i in 0..1000 {
        let resource = format!("{name}-{i}");
        let slot = clusters.key_slot(&key(&resource)).await.unwrap();
        if clusters.shard_of_slot(0, slot).await.unwrap() == shard {
            return resource;
        }
    }
    panic!("no resource on shard {shard} among 1000 names");
}

/// `tasks` callers, each taking the resources in turn (`rounds` times, or until `stop`), each
/// noting whether another caller held the resource it just won. Answers how many acquisitions
/// won, and how many of them overlapped another holder.
fn contenders(
    lock: &Lock,
    resources: &[String],
    tasks: usize,
    rounds: usize,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, usize)> {
    let held: Arc<Vec<AtomicBool>> =
        Arc::new(resources.iter().map(|_| AtomicBool::new(false)).collect());
    let callers: Vec<_> = (0..tasks)
        .map(|task| {
            let (lock, resources, held) = (lock.clone(), resources.to_vec(), Arc::clone(&held));
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let (mut won, mut overlaps) = (0, 0);
                for round in 0..rounds {
                    if stop.load(Ordering::SeqCst) && round > 0 {
                        break;
                    }
                    let at = (task * 7 + round) % resources.len();
                    let Ok(guard) = lock.acquire(&resources[at]).await else {
                        continue;
                    };
                    if held[at].swap(true, Ordering::SeqCst) {
                        overlaps += 1;
                    }
                    won += 1;
                    tokio::task::yield_now().await;
                    held[at].store(false, Ordering::SeqCst);
                    guard.release().await;
                }
                (won, overlaps)
            })
        })
        .collect();
    tokio::spawn(async move {
        let mut total = (0, 0);
        for caller in callers {
            let (won, overlaps) = caller.await.unwrap();
            total = (total.0 + won, total.1 + overlaps);
        }
        total
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contending_callers_over_three_cluster_members_never_overlap_and_leave_nothing() {
    bounded(async {
        let clusters = clusters(3).await;
        let lock = cluster_lock(&clusters, contended());
        let resources: Vec<String> = (0..6).map(|i| format!("account-{i}")).collect();
        let never = Arc::new(AtomicBool::new(false));
        let (won, overlaps) = contenders(&lock, &resources, 8, 15, never).await.unwrap();
        assert_eq!(overlaps, 0, "two holders at once");
        assert_eq!(won, 8 * 15);
        nothing_left(&lock, &clusters).await;
        // The votes came from more than one shard of a member: the keys were routed by slot.
        let mut shards = HashSet::new();
        for resource in &resources {
            let slot = clusters.key_slot(&key(resource)).await.unwrap();
            shards.insert(clusters.shard_of_slot(0, slot).await.unwrap());
        }
        assert!(shards.len() >= 2, "six resources on one shard: {shards:?}");
    })
    .await;
}

#[tokio::test]
async fn a_killed_shard_costs_its_member_that_shards_slots_and_the_lock_still_works() {
    bounded(async {
        let mut clusters = clusters(3).await;
        let lock = cluster_lock(&clusters, options());
        let (lost, kept) = (
            resource_on(&clusters, 0, "on-killed").await,
            resource_on(&clusters, 1, "on-alive").await,
        );
        clusters.kill_shard(0, 0).await.unwrap();

        let guard = lock.try_acquire(&lost).await.unwrap();
        let replies: Vec<_> = guard
            .outcomes()
            .iter()
            .map(|outcome| &outcome.reply)
            .collect();
        // Decided by the other two: member 0's failure may not be in yet.
        assert!(
            matches!(replies[0], NodeReply::Failed(_) | NodeReply::NoReply),
            "{replies:?}"
        );
        assert!(
            matches!(replies[1..], [NodeReply::Ours, NodeReply::Ours]),
            "{replies:?}"
        );
        // Another shard of the same member still votes (until the member's cluster marks
        // the killed one failed and, with full coverage required, stops serving: either way
        // two members grant).
        let other = lock.try_acquire(&kept).await.unwrap();
        assert!(holders(other.outcomes()).len() >= 2);
        guard.release().await;
        other.release().await;
        nothing_left(&lock, &clusters).await;
    })
    .await;
}

/// A held key's slot migrates in member 0: while the key is on the source, then moved (the
/// source answers `ASK`), then after the move completes (`MOVED`), the holder extends on every
/// member, a contender is refused, a new acquisition in the migrating slot is granted on the
/// target (a fenced one only after the move), and releasing leaves nothing.
// promise: cluster-one-vote
#[tokio::test]
async fn a_slot_migrating_while_held_keeps_every_vote_and_leaves_nothing() {
    bounded(async {
        let clusters = clusters(3).await;
        // Every member must answer: the migrating one is never left out of a decision.
        let lock = cluster_lock(&clusters, options().fencing(true).quorum_size(3));
        // Names starting with the same `{tag}` share a slot.
        let (held, later) = ("{ledger}:a", "{ledger}:b");
        let slot = clusters.key_slot(&key(held)).await.unwrap();
        assert_eq!(slot, clusters.key_slot(&key(later)).await.unwrap());
        let source = clusters.shard_of_slot(0, slot).await.unwrap();
        let target = (source + 1) % clusters.shards();

        let mut guard = lock.try_acquire(held).await.unwrap();
        let fence = guard.fence().unwrap();
        let migration = clusters.begin_migration(0, slot, target).await.unwrap();
        guard.extend(Duration::from_secs(10)).await.unwrap();
        assert_eq!(
            holders(guard.outcomes()).len(),
            3
        );

        // The key and its fence counter move: the source now answers ASK for them.
        assert!(migration.move_keys().await.unwrap() >= 2);
        guard.extend(Duration::from_secs(10)).await.unwrap();
        assert_eq!(
            holders(guard.outcomes()).len(),
            3,
            "{:?}",
            guard.outcomes()
        );
        assert!(matches!(
            lock.try_acquire(held).await,
            Err(Error::Held { .. })
        ));
        // A fenced acquisition touches two absent keys of the migrating slot: Redis refuses
        // such a multi-key request until the move is done (TRYAGAIN), so member 0 gives no
        // vote now. A plain one (one key) is taken on the shard the slot moves to.
        let refused = lock.try_acquire(later).await.unwrap_err();
        assert!(
            matches!(&refused.outcomes()[0].reply, NodeReply::Failed(NodeError::Server { code, .. }) if code == "TRYAGAIN"),
            "{refused:?}"
        );
        let plain = cluster_lock(&clusters, options().quorum_size(3));
        let second = plain.try_acquire(later).await.unwrap();

        migration.finish().await.unwrap();
        assert_eq!(clusters.shard_of_slot(0, slot).await.unwrap(), target);
        guard.extend(Duration::from_secs(10)).await.unwrap();
        assert_eq!(
            holders(guard.outcomes()).len(),
            3
        );
        assert_eq!(guard.release().await.held, 3);
        assert_eq!(second.release().await.held, 3);
        plain.settle().await;
        let again = lock.try_acquire(held).await.unwrap();
        assert!(
            again.fence().unwrap() > fence,
            "fences keep rising across the move"
        );
        again.release().await;
        lock.settle().await;
        let left: Vec<_> = leftovers(&clusters)
            .await
            .into_iter()
            .filter(|(_, key)| !key.starts_with("quorumlock-fence:"))
            .collect();
        assert_eq!(left, [], "lock keys left behind");
    })
    .await;
}

// promise: cluster-one-vote
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_running_through_a_reshard_never_overlap_and_leave_nothing() {
    bounded(async {
        let clusters = clusters(3).await;
        let lock = cluster_lock(&clusters, contended());
        let resources: Vec<String> = (0..40).map(|i| format!("job-{i}")).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let running = contenders(&lock, &resources, 4, 5000, Arc::clone(&stop));
        // Moves 500 slots (some of them the resources') from shard 0 to shard 1 of member 0,
        // and 500 from shard 2 to shard 0 of member 1, while the callers run.
        clusters.reshard(0, 0, 1, 500).await.unwrap();
        clusters.reshard(1, 2, 0, 500).await.unwrap();
        stop.store(true, Ordering::SeqCst);
        let (won, overlaps) = running.await.unwrap();
        assert_eq!(overlaps, 0, "two holders at once");
        assert!(won > 0);
        nothing_left(&lock, &clusters).await;
        // And after the reshard every resource is still lockable on every member.
        for resource in &resources {
            let guard = lock.try_acquire(resource).await.unwrap();
            assert!(guard.release().await.held >= 2, "{resource}");
        }
    })
    .await;
}

#[tokio::test]
async fn kept_leases_on_cluster_members_are_renewed_slot_by_slot() {
    bounded(async {
        let clusters = clusters(3).await;
        let lock = cluster_lock(&clusters, options().ttl(Duration::from_millis(600)));
        let (first, second) = (
            resource_on(&clusters, 0, "kept").await,
            resource_on(&clusters, 2, "kept").await,
        );
        let leases: Vec<_> = [&first, &second]
            .into_iter()
            .map(|resource| {
                let lock = &lock;
                async move {
                    lock.try_acquire(resource)
                        .await
                        .unwrap()
                        .keep_alive(KeepAlive::new())
                        .unwrap()
                }
            })
            .collect();
        let leases = futures::future::join_all(leases).await;
        // Renewed at least twice each, well past the TTL, never lost.
        quorumlock_harness::eventually(Duration::from_secs(4), async || {
            leases.iter().all(|lease| lease.lease().extensions() >= 2)
        })
        .await;
        for lease in &leases {
            assert!(lease.lease().extensions() >= 2, "{:?}", lease.lease());
            assert!(lease.lease().lost_reason().is_none());
        }
        for lease in leases {
            lease.release().await;
        }
        nothing_left(&lock, &clusters).await;
    })
    .await;
}

#[tokio::test]
async fn a_set_on_cluster_members_shares_a_slot_or_is_refused_before_anything_is_sent() {
    bounded(async {
        let clusters = clusters(3).await;
        let lock = cluster_lock(&clusters, options());
        let tagged = Resources::new(["{order-7}:stock", "{order-7}:payment"]).unwrap();
        let guard = lock.try_acquire(&tagged).await.unwrap();
        assert!(guard.release().await.held >= 2);

        let apart = Resources::new(["stock", "payment"]).unwrap();
        assert!(matches!(
            lock.try_acquire(&apart).await,
            Err(Error::Config(ConfigError::CrossSlotSet { .. }))
        ));
        assert!(matches!(
            lock.try_acquire("}no-tag").await,
            Err(Error::Config(ConfigError::NoHashTag { .. }))
        ));
        nothing_left(&lock, &clusters).await;
    })
    .await;
}

#[test]
fn a_prefix_that_would_hold_the_hash_tag_is_refused_for_cluster_members() {
    let nodes = || [NodeConfig::cluster(["redis://127.0.0.1:7000"])];
    for options in [
        LockOptions::new().key_prefix("app{x}:"),
        LockOptions::new().fence_prefix("fence{"),
    ] {
        assert!(matches!(
            Lock::new(nodes(), options),
            Err(Error::Config(ConfigError::BraceInPrefix { .. }))
        ));
    }
    assert!(matches!(
        Lock::new(
            [NodeConfig::cluster(Vec::<String>::new())],
            LockOptions::new()
        ),
        Err(Error::Config(ConfigError::InvalidNode { .. }))
    ));
    assert!(matches!(
        Lock::new(
            [
                NodeConfig::cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]),
                NodeConfig::from_url("redis://127.0.0.1:7001"),
                NodeConfig::from_url("redis://127.0.0.1:7002"),
            ],
            LockOptions::new()
        ),
        Err(Error::Config(ConfigError::DuplicateNode {
            first: 0,
            second: 1,
            ..
        }))
    ));
}

#[tokio::test]
async fn a_fenced_resource_keeps_its_key_and_counter_in_one_slot_and_fences_rise() {
    bounded(async {
        let clusters = clusters(3).await;
        let lock = cluster_lock(&clusters, options().fencing(true));
        let mut fences = Vec::new();
        for _ in 0..3 {
            let guard = lock.try_acquire("invoice-7").await.unwrap();
            fences.push(guard.fence().unwrap());
            guard.release().await;
            lock.settle().await;
        }
        assert!(
            fences.windows(2).all(|pair| pair[0] < pair[1]),
            "{fences:?}"
        );
        let counter = b"quorumlock-fence:{invoice-7}";
        let slot = clusters.key_slot(counter).await.unwrap();
        assert_eq!(slot, clusters.key_slot(&key("invoice-7")).await.unwrap());
    })
    .await;
}

/// One server, one vote across a cluster member and a plain node: member 0's shard serving a
/// resource is also given as node 1 (under another name, so the configuration cannot tell).
/// Whichever claims the server first votes for it; the other is refused, every time.
// promise: cluster-one-vote
#[tokio::test]
async fn a_shard_given_again_as_another_node_votes_once() {
    bounded(async {
        let clusters = clusters(3).await;
        let resource = resource_on(&clusters, 0, "twice").await;
        let shard = clusters
            .shard_url(0, 0)
            .unwrap()
            .replace("127.0.0.1", "localhost");
        let lock = Lock::new(
            [
                NodeConfig::cluster(clusters.seed_urls(0)),
                NodeConfig::from_url(shard),
                NodeConfig::cluster(clusters.seed_urls(2)),
            ],
            options(),
        )
        .unwrap();
        for _ in 0..5 {
            let guard = lock.try_acquire(&resource).await.unwrap();
            let replies: Vec<_> = guard
                .outcomes()
                .iter()
                .map(|outcome| &outcome.reply)
                .collect();
            assert!(
                !(replies[0] == &NodeReply::Ours && replies[1] == &NodeReply::Ours),
                "one server voted for two nodes: {replies:?}"
            );
            guard.release().await;
            lock.settle().await;
        }
    })
    .await;
}

/// `ACL SETUSER quorumlock <rules>` on every shard of every member, as the default user.
async fn set_user_everywhere(clusters: &RedisClusters, rules: &[String]) {
    for member in 0..clusters.members() {
        for shard in 0..clusters.shards() {
            let mut admin = clusters.shard_connection(member, shard).await.unwrap();
            let () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg(crate::acl::USER)
                .arg(rules)
                .query_async(&mut admin)
                .await
                .unwrap();
        }
    }
}

/// A lock over the members as the ACL user: its login given in the seeds only, so that every
/// shard found from the slot map is reached with it too.
fn lock_as_user(clusters: &RedisClusters, options: LockOptions) -> Lock {
    let login = format!("redis://{}:{}@", crate::acl::USER, crate::acl::PASSWORD);
    let nodes = (0..clusters.members()).map(|member| {
        NodeConfig::cluster(
            clusters
                .seed_urls(member)
                .into_iter()
                .map(|url| url.replacen("redis://", &login, 1)),
        )
    });
    Lock::new(nodes, options).unwrap()
}

/// The least-privilege user of `docs/deployment.md` with `+cluster|slots` and `+asking` added
/// runs a lock over cluster members through a slot migration (`ASK`, then `MOVED`); without
/// `+cluster|slots` no member can find its shards, and nothing is granted. (Without `+asking`,
/// the extension during the migration fails on the migrating member with `ASK`.)
#[tokio::test]
async fn the_recommended_acl_user_with_cluster_slots_and_asking_runs_a_cluster_lock() {
    bounded(async {
        let clusters = clusters(3).await;
        let mut rules = crate::acl::recommended();
        rules.extend(["+cluster|slots".to_owned(), "+asking".to_owned()]);
        set_user_everywhere(&clusters, &rules).await;
        let lock = lock_as_user(&clusters, crate::acl::acl_options().quorum_size(3));
        let resource = "acl-ledger";
        let mut guard = lock.try_acquire(resource).await.unwrap();
        guard.extend(Duration::from_secs(10)).await.unwrap();
        let slot = clusters.key_slot(&key(resource)).await.unwrap();
        let target = (clusters.shard_of_slot(0, slot).await.unwrap() + 1) % clusters.shards();
        let migration = clusters.begin_migration(0, slot, target).await.unwrap();
        assert!(migration.move_keys().await.unwrap() >= 1);
        guard.extend(Duration::from_secs(10)).await.unwrap();
        migration.finish().await.unwrap();
        guard.extend(Duration::from_secs(10)).await.unwrap();
        assert_eq!(guard.release().await.held, 3);

        let without: Vec<String> = rules
            .into_iter()
            .filter(|rule| rule != "+cluster|slots")
            .collect();
        set_user_everywhere(&clusters, &without).await;
        let refused = lock_as_user(&clusters, crate::acl::acl_options())
            .try_acquire(resource)
            .await
            .unwrap_err();
        // Decided once two members failed: the third may not have answered yet.
        let denied = refused
            .outcomes()
            .iter()
            .filter(|outcome| {
                matches!(&outcome.reply, NodeReply::Failed(NodeError::NoPermission(message))
                    if message.contains("cluster|slots"))
            })
            .count();
        assert!(denied >= 2, "{refused:?}");
        assert!(
            refused
                .outcomes()
                .iter()
                .all(|outcome| outcome.reply != NodeReply::Ours),
            "{refused:?}"
        );
        nothing_left(&lock, &clusters).await;
    })
    .await;
}
