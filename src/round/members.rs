//! [`Members`]: the nodes of one lock with its settings and background work, all that a round
//! needs of its lock.

use std::sync::Arc;

use super::background::Background;
use crate::node::Node;
use crate::settings::Settings;

/// The nodes of one lock with its settings and background work: all a round needs. Apart from
/// [`NodeSet`](super::NodeSet) only because the keeper's task holds it, and the node set holds the keeper (the
/// keeper then needs nothing of the node set: no import circle, no reference cycle).
pub(crate) struct Members {
    pub(crate) nodes: Vec<Arc<Node>>,
    pub(crate) settings: Settings,
    pub(crate) background: Arc<Background>,
}
