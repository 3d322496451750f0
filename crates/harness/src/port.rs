//! A node's port on 127.0.0.1, on either backend: picking a free one, how often to try again
//! when it is taken, and the node's URL.

use std::net::{Ipv4Addr, TcpListener};
use std::time::Duration;

use crate::error::HarnessError;

/// Fresh ports tried when a new node's port is taken before redis binds it.
pub(crate) const FRESH_PORT_ATTEMPTS: u32 = 10;
/// Attempts to restart a node on its own port, and the pause between them.
pub(crate) const SAME_PORT_ATTEMPTS: u32 = 20;
pub(crate) const SAME_PORT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// A port that was free a moment ago: the kernel picks one for a throwaway
/// listener, which is closed again so redis can bind it.
pub(crate) fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// The URL of the server on `127.0.0.1:port`.
pub(crate) fn redis_url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}
