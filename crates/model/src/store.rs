//! The fenced store the lock protects: it accepts a write whose fence is at least the last one it
//! accepted, and remembers every write it was sent, for the properties.

use crate::bounded::Bounded;
use crate::ids::{Fence, MAX_WRITES};

/// One write the store was sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct StoreWrite {
    /// Which grant the writer holds (its index in grant order).
    pub grant: u8,
    /// The fence it carried.
    pub fence: Fence,
    /// Whether the writer's validity had already ended (a paused holder's late write).
    pub stale: bool,
    /// Whether the store accepted it.
    pub accepted: bool,
}

/// The store: its writes in the order it received them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Store {
    /// Every write sent to it, in order.
    pub writes: Bounded<StoreWrite, MAX_WRITES>,
}

impl Store {
    /// The fence of the last accepted write.
    pub fn last_accepted(&self) -> Option<Fence> {
        self.writes
            .iter()
            .rev()
            .find(|write| write.accepted)
            .map(|write| write.fence)
    }

    /// Receives a write from the holder of grant `grant` with `fence`: accepted iff `fence` is at
    /// least the last accepted fence. Whether it was accepted; `None` if the log is full
    /// ([`MAX_WRITES`]).
    pub fn write(&mut self, grant: u8, fence: Fence, stale: bool) -> Option<bool> {
        let accepted = self.last_accepted().is_none_or(|last| fence >= last);
        self.writes
            .push(StoreWrite {
                grant,
                fence,
                stale,
                accepted,
            })
            .then_some(accepted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_refuses_a_fence_below_the_last_accepted_one() {
        let mut store = Store::default();
        assert_eq!(store.write(0, 2, false), Some(true));
        assert_eq!(store.write(0, 2, false), Some(true));
        assert_eq!(store.write(1, 1, true), Some(false));
        assert_eq!(store.write(2, 3, false), Some(true));
        assert_eq!(store.last_accepted(), Some(3));
    }
}
