//! A read-write lock over the quorum ([`Request::read`](crate::Request::read),
//! [`Request::write`](crate::Request::write)): each side is decided on every node by one atomic
//! script (`node/rwlock.rs`) over the lock's keys there (`rules/rwlock.rs`), and won by the
//! same quorum rule as a lock, so a writer's quorum and a reader's share a node that refused
//! one of them. Both sides are plain [`Guard`](crate::Guard)s: a reader's key is its own (its
//! token in the name), so extending and keeping it alive are a lock's; its release also leaves
//! the readers' set and wakes on the writer key's channel, which every waiter of the lock, of
//! either side, listens on (`lock/wait.rs`). Here: a write guard's downgrade.
//! `docs/ARCHITECTURE.md` ("Read-write locks") has why it is safe; the model checks it.

mod downgrade;
