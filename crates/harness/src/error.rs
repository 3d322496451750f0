//! [`HarnessError`]: everything that can go wrong while starting or driving the harness, on
//! either backend.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::backend::Backend;
use crate::env::{BACKEND_ENV, LIBFAKETIME_ENV, REDIS_SERVER_ENV};

/// Everything that can go wrong while starting or driving the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The `redis-server` program could not be started at all.
    #[error("node {node}: could not start {program:?} (is redis-server installed? set {env} to its path)", env = REDIS_SERVER_ENV)]
    Spawn {
        /// Index of the node being started.
        node: usize,
        /// The program that was run.
        program: PathBuf,
        /// Why the operating system refused.
        #[source]
        source: std::io::Error,
    },
    /// The server process started but did not answer in time.
    #[error("node {node}: redis-server not ready after {waited:?}; output:\n{output}")]
    NotReady {
        /// Index of the node.
        node: usize,
        /// How long the harness waited.
        waited: Duration,
        /// The end of the server's log and console output.
        output: String,
    },
    /// The server process exited while starting up.
    #[error("node {node}: redis-server exited during startup ({status}); output:\n{output}")]
    Exited {
        /// Index of the node.
        node: usize,
        /// The exit status, as the operating system reported it.
        status: String,
        /// The end of the server's log and console output.
        output: String,
    },
    /// No usable port could be bound for a node after several attempts.
    #[error("node {node}: port {port} still in use after {attempts} attempts")]
    PortUnavailable {
        /// Index of the node.
        node: usize,
        /// The last port tried.
        port: u16,
        /// How many attempts were made.
        attempts: u32,
    },
    /// A process did not exit in time after being signalled.
    #[error("node {node}: redis-server did not exit within {waited:?}")]
    NotExited {
        /// Index of the node.
        node: usize,
        /// How long the harness waited.
        waited: Duration,
    },
    /// The node index is out of range.
    #[error("no such node: {0}")]
    NoSuchNode(usize),
    /// The operation needs a running node, but the node is stopped or killed.
    #[error("node {0} is not running")]
    NotRunning(usize),
    /// `start` was called on a node that is already running.
    #[error("node {0} is already running")]
    AlreadyRunning(usize),
    /// Sending a signal to a node's process failed.
    #[error("node {node}: could not send {signal}")]
    Signal {
        /// Index of the node.
        node: usize,
        /// Name of the signal, for example `SIGSTOP`.
        signal: &'static str,
        /// The error reported by `kill(2)`.
        #[source]
        source: nix::errno::Errno,
    },
    /// A proxy could not listen on its address.
    #[error("could not listen on {addr}")]
    Bind {
        /// The address that could not be bound.
        addr: SocketAddr,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// [`RedisClustersOptions`](crate::RedisClustersOptions) ask for no member, or for members
    /// of no shard.
    #[error(
        "redis clusters need at least one member of at least one shard (asked for {members} × {shards})"
    )]
    InvalidClusterShape {
        /// Members asked for.
        members: usize,
        /// Shards per member asked for.
        shards: usize,
    },
    /// A member or shard index of [`RedisClusters`](crate::RedisClusters) is out of range.
    #[error("no such shard: member {member}, shard {shard}")]
    NoSuchShard {
        /// The member index given.
        member: usize,
        /// The shard index given (0 when only the member was asked for).
        shard: usize,
    },
    /// A Redis Cluster member did not reach the state waited for (every shard
    /// `cluster_state:ok`, agreeing on one slot map covering all 16384 slots) in time.
    #[error("redis cluster member {member}: not ready after {waited:?}: {last}")]
    ClusterNotReady {
        /// The member index.
        member: usize,
        /// How long the harness waited.
        waited: Duration,
        /// What the last check found wrong.
        last: String,
    },
    /// A Redis Cluster member answered something the harness cannot use (no running shard, a
    /// slot nobody serves, a reply of an unexpected shape).
    #[error("redis cluster member {member}: {reason}")]
    ClusterReply {
        /// The member index.
        member: usize,
        /// What was wrong.
        reason: String,
    },
    /// `redis-cli` could not be run, failed, or took too long.
    #[error("redis-cli {args}: {reason}")]
    RedisCli {
        /// The arguments it was run with.
        args: String,
        /// Why it failed, with its output.
        reason: String,
    },
    /// The harness was used outside a Tokio runtime.
    #[error("the test harness must run inside a Tokio runtime")]
    NoRuntime,
    /// Another I/O error (temporary directories, log files, process status).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A Redis command sent by the harness itself failed.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// `QUORUMLOCK_BACKEND` names no backend.
    #[error("{env}={value:?} is not a backend (expected \"process\" or \"docker\")", env = BACKEND_ENV)]
    UnknownBackend {
        /// The value found in the environment.
        value: String,
    },
    /// The backend was asked for, but this build does not include it (the docker backend needs
    /// the `docker` cargo feature).
    #[error("the {0:?} backend is not compiled in (enable the `docker` cargo feature)")]
    BackendNotCompiled(Backend),
    /// A clock rate given with [`ClusterOptions::clock_rate`](crate::ClusterOptions::clock_rate) is not a finite number above zero.
    #[error("node {node}: clock rate {rate} is not a finite number above zero")]
    InvalidClockRate {
        /// Index of the node.
        node: usize,
        /// The rate given.
        rate: f64,
    },
    /// A node needs a clock rate, but libfaketime was not found.
    #[error("libfaketime not found (apt-get install faketime, or set {env} to libfaketime.so.1); looked at {searched:?}", env = LIBFAKETIME_ENV)]
    LibfaketimeNotFound {
        /// The paths that were tried.
        searched: Vec<PathBuf>,
    },
    /// Dropping packets needs the `nft` command, which was not found on `PATH` (Debian package
    /// `nftables`).
    #[error("nft not found on PATH (apt-get install nftables): packet-dropping partitions need it")]
    NftNotFound,
    /// `nft` ran but may not change the firewall: dropping packets needs root or
    /// `CAP_NET_ADMIN`.
    #[error("nft is not permitted to change the firewall (needs root or CAP_NET_ADMIN): {stderr}")]
    NftNotPermitted {
        /// What nft said.
        stderr: String,
    },
    /// `nft` failed for another reason.
    #[error("nft {args} failed ({status}): {stderr}")]
    Nft {
        /// The arguments it was run with.
        args: String,
        /// Its exit status.
        status: String,
        /// What it said.
        stderr: String,
    },
    /// A clock offset was set on a node started without
    /// [`ClusterOptions::clock_jumps`](crate::ClusterOptions::clock_jumps).
    #[error("node {0}: its clock cannot jump (start it with ClusterOptions::clock_jumps)")]
    NoClockJumps(usize),
    /// The certificates for [`ClusterOptions::tls`](crate::ClusterOptions) could not be made
    /// (cargo feature `tls`).
    #[error("TLS setup: {reason}")]
    Tls {
        /// What failed, and why.
        reason: String,
    },
    /// The Docker engine could not be reached (docker backend).
    #[error("the Docker engine is not reachable: {reason}")]
    DockerUnavailable {
        /// What failed.
        reason: String,
    },
    /// The image the docker backend runs does not exist locally; nothing is pulled.
    #[error("docker image {image} not found (build it with scripts/redis-image.sh)")]
    ImageMissing {
        /// The image name.
        image: String,
    },
    /// A Docker Engine API call made for a node failed (docker backend).
    #[error("node {node}: docker: {action} failed")]
    Docker {
        /// Index of the node.
        node: usize,
        /// What the harness was doing, for example `"pause container"`.
        action: &'static str,
        /// The engine's (or the transport's) error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
