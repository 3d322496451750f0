//! The fence's write-back on one node (fencing on): raises the resource's counter to at least
//! the fence while our key still holds there, counted only for the node that holds the claim on
//! its server (`vote.rs`). Why it orders every later fence after ours: `docs/fencing.md`.

use std::sync::LazyLock;

use redis::Script;

use super::counter::{COUNTER_LUA, NO_RUN_ID};
use super::leader::record_lua;
use super::vote::Counted;
use super::wire::one_or_zero;
use super::{Lane, Node};
use crate::outcome::NodeError;
use crate::rules::leader::Publication;

/// The fence's write-back: while the key `KEYS[1]` holds our token, raises the counter `KEYS[2]`
/// to at least the fence `ARGV[2]` (on a volatile node, `ARGV[3]` = `1`, also marks it written
/// in this run: `counter.rs`) and answers 1; else 0. Raising it only while the key is ours is
/// what orders it before any later grant on this node (see `docs/fencing.md`).
static WRITE_BACK: LazyLock<Script> = LazyLock::new(|| Script::new(&raise("")));

/// An election candidate's [`WRITE_BACK`]: also writes the leader record `KEYS[3]` with the
/// fence as its term and `ARGV[4]` as its value (`leader.rs`), over the one its grant wrote
/// with this node's own counter.
static WRITE_BACK_LEADER: LazyLock<Script> =
    LazyLock::new(|| Script::new(&raise(&record_lua("ARGV[4]"))));

/// [`WRITE_BACK`], with `then` run where the key is ours once the counter is raised.
fn raise(then: &str) -> String {
    format!(
        r"{COUNTER_LUA}if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local run = fence_run(ARGV[3])
{NO_RUN_ID}local fence = tonumber(ARGV[2])
local counter, trusted = fence_read(KEYS[2], run)
if not counter or counter < fence or not trusted then
  fence_write(KEYS[2], math.max(counter or 0, fence), run)
end
{then}return 1"
    )
}

/// The fence's write-back on one node: raises the counter to at least `fence` if the key still
/// holds `token`, and for an election's candidate writes its `record` (key, value) with the
/// fence as the term. Answers whether it did (the key was still ours).
pub(crate) async fn write_back(
    node: &Node,
    (key, fence_key): (&[u8], &[u8]),
    token: &str,
    fence: u64,
    volatile: bool,
    record: Option<&Publication>,
) -> Result<bool, NodeError> {
    node.run_counted(
        key,
        Counted::WriteBack,
        Lane::Requests,
        |mut connection, _generation, _commands| async move {
            let mut invocation = match record {
                Some(_) => WRITE_BACK_LEADER.key(key),
                None => WRITE_BACK.key(key),
            };
            invocation.key(fence_key);
            if let Some(record) = record {
                invocation.key(&record.record_key[..]);
            }
            invocation
                .arg(token)
                .arg(fence)
                .arg(if volatile { "1" } else { "0" });
            if let Some(record) = record {
                invocation.arg(&record.value[..]);
            }
            invocation.invoke_async(&mut connection).await
        },
    )
    .await
    .and_then(one_or_zero)
}
