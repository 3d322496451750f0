//! [`TestCluster`]: N independent `redis-server` masters on loopback ports and the node-level
//! faults (kill, stop, restart, pause, resume, flush). It keeps each node's port, server and
//! proxy, and hands every node operation to the node's backend: `process.rs` or, with the
//! `docker` feature, `docker/`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tracing::info;

use crate::backend::Backend;
#[cfg(feature = "docker")]
use crate::docker::DockerServer;
use crate::error::HarnessError;
use crate::faketime::{ClockFile, find_libfaketime};
use crate::netfilter::{Netfilter, PacketDrop, ServerSocket};
use crate::options::ClusterOptions;
use crate::process::ProcessServer;
use crate::proxy::FaultProxy;
#[cfg(feature = "tls")]
use crate::tls::TlsFiles;
use crate::transport::Transport;

/// Connect and response timeout of [`TestCluster::connection`].
const INSPECTION_TIMEOUT: Duration = Duration::from_secs(1);

/// N independent `redis-server` masters on 127.0.0.1, for tests.
///
/// Each node is a `redis-server` process in its own temporary directory (the
/// default, [`Backend::Process`]) or a Docker container ([`Backend::Docker`],
/// cargo feature `docker`), reached on `127.0.0.1:<port>` either way. Every
/// method works the same on both backends. Nodes keep nothing across restarts
/// unless [`ClusterOptions::persistence`] says otherwise. Nodes are addressed
/// by their 0-based index; an index out of range gives
/// [`HarnessError::NoSuchNode`].
///
/// Dropping the cluster resumes paused nodes, SIGKILLs every process it
/// started, reaps them, removes its containers, stops the proxies and deletes
/// the directories. This also happens while a failing test unwinds, and the
/// waits involved are bounded (a few seconds at worst).
///
/// The cluster must be started and used on a Tokio runtime with I/O and time
/// enabled.
#[derive(Debug)]
pub struct TestCluster {
    // Field order matters for drop: packets pass again before the nodes go, and the nodes go
    // before the TLS files they read.
    netfilter: Netfilter,
    nodes: Vec<Node>,
    options: ClusterOptions,
    transport: Transport,
}

impl TestCluster {
    /// Starts the nodes (and proxies) described by `options`, and returns once
    /// every node answers.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Spawn`] if `redis-server` cannot be run,
    /// [`HarnessError::Exited`] if it exits during startup (e.g. a bad extra
    /// argument), [`HarnessError::NotReady`] if it does not answer within the
    /// ready timeout. [`HarnessError::InvalidClockRate`] or
    /// [`HarnessError::NoSuchNode`] for a bad [`ClusterOptions::clock_rate`],
    /// [`HarnessError::LibfaketimeNotFound`] if a clock rate is set and
    /// libfaketime is missing. On the docker backend also
    /// [`HarnessError::DockerUnavailable`], [`HarnessError::ImageMissing`] and
    /// [`HarnessError::Docker`]; [`HarnessError::BackendNotCompiled`] if the
    /// `docker` feature is off. [`HarnessError::Tls`] if the certificates for
    /// `ClusterOptions::tls` cannot be made. Nodes already started are killed
    /// (containers removed) before returning.
    pub async fn start(options: ClusterOptions) -> Result<TestCluster, HarnessError> {
        tokio::runtime::Handle::try_current().map_err(|_| HarnessError::NoRuntime)?;
        options.validate()?;
        let transport = Transport::for_options(&options)?;
        let backend = BackendContext::prepare(&options).await?;
        let starts =
            (0..options.nodes).map(|index| start_new_node(&options, &transport, &backend, index));
        // On failure the nodes that did start are dropped, which kills them.
        let nodes = futures::future::try_join_all(starts).await?;
        info!(
            backend = ?options.backend,
            ports = ?nodes.iter().map(|node| node.port).collect::<Vec<_>>(),
            proxies = options.proxies,
            "test cluster started"
        );
        Ok(TestCluster {
            netfilter: Netfilter::default(),
            nodes,
            options,
            transport,
        })
    }

    /// For tests that run on either backend: [`start`](Self::start), or `Ok(None)` when
    /// `options` select the docker backend and [`docker::usable`](crate::docker::usable) says
    /// it cannot be used here (it says why on stderr).
    ///
    /// # Errors
    ///
    /// As [`docker::usable`](crate::docker::usable) (docker required but unusable), and as
    /// [`start`](Self::start).
    #[cfg(feature = "docker")]
    pub async fn start_if_usable(
        options: ClusterOptions,
    ) -> Result<Option<TestCluster>, HarnessError> {
        if options.backend == Backend::Docker && !crate::docker::usable().await? {
            return Ok(None);
        }
        TestCluster::start(options).await.map(Some)
    }

    /// Starts `nodes` nodes with otherwise default options.
    pub async fn with_nodes(nodes: usize) -> Result<TestCluster, HarnessError> {
        TestCluster::start(ClusterOptions::default().nodes(nodes)).await
    }

    /// Number of nodes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The backend the nodes run on.
    #[must_use]
    pub fn backend(&self) -> Backend {
        self.options.backend
    }

    /// The URL of every node, in index order, for the code under test: the
    /// proxy's when proxies are on, otherwise the server's. `redis://127.0.0.1:<port>`,
    /// or `rediss://127.0.0.1:<port>` with `ClusterOptions::tls` (a proxy passes
    /// the TLS bytes through untouched).
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|node| match &node.proxy {
                Some(proxy) => self.transport.url(proxy.addr()),
                None => self.transport.url(loopback(node.port)),
            })
            .collect()
    }

    /// The URL of node `index`'s `redis-server` itself, bypassing any proxy
    /// (`rediss://` with TLS).
    pub fn direct_url(&self, index: usize) -> Result<String, HarnessError> {
        Ok(self.transport.url(loopback(self.node(index)?.port)))
    }

    /// The cluster's TLS files (its CA, and the certificate and key every node
    /// presents), or `None` if it was started without `ClusterOptions::tls`.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[must_use]
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.transport.tls_files()
    }

    /// The CA certificate (PEM) a client must trust to verify the nodes, or
    /// `None` without `ClusterOptions::tls`. Shorthand for
    /// `tls().map(TlsFiles::ca_pem)`.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[must_use]
    pub fn tls_ca_pem(&self) -> Option<&str> {
        self.tls().map(TlsFiles::ca_pem)
    }

    /// The port node `index`'s `redis-server` listens on (it keeps it across
    /// restarts). On the docker backend: the port published on 127.0.0.1.
    pub fn port(&self, index: usize) -> Result<u16, HarnessError> {
        Ok(self.node(index)?.port)
    }

    /// The proxy in front of node `index`; `None` if proxies are off or the
    /// index is out of range.
    #[must_use]
    pub fn proxy(&self, index: usize) -> Option<&FaultProxy> {
        self.nodes.get(index)?.proxy.as_ref()
    }

    /// The process id of node `index`'s `redis-server`, or `None` if it is not
    /// running (killed, stopped, or exited by itself). On the docker backend:
    /// the server's host process id as the engine reports it.
    pub fn pid(&mut self, index: usize) -> Result<Option<u32>, HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => server.pid(),
            #[cfg(feature = "docker")]
            Server::Docker(server) => Ok(server.pid()),
        }
    }

    /// Whether node `index`'s server is alive; a paused node counts as running.
    pub fn is_running(&mut self, index: usize) -> Result<bool, HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => server.is_running(),
            #[cfg(feature = "docker")]
            Server::Docker(server) => Ok(server.is_running()),
        }
    }

    /// Kills node `index` with SIGKILL (no shutdown, no goodbye to clients) and
    /// reaps it (docker: `docker kill`). Its data is lost unless persisted
    /// ([`Persistence::AofAlways`](crate::Persistence::AofAlways)). Does nothing if the node is
    /// not running.
    pub async fn kill(&mut self, index: usize) -> Result<(), HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => server.kill(index).await,
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.kill(index).await,
        }
    }

    /// Stops node `index` gracefully with SIGTERM (redis closes its clients),
    /// falling back to SIGKILL if it has not exited after a few seconds
    /// (docker: `docker stop`). Does nothing if the node is not running.
    pub async fn stop(&mut self, index: usize) -> Result<(), HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => server.stop(index).await,
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.stop(index).await,
        }
    }

    /// Starts node `index` again, on the same port and in the same directory
    /// (docker: the same container), and waits until it answers. It comes back
    /// empty with [`Persistence::None`](crate::Persistence::None), with its data with
    /// [`Persistence::AofAlways`](crate::Persistence::AofAlways).
    ///
    /// Fails with [`HarnessError::AlreadyRunning`] if it is running, and with
    /// [`HarnessError::PortUnavailable`] if another socket holds its port for
    /// longer than a couple of seconds.
    ///
    /// (Named `start_node` because [`TestCluster::start`] starts the cluster.)
    pub async fn start_node(&mut self, index: usize) -> Result<(), HarnessError> {
        let options = &self.options;
        let node = self
            .nodes
            .get_mut(index)
            .ok_or(HarnessError::NoSuchNode(index))?;
        let port = node.port;
        match &mut node.server {
            Server::Process(server) => server.start_again(options, index, port).await,
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.start_again(options, index, port).await,
        }
    }

    /// [`stop`](Self::stop) then [`start_node`](Self::start_node).
    pub async fn restart(&mut self, index: usize) -> Result<(), HarnessError> {
        self.stop(index).await?;
        self.start_node(index).await
    }

    /// Freezes node `index` with SIGSTOP (docker: `docker pause`): its sockets
    /// stay open and the kernel keeps accepting and queueing requests, but
    /// nothing is answered until [`resume`](Self::resume). On the docker
    /// backend this waits for the engine's answer (milliseconds; at most 30 s).
    pub fn pause(&mut self, index: usize) -> Result<(), HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => server.pause(index),
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.pause(index),
        }
    }

    /// Lets a paused node `index` run again (SIGCONT; docker: `docker
    /// unpause`); it then answers the requests queued meanwhile.
    pub fn resume(&mut self, index: usize) -> Result<(), HarnessError> {
        match &mut self.node_mut(index)?.server {
            Server::Process(server) => server.resume(index),
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.resume(index),
        }
    }

    /// Deletes every key on node `index` (FLUSHALL over a direct connection).
    pub async fn flush(&mut self, index: usize) -> Result<(), HarnessError> {
        if !self.is_running(index)? {
            return Err(HarnessError::NotRunning(index));
        }
        let mut connection = self.connection(index).await?;
        let () = redis::cmd("FLUSHALL").query_async(&mut connection).await?;
        Ok(())
    }

    /// A new connection straight to node `index`'s server (bypassing any
    /// proxy), for inspecting it from a test (GET, DBSIZE, ...), as the default
    /// user; over TLS, trusting the cluster's CA, with `ClusterOptions::tls`.
    /// Connecting and each response time out after one second; change the
    /// latter with [`MultiplexedConnection::set_response_timeout`].
    pub async fn connection(&self, index: usize) -> Result<MultiplexedConnection, HarnessError> {
        let node = self.node(index)?;
        Ok(self
            .transport
            .connect(node.port, INSPECTION_TIMEOUT)
            .await?)
    }

    /// Waits until node `index`'s server reports an `uptime_in_seconds` of at least `uptime`
    /// (whole seconds, as Redis counts them), polling `INFO server` every 100 ms for at most
    /// `uptime` plus 5 s; for a server that must have been running well before some event, as
    /// a standby replica has. Returns the uptime last reported: the caller checks it.
    pub async fn wait_for_uptime(
        &self,
        index: usize,
        uptime: Duration,
    ) -> Result<Duration, HarnessError> {
        let mut connection = self.connection(index).await?;
        let polls = uptime.as_millis().saturating_add(5_000) / 100;
        let mut reported = Duration::ZERO;
        for _ in 0..polls {
            let info: String = redis::cmd("INFO")
                .arg("server")
                .query_async(&mut connection)
                .await?;
            reported = Duration::from_secs(
                info.lines()
                    .find_map(|line| line.strip_prefix("uptime_in_seconds:"))
                    .and_then(|value| value.trim().parse().ok())
                    .unwrap_or(0),
            );
            if reported >= uptime {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(reported)
    }

    /// Drops `what` of node `index`'s packets from now on (replacing what was dropped for it
    /// before) until [`heal_packets`](Self::heal_packets): a real partition, where segments
    /// vanish and TCP retransmits, unlike the proxy's faults. The rules match the server's own
    /// socket, behind any proxy, so they cut every path to the node, the harness's
    /// [`connection`](Self::connection)s too; see [`PacketDrop`] for what each choice lets
    /// through. The rules are removed when the cluster is dropped.
    ///
    /// Uses nftables (`nft`): one table per cluster, `inet quorumlock_<pid>_<n>`, rewritten
    /// atomically; tables of processes that no longer exist are deleted first. On the docker
    /// backend the rules match the container's bridge address and port 6379 as it is now (a
    /// container restarted later may get another address: drop its packets again then).
    ///
    /// # Errors
    ///
    /// [`HarnessError::NftNotFound`], [`HarnessError::NftNotPermitted`] (needs root or
    /// `CAP_NET_ADMIN`), [`HarnessError::Nft`]; [`HarnessError::NotRunning`] for a stopped
    /// container (it has no address).
    pub async fn drop_packets(
        &mut self,
        index: usize,
        what: PacketDrop,
    ) -> Result<(), HarnessError> {
        let socket = self.server_socket(index).await?;
        self.netfilter.drop_packets(index, socket, what).await
    }

    /// Lets node `index`'s packets pass again (nothing if none were dropped). Connections
    /// that lost segments recover as TCP retransmits them, after its back-off (hundreds of
    /// milliseconds or more); new ones can be made at once.
    pub async fn heal_packets(&mut self, index: usize) -> Result<(), HarnessError> {
        self.node(index)?;
        self.netfilter.heal(index).await
    }

    /// Sets node `index`'s clock `offset_ms` milliseconds ahead of real time (behind if
    /// negative), at once: a jump by the difference to the offset before. Needs
    /// [`ClusterOptions::clock_jumps`] for the node, else [`HarnessError::NoClockJumps`].
    pub fn set_clock_offset(&self, index: usize, offset_ms: i64) -> Result<(), HarnessError> {
        let clock = self
            .node(index)?
            .clock
            .as_ref()
            .ok_or(HarnessError::NoClockJumps(index))?;
        clock.set_offset_ms(offset_ms)?;
        info!(node = index, offset_ms, "clock offset set");
        Ok(())
    }

    /// Where node `index`'s server socket is, as its packets carry it.
    async fn server_socket(&self, index: usize) -> Result<ServerSocket, HarnessError> {
        let node = self.node(index)?;
        match &node.server {
            Server::Process(_) => Ok(ServerSocket {
                addr: Ipv4Addr::LOCALHOST,
                port: node.port,
            }),
            #[cfg(feature = "docker")]
            Server::Docker(server) => server.bridge_socket(index).await,
        }
    }

    fn node(&self, index: usize) -> Result<&Node, HarnessError> {
        self.nodes.get(index).ok_or(HarnessError::NoSuchNode(index))
    }

    fn node_mut(&mut self, index: usize) -> Result<&mut Node, HarnessError> {
        self.nodes
            .get_mut(index)
            .ok_or(HarnessError::NoSuchNode(index))
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // Containers are removed all at once rather than one after another as the
        // nodes drop; processes are killed by their own `Drop`.
        #[cfg(feature = "docker")]
        crate::docker::remove_all_blocking(
            self.nodes
                .iter_mut()
                .filter_map(|node| match &mut node.server {
                    Server::Docker(server) => server.take_for_removal(),
                    Server::Process(_) => None,
                })
                .collect(),
        );
    }
}

/// What starting a node needs beyond the options, prepared once per cluster.
enum BackendContext {
    /// libfaketime's path, if any node has a clock rate or a clock that jumps.
    Process { libfaketime: Option<PathBuf> },
    #[cfg(feature = "docker")]
    Docker {
        docker: testcontainers::bollard::Docker,
        image: String,
    },
}

impl BackendContext {
    async fn prepare(options: &ClusterOptions) -> Result<BackendContext, HarnessError> {
        match options.backend {
            Backend::Process => Ok(BackendContext::Process {
                libfaketime: if options.fakes_clocks() {
                    Some(find_libfaketime()?)
                } else {
                    None
                },
            }),
            #[cfg(feature = "docker")]
            Backend::Docker => {
                let image = crate::docker::image();
                let docker = crate::docker::connect().await?;
                crate::docker::check_available(&image).await?;
                Ok(BackendContext::Docker { docker, image })
            }
            #[cfg(not(feature = "docker"))]
            Backend::Docker => Err(HarnessError::BackendNotCompiled(Backend::Docker)),
        }
    }
}

/// One node: its fixed port, its server and its proxy.
#[derive(Debug)]
struct Node {
    port: u16,
    // Field order matters for drop: the server goes before the proxy in front of it and the
    // clock file it reads.
    server: Server,
    proxy: Option<FaultProxy>,
    /// Its jumpable clock, with [`ClusterOptions::clock_jumps`].
    clock: Option<ClockFile>,
}

/// A node's server, by backend.
#[derive(Debug)]
enum Server {
    Process(ProcessServer),
    #[cfg(feature = "docker")]
    Docker(DockerServer),
}

/// Starts node `index` for a new cluster: a free port (a few tries, as the port can be taken
/// between finding it and the server binding it), the server, and the proxy if asked for.
async fn start_new_node(
    options: &ClusterOptions,
    transport: &Transport,
    backend: &BackendContext,
    index: usize,
) -> Result<Node, HarnessError> {
    let clock = if options.clock_jumps.contains(&index) {
        Some(ClockFile::new(
            index,
            options.clock_rates.get(&index).copied(),
        )?)
    } else {
        None
    };
    let clock_dir = clock.as_ref().map(ClockFile::dir);
    let (server, port) = match backend {
        BackendContext::Process { libfaketime } => {
            let (server, port) = ProcessServer::start_new(
                options,
                transport,
                libfaketime.as_deref(),
                clock_dir,
                index,
            )
            .await?;
            (Server::Process(server), port)
        }
        #[cfg(feature = "docker")]
        BackendContext::Docker { docker, image } => {
            let (server, port) =
                DockerServer::start_new(options, transport, docker, image, clock_dir, index)
                    .await?;
            (Server::Docker(server), port)
        }
    };
    let proxy = if options.proxies {
        let upstream = loopback(port);
        Some(FaultProxy::start(upstream).await?)
    } else {
        None
    };
    Ok(Node {
        port,
        server,
        proxy,
        clock,
    })
}

/// `127.0.0.1:port`.
fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}
