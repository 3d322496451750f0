//! How long a lock key has left on one node, for a waiter's bound on when to try again without
//! a wake-up (`rules/wait.rs`). Read-only, so it passes no gate.
//!
//! `PTTL` alone counts whole milliseconds, and Redis expires a key only once its millisecond
//! clock has passed the deadline, so a bound from it alone must add a millisecond. Read with the
//! server's `TIME` in one script, the bound knows where in that millisecond the server is.

use std::sync::LazyLock;

use redis::Script;

use super::Node;
use crate::outcome::NodeError;
use crate::rules::wait::KeyTtl;

/// `PTTL` of `KEYS[1]`, then the microseconds into the server's current millisecond. `PTTL` is
/// read first: were the clock to pass a millisecond between the two, the bound comes out late,
/// never early.
static PTTL_AND_PHASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local left = redis.call('PTTL', KEYS[1])
return {left, tonumber(redis.call('TIME')[2]) % 1000}",
    )
});

/// The key's remaining time on `node`. A server that refuses the script (an ACL without
/// `+time`, say) is asked for `PTTL` alone.
pub(crate) async fn pttl(node: &Node, key: &[u8]) -> Result<KeyTtl, NodeError> {
    let read = node
        .run(key, |mut connection, _generation| async move {
            PTTL_AND_PHASE
                .key(key)
                .invoke_async::<(i64, i64)>(&mut connection)
                .await
        })
        .await;
    match read {
        Ok((left, phase)) => Ok(KeyTtl::from_pttl(left, Some(phase))),
        Err(NodeError::NoPermission(_) | NodeError::Server { .. } | NodeError::Protocol(_)) => node
            .run(key, |mut connection, _generation| async move {
                redis::cmd("PTTL")
                    .arg(key)
                    .query_async::<i64>(&mut connection)
                    .await
            })
            .await
            .map(|left| KeyTtl::from_pttl(left, None)),
        Err(error) => Err(error),
    }
}

/// [`PTTL_AND_PHASE`] for every key of `KEYS`: their `PTTL`s, then the microseconds into the
/// server's current millisecond.
static PTTLS_AND_PHASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local left = {}
for i, key in ipairs(KEYS) do left[i] = redis.call('PTTL', key) end
left[#KEYS + 1] = tonumber(redis.call('TIME')[2]) % 1000
return left",
    )
});

/// Each of `keys`' remaining time on `node`, in order: one script for all of them on a server
/// (a set's waiter reads every key, a semaphore's every slot: one command per node, not one per
/// key); one [`pttl`] each on a cluster node (a semaphore's slots are in different hash slots
/// there) or where the script is refused.
pub(crate) async fn pttls(node: &Node, keys: &[&[u8]]) -> Vec<KeyTtl> {
    if let Some(first) = keys.first()
        && keys.len() > 1
        && !node.routes_by_slot()
    {
        let read = node
            .run(first, |mut connection, _generation| async move {
                let mut invocation = PTTLS_AND_PHASE.prepare_invoke();
                for key in keys {
                    invocation.key(*key);
                }
                invocation.invoke_async::<Vec<i64>>(&mut connection).await
            })
            .await;
        match read {
            Ok(mut replies) if replies.len() == keys.len().saturating_add(1) => {
                let phase = replies.pop();
                return replies
                    .into_iter()
                    .map(|left| KeyTtl::from_pttl(left, phase))
                    .collect();
            }
            // Refused (an ACL without `+time`, say): each key alone, as `pttl` falls back.
            Ok(_)
            | Err(NodeError::NoPermission(_) | NodeError::Server { .. } | NodeError::Protocol(_)) =>
                {}
            Err(_) => return vec![KeyTtl::Unknown; keys.len()],
        }
    }
    futures::future::join_all(
        keys.iter()
            .map(|key| async move { pttl(node, key).await.unwrap_or(KeyTtl::Unknown) }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockOptions;
    use quorumlock_harness::{ClusterOptions, TestCluster};
    use redis::AsyncCommands;
    use std::time::Duration;

    /// Against a real server: a key's remaining time is read to the microsecond (the server's
    /// place in its millisecond taken off), within the millisecond past `PTTL` that Redis waits;
    /// no key and no expiry read as what they are; many keys in one script (the server's clock
    /// read once) answer as each alone.
    #[tokio::test]
    async fn a_keys_time_left_is_read_below_the_millisecond_alone_or_with_others() {
        let cluster = TestCluster::start(ClusterOptions::default().nodes(1))
            .await
            .unwrap();
        let settings = LockOptions::new().validate(1).unwrap();
        let node = crate::node::test_node(0, &cluster.urls()[0], &settings);
        let mut direct = cluster.connection(0).await.unwrap();
        let _: () = direct.pset_ex("expiring", "token", 60_000).await.unwrap();
        let _: () = direct.set("forever", "token").await.unwrap();
        let expiring = |ttl: KeyTtl| {
            let KeyTtl::Expires(left) = ttl else {
                panic!("a key with an expiry reads as expiring: {ttl:?}");
            };
            assert!(left <= Duration::from_millis(60_001), "{left:?}");
            assert!(left > Duration::from_millis(59_000), "{left:?}");
            left
        };

        let read = pttls(&node, &[b"forever", b"absent", b"expiring"]).await;
        assert_eq!(read.len(), 3);
        assert_eq!(read[..2], [KeyTtl::Persistent, KeyTtl::Absent]);
        expiring(read[2]);
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut direct)
            .await
            .unwrap();
        assert!(
            stats.contains("cmdstat_time:calls=1,"),
            "one script, not a read per key: {stats}"
        );

        assert_eq!(pttl(&node, b"absent").await.unwrap(), KeyTtl::Absent);
        assert_eq!(pttl(&node, b"forever").await.unwrap(), KeyTtl::Persistent);
        let mut whole_ms = 0;
        for _ in 0..5 {
            let left = expiring(pttl(&node, b"expiring").await.unwrap());
            whole_ms += usize::from(left.subsec_micros() % 1000 == 0);
        }
        // Each read lands on a whole millisecond one time in a thousand; without the server's
        // phase, every one does.
        assert!(whole_ms < 5, "no read knew the phase");
    }
}
