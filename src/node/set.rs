//! The commands for a set of resources on one node, each one Lua script so that the node looks
//! at and changes all of the set's keys in one atomic step: take every key or none, release each
//! key still ours, extend them all only if all are still ours, and with fencing raise every
//! counter of the set (`counter.rs`). Keys are read with `pcall`: a key of another type is someone else's,
//! and one such key must not stop the release of the others. How the set's keys were made is
//! `rules/resources.rs`.

use std::sync::{Arc, LazyLock};

use redis::{Cmd, Script, Value};

use super::counter::{COUNTER_LUA, NO_RUN_ID};
use super::vote::Counted;
use super::wire::{one_or_zero, sized};
use super::{Lane, Node};
use crate::outcome::NodeError;

/// Takes every key of the set `KEYS[1..n]` for the token `ARGV[1]` for `ARGV[2]` ms, or none: if
/// any key exists and is not ours (with `ARGV[3]` = `1`, a key already holding our token, left
/// by an earlier attempt, is ours), nothing is set. With fencing, `ARGV[4]` = n and the
/// counters are `KEYS[n+1..2n]`: once the keys are set, each counter takes its next value and the
/// highest is answered; on a volatile node (`ARGV[5]` = `1`) only if every counter is trusted
/// (`counter.rs`), else -2 and no counter moves. A key exists when `GET` gives anything but nil
/// (a value, or the error of a key of another type), so the script needs no command beyond the
/// recommended ACL line. Answers that fence (or 1 without fencing) when the set is ours; 0 when
/// it is held and nothing of ours is there; -1 when it is held but a leftover of ours is.
static ACQUIRE_SET: LazyLock<String> = LazyLock::new(|| {
    format!(
        r"{COUNTER_LUA}local n = #KEYS - tonumber(ARGV[4])
local held, leftover = false, false
for i = 1, n do
  local value = redis.pcall('GET', KEYS[i])
  if value then
    if ARGV[3] == '1' and value == ARGV[1] then leftover = true else held = true end
  end
end
if held then if leftover then return -1 end return 0 end
for i = 1, n do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end
if n == #KEYS then return 1 end
local run = fence_run(ARGV[5])
local fence = 0
if run == nil then
  for i = n + 1, #KEYS do
    local value = redis.call('INCR', KEYS[i])
    if value > fence then fence = value end
  end
else
  {NO_RUN_ID}  local values, all = {{}}, true
  for i = n + 1, #KEYS do
    local value, trusted = fence_read(KEYS[i], run)
    if not value then return redis.error_reply('FENCE a fence counter is not a number') end
    values[i] = value + 1
    if not trusted then all = false end
  end
  if not all then return -2 end
  for i = n + 1, #KEYS do
    if values[i] > fence then fence = values[i] end
  end
  if fence >= 1 then for i = n + 1, #KEYS do fence_write(KEYS[i], values[i], run) end end
end
if fence < 1 then return redis.error_reply('FENCE a fence counter is not positive') end
return fence"
    )
});

/// Deletes each key of the set that still holds the token `ARGV[1]`; with `ARGV[2]` = `1` (a
/// held lock's release) publishes the token's release mark on each deleted key's channel,
/// waking its waiters. Answers one
/// 1 or 0 per key, in order: whether it was still ours.
const RELEASE_SET: &str = r"local found = {}
for i, key in ipairs(KEYS) do
  if redis.pcall('GET', key) == ARGV[1] then
    redis.call('DEL', key)
    if ARGV[2] == '1' then redis.pcall('PUBLISH', key, string.sub(ARGV[1], 1, 8)) end
    found[i] = 1
  else
    found[i] = 0
  end
end
return found";

/// Sets the expiry `ARGV[2]` on every key of the set if every one still holds the token
/// `ARGV[1]`, else on none: a node that lost one key of the set no longer holds it. Answers one 1
/// or 0 per key, in order: whether it was still ours.
static EXTEND_SET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local found, all = {}, true
for i, key in ipairs(KEYS) do
  if redis.pcall('GET', key) == ARGV[1] then found[i] = 1 else found[i] = 0 all = false end
end
if all then for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ARGV[2]) end end
return found",
    )
});

/// The fence's write-back for a set: while every key `KEYS[1..n]` holds the token `ARGV[1]`,
/// raises each counter `KEYS[n+1..2n]` to at least the fence `ARGV[2]` (on a volatile node,
/// `ARGV[3]` = `1`, also marks it written in this run) and answers 1; else 0.
static WRITE_BACK_SET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{COUNTER_LUA}local n = #KEYS / 2
for i = 1, n do if redis.pcall('GET', KEYS[i]) ~= ARGV[1] then return 0 end end
local run = fence_run(ARGV[3])
{NO_RUN_ID}local fence = tonumber(ARGV[2])
for i = n + 1, #KEYS do
  local counter, trusted = fence_read(KEYS[i], run)
  if not counter or counter < fence or not trusted then
    fence_write(KEYS[i], math.max(counter or 0, fence), run)
  end
end
return 1"
    ))
});

/// The acquire command for a set, built once per attempt and shared by the nodes: the set's
/// keys, then with fencing their counters (as many, in the same order).
pub(super) fn acquire_set_command(
    keys: &[Arc<[u8]>],
    fence_keys: Option<&[Arc<[u8]>]>,
    volatile: bool,
    token: &str,
    ttl_ms: u64,
    renew_leftover: bool,
) -> Cmd {
    let counters = fence_keys.unwrap_or_default();
    let mut parts: Vec<&[u8]> = vec![ACQUIRE_SET.as_bytes(), token.as_bytes()];
    parts.extend(keys.iter().chain(counters).map(|key| &key[..]));
    let mut command = sized(parts.len().saturating_add(7), &parts);
    command
        .arg("EVAL")
        .arg(ACQUIRE_SET.as_str())
        .arg(keys.len().saturating_add(counters.len()));
    for key in keys.iter().chain(counters) {
        command.arg(&key[..]);
    }
    command
        .arg(token)
        .arg(ttl_ms)
        .arg(if renew_leftover { "1" } else { "0" })
        .arg(counters.len())
        .arg(if volatile { "1" } else { "0" });
    command
}

/// What a node answered to [`acquire_set_command`]: `Some(value)` with the set ours (the fence
/// with fencing, 0 when a counter is not trusted; else 1), `None` when it is held
/// ([`acquire_set_refused`] says whether nothing of ours is there either).
pub(super) fn read_acquire_set(reply: Value) -> redis::RedisResult<Option<u64>> {
    let value: i64 = redis::from_redis_value(reply)?;
    Ok(match value {
        -2 => Some(0),
        value => u64::try_from(value).ok().filter(|&value| value > 0),
    })
}

/// Whether a reply to [`acquire_set_command`] says the set was held and nothing of ours is there.
pub(super) fn acquire_set_refused(reply: &Value) -> bool {
    matches!(reply, Value::Int(0))
}

/// The release command for a set, built once and shared by the nodes; `wake`: the lock was held,
/// so its waiters are woken.
pub(super) fn release_set_command(keys: &[Arc<[u8]>], token: &str, wake: bool) -> Cmd {
    let mut parts: Vec<&[u8]> = vec![RELEASE_SET.as_bytes(), token.as_bytes()];
    parts.extend(keys.iter().map(|key| &key[..]));
    let mut command = sized(parts.len().saturating_add(4), &parts);
    command.arg("EVAL").arg(RELEASE_SET).arg(keys.len());
    for key in keys {
        command.arg(&key[..]);
    }
    command.arg(token).arg(if wake { "1" } else { "0" });
    command
}

/// One 1 or 0 per key of a set, as [`RELEASE_SET`] and [`EXTEND_SET`] answer them: whether each
/// key still held our token. Anything else, or a count that is not the set's, is a protocol
/// error.
pub(crate) fn read_found(reply: Value, keys: usize) -> Result<Vec<bool>, NodeError> {
    let found: Vec<i64> = redis::from_redis_value(reply)
        .map_err(|error| NodeError::Protocol(format!("a set's per-key answer: {error}")))?;
    if found.len() != keys {
        return Err(NodeError::Protocol(format!(
            "expected {keys} answers for a set, got {}",
            found.len()
        )));
    }
    found.into_iter().map(one_or_zero).collect()
}

/// The key a set's request is routed by on a cluster node: its first (a set's keys share a
/// slot there, `rules/slots.rs`).
pub(crate) fn slot_key(keys: &[Arc<[u8]>]) -> &[u8] {
    keys.first().map(|key| &key[..]).unwrap_or_default()
}

/// Extends every key of the set to `ttl_ms` if all still hold `token` (counted only for the node
/// that holds the claim on its server, as a single key's extension). Answers what each key held.
pub(crate) async fn extend_set(
    node: &Node,
    keys: &[Arc<[u8]>],
    token: &str,
    ttl_ms: u64,
) -> Result<Vec<bool>, NodeError> {
    let reply = node
        .run_counted(
            slot_key(keys),
            Counted::Extend,
            Lane::Requests,
            |mut connection, _generation, _commands| async move {
                let mut invocation = EXTEND_SET.prepare_invoke();
                for key in keys {
                    invocation.key(&key[..]);
                }
                invocation
                    .arg(token)
                    .arg(ttl_ms)
                    .invoke_async::<Value>(&mut connection)
                    .await
            },
        )
        .await?;
    read_found(reply, keys.len())
}

/// The fence's write-back for a set on one node: raises every counter to at least `fence` if
/// every key still holds `token`. Answers whether it did.
pub(crate) async fn write_back_set(
    node: &Node,
    keys: &[Arc<[u8]>],
    fence_keys: &[Arc<[u8]>],
    token: &str,
    fence: u64,
    volatile: bool,
) -> Result<bool, NodeError> {
    let found = node
        .run_counted(
            slot_key(keys),
            Counted::WriteBack,
            Lane::Requests,
            |mut connection, _generation, _commands| async move {
                let mut invocation = WRITE_BACK_SET.prepare_invoke();
                for key in keys.iter().chain(fence_keys) {
                    invocation.key(&key[..]);
                }
                invocation
                    .arg(token)
                    .arg(fence)
                    .arg(if volatile { "1" } else { "0" })
                    .invoke_async::<i64>(&mut connection)
                    .await
            },
        )
        .await?;
    one_or_zero(found)
}
