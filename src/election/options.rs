//! [`ElectionOptions`]: an election's timing, named as the Kubernetes lease elector names it.

use std::time::Duration;

use crate::error::ConfigError;

/// An election's timing, under the names (and with the defaults) of the Kubernetes lease
/// elector, each mapped onto this library's lock:
///
/// | setting | default | here |
/// |---|---|---|
/// | `lease_duration` | 15 s | the TTL of the leader's lock key: how long followers wait for a leader that vanished without resigning |
/// | `renew_deadline` | 10 s | the leader gives up (its lost signal fires, its work is cancelled) once this long has passed since its last successful renewal began, less the clock drift |
/// | `retry_period` | 2 s | the leader renews every this long; an observer that heard no message re-reads the leader at least this often |
///
/// Candidates do not retry on a timer: they wait woken by the leader's release and by its key's
/// expiry on a quorum ([`Patience::Wait`](crate::Patience::Wait)).
///
/// ```
/// use std::time::Duration;
/// use quorumlock::ElectionOptions;
///
/// let options = ElectionOptions::new()
///     .lease_duration(Duration::from_secs(6))
///     .renew_deadline(Duration::from_secs(4))
///     .retry_period(Duration::from_secs(1));
/// # let _ = options;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionOptions {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
}

impl Default for ElectionOptions {
    fn default() -> ElectionOptions {
        ElectionOptions {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl ElectionOptions {
    /// The defaults: 15 s, 10 s, 2 s.
    pub fn new() -> ElectionOptions {
        ElectionOptions::default()
    }

    /// The TTL of the leader's key (default 15 s).
    pub fn lease_duration(mut self, lease_duration: Duration) -> ElectionOptions {
        self.lease_duration = lease_duration;
        self
    }

    /// How long after its last successful renewal a leader keeps leading (default 10 s);
    /// less than the lease duration.
    pub fn renew_deadline(mut self, renew_deadline: Duration) -> ElectionOptions {
        self.renew_deadline = renew_deadline;
        self
    }

    /// How often the leader renews, and the longest an observer goes without reading the
    /// leader again (default 2 s); greater than zero and less than the renew deadline.
    pub fn retry_period(mut self, retry_period: Duration) -> ElectionOptions {
        self.retry_period = retry_period;
        self
    }

    /// `retry_period < renew_deadline < lease_duration`, none of them zero.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let invalid = |reason| {
            Err(ConfigError::InvalidElection {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
                reason,
            })
        };
        if self.retry_period.is_zero() {
            return invalid("the retry period is zero");
        }
        if self.renew_deadline <= self.retry_period {
            return invalid("the renew deadline must be longer than the retry period");
        }
        if self.lease_duration <= self.renew_deadline {
            return invalid("the lease duration must be longer than the renew deadline");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_kubernetes_elector_s_and_valid() {
        let options = ElectionOptions::new();
        assert_eq!(options.lease_duration, Duration::from_secs(15));
        assert_eq!(options.renew_deadline, Duration::from_secs(10));
        assert_eq!(options.retry_period, Duration::from_secs(2));
        assert!(options.check().is_ok());
    }

    #[test]
    fn out_of_order_settings_are_refused() {
        let s = Duration::from_secs;
        let refused = |options: ElectionOptions| {
            matches!(options.check(), Err(ConfigError::InvalidElection { .. }))
        };
        assert!(refused(ElectionOptions::new().retry_period(Duration::ZERO)));
        assert!(refused(ElectionOptions::new().retry_period(s(10))));
        assert!(refused(ElectionOptions::new().renew_deadline(s(15))));
        assert!(refused(ElectionOptions::new().lease_duration(s(3))));
    }
}
