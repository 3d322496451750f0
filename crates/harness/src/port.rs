//! A node's port on 127.0.0.1, on either backend: picking a free one, how often to try again
//! when it is taken, and the node's URL.

use std::future::Future;
use std::net::{Ipv4Addr, TcpListener};
use std::time::Duration;

use tracing::debug;

use crate::error::HarnessError;

/// Fresh ports tried when a new node's port is taken before redis binds it.
const FRESH_PORT_ATTEMPTS: u32 = 10;
/// Attempts to restart a node on its own port, and the pause between them.
const SAME_PORT_ATTEMPTS: u32 = 20;
const SAME_PORT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Starts node `index` on a fresh free port, and on another one while `start` finds its port
/// taken (answers `Ok(None)`): the port can be taken between finding it and the server binding
/// it. Gives what `start` started and its port.
pub(crate) async fn on_a_free_port<T, Start, Started>(
    index: usize,
    mut start: Start,
) -> Result<(T, u16), HarnessError>
where
    Start: FnMut(u16) -> Started,
    Started: Future<Output = Result<Option<T>, HarnessError>>,
{
    let mut port = 0;
    for attempt in 1..=FRESH_PORT_ATTEMPTS {
        port = free_port()?;
        match start(port).await? {
            Some(started) => return Ok((started, port)),
            None => debug!(node = index, port, attempt, "port taken, trying another"),
        }
    }
    Err(HarnessError::PortUnavailable {
        node: index,
        port,
        attempts: FRESH_PORT_ATTEMPTS,
    })
}

/// Restarting node `index` on its own `port`: how long to keep trying while another socket
/// holds the port. A struct the caller loops with, not a function taking the start as a closure,
/// because a restart needs `&mut` access to the node on every try.
pub(crate) struct OwnPortRetry {
    index: usize,
    port: u16,
    attempts: u32,
}

impl OwnPortRetry {
    /// No attempt made yet.
    pub(crate) fn new(index: usize, port: u16) -> OwnPortRetry {
        OwnPortRetry {
            index,
            port,
            attempts: 0,
        }
    }

    /// An attempt found the port taken: pause before the next one, or give up with
    /// [`HarnessError::PortUnavailable`] once the attempts are used up.
    pub(crate) async fn port_taken(&mut self) -> Result<(), HarnessError> {
        self.attempts += 1;
        if self.attempts >= SAME_PORT_ATTEMPTS {
            return Err(HarnessError::PortUnavailable {
                node: self.index,
                port: self.port,
                attempts: SAME_PORT_ATTEMPTS,
            });
        }
        debug!(
            node = self.index,
            port = self.port,
            attempt = self.attempts,
            "port busy, retrying"
        );
        tokio::time::sleep(SAME_PORT_RETRY_DELAY).await;
        Ok(())
    }
}

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
