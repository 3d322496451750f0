//! The fence's write-back on one node (fencing on): raises the resource's counter to at least
//! the fence while our key still holds there, counted only for the node that holds the claim on
//! its server (`vote.rs`). Why it orders every later fence after ours: `docs/fencing.md`.

use std::sync::LazyLock;

use redis::Script;

use super::counter::{COUNTER_LUA, NO_RUN_ID};
use super::vote::Counted;
use super::wire::one_or_zero;
use super::{Lane, Node};
use crate::outcome::NodeError;

/// The fence's write-back: while the key `KEYS[1]` holds our token, raises the counter `KEYS[2]`
/// to at least the fence `ARGV[2]` (on a volatile node, `ARGV[3]` = `1`, also marks it written
/// in this run: `counter.rs`) and answers 1; else 0. Raising it only while the key is ours is
/// what orders it before any later grant on this node (see `docs/fencing.md`).
static WRITE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{COUNTER_LUA}if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local run = fence_run(ARGV[3])
{NO_RUN_ID}local fence = tonumber(ARGV[2])
local counter, trusted = fence_read(KEYS[2], run)
if not counter or counter < fence or not trusted then
  fence_write(KEYS[2], math.max(counter or 0, fence), run)
end
return 1"
    ))
});

/// The fence's write-back on one node: raises the counter to at least `fence` if the key still
/// holds `token`. Answers whether it did (the key was still ours).
pub(crate) async fn write_back(
    node: &Node,
    key: &[u8],
    fence_key: &[u8],
    token: &str,
    fence: u64,
    volatile: bool,
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
                .arg(if volatile { "1" } else { "0" })
                .invoke_async(&mut connection)
                .await
        },
    )
    .await
    .and_then(one_or_zero)
}
