//! Configuration: how the lock behaves ([`LockOptions`]), validated once into `Settings` (`settings.rs`) so that no operation can meet a nonsensical
//! value.
//!
//! (About 600 lines: one documented builder method per setting, the validation that relates
//! them, and its tests; splitting the builder from its checks would scatter each setting. What
//! one node is lives apart, in `node_config.rs`.)

use std::time::Duration;

use crate::error::ConfigError;
use crate::key_format::KeyFormat;
use crate::rules::patience::Patience;
use crate::rules::quorum::majority;
use crate::rules::validity::{MAX_TTL, drift};
#[cfg(feature = "tls")]
use crate::settings::ClientCertificate;
use crate::settings::{Fencing, Settings, check_retry, validate_ttl};

/// How a [`Lock`](crate::Lock) behaves. Every setting has a default; see the README's table.
///
/// ```
/// use std::time::Duration;
/// use quorumlock::{LockOptions, Patience};
///
/// let options = LockOptions::new()
///     .ttl(Duration::from_secs(30))
///     .node_timeout(Duration::from_millis(20))
///     .patience(Patience::Once);
/// let lock = quorumlock::Lock::new(["redis://127.0.0.1:6379"], options)?;
/// assert_eq!(lock.ttl(), Duration::from_secs(30));
/// # Ok::<(), quorumlock::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LockOptions {
    ttl: Duration,
    drift_factor: f64,
    quorum: Option<usize>,
    node_timeout: Option<Duration>,
    connect_timeout: Duration,
    /// How `acquire` gets a held lock; unset: it waits up to the TTL.
    patience: Option<Patience>,
    key_prefix: Vec<u8>,
    /// The preset `key_prefix` came from; `None` once a prefix of the caller's own is set.
    key_format: Option<KeyFormat>,
    /// The waiter's re-check bound as the caller set it; unset: the key format's.
    recheck: Option<Duration>,
    tcp_nodelay: bool,
    #[cfg(feature = "tls")]
    tls_root_certificates: Option<Vec<u8>>,
    #[cfg(feature = "tls")]
    tls_client_certificate: Option<ClientCertificate>,
    max_ttl: Option<Duration>,
    restart_guard: bool,
    fencing: bool,
    fence_prefix: Vec<u8>,
    fence_volatile_nodes: bool,
    #[cfg(feature = "chaos-defects")]
    defect: Option<crate::rules::defect::Defect>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl: Duration::from_secs(10),
            drift_factor: 0.01,
            quorum: None,
            node_timeout: None,
            connect_timeout: Duration::from_millis(200),
            patience: None,
            key_prefix: KeyFormat::Quorumlock.prefix().to_vec(),
            key_format: Some(KeyFormat::Quorumlock),
            recheck: None,
            tcp_nodelay: true,
            #[cfg(feature = "tls")]
            tls_root_certificates: None,
            #[cfg(feature = "tls")]
            tls_client_certificate: None,
            max_ttl: None,
            restart_guard: true,
            fencing: false,
            fence_prefix: b"quorumlock-fence:".to_vec(),
            fence_volatile_nodes: false,
            #[cfg(feature = "chaos-defects")]
            defect: None,
        }
    }
}

impl LockOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a lock lives on the nodes unless extended (default 10 s). Between 1 ms and
    /// [`MAX_TTL`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The share of the TTL allowed for clock-rate differences between client and nodes
    /// (default 0.01). A finite number in `[0, 1)`.
    pub fn drift_factor(mut self, drift_factor: f64) -> Self {
        self.drift_factor = drift_factor;
        self
    }

    /// How many nodes must agree (default: a majority, N/2 + 1). Never less than a majority;
    /// read back with [`Lock::quorum_size`](crate::Lock::quorum_size).
    pub fn quorum_size(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// The longest one command may wait for one node's reply (default: the TTL / 10, at most
    /// 50 ms). Small next to the TTL, so that a dead node costs little of the validity.
    pub fn node_timeout(mut self, node_timeout: Duration) -> Self {
        self.node_timeout = Some(node_timeout);
        self
    }

    /// The longest a command waits for a connection to be made (default 200 ms). Connections
    /// are made lazily, in the background, and once per node, never one caller after another.
    pub fn connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// How [`Lock::acquire`](crate::Lock::acquire) and
    /// [`acquire_until`](crate::Lock::acquire_until) get a held lock, unless a
    /// [`Request`](crate::Request) says otherwise. Default: [`Patience::Wait`] for the TTL, the
    /// longest a holder that crashed without releasing can keep the lock, woken by the release
    /// or the keys' expiry.
    ///
    /// A waiter whose attempt failed for want of nodes (not held) tries again after
    /// [`RetryPolicy::default`](crate::RetryPolicy::default)'s pause.
    pub fn patience(mut self, patience: Patience) -> Self {
        self.patience = Some(patience);
        self
    }

    /// Bytes put before every resource name to form the Redis key (default `quorumlock:`).
    /// See [`key_format`](LockOptions::key_format) for the prefixes other Redlock clients use.
    pub fn key_prefix(mut self, key_prefix: impl Into<Vec<u8>>) -> Self {
        self.key_prefix = key_prefix.into();
        self.key_format = None;
        self
    }

    /// Write and contend for lock keys as another Redlock client names them, so that the two
    /// exclude each other on the same nodes (default [`KeyFormat::Quorumlock`]): sets the
    /// [`key_prefix`](LockOptions::key_prefix), and for a peer's format a
    /// [`recheck`](LockOptions::recheck) of 100 ms unless one is set. What is shared with each
    /// peer and what is not (fencing, reentrancy, sets): `docs/interop.md`.
    pub fn key_format(mut self, key_format: KeyFormat) -> Self {
        self.key_prefix = key_format.prefix().to_vec();
        self.key_format = Some(key_format);
        self
    }

    /// The longest a waiter ([`Patience::Wait`]) sleeps before trying again when no wake-up
    /// comes (default: none for this library's own key format, whose every release publishes
    /// a wake-up; 100 ms for another client's, whose releases publish nothing). Without it, a
    /// release that publishes nothing is seen only when the holder's keys expire on a quorum.
    /// Each re-check is one attempt by the first waiter of the resource in this [`Lock`].
    /// Not zero.
    ///
    /// [`Lock`]: crate::Lock
    pub fn recheck(mut self, recheck: Duration) -> Self {
        self.recheck = Some(recheck);
        self
    }

    /// Whether to send each command at once (`TCP_NODELAY`, default true). With Nagle's
    /// algorithm on, a release can wait behind an unanswered request to a slow node; turning it
    /// off again trades latency for throughput under heavy pipelining.
    pub fn tcp_nodelay(mut self, tcp_nodelay: bool) -> Self {
        self.tcp_nodelay = tcp_nodelay;
        self
    }

    /// For `rediss://` nodes: trust these certificate authorities (PEM, one or more) instead of
    /// the bundled public roots, as a private CA or a test needs. Needs the `tls` feature; a PEM
    /// that cannot be parsed is [`ConfigError::InvalidNode`] when the [`Lock`](crate::Lock) is
    /// built.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_certificates = Some(pem.into());
        self
    }

    /// For `rediss://` nodes: present this client certificate (a PEM chain, leaf first) with its
    /// private key (PEM: PKCS#8, PKCS#1 or SEC1), for servers that ask for one
    /// (`tls-auth-clients yes`: mutual TLS). Needs the `tls` feature; a PEM that cannot be
    /// parsed is [`ConfigError::InvalidNode`] when the [`Lock`](crate::Lock) is built, and a
    /// server that refuses the certificate (or wanted one and got none) fails that node's
    /// requests with [`NodeError::Connection`](crate::NodeError::Connection). `Debug` never
    /// shows the key. See `docs/deployment.md`, "Mutual TLS".
    ///
    /// Nodes that bring TLS parameters of their own (a `redis::Client` built with
    /// `build_with_tls`) keep them; setting certificates here too is
    /// [`ConfigError::ConflictingTls`].
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_client_certificate(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls_client_certificate = Some(ClientCertificate {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
        });
        self
    }

    /// The largest TTL any client gives keys on these nodes, extensions included (default: this
    /// lock's [`ttl`](LockOptions::ttl)); at least the TTL, at most [`MAX_TTL`]. The restart
    /// guard keeps a restarted node out of acquisitions for this long plus the drift
    /// allowance, and [`Guard::extend`](crate::Guard::extend) refuses longer TTLs while the
    /// guard is on.
    pub fn max_ttl(mut self, max_ttl: Duration) -> Self {
        self.max_ttl = Some(max_ttl);
        self
    }

    /// The restart guard (default on): a node that (re)started without persisting every write
    /// may have forgotten keys it held, and could grant a lock that another client still holds
    /// there. With the guard on, every (re)connect reads the node's `INFO server` (`run_id`,
    /// `uptime_in_seconds`), `INFO persistence` (`aof_enabled`) and `CONFIG GET appendfsync`
    /// (a user not allowed `CONFIG` counts as "not `always`"), and the node votes in
    /// acquisitions only if it persists every write (AOF on, `appendfsync always`) or has been
    /// up for longer than [`max_ttl`](LockOptions::max_ttl) plus the drift allowance
    /// (`max_ttl × drift_factor + 2 ms`, plus one second for the whole-second uptime). Until
    /// then its acquire vote fails at once with
    /// [`NodeError::Recovering`](crate::NodeError::Recovering), and nothing but an
    /// `INFO keyspace` is sent to it (a restart meanwhile breaks the connection, and the next
    /// attempt reads the new server's countdown). A minority of recovering nodes costs nothing;
    /// a majority makes acquisitions fail with [`Error::Unavailable`](crate::Error::Unavailable),
    /// never grant twice. Extend and release are not held back.
    ///
    /// `restart_guard(false)` turns it off, for deployments that keep a crashed node down for
    /// longer than the largest TTL themselves. **Unsafe otherwise**: a node restarted empty
    /// votes at once and can grant a lock a second time. (The `run_id` is read either way, so
    /// that one server never votes twice.)
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use quorumlock::{Lock, LockOptions};
    ///
    /// // Other clients of these nodes give keys up to 60 s: a restarted node that does not
    /// // persist every write sits out acquisitions for 60 s plus the drift allowance.
    /// let options = LockOptions::new()
    ///     .ttl(Duration::from_secs(10))
    ///     .max_ttl(Duration::from_secs(60));
    /// let lock = Lock::new(["redis://127.0.0.1:6379"], options)?;
    /// assert!(lock.restart_guard_period() > Some(Duration::from_secs(60)));
    /// # Ok::<(), quorumlock::Error>(())
    /// ```
    pub fn restart_guard(mut self, on: bool) -> Self {
        self.restart_guard = on;
        self
    }

    /// Fencing tokens (default off): every acquisition also hands out a fence, a number that
    /// grows strictly from one holder of a resource to the next, read with
    /// [`Guard::fence`](crate::Guard::fence). Give it to the store you protect with every write,
    /// and have the store refuse a fence lower than the highest it has seen: then a holder that
    /// was paused past its validity cannot overwrite a later holder's work. See
    /// `docs/fencing.md` for the protocol and its proof.
    ///
    /// It costs one more round trip per acquisition (the write-back of the fence to a quorum);
    /// extend and release cost the same. Each resource keeps a counter on every node, under
    /// [`fence_prefix`](LockOptions::fence_prefix), which never expires (about 80 bytes per
    /// resource and node); [`Lock::delete_fence_counter`](crate::Lock::delete_fence_counter)
    /// drops it for a retired resource.
    ///
    /// A counter must survive a crash: with fencing on, only nodes that persist every write (AOF
    /// with `appendfsync always`) vote, and any other node's vote fails with
    /// [`NodeError::NotDurable`](crate::NodeError::NotDurable), unless
    /// [`fence_volatile_nodes`](LockOptions::fence_volatile_nodes) allows them.
    ///
    /// # Examples
    ///
    /// ```
    /// use quorumlock::{ConfigError, Error, Lock, LockOptions};
    ///
    /// // Fence counters and lock keys must never share a name.
    /// let overlapping = LockOptions::new().fencing(true).fence_prefix("quorumlock:fence:");
    /// let err = Lock::new(["redis://127.0.0.1:6379"], overlapping).unwrap_err();
    /// assert!(matches!(err, Error::Config(ConfigError::OverlappingPrefixes { .. })));
    /// ```
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// Bytes put before every resource name to form the key of its fence counter (default
    /// `quorumlock-fence:`). With fencing on, neither this nor the
    /// [`key_prefix`](LockOptions::key_prefix) may start with the other, so that no lock key is
    /// ever a counter key.
    pub fn fence_prefix(mut self, fence_prefix: impl Into<Vec<u8>>) -> Self {
        self.fence_prefix = fence_prefix.into();
        self
    }

    /// With fencing on, let nodes that may lose recent writes in a crash (no AOF, or
    /// `appendfsync` other than `always`) vote (default false). Their counters are then trusted
    /// only in the server run that wrote them: a node restarted since takes the key but not the
    /// next fence, and the acquisition recovers the fence from the other nodes' counters (one
    /// more round trip, waiting for a quorum of trusted counters or for every node), or fails
    /// with [`Error::FenceUnrecovered`](crate::Error::FenceUnrecovered). So fences never repeat
    /// as long as a majority of nodes never loses its data at once; the first fenced acquisition
    /// of a resource needs every node to answer. See `docs/fencing.md`, "Volatile nodes: counter
    /// recovery".
    pub fn fence_volatile_nodes(mut self, allow: bool) -> Self {
        self.fence_volatile_nodes = allow;
        self
    }

    /// **Test-only** (feature `chaos-defects`): builds the lock with one deliberate defect in
    /// its decision code, for the chaos tooling's mutation score. Never in production: every
    /// defect breaks a promise of the lock.
    #[cfg(feature = "chaos-defects")]
    #[doc(hidden)]
    pub fn defect(mut self, defect: crate::rules::defect::Defect) -> Self {
        self.defect = Some(defect);
        self
    }

    /// Checks every setting against a node count and resolves the defaults that depend on others.
    pub(crate) fn validate(&self, nodes: usize) -> Result<Settings, ConfigError> {
        if nodes == 0 {
            return Err(ConfigError::NoNodes);
        }
        let quorum = self.quorum.unwrap_or_else(|| majority(nodes));
        if quorum < majority(nodes) || quorum > nodes {
            return Err(ConfigError::InvalidQuorum { quorum, nodes });
        }
        validate_ttl(self.ttl)?;
        if !(self.drift_factor.is_finite() && (0.0..1.0).contains(&self.drift_factor)) {
            return Err(ConfigError::InvalidDriftFactor(self.drift_factor));
        }
        let node_timeout = self
            .node_timeout
            .unwrap_or_else(|| (self.ttl / 10).min(Duration::from_millis(50)));
        if node_timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout {
                name: "node_timeout",
            });
        }
        if self.connect_timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout {
                name: "connect_timeout",
            });
        }
        let recheck = self
            .recheck
            .or_else(|| self.key_format.and_then(KeyFormat::recheck));
        if recheck.is_some_and(|recheck| recheck.is_zero()) {
            return Err(ConfigError::ZeroTimeout { name: "recheck" });
        }
        let patience = self.patience.clone().unwrap_or(Patience::Wait(self.ttl));
        if let Patience::Retry(policy) = &patience {
            check_retry(policy)?;
        }
        let max_ttl = self.max_ttl.unwrap_or(self.ttl);
        if max_ttl < self.ttl || max_ttl > MAX_TTL {
            return Err(ConfigError::InvalidMaxTtl {
                max_ttl,
                ttl: self.ttl,
            });
        }
        // Every key a lost server may have held has expired everywhere this long after.
        let sit_out = max_ttl.saturating_add(drift(max_ttl, self.drift_factor));
        let fencing = if self.fencing {
            if self.key_prefix.starts_with(&self.fence_prefix)
                || self.fence_prefix.starts_with(&self.key_prefix)
            {
                return Err(ConfigError::OverlappingPrefixes {
                    key_prefix: String::from_utf8_lossy(&self.key_prefix).into_owned(),
                    fence_prefix: String::from_utf8_lossy(&self.fence_prefix).into_owned(),
                });
            }
            Some(Fencing {
                volatile_nodes: self.fence_volatile_nodes,
            })
        } else {
            None
        };
        #[cfg(feature = "chaos-defects")]
        let quorum = match self.defect {
            Some(crate::rules::defect::Defect::QuorumHalf) => crate::rules::quorum::half(nodes),
            _ => quorum,
        };
        Ok(Settings {
            tagged_keys: false,
            ttl: self.ttl,
            drift_factor: self.drift_factor,
            quorum,
            node_timeout,
            connect_timeout: self.connect_timeout,
            patience,
            key_prefix: self.key_prefix.clone(),
            recheck,
            tcp_nodelay: self.tcp_nodelay,
            #[cfg(feature = "tls")]
            tls_root_certificates: self.tls_root_certificates.clone(),
            #[cfg(feature = "tls")]
            tls_client_certificate: self.tls_client_certificate.clone(),
            max_ttl,
            restart_guard: self.restart_guard.then_some(sit_out),
            replaced_sit_out: sit_out,
            fence_prefix: self.fence_prefix.clone(),
            fencing,
            #[cfg(feature = "chaos-defects")]
            defect: self.defect,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::retry::RetryPolicy;

    #[test]
    fn acquire_waits_for_the_ttl_by_default() {
        let ttl = Duration::from_secs(7);
        let patience = |options: LockOptions| options.ttl(ttl).validate(1).unwrap().patience;
        assert_eq!(patience(LockOptions::new()), Patience::Wait(ttl));
        assert_eq!(
            patience(LockOptions::new().patience(Patience::Once)),
            Patience::Once
        );
    }

    #[test]
    fn zero_attempts_is_a_configuration_error() {
        assert_eq!(
            check_retry(&RetryPolicy::new().attempts(0)),
            Err(ConfigError::ZeroAttempts)
        );
        assert_eq!(
            LockOptions::new()
                .patience(Patience::Retry(RetryPolicy::new().attempts(0)))
                .validate(1)
                .unwrap_err(),
            ConfigError::ZeroAttempts
        );
    }

    #[test]
    fn a_peers_key_format_rechecks_unless_told_otherwise() {
        let recheck = |options: LockOptions| options.validate(3).map(|s| s.recheck);
        let ms = Duration::from_millis;
        assert_eq!(recheck(LockOptions::new()), Ok(None));
        let pottery = LockOptions::new().key_format(KeyFormat::Pottery);
        assert_eq!(pottery.validate(3).unwrap().key_prefix, b"redlock:");
        assert_eq!(recheck(pottery.clone()), Ok(Some(ms(100))));
        assert_eq!(recheck(pottery.clone().recheck(ms(5))), Ok(Some(ms(5))));
        assert_eq!(recheck(LockOptions::new().recheck(ms(5))), Ok(Some(ms(5))));
        // A prefix of the caller's own is not a peer's format.
        assert_eq!(recheck(pottery.key_prefix("app:")), Ok(None));
        assert_eq!(
            recheck(LockOptions::new().recheck(Duration::ZERO)),
            Err(ConfigError::ZeroTimeout { name: "recheck" })
        );
    }

    #[test]
    fn defaults_are_valid_for_any_node_count() {
        for nodes in 1..=9 {
            let s = LockOptions::default().validate(nodes).unwrap();
            assert_eq!(s.quorum, nodes / 2 + 1);
            assert_eq!(s.node_timeout, Duration::from_millis(50));
        }
    }

    #[test]
    fn short_ttls_get_proportionally_short_node_timeouts() {
        let s = LockOptions::new()
            .ttl(Duration::from_millis(100))
            .validate(5)
            .unwrap();
        assert_eq!(s.node_timeout, Duration::from_millis(10));
    }

    #[test]
    fn bad_settings_are_named() {
        let o = LockOptions::new();
        assert_eq!(o.validate(0).unwrap_err(), ConfigError::NoNodes);
        assert_eq!(
            o.clone().quorum_size(2).validate(5).unwrap_err(),
            ConfigError::InvalidQuorum {
                quorum: 2,
                nodes: 5
            }
        );
        assert_eq!(
            o.clone().quorum_size(6).validate(5).unwrap_err(),
            ConfigError::InvalidQuorum {
                quorum: 6,
                nodes: 5
            }
        );
        assert_eq!(
            o.clone().ttl(Duration::ZERO).validate(5).unwrap_err(),
            ConfigError::InvalidTtl(Duration::ZERO)
        );
        assert_eq!(
            o.clone().ttl(Duration::MAX).validate(5).unwrap_err(),
            ConfigError::InvalidTtl(Duration::MAX)
        );
        for factor in [-0.1, 1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                o.clone().drift_factor(factor).validate(5),
                Err(ConfigError::InvalidDriftFactor(_))
            ));
        }
        assert_eq!(
            o.clone()
                .node_timeout(Duration::ZERO)
                .validate(5)
                .unwrap_err(),
            ConfigError::ZeroTimeout {
                name: "node_timeout"
            }
        );
        assert_eq!(
            o.clone()
                .patience(Patience::Retry(RetryPolicy::new().attempts(0)))
                .validate(5)
                .unwrap_err(),
            ConfigError::ZeroAttempts
        );
    }

    #[test]
    fn the_restart_guard_covers_the_largest_ttl_and_its_drift() {
        let s = LockOptions::new().validate(5).unwrap();
        assert_eq!(s.max_ttl, Duration::from_secs(10));
        assert_eq!(s.restart_guard, Some(Duration::from_millis(10_102)));
        let s = LockOptions::new()
            .ttl(Duration::from_secs(1))
            .max_ttl(Duration::from_secs(30))
            .validate(5)
            .unwrap();
        assert_eq!(s.restart_guard, Some(Duration::from_millis(30_302)));
        assert_eq!(s.check_guarded_ttl(Duration::from_secs(30)), Ok(()));
        assert_eq!(
            s.check_guarded_ttl(Duration::from_secs(31)),
            Err(ConfigError::TtlAboveMaxTtl {
                ttl: Duration::from_secs(31),
                max_ttl: Duration::from_secs(30)
            })
        );
        let off = LockOptions::new().restart_guard(false).validate(5).unwrap();
        assert_eq!(off.restart_guard, None);
        assert_eq!(off.check_guarded_ttl(Duration::from_secs(3600)), Ok(()));
        for max_ttl in [Duration::from_secs(9), MAX_TTL + Duration::from_millis(1)] {
            assert_eq!(
                LockOptions::new().max_ttl(max_ttl).validate(5).unwrap_err(),
                ConfigError::InvalidMaxTtl {
                    max_ttl,
                    ttl: Duration::from_secs(10)
                }
            );
        }
        // The largest allowed guard is representable.
        let s = LockOptions::new().max_ttl(MAX_TTL).validate(5).unwrap();
        assert!(s.restart_guard.unwrap() > MAX_TTL);
    }

    #[test]
    fn the_largest_ttl_fits_in_redis_milliseconds() {
        validate_ttl(MAX_TTL).unwrap();
        assert!(crate::rules::validity::whole_millis(MAX_TTL) <= i64::MAX as u64 / 2);
    }
}
