//! One batch of the batched keep-alive over every node at once: the same leases, one command per
//! node (`node/extend_batch.rs`), each lease tallied on its own by the quorum rule as the
//! answers arrive. A lease is extended the moment its quorum is reached, with the validity of
//! this batch's round trip (sent at `started`, decided at its quorum-th answer), whatever the
//! other leases of the batch do; the batch ends when every lease is decided (or every node has
//! answered or failed, each within its timeouts), and says per lease what came of it. The nodes
//! still out then finish in the background, as an acquisition's slower requests do.

use std::borrow::Borrow;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};

use super::ledger::{InFlight, Ledger};
use super::members::Members;
use crate::error::{Error, Lost};
use crate::node::Node;
use crate::node::extend_batch::{BatchKey, batch_command, extend_batch};
use crate::outcome::{NodeError, NodeOutcome, NodeReply, not_ours};
use crate::rules::batch::{KeyReply, Missing, combined};
use crate::rules::clock::Moment;
use crate::rules::ordering::End;
use crate::rules::quorum::{Tally, Verdict, Vote};
use crate::rules::renewal::{Schedule, taken};
use crate::rules::slots::key_slot;
use crate::rules::validity::whole_millis;

/// A kept lease as the keeper and its batches see it (what it is, beyond its key, is the API's).
pub(crate) trait Kept: Send + Sync + 'static {
    /// The lock key, or a set's keys: a node renews the lease only if it renewed every one.
    fn keys(&self) -> &[Arc<[u8]>];
    /// The acquisition's token.
    fn token(&self) -> &str;
    /// The acquisition's ledger, which records a batch's requests that may set the key.
    fn ledger(&self) -> &Ledger;
    /// Whether a guard still holds the lock (a batch may set its key only then).
    fn held(&self) -> bool;
    /// The keep-alive's schedule.
    fn schedule(&self) -> &Schedule;
    /// When the acquisition was decided: the schedule's offsets count from here.
    fn decided(&self) -> Moment;
    /// Until when the lease is trusted now (its validity less the margin).
    fn trusted_until(&self) -> Moment;
    /// Whether the validity from before a failed extension still runs.
    fn still_valid(&self) -> bool;
    /// An extension succeeded: the validity now ends at `valid_until`.
    fn extended(&self, valid_until: Moment);
    /// The lease is lost: mark it so (its lost signal fires). Called once, after the keeper let
    /// go of it.
    fn lose(&self, lost: Lost);
    /// The release of what is left of a lost lease's lock, after [`lose`](Kept::lose), to be
    /// run as counted background work; `None` if there is nothing to release.
    fn release_lost(self: Arc<Self>) -> Option<futures::future::BoxFuture<'static, ()>>;
}

/// One lease in a batch.
pub(crate) struct Item {
    /// The lease's number in its keeper.
    pub(crate) id: u64,
    pub(crate) kept: Arc<dyn Kept>,
    /// The TTL this extension asks for.
    pub(crate) ttl: Duration,
    /// Where its key is to be brought, if the node passes the gates.
    pub(crate) missing: Missing,
}

/// What one batch did for one lease.
pub(crate) struct Done {
    pub(crate) id: u64,
    /// Where its key is still missing by this batch's answers.
    pub(crate) missing: Missing,
    pub(crate) result: Outcome,
}

/// What came of one lease's extension.
pub(crate) enum Outcome {
    /// Extended: its quorum was reached at this moment (the hold's validity already moved).
    Extended(Moment),
    /// A majority answered that our key is not there: the lock is lost.
    Taken(Vec<NodeOutcome>),
    /// No quorum (or no validity left); tried again later.
    Failed(Box<Error>),
}

/// Where one lease stands in the batch.
#[derive(Clone, Copy)]
struct Standing {
    tally: Tally,
    extended: Option<Moment>,
}

/// Runs one batch of `items` on every node of `members` and tallies each lease on its own.
pub(crate) async fn run_batch(members: &Members, items: Arc<[Item]>) -> Vec<Done> {
    let nodes = &members.nodes;
    let settings = &members.settings;
    let quorum = settings.extend_quorum();
    let mut standings = vec![
        Standing {
            tally: Tally::new(nodes.len(), quorum),
            extended: None,
        };
        items.len()
    ];
    let mut missing: Vec<Missing> = items.iter().map(|item| item.missing).collect();
    let mut answers: Vec<Option<Vec<Result<KeyReply, NodeError>>>> =
        (0..nodes.len()).map(|_| None).collect();
    let started = Moment::now();
    let mut in_flight: FuturesUnordered<_> = nodes
        .iter()
        .map(|node| {
            let (node, items) = (Arc::clone(node), Arc::clone(&items));
            async move {
                let answer = node_batch(&node, &items).await;
                (node.index(), answer)
            }
            .boxed()
        })
        .collect();
    let mut pending = items.len();
    while pending > 0 {
        let Some((index, answer)) = in_flight.next().await else {
            break;
        };
        let now = Moment::now();
        for (position, (standing, item)) in standings.iter_mut().zip(items.iter()).enumerate() {
            let vote = match answer.get(position) {
                Some(Ok(reply)) => {
                    if let Some(missing) = missing.get_mut(position) {
                        missing.record(index, *reply);
                    }
                    reply.vote()
                }
                _ => Vote::Failed,
            };
            let before = standing.tally.verdict();
            let after = standing.tally.record(vote);
            if before == Verdict::Pending && after != Verdict::Pending {
                pending = pending.saturating_sub(1);
            }
            if after == Verdict::Won && before == Verdict::Pending {
                // This lease's quorum, now: its validity from this batch's round trip.
                if let Some(valid_until) = settings.extended_until(item.ttl, started, now) {
                    item.kept.extended(valid_until);
                    standing.extended = Some(now);
                }
            }
        }
        if let Some(slot) = answers.get_mut(index) {
            *slot = Some(answer);
        }
    }
    if !in_flight.is_empty() {
        // Slower nodes get the new expiry too (and their sets finish, recorded in the ledgers).
        members
            .background
            .finish_unanswered(in_flight.for_each(|_| async {}).boxed());
    }
    items
        .iter()
        .zip(standings)
        .zip(missing)
        .enumerate()
        .map(|(position, ((item, standing), missing))| Done {
            id: item.id,
            missing,
            result: match standing.extended {
                Some(at) => Outcome::Extended(at),
                None => {
                    let outcomes = outcomes(nodes, &answers, position);
                    if taken(nodes.len(), quorum, not_ours(&outcomes)) {
                        Outcome::Taken(outcomes)
                    } else {
                        Outcome::Failed(Box::new(Error::ExtendFailed {
                            still_valid: item.kept.still_valid(),
                            outcomes,
                        }))
                    }
                }
            },
        })
        .collect()
}

/// What each node said for the lease at `position`, for a failed extension's error.
fn outcomes(
    nodes: &[Arc<Node>],
    answers: &[Option<Vec<Result<KeyReply, NodeError>>>],
    position: usize,
) -> Vec<NodeOutcome> {
    nodes
        .iter()
        .zip(answers)
        .map(|(node, answer)| NodeOutcome {
            node: node.index(),
            addr: Arc::clone(node.addr()),
            reply: match answer.as_ref().and_then(|answer| answer.get(position)) {
                None => NodeReply::NoReply,
                Some(Err(error)) => NodeReply::Failed(error.clone()),
                Some(Ok(reply)) => match reply.vote() {
                    Vote::Ours => NodeReply::Ours,
                    _ => NodeReply::NotOurs,
                },
            },
        })
        .collect()
}

/// Each lease's answer from the per-key answers of a batch, in order: one key's own, or a set's
/// combined (`rules/batch.rs`). Missing answers (a short reply) read as absent.
fn per_lease<I: Borrow<Item>>(items: &[I], replies: &[KeyReply]) -> Vec<KeyReply> {
    let mut rest = replies;
    items
        .iter()
        .map(|item| {
            let count = item.borrow().kept.keys().len().min(rest.len());
            let (own, after) = rest.split_at(count);
            rest = after;
            match own {
                [one] => *one,
                many => combined(many),
            }
        })
        .collect()
}

/// The batch on one node, one answer per lease: one command for every lease on a node that is
/// one server; on a cluster node, one per hash slot (a script runs on the keys of one slot),
/// all at once, so that a shard that fails fails only its slots' leases.
async fn node_batch(node: &Node, items: &[Item]) -> Vec<Result<KeyReply, NodeError>> {
    if !node.routes_by_slot() {
        return match slot_batch(node, items).await {
            Ok(replies) => replies.into_iter().map(Ok).collect(),
            Err(error) => vec![Err(error); items.len()],
        };
    }
    let mut slots: Vec<(u16, Vec<usize>)> = Vec::new();
    for (position, item) in items.iter().enumerate() {
        let slot = key_slot(
            item.kept
                .keys()
                .first()
                .map(|key| &key[..])
                .unwrap_or_default(),
        );
        match slots.iter_mut().find(|(known, _)| *known == slot) {
            Some((_, positions)) => positions.push(position),
            None => slots.push((slot, vec![position])),
        }
    }
    let batches = slots.iter().map(|(_, positions)| {
        let group: Vec<&Item> = positions.iter().filter_map(|&at| items.get(at)).collect();
        async move { (positions, slot_batch(node, &group).await) }
    });
    let mut answers: Vec<Result<KeyReply, NodeError>> =
        vec![Err(NodeError::Protocol("no answer for the lease".to_owned())); items.len()];
    for (positions, answer) in futures::future::join_all(batches).await {
        for (at, &position) in positions.iter().enumerate() {
            if let Some(slot) = answers.get_mut(position) {
                *slot = match &answer {
                    Ok(replies) => replies.get(at).copied().ok_or_else(|| {
                        NodeError::Protocol("a batch reply short of a lease".to_owned())
                    }),
                    Err(error) => Err(error.clone()),
                };
            }
        }
    }
    answers
}

/// One command of a batch on one node: renews every lease's key there, and sets it where it is
/// missing if the node passes the vote gates and the lease's ledger takes the request (the lock
/// still held, nothing of ours in flight there). Each such request is recorded in the lease's
/// ledger as one that may set the key, so its release is ordered after it.
async fn slot_batch<I: Borrow<Item>>(node: &Node, items: &[I]) -> Result<Vec<KeyReply>, NodeError> {
    let index = node.index();
    let leases = || items.iter().map(Borrow::<Item>::borrow);
    let fill = leases().any(|item| item.missing.contains(index));
    let keys_sent = leases().map(|item| item.kept.keys().len()).sum();
    let slot_key = leases()
        .next()
        .and_then(|item| item.kept.keys().first())
        .map(|key| &key[..])
        .unwrap_or_default();
    let (answer, flights) = extend_batch(
        node,
        slot_key,
        keys_sent,
        fill,
        |generation, gates_passed| {
            let mut flights: Vec<(usize, InFlight<'_>)> = Vec::new();
            let mut keys: Vec<BatchKey<'_>> = Vec::with_capacity(items.len());
            for (position, item) in leases().enumerate() {
                let fill = gates_passed
                    && item.missing.contains(index)
                    && match item
                        .kept
                        .ledger()
                        .hand_fill(index, generation, || item.kept.held())
                    {
                        Some(flight) => {
                            flights.push((position, flight));
                            true
                        }
                        None => false,
                    };
                // A set's keys go out one after the other, each with the lease's token and TTL.
                keys.extend(item.kept.keys().iter().map(|key| BatchKey {
                    key,
                    token: item.kept.token(),
                    ttl_ms: whole_millis(item.ttl),
                    fill,
                }));
            }
            (batch_command(&keys), flights)
        },
    )
    .await;
    // One answer per lease: a set's keys' answers combined.
    let answer = answer.map(|replies| per_lease(items, &replies));
    if let (Ok(replies), Some(flights)) = (&answer, flights) {
        for (position, flight) in flights {
            // Answered: set it, or did not (the key was there); unanswered flights are
            // dropped with the error, which records them as possibly landed.
            let end = match replies.get(position) {
                Some(KeyReply::Set) => End::Answered,
                _ => End::Refused,
            };
            flight.finish(end);
        }
    }
    answer
}
