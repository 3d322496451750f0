//! The lock's commands on one node: acquire (`SET NX PX`), release (compare-and-delete) and
//! extend (compare-and-`PEXPIRE`), the last two as Lua scripts so the compare and the write are
//! one atomic step. Each answers `true` when the node holds the key for our token.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::Script;

use crate::error::NodeError;
use crate::node::Node;

/// Sets the key to our token, or, when it already holds our token (a leftover of an earlier
/// attempt of the same acquisition), renews its expiry: our own leftovers count for us.
///
/// Sent with `EVAL`, not `EVALSHA`: one command, never a NOSCRIPT round trip, so the request goes
/// out in the same step that checks the acquisition is still undecided (see [`acquire`]).
/// Retries are rare enough that the script's bytes cost nothing.
const ACQUIRE_OR_RENEW: &str = r"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0";

/// Deletes the key only while it holds our token.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0",
    )
});

/// Sets a new expiry only while the key holds our token.
static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0",
    )
});

/// Takes the key for `token`. The first attempt of an acquisition uses a plain `SET NX PX`
/// (its token is new, so no key of ours can exist yet); later attempts use the script that also
/// accepts and renews a leftover of an earlier attempt.
///
/// `undecided` is cleared when the acquisition's round is decided. The request is sent only
/// while it is set, checked in the same step that hands the request to the connection: a
/// request still waiting for its connection at the decision is never sent (and answers `false`),
/// so it cannot land after a release that overtook it. One already sent runs, and a release
/// sent later on the same connection comes after it.
pub(crate) async fn acquire(
    node: &Node,
    key: &[u8],
    token: &str,
    ttl_ms: u64,
    renew_leftover: bool,
    undecided: &AtomicBool,
) -> Result<bool, NodeError> {
    let reply: Option<i64> = node
        .run(|mut connection| async move {
            if !undecided.load(Ordering::Acquire) {
                return Ok(None);
            }
            if renew_leftover {
                return redis::cmd("EVAL")
                    .arg(ACQUIRE_OR_RENEW)
                    .arg(1)
                    .arg(key)
                    .arg(token)
                    .arg(ttl_ms)
                    .query_async(&mut connection)
                    .await
                    .map(Some);
            }
            let set: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query_async(&mut connection)
                .await?;
            Ok(Some(i64::from(set.is_some())))
        })
        .await?;
    reply.map_or(Ok(false), flag)
}

/// Deletes the key if it still holds `token`.
pub(crate) async fn release(node: &Node, key: &[u8], token: &str) -> Result<bool, NodeError> {
    run_script(node, &RELEASE, key, token, None).await
}

/// Sets the key's expiry to `ttl_ms` if it still holds `token`.
pub(crate) async fn extend(
    node: &Node,
    key: &[u8],
    token: &str,
    ttl_ms: u64,
) -> Result<bool, NodeError> {
    run_script(node, &EXTEND, key, token, Some(ttl_ms)).await
}

/// Runs one of our scripts with the key, the token and (for those that set an expiry) the TTL.
async fn run_script(
    node: &Node,
    script: &Script,
    key: &[u8],
    token: &str,
    ttl_ms: Option<u64>,
) -> Result<bool, NodeError> {
    node.run(|mut connection| async move {
        let mut invocation = script.key(key);
        invocation.arg(token);
        if let Some(ttl_ms) = ttl_ms {
            invocation.arg(ttl_ms);
        }
        invocation.invoke_async(&mut connection).await
    })
    .await
    .and_then(flag)
}

/// Our scripts answer 1 (done) or 0 (not ours); anything else is a protocol error.
fn flag(reply: i64) -> Result<bool, NodeError> {
    match reply {
        1 => Ok(true),
        0 => Ok(false),
        other => Err(NodeError::Protocol(format!("script answered {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockOptions;
    use quorumlock_harness::TestCluster;
    use redis::AsyncCommands;

    /// Against a real server: a key of ours left by an earlier attempt counts for us (and gets
    /// the new TTL); a key of someone else's does not; a free key is taken.
    #[tokio::test]
    async fn acquire_or_renew_counts_only_our_own_leftovers() {
        let cluster = TestCluster::with_nodes(1).await.unwrap();
        let settings = LockOptions::new().node_timeout(std::time::Duration::from_secs(5));
        let node = Node::new(0, &cluster.urls()[0], &settings.validate(1).unwrap()).unwrap();
        let mut direct = cluster.connection(0).await.unwrap();
        let open = AtomicBool::new(true);

        let _: () = direct.set_ex("ours", "token-a", 1).await.unwrap();
        assert!(
            acquire(&node, b"ours", "token-a", 60_000, true, &open)
                .await
                .unwrap()
        );
        let ttl_ms: i64 = direct.pttl("ours").await.unwrap();
        assert!(ttl_ms > 1_000, "the leftover got the new TTL: {ttl_ms}");
        // A plain first attempt never renews: its token cannot have been stored before.
        assert!(
            !acquire(&node, b"ours", "token-a", 60_000, false, &open)
                .await
                .unwrap()
        );

        let _: () = direct.set("theirs", "token-b").await.unwrap();
        assert!(
            !acquire(&node, b"theirs", "token-a", 60_000, true, &open)
                .await
                .unwrap()
        );
        let value: String = direct.get("theirs").await.unwrap();
        assert_eq!(value, "token-b");

        assert!(
            acquire(&node, b"free", "token-a", 60_000, true, &open)
                .await
                .unwrap()
        );
        let value: String = direct.get("free").await.unwrap();
        assert_eq!(value, "token-a");

        // Once the round is decided, a request not yet sent is never sent.
        open.store(false, Ordering::Release);
        assert!(
            !acquire(&node, b"late", "token-a", 60_000, false, &open)
                .await
                .unwrap()
        );
        let exists: bool = direct.exists("late").await.unwrap();
        assert!(!exists);
    }
}
