//! [`Guard`]: proof of one acquisition. It knows its token and when its validity ends, extends
//! and releases, and releases in the background if dropped without [`Guard::release`].

use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tracing::Instrument;

use crate::error::Error;
use crate::hold::Hold;
use crate::metrics;
use crate::node::extend::extend;
use crate::node::set::extend_set;
use crate::outcome::{NodeOutcome, NodeReply, SetOutcome};
use crate::round::NodeSet;
use crate::round::fan_out::{Until, fan_out};
use crate::round::release::{release_all, release_in_background};
use crate::round::set_answers::SetAnswers;
use crate::rules::clock::Moment;
use crate::rules::quorum::Verdict;
use crate::rules::resources::holds_all;
use crate::rules::token::Token;
use crate::rules::validity::whole_millis;
use crate::settings::validate_ttl;

/// A held lock. Owned, `Send + Sync + 'static`: it can move between tasks and outlive the
/// [`Lock`](crate::Lock) that made it.
///
/// The lock is only safe to rely on while [`is_valid`](Guard::is_valid): after that the keys may
/// have expired and someone else may hold the resource. Check before each protected write, and
/// [`extend`](Guard::extend) in time if the work runs long.
///
/// Dropping a guard without calling [`release`](Guard::release) releases it in the background on
/// the tokio runtime (the current one, else the one it was acquired on); nothing blocks.
#[must_use = "dropping a guard releases the lock at once"]
pub struct Guard {
    /// What this guard shares with the other guards of its owner's hold, if any.
    hold: Arc<Hold>,
    outcomes: Vec<NodeOutcome>,
    /// For a set, what each node that answered the last extension held of it.
    set_outcomes: Vec<SetOutcome>,
    released: bool,
}

/// What a release found on the nodes that had answered when it returned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReleaseReport {
    /// How many of the nodes that answered still held our token and deleted it.
    pub held: usize,
    /// What each node said; [`NodeReply::NoReply`] for the nodes
    /// still being released in the background, [`NodeReply::NotSent`]
    /// for those the acquisition sent nothing to (so neither did the release), and
    /// [`NodeReply::InDoubt`] where a request of ours that went out
    /// over an earlier connection may still set the key.
    pub outcomes: Vec<NodeOutcome>,
    /// How many guards of the same [`Owner`](crate::Owner) still hold the lock after this one.
    /// Above zero, the lock stays held and nothing was sent (`held` is 0, `outcomes` empty).
    pub still_held_by: usize,
    /// For a set of resources, what each node that answered held of it, key by key: a key that
    /// had expired there is reported, not an error. `held` counts the nodes that held every key.
    /// Empty for a single resource.
    pub set_outcomes: Vec<SetOutcome>,
}

impl ReleaseReport {
    /// A release that sent nothing.
    pub(crate) fn nothing_sent(still_held_by: usize) -> ReleaseReport {
        ReleaseReport {
            held: 0,
            outcomes: Vec::new(),
            still_held_by,
            set_outcomes: Vec::new(),
        }
    }
}

impl Guard {
    /// The first guard of a hold just acquired, registered with its owner if it has one.
    pub(crate) fn new(hold: Hold, outcomes: Vec<NodeOutcome>) -> Guard {
        let hold = Arc::new(hold);
        hold.register();
        Guard {
            hold,
            outcomes,
            set_outcomes: Vec::new(),
            released: false,
        }
    }

    /// Another guard of a hold its owner re-entered, or a kept guard's taken out of custody
    /// (already counted either way); nothing was sent.
    pub(crate) fn joined(hold: Arc<Hold>) -> Guard {
        Guard {
            hold,
            outcomes: Vec::new(),
            set_outcomes: Vec::new(),
            released: false,
        }
    }

    /// The resource name, as given to `acquire`; for a set of resources, the first of the set
    /// (see [`resources`](Guard::resources)).
    pub fn resource(&self) -> &[u8] {
        self.hold.resource()
    }

    /// Every resource this guard holds, in order: the one given to `acquire`, or the set's
    /// (in the [`Resources`](crate::Resources) order).
    pub fn resources(&self) -> impl Iterator<Item = &[u8]> {
        self.hold.resources()
    }

    /// The Redis key the lock is stored under (prefix and resource); for a set, the first key.
    pub fn key(&self) -> &[u8] {
        self.hold.keys.first()
    }

    /// This acquisition's token.
    pub fn token(&self) -> &Token {
        &self.hold.token
    }

    /// With [`LockOptions::fencing`](crate::LockOptions::fencing) on, this acquisition's fence:
    /// larger than the fence of every earlier holder of the resource, and smaller than that of
    /// every later one (under the lock's assumptions, see `docs/fencing.md`). Send it with every
    /// write to the protected store, which must refuse a fence below the highest it has seen;
    /// then a write this holder makes after its validity ran out (a long pause) cannot overwrite
    /// a later holder's. `None` with fencing off. An extension keeps the fence.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), quorumlock::Error> {
    /// use quorumlock::{Lock, LockOptions};
    ///
    /// let lock = Lock::new(
    ///     ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"],
    ///     LockOptions::new().fencing(true),
    /// )?;
    /// let guard = lock.acquire("invoice:42").await?;
    /// let fence = guard.fence().unwrap_or_default();
    /// // UPDATE invoices SET …, last_fence = $fence WHERE id = 42 AND last_fence < $fence
    /// # let _ = fence;
    /// guard.release().await;
    /// # Ok(()) }
    /// ```
    pub fn fence(&self) -> Option<u64> {
        self.hold.fence
    }

    /// The TTL the acquisition asked for: the lock's, or the one given in
    /// [`Request::ttl`](crate::Request::ttl). A keep-alive's extensions ask for
    /// it again.
    pub fn ttl(&self) -> Duration {
        self.hold.ttl
    }

    /// The instant the acquisition was decided: when the deciding node's reply arrived, just
    /// before `acquire` returned. The holder may rely on the lock from here until
    /// [`valid_until`](Guard::valid_until) (a history checker's window starts here). Mapped to
    /// the `Instant` clock at each call, as `valid_until` is; not moved by an extension.
    pub fn decided_at(&self) -> Instant {
        self.hold.decided.to_instant()
    }

    /// The instant the lock stops being safe to rely on, on the `Instant` clock, read now.
    ///
    /// Validity is measured on a clock that counts time the machine spends suspended
    /// (CLOCK_BOOTTIME on Linux and Android), because Redis expires the keys by the nodes' wall
    /// clocks, which run on during a suspend, while `Instant` does not advance there. So this is
    /// recomputed at each call as now + [`remaining`](Guard::remaining) (or in the past, once
    /// expired): after a suspend it moves earlier. On other platforms validity is measured on
    /// `Instant` itself, which may not count suspended time; there a suspended client can
    /// overestimate its validity.
    pub fn valid_until(&self) -> Instant {
        self.hold.valid_until().to_instant()
    }

    /// Validity left now (zero once expired, or once a keep-alive of this hold found the lock
    /// lost), counting time spent suspended (see [`valid_until`](Guard::valid_until)).
    pub fn remaining(&self) -> Duration {
        self.hold.remaining()
    }

    /// Whether the validity has time left, counting time spent suspended (see
    /// [`valid_until`](Guard::valid_until)).
    pub fn is_valid(&self) -> bool {
        self.hold.is_valid()
    }

    /// How many guards hold this lock: 1, or with an [`Owner`](crate::Owner) that re-entered
    /// it, one for each of its guards not yet released. The lock is released with the last.
    pub fn hold_count(&self) -> usize {
        self.hold.guards()
    }

    /// What each node said in the acquisition (or the last successful extension).
    pub fn outcomes(&self) -> &[NodeOutcome] {
        &self.outcomes
    }

    /// For a set of resources, what each node that answered the last extension (successful or
    /// not) held of it, key by key; empty for a single resource and before any extension. A
    /// node counts for an extension of a set only if it still held every key.
    pub fn set_outcomes(&self) -> &[SetOutcome] {
        &self.set_outcomes
    }

    /// Sets the keys' expiry to `ttl` from now on every node that still holds our token, and
    /// recomputes the validity by the same quorum rule as an acquisition. For a set, a node
    /// extends and counts only if it still holds every key of the set; what each node held is
    /// in [`set_outcomes`](Guard::set_outcomes).
    ///
    /// # Errors
    ///
    /// - [`Error::ExtendFailed`]: no quorum extended in time (or the validity left was used up);
    ///   nothing is deleted, nodes that still hold the key keep it, and `still_valid` says
    ///   whether the previous validity still runs;
    /// - [`Error::Config`]: a `ttl` Redis cannot store, or, with the restart guard on, above
    ///   [`LockOptions::max_ttl`](crate::LockOptions::max_ttl)
    ///   ([`ConfigError::TtlAboveMaxTtl`](crate::ConfigError::TtlAboveMaxTtl)), which the guard
    ///   would not cover. Nothing is sent.
    pub async fn extend(&mut self, ttl: Duration) -> Result<(), Error> {
        let span = tracing::info_span!(
            "quorumlock.extend",
            otel.name = "quorumlock extend",
            otel.kind = "client",
            resource = %String::from_utf8_lossy(self.resource()),
            ttl_ms = whole_millis(ttl),
            outcome = tracing::field::Empty,
            validity_left_ms = tracing::field::Empty,
        );
        if span.is_disabled() {
            let result = self.extend_now(ttl).await;
            metrics::extended(result.as_ref().copied());
            return result;
        }
        let record = span.clone();
        // Boxed, as the acquisition's: the span widens no unobserved call's future.
        let result = Box::pin(self.extend_now(ttl).instrument(span)).await;
        metrics::extended(result.as_ref().copied());
        record.record(
            "outcome",
            result.as_ref().map_or_else(Error::label, |()| "extended"),
        );
        record.record("validity_left_ms", whole_millis(self.remaining()));
        result
    }

    /// [`extend`](Guard::extend), inside its span.
    async fn extend_now(&mut self, ttl: Duration) -> Result<(), Error> {
        validate_ttl(ttl)?;
        self.hold.node_set.settings.check_guarded_ttl(ttl)?;
        let node_set = &self.hold.node_set;
        let (keys, token, ttl_ms) = (&self.hold.keys, &self.hold.token, whole_millis(ttl));
        let sets = SetAnswers::for_keys(keys);
        let quorum = node_set.settings.extend_quorum();
        let started = Moment::now();
        let round = fan_out(
            &node_set.nodes,
            quorum,
            Until::Decided,
            pin!(std::future::pending::<()>()),
            "extend",
            |node| {
                let (keys, token, sets) = (keys.clone(), token.clone(), sets.clone());
                async move {
                    let (keys, token) = (keys.all(), token.as_str());
                    NodeReply::from_flag(match (keys, sets) {
                        ([key], None) => extend(&node, key, token, ttl_ms).await,
                        (keys, sets) => extend_set(&node, keys, token, ttl_ms).await.map(|held| {
                            let extended = holds_all(&held);
                            if let Some(sets) = sets {
                                sets.record(node.index(), held);
                            }
                            extended
                        }),
                    })
                }
            },
        )
        .await;
        let decided = Moment::now();
        if let Some(sets) = sets {
            self.set_outcomes = sets.answered_in(&round);
        }
        let valid_until = node_set.settings.extended_until(ttl, started, decided);
        match (round.verdict, valid_until) {
            (Some(Verdict::Won), Some(valid_until)) => {
                if let Some(unanswered) = round.unanswered {
                    // Slower nodes get the new expiry too, as in an acquisition.
                    node_set.background.finish_unanswered(unanswered);
                }
                self.hold.extended(valid_until);
                self.outcomes = round.outcomes;
                Ok(())
            }
            _ => Err(Error::ExtendFailed {
                still_valid: self.is_valid(),
                outcomes: round.outcomes,
            }),
        }
    }

    /// The guard's place among its hold's guards, handed to a keep-alive's custody without
    /// releasing: it still counts as a guard, and [`Guard::joined`] makes it one again. (A kept
    /// lease keeps its hold, not a guard with its outcomes: it stays small.)
    pub(crate) fn into_custody(mut self) {
        // Released as far as this value goes: its place among the hold's guards moves on.
        self.released = true;
    }

    /// What this guard shares with the other guards of its hold.
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    /// What the guard's lock shares: its nodes, settings and background work.
    pub(crate) fn node_set(&self) -> &Arc<NodeSet> {
        &self.hold.node_set
    }

    /// The runtime the guard was acquired on, if any.
    pub(crate) fn runtime(&self) -> Option<&Handle> {
        self.hold.runtime.as_ref()
    }

    /// Deletes the key on every node that still holds our token, never retrying.
    ///
    /// A node the acquisition sent nothing to is skipped (not even dialed). On a node whose
    /// acquire request is still in flight (it had not answered at the decision), the
    /// compare-and-delete is sent only once that request has finished, so it cannot be overtaken.
    ///
    /// Returns as soon as a quorum of nodes has answered that it is free of our key, so that a
    /// slow or hung minority costs nothing; the other nodes are released in the background
    /// ([`Lock::settle`](crate::Lock::settle) waits for them). Without such a quorum it waits for
    /// every node, at most its timeouts; an unreachable node's key expires by its TTL.
    ///
    /// A guard whose [`Owner`](crate::Owner) holds the lock through other guards too sends
    /// nothing: the lock stays held until the last of them is released
    /// ([`ReleaseReport::still_held_by`]).
    pub async fn release(mut self) -> ReleaseReport {
        self.released = true;
        let hold = &self.hold;
        let still_held_by = hold.leave_guard();
        if still_held_by > 0 {
            return ReleaseReport::nothing_sent(still_held_by);
        }
        let span = tracing::info_span!(
            "quorumlock.release",
            otel.name = "quorumlock release",
            otel.kind = "client",
            resource = %String::from_utf8_lossy(hold.resource()),
            held = tracing::field::Empty,
        );
        let release = release_all(&hold.node_set, &hold.keys, &hold.token, &hold.ledger, true);
        let released = if span.is_disabled() {
            release.await
        } else {
            let record = span.clone();
            let released = Box::pin(release.instrument(span)).await;
            record.record("held", released.round.ours());
            released
        };
        metrics::released(false);
        ReleaseReport {
            held: released.round.ours(),
            outcomes: released.round.outcomes,
            still_held_by: 0,
            set_outcomes: released.sets,
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let hold = &self.hold;
        if !self.released && hold.leave_guard() == 0 {
            metrics::released(true);
            release_in_background(
                &hold.node_set,
                hold.keys.clone(),
                hold.token.clone(),
                Arc::clone(&hold.ledger),
                hold.runtime.as_ref(),
                true,
            );
        }
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("resource", &String::from_utf8_lossy(self.resource()))
            .field("token", &self.hold.token)
            .field("fence", &self.hold.fence)
            .field("hold_count", &self.hold_count())
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}
