//! [`Lock`]: the client. Built from its nodes and [`LockOptions`] (nothing is sent until the
//! first acquisition), it hands out [`Guard`]s. Its methods by concern, as tokio splits a big
//! type: construction and what a lock tells about itself here; the acquiring verbs in
//! `acquire.rs`; waiting for a held lock in `wait.rs`; [`Lock::with_lock`] in `with_lock.rs`.
//! One acquisition's attempts, verdicts and cleanup are in `acquisition.rs`, below.

mod acquire;
mod sleep;
mod wait;
mod with_lock;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ConfigError, Error};
use crate::hold::Owners;
use crate::node::Node;
use crate::node_config::NodeConfig;
use crate::options::LockOptions;
use crate::outcome::NodeOutcome;
use crate::round::fencing::delete_counters;
use crate::round::{Members, NodeSet};
use crate::rules::identity::{Claims, Endpoint, first_duplicate};

/// A distributed lock client over one Redis server or a quorum of independent masters.
///
/// Cheap to clone (clones share connections); `Send + Sync`. Connections are made lazily, on
/// first use, so constructing a `Lock` sends nothing and only fails on a bad configuration.
///
/// ```no_run
/// use quorumlock::{Lock, LockOptions};
///
/// # async fn run() -> Result<(), quorumlock::Error> {
/// let lock = Lock::new(
///     ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"],
///     LockOptions::default(),
/// )?;
/// let guard = lock.acquire("invoice:42").await?;
/// // … work while guard.is_valid() …
/// let report = guard.release().await;
/// assert!(report.held <= 3);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    node_set: Arc<NodeSet>,
    /// The holds made for an owner, which its later acquisitions re-enter.
    owners: Arc<Owners>,
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("nodes", &self.node_addrs())
            .field("quorum", &self.node_set.settings.quorum)
            .field("ttl", &self.node_set.settings.ttl)
            .finish_non_exhaustive()
    }
}

impl Lock {
    /// A lock over `nodes`: one node is a single Redis server, several are independent
    /// masters and a Redlock over them. Each node is a [`NodeConfig`] or anything that becomes
    /// one: a URL (`redis://[user:password@]host:port[/db]`, `rediss://` with the `tls`
    /// feature), the application's own `&redis::Client` or `redis::ConnectionInfo`, or a Redis
    /// Cluster's seeds ([`NodeConfig::cluster`]). Nothing is sent until the first acquisition.
    ///
    /// The lock takes each client's connection details, not its connections: it connects with
    /// its own timeouts and checks every connection's server (the restart guard, one server one
    /// vote), see [`NodeConfig`].
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration only: no node, a node given twice
    /// ([`ConfigError::DuplicateNode`]), a URL that does not parse, an option out of range.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use quorumlock::{Lock, LockOptions};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// // One server.
    /// let single = Lock::new(["redis://127.0.0.1:6379"], LockOptions::new())?;
    /// // Clients the application already configured (credentials, database, protocol).
    /// let clients = (1..=3)
    ///     .map(|i| redis::Client::open(format!("redis://app:secret@10.0.0.{i}:6379/2")))
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let quorum = Lock::new(&clients, LockOptions::new())?;
    /// let guard = quorum.acquire("invoice:42").await?;
    /// guard.release().await;
    /// # let _ = single;
    /// # Ok(()) }
    /// ```
    pub fn new<I, N>(nodes: I, options: LockOptions) -> Result<Lock, Error>
    where
        I: IntoIterator<Item = N>,
        N: Into<NodeConfig>,
    {
        let configs: Vec<NodeConfig> = nodes.into_iter().map(Into::into).collect();
        let mut settings = options.validate(configs.len())?;
        if configs.iter().any(NodeConfig::is_cluster) {
            settings.tag_keys()?;
        }
        let claims = Arc::new(Claims::default());
        let nodes = configs
            .iter()
            .enumerate()
            .map(|(index, config)| {
                let resolved = config.resolve(index)?;
                Node::new(index, resolved, &settings, &claims).map(Arc::new)
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        // One server, one vote: the same host and port in two nodes (or twice among a
        // cluster's seeds) is a configuration error (the same server under two names is caught
        // on connect, by its run_id).
        let endpoints: Vec<(usize, Endpoint)> = nodes
            .iter()
            .flat_map(|node| {
                node.endpoints()
                    .into_iter()
                    .map(|endpoint| (node.index(), endpoint))
            })
            .collect();
        let addresses: Vec<Endpoint> = endpoints
            .iter()
            .map(|(_, endpoint)| endpoint.clone())
            .collect();
        if let Some((first, second)) = first_duplicate(&addresses) {
            let node = |at: usize| endpoints.get(at).map_or(0, |(index, _)| *index);
            return Err(ConfigError::DuplicateNode {
                first: node(first),
                second: node(second),
                addr: addresses
                    .get(second)
                    .map(|endpoint| endpoint.as_str().to_owned())
                    .unwrap_or_default(),
            }
            .into());
        }
        Ok(Lock {
            node_set: Arc::new(NodeSet {
                members: Arc::new(Members {
                    nodes,
                    settings,
                    background: Arc::default(),
                }),
                wait_list: Arc::default(),
                keeper: Arc::default(),
            }),
            owners: Arc::default(),
        })
    }

    /// What this lock's clones and guards share.
    pub(crate) fn node_set(&self) -> &Arc<NodeSet> {
        &self.node_set
    }

    /// This lock's registry of the holds made for an owner.
    pub(crate) fn owners(&self) -> &Arc<Owners> {
        &self.owners
    }

    /// The nodes' addresses (`host:port`), in configured order.
    pub fn node_addrs(&self) -> Vec<&str> {
        self.node_set
            .nodes
            .iter()
            .map(|node| &**node.addr())
            .collect()
    }

    /// How many nodes must agree.
    pub fn quorum_size(&self) -> usize {
        self.node_set.settings.quorum
    }

    /// The TTL of each acquisition.
    pub fn ttl(&self) -> Duration {
        self.node_set.settings.ttl
    }

    /// The longest one command waits for one node.
    pub fn node_timeout(&self) -> Duration {
        self.node_set.settings.node_timeout
    }

    /// The longest one attempt of an acquisition that waits ([`Patience::Wait`](crate::Patience::Wait))
    /// can take, and so how far past its wait the call can return: twice `connect_timeout + node_timeout`, the
    /// longest one request to one node can take (a connection to wait for, then the command).
    /// Once for the attempt's requests, which go to every node at once; and once more when the
    /// attempt fails, for its release on every node, which waits for the request still in
    /// flight there (it ends within the first bound) and then sends its own.
    pub fn attempt_bound(&self) -> Duration {
        self.node_set.request_bound().saturating_mul(2)
    }

    /// With the restart guard on (the default, see [`LockOptions::restart_guard`]), how long a
    /// node that does not persist every write stays out of acquisitions after it (re)started:
    /// `max_ttl` plus its drift allowance. `None` with the guard off.
    pub fn restart_guard_period(&self) -> Option<Duration> {
        self.node_set.settings.restart_guard
    }

    /// Waits until all background work has finished: releases of guards dropped without
    /// [`Guard::release`](crate::Guard::release) or of acquisitions dropped mid-flight, and requests to slower nodes
    /// still in flight when an acquisition or extension was decided. Call it before a runtime
    /// shuts down to leave no lock behind for its TTL.
    pub async fn settle(&self) {
        self.node_set.background.settle().await;
    }

    /// Deletes the fence counter of `resource` on every node (`DEL`, whatever the lock's state),
    /// so that it takes no space once the resource is retired. Works with fencing on or off.
    ///
    /// **The next fence of the resource is 1 again**: a store that still remembers a higher
    /// fence will refuse every later holder, and a holder valid meanwhile keeps a fence that a
    /// later holder's can equal. Call it only for a resource no one will lock again, or together
    /// with deleting the store's record of the last fence, while no one holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an empty resource name; a node that could not be asked is an
    /// outcome, not an error.
    ///
    /// Returns what each node did: [`NodeReply::Ours`](crate::NodeReply::Ours) deleted a counter,
    /// [`NodeReply::NotOurs`](crate::NodeReply::NotOurs) had none, [`NodeReply::Failed`](crate::NodeReply::Failed) could not be asked (try again: a
    /// counter left there stays until deleted).
    pub async fn delete_fence_counter(
        &self,
        resource: impl AsRef<[u8]>,
    ) -> Result<Vec<NodeOutcome>, Error> {
        delete_counters(&self.node_set, resource.as_ref()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Guard;

    fn send_sync_static<T: Send + Sync + 'static>(_: &T) {}
    fn send<T: Send>(_: &T) {}

    /// Guards move between tasks, and acquisitions can be spawned.
    #[test]
    fn locks_guards_and_their_futures_can_cross_tasks() {
        let lock = Lock::new(["redis://127.0.0.1:1"], LockOptions::new()).unwrap();
        send_sync_static(&lock);
        send(&lock.acquire("r"));
        send(&lock.acquire_until("r", std::future::pending()));
        let set = crate::Resources::new(["a", "b"]).unwrap();
        send(&lock.acquire(&set));
        send(&lock.try_acquire(String::from("r")));
        fn guard_is_send_sync_static<T: Send + Sync + 'static>() {}
        guard_is_send_sync_static::<Guard>();
        guard_is_send_sync_static::<Error>();
    }

    #[test]
    fn a_locks_debug_shows_addresses_and_never_a_password() {
        let url = "redis://user:secret@10.0.0.1:6379";
        let lock = Lock::new([url, "redis://10.0.0.2:6379"], LockOptions::new()).unwrap();
        let debug = format!("{lock:?}");
        assert!(!debug.contains("secret"), "{debug}");
        assert!(debug.contains("10.0.0.1:6379"), "{debug}");
    }

    #[test]
    fn no_node_is_a_configuration_error() {
        let none: [&str; 0] = [];
        assert!(matches!(
            Lock::new(none, LockOptions::new()),
            Err(Error::Config(ConfigError::NoNodes))
        ));
    }
}
