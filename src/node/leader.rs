//! An election's leader record on one node (`rules/leader.rs`): written by the candidate's own
//! acquire script where it takes the lock key (`acquire_scripts.rs`), and again by the fence's
//! write-back when the term had to be raised (`write_back.rs`), each time announced on the
//! record's channel so observers are woken. It is read with the lock key in `inspect.rs`.

/// Lua that writes the record `KEYS[3]` (token `ARGV[1]`, term the local `fence`, value the
/// argument `value`) and publishes the term on the record's name. Appended to a script that
/// has just made sure the lock key holds the token. The record has no expiry: it is read only
/// beside the lock key holding its token, and the next leader writes over it.
pub(super) fn record_lua(value: &str) -> String {
    format!(
        r"redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'token', ARGV[1], 'term', fence, 'value', {value})
redis.call('PUBLISH', KEYS[3], fence)
"
    )
}
