//! What one acquisition asks for: [`Request`] (one resource, a set, or a permit of a semaphore,
//! and where they differ from the lock's options its TTL, its [`Patience`] and its owner), and the one place that checks a
//! request against the lock's settings before anything is sent (`Prepared`).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ConfigError, Error};
use crate::owner::Owner;
use crate::resources::Resources;
use crate::rules::leader::Publication;
use crate::rules::patience::Patience;
use crate::rules::resources::{Keys, MAX_RESOURCES};
#[cfg(test)]
use crate::rules::retry::RetryPolicy;
use crate::rules::rwlock::{RwKeys, Side};
use crate::semaphore::Slot;
use crate::settings::{Settings, check_retry, validate_ttl};

/// One acquisition: what to lock and, where they differ from the lock's options, for how long,
/// how patiently, and for whom. A resource name (`&str`, `String`, bytes) and a
/// [`Resources`] set convert into it, so `lock.acquire("r")` and `lock.acquire(&set)` need no
/// request at all; the setters take it from there.
///
/// ```no_run
/// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
/// use quorumlock::{Owner, Patience, Request, Resources};
///
/// // This job's lock lives 2 minutes; wait up to 10 s for whoever holds it now.
/// let request = Request::from("reindex")
///     .ttl(Duration::from_secs(120))
///     .patience(Patience::Wait(Duration::from_secs(10)));
/// let guard = lock.acquire(request).await?;
/// assert_eq!(guard.ttl(), Duration::from_secs(120));
/// guard.release().await;
///
/// // Two accounts at once, reentrant for this owner.
/// let owner = Owner::new();
/// let accounts = Resources::new(["account:7", "account:9"])?;
/// let guard = lock.acquire(Request::from(&accounts).owner(owner)).await?;
/// guard.release().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Request<'a> {
    target: Target<'a>,
    ttl: Option<Duration>,
    patience: Option<Patience>,
    owner: Option<Owner>,
    permits: Option<u32>,
    take: Option<u32>,
    side: Option<Side>,
    /// An election's candidate's record, written with each grant.
    publication: Option<Publication>,
}

/// What a request locks.
#[derive(Debug, Clone)]
enum Target<'a> {
    One(Cow<'a, [u8]>),
    Set(Cow<'a, Resources>),
}

impl<'a> Request<'a> {
    fn of(target: Target<'a>) -> Self {
        Request {
            target,
            ttl: None,
            patience: None,
            owner: None,
            permits: None,
            take: None,
            side: None,
            publication: None,
        }
    }

    /// The TTL of this acquisition (default: the lock's), which a keep-alive also extends by.
    /// Between 1 ms and [`MAX_TTL`](crate::MAX_TTL), and with the restart guard on at most the
    /// lock's [`max_ttl`](crate::LockOptions::max_ttl), which is what the guard covers.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// How this acquisition gets a held lock (default: the lock's
    /// [`patience`](crate::LockOptions::patience)). [`Lock::try_acquire`](crate::Lock::try_acquire)
    /// makes one attempt whatever this says.
    pub fn patience(mut self, patience: Patience) -> Self {
        self.patience = Some(patience);
        self
    }

    /// Acquire for `owner` (default: no owner, not reentrant). If `owner` already holds the same
    /// resources through this lock (or a clone of it), with validity left, the call returns at
    /// once with another guard of that hold: nothing is sent, and this request's TTL and
    /// patience do not apply. The lock is released when the last of the owner's guards is; see
    /// [`Owner`].
    ///
    /// Re-entry is checked when the call begins and, while it waits, each time it is the next
    /// in line: a task of the owner that waits behind another task of the same owner joins its
    /// hold as soon as that one has it.
    pub fn owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// One of `permits` permits of the semaphore this request names: up to `permits` holders at
    /// once, each holding a slot (`name:0` … `name:{permits-1}`, each a lock of its own won by
    /// the quorum rule). The guard is a slot's, with everything a guard has: its
    /// [`resource`](crate::Guard::resource) is the slot, it can be extended and kept alive, with
    /// fencing it carries the slot's fence. Waiting is woken by the release or expiry of any
    /// slot. Every client of one semaphore must give the same `permits`: slots are not counted,
    /// so clients that say 2 and 4 let 4 hold at once.
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use quorumlock::Request;
    ///
    /// // At most 4 workers call the partner's API at once.
    /// let permit = lock.acquire(Request::from("partner-api").permits(4)).await?;
    /// println!("calling as {}", String::from_utf8_lossy(permit.resource()));
    /// permit.release().await;
    /// # Ok(()) }
    /// ```
    ///
    /// Checked when the request is made into keys: 0, more than
    /// [`MAX_PERMITS`](crate::MAX_PERMITS), or a set of resources is a
    /// [`ConfigError`](crate::ConfigError).
    pub fn permits(mut self, permits: u32) -> Self {
        self.permits = Some(permits);
        self
    }

    /// Take `take` of the semaphore's [`permits`](Request::permits) at once (default 1): all of
    /// them or none. Each acquisition takes `take` slots as one set of resources, on every
    /// node in one atomic step, won by the quorum rule, so two callers that each need two of
    /// three permits never hold one each and wait for ever. A first attempt tries `take` slots
    /// from a random one onwards; refused, it reads which slots are free on a quorum and tries
    /// `take` of those. The guard holds them all: [`resources`](crate::Guard::resources) lists
    /// the slots, it extends, keeps alive and releases them together, and with fencing carries
    /// the highest of their fences.
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use quorumlock::Request;
    ///
    /// // A bulk export counts as three of the partner's eight calls.
    /// let permits = lock.acquire(Request::from("partner-api").permits(8).take(3)).await?;
    /// assert_eq!(permits.resources().count(), 3);
    /// permits.release().await;
    /// # Ok(()) }
    /// ```
    ///
    /// A waiter for several permits is not served before callers that need fewer: with no
    /// reservation across processes, single permits freed one by one may keep going to others.
    ///
    /// Checked when the request is made into keys ([`ConfigError::InvalidTake`](crate::ConfigError::InvalidTake)):
    /// 0, more than the permits or than [`MAX_RESOURCES`](crate::MAX_RESOURCES), a request
    /// without permits, and more than one permit with an [`owner`](Request::owner) or on a
    /// lock with a cluster member.
    pub fn take(mut self, take: u32) -> Self {
        self.take = Some(take);
        self
    }

    /// The shared side of the read-write lock this request names: any number of readers hold
    /// it at once, and none while a writer holds it or waits for it. Each reader has a key of
    /// its own on every node, with its own expiry, so one reader's crash frees only its share.
    /// The guard is a reader's, with everything a guard has but a fence: it can be extended and
    /// kept alive, and its release wakes the lock's waiters. See [`write`](Request::write).
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use quorumlock::Request;
    ///
    /// let reading = lock.acquire(Request::from("catalog").read()).await?;
    /// // … read while reading.is_valid(); other readers may too, no writer can …
    /// reading.release().await;
    /// # Ok(()) }
    /// ```
    ///
    /// A read-write lock is one resource, without [`permits`](Request::permits) or an
    /// [`owner`](Request::owner) ([`ConfigError::SideWith`](crate::ConfigError::SideWith)).
    pub fn read(mut self) -> Self {
        self.side = Some(Side::Read);
        self
    }

    /// The exclusive side of the read-write lock this request names: refused on a node where
    /// another writer holds it or a reader does. A writer that readers keep out leaves a mark
    /// on those nodes, for as long as the longest of their readers has left, that refuses new
    /// readers, so a steady stream of readers cannot starve it (writer preference). Its key is
    /// the resource's lock key: a writer and a plain [`Lock`](crate::Lock) acquisition of the
    /// same name exclude each other, and with fencing the write guard carries the resource's
    /// fence. [`Guard::downgrade`](crate::Guard::downgrade) turns it into a read guard with no
    /// gap.
    ///
    /// ```no_run
    /// # async fn run(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use quorumlock::Request;
    ///
    /// let writing = lock.acquire(Request::from("catalog").write()).await?;
    /// // … rewrite the catalog, then keep reading it while others may read too …
    /// let reading = writing.downgrade().await?;
    /// reading.release().await;
    /// # Ok(()) }
    /// ```
    pub fn write(mut self) -> Self {
        self.side = Some(Side::Write);
        self
    }

    /// The same request, for an election's candidate: each grant also writes `publication`.
    pub(crate) fn publishing(mut self, publication: Publication) -> Self {
        self.publication = Some(publication);
        self
    }

    /// Checks the request against `settings` and makes its keys, before anything is sent.
    /// `patience` overrides the request's and the lock's.
    pub(crate) fn prepare(
        &self,
        settings: &Settings,
        patience: Option<Patience>,
    ) -> Result<Prepared<'_>, Error> {
        let (name, keys, slots) = match (&self.target, self.permits) {
            (Target::One(name), _) if name.is_empty() => {
                return Err(ConfigError::EmptyResource.into());
            }
            (Target::One(name), None) => (&**name, Keys::One(settings.lock_key(name)?), None),
            (Target::One(name), Some(permits)) => {
                let slots = Slot::all(settings, name, permits)?;
                let keys = Keys::Set(slots.iter().map(|slot| Arc::clone(&slot.key)).collect());
                (&**name, keys, Some(slots))
            }
            (Target::Set(set), None) => (set.first(), set.keys(settings)?, None),
            (Target::Set(_), Some(_)) => return Err(ConfigError::PermitsOfSet.into()),
        };
        let take = self.check_take(settings)?;
        let rw = match (self.side, &self.target, self.permits, self.owner) {
            (None, ..) => None,
            (Some(_), Target::Set(_), ..) => {
                return Err(ConfigError::SideWith { with: "a set" }.into());
            }
            (Some(_), _, Some(_), _) => {
                return Err(ConfigError::SideWith { with: "permits" }.into());
            }
            (Some(_), _, _, Some(_)) => {
                return Err(ConfigError::SideWith { with: "an owner" }.into());
            }
            (Some(side), ..) => Some((side, Arc::new(RwKeys::new(keys.slot_key())))),
        };
        let ttl = self.ttl.unwrap_or(settings.ttl);
        validate_ttl(ttl)?;
        settings.check_guarded_ttl(ttl)?;
        let patience = patience
            .or_else(|| self.patience.clone())
            .unwrap_or_else(|| settings.patience.clone());
        if let Patience::Retry(policy) = &patience {
            check_retry(policy)?;
        }
        Ok(Prepared {
            name,
            keys,
            slots,
            take,
            rw,
            ttl,
            patience,
            owner: self.owner,
            publication: self.publication.clone(),
        })
    }

    /// How many permits one acquisition takes: 1 unless [`take`](Request::take) says more, and
    /// then only what a set of slots can hold.
    fn check_take(&self, settings: &Settings) -> Result<usize, ConfigError> {
        let Some(take) = self.take else {
            return Ok(1);
        };
        let refuse = |reason| Err(ConfigError::InvalidTake { take, reason });
        let Some(permits) = self.permits else {
            return refuse("the request names no permits");
        };
        if take == 0 {
            return refuse("a request takes at least one");
        }
        if take > permits {
            return refuse("more than the semaphore's permits");
        }
        let Ok(count) = usize::try_from(take) else {
            return refuse("more than a set holds");
        };
        if count > MAX_RESOURCES {
            return refuse("more than a set holds");
        }
        if count > 1 && self.owner.is_some() {
            return refuse("taking several is not reentrant; asked with an owner");
        }
        if count > 1 && settings.tagged_keys {
            return refuse("on a lock with a cluster member each slot has a hash slot of its own");
        }
        Ok(count)
    }
}

/// A request checked against the lock's settings: every default resolved, its keys made.
pub(crate) struct Prepared<'r> {
    /// The resource, or a set's first resource, which stands for it where one name is wanted.
    pub(crate) name: &'r [u8],
    /// The key, or a set's keys, or a semaphore's slots' keys (which its waiters wait on).
    pub(crate) keys: Keys,
    /// A semaphore's slots, in slot order; `None` for a lock.
    pub(crate) slots: Option<Vec<Slot>>,
    /// How many of the slots one acquisition takes (1 for anything else).
    pub(crate) take: usize,
    /// A side of a read-write lock, with its keys (`keys` is then its writer key, which its
    /// waiters of both sides queue on).
    pub(crate) rw: Option<(Side, Arc<RwKeys>)>,
    pub(crate) ttl: Duration,
    pub(crate) patience: Patience,
    pub(crate) owner: Option<Owner>,
    pub(crate) publication: Option<Publication>,
}

/// A resource name by reference: `&str`, `&String`, `&[u8]`, `&Vec<u8>`, `&[u8; N]`, and a
/// reference to any of those (`&&str`, as iterating a list of names gives).
impl<'a, T> From<&'a T> for Request<'a>
where
    T: AsRef<[u8]> + ?Sized,
{
    fn from(resource: &'a T) -> Self {
        Request::of(Target::One(Cow::Borrowed(resource.as_ref())))
    }
}

impl From<String> for Request<'static> {
    fn from(resource: String) -> Self {
        Request::of(Target::One(Cow::Owned(resource.into_bytes())))
    }
}

impl From<Vec<u8>> for Request<'static> {
    fn from(resource: Vec<u8>) -> Self {
        Request::of(Target::One(Cow::Owned(resource)))
    }
}

impl<'a> From<&'a Resources> for Request<'a> {
    fn from(resources: &'a Resources) -> Self {
        Request::of(Target::Set(Cow::Borrowed(resources)))
    }
}

impl From<Resources> for Request<'static> {
    fn from(resources: Resources) -> Self {
        Request::of(Target::Set(Cow::Owned(resources)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockOptions;

    fn settings() -> Settings {
        LockOptions::new().validate(3).unwrap()
    }

    #[test]
    fn the_request_overrides_the_lock_and_the_verb_overrides_both() {
        let settings = settings();
        let wait = Patience::Wait(Duration::from_secs(2));
        let patience = |request: &Request<'_>, verb: Option<Patience>| {
            request.prepare(&settings, verb).unwrap().patience
        };
        let plain = Request::from("r");
        assert_eq!(patience(&plain, None), Patience::Wait(settings.ttl));
        let patient = Request::from("r").patience(wait.clone());
        assert_eq!(patience(&patient, None), wait);
        assert_eq!(patience(&patient, Some(Patience::Once)), Patience::Once);
    }

    #[test]
    fn a_bad_request_is_refused_before_anything_is_sent() {
        let settings = settings();
        let refused = |request: Request<'_>| request.prepare(&settings, None).err();
        assert!(matches!(
            refused(Request::from("")),
            Some(Error::Config(ConfigError::EmptyResource))
        ));
        assert!(matches!(
            refused(Request::from("r").ttl(Duration::ZERO)),
            Some(Error::Config(ConfigError::InvalidTtl(_)))
        ));
        assert!(matches!(
            refused(Request::from("r").ttl(Duration::from_secs(11))),
            Some(Error::Config(ConfigError::TtlAboveMaxTtl { .. }))
        ));
        assert!(matches!(
            refused(Request::from("r").patience(Patience::Retry(RetryPolicy::new().attempts(0)))),
            Some(Error::Config(ConfigError::ZeroAttempts))
        ));
    }

    #[test]
    fn several_permits_at_once_are_one_permit_on_a_cluster_member() {
        let mut settings = settings();
        settings.tag_keys().unwrap();
        let taken = |take| {
            Request::from("w")
                .permits(4)
                .take(take)
                .prepare(&settings, None)
                .map(|prepared| prepared.take)
        };
        assert_eq!(taken(1).unwrap(), 1);
        assert!(matches!(
            taken(2),
            Err(Error::Config(ConfigError::InvalidTake { take: 2, .. }))
        ));
    }

    #[test]
    fn every_kind_of_name_converts_and_names_the_same_key() {
        let settings = settings();
        let key = |request: Request<'_>| match request.prepare(&settings, None).unwrap().keys {
            Keys::One(key) => key,
            Keys::Set(_) | Keys::Read { .. } => panic!("one name is one key"),
        };
        let name = String::from("job");
        let bytes = b"job".to_vec();
        let names = ["job"];
        let expected = key(Request::from("job"));
        for request in [
            Request::from(&name),
            Request::from(name.clone()),
            Request::from(&b"job"[..]),
            Request::from(b"job"),
            Request::from(&bytes),
            Request::from(bytes.clone()),
            Request::from(names.iter().next().unwrap()),
        ] {
            assert_eq!(key(request), expected);
        }
    }

    #[test]
    fn a_set_stands_for_its_first_resource_and_one_name_is_one_key() {
        let settings = settings();
        let set = Resources::new(["b", "a"]).unwrap();
        let request = Request::from(&set);
        let prepared = request.prepare(&settings, None).unwrap();
        assert_eq!(prepared.name, b"a");
        assert!(matches!(prepared.keys, Keys::Set(_)));
        let one = Request::from(String::from("a"));
        assert!(matches!(
            one.prepare(&settings, None).unwrap().keys,
            Keys::One(_)
        ));
    }
}
