//! rslock, a Rust Redlock client from crates.io, measured in the same run as our locks: its
//! `LockManager` over the same nodes, one try per acquire, as a new user would set it up (and,
//! for a like-for-like row, with `TCP_NODELAY` on as ours).

use std::time::Duration;

use ::rslock::LockManager;
use redis::IntoConnectionInfo;
use redis::io::tcp::TcpSettings;

/// rslock's lock manager over the bench's nodes, acquiring with one try.
#[derive(Clone)]
pub(super) struct Rslock {
    manager: LockManager,
    ttl: Duration,
    /// Put before every key, like our locks' key prefix, so that a run on nodes of your own
    /// touches only keys of its own.
    prefix: String,
}

impl Rslock {
    /// A lock manager over `urls` with the bench's TTL; `name` says which in the errors. The
    /// clients are opened here (rslock's own `new` panics on a bad URL). `nodelay`:
    /// `TCP_NODELAY` on its sockets, as on ours, for a like-for-like row; `false` is redis-rs's
    /// default, which a new user of rslock gets.
    pub(super) fn new(
        name: &str,
        urls: &[String],
        ttl: Duration,
        prefix: String,
        nodelay: bool,
    ) -> Result<Rslock, String> {
        let mut rslock = Rslock::with_its_retry(name, urls, ttl, prefix, nodelay)?;
        // One try, like `RetryPolicy::once()` for our locks; the delay is unused then.
        rslock.manager.set_retry(1, Duration::from_millis(1));
        Ok(rslock)
    }

    /// The same with rslock's own retry loop as it comes: 3 tries, each pause drawn from
    /// 0–200 ms (what its `lock` does for a caller that does not set one).
    pub(super) fn with_its_retry(
        name: &str,
        urls: &[String],
        ttl: Duration,
        prefix: String,
        nodelay: bool,
    ) -> Result<Rslock, String> {
        let clients = urls
            .iter()
            .map(|url| {
                let info = url
                    .as_str()
                    .into_connection_info()
                    .map_err(|e| format!("{name}: bad URL: {e}"))?
                    .set_tcp_settings(TcpSettings::default().set_nodelay(nodelay));
                redis::Client::open(info).map_err(|e| format!("{name}: bad URL: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let manager = LockManager::from_clients(clients);
        Ok(Rslock {
            manager,
            ttl,
            prefix,
        })
    }

    /// One call of rslock's `lock` (its retry loop) on `key`: the lock, if granted.
    pub(super) async fn lock(&self, key: &str) -> Option<::rslock::Lock> {
        let key = format!("{}{key}", self.prefix);
        self.manager.lock(key.as_bytes(), self.ttl).await.ok()
    }

    /// Releases what [`lock`](Rslock::lock) granted (best effort: rslock reports nothing).
    pub(super) async fn unlock(&self, lock: &::rslock::Lock) {
        self.manager.unlock(lock).await;
    }

    /// One acquire+release; true when the lock was granted. rslock's `unlock` reports nothing.
    pub(super) async fn cycle(&self, key: &str) -> bool {
        let key = format!("{}{key}", self.prefix);
        match self.manager.lock(key.as_bytes(), self.ttl).await {
            Ok(lock) => {
                self.manager.unlock(&lock).await;
                true
            }
            Err(_) => false,
        }
    }
}
