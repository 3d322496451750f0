//! What every lock test shares: a hang guard, clusters, and direct looks at the nodes.

use std::future::Future;
use std::time::Duration;

/// Generous bound on every test, so a hang fails the test instead of stalling CI.
const TEST_BOUND: Duration = Duration::from_secs(120);

/// Runs `test`, failing it if it has not finished within [`TEST_BOUND`].
pub async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("test did not finish within its bound")
}
