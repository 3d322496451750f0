//! The extend command on one node: a new expiry only while the key holds our token
//! (compare-and-`PEXPIRE`: one Lua script, or `SET … IFEQ … PX` where the connection's server
//! offers it, `rules/commands.rs`), counted only for the node that holds the claim on its server
//! (`vote.rs`).

use std::sync::LazyLock;

use redis::Script;

use super::vote::Counted;
use super::wire::one_or_zero;
use super::{Lane, Node};
use crate::outcome::NodeError;

/// Sets a new expiry only while the key holds our token.
static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0",
    )
});

/// Sets the key's expiry to `ttl_ms` if it still holds `token`.
pub(crate) async fn extend(
    node: &Node,
    key: &[u8],
    token: &str,
    ttl_ms: u64,
) -> Result<bool, NodeError> {
    node.run_counted(
        key,
        Counted::Extend,
        Lane::Requests,
        |mut connection, _generation, commands| async move {
            if commands.set_ifeq {
                // The same compare-and-expire without a script: `OK` where the key held our
                // token (its value rewritten to itself, its expiry set), nil elsewhere.
                let reply: Option<String> = redis::cmd("SET")
                    .arg(key)
                    .arg(token)
                    .arg("IFEQ")
                    .arg(token)
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut connection)
                    .await?;
                return Ok(i64::from(reply.is_some()));
            }
            EXTEND
                .key(key)
                .arg(token)
                .arg(ttl_ms)
                .invoke_async(&mut connection)
                .await
        },
    )
    .await
    .and_then(one_or_zero)
}
