//! [`Connection`]: what a node's command goes out over: one server's connection, or for a
//! cluster node the connection of the shard serving the command's slot, which follows the
//! cluster's `MOVED` and `ASK` redirections to the shard they name. A redirected request goes
//! out only through the gate the first shard passed (a voting request only to a shard that may
//! vote): a redirection is the server's answer that it did not run the request, so the request
//! runs once, on the shard that now serves the slot.
//!
//! The ordering rule: a request is recorded under the generation of the connection it was
//! handed to. Once redirected it runs over another; should it then end without a reply (or be
//! dropped), the first connection is dropped too, so that no later request goes out under that
//! generation and a release can never count as ordered after it there.

use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use futures::future::Either;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, ServerErrorKind, Value,
};

use super::cluster::Cluster;
use super::connection::{Lane, Server};
use super::vote::Counted;
use crate::outcome::NodeError;

/// Redirections one request follows at most: a slot moves once per resharding step, so more
/// means the cluster's map is changing faster than it can be followed.
const MAX_REDIRECTS: usize = 4;

/// The connection a command is handed.
pub(crate) enum Connection {
    /// A node that is one server.
    Direct(MultiplexedConnection),
    /// A cluster node's shard, following redirections.
    Routed(Box<Routed>),
}

/// Which gate a request passed, and so which a shard it is redirected to must pass.
#[derive(Debug, Clone, Copy)]
pub(super) enum Gate {
    /// None (a release, a `PTTL`, a counter's `DEL`).
    Open,
    /// The vote gate (`Server::pass_vote`).
    Vote,
    /// A counted request's gate (`Server::pass_counted`).
    Counted(Counted),
}

/// A cluster shard's connection for one request.
pub(crate) struct Routed {
    pub(super) connection: MultiplexedConnection,
    pub(super) cluster: Arc<Cluster>,
    /// The shard the request was handed to, and the generation of that connection.
    pub(super) first: Arc<Server>,
    pub(super) first_generation: u64,
    /// Redirected, and no reply from the shard named yet.
    pub(super) in_doubt: bool,
    /// The shard an `ASK` named: this request's later commands (a script's `SCRIPT LOAD` and
    /// retry after `NOSCRIPT` there) go to it too, each after `ASKING`.
    pub(super) asking: Option<(Arc<Server>, u64, MultiplexedConnection)>,
    pub(super) gate: Gate,
    /// Why a redirection was not followed (its shard may not take the request), for the node
    /// to report in place of the placeholder error the command saw.
    pub(super) refused: Arc<Mutex<Option<NodeError>>>,
}

impl Connection {
    /// The server's own connection, for a node that is one server.
    pub(crate) fn direct(&mut self) -> Option<&mut MultiplexedConnection> {
        match self {
            Connection::Direct(connection) => Some(connection),
            Connection::Routed(_) => None,
        }
    }

    /// Sends one request and reads its reply (error replies as values).
    pub(crate) fn send<'a>(
        &'a mut self,
        command: &'a Cmd,
    ) -> impl Future<Output = RedisResult<Value>> + 'a {
        match self {
            Connection::Direct(connection) => Either::Left(connection.send_packed_command(command)),
            Connection::Routed(routed) => Either::Right(routed.send(command).boxed()),
        }
    }
}

impl Routed {
    /// Sends `command` to the shard, and where it answers `MOVED` or `ASK`, to the shard named,
    /// at most [`MAX_REDIRECTS`] times. A `MOVED` also moves the slot in the cluster's map and
    /// this request's later commands (a script's `SCRIPT LOAD` after `NOSCRIPT`) to that shard;
    /// after an `ASK` they go to the shard it named, each after `ASKING`.
    async fn send(&mut self, command: &Cmd) -> RedisResult<Value> {
        let mut reply = match &mut self.asking {
            Some((server, generation, connection)) => {
                let reply = asking(connection, command).await;
                server.note_reply(*generation, &reply);
                reply
            }
            None => self
                .connection
                .send_packed_command(command)
                .await
                .and_then(Value::extract_error),
        };
        for _ in 0..MAX_REDIRECTS {
            let Err(error) = &reply else {
                return reply;
            };
            let Some((addr, slot)) = error.redirect_node() else {
                return reply;
            };
            let ask = error.kind() == ErrorKind::Server(ServerErrorKind::Ask);
            let target = if ask {
                self.cluster.server_at(addr)
            } else {
                self.cluster.moved(slot, addr)
            };
            let (server, generation, mut connection) = match self.pass(target).await {
                Ok(passed) => passed,
                Err(refused) => return Err(self.refuse(refused)),
            };
            self.in_doubt = true;
            reply = if ask {
                asking(&mut connection, command).await
            } else {
                connection
                    .send_packed_command(command)
                    .await
                    .and_then(Value::extract_error)
            };
            server.note_reply(generation, &reply);
            self.in_doubt = matches!(&reply, Err(error) if error.code().is_none());
            if ask {
                self.asking = Some((server, generation, connection));
            } else {
                self.connection = connection;
                self.asking = None;
            }
        }
        reply
    }

    /// The shard a redirection names, through this request's gate.
    async fn pass(
        &self,
        target: Result<Arc<Server>, NodeError>,
    ) -> Result<(Arc<Server>, u64, MultiplexedConnection), NodeError> {
        let server = target?;
        let (generation, connection) = match self.gate {
            Gate::Open => server
                .connection(Lane::Requests)
                .await
                .map(|(generation, connected)| (generation, connected.connection))?,
            Gate::Vote => server
                .pass_vote(Lane::Requests)
                .await
                .map(|(generation, connection, _run_id)| (generation, connection))?,
            Gate::Counted(counted) => server
                .pass_counted(counted, Lane::Requests)
                .await
                .map(|(generation, connection, _commands)| (generation, connection))?,
        };
        Ok((server, generation, connection))
    }

    /// Keeps `error` for the node to report, and gives the command a placeholder: an error
    /// reply (nothing was sent to the shard named, and the first one did not run the request).
    fn refuse(&self, error: NodeError) -> RedisError {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
        RedisError::from((
            ErrorKind::Server(ServerErrorKind::TryAgain),
            "redirection not followed",
        ))
    }
}

/// `ASKING` and `command` in one write, so that no other request of the shared connection comes
/// between them; `command`'s reply.
async fn asking(connection: &mut MultiplexedConnection, command: &Cmd) -> RedisResult<Value> {
    let mut asking = redis::pipe();
    asking.cmd("ASKING").add_command(command.clone());
    connection
        .send_packed_commands(&asking, 1, 1)
        .await
        .and_then(|mut values| values.pop().ok_or_else(no_reply))
        .and_then(Value::extract_error)
}

/// A redirected request without a reply (ended so, or dropped on the way): the connection it
/// was handed to goes, with its generation (the ordering rule above).
impl Drop for Routed {
    fn drop(&mut self) {
        if self.in_doubt {
            self.first.reset(self.first_generation);
        }
    }
}

fn no_reply() -> RedisError {
    RedisError::from((ErrorKind::Parse, "no reply to a redirected request"))
}

/// Scripts (`Script::invoke_async`) run over it as over a plain connection.
impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Direct(connection) => connection.req_packed_command(cmd),
            Connection::Routed(routed) => routed.send(cmd).boxed(),
        }
    }

    /// Not redirected: the lock sends no pipeline of its own through a node.
    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Direct(connection) => connection.req_packed_commands(cmd, offset, count),
            Connection::Routed(routed) => routed.connection.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Direct(connection) => connection.get_db(),
            Connection::Routed(_) => 0,
        }
    }
}
