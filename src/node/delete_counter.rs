//! `DEL` of a resource's fence counter on one node, for a retired resource
//! (`Lock::delete_fence_counter`).

use super::Node;
use super::wire::one_or_zero;
use crate::outcome::NodeError;

/// Deletes a fence counter. Answers whether there was one.
pub(crate) async fn delete_counter(node: &Node, fence_key: &[u8]) -> Result<bool, NodeError> {
    node.run(fence_key, |mut connection, _generation| async move {
        redis::cmd("DEL")
            .arg(fence_key)
            .query_async(&mut connection)
            .await
    })
    .await
    .and_then(one_or_zero)
}
