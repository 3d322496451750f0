//! Least privilege: the lock works as an ACL user allowed only what it sends (the line in
//! `docs/deployment.md`), and a user missing any of it gets a typed per-node error, never a
//! panic.
//!
//! What the lock sends, from `src/node/` and redis-rs 1.8: on connect, `AUTH user pass`
//! (RESP2; `HELLO 3 AUTH …` with `?protocol=resp3`; neither is ACL-checked) and
//! `CLIENT SETINFO` twice, whose replies redis-rs ignores; `SET key token NX PX ttl` for a first
//! attempt; `EVAL` (SET, GET, PEXPIRE inside) for a retry; `EVALSHA` for release (GET, DEL
//! inside) and extend (GET, PEXPIRE inside), and on `NOSCRIPT` redis-rs' `Script::invoke_async`
//! sends `SCRIPT LOAD` and the `EVALSHA` again (never `EVAL`). Commands a script calls are
//! ACL-checked like the script's own, and so are its keys. On every connection the lock also
//! asks the server who it is: `INFO server` and `INFO persistence` (its `run_id`, so that one
//! server never votes twice, and what the restart guard needs), which is why `INFO` is in the
//! line, and `CONFIG GET appendfsync`, which deliberately is not: the guard takes the refusal as
//! "not `appendfsync always`".

use quorumlock::Patience;
use std::time::Duration;

use quorumlock::{Error, Lock, LockOptions, NodeError, NodeReply, Resources, RetryPolicy};
use quorumlock_harness::TestCluster;
use redis::aio::MultiplexedConnection;

use crate::common::command_calls as calls;
use crate::common::*;

pub(crate) const USER: &str = "quorumlock";
pub(crate) const PASSWORD: &str = "correct-horse-battery-staple";

/// The recommended rules, as in `docs/deployment.md`:
/// `ACL SETUSER quorumlock reset on >PASSWORD ~quorumlock:* resetchannels +set +get +del
/// +pexpire +eval +evalsha +script|load +info`.
pub(crate) fn recommended() -> Vec<String> {
    let mut rules = vec![
        "reset".to_owned(),
        "on".to_owned(),
        format!(">{PASSWORD}"),
        "~quorumlock:*".to_owned(),
        "resetchannels".to_owned(),
    ];
    rules.extend(COMMANDS.iter().map(|command| format!("+{command}")));
    rules
}

/// The commands the recommended line allows, each for a reason (see `docs/deployment.md`).
const COMMANDS: [&str; 8] = [
    "set",
    "get",
    "del",
    "pexpire",
    "eval",
    "evalsha",
    "script|load",
    "info",
];

/// The recommended rules less `+<command>`.
fn recommended_without(command: &str) -> Vec<String> {
    let denied = format!("+{command}");
    recommended()
        .into_iter()
        .filter(|rule| *rule != denied)
        .collect()
}

/// `ACL SETUSER quorumlock <rules>` on every node, as the default user.
pub(crate) async fn set_user(cluster: &TestCluster, rules: &[String]) {
    for node in 0..cluster.len() {
        let mut admin = cluster.connection(node).await.unwrap();
        let () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(USER)
            .arg(rules)
            .query_async(&mut admin)
            .await
            .unwrap();
    }
}

/// Runs `command` (e.g. `["SCRIPT", "FLUSH"]`) on every node, as the default user.
async fn on_every_node(cluster: &TestCluster, command: &[&str]) {
    for node in 0..cluster.len() {
        let mut admin = cluster.connection(node).await.unwrap();
        let _: redis::Value = redis::cmd(command[0])
            .arg(&command[1..])
            .query_async(&mut admin)
            .await
            .unwrap();
    }
}

/// `redis://quorumlock:<password>@127.0.0.1:<port>` for every node.
fn user_urls(cluster: &TestCluster, password: &str) -> Vec<String> {
    (0..cluster.len())
        .map(|node| {
            format!(
                "redis://{USER}:{password}@127.0.0.1:{}",
                cluster.port(node).unwrap()
            )
        })
        .collect()
}

/// Stores `key` for another owner on every node, expiring after `ttl`.
async fn held_elsewhere(cluster: &TestCluster, key: &str, ttl: Duration) {
    let ttl_ms = ttl.as_millis().to_string();
    on_every_node(cluster, &["SET", key, "someone-else", "PX", &ttl_ms]).await;
}

/// A connection to node 0 as the `quorumlock` user.
async fn as_user(cluster: &TestCluster) -> MultiplexedConnection {
    redis::Client::open(user_urls(cluster, PASSWORD)[0].as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The options of the tests about which commands the lock sends: [`once`], with extensions of
/// up to 20 s, and the restart guard off. The recommended user may not run `CONFIG GET`, so the
/// guard would take every node as one that may lose writes and hold it back for `max_ttl` after
/// it started; the guard with such a user has its own test
/// (`the_recommended_user_has_no_config_get_so_the_restart_guard_assumes_no_fsync`).
pub(crate) fn acl_options() -> LockOptions {
    once().max_ttl(Duration::from_secs(20)).restart_guard(false)
}

/// Retries far enough apart that a key held elsewhere for 500 ms has expired by the second
/// attempt, which therefore runs the acquire-or-renew script (`EVAL`).
fn retrying() -> LockOptions {
    acl_options().patience(Patience::Retry(
        RetryPolicy::new()
            .attempts(3)
            .delay(Duration::from_millis(700))
            .jitter(Duration::ZERO),
    ))
}

fn failures(outcomes: &[quorumlock::NodeOutcome]) -> Vec<NodeError> {
    outcomes
        .iter()
        .filter_map(|outcome| match &outcome.reply {
            NodeReply::Failed(error) => Some(error.clone()),
            _ => None,
        })
        .collect()
}

/// An ACL refusal as the lock reports it: `NoPermission` when Redis refuses the command we
/// send (or a key), and, for a command called inside one of our Lua scripts, what Redis 7.0
/// answers there: `ERR The user executing the script can't run this command or subcommand`,
/// which the library reports as `NodeError::Server { code: "ERR", .. }` (it would take a change
/// to `NodeError`'s mapping in `src/node/redis_error.rs` to make that `NoPermission` too).
fn is_acl_refusal(error: &NodeError) -> bool {
    matches!(error, NodeError::NoPermission(_))
}

// promise: acl-least-privilege
#[tokio::test]
async fn the_recommended_user_acquires_extends_and_releases() {
    bounded(async {
        let cluster = cluster(3).await;
        set_user(&cluster, &recommended()).await;
        for protocol in ["", "/?protocol=resp3"] {
            let urls = user_urls(&cluster, PASSWORD)
                .into_iter()
                .map(|url| format!("{url}{protocol}"));
            let lock = Lock::new(urls, acl_options()).unwrap();
            // A quorum decides; the third node may still be answering (or never asked).
            let mut guard = lock.try_acquire("acl").await.unwrap();
            assert!(holders(guard.outcomes()).len() >= 2, "{protocol}");
            guard.extend(Duration::from_secs(20)).await.unwrap();
            assert!(holders(guard.outcomes()).len() >= 2, "{protocol}");
            let report = guard.release().await;
            assert!(report.held >= 2, "{protocol}: {report:?}");
            lock.settle().await;
            assert_no_keys(&cluster, 0..3).await;
        }
    })
    .await;
}

#[tokio::test]
async fn the_recommended_user_retries_with_the_acquire_or_renew_script() {
    bounded(async {
        let cluster = cluster(3).await;
        set_user(&cluster, &recommended()).await;
        held_elsewhere(&cluster, "quorumlock:acl", Duration::from_millis(500)).await;
        let lock = Lock::new(user_urls(&cluster, PASSWORD), retrying()).unwrap();
        let guard = lock.acquire("acl").await.unwrap();
        let holders = holders(guard.outcomes());
        assert!(holders.len() >= 2, "{holders:?}");
        // The first attempt's plain SET found the key held elsewhere; the holders took the key
        // in a retry, which runs the acquire-or-renew script with EVAL (a node may also have
        // run it in a retry that still found the key held, or got a failed attempt's release).
        for node in holders {
            let evals = calls(&cluster, node, "eval").await;
            assert!(evals >= 1, "node {node}: {evals} EVALs");
        }
        guard.release().await;
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn the_recommended_user_survives_a_flushed_script_cache() {
    bounded(async {
        let cluster = cluster(3).await;
        set_user(&cluster, &recommended()).await;
        let lock = Lock::new(user_urls(&cluster, PASSWORD), acl_options()).unwrap();
        // A set's extension is a script on every server (one key's is `SET … IFEQ` where the
        // server offers it).
        let mut guard = lock.try_acquire(&script_extended()).await.unwrap();
        guard.extend(Duration::from_secs(20)).await.unwrap();
        // The scripts are cached now; flushing makes the next EVALSHA answer NOSCRIPT.
        on_every_node(&cluster, &["SCRIPT", "FLUSH"]).await;
        guard.extend(Duration::from_secs(20)).await.unwrap();
        let extended = holders(guard.outcomes());
        assert!(extended.len() >= 2, "{extended:?}");
        for &node in &extended {
            // Loaded for the first extend, and again after the flush.
            assert!(
                calls(&cluster, node, "script|load").await >= 2,
                "node {node}"
            );
        }
        on_every_node(&cluster, &["SCRIPT", "FLUSH"]).await;
        let report = guard.release().await;
        assert!(report.held >= 2, "{report:?}");
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// A user without `+config|get` cannot read the fsync policy: the restart guard takes the node
/// as one that may lose writes, although this one runs AOF with `appendfsync always`, and holds
/// it back for `max_ttl` plus the drift after it started; then the user's lock works. The
/// default user, who may read the policy, gets the same node's vote at once.
#[tokio::test]
async fn the_recommended_user_has_no_config_get_so_the_restart_guard_assumes_no_fsync() {
    bounded(async {
        let cluster = cluster(1).await;
        set_user(&cluster, &recommended()).await;
        let mut connection = as_user(&cluster).await;
        let refused = redis::cmd("CONFIG")
            .arg("GET")
            .arg("appendfsync")
            .query_async::<redis::Value>(&mut connection)
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Some("NOPERM"), "{refused}");
        for section in ["server", "persistence"] {
            let info: String = redis::cmd("INFO")
                .arg(section)
                .query_async(&mut connection)
                .await
                .unwrap();
            assert!(
                info.contains(&format!("# {}", capitalised(section))),
                "{info}"
            );
        }

        let ttl = Duration::from_millis(500);
        let options = once().ttl(ttl);
        let admin = Lock::new([cluster.urls()[0].clone()], options.clone()).unwrap();
        admin.try_acquire("admin").await.unwrap().release().await;

        let user_url = user_urls(&cluster, PASSWORD)[0].clone();
        let lock = Lock::new([user_url], options).unwrap();
        let guard_period = lock.restart_guard_period().unwrap();
        let error = lock.try_acquire("acl").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        let left = recovering(&error.outcomes()[0]).unwrap_or_else(|| panic!("{error}"));
        assert!(left <= guard_period, "{left:?}");
        // Nothing was sent.
        assert_eq!(calls(&cluster, 0, "set").await, 1, "only the admin's SET");

        tokio::time::sleep(left).await;
        let mut guard = lock.try_acquire("acl").await.unwrap();
        guard.extend(ttl).await.unwrap();
        assert_eq!(guard.release().await.held, 1);
    })
    .await;
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

// promise: typed-errors, acl-least-privilege
#[tokio::test]
async fn a_user_without_set_gets_no_permission_on_every_node() {
    bounded(async {
        let cluster = cluster(3).await;
        set_user(&cluster, &recommended_without("set")).await;
        let lock = Lock::new(user_urls(&cluster, PASSWORD), acl_options()).unwrap();
        let error = lock.try_acquire("acl").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        let failed = failures(error.outcomes());
        assert!(failed.len() >= 2, "{error}");
        for failure in failed {
            assert!(matches!(failure, NodeError::NoPermission(_)), "{failure:?}");
        }
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

#[tokio::test]
async fn a_key_pattern_that_misses_the_prefix_gets_no_permission() {
    bounded(async {
        let cluster = cluster(3).await;
        let mut rules = recommended();
        for rule in &mut rules {
            if rule == "~quorumlock:*" {
                *rule = "~app:locks:*".to_owned();
            }
        }
        set_user(&cluster, &rules).await;
        let urls = user_urls(&cluster, PASSWORD);

        let error = Lock::new(urls.clone(), acl_options())
            .unwrap()
            .try_acquire("acl")
            .await
            .unwrap_err();
        let failed = failures(error.outcomes());
        assert!(failed.len() >= 2, "{error}");
        for failure in failed {
            match failure {
                NodeError::NoPermission(message) => {
                    // "No permissions to access a key" (Redis 7.0: "… keys")
                    assert!(message.contains("key"), "{message}")
                }
                other => panic!("expected NoPermission, got {other:?}"),
            }
        }

        // The pattern follows the key prefix: with the prefix it names, everything works.
        let lock = Lock::new(urls, acl_options().key_prefix("app:locks:")).unwrap();
        let mut guard = lock.try_acquire("acl").await.unwrap();
        guard.extend(Duration::from_secs(20)).await.unwrap();
        assert!(guard.release().await.held >= 2);
        lock.settle().await;
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// Each command of the recommended line, taken away on its own, breaks the operation that needs
/// it with a typed ACL refusal on the node, and nothing panics.
// promise: acl-least-privilege
#[tokio::test]
async fn every_command_in_the_line_is_needed() {
    bounded(async {
        let cluster = cluster(1).await;
        let url = user_urls(&cluster, PASSWORD)[0].clone();
        for command in COMMANDS.iter() {
            set_user(&cluster, &recommended_without(command)).await;
            // A cold script cache, as on a fresh or restarted server.
            on_every_node(&cluster, &["SCRIPT", "FLUSH"]).await;
            on_every_node(&cluster, &["FLUSHALL"]).await;
            let refusal = match *command {
                // The server's identity, read on connect: without it the node never votes, and
                // nothing is sent to it (the guard being off changes nothing).
                "info" => {
                    let sets = calls(&cluster, 0, "set").await;
                    let lock = Lock::new([url.clone()], acl_options()).unwrap();
                    let reply = lock.try_acquire("acl").await.unwrap_err().outcomes()[0]
                        .reply
                        .clone();
                    assert_eq!(calls(&cluster, 0, "set").await, sets, "nothing was sent");
                    reply
                }
                // The first attempt's SET NX PX.
                "set" => {
                    let lock = Lock::new([url.clone()], acl_options()).unwrap();
                    lock.try_acquire("acl").await.unwrap_err().outcomes()[0]
                        .reply
                        .clone()
                }
                // A retry's EVAL.
                "eval" => {
                    held_elsewhere(&cluster, "quorumlock:acl", Duration::from_millis(500)).await;
                    let lock = Lock::new([url.clone()], retrying()).unwrap();
                    lock.acquire("acl").await.unwrap_err().outcomes()[0]
                        .reply
                        .clone()
                }
                // Extend: EVALSHA, SCRIPT LOAD on the cold cache, PEXPIRE in the script (a set's,
                // which is a script on every server).
                "pexpire" | "evalsha" | "script|load" => {
                    let lock = Lock::new([url.clone()], acl_options()).unwrap();
                    let mut guard = lock.try_acquire(&script_extended()).await.unwrap();
                    let error = guard.extend(Duration::from_secs(20)).await.unwrap_err();
                    assert!(matches!(error, Error::ExtendFailed { .. }), "{error}");
                    error.outcomes()[0].reply.clone()
                }
                // Release: one EVAL, with GET and DEL in the script.
                "get" | "del" => {
                    let lock = Lock::new([url.clone()], acl_options()).unwrap();
                    let guard = lock.try_acquire("acl").await.unwrap();
                    let report = guard.release().await;
                    assert_eq!(report.held, 0, "{command}: {report:?}");
                    report.outcomes[0].reply.clone()
                }
                other => unreachable!("no case for {other}"),
            };
            // Refused outright or inside our script: NoPermission either way.
            match &refusal {
                NodeReply::Failed(error) if is_acl_refusal(error) => {}
                other => panic!("without +{command}: expected an ACL refusal, got {other:?}"),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_wrong_password_is_an_auth_error() {
    bounded(async {
        let cluster = cluster(3).await;
        set_user(&cluster, &recommended()).await;
        let lock = Lock::new(user_urls(&cluster, "not-the-password"), acl_options()).unwrap();
        let error = lock.try_acquire("acl").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
        let failed = failures(error.outcomes());
        assert!(failed.len() >= 2, "{error}");
        for failure in failed {
            assert!(matches!(failure, NodeError::Auth(_)), "{failure:?}");
        }
        // The password never reaches the error's text.
        assert!(!error.to_string().contains("not-the-password"), "{error}");
        assert_no_keys(&cluster, 0..3).await;
    })
    .await;
}

/// Two resources: their extension runs the set's script on every server, where one key's is
/// `SET … IFEQ` on servers that offer it.
fn script_extended() -> Resources {
    Resources::new(["acl", "acl-too"]).unwrap()
}

/// A URL naming a database the user may not `SELECT` (no `+select` in the recommended line): each
/// node's outcome is `NoPermission`, as every other ACL refusal is, and not a plain server error.
/// redis-rs sends the `SELECT` in its handshake and reports its refusal as an `ERR`.
// promise: acl-least-privilege
#[tokio::test]
async fn a_database_the_user_may_not_select_is_a_permission_error() {
    bounded(async {
        let cluster = cluster(3).await;
        set_user(&cluster, &recommended()).await;
        let urls = user_urls(&cluster, PASSWORD)
            .into_iter()
            .map(|url| format!("{url}/2"));
        let lock = Lock::new(urls, acl_options()).unwrap();
        let error = lock.try_acquire("acl").await.unwrap_err();
        assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
        // Decided once the quorum was out of reach: a node may not have answered by then.
        let answered: Vec<_> = error
            .outcomes()
            .iter()
            .filter(|outcome| outcome.reply != NodeReply::NoReply)
            .collect();
        assert!(answered.len() >= 2, "{error:?}");
        for outcome in answered {
            assert!(
                matches!(
                    &outcome.reply,
                    NodeReply::Failed(NodeError::NoPermission(message)) if message.contains("select")
                ),
                "{outcome:?}"
            );
        }
    })
    .await;
}
