//! The fenced quorum lock beside the plain one: what fencing tokens cost an acquisition (the
//! fence's write-back, one more round trip), measured in the same sequential rounds as the plain
//! lock, and the deletion of the fence counters the run left behind, which never expire.

use std::future::ready;

use futures::StreamExt;
use quorumlock::{Lock, LockOptions, NodeReply};

use super::scenarios::Subject;

/// How many resources' fence counters are deleted at once at the end of a run.
const DELETE_AT_ONCE: usize = 64;

/// The plain quorum lock `plain` over `urls` with fencing on, named `{plain}-fenced`: the same
/// nodes and options, its fence counters under `fence_prefix` (one of this run's own).
pub(super) fn fenced_subject(
    urls: impl IntoIterator<Item = String>,
    options: &LockOptions,
    fence_prefix: &str,
    plain: &str,
) -> Result<Subject, String> {
    let options = options
        .clone()
        .fencing(true)
        .fence_prefix(fence_prefix.as_bytes());
    let lock = Lock::new(urls, options).map_err(|e| format!("fenced quorum lock: {e}"))?;
    Ok(Subject {
        name: format!("{plain}-fenced"),
        lock,
        plain: Some(plain.to_owned()),
    })
}

/// Deletes the fence counters of `resources` on every node of `lock`, [`DELETE_AT_ONCE`] at a
/// time; each deletion is bounded by the lock's timeouts. Returns how many resources still have
/// a counter on some node (one that could not be asked).
pub(super) async fn delete_counters(lock: &Lock, resources: impl Iterator<Item = String>) -> usize {
    futures::stream::iter(resources)
        .map(|resource| async move { lock.delete_fence_counter(resource).await })
        .buffer_unordered(DELETE_AT_ONCE)
        .filter(|deleted| {
            ready(match deleted {
                Ok(outcomes) => outcomes
                    .iter()
                    .any(|outcome| matches!(outcome.reply, NodeReply::Failed(_))),
                Err(_) => true,
            })
        })
        .count()
        .await
}
