//! The lock's acquire scripts, apart from the command that sends them (`acquire.rs`) so that a
//! read-write lock's writer (`rwlock.rs`) can put its check in front of them, and an election's
//! candidate (`leader.rs`) its record behind them.

use std::sync::LazyLock;

use super::counter::{COUNTER_LUA, NO_RUN_ID};
use super::leader::record_lua;

/// Sets the key to our token, or, when it already holds our token (a leftover of an earlier
/// attempt of the same acquisition), renews its expiry: our own leftovers count for us.
///
/// Sent with `EVAL`, not `EVALSHA`: one command, never a NOSCRIPT round trip, so the request goes
/// out in the same step that records it handed over (`round/acquire.rs`). Retries are rare enough
/// that the script's bytes cost nothing.
pub(super) const ACQUIRE_OR_RENEW: &str = r"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0";

/// With fencing: [`ACQUIRE_OR_RENEW`] (the renewal only when `ARGV[3]` is `1`), then, once the key
/// is ours, `INCR` of the fence counter `KEYS[2]`, answered; nil when the key is not ours. The
/// counter moves only together with a grant on this node, in one atomic step. On a volatile
/// node (`ARGV[4]` = `1`) a counter this server run did not write is not trusted
/// (`counter.rs`): the key is taken, the counter left alone, and 0 answered, so that the
/// acquisition recovers the fence. A counter that is not a positive integer (someone else
/// wrote it) is an error reply; the key it set is then released like any other of a failed
/// acquisition.
pub(super) static ACQUIRE_FENCED: LazyLock<String> = LazyLock::new(|| fenced(""));

/// An election candidate's [`ACQUIRE_FENCED`]: with a trusted fence, also writes the leader
/// record `KEYS[3]` with the value `ARGV[5]` and this node's fence as the term (`leader.rs`).
/// When every node of the deciding quorum took the same fence, the records are the leader's
/// publication and no other round is needed (`round/fencing.rs`).
pub(super) static ACQUIRE_LEADER: LazyLock<String> =
    LazyLock::new(|| fenced(&record_lua("ARGV[5]")));

/// [`ACQUIRE_FENCED`], with `then` run once the key is ours and the fence taken.
fn fenced(then: &str) -> String {
    format!(
        r"{COUNTER_LUA}if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
if ARGV[3] ~= '1' or redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local run = fence_run(ARGV[4])
local fence
if run == nil then
  fence = redis.call('INCR', KEYS[2])
else
  {NO_RUN_ID}  local trusted
  fence, trusted = fence_read(KEYS[2], run)
  if not fence then return redis.error_reply('FENCE the fence counter is not a number') end
  if not trusted then return 0 end
  fence = fence + 1
  if fence >= 1 then fence_write(KEYS[2], fence, run) end
end
if fence < 1 then return redis.error_reply('FENCE the fence counter is not positive') end
{then}return fence"
    )
}
