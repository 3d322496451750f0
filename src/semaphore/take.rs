//! Taking a permit: one pass over the slots (what one attempt of a semaphore is), or for
//! several permits one set of free slots, the retry policy's passes, and the bound a
//! semaphore's waiter sleeps to when no wake-up comes.

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
use crate::round::wait_list::expiry_bounds;
use crate::rules::permits::{free_after_take, pick_free, slot_order};
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
    /// How many slots one acquisition takes, all or none.
    pub(crate) take: usize,
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
        if self.take > 1 {
            return self.once_many(freed.is_some(), cancel).await;
        }
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
            match self.one_slot(slot, cancel.as_mut()).await {
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

    /// One attempt of a waiter told of no freed slot (promoted to the heads, or woken by the
    /// expiry bound): every slot's expiry bound on every node read first, in one round, then a
    /// slot free on a quorum tried, if there is one and it is not one of the keys `others` (the
    /// slots other heads were told of and are trying: two would split the votes); for several
    /// permits, [`once`](Take::once). A full semaphore then costs the waiter that one read
    /// instead of a round per slot. Also the bounds read when nothing was tried, which are what
    /// the waiter sleeps by (the others' slots counted as held: their heads take them).
    pub(crate) async fn informed<C>(
        &self,
        others: &[Vec<u8>],
        cancel: Pin<&mut C>,
    ) -> (Result<Guard, Error>, Option<Vec<Option<Duration>>>)
    where
        C: Future<Output = ()> + ?Sized,
    {
        if self.take > 1 {
            return (self.once(None, cancel).await, None);
        }
        let mut bounds = self.slot_bounds().await;
        for (bound, slot) in bounds.iter_mut().zip(self.slots) {
            if others.iter().any(|key| **key == *slot.key) {
                *bound = None;
            }
        }
        let free = pick_free(&bounds, 1, rand::random())
            .and_then(|picked| picked.first().copied())
            .and_then(|index| usize::try_from(index).ok())
            .and_then(|index| self.slots.get(index));
        match free {
            Some(slot) => (self.one_slot(slot, cancel).await, None),
            None => (
                Err(Error::Held {
                    resource: self.name.to_vec(),
                    unreachable: 0,
                    outcomes: Vec::new(),
                }),
                Some(bounds),
            ),
        }
    }

    /// One attempt of the lock at one slot.
    async fn one_slot<C>(&self, slot: &Slot, cancel: Pin<&mut C>) -> Result<Guard, Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        Acquisition::new(
            self.node_set,
            &slot.name,
            Keys::One(Arc::clone(&slot.key)),
            self.ttl,
        )
        .for_owner(self.owner.clone())
        .run(&RetryPolicy::once(), cancel)
        .await
    }

    /// One attempt at [`take`](Take::take) permits at once, as one set of slots (a node takes
    /// all of them or none). Unless `woken`, the slots from a random one onwards first: a
    /// semaphore with room wins in one round. Refused (or woken), every slot's `PTTL` on every
    /// node tells which are free on a quorum, and `take` of those are tried; fewer free is
    /// [`Error::Held`] without trying. The reads are only a hint: the quorum rule decides.
    async fn once_many<C>(&self, woken: bool, mut cancel: Pin<&mut C>) -> Result<Guard, Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        let permits = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        let mut held = None;
        for informed in [woken, true] {
            let picked: Vec<u32> = if informed {
                match pick_free(&self.slot_bounds().await, self.take, rand::random()) {
                    Some(free) => free,
                    None => break,
                }
            } else {
                slot_order(permits, rand::random())
                    .take(self.take)
                    .collect()
            };
            match self.try_slots(&picked, cancel.as_mut()).await {
                Err(Error::Held {
                    unreachable,
                    outcomes,
                    ..
                }) => held = Some((unreachable, outcomes)),
                other => return other,
            }
            if woken {
                break;
            }
        }
        let (unreachable, outcomes) = held.unwrap_or_default();
        Err(Error::Held {
            resource: self.name.to_vec(),
            unreachable,
            outcomes,
        })
    }

    /// One attempt at the slots `picked` (indices into the slots) as one set, its keys in
    /// bytewise order as a [`Resources`](crate::Resources) set's are.
    async fn try_slots<C>(&self, picked: &[u32], cancel: Pin<&mut C>) -> Result<Guard, Error>
    where
        C: Future<Output = ()> + ?Sized,
    {
        let mut slots: Vec<&Slot> = picked
            .iter()
            .filter_map(|index| usize::try_from(*index).ok())
            .filter_map(|index| self.slots.get(index))
            .collect();
        slots.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        let Some(first) = slots.first() else {
            return Err(Error::Held {
                resource: self.name.to_vec(),
                unreachable: 0,
                outcomes: Vec::new(),
            });
        };
        let keys = Keys::Set(slots.iter().map(|slot| Arc::clone(&slot.key)).collect());
        Acquisition::new(self.node_set, &first.name, keys, self.ttl)
            .run(&RetryPolicy::once(), cancel)
            .await
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
                Err(error) if error.ends_trying() => return Err(error),
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

    /// How long until a quorum of the nodes is free of as many slots as an acquisition takes,
    /// by expiry alone (`None` if expiry alone never frees that many), from `bounds` if
    /// [`informed`](Take::informed) read them, else read now.
    pub(crate) async fn free_after(
        &self,
        bounds: Option<Vec<Option<Duration>>>,
    ) -> Option<Duration> {
        let bounds = match bounds {
            Some(bounds) => bounds,
            None => self.slot_bounds().await,
        };
        free_after_take(&bounds, self.take)
    }

    /// For each slot, in slot order, when a quorum of the nodes is free of it by expiry alone.
    async fn slot_bounds(&self) -> Vec<Option<Duration>> {
        let keys: Vec<&[u8]> = self.slots.iter().map(|slot| &*slot.key).collect();
        expiry_bounds(&self.node_set.nodes, self.node_set.settings.quorum, &keys).await
    }
}
