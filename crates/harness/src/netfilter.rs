//! Partitions that drop packets: nftables rules (the `nft` command) that silently discard a
//! node's TCP segments, both ways or one way, as a real network partition does (nothing is
//! refused or reset; the peers' TCP just retransmits into the void until the rules go).
//!
//! Each [`TestCluster`](crate::TestCluster) that drops packets gets one table of its own,
//! `inet quorumlock_<pid>_<seq>`, made when the first rule is set, rewritten as a whole (in one
//! atomic `nft -f` transaction) whenever the set of rules changes, and deleted when the last
//! rule is healed and when the cluster is dropped (also while a failing test unwinds). Tables
//! left behind by processes that no longer exist (killed outright) are deleted before the first
//! table of a process is made.
//!
//! What the rules match is the node's server socket, the far side of its
//! [`FaultProxy`](crate::FaultProxy): on the process backend `127.0.0.1:<server port>`, on the
//! docker backend the container's address on the bridge and its port 6379 (host to container
//! leaves through the output hook, the replies come in through the input hook; loopback
//! traffic passes both, so each chain holds every rule). That side and not the proxy's: the
//! proxy is how clients reach a node, the server is the node, so every path to it is cut, the
//! harness's own probes too, and both backends cut the same leg (proxy → server; a container's
//! published port is served by Docker's userland proxy, which then connects to the bridge
//! address).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::AsyncWriteExt as _;
use tracing::{debug, info, warn};

use crate::error::HarnessError;

/// The `nft` program, found on `PATH`.
const NFT: &str = "nft";
/// The prefix of every table the harness makes; the rest is `<pid>_<seq>`.
const TABLE_PREFIX: &str = "quorumlock_";

/// Distinguishes the tables of one process.
static TABLE_SEQ: AtomicU64 = AtomicU64::new(0);

/// Which of a node's packets a partition drops.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketDrop {
    /// Everything to and from the node: a full partition.
    Both,
    /// What is sent to the node (requests, and the handshake of new connections): the node
    /// never hears its clients, and nothing it would have answered is answered.
    Requests,
    /// What the node sends (replies): requests arrive and are executed, but their senders never
    /// learn the outcome. New connections cannot be made either (the SYN-ACK is a reply).
    Replies,
}

impl PacketDrop {
    fn drops_requests(self) -> bool {
        matches!(self, PacketDrop::Both | PacketDrop::Requests)
    }

    fn drops_replies(self) -> bool {
        matches!(self, PacketDrop::Both | PacketDrop::Replies)
    }
}

/// Where a node's server listens, as its packets carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerSocket {
    pub(crate) addr: Ipv4Addr,
    pub(crate) port: u16,
}

/// One cluster's nftables table and the drops in effect, by node.
#[derive(Debug)]
pub(crate) struct Netfilter {
    table: String,
    drops: BTreeMap<usize, (ServerSocket, PacketDrop)>,
    /// Whether the table exists in the kernel (so `Drop` knows whether to delete it).
    installed: bool,
}

impl Default for Netfilter {
    fn default() -> Self {
        let seq = TABLE_SEQ.fetch_add(1, Ordering::Relaxed);
        Netfilter {
            table: format!("{TABLE_PREFIX}{}_{seq}", std::process::id()),
            drops: BTreeMap::new(),
            installed: false,
        }
    }
}

impl Netfilter {
    /// Drops `what` of node `index`'s packets (at `socket`) from now on, replacing what was
    /// dropped for it before.
    pub(crate) async fn drop_packets(
        &mut self,
        index: usize,
        socket: ServerSocket,
        what: PacketDrop,
    ) -> Result<(), HarnessError> {
        if !self.installed {
            remove_stale_tables().await;
        }
        self.drops.insert(index, (socket, what));
        self.apply().await?;
        info!(node = index, ?socket, ?what, table = %self.table, "dropping packets");
        Ok(())
    }

    /// Lets node `index`'s packets pass again. Nothing if none were dropped.
    pub(crate) async fn heal(&mut self, index: usize) -> Result<(), HarnessError> {
        if self.drops.remove(&index).is_none() {
            return Ok(());
        }
        self.apply().await?;
        info!(node = index, table = %self.table, "packets pass again");
        Ok(())
    }

    /// Makes the kernel's table match `drops`: rewritten in one transaction, or deleted when
    /// nothing is dropped.
    async fn apply(&mut self) -> Result<(), HarnessError> {
        if self.drops.is_empty() {
            if self.installed {
                nft(&["delete", "table", "inet", &self.table], None).await?;
                self.installed = false;
            }
            return Ok(());
        }
        nft(&["-f", "-"], Some(self.script())).await?;
        self.installed = true;
        Ok(())
    }

    /// The whole table as an `nft -f` script: declared (so the delete cannot fail), deleted,
    /// and made anew with the current rules, all in one transaction.
    fn script(&self) -> String {
        let mut rules = String::new();
        for (socket, what) in self.drops.values() {
            let ServerSocket { addr, port } = socket;
            if what.drops_requests() {
                let _ = writeln!(rules, "    ip daddr {addr} tcp dport {port} drop");
            }
            if what.drops_replies() {
                let _ = writeln!(rules, "    ip saddr {addr} tcp sport {port} drop");
            }
        }
        let table = &self.table;
        format!(
            "table inet {table}\ndelete table inet {table}\ntable inet {table} {{\n  \
             chain output {{\n    type filter hook output priority 0; policy accept;\n{rules}  }}\n  \
             chain input {{\n    type filter hook input priority 0; policy accept;\n{rules}  }}\n}}\n"
        )
    }
}

impl Drop for Netfilter {
    fn drop(&mut self) {
        if !self.installed {
            return;
        }
        // Drop cannot await; `nft` is quick, so it runs to completion here.
        let deleted = std::process::Command::new(NFT)
            .args(["delete", "table", "inet", &self.table])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        match deleted {
            Ok(output) if output.status.success() => debug!(table = %self.table, "table deleted"),
            Ok(output) => warn!(
                table = %self.table,
                stderr = %String::from_utf8_lossy(&output.stderr),
                "deleting the nftables table failed; delete it with: nft delete table inet {}",
                self.table
            ),
            Err(err) => warn!(table = %self.table, %err, "could not run nft to delete the table"),
        }
    }
}

/// Deletes the harness's tables whose process no longer exists.
async fn remove_stale_tables() {
    let listed = match nft(&["list", "tables"], None).await {
        Ok(listed) => listed,
        Err(err) => {
            debug!(%err, "listing nftables tables failed");
            return;
        }
    };
    for table in listed
        .lines()
        .filter_map(|line| line.strip_prefix("table inet "))
    {
        let Some(pid) = table
            .strip_prefix(TABLE_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        match nft(&["delete", "table", "inet", table], None).await {
            Ok(_) => info!(table, pid, "deleted the table of a process that is gone"),
            Err(err) => warn!(table, %err, "deleting a stale nftables table failed"),
        }
    }
}

/// Runs `nft args`, with `input` on its standard input, and returns its standard output.
async fn nft(args: &[&str], input: Option<String>) -> Result<String, HarnessError> {
    let mut child = tokio::process::Command::new(NFT)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => HarnessError::NftNotFound,
            _ => HarnessError::Io(source),
        })?;
    if let (Some(script), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(script.as_bytes()).await?;
    }
    let output = child.wait_with_output().await?;
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    if stderr.contains("Operation not permitted") || stderr.contains("Permission denied") {
        return Err(HarnessError::NftNotPermitted { stderr });
    }
    Err(HarnessError::Nft {
        args: args.join(" "),
        status: output.status.to_string(),
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_drops_only_what_was_asked_in_both_hooks() {
        let mut netfilter = Netfilter::default();
        let socket = ServerSocket {
            addr: Ipv4Addr::LOCALHOST,
            port: 7001,
        };
        netfilter.drops.insert(0, (socket, PacketDrop::Replies));
        let script = netfilter.script();
        assert_eq!(script.matches("tcp sport 7001 drop").count(), 2, "{script}");
        assert!(!script.contains("dport"), "{script}");
        netfilter.drops.insert(0, (socket, PacketDrop::Requests));
        let script = netfilter.script();
        assert_eq!(script.matches("tcp dport 7001 drop").count(), 2, "{script}");
        assert!(!script.contains("sport"), "{script}");
        assert!(script.starts_with(&format!("table inet {}\ndelete table", netfilter.table)));
    }

    /// Whether the kernel has the table called `name` (in family `inet`).
    async fn exists(name: &str) -> bool {
        let listed = nft(&["list", "tables"], None).await.unwrap();
        listed
            .lines()
            .any(|line| line == format!("table inet {name}"))
    }

    #[tokio::test]
    async fn the_table_goes_on_heal_and_on_drop_also_while_panicking() {
        let socket = ServerSocket {
            addr: Ipv4Addr::LOCALHOST,
            port: 9,
        };
        let mut healed = Netfilter::default();
        healed
            .drop_packets(0, socket, PacketDrop::Both)
            .await
            .unwrap();
        assert!(exists(&healed.table).await);
        healed.heal(0).await.unwrap();
        assert!(!exists(&healed.table).await);

        let mut dropped = Netfilter::default();
        let name = dropped.table.clone();
        dropped
            .drop_packets(1, socket, PacketDrop::Replies)
            .await
            .unwrap();
        assert!(exists(&name).await);
        let panicked = std::thread::spawn(move || {
            let _held = dropped;
            panic!("a test failing while packets are dropped");
        })
        .join();
        assert!(panicked.is_err());
        assert!(!exists(&name).await);
    }
}
