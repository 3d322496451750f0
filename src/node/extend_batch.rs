//! The batched keep-alive's command on one node: one `EVAL` whose script walks its keys, renews
//! each that holds our token (compare-and-`PEXPIRE`), and where it was asked to, sets one that is
//! absent (`SET NX PX`); never touches another's key. Answers one code per key. A batch that
//! sets keys goes through the gates an acquire request passes (`vote.rs`); one that only renews
//! through the extend gate (the claim held: one server never confirms twice).

use redis::{Cmd, Value};

use super::vote::Counted;
use super::wire::send;
use super::{Lane, Node};
use crate::outcome::NodeError;
use crate::rules::batch::KeyReply;

/// Per key `KEYS[i]`: its token `ARGV[2i]`, its TTL `ARGV[2i+1]`, and in `ARGV[1]` one byte per
/// key, `f` where an absent key may be set. Answers 1 renewed, 2 set, 0 another's, -1 absent.
/// Sent with `EVAL`: one request (the ordering rule is about requests), never a NOSCRIPT round
/// trip; its 500 bytes are shared by up to `BATCH_KEYS` keys.
const EXTEND_BATCH: &str = r"local fill, out = ARGV[1], {}
for i = 1, #KEYS do
  local token, ttl = ARGV[2 * i], ARGV[2 * i + 1]
  local held = redis.call('GET', KEYS[i])
  if held == token then
    redis.call('PEXPIRE', KEYS[i], ttl)
    out[i] = 1
  elseif held then
    out[i] = 0
  elseif string.byte(fill, i) == 102 and redis.call('SET', KEYS[i], token, 'NX', 'PX', ttl) then
    out[i] = 2
  else
    out[i] = -1
  end
end
return out";

/// One key of a batch.
pub(crate) struct BatchKey<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) token: &'a str,
    pub(crate) ttl_ms: u64,
    /// Whether the key may be set here if it is absent.
    pub(crate) fill: bool,
}

/// The batch command for `keys`.
pub(crate) fn batch_command(keys: &[BatchKey<'_>]) -> Cmd {
    let bytes: usize = keys
        .iter()
        .map(|key| key.key.len().saturating_add(key.token.len()))
        .sum();
    let args = keys.len().saturating_mul(3).saturating_add(4);
    // Room for the script, the keys and tokens, and a short argument (a TTL) per key.
    let mut command = Cmd::with_capacity(
        args,
        bytes
            .saturating_add(EXTEND_BATCH.len())
            .saturating_add(keys.len().saturating_mul(24)),
    );
    let fill: Vec<u8> = keys
        .iter()
        .map(|key| if key.fill { b'f' } else { b'x' })
        .collect();
    command.arg("EVAL").arg(EXTEND_BATCH).arg(keys.len());
    for key in keys {
        command.arg(key.key);
    }
    command.arg(fill);
    for key in keys {
        command.arg(key.token).arg(key.ttl_ms);
    }
    command
}

/// Reads the answer to a batch of `keys` keys: one code per key.
fn read_reply(reply: Value, keys: usize) -> Result<Vec<KeyReply>, NodeError> {
    let codes: Vec<i64> = redis::from_redis_value(reply)
        .map_err(|error| NodeError::Protocol(format!("batch reply: {error}")))?;
    if codes.len() != keys {
        return Err(NodeError::Protocol(format!(
            "batch reply: {} codes for {keys} keys",
            codes.len()
        )));
    }
    codes
        .into_iter()
        .map(|code| {
            KeyReply::from_code(code)
                .ok_or_else(|| NodeError::Protocol(format!("batch reply: code {code}")))
        })
        .collect()
}

/// Runs one batch of `keys` keys on `node`. `build(generation, gates_passed)` makes the command
/// (and whatever the caller must keep while it is in flight, `T`) in the same step that hands
/// it to the connection of `generation`; it may ask to set absent keys only when
/// `gates_passed`. With `fill` the node is first put through the vote gates (`run_vote`); if it
/// does not pass them, nothing is sent through them and the batch goes out renew-only through
/// the extend gate (`run_counted`). Returns the answer and the caller's `T`, if it was built.
pub(crate) async fn extend_batch<T>(
    node: &Node,
    slot_key: &[u8],
    keys: usize,
    fill: bool,
    mut build: impl FnMut(u64, bool) -> (Cmd, T),
) -> (Result<Vec<KeyReply>, NodeError>, Option<T>) {
    let mut kept = None;
    if fill {
        let mut built = false;
        let reply = node
            .run_vote(
                slot_key,
                Lane::KeepAlive,
                |mut connection, generation, _server| {
                    built = true;
                    let (command, t) = build(generation, true);
                    kept = Some(t);
                    async move { send(&mut connection, &command).await }
                },
            )
            .await;
        if built {
            return (reply.and_then(|reply| read_reply(reply, keys)), kept);
        }
    }
    let reply = node
        .run_counted(
            slot_key,
            Counted::Extend,
            Lane::KeepAlive,
            |mut connection, generation, _commands| {
                let (command, t) = build(generation, false);
                kept = Some(t);
                async move { send(&mut connection, &command).await }
            },
        )
        .await;
    (reply.and_then(|reply| read_reply(reply, keys)), kept)
}
