//! Helpers shared by the integration tests: a hang guard and direct Redis commands for
//! inspecting nodes, and (in [`backend_checks`]) the harness checks that both backends pass.
//! Each test binary uses a subset of them.
#![allow(dead_code)]

pub mod backend_checks;

use std::future::Future;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

/// Generous bound on every test, so a hang fails the test instead of stalling CI.
pub const TEST_BOUND: Duration = Duration::from_secs(120);
/// Response timeout for commands that are expected to get no answer.
pub const SHORT: Duration = Duration::from_millis(300);
/// Response timeout for commands that are expected to be answered.
pub const LONG: Duration = Duration::from_secs(10);

/// Runs `test`, failing it if it has not finished within [`TEST_BOUND`].
pub async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("test did not finish within its bound")
}

/// A direct connection to `url` whose connect and commands time out after `response_timeout`.
pub async fn connect(
    url: &str,
    response_timeout: Duration,
) -> redis::RedisResult<MultiplexedConnection> {
    quorumlock_harness::raw_connection(url, None, response_timeout).await
}

pub async fn ping(connection: &mut MultiplexedConnection) -> redis::RedisResult<String> {
    redis::cmd("PING").query_async(connection).await
}

pub async fn dbsize(connection: &mut MultiplexedConnection) -> i64 {
    redis::cmd("DBSIZE").query_async(connection).await.unwrap()
}

pub async fn set(connection: &mut MultiplexedConnection, key: &str, value: &str) {
    let () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(connection)
        .await
        .unwrap();
}

/// `SET key value PX ttl_ms`.
pub async fn set_px(connection: &mut MultiplexedConnection, key: &str, value: &str, ttl_ms: u64) {
    let () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PX")
        .arg(ttl_ms)
        .query_async(connection)
        .await
        .unwrap();
}

pub async fn get(connection: &mut MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(connection)
        .await
        .unwrap()
}

/// Milliseconds to live of `key` on the server (-2: gone).
pub async fn pttl(connection: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(connection)
        .await
        .unwrap()
}
