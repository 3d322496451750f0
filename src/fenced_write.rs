//! [`FencedWrite`]: a write to a Redis that is not a lock node (the application's data),
//! applied only if the holder's fence is at least the highest the store has seen for it. The
//! check, the write and the new highest fence are one script, so no late holder's write can land
//! between the check and the write (`docs/fencing.md`, "How a store checks a fence").

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, Script, Value};

use crate::guard::Guard;
use crate::outcome::NodeError;

/// Runs the write `ARGV[2..]` (a command and its arguments) only if the fence `ARGV[1]` is not
/// below the highest fence stored at `KEYS[1]`, then stores it there. A write the server refuses
/// (`WRONGTYPE`, `OOM`) is answered as that error and leaves the highest fence as it was. A
/// stored fence that is not a number is an error: someone else owns that key.
const CHECK_AND_WRITE: &str = r"local fence = tonumber(ARGV[1])
local seen = redis.call('GET', KEYS[1])
if seen then
  local highest = tonumber(seen)
  if not highest then return redis.error_reply('FENCE the stored fence is not a number') end
  if highest > fence then return {0, seen} end
end
local reply = redis.pcall(unpack(ARGV, 2))
if type(reply) == 'table' and reply.err then return reply end
redis.call('SET', KEYS[1], ARGV[1])
return {1, reply}";

/// [`CHECK_AND_WRITE`], hashed once: sent as `EVALSHA`, loaded again after a `NOSCRIPT`.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(CHECK_AND_WRITE));

/// A write guarded by a fence, for a Redis of the application's own: it runs only if the fence
/// is at least the highest one that wrote through the same fence key, so a holder that paused
/// past its validity cannot overwrite a later holder's work. Equal fences are one holder's, so
/// a holder may write several times in one hold.
///
/// ```no_run
/// # async fn run(lock: quorumlock::Lock, mut store: redis::aio::MultiplexedConnection) -> Result<(), Box<dyn std::error::Error>> {
/// use quorumlock::{Fenced, FencedWrite};
///
/// let guard = lock.acquire("report").await?;
/// let fenced = FencedWrite::of(&guard, "report:fence").ok_or("fencing is off")?;
/// match fenced.run(&mut store, redis::cmd("SET").arg("report").arg("v2")).await? {
///     Fenced::Written(_) => println!("written"),
///     Fenced::Refused { highest } => println!("a later holder wrote with fence {highest}"),
///     _ => {}
/// }
/// guard.release().await;
/// # Ok(()) }
/// ```
///
/// The store is a plain Redis (not a cluster: the write's keys are not declared to the script,
/// so a cluster could not route it) and, like any store that checks fences, must keep the
/// highest fence durably, or a restart forgets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedWrite {
    fence_key: Vec<u8>,
    fence: u64,
}

/// What a [`FencedWrite`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Fenced {
    /// The fence was at least the highest seen: the write ran, with this reply, and the fence
    /// is now the highest.
    Written(Value),
    /// A later holder has written: its fence, `highest`, is above ours. Nothing was written.
    Refused {
        /// The highest fence the store has seen.
        highest: u64,
    },
}

impl FencedWrite {
    /// A write under `fence`, checked against the highest fence stored at `fence_key` on the
    /// store (one key per protected resource or group of keys).
    pub fn new(fence_key: impl Into<Vec<u8>>, fence: u64) -> FencedWrite {
        FencedWrite {
            fence_key: fence_key.into(),
            fence,
        }
    }

    /// The fence this write carries.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// A write under `guard`'s fence; `None` when the guard has none (fencing is off, or it is
    /// a reader's).
    pub fn of(guard: &Guard, fence_key: impl Into<Vec<u8>>) -> Option<FencedWrite> {
        Some(FencedWrite::new(fence_key, guard.fence()?))
    }

    /// Runs `write` on the store over `connection` if the fence is at least the highest seen,
    /// in one script with the check.
    ///
    /// # Errors
    ///
    /// The store's failure as a [`NodeError`]: the connection's, or the write's own error
    /// (`WRONGTYPE`, `OOM`: then nothing changed, the highest fence included), or
    /// [`NodeError::Server`] with code `FENCE` when the fence key holds something else than a
    /// number.
    pub async fn run<C>(&self, connection: &mut C, write: &Cmd) -> Result<Fenced, NodeError>
    where
        C: ConnectionLike + Send,
    {
        let mut invocation = SCRIPT.key(&self.fence_key[..]);
        invocation.arg(self.fence);
        for arg in write.args_iter() {
            if let Arg::Simple(bytes) = arg {
                invocation.arg(bytes);
            }
        }
        let reply: Value = invocation.invoke_async(connection).await?;
        match reply {
            Value::Array(mut parts) if parts.len() == 2 => {
                let answer = parts.pop().unwrap_or(Value::Nil);
                match parts.pop() {
                    Some(Value::Int(1)) => Ok(Fenced::Written(answer)),
                    Some(Value::Int(0)) => Ok(Fenced::Refused {
                        highest: redis::from_redis_value(answer).map_err(|error| {
                            NodeError::Protocol(format!("the stored fence: {error}"))
                        })?,
                    }),
                    other => Err(unexpected(other)),
                }
            }
            other => Err(unexpected(Some(other))),
        }
    }
}

/// A reply the script never gives.
fn unexpected(reply: Option<Value>) -> NodeError {
    NodeError::Protocol(format!("unexpected fenced write reply: {reply:?}"))
}
