//! One acquisition's [`Record`]s, one per node, under a lock that its requests (some of them
//! finishing in background tasks), its releases and its guard share, with one completion signal
//! for the releases that wait. The rule itself is pure, in `rules/ordering.rs`; this file hands
//! requests over by it, in the same step as they go to a connection.
//!
//! One server, one vote: within one attempt, at most one request that can set the key goes to
//! each server (by the `run_id` its connection read), whichever configured node it goes through,
//! even while a claim (`rules/identity.rs`) changes hands in the middle of the attempt.
//!
//! Releases are recorded in flight too: the next attempt of a retrying acquisition waits for the
//! previous attempt's releases before it starts, and never sends to a node one is still in flight
//! to, so a late release cannot delete the next attempt's key (all attempts share one token).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::num::NonZeroU64;
use std::pin::pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::rules::ordering::{End, Kind, Plan, Record};

/// Why a request that can set the key was not handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Its attempt was already decided: it is never sent.
    Decided,
    /// A request of ours to that node (a release of an earlier attempt) is still in flight and
    /// could land after it.
    ReleaseInFlight,
    /// The node's connection reaches a server (`run_id`) that this attempt already handed a
    /// request to through the node given: one server, one vote.
    SameServer(usize),
}

/// One acquisition's [`Record`]s, shared by its requests (some of them finishing in background
/// tasks), its releases and its guard.
#[derive(Debug)]
pub(crate) struct Ledger {
    state: Mutex<State>,
    /// Signalled when a request finishes while someone waits.
    finished: Notify,
}

#[derive(Debug)]
struct State {
    /// The latest attempt (counted from 1).
    attempt: u32,
    /// Whether the latest attempt is undecided, so its requests may still be handed over.
    open: bool,
    /// Whether someone waits for a request to finish.
    waiting: bool,
    /// Per node: its record, and the server (a hash of its `run_id`) the latest attempt handed
    /// a request to through it, if any: at most one node per server and attempt. (Side by side
    /// in one allocation, and apart from the record, which a release that clears the node
    /// resets. A hash, not the `run_id`, so a kept lease keeps 32 bytes per node, not 40; two
    /// servers whose hashes collide only cost a vote, never count twice.)
    nodes: Vec<(Record, Option<ServerHash>)>,
}

/// A server's `run_id`, hashed: equal for one server, and (but for a 2^-64 chance) unequal for
/// two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ServerHash(NonZeroU64);

impl ServerHash {
    fn of(run_id: &str) -> ServerHash {
        let mut hasher = DefaultHasher::new();
        run_id.hash(&mut hasher);
        ServerHash(NonZeroU64::new(hasher.finish()).unwrap_or(NonZeroU64::MIN))
    }
}

impl Ledger {
    /// A ledger for an acquisition over `nodes` nodes, nothing sent yet.
    pub(crate) fn new(nodes: usize) -> Ledger {
        Ledger {
            state: Mutex::new(State {
                attempt: 0,
                open: false,
                waiting: false,
                nodes: vec![(Record::default(), None); nodes],
            }),
            finished: Notify::new(),
        }
    }

    /// A ledger for a lease taken elsewhere and resumed here: every node may hold our key, so a
    /// release is sent to each.
    pub(crate) fn resumed(nodes: usize) -> Ledger {
        let ledger = Ledger::new(nodes);
        for (record, _) in &mut ledger.lock().nodes {
            *record = Record::resumed();
        }
        ledger
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a new attempt and returns its number.
    pub(crate) fn begin(&self) -> u32 {
        let mut state = self.lock();
        state.attempt = state.attempt.wrapping_add(1);
        state.open = true;
        for (_, server) in &mut state.nodes {
            *server = None;
        }
        state.attempt
    }

    /// The latest attempt is decided: none of its requests is handed over from now on.
    pub(crate) fn decide(&self) {
        self.lock().open = false;
    }

    /// Hands attempt `attempt`'s request to `node`'s connection of `generation`, which reaches
    /// the server `server` (its `run_id`), unless the attempt is decided, a request of ours to
    /// that node is still in flight, or the attempt already handed a request to that server
    /// through another node (whatever the claims on it say by now: one server never counts
    /// twice in a round). Call it in the same step (poll) that gives the request to the
    /// connection, and keep the returned [`InFlight`] until the request has finished.
    pub(crate) fn hand_acquire(
        &self,
        attempt: u32,
        node: usize,
        generation: u64,
        server: &str,
    ) -> Result<InFlight<'_>, Refused> {
        let server = ServerHash::of(server);
        let mut state = self.lock();
        if !state.open || state.attempt != attempt {
            return Err(Refused::Decided);
        }
        if let Some(other) = state
            .nodes
            .iter()
            .enumerate()
            .find_map(|(other, (_, handed))| {
                (other != node && *handed == Some(server)).then_some(other)
            })
        {
            return Err(Refused::SameServer(other));
        }
        let Some((record, handed)) = state.nodes.get_mut(node) else {
            return Err(Refused::Decided);
        };
        if !record.quiet() {
            return Err(Refused::ReleaseInFlight);
        }
        record.hand();
        *handed = Some(server);
        Ok(InFlight::new(self, node, Kind::Acquire, generation))
    }

    /// Hands a keep-alive's request that may set our key where it is absent (`SET NX` in a
    /// batch) to `node`'s connection of `generation`, while `held()` (a guard still holds the
    /// lock) and nothing of ours is in flight there. Checked under the ledger's lock, which the
    /// last guard's release takes after it leaves: either this request is recorded before the
    /// release plans the node (so the release waits for it and sends after it), or it sees the
    /// lock released and is not sent. Keep the returned [`InFlight`] until the request finished.
    pub(crate) fn hand_fill(
        &self,
        node: usize,
        generation: u64,
        held: impl FnOnce() -> bool,
    ) -> Option<InFlight<'_>> {
        let mut state = self.lock();
        let (record, _) = state.nodes.get_mut(node)?;
        if !record.quiet() || !held() {
            return None;
        }
        record.hand();
        Some(InFlight::new(self, node, Kind::Acquire, generation))
    }

    /// Records a release handed to `node`'s connection of `generation`. Also returns whether
    /// nothing of ours was in flight to the node at that moment: only then can the release's
    /// answer clear the node ([`Ledger::cleared_by`]), since a request still in flight could enter
    /// the connection's queue after it (and finish before the release's answer is read).
    pub(crate) fn hand_release(&self, node: usize, generation: u64) -> (InFlight<'_>, bool) {
        let after_all = match self.lock().nodes.get_mut(node) {
            Some((record, _)) => {
                let quiet = record.quiet();
                record.hand();
                quiet
            }
            None => false,
        };
        (
            InFlight::new(self, node, Kind::Release, generation),
            after_all,
        )
    }

    /// What a release does on `node` now (an unknown node is sent to).
    pub(crate) fn plan(&self, node: usize) -> Plan {
        self.lock()
            .nodes
            .get(node)
            .map_or(Plan::Send, |(record, _)| record.plan())
    }

    /// See [`Record::cleared_by`] (an unknown node is never cleared).
    pub(crate) fn cleared_by(&self, node: usize, generation: u64) -> bool {
        self.lock()
            .nodes
            .get_mut(node)
            .is_some_and(|(record, _)| record.cleared_by(generation))
    }

    /// Waits until nothing of ours is in flight to `node` (to any node if `None`), at most
    /// `bound`. Returns whether that is so.
    pub(crate) async fn wait_quiet(&self, node: Option<usize>, bound: Duration) -> bool {
        let quiet = async {
            loop {
                let mut finished = pin!(self.finished.notified());
                // Registered before the check, so a request finishing in between still wakes us.
                finished.as_mut().enable();
                {
                    let mut state = self.lock();
                    let quiet = match node {
                        Some(node) => state
                            .nodes
                            .get(node)
                            .is_none_or(|(record, _)| record.quiet()),
                        None => state.nodes.iter().all(|(record, _)| record.quiet()),
                    };
                    if quiet {
                        return;
                    }
                    state.waiting = true;
                }
                finished.await;
            }
        };
        tokio::time::timeout(bound, quiet).await.is_ok()
    }

    fn finish(&self, node: usize, kind: Kind, generation: u64, end: End) {
        let wake = {
            let mut state = self.lock();
            if let Some((record, _)) = state.nodes.get_mut(node) {
                record.finish(kind, generation, end);
            }
            std::mem::take(&mut state.waiting)
        };
        if wake {
            self.finished.notify_waiters();
        }
    }
}

/// A request handed to a node's connection. It finishes when [`InFlight::finish`] is called
/// (the server replied, or the request failed) or when it is dropped (timed out, or abandoned
/// with its future): either way it can no longer enter the connection's queue.
#[derive(Debug)]
pub(crate) struct InFlight<'a> {
    ledger: &'a Ledger,
    node: usize,
    kind: Kind,
    generation: u64,
    finished: bool,
}

impl<'a> InFlight<'a> {
    fn new(ledger: &'a Ledger, node: usize, kind: Kind, generation: u64) -> Self {
        InFlight {
            ledger,
            node,
            kind,
            generation,
            finished: false,
        }
    }

    /// The request finished as `end`.
    pub(crate) fn finish(mut self, end: End) {
        self.finished = true;
        self.ledger
            .finish(self.node, self.kind, self.generation, end);
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.ledger
                .finish(self.node, self.kind, self.generation, End::Unanswered);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's `run_id`: node `node`'s own, unless a test says otherwise.
    fn server(node: usize) -> String {
        format!("run-{node}")
    }

    #[test]
    fn a_node_takes_32_bytes() {
        // A kept lease keeps one per node as long as it is held.
        assert_eq!(std::mem::size_of::<(Record, Option<ServerHash>)>(), 32);
    }

    #[test]
    fn requests_are_handed_only_while_their_attempt_is_open_and_the_node_quiet() {
        let ledger = Ledger::new(2);
        assert_eq!(
            ledger.hand_acquire(1, 0, 1, &server(0)).err(),
            Some(Refused::Decided),
            "no attempt yet"
        );
        let first = ledger.begin();
        let in_flight = ledger.hand_acquire(first, 0, 1, &server(0)).unwrap();
        assert_eq!(ledger.plan(0), Plan::Wait);
        assert_eq!(ledger.plan(1), Plan::Skip);
        ledger.decide();
        assert_eq!(
            ledger.hand_acquire(first, 1, 1, &server(1)).err(),
            Some(Refused::Decided)
        );
        drop(in_flight);
        assert_eq!(ledger.plan(0), Plan::Send);

        let (release, after_all) = ledger.hand_release(0, 1);
        assert!(after_all);
        let second = ledger.begin();
        assert_eq!(
            ledger.hand_acquire(first, 1, 1, &server(1)).err(),
            Some(Refused::Decided)
        );
        assert_eq!(
            ledger.hand_acquire(second, 0, 1, &server(0)).err(),
            Some(Refused::ReleaseInFlight)
        );
        release.finish(End::Answered);
        assert!(ledger.hand_acquire(second, 0, 1, &server(0)).is_ok());
        assert_eq!(
            ledger.hand_acquire(second, 7, 1, &server(7)).err(),
            Some(Refused::Decided)
        );
        assert_eq!(ledger.plan(7), Plan::Send);
        assert!(!ledger.cleared_by(7, 1));
    }

    #[test]
    fn an_answered_request_is_ordered_before_a_release_over_any_connection() {
        let ledger = Ledger::new(1);
        let attempt = ledger.begin();
        ledger
            .hand_acquire(attempt, 0, 1, &server(0))
            .unwrap()
            .finish(End::Answered);
        ledger.decide();
        let (release, after_all) = ledger.hand_release(0, 2);
        assert!(after_all);
        release.finish(End::Answered);
        assert!(
            ledger.cleared_by(0, 2),
            "answered over connection 1, so it ran before the release over connection 2"
        );
    }

    #[test]
    fn one_attempt_hands_one_request_per_server_whatever_the_node() {
        let ledger = Ledger::new(3);
        let shared = server(9);
        let first = ledger.begin();
        let in_flight = ledger.hand_acquire(first, 1, 1, &shared).unwrap();
        // Nodes 0 and 2 reach the same server: refused, naming the node that got it.
        assert_eq!(
            ledger.hand_acquire(first, 0, 1, &shared).err(),
            Some(Refused::SameServer(1))
        );
        assert_eq!(
            ledger.hand_acquire(first, 2, 4, &shared).err(),
            Some(Refused::SameServer(1))
        );
        assert_eq!(ledger.plan(0), Plan::Skip, "nothing went out to node 0");
        // Still refused once node 1's request has finished: it counted in this round.
        in_flight.finish(End::Answered);
        assert_eq!(
            ledger.hand_acquire(first, 0, 1, &shared).err(),
            Some(Refused::SameServer(1))
        );
        assert!(ledger.hand_acquire(first, 2, 1, &server(2)).is_ok());
        ledger.decide();
        // A new attempt starts with no server counted yet.
        let second = ledger.begin();
        assert!(ledger.hand_acquire(second, 0, 1, &shared).is_ok());
        assert_eq!(
            ledger.hand_acquire(second, 1, 1, &shared).err(),
            Some(Refused::SameServer(0))
        );
    }

    #[tokio::test]
    async fn waiting_ends_when_the_request_finishes_or_at_the_bound() {
        let ledger = std::sync::Arc::new(Ledger::new(2));
        let attempt = ledger.begin();
        assert!(ledger.wait_quiet(Some(0), Duration::ZERO).await);

        let in_flight = ledger.hand_acquire(attempt, 0, 1, &server(0)).unwrap();
        assert!(!ledger.wait_quiet(Some(0), Duration::from_millis(5)).await);
        assert!(!ledger.wait_quiet(None, Duration::from_millis(5)).await);
        assert!(ledger.wait_quiet(Some(1), Duration::ZERO).await);
        // A release sent while a request is in flight is not after it.
        let (release, after_all) = ledger.hand_release(0, 1);
        assert!(!after_all);
        drop(release);
        drop(in_flight);
        assert!(ledger.wait_quiet(Some(0), Duration::ZERO).await);

        // Finished from another task while we wait.
        let (handed_tx, handed_rx) = tokio::sync::oneshot::channel();
        let other = std::sync::Arc::clone(&ledger);
        let task = tokio::spawn(async move {
            let in_flight = other.hand_acquire(attempt, 1, 1, &server(1)).unwrap();
            let _ = handed_tx.send(());
            tokio::time::sleep(Duration::from_millis(20)).await;
            in_flight.finish(End::Answered);
        });
        handed_rx.await.unwrap();
        assert!(ledger.wait_quiet(None, Duration::from_secs(60)).await);
        task.await.unwrap();
    }
}
