//! The [`Report`] of one run (what the table prints and `--json` writes) and the facts about
//! the machine it ran on.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::contended::Contended;
use super::kept::KeptCost;
use super::plan::Plan;
use super::rwlock::RwBench;
use super::stats::Row;
use super::targets::Target;
use super::verbs::Verbs;

/// Facts about where the run happened.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Machine {
    pub(super) nproc: usize,
    pub(super) cpu_model: String,
    pub(super) redis_version: String,
}

/// Everything `--json` writes.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub(super) mode: String,
    pub(super) quick: bool,
    pub(super) machine: Machine,
    pub(super) plan: Plan,
    pub(super) ttl_ms: u64,
    pub(super) node_timeout_ms: u64,
    pub(super) rows: Vec<Row>,
    pub(super) targets: Vec<Target>,
    /// What keeping many guards alive at once cost (not with `--nodes`).
    pub(super) kept: Option<KeptCost>,
    /// Waiters wanting one key, and many waiters on one lock (not with `--nodes`).
    pub(super) contended: Option<Contended>,
    /// The default acquire against try_acquire (local nodes only).
    pub(super) verbs: Option<Verbs>,
    /// A read-write lock's free read and its writer among 15 readers (local nodes only).
    pub(super) rwlock: Option<RwBench>,
    pub(super) notes: Vec<String>,
}

impl Report {
    /// Writes the report as pretty-printed JSON to `path`.
    pub(super) fn write_json(&self, path: &Path) -> Result<(), String> {
        crate::json::write_json_file(path, self)
    }
}

/// The CPU's model name from `/proc/cpuinfo`, or `unknown`.
pub(super) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .and_then(|rest| rest.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `redis_version` from `INFO server` on the first node (bounded by short timeouts).
pub(super) async fn redis_version(url: &str) -> String {
    let ask = async {
        let client = redis::Client::open(url).ok()?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(1)));
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .ok()?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut connection)
            .await
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .map(|v| v.trim().to_owned())
    };
    tokio::time::timeout(Duration::from_secs(3), ask)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| "unknown".to_owned())
}
