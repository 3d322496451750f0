//! What a [`Lock`](crate::Lock) and its guards share: the nodes, the settings, the background
//! work, and the release that both an acquisition (cleaning up after itself) and a
//! [`Guard`](crate::Guard) use. Below both, so neither imports the other for it.

use std::future::pending;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;

use crate::background::Background;
use crate::commands;
use crate::fanout::{Round, Until, fan_out};
use crate::ledger::Ledger;
use crate::node::Node;
use crate::options::Settings;
use crate::token::Token;

/// What a [`Lock`](crate::Lock) and its guards share.
pub(crate) struct Shared {
    pub(crate) nodes: Vec<Arc<Node>>,
    pub(crate) settings: Settings,
    pub(crate) background: Arc<Background>,
}

impl Shared {
    /// The longest one request to one node can take: connecting, then the command. A release
    /// waits at most this long for a request of ours still in flight to a node before it sends
    /// there, and a retry for the previous attempt's releases before it starts.
    pub(crate) fn request_bound(&self) -> Duration {
        self.settings
            .connect_timeout
            .saturating_add(self.settings.node_timeout)
    }
}

/// Compare-and-delete on every node a request of ours went out to, never retrying, each after
/// the request of ours still in flight there has finished (see [`commands::release`]). Returns
/// as soon as a quorum of nodes is known to be free of our key (from then on the lock is free
/// for others); the requests to the other nodes finish as counted background work. Without such
/// a quorum, waits for every node (each within its timeouts).
pub(crate) async fn release_all(
    shared: &Shared,
    key: &Arc<[u8]>,
    token: &Token,
    ledger: &Arc<Ledger>,
) -> Round {
    let never = pin!(pending::<()>());
    let wait = shared.request_bound();
    // Built once and shared: every node gets the same bytes.
    let command = Arc::new(commands::release_command(key, token.as_str()));
    let mut round = fan_out(
        &shared.nodes,
        shared.settings.quorum,
        Until::Freed,
        never,
        |node| {
            let (command, ledger) = (Arc::clone(&command), Arc::clone(ledger));
            async move { commands::release(&node, &command, &ledger, wait).await }
        },
    )
    .await;
    if let Some(unanswered) = round.unanswered.take() {
        shared.background.finish_unanswered(unanswered);
    }
    round
}

/// Starts [`release_all`] as a counted background task. Used from `Drop`, which cannot wait.
pub(crate) fn release_in_background(
    shared: &Arc<Shared>,
    key: Arc<[u8]>,
    token: Token,
    ledger: Arc<Ledger>,
    fallback: Option<&Handle>,
) {
    let task_shared = Arc::clone(shared);
    let spawned = shared.background.spawn(fallback, async move {
        let round = release_all(&task_shared, &key, &token, &ledger).await;
        tracing::debug!(released = round.ours(), "background release finished");
    });
    if !spawned {
        tracing::warn!("no tokio runtime to release a lock on; it will expire after its TTL");
    }
}
