//! What one node holds of a resource, read in one script so that it is of one instant: the lock
//! key's token and `PTTL`, the fence counter, and an election's leader record beside the key
//! (`rules/leader.rs` reads a leader from these; `Lock::inspect` shows them).

use std::sync::LazyLock;

use redis::Script;

use super::Node;
use crate::outcome::NodeError;
use crate::rules::leader::{Record, View};

/// The lock key `KEYS[1]`'s token and `PTTL`, the record `KEYS[2]`'s token, term and value, and
/// the counter `KEYS[3]`'s value (a plain integer, or a volatile node's hash: `node/counter.rs`).
/// A lock key that is not a string (another program's key of that name) reads as none.
static READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local holder = false
if redis.call('TYPE', KEYS[1]).ok == 'string' then holder = redis.call('GET', KEYS[1]) end
local record = {false, false, false}
if redis.call('TYPE', KEYS[2]).ok == 'hash' then
  record = redis.call('HMGET', KEYS[2], 'token', 'term', 'value')
end
local fence = false
local kind = redis.call('TYPE', KEYS[3]).ok
if kind == 'hash' then fence = redis.call('HGET', KEYS[3], 'n')
elseif kind == 'string' then fence = redis.call('GET', KEYS[3]) end
return {holder, redis.call('PTTL', KEYS[1]), record[1], record[2], record[3], fence}",
    )
});

/// What `node` holds of the resource whose lock key is `key`.
pub(crate) async fn read(
    node: &Node,
    key: &[u8],
    record_key: &[u8],
    fence_key: &[u8],
) -> Result<View, NodeError> {
    type Reply = (
        Option<String>,
        i64,
        Option<String>,
        Option<String>,
        Option<Vec<u8>>,
        Option<String>,
    );
    let (holder, pttl_ms, token, term, value, fence) = node
        .run(key, |mut connection, _generation| async move {
            READ.key(key)
                .key(record_key)
                .key(fence_key)
                .invoke_async::<Reply>(&mut connection)
                .await
        })
        .await?;
    let number = |what: &str, text: String| {
        text.parse::<u64>()
            .map_err(|_| NodeError::Protocol(format!("{what} is not a number: {text:?}")))
    };
    let record = match (token, term) {
        (Some(token), Some(term)) => Some(Record {
            token,
            term: number("the leader record's term", term)?,
            value: value.unwrap_or_default(),
        }),
        _ => None,
    };
    Ok(View {
        holder,
        pttl_ms,
        record,
        fence: fence
            .map(|fence| number("the fence counter", fence))
            .transpose()?,
    })
}
