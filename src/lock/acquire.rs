//! The verbs that acquire: [`Lock::acquire`] (as patient as the request or the lock says),
//! [`Lock::try_acquire`] (once) and [`Lock::acquire_until`] (with a cancel signal). All three
//! take a [`Request`] (or anything that becomes one: a name, a set) and end in one function,
//! which checks the request, re-enters an owner's hold, and runs the acquisition its patience
//! asks for.

use std::future::{Future, pending};
use std::pin::{Pin, pin};
use std::sync::Arc;

use tokio::time::Instant;

use crate::acquisition::Acquisition;
use crate::error::Error;
use crate::guard::Guard;
use crate::hold::Owners;
use crate::lock::Lock;
use crate::owner::Owner;
use crate::request::{Prepared, Request};
use crate::rules::patience::Patience;
use crate::rules::resources::Keys;
use crate::rules::retry::RetryPolicy;
use crate::semaphore::Take;

impl Lock {
    /// Acquires what `request` names, one resource or a [`Resources`](crate::Resources) set
    /// (all of it or none), as patiently as it says, by default as the lock's
    /// [`patience`](crate::LockOptions::patience) says: wait up to the TTL, woken by the release
    /// or the holder's keys expiring, in arrival order with this lock's other waiters of the
    /// same resources.
    ///
    /// The first attempt is made at once, as [`try_acquire`](Lock::try_acquire) makes it,
    /// unless another caller of this `Lock` already waits for one of the resources (then it
    /// queues behind them). Only a refused attempt subscribes to the release messages; the
    /// next attempt follows once a quorum of nodes confirmed the subscription, so a release in
    /// between is not missed, and a slow, hung or dead minority is never waited for.
    ///
    /// Why the TTL by default: it is the longest a holder that crashed without releasing can
    /// keep the lock, so a caller gets every lock that nobody keeps alive, and a lock kept
    /// alive by a live holder makes it give up (`Held`) rather than hang.
    ///
    /// Every attempt uses a fresh token and is released on every node when it fails; dropping
    /// this future at any point releases whatever it may have set, in the background (see
    /// [`Lock::settle`]). A waiting call returns within its wait plus one attempt
    /// ([`attempt_bound`](Lock::attempt_bound)).
    ///
    /// # Errors
    ///
    /// The last attempt's error, each carrying every node's reply; whatever the attempts set
    /// has been released. A wait or a retry ends at once on an error that no retry can cure
    /// ([`Error::is_permanent`]: too few nodes left for a quorum once those that fail for good,
    /// such as a refused password, are counted out):
    ///
    /// - [`Error::Held`]: another owner holds the resource (a set: names its first resource).
    ///   With empty outcomes if the caller never reached the head of the queue: it waited
    ///   behind other callers of this lock and never asked the nodes;
    /// - [`Error::Unavailable`]: too many nodes failed for a quorum;
    /// - [`Error::ValidityExpired`]: a quorum said yes, but the round trip used up the TTL;
    /// - [`Error::FenceUnconfirmed`]: with fencing, no quorum confirmed the fence;
    /// - [`Error::FenceUnrecovered`]: with fencing on volatile nodes, a counter had to be
    ///   recovered and too few nodes answered;
    /// - [`Error::Config`], before anything is sent: an empty resource name, a TTL Redis cannot
    ///   store or (restart guard on) above `max_ttl`, a retry policy with no attempt, a set
    ///   across cluster slots.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::{Patience, Request, Resources};
    ///
    /// let guard = lock.acquire("invoice:42").await?;
    /// guard.release().await;
    ///
    /// // Wait up to 5 s for the nightly job's lock, however long its holder keeps it.
    /// let nightly = Request::from("nightly-report").patience(Patience::Wait(Duration::from_secs(5)));
    /// let guard = lock.acquire(nightly).await?;
    /// guard.release().await;
    ///
    /// // Move money between two accounts: both locked, or neither.
    /// let accounts = Resources::new(["account:7", "account:9"])?;
    /// let guard = lock.acquire(&accounts).await?;
    /// guard.release().await;
    /// # Ok(()) }
    /// ```
    pub async fn acquire<'a>(&self, request: impl Into<Request<'a>>) -> Result<Guard, Error> {
        self.run(&request.into(), None, pending()).await
    }

    /// One attempt, whatever the request's patience: [`Error::Held`] at once if someone else
    /// holds the lock. An owner's re-entry still joins its hold.
    ///
    /// # Errors
    ///
    /// Those of [`acquire`](Lock::acquire).
    pub async fn try_acquire<'a>(&self, request: impl Into<Request<'a>>) -> Result<Guard, Error> {
        self.run(&request.into(), Some(Patience::Once), pending())
            .await
    }

    /// [`acquire`](Lock::acquire), giving up with [`Error::Cancelled`] as soon as `cancel`
    /// completes (a shutdown signal, say). Keys set so far are released first.
    ///
    /// # Errors
    ///
    /// Those of [`acquire`](Lock::acquire), and [`Error::Cancelled`] (with the last attempt's
    /// node outcomes).
    pub async fn acquire_until<'a>(
        &self,
        request: impl Into<Request<'a>>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        self.run(&request.into(), None, cancel).await
    }

    /// Every verb's one path: the request checked (`patience` overriding its own), an owner's
    /// hold re-entered, then one attempt, attempts on a retry policy, or a wait.
    pub(crate) async fn run(
        &self,
        request: &Request<'_>,
        patience: Option<Patience>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        let prepared = request.prepare(&self.node_set().settings, patience)?;
        if let Some(guard) = self.reenter_prepared(&prepared) {
            return Ok(guard);
        }
        let mut cancel = pin!(cancel);
        match &prepared.patience {
            Patience::Once => self.attempt(&prepared, None, false, cancel).await,
            Patience::Retry(policy) => match self.take(&prepared) {
                Some(take) => take.retry(policy, cancel).await,
                None => self.acquisition(&prepared).run(policy, cancel).await,
            },
            Patience::Wait(wait) => {
                let called = Instant::now();
                // Try first, unless a caller of this lock already queues for these resources
                // (it would be passed). Inline, so that a free lock costs what `try_acquire`
                // does: the wait below, and its allocation, only after a refusal.
                let mut refused = None;
                if !self.node_set().wait_list.queued(&prepared.keys) {
                    match self.attempt(&prepared, None, false, cancel.as_mut()).await {
                        Ok(guard) => return Ok(guard),
                        Err(error) if error.ends_trying() => return Err(error),
                        Err(error) => refused = Some(error),
                    }
                }
                Box::pin(self.wait_for(&prepared, called, *wait, refused, cancel)).await
            }
        }
    }

    /// One attempt at what `prepared` asks for: one acquisition of a lock, or one pass over a
    /// semaphore's slots; `woken`: a waiter's attempt, not the caller's first.
    pub(super) async fn attempt<C>(
        &self,
        prepared: &Prepared<'_>,
        freed: Option<&[u8]>,
        woken: bool,
        cancel: Pin<&mut C>,
    ) -> Result<Guard, Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        match self.take(prepared) {
            Some(take) => take.once(freed, cancel).await,
            None => {
                self.acquisition(prepared)
                    .woken(woken)
                    .run(&RetryPolicy::once(), cancel)
                    .await
            }
        }
    }

    /// The permit `prepared` asks for, if it names a semaphore's slots.
    pub(super) fn take<'s>(&'s self, prepared: &'s Prepared<'_>) -> Option<Take<'s>> {
        let slots = prepared.slots.as_deref()?;
        Some(Take {
            node_set: self.node_set(),
            name: prepared.name,
            slots,
            take: prepared.take,
            ttl: prepared.ttl,
            owner: self.owned_by(prepared.owner),
        })
    }

    /// The acquisition `prepared` asks for, with a fresh token, nothing sent yet.
    pub(super) fn acquisition<'s>(&'s self, prepared: &'s Prepared<'_>) -> Acquisition<'s> {
        Acquisition::new(
            self.node_set(),
            prepared.name,
            prepared.keys.clone(),
            prepared.ttl,
        )
        .for_owner(self.owned_by(prepared.owner))
        .for_side(prepared.rw.clone())
        .publishing(prepared.publication.clone())
    }

    /// Another guard of `owner`'s hold of `keys`, if it has one still valid.
    pub(crate) fn reenter(&self, owner: Option<Owner>, keys: &Keys) -> Option<Guard> {
        let hold = self.owners().join(owner?, keys.clone())?;
        Some(Guard::joined(hold))
    }

    /// Another guard of the hold of what `prepared` asks for, if its owner has one still
    /// valid: of the resources, or of any of a semaphore's slots.
    pub(super) fn reenter_prepared(&self, prepared: &Prepared<'_>) -> Option<Guard> {
        match &prepared.slots {
            None => self.reenter(prepared.owner, &prepared.keys),
            Some(slots) => slots
                .iter()
                .find_map(|slot| self.reenter(prepared.owner, &Keys::One(Arc::clone(&slot.key)))),
        }
    }

    /// An acquisition's owner with this lock's registry of owned holds.
    pub(crate) fn owned_by(&self, owner: Option<Owner>) -> Option<(Owner, Arc<Owners>)> {
        owner.map(|owner| (owner, Arc::clone(self.owners())))
    }
}
