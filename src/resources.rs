//! Locks over several resources at once: [`Resources`], a checked set of resource names, and
//! [`Lock::acquire_all`], one acquisition that takes all of them or none. On each node one
//! script sets every key of the set or none (`node/set.rs`), and a node votes yes only if it set
//! all of them; the quorum, validity, release and fencing rules are those of one resource, and
//! one [`Guard`] extends and releases the whole set.

use std::fmt;
use std::future::{Future, pending};

use crate::acquisition::Acquisition;
use crate::error::{ConfigError, Error};
use crate::guard::Guard;
use crate::lock::Lock;
use crate::rules::resources::{Keys, MAX_RESOURCES, SetDefect, canonical_set};
use crate::rules::retry::RetryPolicy;
use crate::rules::slots::key_slot;
use crate::settings::{Settings, check_retry, validate_ttl};
use crate::waiting::AcquireOptions;

/// A set of resources to lock together with [`Lock::acquire_all`]: not empty, each name once,
/// at most [`MAX_RESOURCES`]. The order the names are given in does not matter: a set is kept
/// sorted, so two callers naming the same resources in different orders take the same set, and
/// contend for it like for one resource (never each holding half of it waiting for the other).
///
/// ```
/// use quorumlock::{ConfigError, Resources};
///
/// let set = Resources::new(["account:9", "account:7"])?;
/// assert_eq!(set.iter().collect::<Vec<_>>(), [&b"account:7"[..], &b"account:9"[..]]);
/// assert_eq!(
///     Resources::new(["account:7", "account:7"]).unwrap_err(),
///     ConfigError::DuplicateResource { resource: b"account:7".to_vec() },
/// );
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Resources {
    names: Vec<Vec<u8>>,
}

impl Resources {
    /// The set of `resources`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::EmptySet`] for no resource, [`ConfigError::EmptyResource`] for an empty
    /// name, [`ConfigError::DuplicateResource`] for a name given twice,
    /// [`ConfigError::TooManyResources`] for more than [`MAX_RESOURCES`].
    pub fn new<I, R>(resources: I) -> Result<Resources, ConfigError>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let names = resources
            .into_iter()
            .map(|name| name.as_ref().to_vec())
            .collect();
        match canonical_set(names) {
            Ok(names) => Ok(Resources { names }),
            Err(SetDefect::Empty) => Err(ConfigError::EmptySet),
            Err(SetDefect::EmptyName) => Err(ConfigError::EmptyResource),
            Err(SetDefect::Duplicate(resource)) => Err(ConfigError::DuplicateResource { resource }),
            Err(SetDefect::TooMany(count)) => Err(ConfigError::TooManyResources {
                count,
                max: MAX_RESOURCES,
            }),
        }
    }

    /// The resources, in the set's order (sorted bytewise), which reports follow.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.names.iter().map(Vec::as_slice)
    }

    /// How many resources the set holds (at least one).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always false: a set holds at least one resource.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The set's lock keys. A set of one is one key, taken with the single-key commands. On a
    /// lock with a cluster node every key must be in the first one's slot
    /// ([`ConfigError::CrossSlotSet`]): a node takes a set in one script.
    fn keys(&self, settings: &Settings) -> Result<Keys, ConfigError> {
        let keys = self
            .names
            .iter()
            .map(|name| settings.lock_key(name))
            .collect::<Result<Vec<_>, _>>()?;
        if settings.tagged_keys {
            let slot = keys.first().map(|key| key_slot(key));
            let other = keys.iter().position(|key| Some(key_slot(key)) != slot);
            if let Some(other) = other.and_then(|other| self.names.get(other)) {
                return Err(ConfigError::CrossSlotSet {
                    first: self.first().to_vec(),
                    other: other.clone(),
                });
            }
        }
        Ok(match <[_; 1]>::try_from(keys) {
            Ok([key]) => Keys::One(key),
            Err(keys) => Keys::Set(keys.into()),
        })
    }

    /// The first resource, which stands for the set where one name is wanted (`Error::Held`).
    fn first(&self) -> &[u8] {
        self.names.first().map(Vec::as_slice).unwrap_or_default()
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.names.iter().map(|name| String::from_utf8_lossy(name)))
            .finish()
    }
}

impl Lock {
    /// Acquires every resource of `resources` at once, or none: one round to every node, each of
    /// which takes the whole set in one atomic step or nothing of it, and votes yes only if it
    /// took all of it. The quorum and validity rules are those of one resource, and the one
    /// [`Guard`] it returns extends and releases the whole set ([`Guard::resources`],
    /// [`ReleaseReport::set_outcomes`](crate::ReleaseReport::set_outcomes)).
    ///
    /// A set is not queued behind other waiters: a held set is tried again on the lock's retry
    /// policy ([`LockOptions::retry`](crate::LockOptions::retry); by default three attempts
    /// 100–200 ms apart), as [`acquire_with`](Lock::acquire_with) does. With fencing, the set
    /// gets one fence, larger than the last fence of each of its resources (`docs/fencing.md`).
    /// [`acquire_all_with_options`](Lock::acquire_all_with_options) gives one set its own TTL,
    /// wait and owner.
    ///
    /// # Errors
    ///
    /// Those of [`acquire_with`](Lock::acquire_with); [`Error::Held`] names the set's first
    /// resource.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use quorumlock::Resources;
    ///
    /// // Move money between two accounts: both locked, or neither.
    /// let accounts = Resources::new(["account:7", "account:9"])?;
    /// let guard = lock.acquire_all(&accounts).await?;
    /// // … debit one, credit the other, while guard.is_valid() …
    /// guard.release().await;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_all(&self, resources: &Resources) -> Result<Guard, Error> {
        self.acquire_all_with_options(resources, &AcquireOptions::new())
            .await
    }

    /// [`acquire_all`](Lock::acquire_all) as `options` say: with their TTL; with their wait, the
    /// set is tried again on the lock's retry pause until that wait has passed (a set polls: it
    /// is not queued); with their owner, re-entrant as one resource is ([`AcquireOptions::owner`]:
    /// the owner's later acquisition of the same set joins its hold).
    ///
    /// # Errors
    ///
    /// Those of [`acquire_all`](Lock::acquire_all), and [`Error::Config`] for a TTL Redis
    /// cannot store or, with the restart guard on, above `max_ttl`, before anything is sent.
    pub async fn acquire_all_with_options(
        &self,
        resources: &Resources,
        options: &AcquireOptions,
    ) -> Result<Guard, Error> {
        let settings = &self.node_set().settings;
        let ttl = options.ttl.unwrap_or(settings.ttl);
        validate_ttl(ttl)?;
        settings.check_guarded_ttl(ttl)?;
        let keys = resources.keys(settings)?;
        if let Some(guard) = self.reenter(options.owner, keys.clone()) {
            return Ok(guard);
        }
        let policy = match options.wait {
            Some(wait) => settings.retry.clone().attempts(u32::MAX).max_wait(wait),
            None => settings.retry.clone(),
        };
        Acquisition::new(self.node_set(), resources.first(), keys, ttl)
            .for_owner(self.owned_by(options.owner))
            .run(&policy, pending())
            .await
    }

    /// [`acquire_all`](Lock::acquire_all) with one attempt: [`Error::Held`] at once if
    /// someone else holds any resource of the set on too many nodes.
    ///
    /// # Errors
    ///
    /// Those of [`acquire_all`](Lock::acquire_all).
    pub async fn try_acquire_all(&self, resources: &Resources) -> Result<Guard, Error> {
        self.acquire_all_with(resources, &RetryPolicy::once(), pending())
            .await
    }

    /// [`acquire_all`](Lock::acquire_all) with an explicit retry policy and cancel signal, as
    /// [`acquire_with`](Lock::acquire_with) for one resource.
    ///
    /// # Errors
    ///
    /// Those of [`acquire_with`](Lock::acquire_with).
    pub async fn acquire_all_with(
        &self,
        resources: &Resources,
        policy: &RetryPolicy,
        cancel: impl Future<Output = ()>,
    ) -> Result<Guard, Error> {
        check_retry(policy)?;
        let settings = &self.node_set().settings;
        let keys = resources.keys(settings)?;
        Acquisition::new(self.node_set(), resources.first(), keys, settings.ttl)
            .run(policy, cancel)
            .await
    }
}
