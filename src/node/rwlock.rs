//! A read-write lock's commands on one node (its keys: `rules/rwlock.rs`), so that a node
//! decides each side safely: a reader is refused where a writer holds or waits, a writer where
//! another writer holds or a live reader does (and then it leaves its mark). A caller's first
//! read is three native commands in a row, no script: it sets its key and adds its token, then
//! looks for the writer key and mark; refused, it leaves its key, which the failed
//! acquisition's release deletes, waking writers that it kept out. A waiter's read is a script
//! that sets nothing when refused. The write side's grant is the lock's acquire script after
//! that check (`acquire.rs`), so fencing and the renewal of a leftover are the same as a lock's;
//! its release and extension are a lock's. A reader's extension is a lock's too (its key is its
//! own); its release also takes its token out of the readers' set (one in 16 prunes crashed
//! readers' tokens from it too) and wakes on the writer key's channel.

use std::sync::LazyLock;

use redis::{Cmd, Pipeline, Script};

use super::acquire_scripts::{ACQUIRE_FENCED, ACQUIRE_OR_RENEW};
use super::vote::Counted;
use super::wire::{one_or_zero, sized};
use super::{Lane, Node};
use crate::outcome::NodeError;
use crate::rules::rwlock::{RwKeys, mark_key, reader_base, readers_key};

/// A reader: refused (0) while the writer key exists or a writer's mark does; else its key is
/// set (its own, so a leftover of an earlier attempt is simply set again) and its token joins
/// the readers' set (1). `KEYS`: reader, writer, readers, mark; `ARGV`: token, TTL.
const ACQUIRE_READ: &str = r"if redis.call('EXISTS', KEYS[2], KEYS[4]) > 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
return 1";

/// The writer's check before the lock's acquire script: refused while another writer holds
/// `KEYS[1]`; every reader in the set whose key is gone is dropped from it, and while one is
/// left, the writer's mark is set for as long as the longest of them has left, and it is refused.
/// Otherwise the mark is taken down (whichever writer's: one writer in keeps readers out as
/// well, and each waiting attempt of a writer is a new token), and the lock's script runs. The rw keys come last
/// (`KEYS`: …, readers, mark; `ARGV`: …, the readers' key prefix), so the same check goes in
/// front of either acquire script; `{refused}` is that script's refusal.
fn write_check(refused: &str) -> String {
    format!(
        r"local readers, mark, base = KEYS[#KEYS - 1], KEYS[#KEYS], ARGV[#ARGV]
local writer = redis.call('GET', KEYS[1])
if writer and writer ~= ARGV[1] then return {refused} end
local longest = 0
for _, reader in ipairs(redis.call('SMEMBERS', readers)) do
  local left = redis.call('PTTL', base .. reader)
  if left == -2 then redis.call('SREM', readers, reader)
  elseif left < 0 then longest = tonumber(ARGV[2])
  elseif left > longest then longest = left end
end
if redis.call('SCARD', readers) > 0 then
  redis.call('SET', mark, ARGV[1], 'PX', math.max(longest, 1))
  return {refused}
end
redis.call('DEL', mark)
"
    )
}

/// The write side without fencing: 1 when taken, 0 when refused.
static ACQUIRE_WRITE: LazyLock<String> =
    LazyLock::new(|| format!("{}{ACQUIRE_OR_RENEW}", write_check("0")));

/// The write side with fencing: the fence when taken (0: the counter not trusted), nil when
/// refused.
static ACQUIRE_WRITE_FENCED: LazyLock<String> =
    LazyLock::new(|| format!("{}{}", write_check("false"), *ACQUIRE_FENCED));

/// A reader's release: its token out of the readers' set, and its key deleted if it still holds
/// our token (1, else 0) with a wake-up on the writer key's channel, where the lock's waiters of
/// both sides listen: with `ARGV[3]` = `1` (a held read), or with `2` (a failed acquisition's
/// clean-up) only while a writer's mark is there: a writer that our key kept out left the mark,
/// and our key, gone now, will wake it no other way. One release in 16 (by its token's first
/// digit) also drops two members of the set, picked at random, whose readers' keys are gone
/// (crashed readers), so the set does not grow where no writer comes to prune it, and no
/// acquisition pays for it. `KEYS`: reader, readers, mark; `ARGV`: token, writer key, wake, the
/// readers' key prefix.
pub(super) const RELEASE_READ: &str = r"redis.call('SREM', KEYS[2], ARGV[1])
if string.byte(ARGV[1]) == 48 then
  for _, other in ipairs(redis.call('SRANDMEMBER', KEYS[2], 2)) do
    if redis.call('EXISTS', ARGV[4] .. other) == 0 then redis.call('SREM', KEYS[2], other) end
  end
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if ARGV[3] == '1' or (ARGV[3] == '2' and redis.call('EXISTS', KEYS[3]) == 1) then
  redis.pcall('PUBLISH', ARGV[2], '')
end
return 1";

/// A writer becomes a reader with no gap: where the writer key holds our token, a reader's key
/// of the same token is set to expire when the writer key would have, the token joins the
/// readers, the writer key is deleted and waiting readers are woken, in one step (1; else 0).
/// `KEYS`: writer, reader, readers; `ARGV`: token.
static DOWNGRADE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local left = redis.call('PTTL', KEYS[1])
if left < 1 then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', left)
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', KEYS[1], '')
return 1",
    )
});

/// A reader's acquire request (answered 1 or 0) for the reader key `reader`.
pub(super) fn acquire_read(rw: &RwKeys, reader: &[u8], token: &str, ttl_ms: u64) -> Cmd {
    let mut command = sized(
        9,
        &[
            ACQUIRE_READ.as_bytes(),
            reader,
            &rw.writer,
            &rw.readers,
            &rw.mark,
            token.as_bytes(),
        ],
    );
    command
        .arg("EVAL")
        .arg(ACQUIRE_READ)
        .arg(4)
        .arg(reader)
        .arg(&rw.writer[..])
        .arg(&rw.readers[..])
        .arg(&rw.mark[..])
        .arg(token)
        .arg(ttl_ms);
    command
}

/// A caller's first read: `SET` of the reader's key, `SADD` of its token to the readers' set,
/// then `EXISTS` of the writer key and the mark, sent together on one connection, so the server
/// runs them in that order; answered `[OK, added, found]`, a grant where `found` is 0. Safe
/// without a script or `MULTI`, because a writer's check is one script and looks for readers
/// through the set: run before the `SET`, it left the writer key or mark that the `EXISTS`
/// finds; between the `SET` and the `SADD`, it does not see this reader, but what it sets, the
/// `EXISTS` finds; after the `SADD`, it sees this reader and is refused. Refused, the key stays
/// (see [`RELEASE_READ`]).
pub(super) fn read_first(rw: &RwKeys, reader: &[u8], token: &str, ttl_ms: u64) -> Pipeline {
    let mut pipeline = Pipeline::with_capacity(READ_FIRST_COMMANDS);
    pipeline
        .cmd("SET")
        .arg(reader)
        .arg(token)
        .arg("PX")
        .arg(ttl_ms)
        .cmd("SADD")
        .arg(&rw.readers[..])
        .arg(token)
        .cmd("EXISTS")
        .arg(&rw.writer[..])
        .arg(&rw.mark[..]);
    pipeline
}

/// Commands in [`read_first`], each answered.
pub(super) const READ_FIRST_COMMANDS: usize = 3;

/// A writer's acquire request: without fencing answered 1 or 0, with it (`fence_key`, and
/// whether a leftover counts and the counters may be volatile) the fence or nil, as the lock's.
pub(super) fn acquire_write(
    rw: &RwKeys,
    fence: Option<(&[u8], bool, bool)>,
    token: &str,
    ttl_ms: u64,
) -> Cmd {
    let script = match fence {
        Some(_) => ACQUIRE_WRITE_FENCED.as_str(),
        None => ACQUIRE_WRITE.as_str(),
    };
    let mut command = sized(
        12,
        &[
            script.as_bytes(),
            &rw.writer,
            &rw.readers,
            &rw.mark,
            token.as_bytes(),
            &rw.reader_base,
        ],
    );
    command.arg("EVAL").arg(script);
    match fence {
        Some((fence_key, renew, volatile)) => {
            command
                .arg(4)
                .arg(&rw.writer[..])
                .arg(fence_key)
                .arg(&rw.readers[..])
                .arg(&rw.mark[..])
                .arg(token)
                .arg(ttl_ms)
                .arg(if renew { "1" } else { "0" })
                .arg(if volatile { "1" } else { "0" });
        }
        None => {
            command
                .arg(3)
                .arg(&rw.writer[..])
                .arg(&rw.readers[..])
                .arg(&rw.mark[..])
                .arg(token)
                .arg(ttl_ms);
        }
    }
    command.arg(&rw.reader_base[..]);
    command
}

/// A reader's release (answered 1 or 0), see [`RELEASE_READ`]; `wake`: `1` or `2` there.
pub(super) fn release_read(reader: &[u8], writer: &[u8], token: &str, wake: &str) -> Cmd {
    let (readers, mark, base) = (readers_key(writer), mark_key(writer), reader_base(writer));
    let mut command = sized(
        10,
        &[
            RELEASE_READ.as_bytes(),
            reader,
            &readers,
            &mark,
            writer,
            token.as_bytes(),
            &base,
        ],
    );
    command
        .arg("EVAL")
        .arg(RELEASE_READ)
        .arg(3)
        .arg(reader)
        .arg(&readers[..])
        .arg(&mark[..])
        .arg(token)
        .arg(writer)
        .arg(wake)
        .arg(&base[..]);
    command
}

/// Turns our writer key on `node` into the reader key `reader` of the same token and expiry
/// (its token joining `readers`); whether the node held the writer key for us. Counted as an
/// extension is: it only changes a key of ours.
pub(crate) async fn downgrade(
    node: &Node,
    keys: &RwKeys,
    reader: &[u8],
    token: &str,
) -> Result<bool, NodeError> {
    node.run_counted(
        &keys.writer,
        Counted::Extend,
        Lane::Requests,
        |mut connection, _generation, _commands| async move {
            DOWNGRADE
                .key(&keys.writer[..])
                .key(reader)
                .key(&keys.readers[..])
                .arg(token)
                .invoke_async(&mut connection)
                .await
        },
    )
    .await
    .and_then(one_or_zero)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::acquire::{AcquireCommand, AcquireRequest, Taken};
    use crate::round::acquire::acquire;
    use crate::round::acquire::tests::{node, one_node};
    use crate::round::ledger::Ledger;
    use crate::rules::resources::Keys;
    use crate::rules::rwlock::{Side, reader_key};
    use futures::StreamExt;
    use redis::AsyncCommands;
    use std::sync::Arc;
    use std::time::Duration;

    /// Against a real server: crashed readers' tokens (in the set, their keys gone) are dropped
    /// by a release whose token starts with `0`, one in 16, and by no other; a live reader's
    /// token stays whoever releases.
    // promise: rwlock-reader-expiry
    #[tokio::test]
    async fn one_release_in_16_prunes_crashed_readers_and_keeps_live_ones() {
        let cluster = one_node().await;
        let mut direct = cluster.connection(0).await.unwrap();
        let rw = RwKeys::new(Arc::from(&b"doc"[..]));
        let live = reader_key(&rw.writer, "live");
        let _: () = direct.set(&live[..], "live").await.unwrap();
        for (token, prunes) in [("1-other", false), ("0-first-digit", true)] {
            let reader = reader_key(&rw.writer, token);
            let _: () = direct
                .sadd(&rw.readers[..], &["live", "dead-a", "dead-b"])
                .await
                .unwrap();
            // Two members picked at random of three: our reader taken and released until both
            // dead ones were seen (bounded: where it prunes, they go in a few).
            let mut left: Vec<String> = Vec::new();
            for _ in 0..64 {
                let _: () = direct.set(&reader[..], token).await.unwrap();
                let _: () = direct.sadd(&rw.readers[..], token).await.unwrap();
                let released: i64 = release_read(&reader, &rw.writer, token, "1")
                    .query_async(&mut direct)
                    .await
                    .unwrap();
                assert_eq!(released, 1, "{token}: our key held our token");
                left = direct.smembers(&rw.readers[..]).await.unwrap();
                left.sort();
                if left == ["live"] {
                    break;
                }
            }
            let expected: &[&str] = if prunes {
                &["live"]
            } else {
                &["dead-a", "dead-b", "live"]
            };
            assert_eq!(left, expected, "{token}: the readers left");
        }
    }

    /// Against a real server: a first read refused where a writer holds leaves its key; the
    /// clean-up wakes the writer's channel where a writer's mark appeared meanwhile (a writer
    /// our key kept out), and only there.
    #[tokio::test]
    async fn a_refused_first_reads_clean_up_wakes_a_writer_its_key_kept_out_and_nobody_else() {
        let cluster = one_node().await;
        let node = node(&cluster.urls()[0]);
        let mut direct = cluster.connection(0).await.unwrap();
        let client = redis::Client::open(cluster.urls()[0].as_str()).unwrap();
        let mut woken = client.get_async_pubsub().await.unwrap();
        woken.subscribe("doc").await.unwrap();
        let mut messages = woken.on_message();
        let rw = RwKeys::new(Arc::from(&b"doc"[..]));
        let ledger = Ledger::new(1);

        for (token, writer_came) in [("1-kept-one-out", true), ("2-kept-none-out", false)] {
            let reader = reader_key(&rw.writer, token);
            let keys = Keys::Read {
                reader: Arc::clone(&reader),
                writer: Arc::clone(&rw.writer),
            };
            let _: () = direct.set("doc", "holder").await.unwrap();
            let command = AcquireCommand::new(&AcquireRequest {
                keys: &keys,
                fence_keys: None,
                volatile: false,
                token,
                first_call: true,
                ttl_ms: 60_000,
                renew_leftover: false,
                rw: Some((Side::Read, &rw)),
                record: None,
            });
            let taken = acquire(&node, &command, &ledger, ledger.begin()).await;
            assert_eq!(taken, Ok(Taken::NotOurs), "{token}: the writer holds");
            let left: bool = direct.exists(&reader[..]).await.unwrap();
            assert!(left, "{token}: the refused first read leaves its key");
            let _: () = direct.del("doc").await.unwrap();
            if writer_came {
                // The holder gone, a writer checks while our key is there: kept out, it marks.
                let refused: i64 = acquire_write(&rw, None, "writer", 60_000)
                    .query_async(&mut direct)
                    .await
                    .unwrap();
                assert_eq!(refused, 0, "our leftover keeps the writer out");
            }
            let released: i64 = release_read(&reader, &rw.writer, token, "2")
                .query_async(&mut direct)
                .await
                .unwrap();
            assert_eq!(released, 1);
            // Published after the clean-up: whatever the clean-up published comes first.
            let _: () = direct.publish("doc", "after").await.unwrap();
            let first = tokio::time::timeout(Duration::from_secs(10), messages.next())
                .await
                .unwrap()
                .unwrap();
            let payload: String = first.get_payload().unwrap();
            let expected = if writer_came { "" } else { "after" };
            assert_eq!(payload, expected, "{token}: the first message");
            if writer_came {
                let _ = messages.next().await;
                let _: () = direct.del(&rw.mark[..]).await.unwrap();
            }
        }
    }
}
