//! One acquisition, from its first attempt to a [`Guard`] or an error: the attempts with their
//! pauses, each attempt's fan-out and verdict, the won path (with fencing the write-back, then
//! the validity) and the lost path, and the release on every path that does not hand out a
//! guard, also when the future is dropped or unwinds. Step by step in `docs/ARCHITECTURE.md`
//! ("One acquisition").

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::error::Error;
use crate::guard::Guard;
use crate::hold::Owners;
use crate::hold::{Acquired, Grant, Hold};
use crate::metrics;
use crate::node::acquire::{AcquireCommand, AcquireRequest, Taken};
use crate::outcome::{NodeOutcome, NodeReply};
use crate::owner::Owner;
use crate::round::NodeSet;
use crate::round::acquire::acquire;
use crate::round::fan_out::{Round, Until, fan_out};
use crate::round::fencing::{agreed, highest_fence, recover_fence, write_back_all};
use crate::round::ledger::Ledger;
use crate::round::release::{release_all, release_in_background};
use crate::rules::clock::Moment;
use crate::rules::leader::Publication;
use crate::rules::quorum::Verdict;
use crate::rules::resources::Keys;
use crate::rules::retry::RetryPolicy;
use crate::rules::rwlock::{RwKeys, Side, reader_key};
use crate::rules::token::Token;
use crate::rules::validity::whole_millis;

/// With fencing, each node's new counter value, 0 until it has answered with one.
type Fences = Arc<[AtomicU64]>;

/// What every attempt of one acquisition shares: the lock's nodes, the names, the token, and the
/// ledger.
pub(crate) struct Acquisition<'a> {
    node_set: &'a Arc<NodeSet>,
    resource: &'a [u8],
    /// The TTL every attempt asks for.
    ttl: Duration,
    keys: Keys,
    /// The fence counters' keys (one per key), with fencing on.
    fence_keys: Option<Keys>,
    token: Token,
    ledger: Arc<Ledger>,
    /// The owner the hold is for, if reentrant, and the lock's registry of such holds.
    owner: Option<(Owner, Arc<Owners>)>,
    /// For a side of a read-write lock, which, and the lock's keys.
    rw: Option<(Side, Arc<RwKeys>)>,
    /// For an election's candidate, the leader record its grants write.
    publication: Option<Publication>,
    /// A waiter's attempt (woken, or after a refusal), not the caller's own first one.
    woken: bool,
}

impl<'a> Acquisition<'a> {
    /// An acquisition of `resource` (not empty; `keys` is its lock key, from `lock_key`, made
    /// once by the caller, or for a set its first resource and the set's keys) for `ttl` (valid
    /// for the lock's settings), with a fresh token, nothing sent yet.
    pub(crate) fn new(
        node_set: &'a Arc<NodeSet>,
        resource: &'a [u8],
        keys: Keys,
        ttl: Duration,
    ) -> Self {
        let settings = &node_set.settings;
        Acquisition {
            node_set,
            resource,
            ttl,
            fence_keys: settings
                .fencing
                .is_some()
                .then(|| keys.with_prefix(settings.key_prefix.len(), &settings.fence_prefix)),
            keys,
            token: Token::generate(),
            ledger: Arc::new(Ledger::new(node_set.nodes.len())),
            owner: None,
            rw: None,
            publication: None,
            woken: false,
        }
    }

    /// The same acquisition, made by a waiter (`woken`): a read then goes by its script, which
    /// leaves nothing behind when refused (`node/rwlock.rs`).
    pub(crate) fn woken(mut self, woken: bool) -> Self {
        self.woken = woken;
        self
    }

    /// The same acquisition, of one side of a read-write lock (`keys` were its writer key): a
    /// reader holds a key of its own, named after the token, and takes no fence.
    pub(crate) fn for_side(mut self, rw: Option<(Side, Arc<RwKeys>)>) -> Self {
        if let Some((Side::Read, rw_keys)) = &rw {
            self.keys = Keys::Read {
                reader: reader_key(&rw_keys.writer, self.token.as_str()),
                writer: Arc::clone(&rw_keys.writer),
            };
            self.fence_keys = None;
        }
        self.rw = rw;
        self
    }

    /// The same acquisition, made for `owner`: once won, the owner's later acquisitions of the
    /// resource re-enter its hold.
    pub(crate) fn for_owner(mut self, owner: Option<(Owner, Arc<Owners>)>) -> Self {
        self.owner = owner;
        self
    }

    /// The same acquisition, for an election's candidate: each grant also writes its leader
    /// record (`node/leader.rs`). Only for one key with fencing on, which `Election` ensures.
    pub(crate) fn publishing(mut self, publication: Option<Publication>) -> Self {
        self.publication = publication;
        self
    }

    /// Attempts until one wins, `policy` gives up, or `cancel` fires. Between attempts, the
    /// failed attempt's releases still in flight on slower nodes finish (within their timeouts)
    /// before the next attempt sends anything, so none of them can delete its key: every attempt
    /// uses the same token.
    ///
    /// Runs in a `quorumlock.acquire` span (named the OpenTelemetry way), with a child per node
    /// request (`round/fan_out.rs`); the span records the attempts made, the outcome and the
    /// validity left, and is counted and timed in the metrics (`metrics.rs`).
    pub(crate) async fn run(
        self,
        policy: &RetryPolicy,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        let timer = metrics::Timer::start();
        let nodes = self.node_set.nodes.len();
        let span = tracing::info_span!(
            "quorumlock.acquire",
            otel.name = "quorumlock acquire",
            otel.kind = "client",
            resource = %String::from_utf8_lossy(self.resource),
            resources = self.keys.all().len(),
            attempts = tracing::field::Empty,
            outcome = tracing::field::Empty,
            validity_left_ms = tracing::field::Empty,
        );
        let record = span.clone();
        let result = if span.is_disabled() {
            self.attempts(policy, cancel, &record).await
        } else {
            // Boxed, so that the span does not widen the future of a call nobody listens to.
            Box::pin(self.attempts(policy, cancel, &record).instrument(span)).await
        };
        metrics::acquired(nodes, result.as_ref().map(|_| ()), timer.elapsed());
        if record.is_disabled() {
            return result;
        }
        match &result {
            Ok(guard) => {
                record.record("outcome", "acquired");
                record.record("validity_left_ms", whole_millis(guard.remaining()));
            }
            Err(error) => {
                record.record("outcome", error.label());
            }
        }
        result
    }

    /// [`run`](Acquisition::run)'s attempts, each counted in `span`.
    async fn attempts(
        self,
        policy: &RetryPolicy,
        cancel: impl Future<Output = ()>,
        span: &tracing::Span,
    ) -> Result<Guard, Error> {
        let mut cancel = pin!(cancel);
        let first_started = Instant::now();
        let mut attempts_made = 0u32;
        loop {
            let result = self.attempt(attempts_made > 0, cancel.as_mut()).await;
            attempts_made = attempts_made.saturating_add(1);
            span.record("attempts", attempts_made);
            let error = match result {
                Ok((grant, outcomes)) => return Ok(self.into_guard(grant, outcomes)),
                Err(error) if error.ends_trying() => return Err(error),
                Err(error) => error,
            };
            let Some(pause) =
                policy.next_delay(attempts_made, first_started.elapsed(), rand::random())
            else {
                return Err(error);
            };
            tracing::debug!(attempt = attempts_made, ?pause, %error, "acquire attempt failed; retrying");
            let pause_then_quiet = async {
                tokio::time::sleep(pause).await;
                self.ledger
                    .wait_quiet(None, self.node_set.request_bound())
                    .await;
            };
            tokio::select! {
                biased;
                () = cancel.as_mut() => {
                    return Err(Error::Cancelled { outcomes: error.outcomes().to_vec() });
                }
                () = pause_then_quiet => {}
            }
        }
    }

    /// One attempt: the fan-out, then the won or the lost path; whatever does not end in a grant
    /// releases on every node before it returns its error.
    async fn attempt<C>(
        &self,
        renew_leftover: bool,
        mut cancel: Pin<&mut C>,
    ) -> Result<(Grant, Vec<NodeOutcome>), Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        let mut cleanup = ReleaseOnDrop {
            acquisition: self,
            armed: true,
        };
        let fences: Option<Fences> = self.fence_keys.as_ref().map(|_| {
            self.node_set
                .nodes
                .iter()
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        let started = Moment::now();
        let round = self
            .fan_out(renew_leftover, fences.clone(), cancel.as_mut())
            .await;
        let decided = Moment::now();
        let result = match round.verdict {
            Some(Verdict::Won) => self.won(round, fences, started, decided, cancel).await,
            verdict => Err(self.lost(verdict, round)),
        };
        let Err(error) = result else {
            cleanup.armed = false;
            return result;
        };
        #[cfg(feature = "chaos-defects")]
        if self.node_set.settings.defect == Some(crate::rules::defect::Defect::NoReleaseOnFailure) {
            cleanup.armed = false;
            return Err(error);
        }
        release_all(self.node_set, &self.keys, &self.token, &self.ledger, false).await;
        cleanup.armed = false;
        Err(error)
    }

    /// Sends this attempt's acquire request to every node and decides as soon as the quorum rule
    /// allows. The ledger closes the attempt in the same step: the requests handed back
    /// unfinished were last polled inside the fan-out, so none of them is handed to a connection
    /// from now on unless it already was, and those that were stay in flight until they finish.
    async fn fan_out<C>(
        &self,
        renew_leftover: bool,
        fences: Option<Fences>,
        cancel: Pin<&mut C>,
    ) -> Round
    where
        C: Future<Output = ()> + ?Sized,
    {
        let settings = &self.node_set.settings;
        let attempt = self.ledger.begin();
        let rw = self.rw.as_ref().map(|(side, keys)| (*side, &**keys));
        #[cfg(feature = "chaos-defects")]
        let rw = rw.filter(|(side, _)| {
            *side == Side::Read
                || settings.defect != Some(crate::rules::defect::Defect::WriterIgnoresReaders)
        });
        // Built once and shared: every node gets the same bytes.
        let command = Arc::new(AcquireCommand::new(&AcquireRequest {
            keys: &self.keys,
            fence_keys: self.fence_keys.as_ref(),
            volatile: settings.volatile_counters(),
            token: self.token.as_str(),
            first_call: !self.woken && !renew_leftover,
            ttl_ms: whole_millis(self.ttl),
            renew_leftover,
            rw,
            record: self.publication.as_ref(),
        }));
        let round = fan_out(
            &self.node_set.nodes,
            settings.quorum,
            Until::Decided,
            cancel,
            "acquire",
            |node| {
                let (command, ledger, fences) = (
                    Arc::clone(&command),
                    Arc::clone(&self.ledger),
                    fences.clone(),
                );
                async move {
                    match acquire(&node, &command, &ledger, attempt).await {
                        Ok(Taken::Ours(fence)) => {
                            if let (Some(fence), Some(slot)) = (
                                fence,
                                fences.as_ref().and_then(|fences| fences.get(node.index())),
                            ) {
                                slot.store(fence, Ordering::Relaxed);
                            }
                            NodeReply::Ours
                        }
                        Ok(Taken::NotOurs) => NodeReply::NotOurs,
                        Err(error) => NodeReply::Failed(error),
                    }
                }
            },
        )
        .await;
        self.ledger.decide();
        round
    }

    /// A quorum took the key: let the slower nodes' requests finish in the background, with
    /// fencing write the fence back to a quorum (unless every granting node took it already),
    /// and hand out what is left of the TTL (ttl − elapsed − drift, elapsed counted from before
    /// the first request to the last decision).
    async fn won<C>(
        &self,
        round: Round,
        fences: Option<Fences>,
        started: Moment,
        decided: Moment,
        cancel: Pin<&mut C>,
    ) -> Result<(Grant, Vec<NodeOutcome>), Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        let node_set = self.node_set;
        // More nodes then hold the key should one of the quorum crash; a release to such a node
        // waits until its request has finished (the ledger), should this attempt still fail.
        if let Some(unanswered) = round.unanswered {
            node_set.background.finish_unanswered(unanswered);
        }
        let (decided, outcomes, fence) = match (&self.fence_keys, fences) {
            (Some(fence_keys), Some(fences)) => {
                let mut cancel = cancel;
                let fence = match highest_fence(&fences, &round.outcomes) {
                    // A set's script answers the highest of its counters: the others may be
                    // lower, and only the write-back raises them all. A volatile node may have
                    // lost its grant since: the write-back's check of the key leaves it out.
                    Some(fence)
                        if matches!(self.keys, Keys::One(_))
                            && !node_set.settings.volatile_counters()
                            && agreed(&fences, &round.outcomes, fence) =>
                    {
                        return self.grant(started, decided, round.outcomes, Some(fence));
                    }
                    Some(fence) => fence,
                    None => {
                        let trusted = fences.iter().map(|f| f.load(Ordering::Relaxed)).max();
                        let trusted = trusted.unwrap_or(0);
                        recover_fence(node_set, fence_keys, trusted, cancel.as_mut()).await?
                    }
                };
                let (decided, outcomes) = write_back_all(
                    node_set,
                    &self.keys,
                    fence_keys,
                    &self.token,
                    fence,
                    self.publication.as_ref(),
                    cancel,
                )
                .await?;
                (decided, outcomes, Some(fence))
            }
            _ => (decided, round.outcomes, None),
        };
        self.grant(started, decided, outcomes, fence)
    }

    /// What is left of the TTL of a grant decided at `decided` (ttl − elapsed − drift, elapsed
    /// counted from `started`, before the first request), or [`Error::ValidityExpired`].
    fn grant(
        &self,
        started: Moment,
        decided: Moment,
        outcomes: Vec<NodeOutcome>,
        fence: Option<u64>,
    ) -> Result<(Grant, Vec<NodeOutcome>), Error> {
        let elapsed = decided.saturating_duration_since(started);
        let Some(left) = self.node_set.settings.validity(self.ttl, elapsed) else {
            return Err(Error::ValidityExpired {
                ttl: self.ttl,
                elapsed,
                outcomes,
            });
        };
        // A moment that far out does not exist: treat the lock as expiring now.
        let valid_until = decided.saturating_add(left);
        let grant = Grant {
            decided,
            valid_until,
            fence,
            ttl: self.ttl,
        };
        Ok((grant, outcomes))
    }

    /// The round was lost to other owners (`Held`), to failures (`Unavailable`), or cancelled.
    /// Requests still in flight are dropped, which finishes them: the release that follows is
    /// ordered after each on its node.
    fn lost(&self, verdict: Option<Verdict>, round: Round) -> Error {
        let Round {
            outcomes,
            unanswered,
            ..
        } = round;
        drop(unanswered);
        match verdict {
            Some(Verdict::Held) => Error::Held {
                resource: self.resource.to_vec(),
                unreachable: outcomes
                    .iter()
                    .filter(|outcome| matches!(outcome.reply, NodeReply::Failed(_)))
                    .count(),
                outcomes,
            },
            Some(_) => Error::Unavailable {
                quorum: self.node_set.settings.quorum,
                outcomes,
            },
            None => Error::Cancelled { outcomes },
        }
    }

    fn into_guard(self, grant: Grant, outcomes: Vec<NodeOutcome>) -> Guard {
        let acquired = Acquired {
            node_set: Arc::clone(self.node_set),
            keys: self.keys,
            token: self.token,
            ledger: self.ledger,
            owner: self.owner,
            side: self.rw.map(|(side, _)| side),
        };
        Guard::new(Hold::new(acquired, grant), outcomes)
    }
}

/// Releases an attempt's key in the background if dropped while armed: the attempt's future was
/// dropped (cancelled) or unwound (panic) before it could clean up or hand over to a guard.
struct ReleaseOnDrop<'a> {
    acquisition: &'a Acquisition<'a>,
    armed: bool,
}

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!("acquisition dropped mid-flight; releasing in the background");
            let acquisition = self.acquisition;
            // Nothing of this attempt is handed to a connection from now on, whatever the order
            // in which its requests' futures are dropped and the release task runs.
            acquisition.ledger.decide();
            release_in_background(
                acquisition.node_set,
                acquisition.keys.clone(),
                acquisition.token.clone(),
                Arc::clone(&acquisition.ledger),
                None,
                false,
            );
        }
    }
}
