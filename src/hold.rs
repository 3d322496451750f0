//! [`Hold`]: one acquisition's lock as all of its guards share it: keys, token, fence, validity
//! and the lost signal, and how many guards hold it. Without an owner that is one guard; with an
//! [`Owner`](crate::Owner) a re-entry adds one, through [`Owners`], one lock's registry of the
//! holds made for an owner; the lock is released when the last of them is.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::error::Lost;
use crate::metrics;
use crate::owner::Owner;
use crate::round::NodeSet;
use crate::round::ledger::Ledger;
use crate::rules::clock::Moment;
use crate::rules::resources::Keys;
use crate::rules::rwlock::Side;
use crate::rules::token::Token;

/// What the guards of one acquisition share.
pub(crate) struct Hold {
    pub(crate) node_set: Arc<NodeSet>,
    /// The resource's key, or the set's keys.
    pub(crate) keys: Keys,
    pub(crate) token: Token,
    /// The acquisition's requests per node, which the release is ordered after.
    pub(crate) ledger: Arc<Ledger>,
    /// When the acquisition's round was decided.
    pub(crate) decided: Moment,
    /// Moved by every successful extension, whichever guard (or keep-alive) made it.
    valid_until: Mutex<Moment>,
    /// With fencing on, the fence of this acquisition.
    pub(crate) fence: Option<u64>,
    /// The TTL the acquisition asked for, which extensions ask for again.
    pub(crate) ttl: Duration,
    /// The runtime the acquisition ran on, for releases from `Drop`.
    pub(crate) runtime: Option<Handle>,
    /// With an owner, the owner it was acquired for and the lock's registry it is in.
    owner: Option<(Owner, Arc<Owners>)>,
    /// For a side of a read-write lock, which.
    pub(crate) side: Option<Side>,
    /// How many guards hold it; with an owner, changed only under the owner registry's lock.
    guards: AtomicUsize,
    /// Set once by a keep-alive that found the lock lost; made by the first keep-alive.
    lost: OnceLock<watch::Sender<Option<Lost>>>,
}

/// The parts of a won acquisition a hold is made of.
pub(crate) struct Acquired {
    pub(crate) node_set: Arc<NodeSet>,
    pub(crate) keys: Keys,
    pub(crate) token: Token,
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) owner: Option<(Owner, Arc<Owners>)>,
    /// For a side of a read-write lock, which.
    pub(crate) side: Option<Side>,
}

/// The times of one grant: when its round was decided and until when it is valid.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grant {
    pub(crate) decided: Moment,
    pub(crate) valid_until: Moment,
    /// With fencing on, the fence confirmed by a quorum.
    pub(crate) fence: Option<u64>,
    /// The TTL the acquisition asked for.
    pub(crate) ttl: Duration,
}

impl Hold {
    /// The hold of one won acquisition, held by one guard.
    pub(crate) fn new(acquired: Acquired, grant: Grant) -> Hold {
        Hold {
            node_set: acquired.node_set,
            keys: acquired.keys,
            token: acquired.token,
            ledger: acquired.ledger,
            decided: grant.decided,
            valid_until: Mutex::new(grant.valid_until),
            fence: grant.fence,
            ttl: grant.ttl,
            runtime: Handle::try_current().ok(),
            owner: acquired.owner,
            side: acquired.side,
            guards: AtomicUsize::new(1),
            lost: OnceLock::new(),
        }
    }

    /// The resource name: the key without the lock's prefix (for a set, its first resource).
    pub(crate) fn resource(&self) -> &[u8] {
        self.resources().next().unwrap_or_default()
    }

    /// Every resource name, in order: the keys without the lock's prefix.
    pub(crate) fn resources(&self) -> impl Iterator<Item = &[u8]> {
        let prefix_len = self.node_set.settings.key_prefix.len();
        // A reader is of the lock its writer key names.
        self.keys
            .woken()
            .iter()
            .map(move |key| key.get(prefix_len..).unwrap_or_default())
    }

    /// When the validity ends, on the lease clock.
    pub(crate) fn valid_until(&self) -> Moment {
        *self
            .valid_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A successful extension: the validity now ends at `valid_until`.
    pub(crate) fn extended(&self, valid_until: Moment) {
        *self
            .valid_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = valid_until;
    }

    /// Whether the lock may be relied on now: not found lost, validity left.
    pub(crate) fn is_valid(&self) -> bool {
        self.lost_reason().is_none() && Moment::now() < self.valid_until()
    }

    /// Validity left now: zero once expired or found lost.
    pub(crate) fn remaining(&self) -> Duration {
        if self.lost_reason().is_some() {
            return Duration::ZERO;
        }
        self.valid_until().saturating_duration_since(Moment::now())
    }

    /// The signal a keep-alive marks the lock lost on, and leases wait on.
    pub(crate) fn lost_signal(&self) -> &watch::Sender<Option<Lost>> {
        self.lost.get_or_init(|| watch::Sender::new(None))
    }

    /// Marks the lock lost, unless it already was (the first reason stays).
    pub(crate) fn mark_lost(&self, lost: Lost) {
        self.lost_signal().send_if_modified(|current| {
            let first = current.is_none();
            if first {
                metrics::lost(&lost);
                *current = Some(lost);
            }
            first
        });
    }

    /// Why the lock was lost, once a keep-alive found it lost.
    pub(crate) fn lost_reason(&self) -> Option<Lost> {
        self.lost.get().and_then(|lost| lost.borrow().clone())
    }

    /// How many guards hold it now.
    pub(crate) fn guards(&self) -> usize {
        self.guards.load(Ordering::Acquire)
    }

    /// One more guard, if any still holds it (a hold whose last guard left is released).
    /// Under the owner registry's lock.
    fn join(&self) -> bool {
        let held = self.guards() > 0;
        if held {
            self.guards.fetch_add(1, Ordering::AcqRel);
        }
        held
    }

    /// Whether it was acquired for an [`Owner`](crate::Owner).
    pub(crate) fn has_owner(&self) -> bool {
        self.owner.is_some()
    }

    /// Records a hold just acquired with its owner, if it has one.
    pub(crate) fn register(self: &Arc<Self>) {
        if let Some((owner, owners)) = &self.owner {
            owners.register(*owner, self);
        }
    }

    /// One of its guards leaves; how many are left (the last one releases the lock).
    pub(crate) fn leave_guard(self: &Arc<Self>) -> usize {
        match &self.owner {
            Some((owner, owners)) => owners.leave(*owner, self),
            None => self.leave(),
        }
    }

    /// One guard fewer; how many are left. With an owner, under the registry's lock.
    fn leave(&self) -> usize {
        self.guards.fetch_sub(1, Ordering::AcqRel).saturating_sub(1)
    }
}

/// Holds by owner and lock keys; weak, so that a hold is freed with its last guard.
type ByOwner = HashMap<(Owner, Keys), Weak<Hold>>;

/// One lock's holds made for an owner, by owner and key.
#[derive(Default)]
pub(crate) struct Owners {
    holds: Mutex<ByOwner>,
}

impl Owners {
    fn holds(&self) -> MutexGuard<'_, ByOwner> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `owner`'s hold of `keys`, joined by one more guard, if it has one that is still valid. A
    /// hold whose validity ran out or that was found lost is not joined: the caller acquires
    /// anew, as any other would.
    pub(crate) fn join(&self, owner: Owner, keys: Keys) -> Option<Arc<Hold>> {
        let holds = self.holds();
        let hold = holds.get(&(owner, keys))?.upgrade()?;
        (hold.is_valid() && hold.join()).then_some(hold)
    }

    /// Records a hold just acquired for its owner (replacing one that is no longer joined).
    fn register(&self, owner: Owner, hold: &Arc<Hold>) {
        self.holds()
            .insert((owner, hold.keys.clone()), Arc::downgrade(hold));
    }

    /// One of `hold`'s guards leaves; how many are left. The last one forgets the hold, unless
    /// a newer hold of the owner has replaced it.
    fn leave(&self, owner: Owner, hold: &Arc<Hold>) -> usize {
        let mut holds = self.holds();
        let left = hold.leave();
        if left == 0 {
            let entry = (owner, hold.keys.clone());
            if holds
                .get(&entry)
                .is_some_and(|known| std::ptr::eq(known.as_ptr(), Arc::as_ptr(hold)))
            {
                holds.remove(&entry);
            }
        }
        left
    }
}
