//! One shard of a member: a process node of the process backend started cluster-enabled, with
//! its ports and cluster node id.

use std::sync::{Mutex, PoisonError};

use tracing::debug;

use super::NODE_TIMEOUT_MS;
use super::migration::ShardRef;
use crate::error::HarnessError;
use crate::options::ClusterOptions;
use crate::port::free_port;
use crate::process::ProcessServer;
use crate::transport::Transport;

/// One shard: its ports, its cluster node id, and its process.
#[derive(Debug)]
pub(super) struct Shard {
    pub(super) port: u16,
    /// The cluster bus port (`--cluster-port`), fixed so it survives restarts and stays below
    /// 65536 whatever the client port is.
    pub(super) bus_port: u16,
    pub(super) id: String,
    /// Its options: the cluster's, with this shard's bus port among the extra arguments.
    pub(super) options: ClusterOptions,
    /// Behind a lock because finding out whether it still runs reaps it, and the read-only
    /// methods take `&self`; never held across an await.
    pub(super) server: Mutex<ProcessServer>,
}

impl Shard {
    pub(super) fn is_running(&self) -> Result<bool, HarnessError> {
        self.server
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_running()
    }

    pub(super) fn shard_ref(&self) -> ShardRef {
        ShardRef {
            port: self.port,
            id: self.id.clone(),
        }
    }
}

/// Bus ports tried per shard: a taken bus port makes every client port tried with it fail.
const BUS_PORT_ATTEMPTS: u32 = 3;

/// Starts process node `node` as a cluster-enabled shard on a free port, with a free bus port
/// of its own (another one if the server could not bind the ports it was given); its node id
/// is filled in once its member is formed.
pub(super) async fn start_shard(base: &ClusterOptions, node: usize) -> Result<Shard, HarnessError> {
    let mut attempt = 1;
    loop {
        let bus_port = free_port()?;
        let options = base.clone().extra_args(cluster_args(bus_port));
        match ProcessServer::start_new(&options, &Transport::Plain, None, None, node).await {
            Ok((server, port)) => {
                return Ok(Shard {
                    port,
                    bus_port,
                    id: String::new(),
                    options,
                    server: Mutex::new(server),
                });
            }
            Err(HarnessError::PortUnavailable { .. }) if attempt < BUS_PORT_ATTEMPTS => {
                debug!(
                    node,
                    bus_port, attempt, "ports taken, trying another bus port"
                );
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

/// The `redis-server` arguments that make a node a cluster shard with bus port `bus_port`.
fn cluster_args(bus_port: u16) -> Vec<String> {
    let mut args: Vec<String> = [
        "--cluster-enabled",
        "yes",
        // Relative to the shard's own directory, where redis-server runs.
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    args.push(NODE_TIMEOUT_MS.to_string());
    args.push("--cluster-port".to_owned());
    args.push(bus_port.to_string());
    args
}
