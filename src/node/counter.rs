//! The fence counter on one node, as every fenced script reads and writes it, and the read of a
//! counter for its recovery.
//!
//! On nodes that persist every write a counter is a plain integer, trusted as it is. On volatile
//! nodes (`LockOptions::fence_volatile_nodes`) a restart may lose it or bring back an older
//! value, so it is a hash of its value `n` and the `run_id` of the server that wrote it: a
//! counter is trusted only in the run that wrote it. A node whose counter is not trusted takes
//! the key but not the next fence; the acquisition then recovers the fence from the other nodes
//! (`round/fencing.rs`, the argument in `docs/fencing.md`).

use std::sync::{Arc, LazyLock};

use redis::Script;

use super::vote::Counted;
use super::{Lane, Node};
use crate::outcome::NodeError;

/// Lua helpers put before every fenced script:
///
/// - `fence_run(volatile)`: nil on durable nodes (`volatile` not `'1'`); else the server's
///   `run_id` read from `INFO server`, or `''` if it reports none (the script then refuses);
/// - `fence_read(key, run)`: the counter's value (nil if it is not a number; 0 if absent) and
///   whether it is trusted: always with `run` nil (a plain `GET`, as the documented ACL allows),
///   else only when this run wrote it (an absent or integer counter on a volatile node may have
///   lost writes);
/// - `fence_write(key, n, run)`: stores `n` as an integer, or with the run that wrote it.
///
/// Values are formatted with `%.0f`: Lua numbers are doubles, which `tostring` would print in
/// exponent form from 10^14 on.
pub(super) const COUNTER_LUA: &str = r"local function fence_run(volatile)
  if volatile ~= '1' then return nil end
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
end
local function fence_read(key, run)
  if run == nil then
    local value = redis.call('GET', key)
    if not value then return 0, true end
    return tonumber(value), true
  end
  local kind = redis.call('TYPE', key).ok
  local n, written = 0, nil
  if kind == 'hash' then
    local fields = redis.call('HMGET', key, 'n', 'run')
    n, written = tonumber(fields[1]), fields[2]
  elseif kind ~= 'none' then
    n = tonumber(redis.call('GET', key))
  end
  return n, run == nil or (written ~= nil and written == run)
end
local function fence_write(key, n, run)
  local value = string.format('%.0f', n)
  if run == nil then redis.call('SET', key, value) return end
  if redis.call('TYPE', key).ok ~= 'hash' then redis.call('DEL', key) end
  redis.call('HSET', key, 'n', value, 'run', run)
end
";

/// The error reply of a fenced script on a server whose `INFO` has no `run_id`.
pub(super) const NO_RUN_ID: &str =
    "if run == '' then return redis.error_reply('FENCE the server reports no run_id') end\n";

/// The counters `KEYS[1..n]` on a volatile node, for recovery: the highest value among them and
/// whether every one is trusted (written in the server's current run), as `{highest, 1 or 0}`.
static READ_COUNTERS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{COUNTER_LUA}local run = fence_run('1')
{NO_RUN_ID}local highest, trusted = 0, 1
for _, key in ipairs(KEYS) do
  local n, ok = fence_read(key, run)
  if not n then return redis.error_reply('FENCE a fence counter is not a number') end
  if n > highest then highest = n end
  if not ok then trusted = 0 end
end
return {{string.format('%.0f', highest), trusted}}"
    ))
});

/// What a node's counters say, for recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reading {
    /// The highest value among the counters (0 where absent).
    pub(crate) highest: u64,
    /// Whether every counter was written in the server's current run.
    pub(crate) trusted: bool,
}

/// Reads the counters `fence_keys` on a volatile node, through the gate of a request counted
/// after an acquisition (no replica, no replacement sitting out, one server one answer).
pub(crate) async fn read_counters(
    node: &Node,
    fence_keys: &[Arc<[u8]>],
) -> Result<Reading, NodeError> {
    let slot_key = fence_keys.first().map(|key| &key[..]).unwrap_or_default();
    let (highest, trusted): (String, i64) = node
        .run_counted(
            slot_key,
            Counted::WriteBack,
            Lane::Requests,
            |mut connection, _generation, _commands| async move {
                let mut invocation = READ_COUNTERS.prepare_invoke();
                for key in fence_keys {
                    invocation.key(&key[..]);
                }
                invocation.invoke_async(&mut connection).await
            },
        )
        .await?;
    let highest = highest
        .parse()
        .map_err(|_| NodeError::Protocol(format!("a fence counter's value: {highest:?}")))?;
    Ok(Reading {
        highest,
        trusted: trusted == 1,
    })
}
