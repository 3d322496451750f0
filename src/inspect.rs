//! [`Lock::inspect`]: what each node holds of a resource, for an operator (`quorumlock
//! status`): who holds its lock key (a token's first digits, never the whole token), for how
//! much longer, its fence counter, and an election leader's published value.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{ConfigError, Error};
use crate::lock::Lock;
use crate::node::inspect::read;
use crate::outcome::NodeError;
use crate::rules::leader::{View, record_key};

/// How many hex digits of a holder's token [`KeyState::holder`] shows: enough to tell holders
/// apart, far too few to release or extend with.
const TOKEN_PREFIX: usize = 8;

/// What one node answered to [`Lock::inspect`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NodeState {
    /// The node's index in the lock's list.
    pub node: usize,
    /// The node's `host:port`, without credentials.
    pub addr: Arc<str>,
    /// What it holds of the resource, or why it could not be read.
    pub state: Result<KeyState, NodeError>,
}

/// What one node holds of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyState {
    /// The first 8 hex digits of the token in the resource's lock key, if it is held there.
    pub holder: Option<String>,
    /// How long the lock key has left there (`None`: no key, or one without expiry).
    pub expires_in: Option<Duration>,
    /// The resource's fence counter there: the highest fence handed out (fencing on).
    pub fence: Option<u64>,
    /// The value an election's leader published, if the holder there is that leader.
    pub leader_value: Option<Vec<u8>>,
}

impl KeyState {
    fn of(view: View) -> KeyState {
        let leader_value = view
            .record
            .filter(|record| view.holder.as_deref() == Some(record.token.as_str()))
            .map(|record| record.value);
        KeyState {
            holder: view
                .holder
                .map(|token| token.chars().take(TOKEN_PREFIX).collect()),
            expires_in: u64::try_from(view.pttl_ms).ok().map(Duration::from_millis),
            fence: view.fence,
            leader_value,
        }
    }
}

impl Lock {
    /// Reads what every node holds of `resource` (a lock, or an election of that name), in
    /// node order, each node in one script. Read-only: it takes, extends and releases nothing,
    /// and tells no quorum apart from a minority (the caller compares the holders).
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// for node in lock.inspect("nightly-report").await? {
    ///     match node.state {
    ///         Ok(state) => println!("{}: held by {:?} for {:?}", node.addr, state.holder, state.expires_in),
    ///         Err(error) => println!("{}: {error}", node.addr),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an empty resource name.
    pub async fn inspect(&self, resource: impl AsRef<[u8]>) -> Result<Vec<NodeState>, Error> {
        let resource = resource.as_ref();
        if resource.is_empty() {
            return Err(ConfigError::EmptyResource.into());
        }
        let node_set = self.node_set();
        let settings = &node_set.settings;
        let key = settings.lock_key(resource)?;
        let fence_key = settings.fence_key(resource)?;
        let record_key = record_key(&key);
        let states = futures::future::join_all(node_set.nodes.iter().map(|node| {
            let (key, record_key, fence_key) = (&key, &record_key, &fence_key);
            async move {
                NodeState {
                    node: node.index(),
                    addr: Arc::clone(node.addr()),
                    state: read(node, key, record_key, fence_key)
                        .await
                        .map(KeyState::of),
                }
            }
        }))
        .await;
        Ok(states)
    }
}
