//! `PTTL` of a lock key on one node: how long the key there has left, for a waiter's bound on
//! when to try again without a wake-up (`rules/wait.rs`). Read-only, so it passes no gate.

use super::Node;
use crate::outcome::NodeError;
use crate::rules::wait::KeyTtl;

/// The key's remaining time on `node`.
pub(crate) async fn pttl(node: &Node, key: &[u8]) -> Result<KeyTtl, NodeError> {
    node.run(key, |mut connection, _generation| async move {
        redis::cmd("PTTL")
            .arg(key)
            .query_async::<i64>(&mut connection)
            .await
    })
    .await
    .map(KeyTtl::from_pttl)
}
