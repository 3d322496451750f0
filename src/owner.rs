//! [`Owner`]: who holds a lock, for reentrancy: a value the caller makes and passes along. An
//! owner's second acquisition of a resource it holds joins its hold (the registry is in
//! `hold.rs`) instead of waiting for itself.

use std::sync::atomic::{AtomicU64, Ordering};

/// Who holds a lock, for reentrancy: an acquisition made for an owner
/// ([`Request::owner`](crate::Request::owner)) of a resource that owner already
/// holds through the same [`Lock`](crate::Lock) (or a clone of it) returns at once, with a guard
/// of the same hold: the same token, fence and validity. The lock is released when the last of
/// the owner's guards is released or dropped.
///
/// An owner is a value, never a thread or a task: make one per unit of work that may lock
/// again (a request, a job) and pass it, or a copy, wherever that work goes, spawned tasks
/// included. Each `Owner::new()` is distinct from every other in the process.
///
/// ```no_run
/// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
/// use quorumlock::{Owner, Request};
///
/// let job = Owner::new();
/// let outer = lock.acquire(Request::from("invoice:42").owner(job)).await?;
/// // Deeper in the same job: no wait, the same hold.
/// let inner = lock.acquire(Request::from("invoice:42").owner(job)).await?;
/// assert_eq!(inner.token(), outer.token());
/// assert_eq!(outer.hold_count(), 2);
/// inner.release().await; // still held by `outer`: nothing is sent
/// outer.release().await; // the last guard: released on the nodes
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner(u64);

impl Owner {
    /// A new owner, distinct from every other made in this process.
    pub fn new() -> Owner {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Owner(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for Owner {
    fn default() -> Owner {
        Owner::new()
    }
}
