//! `quorumlock status RESOURCE`: who holds a resource, node by node (`Lock::inspect`), for an
//! operator: the holder's token prefix, how long its key has left, the fence counter, an
//! election leader's value, and whether one holder has a quorum.

use std::collections::HashMap;

use quorumlock::{LockOptions, NodeState};

use crate::flags::{self, NODES_ENV, Prefixes};
use crate::text_table::aligned;

/// Arguments of `quorumlock status`.
#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The resource (or election name) to show.
    resource: String,
    /// Comma-separated node URLs (redis://[user:password@]host:port[/db]).
    #[arg(long, value_delimiter = ',', env = NODES_ENV)]
    nodes: Vec<String>,
    /// The prefixes the lock was made with.
    #[command(flatten)]
    prefixes: Prefixes,
}

/// Prints the table and the verdict; an error when fewer than a quorum of nodes could be read.
pub async fn run(args: StatusArgs) -> Result<(), String> {
    let lock = flags::lock_over(args.nodes, args.prefixes.apply(LockOptions::new()))?;
    let states = lock
        .inspect(&args.resource)
        .await
        .map_err(|error| error.to_string())?;
    print!("{}", table(&states));
    let quorum = lock.quorum_size();
    let read = states.iter().filter(|node| node.state.is_ok()).count();
    if read < quorum {
        return Err(format!(
            "only {read} of {} nodes answered: fewer than a quorum of {quorum}",
            states.len()
        ));
    }
    println!("{}", verdict(&states, quorum));
    Ok(())
}

/// One row per node: index, address, holder, leader value, TTL left, fence (or the error).
fn table(states: &[NodeState]) -> String {
    let dash = || "-".to_owned();
    let mut rows = vec![
        ["node", "addr", "holder", "leader value", "ttl", "fence"]
            .map(String::from)
            .to_vec(),
    ];
    for node in states {
        let mut row = vec![node.node.to_string(), node.addr.to_string()];
        match &node.state {
            Ok(state) => row.extend([
                state.holder.clone().unwrap_or_else(dash),
                state
                    .leader_value
                    .as_ref()
                    .map_or_else(dash, |value| String::from_utf8_lossy(value).into_owned()),
                state
                    .expires_in
                    .map_or_else(dash, |left| format!("{:.1}s", left.as_secs_f64())),
                state.fence.map_or_else(dash, |fence| fence.to_string()),
            ]),
            Err(error) => row.extend([format!("error: {error}"), dash(), dash(), dash()]),
        }
        rows.push(row);
    }
    aligned(&rows, 4)
}

/// Whether one holder has the key on a quorum of the nodes, or none does.
fn verdict(states: &[NodeState], quorum: usize) -> String {
    let mut holders: HashMap<&str, usize> = HashMap::new();
    for state in states.iter().filter_map(|node| node.state.as_ref().ok()) {
        if let Some(holder) = &state.holder {
            *holders.entry(holder.as_str()).or_default() += 1;
        }
    }
    match holders.iter().max_by_key(|(_, count)| **count) {
        Some((holder, count)) if *count >= quorum => format!(
            "held by {holder} on {count} of {} nodes (quorum {quorum})",
            states.len()
        ),
        Some((holder, count)) => format!(
            "held on no quorum: {holder} has the key on {count} of {} nodes, fewer than {quorum}",
            states.len()
        ),
        None => "free".to_owned(),
    }
}
