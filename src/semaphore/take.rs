//! Taking a permit: one pass over the slots (what one attempt of a semaphore is), the retry
//! policy's passes, and the bound a semaphore's waiter sleeps to when no wake-up comes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::acquisition::Acquisition;
use crate::error::Error;
use crate::guard::Guard;
use crate::hold::Owners;
use crate::owner::Owner;
use crate::round::NodeSet;
use crate::round::wait_list::free_by_expiry_after;
use crate::rules::permits::slot_order;
use crate::rules::resources::Keys;
use crate::rules::retry::RetryPolicy;
use crate::semaphore::Slot;

/// One acquisition of a permit: the semaphore's slots on the lock's nodes, for `ttl`, for an
/// owner if reentrant.
pub(crate) struct Take<'a> {
    pub(crate) node_set: &'a Arc<NodeSet>,
    /// The semaphore's name, which a refusal names.
    pub(crate) name: &'a [u8],
    pub(crate) slots: &'a [Slot],
    pub(crate) ttl: Duration,
    pub(crate) owner: Option<(Owner, Arc<Owners>)>,
}

impl Take<'_> {
    /// One attempt at a permit: the slot whose key is `freed` alone (a waiter's hint: its
    /// release woke it, and the other slots were held when it last looked; the other heads
    /// answer their releases), or else every slot from a random one onwards, each one attempt
    /// of the lock, until one is won. A slot held by someone else sends it to the next; any
    /// other failure (too few nodes, the validity used up, cancelled) ends the pass, since it is
    /// the nodes' and the next slot would meet it too. All held: [`Error::Held`] naming the
    /// semaphore, with the last slot's outcomes.
    pub(crate) async fn once<C>(
        &self,
        freed: Option<&[u8]>,
        mut cancel: Pin<&mut C>,
    ) -> Result<Guard, Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        let once = RetryPolicy::once();
        let permits = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        let mut held = None;
        let hinted = freed
            .and_then(|key| self.slots.iter().position(|slot| &*slot.key == key))
            .and_then(|index| u32::try_from(index).ok());
        let tries = if hinted.is_some() {
            1
        } else {
            self.slots.len()
        };
        let start = hinted.unwrap_or_else(rand::random);
        for index in slot_order(permits, start).take(tries) {
            let Some(slot) = usize::try_from(index).ok().and_then(|i| self.slots.get(i)) else {
                continue;
            };
            let acquisition = Acquisition::new(
                self.node_set,
                &slot.name,
                Keys::One(Arc::clone(&slot.key)),
                self.ttl,
            )
            .for_owner(self.owner.clone());
            match acquisition.run(&once, cancel.as_mut()).await {
                Ok(guard) => return Ok(guard),
                Err(Error::Held {
                    unreachable,
                    outcomes,
                    ..
                }) => held = Some((unreachable, outcomes)),
                Err(error) => return Err(error),
            }
        }
        let (unreachable, outcomes) = held.unwrap_or_default();
        Err(Error::Held {
            resource: self.name.to_vec(),
            unreachable,
            outcomes,
        })
    }

    /// Passes over the slots on `policy`'s schedule ([`Patience::Retry`](crate::Patience)).
    pub(crate) async fn retry<C>(
        &self,
        policy: &RetryPolicy,
        mut cancel: Pin<&mut C>,
    ) -> Result<Guard, Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        let started = Instant::now();
        let mut passes = 0u32;
        loop {
            let error = match self.once(None, cancel.as_mut()).await {
                Ok(guard) => return Ok(guard),
                Err(error @ (Error::Config(_) | Error::Cancelled { .. })) => return Err(error),
                Err(error) => error,
            };
            passes = passes.saturating_add(1);
            let Some(pause) = policy.next_delay(passes, started.elapsed(), rand::random()) else {
                return Err(error);
            };
            tokio::select! {
                biased;
                () = cancel.as_mut() => {
                    return Err(Error::Cancelled { outcomes: error.outcomes().to_vec() });
                }
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// How long until a quorum of the nodes is free of some slot by expiry alone: the earliest
    /// of the slots' bounds (`None` if expiry alone frees none).
    pub(crate) async fn free_after(&self) -> Option<Duration> {
        let nodes = &self.node_set.nodes;
        let quorum = self.node_set.settings.quorum;
        let bounds = futures::future::join_all(self.slots.iter().map(|slot| {
            let keys = Keys::One(Arc::clone(&slot.key));
            async move { free_by_expiry_after(nodes, quorum, &keys).await }
        }))
        .await;
        bounds.into_iter().flatten().min()
    }
}
