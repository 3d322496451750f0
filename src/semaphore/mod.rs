//! A counting semaphore over the quorum ([`Request::permits`](crate::Request::permits)): k
//! permits are k slots, `name:0` … `name:k-1`, each a lock of its own taken by the quorum rule,
//! and a holder holds one slot, so at most k hold at once whatever the nodes' answers' order.
//! A counter of holders voted on by a majority is not safe: with 2 permits and 3 nodes, A and B
//! can count on node 1, B and C on node 2, A and C on node 3, and all three win a majority
//! (`docs/ARCHITECTURE.md`, "Semaphores: slots, not a voted counter"; checked in the model).
//!
//! An acquisition tries the slots from a random one onwards, each as one attempt of the lock;
//! the first it wins is its guard, and a slot held by someone else sends it to the next. Waiting
//! stands in the queue of every slot, so a release or expiry of any slot wakes it, and a
//! waiter woken by a release tries the slot it freed. A `Lock`'s first waiters, as many
//! as the permits (at most 8), contend together, and a release wakes one not already trying.

mod take;

pub(crate) use take::Take;

use std::sync::Arc;

use crate::error::ConfigError;
use crate::rules::permits::{MAX_PERMITS, slot_name};
use crate::settings::Settings;

/// One slot of a semaphore: its resource name (what the guard reports) and its lock key.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub(crate) name: Vec<u8>,
    pub(crate) key: Arc<[u8]>,
}

impl Slot {
    /// Every slot of the semaphore `name` with `permits` permits, checked against `settings`.
    pub(crate) fn all(
        settings: &Settings,
        name: &[u8],
        permits: u32,
    ) -> Result<Vec<Slot>, ConfigError> {
        if permits == 0 {
            return Err(ConfigError::ZeroPermits);
        }
        if permits > MAX_PERMITS {
            return Err(ConfigError::TooManyPermits {
                permits,
                max: MAX_PERMITS,
            });
        }
        #[cfg(feature = "chaos-defects")]
        let permits = if settings.defect == Some(crate::rules::defect::Defect::SlotPastPermits) {
            permits.saturating_add(1)
        } else {
            permits
        };
        (0..permits)
            .map(|slot| {
                let name = slot_name(name, slot);
                let key = settings.lock_key(&name)?;
                Ok(Slot { name, key })
            })
            .collect()
    }
}
