//! A lease apart from the process that took it: [`Guard::detach`] gives its resources, token,
//! deadline, TTL and fence without releasing it, and [`Lock::resume`] makes a guard of them
//! again, in this process or another, once a quorum of nodes confirmed the token still holds
//! (an extension with it). A scheduler takes a lock and a worker it starts extends and releases
//! it; a process that restarts takes its own lease back instead of waiting out the TTL.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::{ConfigError, Error};
use crate::guard::Guard;
use crate::hold::{Acquired, Grant, Hold};
use crate::lock::Lock;
use crate::resources::Resources;
use crate::round::ledger::Ledger;
use crate::rules::clock::Moment;
use crate::rules::resources::Keys;
use crate::rules::rwlock::Side;
use crate::rules::token::Token;
use crate::settings::validate_ttl;

/// A held lease, detached from its guard: what [`Lock::resume`] needs to hold it again.
/// Plain values, to hand to another process however it suits (arguments, environment, a
/// queue): the token is the lease's only secret, as [`Guard::token`] is.
///
/// ```no_run
/// # async fn run(lock: quorumlock::Lock) -> Result<(), Box<dyn std::error::Error>> {
/// use quorumlock::{Detached, Token};
///
/// // The scheduler takes the lock and hands it to a worker without releasing it.
/// let guard = lock.acquire("nightly-report").await?;
/// let lease = guard.detach().map_err(|_| "an owner's or a reader's guard stays")?;
/// let token = lease.token.to_string();
///
/// // The worker (another process, given the name, the token and the deadline) resumes it.
/// let token = Token::parse(&token).expect("40 hex digits");
/// let resumed = lock
///     .resume(&Detached::new("nightly-report", token, lease.valid_until))
///     .await?;
/// resumed.release().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Detached {
    /// The resource, or a set's resources in the set's order (a semaphore's slots for a
    /// permit).
    pub resources: Vec<Vec<u8>>,
    /// The lease's token, which its keys hold on the nodes.
    pub token: Token,
    /// Until when the lease was valid when it was detached, on the wall clock. A resume after
    /// it sends nothing; before it, the nodes decide.
    pub valid_until: SystemTime,
    /// The TTL a resume extends by; `None`: the resuming lock's.
    pub ttl: Option<Duration>,
    /// The lease's fence, carried to the resumed guard as given (a resume does not read it).
    pub fence: Option<u64>,
}

impl Detached {
    /// The lease of `resource` holding `token`, valid until `valid_until`, without TTL or fence
    /// (set them with [`ttl`](Detached::ttl) and [`fence`](Detached::fence)).
    pub fn new(resource: impl Into<Vec<u8>>, token: Token, valid_until: SystemTime) -> Detached {
        Detached::of(vec![resource.into()], token, valid_until)
    }

    /// The lease of a set of resources, all of them holding `token`.
    pub fn of_set(resources: &Resources, token: Token, valid_until: SystemTime) -> Detached {
        let resources = resources.iter().map(<[u8]>::to_vec).collect();
        Detached::of(resources, token, valid_until)
    }

    /// The lease of `resources` with neither TTL nor fence given.
    fn of(resources: Vec<Vec<u8>>, token: Token, valid_until: SystemTime) -> Detached {
        Detached {
            resources,
            token,
            valid_until,
            ttl: None,
            fence: None,
        }
    }

    /// The TTL a resume extends the lease by (default: the resuming lock's).
    pub fn ttl(mut self, ttl: Duration) -> Detached {
        self.ttl = Some(ttl);
        self
    }

    /// The lease's fence, which the resumed guard carries.
    pub fn fence(mut self, fence: u64) -> Detached {
        self.fence = Some(fence);
        self
    }
}

impl Guard {
    /// This lease as plain values, without releasing it: its keys stay on the nodes until
    /// [`Lock::resume`] makes a guard of it again (here or in another process) and that guard
    /// releases it, or until they expire. Nothing is sent.
    ///
    /// The acquisition returned at a quorum and its requests to slower nodes may still be in
    /// flight: await [`Lock::settle`] before the other process may release the lease, or a
    /// request landing after that release sets a key there again (until its TTL).
    ///
    /// # Errors
    ///
    /// The guard itself, unchanged, when it cannot be detached: a guard of an
    /// [`Owner`](crate::Owner)'s hold (its other guards would still release it) or a reader's
    /// (its key is named after its token and a resume takes a resource's).
    // The error is the guard itself, so that a refusal loses nothing: it is as large as a guard.
    #[allow(clippy::result_large_err)]
    pub fn detach(self) -> Result<Detached, Guard> {
        let hold = self.hold();
        if hold.has_owner() || hold.side == Some(Side::Read) {
            return Err(self);
        }
        let valid_until = SystemTime::now()
            .checked_add(self.remaining())
            .unwrap_or_else(SystemTime::now);
        let detached = Detached {
            resources: self.resources().map(<[u8]>::to_vec).collect(),
            token: hold.token.clone(),
            valid_until,
            ttl: Some(hold.ttl),
            fence: hold.fence,
        };
        // Handed on, not released: the keys stay for whoever resumes them.
        self.into_custody();
        Ok(detached)
    }
}

impl Lock {
    /// A guard of the lease `detached` describes, once a quorum of this lock's nodes confirmed
    /// that its keys still hold its token: an extension by its TTL with that token, so the
    /// guard's validity runs from this call. The guard is a plain lock's (of one resource or a
    /// set), with everything a guard has; it releases the lease like any other.
    ///
    /// # Errors
    ///
    /// - [`Error::NotResumed`]: the deadline had passed (nothing sent), or no quorum still held
    ///   the token; whatever of the lease was left on the nodes is released;
    /// - [`Error::Config`], before anything is sent: no resource or an empty one, a set that is
    ///   not one, or a TTL Redis cannot store (or above `max_ttl` with the restart guard on).
    pub async fn resume(&self, detached: &Detached) -> Result<Guard, Error> {
        let node_set = self.node_set();
        let settings = &node_set.settings;
        let keys = match detached.resources.as_slice() {
            [] => return Err(ConfigError::EmptySet.into()),
            [resource] if resource.is_empty() => return Err(ConfigError::EmptyResource.into()),
            [resource] => Keys::One(settings.lock_key(resource)?),
            resources => Resources::new(resources)?.keys(settings)?,
        };
        let ttl = detached.ttl.unwrap_or(settings.ttl);
        validate_ttl(ttl)?;
        settings.check_guarded_ttl(ttl)?;
        if SystemTime::now() >= detached.valid_until {
            return Err(Error::NotResumed {
                outcomes: Vec::new(),
            });
        }
        let now = Moment::now();
        let acquired = Acquired {
            node_set: Arc::clone(node_set),
            keys,
            token: detached.token.clone(),
            ledger: Arc::new(Ledger::resumed(node_set.nodes.len())),
            owner: None,
            side: None,
        };
        // Not valid until the extension below says so; dropped on failure, it releases.
        let grant = Grant {
            decided: now,
            valid_until: now,
            fence: detached.fence,
            ttl,
        };
        let mut guard = Guard::new(Hold::new(acquired, grant), Vec::new());
        match guard.extend(ttl).await {
            Ok(()) => Ok(guard),
            Err(error) => Err(Error::NotResumed {
                outcomes: error.outcomes().to_vec(),
            }),
        }
    }
}
