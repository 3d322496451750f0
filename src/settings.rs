//! [`Settings`]: the lock's options once validated, every default resolved, and the checks the
//! lock repeats per call (a TTL Redis can store, a retry policy that tries, an extension the
//! restart guard covers).

use std::sync::Arc;
use std::time::Duration;

use crate::error::ConfigError;
use crate::rules::clock::Moment;
use crate::rules::patience::Patience;
use crate::rules::retry::RetryPolicy;
use crate::rules::slots::{prefix_keeps_tag, resource_has_tag, tagged};
use crate::rules::token::lock_key;
use crate::rules::validity::{MAX_TTL, drift, validity};

/// Rejects a retry policy that would never try.
pub(crate) fn check_retry(policy: &RetryPolicy) -> Result<(), ConfigError> {
    if policy.max_attempts() == 0 {
        return Err(ConfigError::ZeroAttempts);
    }
    Ok(())
}

/// Rejects a TTL Redis cannot represent: under 1 ms, or beyond [`MAX_TTL`].
pub(crate) fn validate_ttl(ttl: Duration) -> Result<(), ConfigError> {
    if ttl < Duration::from_millis(1) || ttl > MAX_TTL {
        return Err(ConfigError::InvalidTtl(ttl));
    }
    Ok(())
}

/// Validated options with every default resolved.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) ttl: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) quorum: usize,
    pub(crate) node_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    /// How `acquire` gets a held lock unless a request says otherwise.
    pub(crate) patience: Patience,
    pub(crate) key_prefix: Vec<u8>,
    /// The longest a waiter sleeps without a wake-up before it tries again (`None`: until the
    /// holder's keys expire on a quorum).
    pub(crate) recheck: Option<Duration>,
    pub(crate) tcp_nodelay: bool,
    /// Certificate authorities for `rediss://` nodes (PEM), instead of the public roots.
    #[cfg(feature = "tls")]
    pub(crate) tls_root_certificates: Option<Vec<u8>>,
    /// The certificate `rediss://` nodes are shown (mutual TLS).
    #[cfg(feature = "tls")]
    pub(crate) tls_client_certificate: Option<ClientCertificate>,
    /// The largest TTL in use, extensions included.
    pub(crate) max_ttl: Duration,
    /// With the restart guard on, how long a node that may have lost writes stays out of
    /// acquisitions after it started: `max_ttl` plus its drift.
    pub(crate) restart_guard: Option<Duration>,
    /// How long a server that replaced the one the lock knew at a node's address sits out:
    /// `max_ttl` plus its drift, with the restart guard on or off.
    pub(crate) replaced_sit_out: Duration,
    /// Prefix of the fence counters' keys (used by `delete_fence_counter` even with fencing off).
    pub(crate) fence_prefix: Vec<u8>,
    /// Fencing, when on.
    pub(crate) fencing: Option<Fencing>,
    /// A node is a Redis Cluster: every key holds its resource's name as its hash tag.
    pub(crate) tagged_keys: bool,
    /// The deliberate defect this lock was built with (test-only, see `defect.rs`).
    #[cfg(feature = "chaos-defects")]
    pub(crate) defect: Option<crate::rules::defect::Defect>,
}

/// A client certificate chain and its private key, both PEM, for mutual TLS. `Debug` never shows
/// the key.
#[cfg(feature = "tls")]
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ClientCertificate {
    pub(crate) cert_pem: Vec<u8>,
    pub(crate) key_pem: Vec<u8>,
}

#[cfg(feature = "tls")]
impl std::fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertificate")
            .field("cert_pem", &String::from_utf8_lossy(&self.cert_pem))
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

#[cfg(feature = "tls")]
impl Settings {
    /// What a TLS node is given from the options, if they set anything: the certificate
    /// authorities to trust and the certificate to present.
    pub(crate) fn tls_certificates(&self) -> Option<redis::TlsCertificates> {
        if self.tls_root_certificates.is_none() && self.tls_client_certificate.is_none() {
            return None;
        }
        Some(redis::TlsCertificates {
            client_tls: self.tls_client_certificate.as_ref().map(|certificate| {
                redis::ClientTlsConfig {
                    client_cert: certificate.cert_pem.clone(),
                    client_key: certificate.key_pem.clone(),
                }
            }),
            root_cert: self.tls_root_certificates.clone(),
        })
    }
}

/// Fencing settings, when fencing is on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fencing {
    /// Whether nodes that may lose recent writes vote anyway.
    pub(crate) volatile_nodes: bool,
}

impl Settings {
    /// Whether fence counters are trusted only in the server run that wrote them: fencing on
    /// nodes that may lose recent writes (`node/counter.rs`).
    pub(crate) fn volatile_counters(&self) -> bool {
        self.fencing.is_some_and(|fencing| fencing.volatile_nodes)
    }

    /// The lock key of `resource` (not empty): the key prefix and the name, on a lock with a
    /// cluster node the name in braces, its hash tag (`rules/slots.rs`).
    pub(crate) fn lock_key(&self, resource: &[u8]) -> Result<Arc<[u8]>, ConfigError> {
        self.key_under(&self.key_prefix, resource)
    }

    /// The fence counter's key of `resource`, as [`lock_key`](Settings::lock_key) under the
    /// fence prefix: on a cluster node in the lock key's slot.
    pub(crate) fn fence_key(&self, resource: &[u8]) -> Result<Arc<[u8]>, ConfigError> {
        self.key_under(&self.fence_prefix, resource)
    }

    /// Every key from now on holds its resource's name as its hash tag (a node is a Redis
    /// Cluster), if neither prefix holds a `{` that would open the tag early.
    pub(crate) fn tag_keys(&mut self) -> Result<(), ConfigError> {
        for (which, prefix) in [
            ("key_prefix", &self.key_prefix),
            ("fence_prefix", &self.fence_prefix),
        ] {
            if !prefix_keeps_tag(prefix) {
                return Err(ConfigError::BraceInPrefix {
                    which,
                    prefix: String::from_utf8_lossy(prefix).into_owned(),
                });
            }
        }
        self.tagged_keys = true;
        Ok(())
    }

    fn key_under(&self, prefix: &[u8], resource: &[u8]) -> Result<Arc<[u8]>, ConfigError> {
        if !self.tagged_keys {
            return Ok(lock_key(prefix, resource));
        }
        if !resource_has_tag(resource) {
            return Err(ConfigError::NoHashTag {
                resource: resource.to_vec(),
            });
        }
        Ok(lock_key(prefix, &tagged(resource)))
    }

    /// How long a lease of `ttl` granted after `elapsed` may be trusted: `ttl − elapsed −
    /// drift`; `None` when nothing is left.
    pub(crate) fn validity(&self, ttl: Duration, elapsed: Duration) -> Option<Duration> {
        let drift = drift(ttl, self.drift_factor);
        #[cfg(feature = "chaos-defects")]
        if let Some(defect) = self.defect {
            return crate::rules::validity::validity_with_defect(defect, ttl, elapsed, drift);
        }
        validity(ttl, elapsed, drift)
    }

    /// Until when an extension of `ttl` sent at `started` and decided at `decided` is valid:
    /// `decided` + [`validity`](Settings::validity) of the round trip; `None` when nothing is
    /// left. The one rule for every extension, a guard's own and a batch's.
    pub(crate) fn extended_until(
        &self,
        ttl: Duration,
        started: Moment,
        decided: Moment,
    ) -> Option<Moment> {
        let left = self.validity(ttl, decided.saturating_duration_since(started))?;
        Some(decided.saturating_add(left))
    }

    /// How many nodes must confirm an extension: the quorum (with the test-only
    /// `extend-minority` defect, one).
    pub(crate) fn extend_quorum(&self) -> usize {
        #[cfg(feature = "chaos-defects")]
        if self.defect == Some(crate::rules::defect::Defect::ExtendMinority) {
            return 1;
        }
        self.quorum
    }

    /// Rejects a TTL (of an extension, or given to one acquisition) that the restart guard would
    /// not cover: above `max_ttl`.
    pub(crate) fn check_guarded_ttl(&self, ttl: Duration) -> Result<(), ConfigError> {
        if self.restart_guard.is_some() && ttl > self.max_ttl {
            return Err(ConfigError::TtlAboveMaxTtl {
                ttl,
                max_ttl: self.max_ttl,
            });
        }
        Ok(())
    }
}
