//! [`RedisClustersOptions`]: how many members and shards [`RedisClusters::start`] starts, and
//! with which binaries.
//!
//! [`RedisClusters::start`]: crate::RedisClusters::start

use std::path::PathBuf;

use crate::options::{ClusterOptions, Persistence};

/// Options for [`RedisClusters::start`](crate::RedisClusters::start).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisClustersOptions {
    pub(super) members: usize,
    pub(super) shards: usize,
    /// What every shard's `redis-server` is started with (before its cluster arguments).
    pub(super) node: ClusterOptions,
    pub(super) redis_cli: PathBuf,
}

impl Default for RedisClustersOptions {
    /// Three members of three shards each, AOF with `appendfsync always` (on `/dev/shm` where it
    /// exists, as [`Persistence::AofAlways`] does for a [`TestCluster`](crate::TestCluster)), the
    /// `redis-server` named by `QUORUMLOCK_REDIS_SERVER` (or found on `PATH`), and `redis-cli`
    /// found on `PATH`.
    fn default() -> Self {
        RedisClustersOptions {
            members: 3,
            shards: 3,
            node: ClusterOptions::default().persistence(Persistence::AofAlways),
            redis_cli: PathBuf::from("redis-cli"),
        }
    }
}

impl RedisClustersOptions {
    /// Number of independent Redis Clusters, the quorum members (default 3, at least 1).
    #[must_use]
    pub fn members(mut self, members: usize) -> Self {
        self.members = members;
        self
    }

    /// Shards (masters, no replicas) per member (default 3, at least 1). The slots are split
    /// evenly between them, in shard order.
    #[must_use]
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards;
        self
    }

    /// The `redis-server` binary to run (Redis 7 or newer, or Valkey). A wrapper script must
    /// `exec` the server, as for [`ClusterOptions::redis_server`](crate::ClusterOptions::redis_server).
    #[must_use]
    pub fn redis_server(mut self, path: impl Into<PathBuf>) -> Self {
        self.node = self.node.redis_server(path);
        self
    }

    /// The `redis-cli` binary [`RedisClusters::reshard`](crate::RedisClusters::reshard) runs (default: found on `PATH`).
    #[must_use]
    pub fn redis_cli(mut self, path: impl Into<PathBuf>) -> Self {
        self.redis_cli = path.into();
        self
    }
}
