//! The clients of [`Scenario::Sets`](crate::Scenario::Sets): each takes two neighbouring
//! resources as one set ([`Lock::try_acquire`] of a set: client `i` the resources `i` and `i + 1`,
//! round the ring), so every set overlaps two others, and writes to both under the set's
//! validity, then releases or lets the keys expire. A set's hold is recorded as one hold per
//! resource with the set's token and window, so the checker's per-resource overlap check sees
//! two sets sharing a resource exactly as it sees two single holds of it.

use std::time::{Duration, Instant};

use quorumlock::{Lock, Resources};

use super::{Client, Credentials, MAX_ATTEMPTS_PER_CLIENT, random_between};

impl Client {
    /// The set of the client's resource and the next one (the one resource if there is no
    /// other), by index into the plan's resources.
    fn set_indexes(&self) -> Vec<usize> {
        let count = self.plan.resources.len();
        let next = (self.index + 1) % count.max(1);
        if next == self.index {
            vec![self.index]
        } else {
            vec![self.index, next]
        }
    }

    /// Takes the client's set (one round), writes to each of its resources under the set's
    /// validity, releases it (or, a quarter of the holds, lets its keys expire); until the
    /// deadline.
    pub(in crate::run) async fn take_sets(mut self, lock: Lock) {
        let indexes = self.set_indexes();
        let names: Vec<String> = indexes
            .iter()
            .filter_map(|&index| self.plan.resources.get(index).cloned())
            .collect();
        let Ok(set) = Resources::new(&names) else {
            return;
        };
        let label = names.join("+");
        let ms = Duration::from_millis;
        for _ in 0..MAX_ATTEMPTS_PER_CLIENT {
            if Instant::now() >= self.plan.deadline {
                break;
            }
            let Some((guard, started)) = self.try_once(&lock, &set, &label).await else {
                continue;
            };
            let credentials = Credentials::of(&guard);
            let valid_until = guard.valid_until();
            let holds = self.begin_holds(&names, &guard, &credentials, (started, valid_until));
            let mut expire = rand::random_range(0..4u8) == 0;
            for &index in &indexes {
                if Instant::now() >= valid_until {
                    break;
                }
                if self
                    .write_to(index, &credentials, valid_until)
                    .await
                    .ends_hold()
                    == Some(super::End::Expire)
                {
                    expire = true;
                    break;
                }
            }
            self.plan.end_holds(guard, holds, expire).await;
            tokio::time::sleep(random_between(Duration::ZERO, ms(20))).await;
        }
        lock.settle().await;
    }

    /// One protected write to the plan's resource `index` (one of the client's set, or of the
    /// slots its permits hold), given up at `deadline`: the client writes as if that resource
    /// were its own for the one write.
    pub(super) async fn write_to(
        &mut self,
        index: usize,
        credentials: &Credentials,
        deadline: Instant,
    ) -> super::Written {
        let Some(resource) = self.plan.resources.get(index).cloned() else {
            return super::Written::Settled;
        };
        let own = (
            std::mem::replace(&mut self.resource, resource),
            std::mem::replace(&mut self.index, index),
        );
        let written = self.write(credentials, deadline).await;
        (self.resource, self.index) = own;
        written
    }
}
