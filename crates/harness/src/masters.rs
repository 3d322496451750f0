//! [`TestCluster::masters`]: the one call a test of a user's own locking code starts with —
//! N independent masters set up the way such a test wants them, on the backend the
//! environment names.

use crate::backend::Backend;
use crate::cluster::TestCluster;
use crate::error::HarnessError;
use crate::options::{ClusterOptions, Persistence};

impl TestCluster {
    /// Starts `nodes` independent Redis masters for testing code that takes a lock (or talks
    /// to several Redis servers): hand [`urls`](Self::urls) to the code under test, and fault
    /// the nodes through the cluster (a handle to all of them) while it runs.
    ///
    /// It is [`start`](Self::start) with these [`ClusterOptions`], chosen for such tests:
    ///
    /// * [`backend`](ClusterOptions::backend) from [`Backend::from_env`]: processes, or with
    ///   `QUORUMLOCK_BACKEND=docker` (and the `docker` cargo feature) one container per node,
    ///   so one test runs on either without a change;
    /// * [`proxies`](ClusterOptions::proxies) on: each URL points at a
    ///   [`FaultProxy`](crate::FaultProxy) ([`proxy`](Self::proxy)) that can add latency,
    ///   black-hole, refuse or cut connections, on top of the node faults
    ///   ([`kill`](Self::kill), [`stop`](Self::stop), [`start_node`](Self::start_node),
    ///   [`pause`](Self::pause), [`resume`](Self::resume), [`flush`](Self::flush));
    /// * [`Persistence::AofAlways`]: every write is fsynced (to `/dev/shm` by default, so it
    ///   costs nothing), so a killed and restarted node keeps its keys, as production masters
    ///   should, and a Redlock client that guards against restarts without persistence (as
    ///   `quorumlock` does) lets the nodes vote from the first acquisition.
    ///
    /// For anything else (TLS, clock rates, no persistence), use [`start`](Self::start) with
    /// options of your own. Everything is stopped and removed when the cluster is dropped,
    /// also while a failing test unwinds.
    ///
    /// A complete test of a user's function that takes a `quorumlock` lock, with a killed and
    /// a frozen master, a black-holed one and a lost majority, is
    /// `crates/harness/examples/testing_your_code.rs` (`cargo test -p quorumlock-harness
    /// --example testing_your_code`). In short:
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock_harness::HarnessError> {
    /// use quorumlock_harness::TestCluster;
    ///
    /// let mut cluster = TestCluster::masters(5).await?;
    /// let urls = cluster.urls(); // redis://127.0.0.1:<port>, five of them
    /// cluster.kill(0).await?; // a crashed master
    /// cluster.pause(1)?; // a frozen one
    /// // ... run the code under test against `urls`: three of five still answer ...
    /// cluster.resume(1)?;
    /// cluster.start_node(0).await?; // back on the same port, its keys loaded
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`HarnessError::UnknownBackend`] for an unknown `QUORUMLOCK_BACKEND`, and as
    /// [`start`](Self::start).
    pub async fn masters(nodes: usize) -> Result<TestCluster, HarnessError> {
        TestCluster::start(
            ClusterOptions::default()
                .nodes(nodes)
                .backend(Backend::from_env()?)
                .proxies(true)
                .persistence(Persistence::AofAlways),
        )
        .await
    }
}
