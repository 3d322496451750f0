//! An election's leader record on one node (`rules/leader.rs`): written by a leader only where
//! its lock key holds its token, and announced on the record's channel so observers are woken.
//! It is read with the lock key in `inspect.rs`.

use std::sync::LazyLock;

use redis::Script;

use super::Node;
use super::wire::one_or_zero;
use crate::outcome::NodeError;

/// Where `KEYS[1]` (the lock key) holds the token `ARGV[1]`, writes the record `KEYS[2]` (token,
/// term `ARGV[2]`, value `ARGV[3]`), publishes on its name, and answers 1; else 0. The record
/// has no expiry: it is read only beside the lock key holding its token, and the next leader
/// writes over it.
static PUBLISH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'term', ARGV[2], 'value', ARGV[3])
redis.call('PUBLISH', KEYS[2], ARGV[2])
return 1",
    )
});

/// Writes the record of the leader `token` of `term` on `node`, if the lock key still holds
/// `token` there. Answers whether it did.
pub(crate) async fn publish(
    node: &Node,
    key: &[u8],
    record_key: &[u8],
    token: &str,
    term: u64,
    value: &[u8],
) -> Result<bool, NodeError> {
    node.run(key, |mut connection, _generation| async move {
        PUBLISH
            .key(key)
            .key(record_key)
            .arg(token)
            .arg(term)
            .arg(value)
            .invoke_async::<i64>(&mut connection)
            .await
    })
    .await
    .and_then(one_or_zero)
}
