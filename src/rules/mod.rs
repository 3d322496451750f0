//! The pure rules: what to decide, never how to talk to Redis. Nothing here imports `redis`,
//! `tokio`, `futures`, or anything of the crate outside this folder (CI checks it), so every rule
//! is specified by unit and property tests that need no server.
//!
//! - `quorum`: the vote tally; when a round is won, lost to other owners, or lost to failures.
//! - `validity`: lease arithmetic: drift = ttl × factor + 2 ms, validity = ttl − elapsed − drift.
//! - `patience`: [`Patience`](crate::Patience): once, wait woken, or poll on a retry policy.
//! - `permits`: a semaphore's slots: their names, and the order an acquisition tries them in.
//! - `rwlock`: a read-write lock's keys on a node: the writer's, each reader's, the readers' set, the writer's mark.
//! - `retry`: [`RetryPolicy`](crate::RetryPolicy): attempts, delay + jitter, overall deadline.
//! - `batch`: the batched keep-alive: keys per command, per-key answers and votes, missing nodes.
//! - `renewal`: the keep-alive's schedule: next extension, retry pause, `max_hold`, trusted deadline.
//! - `ordering`: per node, which of an acquisition's requests may still land, and what a release does there.
//! - `recovery`: the restart guard: what `INFO` says, and from when a node may vote.
//! - `replacement`: whether the server at a node's address is still the one the lock knew (failover).
//! - `identity`: one server, one vote: duplicate addresses, and which node votes for which `run_id`.
//! - `commands`: which native commands a server offers in place of a script (`SET … IFEQ`).
//! - `clock`: the lease clock (CLOCK_BOOTTIME where there is one: counts suspended time).
//! - `resources`: the keys of one acquisition, and a set's checks, order and vote rule.
//! - `slots`: Redis Cluster's hash slots: a key's slot, the tagged keys of a cluster lock, the slot map.
//! - `token`: [`Token`](crate::Token)s and the key of a resource.
//! - `wait`: when a waiter tries again without a wake-up: the key's expiry on a quorum.
//! - `hand_off`: whether a release keeps its key for a waiter in its process, and its message.
//! - `defect`: test-only (`chaos-defects`): the deliberate defects the chaos tooling scores.

pub(crate) mod batch;
pub(crate) mod clock;
pub(crate) mod commands;
#[cfg(feature = "chaos-defects")]
pub(crate) mod defect;
pub(crate) mod hand_off;
pub(crate) mod identity;
pub(crate) mod leader;
pub(crate) mod ordering;
pub(crate) mod patience;
pub(crate) mod permits;
pub(crate) mod quorum;
pub(crate) mod recovery;
pub(crate) mod renewal;
pub(crate) mod replacement;
pub(crate) mod resources;
pub(crate) mod retry;
pub(crate) mod rwlock;
pub(crate) mod slots;
pub(crate) mod token;
pub(crate) mod validity;
pub(crate) mod wait;
