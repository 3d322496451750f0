//! All members at once: one request to every node, decided as soon as the quorum rule allows, in
//! the order the ledger keeps, with the work that outlives a call counted in the background.
//!
//! - `members`: [`Members`]: a lock's nodes, settings and background work, all a round needs.
//! - `node_set`: [`NodeSet`]: a lock's members, waiters and keeper, shared with its guards.
//! - `fan_out`: one command to every node inside the caller's future; the early decision.
//! - `ledger`: one acquisition's per-node records under a lock; requests handed over by the ordering rule.
//! - `acquire`: one node's acquire request, handed over through the ledger.
//! - `release`: one node's compare-and-delete after our requests there; the release round.
//! - `set_answers`: what each node of a round said about each key of a set.
//! - `fencing`: the fence of a won round, its write-back to a quorum, counters deleted.
//! - `wait_list`: per resource, the waiters in arrival order, their wake-ups and the expiry bound.
//! - `keep_batch`: one batch of kept leases to every node, each lease tallied on its own.
//! - `keeper`: one lock's kept leases, their due times and deadlines, the task that batches them.
//! - `background`: counted tasks (releases from `Drop`, requests left after a decision); `settle`.

pub(crate) mod acquire;
pub(crate) mod background;
pub(crate) mod fan_out;
pub(crate) mod fencing;
pub(crate) mod keep_batch;
pub(crate) mod keeper;
pub(crate) mod ledger;
pub(crate) mod members;
pub(crate) mod node_set;
pub(crate) mod release;
pub(crate) mod set_answers;
mod slots;
pub(crate) mod wait_list;

pub(crate) use members::Members;
pub(crate) use node_set::NodeSet;
