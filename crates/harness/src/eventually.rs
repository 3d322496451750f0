//! [`eventually`]: a test's "wait until this holds, or give up after a bound", the one way the
//! tests of this workspace poll for a state on the servers that no event announces.

use std::time::Duration;

/// How often [`eventually`] asks again.
const POLL: Duration = Duration::from_millis(10);

/// Asks `condition` every 10 ms until it holds (`true`) or `bound` has passed (`false`): bounded
/// in time whatever `condition` does, and asked once more at the bound, so a condition that came
/// true meanwhile is not missed.
///
/// ```no_run
/// # async fn run(cluster: quorumlock_harness::TestCluster) {
/// use std::time::Duration;
/// use quorumlock_harness::eventually;
///
/// let mut connection = cluster.connection(0).await.unwrap();
/// let gone = eventually(Duration::from_secs(5), async || {
///     let exists: bool = redis::cmd("EXISTS").arg("job").query_async(&mut connection).await.unwrap();
///     !exists
/// })
/// .await;
/// assert!(gone, "the key did not expire within 5 s");
/// # }
/// ```
pub async fn eventually(bound: Duration, mut condition: impl AsyncFnMut() -> bool) -> bool {
    let asking = async {
        while !condition().await {
            tokio::time::sleep(POLL).await;
        }
    };
    if tokio::time::timeout(bound, asking).await.is_ok() {
        return true;
    }
    condition().await
}
