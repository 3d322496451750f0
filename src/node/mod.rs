//! One member of the lock: a Redis master, its connection, and the lock's commands on it, one
//! command per file. Nothing here knows about other nodes or about rounds (`round/` does).
//!
//! - `member`: [`Node`]: one server, or a Redis Cluster whose shard serving a key's slot takes its requests.
//! - `connection`: `Server`: the lazy shared connection, its generations, connect and command timeouts.
//! - `cluster`: a Redis Cluster node's shards and slot map (`CLUSTER SLOTS`, `MOVED`).
//! - `redirect`: the connection a command is handed; for a cluster, following `MOVED` and `ASK`.
//! - `client`: a node's connection details as a `redis::Client`: `TCP_NODELAY`, TLS certificates.
//! - `stream`: the TCP socket under a connection, whose writes gather what is ready to go.
//! - `identify`: what a new connection's server says about itself (`INFO`, `CONFIG GET appendfsync`).
//! - `history`: which server the node knew at its address, when it last heard from it, who sits out.
//! - `vote`: the gates: may this node vote in an acquisition now, may it be counted after one.
//! - `redis_error`: redis-rs errors as typed [`NodeError`](crate::NodeError)s.
//! - `wire`: building, sending and reading commands the same way for each.
//! - `acquire`: `SET NX PX`, acquire-or-renew, and with fencing the next fence from the counter.
//! - `acquire_scripts`: the acquire-or-renew and fenced acquire scripts, which a writer's check goes in front of.
//! - `release`: compare-and-delete, and the wake-up it publishes.
//! - `rwlock`: a read-write lock's sides: a reader's acquire and release, the writer's check, the downgrade.
//! - `pttl`: how long a lock key has left, for a waiter's bound.
//! - `subscription`: one connection per node that hears released keys for the lock's waiters.
//! - `extend`: compare-and-`PEXPIRE`.
//! - `extend_batch`: the batched keep-alive: renew ours, set absent keys where the gates allow, per key.
//! - `counter`: the fence counter as every fenced script reads and writes it (on volatile nodes with the run that wrote it), and its read for recovery.
//! - `write_back`: the fence's write-back (counter = max(counter, fence) while the key is ours).
//! - `set`: a set of resources' acquire, release, extend and write-back, each one atomic script.
//! - `delete_counter`: `DEL` of a retired resource's fence counter.
//! - `leader`: an election's leader record, published where the lock key is ours.
//! - `inspect`: what a node holds of a resource (token, PTTL, fence counter, leader record), in one read.

pub(crate) mod acquire;
mod acquire_scripts;
mod client;
mod cluster;
mod connection;
pub(crate) mod counter;
pub(crate) mod delete_counter;
pub(crate) mod extend;
pub(crate) mod extend_batch;
mod history;
mod identify;
pub(crate) mod inspect;
pub(crate) mod leader;
mod member;
pub(crate) mod pttl;
mod redirect;
mod redis_error;
pub(crate) mod release;
mod release_scripts;
pub(crate) mod rwlock;
pub(crate) mod set;
mod stream;
pub(crate) mod subscription;
mod vote;
pub(crate) mod wire;
pub(crate) mod write_back;

pub(crate) use connection::Lane;
pub(crate) use member::Node;

/// Node `index` on the test server at `url`, with a claim table of its own.
#[cfg(test)]
pub(crate) fn test_node(index: usize, url: &str, settings: &crate::settings::Settings) -> Node {
    let info =
        redis::IntoConnectionInfo::into_connection_info(url).expect("a test server's URL parses");
    let resolved = crate::node_config::Resolved::Server(info);
    Node::new(index, resolved, settings, &std::sync::Arc::default()).expect("a test node")
}
