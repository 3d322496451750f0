//! Self-tests of [`RedisClusters`]: independent local Redis Clusters as quorum members. Each
//! test states one thing a lock test relying on it expects: the members start covering every
//! slot, keys are found where they were written, a killed shard fails its slots and comes back
//! with its keys, and slots move between shards by hand or with `redis-cli`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use common::{LONG, bounded, connect};
use nix::errno::Errno;
use nix::sys::signal;
use nix::unistd::Pid;
use quorumlock_harness::{HarnessError, RedisClusters, RedisClustersOptions};
use redis::aio::MultiplexedConnection;

/// Whether a process with this id still exists (a zombie counts as existing).
fn process_exists(pid: u32) -> bool {
    match signal::kill(Pid::from_raw(i32::try_from(pid).unwrap()), None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(err) => panic!("checking pid {pid}: {err}"),
    }
}

async fn start(members: usize, shards: usize) -> RedisClusters {
    let started = Instant::now();
    let clusters = RedisClusters::start(
        RedisClustersOptions::default()
            .members(members)
            .shards(shards),
    )
    .await
    .unwrap();
    eprintln!(
        "{members} × {shards} redis clusters started in {:?}",
        started.elapsed()
    );
    clusters
}

/// The shard of `member` that serves `key` now.
async fn shard_of_key(clusters: &RedisClusters, member: usize, key: &str) -> usize {
    let slot = clusters.key_slot(key.as_bytes()).await.unwrap();
    clusters.shard_of_slot(member, slot).await.unwrap()
}

async fn shard(clusters: &RedisClusters, member: usize, shard: usize) -> MultiplexedConnection {
    connect(&clusters.shard_url(member, shard).unwrap(), LONG)
        .await
        .unwrap()
}

async fn set(
    connection: &mut MultiplexedConnection,
    key: &str,
    value: &str,
) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(connection)
        .await
}

async fn get(
    connection: &mut MultiplexedConnection,
    key: &str,
) -> redis::RedisResult<Option<String>> {
    redis::cmd("GET").arg(key).query_async(connection).await
}

/// How many slots each port serves, from `CLUSTER NODES` on `connection`.
async fn slots_per_port(connection: &mut MultiplexedConnection) -> BTreeMap<u16, usize> {
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(connection)
        .await
        .unwrap();
    let mut counts = BTreeMap::new();
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let port: u16 = fields[1]
            .split(['@', ','])
            .next()
            .and_then(|addr| addr.rsplit(':').next())
            .unwrap()
            .parse()
            .unwrap();
        let slots: usize = fields[8..]
            .iter()
            .filter(|range| !range.starts_with('['))
            .map(|range| match range.split_once('-') {
                Some((first, last)) => {
                    last.parse::<usize>().unwrap() - first.parse::<usize>().unwrap() + 1
                }
                None => 1,
            })
            .sum();
        counts.insert(port, slots);
    }
    counts
}

fn port(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_of_three_shards_each_cover_every_slot_with_three_distinct_shards() {
    bounded(async {
        let clusters = RedisClusters::start(RedisClustersOptions::default())
            .await
            .unwrap();
        assert_eq!((clusters.members(), clusters.shards()), (3, 3));
        let mut all_ports = BTreeSet::new();
        for member in 0..3 {
            let seeds = clusters.seed_urls(member);
            assert_eq!(seeds.len(), 3);
            for (index, seed) in seeds.iter().enumerate() {
                assert_eq!(*seed, clusters.shard_url(member, index).unwrap());
                assert!(seed.starts_with("redis://127.0.0.1:"), "{seed}");
                all_ports.insert(port(seed));
            }
            // Every slot is served, each shard serves a third, and the member knows only its own shards.
            let mut connection = shard(&clusters, member, 0).await;
            let counts = slots_per_port(&mut connection).await;
            let ports: BTreeSet<u16> = seeds.iter().map(|seed| port(seed)).collect();
            assert_eq!(counts.keys().copied().collect::<BTreeSet<_>>(), ports);
            assert_eq!(counts.values().sum::<usize>(), 16384);
            assert!(counts.values().all(|&slots| slots >= 5461), "{counts:?}");
            let served: BTreeSet<usize> = futures::future::join_all(
                [0, 5460, 5461, 10922, 10923, 16383]
                    .map(|slot| clusters.shard_of_slot(member, slot)),
            )
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
            assert_eq!(served, BTreeSet::from([0, 1, 2]));
        }
        assert_eq!(all_ports.len(), 9, "every shard has a port of its own");
        assert!(matches!(
            clusters.shard_url(3, 0),
            Err(HarnessError::NoSuchShard { member: 3, .. })
        ));
        assert!(matches!(
            clusters.shard_url(0, 3),
            Err(HarnessError::NoSuchShard {
                member: 0,
                shard: 3
            })
        ));
        assert!(clusters.seed_urls(3).is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3x3_start_takes_a_few_seconds() {
    bounded(async {
        let started = Instant::now();
        let clusters = start(3, 3).await;
        let elapsed = started.elapsed();
        assert!(elapsed.as_secs() < 15, "took {elapsed:?}");
        drop(clusters);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_set_through_its_shard_is_seen_by_keys_of_its_member_only() {
    bounded(async {
        let clusters = start(2, 3).await;
        let owner = shard_of_key(&clusters, 0, "lock:a").await;
        let mut connection = shard(&clusters, 0, owner).await;
        set(&mut connection, "lock:a", "token").await.unwrap();
        // A shard that does not serve the slot redirects instead of storing it.
        let other = (owner + 1) % 3;
        let mut elsewhere = shard(&clusters, 0, other).await;
        let moved = set(&mut elsewhere, "lock:a", "token").await.unwrap_err();
        assert_eq!(moved.code(), Some("MOVED"), "{moved}");

        assert_eq!(clusters.keys(0).await.unwrap(), vec![b"lock:a".to_vec()]);
        assert!(clusters.keys(1).await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shard_fails_its_slots_and_comes_back_with_its_key_after_restart() {
    bounded(async {
        let mut clusters = start(2, 3).await;
        let owner = shard_of_key(&clusters, 0, "lock:k").await;
        set(&mut shard(&clusters, 0, owner).await, "lock:k", "token")
            .await
            .unwrap();
        let pid = clusters.shard_pid(0, owner).unwrap().unwrap();

        clusters.kill_shard(0, owner).await.unwrap();
        assert_eq!(clusters.shard_pid(0, owner).unwrap(), None);
        assert!(!process_exists(pid), "killed and reaped");
        // The key's slot has no server: a write to it fails.
        match clusters.shard_connection(0, owner).await {
            Err(_) => {}
            Ok(mut connection) => {
                set(&mut connection, "lock:k", "other").await.unwrap_err();
            }
        }
        // The other member is unaffected.
        let owner1 = shard_of_key(&clusters, 1, "lock:k").await;
        set(&mut shard(&clusters, 1, owner1).await, "lock:k", "token")
            .await
            .unwrap();

        clusters.restart_shard(0, owner).await.unwrap();
        let new_pid = clusters.shard_pid(0, owner).unwrap().unwrap();
        assert_ne!(new_pid, pid);
        assert_eq!(shard_of_key(&clusters, 0, "lock:k").await, owner);
        let mut connection = clusters.shard_connection(0, owner).await.unwrap();
        assert_eq!(
            get(&mut connection, "lock:k").await.unwrap().as_deref(),
            Some("token"),
            "AOF kept the key"
        );
        set(&mut connection, "lock:k", "again").await.unwrap();
        assert!(matches!(
            clusters.restart_shard(0, owner).await,
            Err(HarnessError::AlreadyRunning(_))
        ));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_down_past_the_node_timeout_takes_its_member_down_until_it_is_restarted() {
    bounded(async {
        let mut clusters = start(1, 3).await;
        let killed = shard_of_key(&clusters, 0, "lock:down").await;
        let alive = (killed + 1) % 3;
        // A key the surviving shard serves.
        let mut key = None;
        for index in 0..1000 {
            let candidate = format!("lock:alive:{index}");
            if shard_of_key(&clusters, 0, &candidate).await == alive {
                key = Some(candidate);
                break;
            }
        }
        let key = key.unwrap();
        set(&mut shard(&clusters, 0, killed).await, "lock:down", "token")
            .await
            .unwrap();

        clusters.kill_shard(0, killed).await.unwrap();
        // Once the others count it as failed (node timeout 2 s), the whole member refuses.
        let mut survivor = shard(&clusters, 0, alive).await;
        let refused =
            quorumlock_harness::eventually(std::time::Duration::from_secs(10), async || {
                matches!(
                    set(&mut survivor, &key, "token").await,
                    Err(err) if err.code() == Some("CLUSTERDOWN")
                )
            })
            .await;
        assert!(refused, "the member never answered CLUSTERDOWN");

        let started = Instant::now();
        clusters.restart_shard(0, killed).await.unwrap();
        eprintln!("restart after a failure took {:?}", started.elapsed());
        set(&mut survivor, &key, "token").await.unwrap();
        let mut back = clusters.shard_connection(0, killed).await.unwrap();
        assert_eq!(
            get(&mut back, "lock:down").await.unwrap().as_deref(),
            Some("token")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_moves_a_keys_slot_and_the_key_to_the_target() {
    bounded(async {
        let clusters = start(1, 3).await;
        let slot = clusters.key_slot(b"lock:m").await.unwrap();
        let source = clusters.shard_of_slot(0, slot).await.unwrap();
        let target = (source + 1) % 3;
        set(&mut shard(&clusters, 0, source).await, "lock:m", "token")
            .await
            .unwrap();

        let migration = clusters.begin_migration(0, slot, target).await.unwrap();
        assert_eq!(migration.slot(), slot);
        // Mid-migration: the source still serves the slot and still has the key.
        assert_eq!(clusters.shard_of_slot(0, slot).await.unwrap(), source);
        let mut from = shard(&clusters, 0, source).await;
        assert_eq!(
            get(&mut from, "lock:m").await.unwrap().as_deref(),
            Some("token")
        );

        assert_eq!(migration.move_keys().await.unwrap(), 1);
        // Moved: the source sends a client to the target with ASK.
        let ask = get(&mut from, "lock:m").await.unwrap_err();
        assert_eq!(ask.code(), Some("ASK"), "{ask}");

        migration.finish().await.unwrap();
        assert_eq!(clusters.shard_of_slot(0, slot).await.unwrap(), target);
        let mut to = shard(&clusters, 0, target).await;
        assert_eq!(
            get(&mut to, "lock:m").await.unwrap().as_deref(),
            Some("token")
        );
        let moved = get(&mut from, "lock:m").await.unwrap_err();
        assert_eq!(moved.code(), Some("MOVED"), "{moved}");
        // Every shard agrees.
        for index in 0..3 {
            let counts = slots_per_port(&mut shard(&clusters, 0, index).await).await;
            assert_eq!(counts.values().sum::<usize>(), 16384);
        }
        assert!(matches!(
            clusters.begin_migration(0, slot, target).await,
            Err(HarnessError::ClusterReply { .. })
        ));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reshard_moves_the_given_number_of_slots() {
    bounded(async {
        let clusters = start(1, 3).await;
        let from_port = port(&clusters.shard_url(0, 0).unwrap());
        let to_port = port(&clusters.shard_url(0, 2).unwrap());
        let before = slots_per_port(&mut shard(&clusters, 0, 1).await).await;

        clusters.reshard(0, 0, 2, 100).await.unwrap();

        for index in 0..3 {
            let after = slots_per_port(&mut shard(&clusters, 0, index).await).await;
            assert_eq!(after[&from_port], before[&from_port] - 100);
            assert_eq!(after[&to_port], before[&to_port] + 100);
            assert_eq!(after.values().sum::<usize>(), 16384);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_of_one_and_of_two_shards_start() {
    bounded(async {
        let (one, two) = futures::join!(start(2, 1), start(1, 2));
        for member in 0..2 {
            assert_eq!(one.shard_of_slot(member, 0).await.unwrap(), 0);
            assert_eq!(one.shard_of_slot(member, 16383).await.unwrap(), 0);
            set(&mut shard(&one, member, 0).await, "lock:1", "token")
                .await
                .unwrap();
        }
        assert_eq!(two.shard_of_slot(0, 0).await.unwrap(), 0);
        assert_eq!(two.shard_of_slot(0, 16383).await.unwrap(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_of_five_shards_starts() {
    bounded(async {
        let clusters = start(1, 5).await;
        let counts = slots_per_port(&mut shard(&clusters, 0, 4).await).await;
        assert_eq!(counts.len(), 5);
        assert_eq!(counts.values().sum::<usize>(), 16384);
    })
    .await;
}

#[tokio::test]
async fn no_shard_is_an_error() {
    let shape = RedisClusters::start(RedisClustersOptions::default().shards(0)).await;
    assert!(matches!(
        shape,
        Err(HarnessError::InvalidClusterShape {
            members: 3,
            shards: 0
        })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_kills_and_reaps_every_shard() {
    bounded(async {
        let clusters = start(2, 2).await;
        let pids: Vec<u32> = (0..2)
            .flat_map(|member| (0..2).map(move |shard| (member, shard)))
            .map(|(member, shard)| clusters.shard_pid(member, shard).unwrap().unwrap())
            .collect();
        assert!(pids.iter().all(|&pid| process_exists(pid)));
        drop(clusters);
        assert!(pids.iter().all(|&pid| !process_exists(pid)));
    })
    .await;
}
