//! The lock's commands on one node: acquire (`SET NX PX`), release (compare-and-delete) and
//! extend (compare-and-`PEXPIRE`), the last two as Lua scripts so the compare and the write are
//! one atomic step. Each answers `true` when the node holds the key for our token.

use std::sync::LazyLock;

use redis::Script;

use crate::error::NodeError;
use crate::node::Node;

/// Sets the key to our token, or, when it already holds our token (a leftover of an earlier
/// attempt of the same acquisition), renews its expiry: our own leftovers count for us.
static ACQUIRE_OR_RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0",
    )
});

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
pub(crate) async fn acquire(
    node: &Node,
    key: &[u8],
    token: &str,
    ttl_ms: u64,
    renew_leftover: bool,
) -> Result<bool, NodeError> {
    if renew_leftover {
        return node
            .run(|mut connection| async move {
                ACQUIRE_OR_RENEW
                    .key(key)
                    .arg(token)
                    .arg(ttl_ms)
                    .invoke_async(&mut connection)
                    .await
            })
            .await
            .and_then(flag);
    }
    let reply: Option<String> = node
        .run(|mut connection| async move {
            redis::cmd("SET")
                .arg(key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query_async(&mut connection)
                .await
        })
        .await?;
    Ok(reply.is_some())
}

/// Deletes the key if it still holds `token`.
pub(crate) async fn release(node: &Node, key: &[u8], token: &str) -> Result<bool, NodeError> {
    node.run(|mut connection| async move {
        RELEASE
            .key(key)
            .arg(token)
            .invoke_async(&mut connection)
            .await
    })
    .await
    .and_then(flag)
}

/// Sets the key's expiry to `ttl_ms` if it still holds `token`.
pub(crate) async fn extend(
    node: &Node,
    key: &[u8],
    token: &str,
    ttl_ms: u64,
) -> Result<bool, NodeError> {
    node.run(|mut connection| async move {
        EXTEND
            .key(key)
            .arg(token)
            .arg(ttl_ms)
            .invoke_async(&mut connection)
            .await
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
