//! The fence's write-back on one node (fencing on): raises the resource's counter to at least
//! the fence while our key still holds there, counted only for the node that holds the claim on
//! its server (`vote.rs`). Why it orders every later fence after ours: `docs/fencing.md`.

use std::sync::LazyLock;

use redis::Script;

use super::vote::Counted;
use super::wire::one_or_zero;
use super::{Lane, Node};
use crate::outcome::NodeError;

/// The fence's write-back: while the key `KEYS[1]` holds our token, raises the counter `KEYS[2]`
/// to at least the fence `ARGV[2]` and answers 1; else 0. Raising it only while the key is ours
/// is what orders it before any later grant on this node (see `docs/fencing.md`).
static WRITE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local counter = tonumber(redis.call('GET', KEYS[2]))
if not counter or counter < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
return 1",
    )
});

/// The fence's write-back on one node: raises the counter to at least `fence` if the key still
/// holds `token`. Answers whether it did (the key was still ours).
pub(crate) async fn write_back(
    node: &Node,
    key: &[u8],
    fence_key: &[u8],
    token: &str,
    fence: u64,
) -> Result<bool, NodeError> {
    node.run_counted(
        key,
        Counted::WriteBack,
        Lane::Requests,
        |mut connection, _generation, _commands| async move {
            WRITE_BACK
                .key(key)
                .key(fence_key)
                .arg(token)
                .arg(fence)
                .invoke_async(&mut connection)
                .await
        },
    )
    .await
    .and_then(one_or_zero)
}
