//! One node's acquire request within a round: handed to its connection only through the
//! acquisition's [`Ledger`], in the same step, and only while the attempt is undecided, so that
//! a release later runs after it there (the ordering rule, `rules/ordering.rs`).

use std::sync::Arc;

use super::ledger::{Ledger, Refused};
use crate::node::acquire::{AcquireCommand, Taken};
use crate::node::wire::answered;
use crate::node::{Lane, Node};
use crate::outcome::NodeError;
use crate::rules::ordering::End;

/// What became of an acquire request.
enum Sent {
    /// The server answered.
    Reply(Taken),
    /// Not handed to the connection; see [`Refused`]. With the server's `run_id`.
    Refused(Refused, Arc<str>),
}

/// Takes the key for the request's token in attempt `attempt` of the acquisition that `ledger`
/// belongs to, with the attempt's [`AcquireCommand`]. The request is handed over through the
/// ledger in the same step that gives it to the connection (the ordering rule); one the ledger
/// refuses is never sent: the attempt was decided ([`Taken::NotOurs`], read by no one), a release
/// of ours is still in flight there ([`NodeError::ReleaseInFlight`]), or this attempt already
/// sent to that server through another node ([`NodeError::SameServer`]). The node's own gate
/// ([`Node::run_vote`]) comes first.
pub(crate) async fn acquire(
    node: &Node,
    command: &AcquireCommand,
    ledger: &Ledger,
    attempt: u32,
) -> Result<Taken, NodeError> {
    let index = node.index();
    let sent = node
        .run_vote(
            &command.slot_key,
            Lane::Requests,
            |mut connection, generation, server| async move {
                let in_flight = match ledger.hand_acquire(attempt, index, generation, &server) {
                    Ok(in_flight) => in_flight,
                    Err(refused) => return Ok(Sent::Refused(refused, server)),
                };
                let reply = command.send(&mut connection).await;
                // A reply that says the key was held leaves nothing of ours there to release.
                in_flight.finish(match &reply {
                    Ok(value) if command.refused(value) => End::Refused,
                    reply => End::replied(answered(reply)),
                });
                command.taken(reply?).map(Sent::Reply)
            },
        )
        .await?;
    match sent {
        Sent::Reply(taken) => Ok(taken),
        Sent::Refused(Refused::Decided, _) => Ok(Taken::NotOurs),
        Sent::Refused(Refused::ReleaseInFlight, _) => Err(NodeError::ReleaseInFlight),
        Sent::Refused(Refused::SameServer(other), server) => Err(NodeError::SameServer {
            node: other,
            run_id: server.to_string(),
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::LockOptions;
    use crate::node::acquire::AcquireRequest;
    use crate::rules::ordering::Plan;
    use crate::rules::resources::Keys;
    use quorumlock_harness::{ClusterOptions, Persistence, TestCluster};
    use redis::AsyncCommands;
    use std::time::Duration;

    /// One server that persists every write, so that the restart guard lets it vote at once.
    pub(crate) async fn one_node() -> TestCluster {
        TestCluster::start(
            ClusterOptions::default()
                .nodes(1)
                .persistence(Persistence::AofAlways),
        )
        .await
        .unwrap()
    }

    /// An acquire request without fencing, as a yes or no.
    pub(crate) async fn take(
        node: &Node,
        key: &[u8],
        token: &str,
        ttl_ms: u64,
        renew_leftover: bool,
        ledger: &Ledger,
        attempt: u32,
    ) -> Result<bool, NodeError> {
        let keys = Keys::One(Arc::from(key));
        let request = AcquireRequest {
            keys: &keys,
            fence_keys: None,
            volatile: false,
            token,
            first_call: true,
            ttl_ms,
            renew_leftover,
            rw: None,
            record: None,
        };
        let taken = acquire(node, &AcquireCommand::new(&request), ledger, attempt).await?;
        Ok(taken == Taken::Ours(None))
    }

    pub(crate) fn node(url: &str) -> Node {
        let settings = LockOptions::new()
            .node_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5));
        crate::node::test_node(0, url, &settings.validate(1).unwrap())
    }

    /// Against a real server: a key of ours left by an earlier attempt counts for us (and gets
    /// the new TTL); a key of someone else's does not; a free key is taken.
    #[tokio::test]
    async fn acquire_or_renew_counts_only_our_own_leftovers() {
        let cluster = one_node().await;
        let node = node(&cluster.urls()[0]);
        let mut direct = cluster.connection(0).await.unwrap();
        let ledger = Ledger::new(1);
        let attempt = ledger.begin();

        let _: () = direct.set_ex("ours", "token-a", 1).await.unwrap();
        assert!(
            take(&node, b"ours", "token-a", 60_000, true, &ledger, attempt)
                .await
                .unwrap()
        );
        let ttl_ms: i64 = direct.pttl("ours").await.unwrap();
        assert!(ttl_ms > 1_000, "the leftover got the new TTL: {ttl_ms}");
        // A plain first attempt never renews: its token cannot have been stored before.
        assert!(
            !take(&node, b"ours", "token-a", 60_000, false, &ledger, attempt)
                .await
                .unwrap()
        );

        let _: () = direct.set("theirs", "token-b").await.unwrap();
        assert!(
            !take(&node, b"theirs", "token-a", 60_000, true, &ledger, attempt)
                .await
                .unwrap()
        );
        let value: String = direct.get("theirs").await.unwrap();
        assert_eq!(value, "token-b");

        assert!(
            take(&node, b"free", "token-a", 60_000, true, &ledger, attempt)
                .await
                .unwrap()
        );
        let value: String = direct.get("free").await.unwrap();
        assert_eq!(value, "token-a");

        // Once the round is decided, a request not yet sent is never sent.
        ledger.decide();
        assert!(
            !take(&node, b"late", "token-a", 60_000, false, &ledger, attempt)
                .await
                .unwrap()
        );
        let exists: bool = direct.exists("late").await.unwrap();
        assert!(!exists);
    }

    /// Two nodes of one acquisition that reach the same server, each believing it holds the
    /// claim on it (as when a claim changes hands in the middle of an acquisition): the attempt
    /// still sends to that server once. Only the next attempt may send there again.
    #[tokio::test]
    async fn one_attempt_sends_to_one_server_once_whatever_the_claims_say() {
        let cluster = one_node().await;
        let settings = LockOptions::new()
            .node_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5))
            .validate(2)
            .unwrap();
        let url = &cluster.urls()[0];
        // Separate claim tables: neither node knows of the other.
        let first = crate::node::test_node(0, url, &settings);
        let second = crate::node::test_node(1, url, &settings);
        let ledger = Ledger::new(2);
        let attempt = ledger.begin();
        assert!(
            take(&first, b"k", "t", 60_000, false, &ledger, attempt)
                .await
                .unwrap()
        );
        let error = take(&second, b"k", "t", 60_000, true, &ledger, attempt)
            .await
            .unwrap_err();
        assert!(
            matches!(error, NodeError::SameServer { node: 0, .. }),
            "{error:?}"
        );
        ledger.decide();
        assert_eq!(
            ledger.plan(1),
            Plan::Skip,
            "nothing went out through node 1"
        );

        let attempt = ledger.begin();
        assert!(
            take(&second, b"k", "t", 60_000, true, &ledger, attempt)
                .await
                .unwrap()
        );
    }
}
