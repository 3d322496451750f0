//! Leases that outlive the process that took them, against real servers: `Guard::detach` hands a
//! lease on without releasing it, and `Lock::resume` (another lock, as another process would
//! hold) takes it back once a quorum confirmed its token, or refuses it (and releases what was
//! left) when the lease is gone.

use std::time::{Duration, SystemTime};

use quorumlock::{Detached, Error, Lock, NodeReply, Owner, Patience, Request, Resources, Token};
use redis::AsyncCommands;

use crate::common::{bounded, cluster, key_count, once, stored, until};

/// A scheduler takes the lock and detaches it; the lock stays held; a worker's lock resumes
/// it with the same token and fence, extends it and releases it on every node.
// promise: lease-resume
#[tokio::test]
async fn a_detached_lease_is_resumed_by_another_lock_and_released_there() {
    bounded(async {
        let servers = cluster(3).await;
        let options = once().fencing(true).ttl(Duration::from_secs(10));
        let scheduler = Lock::new(servers.urls(), options.clone()).unwrap();
        let guard = scheduler.acquire("job").await.unwrap();
        // The acquisition returned at a quorum; a request to the third node still in flight
        // finishes in the background, and landing after the worker's release it would set the
        // key again. (One whose connection was not yet made by the decision is never sent: the
        // lease may be on two nodes only.)
        scheduler.settle().await;
        let fence = guard.fence().unwrap();
        let lease = guard.detach().unwrap();
        assert_eq!(lease.resources, [b"job".to_vec()]);
        assert_eq!(lease.fence, Some(fence));
        assert!(matches!(
            scheduler.try_acquire("job").await,
            Err(Error::Held { .. })
        ));

        // The worker gets the values as text, as another process would.
        let token = Token::parse(&lease.token.to_string()).unwrap();
        let handed = Detached::new("job", token, lease.valid_until).fence(fence);
        let worker = Lock::new(servers.urls(), options).unwrap();
        let mut resumed = worker.resume(&handed).await.unwrap();
        assert!(resumed.is_valid());
        assert_eq!(resumed.token(), &lease.token);
        assert_eq!(resumed.fence(), Some(fence));
        resumed.extend(Duration::from_secs(10)).await.unwrap();
        let key = resumed.key().to_vec();
        // The release returns once a quorum is free: a node that never had the key counts.
        let report = resumed.release().await;
        assert!(report.held >= 1, "{report:?}");
        worker.settle().await;
        for node in 0..3 {
            assert_eq!(stored(&servers, node, &key).await, None, "node {node}");
        }
    })
    .await;
}

/// A lease whose keys expired and were taken by another holder is not resumed, and the holder
/// keeps its keys; a lease past its deadline is refused without a word to the nodes.
// promise: lease-resume
#[tokio::test]
async fn a_lease_taken_since_or_past_its_deadline_is_not_resumed() {
    bounded(async {
        let servers = cluster(3).await;
        let lock = Lock::new(servers.urls(), once()).unwrap();
        let short = Request::from("gone").ttl(Duration::from_millis(200));
        let lease = lock.acquire(short).await.unwrap().detach().unwrap();
        let next = Request::from("gone").patience(Patience::Wait(Duration::from_secs(10)));
        let holder = lock.acquire(next).await.unwrap();
        // The holder won once a quorum was free; the lease's key on the last node expires a
        // moment later (each node counts its 200 ms from its own SET).
        until(async || {
            for node in 0..3 {
                if stored(&servers, node, holder.key()).await.as_deref()
                    == Some(lease.token.as_str())
                {
                    return false;
                }
            }
            true
        })
        .await;

        let later = SystemTime::now() + Duration::from_secs(60);
        let taken = Detached::new("gone", lease.token.clone(), later);
        match lock.resume(&taken).await {
            Err(Error::NotResumed { outcomes, .. }) => {
                assert!(
                    outcomes.iter().all(|o| o.reply != NodeReply::Ours),
                    "{outcomes:?}"
                );
            }
            other => panic!("a lease taken since: {other:?}"),
        }
        lock.settle().await;
        // The holder's keys are untouched: on a quorum at least (a request whose connection
        // was not made by the decision is never sent), and the old lease's nowhere.
        let key = holder.key().to_vec();
        let mut held = 0;
        for node in 0..3 {
            let stored = stored(&servers, node, &key).await;
            assert_ne!(stored.as_deref(), Some(lease.token.as_str()), "node {node}");
            held += usize::from(stored.as_deref() == Some(holder.token().as_str()));
        }
        assert!(held >= 2, "the holder's key on {held} nodes");

        let past = Detached::new("gone", holder.token().clone(), SystemTime::now());
        match lock.resume(&past).await {
            Err(Error::NotResumed { outcomes, .. }) => assert!(outcomes.is_empty()),
            other => panic!("a lease past its deadline: {other:?}"),
        }
        assert!(holder.is_valid());
        assert!(holder.release().await.held >= 1);
    })
    .await;
}

/// A lease left on one node of three (a majority lost it) is not resumed, and what was left of
/// it is released.
#[tokio::test]
async fn a_failed_resume_releases_what_was_left() {
    bounded(async {
        let servers = cluster(3).await;
        let lock = Lock::new(servers.urls(), once().ttl(Duration::from_secs(60))).unwrap();
        let guard = lock.acquire("partial").await.unwrap();
        let key = guard.key().to_vec();
        let lease = guard.detach().unwrap();
        for node in 1..3 {
            let mut connection = servers.connection(node).await.unwrap();
            let _: () = connection.del(&key).await.unwrap();
        }
        assert!(matches!(
            lock.resume(&lease).await,
            Err(Error::NotResumed { .. })
        ));
        lock.settle().await;
        assert_eq!(stored(&servers, 0, &key).await, None);
    })
    .await;
}

/// A set's lease detaches and resumes whole; an owner's guard and a reader's do not detach.
#[tokio::test]
async fn a_set_resumes_whole_and_an_owners_or_a_readers_guard_stays() {
    bounded(async {
        let servers = cluster(3).await;
        let lock = Lock::new(servers.urls(), once()).unwrap();
        let set = Resources::new(["a", "b"]).unwrap();
        let lease = lock.acquire(&set).await.unwrap().detach().unwrap();
        assert_eq!(lease.resources, [b"a".to_vec(), b"b".to_vec()]);
        let resumed = lock.resume(&lease).await.unwrap();
        assert_eq!(resumed.resources().count(), 2);
        assert!(resumed.release().await.held >= 1);
        lock.settle().await;
        for node in 0..3 {
            assert_eq!(key_count(&servers, node).await, 0, "node {node}");
        }

        let owned = lock
            .acquire(Request::from("owned").owner(Owner::new()))
            .await
            .unwrap();
        let kept = owned.detach().unwrap_err();
        assert!(kept.is_valid());
        kept.release().await;
        let reading = lock.acquire(Request::from("read").read()).await.unwrap();
        reading.detach().unwrap_err().release().await;
    })
    .await;
}
