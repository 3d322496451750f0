//! The release's two Lua scripts, their hashes, and their loading on a new connection. Apart
//! from the release command (`release.rs`), so that a connection can load them when it is made
//! (`connection.rs`) without depending on how a command is sent.

use std::sync::LazyLock;

use redis::aio::MultiplexedConnection;

/// Deletes the key only while it holds our token (a failed acquisition's cleanup: nobody else
/// held the lock, so nobody is woken).
pub(super) const RELEASE: &str = r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])";

/// [`RELEASE`] for a lock that was held, which then publishes the token's first eight digits
/// (its release mark, [`Token::release_mark`](crate::rules::token::Token::release_mark)),
/// followed by `ARGV[2]` (`+` when the releaser keeps the key for a waiter of its own,
/// `rules/hand_off.rs`), on the channel named like the key: it wakes the waiters of every
/// client subscribed to it (`subscription.rs`), once per release however many nodes publish
/// it. `pcall`: a user not allowed the channel (an ACL without `&` rules) still releases; its
/// waiters then wake by the key's expiry bound.
pub(super) const RELEASE_AND_WAKE: &str = r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', KEYS[1], string.sub(ARGV[1], 1, 8) .. (ARGV[2] or ''))
return 1";

/// The SHA1 of [`RELEASE`] and of [`RELEASE_AND_WAKE`], as `EVALSHA` names them.
pub(super) static RELEASE_SHA: LazyLock<String> = LazyLock::new(|| hash(RELEASE));
pub(super) static RELEASE_AND_WAKE_SHA: LazyLock<String> = LazyLock::new(|| hash(RELEASE_AND_WAKE));

fn hash(script: &str) -> String {
    redis::Script::new(script).get_hash().to_owned()
}

/// Loads both release scripts on a new `connection`, so that its releases find them cached. A
/// refusal (an ACL without `SCRIPT LOAD`) only costs those releases the `EVAL` fallback.
pub(super) async fn load_scripts(connection: &MultiplexedConnection) {
    let load = |script: &'static str| {
        let mut connection = connection.clone();
        async move {
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(script);
            if let Err(error) = load.query_async::<String>(&mut connection).await {
                tracing::debug!(%error, "release script not loaded; releases fall back to EVAL");
            }
        }
    };
    futures::join!(load(RELEASE), load(RELEASE_AND_WAKE));
}
