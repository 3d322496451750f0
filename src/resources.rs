//! Locks over several resources at once: [`Resources`], a checked set of resource names, which
//! [`Lock::acquire`](crate::Lock::acquire) takes as one acquisition of all of them or none. On
//! each node one script sets every key of the set or none (`node/set.rs`), and a node votes yes
//! only if it set all of them; the quorum, validity, release, waiting and fencing rules are those
//! of one resource, and one [`Guard`](crate::Guard) extends and releases the whole set.

use std::fmt;

use crate::error::ConfigError;
use crate::rules::resources::{Keys, MAX_RESOURCES, SetDefect, canonical_set};
use crate::rules::slots::key_slot;
use crate::settings::Settings;

/// A set of resources to lock together, all or none, with [`Lock::acquire`](crate::Lock::acquire): not empty, each name once,
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
    pub(crate) fn keys(&self, settings: &Settings) -> Result<Keys, ConfigError> {
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
    pub(crate) fn first(&self) -> &[u8] {
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
