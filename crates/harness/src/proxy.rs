//! A fault-injecting TCP proxy on 127.0.0.1 in front of one upstream server.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::{self, Either};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::error::HarnessError;

/// How long the proxy waits for the upstream server to accept a connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Size of one read; a chunk is at most this many bytes.
const CHUNK_SIZE: usize = 16 * 1024;
/// Chunks in flight per direction; a full queue pushes back on the reader.
const CHUNK_QUEUE: usize = 1024;
/// Attempts to listen on the proxy's port again in [`FaultProxy::heal`].
const REBIND_ATTEMPTS: u32 = 50;
/// Pause between those attempts (the port may briefly be held by another socket).
const REBIND_DELAY: Duration = Duration::from_millis(20);
/// Pause after a failed `accept` so that a persistent error (e.g. out of file
/// descriptors) does not spin the accept loop.
const ACCEPT_ERROR_DELAY: Duration = Duration::from_millis(10);

/// What the proxy does to traffic; shared with every task through a watch channel.
#[derive(Debug, Clone, Copy, Default)]
struct Mode {
    /// Added delay for each chunk, in each direction.
    latency: Duration,
    /// Up to this much more, drawn uniformly for each chunk.
    jitter: Duration,
    /// Read and discard everything instead of forwarding it.
    blackhole: bool,
}

/// A fault-injecting TCP proxy listening on a free 127.0.0.1 port and
/// forwarding to one upstream address (typically one `redis-server`).
///
/// The proxy runs as tasks on the Tokio runtime that called
/// [`FaultProxy::start`]; await its async methods on that same runtime. All of
/// its tasks (listener and every proxied connection) are aborted when the
/// proxy is dropped.
///
/// Faults:
/// * [`set_latency`](Self::set_latency): delay every chunk of bytes;
/// * [`set_jitter`](Self::set_jitter): and by a random extra for each chunk;
/// * [`blackhole`](Self::blackhole): a hung server (connections succeed,
///   nothing is ever answered);
/// * [`refuse`](Self::refuse): new connections are refused;
/// * [`cut`](Self::cut): open connections are closed;
/// * [`switch_upstream`](Self::switch_upstream): new connections go to another server (a
///   failover behind one address);
/// * [`heal`](Self::heal): back to plain forwarding.
///
/// If the upstream server is down, a connection to the proxy is accepted and
/// then closed at once (unless the proxy is a black hole, which keeps it open
/// and silent).
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    /// Where new connections are forwarded to.
    upstream: watch::Sender<SocketAddr>,
    mode: watch::Sender<Mode>,
    connections: Arc<Connections>,
    /// The accept loop, which owns the listening socket; `None` while refusing.
    listener_task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

impl FaultProxy {
    /// Starts a proxy on a free 127.0.0.1 port that forwards to `upstream`.
    ///
    /// The proxy's tasks run on the current Tokio runtime (which needs I/O and
    /// time enabled); it returns [`HarnessError::NoRuntime`] when there is none.
    pub async fn start(upstream: SocketAddr) -> Result<FaultProxy, HarnessError> {
        tokio::runtime::Handle::try_current().map_err(|_| HarnessError::NoRuntime)?;
        let any_port = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let listener = TcpListener::bind(any_port)
            .await
            .map_err(|source| HarnessError::Bind {
                addr: any_port,
                source,
            })?;
        let addr = listener.local_addr()?;
        let (mode, _) = watch::channel(Mode::default());
        let connections = Arc::new(Connections::default());
        let (upstream, _) = watch::channel(upstream);
        let listener_task = tokio::spawn(accept_loop(
            listener,
            upstream.subscribe(),
            mode.subscribe(),
            Arc::clone(&connections),
        ));
        debug!(%addr, upstream = %*upstream.borrow(), "fault proxy started");
        Ok(FaultProxy {
            addr,
            upstream,
            mode,
            connections,
            listener_task: tokio::sync::Mutex::new(Some(listener_task)),
        })
    }

    /// The address clients should connect to.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The upstream address new connections are forwarded to.
    #[must_use]
    pub fn upstream(&self) -> SocketAddr {
        *self.upstream.borrow()
    }

    /// Forwards new connections to `upstream` from now on, as a failover behind one address
    /// does (a promoted replica behind the same DNS name or proxy). Open connections keep their
    /// server until they are [`cut`](Self::cut), as they would behind a real proxy.
    pub fn switch_upstream(&self, upstream: SocketAddr) {
        debug!(proxy = %self.addr, %upstream, "switch upstream");
        self.upstream.send_replace(upstream);
    }

    /// A Redis URL for the proxy, `redis://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Delays every chunk of bytes by `latency`, in both directions, so a
    /// request/response round trip gains twice `latency`.
    ///
    /// Each chunk is delivered at its arrival time plus the latency in force
    /// when it arrived, so pipelined requests are delayed, not serialized.
    /// Chunks already queued keep their delay. `Duration::ZERO` turns it off.
    /// The delay is kept to within the OS's timer slack (tens of µs), not
    /// rounded up to Tokio's 1 ms timer tick, so sub-millisecond latencies
    /// mean what they say.
    pub fn set_latency(&self, latency: Duration) {
        debug!(proxy = %self.addr, ?latency, "set latency");
        self.mode.send_modify(|mode| mode.latency = latency);
    }

    /// Adds a random extra delay to every chunk of bytes, in both directions: drawn for each
    /// chunk uniformly from `[0, jitter)` on top of the [latency](Self::set_latency), so a
    /// round trip varies as on a real network.
    ///
    /// Bytes stay in order: a chunk is never written before the chunk read before it, so one
    /// that drew a shorter delay than its predecessor leaves right after it. Chunks already
    /// queued keep their delay. `Duration::ZERO` turns it off; [`heal`](Self::heal) too.
    pub fn set_jitter(&self, jitter: Duration) {
        debug!(proxy = %self.addr, ?jitter, "set jitter");
        self.mode.send_modify(|mode| mode.jitter = jitter);
    }

    /// Turns the proxy into a hung server: from now on bytes in both directions
    /// are read and discarded, on open connections and on new ones, which are
    /// still accepted. No reply ever comes.
    ///
    /// Clients whose requests were swallowed usually cannot trust those
    /// connections after [`heal`](Self::heal); [`cut`](Self::cut) them to force
    /// a reconnect.
    pub fn blackhole(&self) {
        debug!(proxy = %self.addr, "blackhole");
        self.mode.send_modify(|mode| mode.blackhole = true);
    }

    /// Stops listening, so new connections are refused by the kernel; open
    /// connections are left alone. When this returns, the port is closed.
    pub async fn refuse(&self) {
        debug!(proxy = %self.addr, "refuse new connections");
        let task = self.listener_task.lock().await.take();
        if let Some(task) = task {
            task.abort();
            // Awaiting the aborted task waits until its future, and with it the
            // listening socket, has been dropped.
            if let Err(err) = task.await
                && !err.is_cancelled()
            {
                warn!(proxy = %self.addr, %err, "accept loop failed");
            }
        }
    }

    /// Closes every open proxied connection, both the client and the upstream
    /// side. New connections are still accepted. When this returns, the
    /// connections are closed.
    pub async fn cut(&self) {
        let tasks = self.connections.take();
        debug!(proxy = %self.addr, connections = tasks.len(), "cut connections");
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            // Waits until the task's sockets have been dropped.
            if let Err(err) = task.await
                && !err.is_cancelled()
            {
                warn!(proxy = %self.addr, %err, "proxied connection failed");
            }
        }
    }

    /// Back to plain forwarding: no latency or jitter, no black hole, and listening again
    /// on the same port if [`refuse`](Self::refuse) closed it. When this
    /// returns, new connections are accepted.
    ///
    /// Fails with [`HarnessError::Bind`] if the port cannot be bound again
    /// within a few attempts (another socket took it meanwhile).
    pub async fn heal(&self) -> Result<(), HarnessError> {
        debug!(proxy = %self.addr, "heal");
        self.mode.send_replace(Mode::default());
        let mut slot = self.listener_task.lock().await;
        if slot.is_none() {
            let listener = bind_again(self.addr).await?;
            *slot = Some(tokio::spawn(accept_loop(
                listener,
                self.upstream.subscribe(),
                self.mode.subscribe(),
                Arc::clone(&self.connections),
            )));
        }
        Ok(())
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(task) = self.listener_task.get_mut().take() {
            task.abort();
        }
        for task in self.connections.close() {
            task.abort();
        }
    }
}

/// Tasks of the open proxied connections, so they can be cut or aborted.
#[derive(Debug)]
struct Connections {
    /// `None` once the proxy is dropped: an accept racing with the drop must
    /// not start a task nobody would abort.
    tasks: Mutex<Option<Vec<JoinHandle<()>>>>,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            tasks: Mutex::new(Some(Vec::new())),
        }
    }
}

impl Connections {
    fn lock(&self) -> MutexGuard<'_, Option<Vec<JoinHandle<()>>>> {
        // The list stays consistent even if a holder panicked: every operation
        // on it is a single push, retain or take.
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Spawns a connection task and records it; finished tasks are forgotten
    /// here so the list only grows with live connections. After `close` the
    /// connection is dropped unserved, which closes the client's socket.
    fn spawn(&self, connection: impl Future<Output = ()> + Send + 'static) {
        if let Some(tasks) = self.lock().as_mut() {
            tasks.retain(|task| !task.is_finished());
            tasks.push(tokio::spawn(connection));
        }
    }

    /// The tasks of the connections open now; later ones are still recorded.
    fn take(&self) -> Vec<JoinHandle<()>> {
        self.lock().as_mut().map(mem::take).unwrap_or_default()
    }

    /// The tasks of the connections open now; later ones are refused.
    fn close(&self) -> Vec<JoinHandle<()>> {
        self.lock().take().unwrap_or_default()
    }
}

/// Listens on `addr` again, retrying briefly: right after the old listener was
/// closed the port can still be held by another socket.
async fn bind_again(addr: SocketAddr) -> Result<TcpListener, HarnessError> {
    let mut attempt = 1;
    loop {
        match TcpListener::bind(addr).await {
            Ok(listener) => return Ok(listener),
            Err(source) if attempt >= REBIND_ATTEMPTS => {
                return Err(HarnessError::Bind { addr, source });
            }
            Err(err) => {
                debug!(%addr, attempt, %err, "rebind failed, retrying");
                attempt += 1;
                tokio::time::sleep(REBIND_DELAY).await;
            }
        }
    }
}

/// Accepts connections until the task is aborted (by `refuse` or drop).
async fn accept_loop(
    listener: TcpListener,
    upstream: watch::Receiver<SocketAddr>,
    mode: watch::Receiver<Mode>,
    connections: Arc<Connections>,
) {
    loop {
        let accepted = listener.accept().await;
        let upstream = *upstream.borrow();
        match accepted {
            Ok((client, peer)) => {
                debug!(%peer, %upstream, "accepted");
                connections.spawn(serve_connection(client, upstream, mode.clone()));
            }
            Err(err) => {
                warn!(%upstream, %err, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_DELAY).await;
            }
        }
    }
}

/// Proxies one client connection until either side closes or fails.
async fn serve_connection(client: TcpStream, upstream: SocketAddr, mode: watch::Receiver<Mode>) {
    let server =
        match tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream)).await {
            Ok(Ok(server)) => server,
            Ok(Err(err)) => {
                debug!(%upstream, %err, "upstream connect failed");
                return swallow_while_blackholed(client, mode).await;
            }
            Err(_) => {
                debug!(%upstream, "upstream connect timed out");
                return swallow_while_blackholed(client, mode).await;
            }
        };
    // Requests are small; without NODELAY the proxy itself would add delays.
    for stream in [&client, &server] {
        if let Err(err) = stream.set_nodelay(true) {
            debug!(%err, "set_nodelay failed");
        }
    }
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let to_server = forward(client_read, server_write, mode.clone());
    let to_client = forward(server_read, client_write, mode);
    if let Err(err) = future::try_join(to_server, to_client).await {
        debug!(%upstream, %err, "proxied connection ended with an error");
    }
}

/// Without an upstream there is nothing to forward to. A black hole still
/// looks like a hung server: keep reading and discarding until the client
/// leaves or the black hole is lifted. Otherwise close at once.
async fn swallow_while_blackholed(mut client: TcpStream, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0; CHUNK_SIZE];
    while mode.borrow_and_update().blackhole {
        let read = pin!(client.read(&mut buf));
        let changed = pin!(mode.changed());
        match future::select(read, changed).await {
            Either::Left((Ok(0) | Err(_), _)) | Either::Right((Err(_), _)) => return,
            Either::Left((Ok(_), _)) | Either::Right((Ok(()), _)) => {}
        }
    }
}

/// A chunk of bytes and the moment it may be written on.
struct Chunk {
    deliver_at: Instant,
    bytes: Vec<u8>,
}

/// A delay drawn uniformly from `[0, jitter)`; zero without jitter.
fn draw(jitter: Duration) -> Duration {
    let nanos = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        Duration::ZERO
    } else {
        Duration::from_nanos(rand::random_range(0..nanos))
    }
}

/// Tokio's timer resolution: a sleep ends at the first tick at or after its deadline.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// Waits until `at`, within about the OS's timer slack (tens of µs) rather than Tokio's tick:
/// Tokio's timer for all but the last tick, then a sleep on a blocking thread for the rest.
/// With Tokio's timer alone every delay would come out up to a millisecond longer than set,
/// which stretches a 0.2 ms round trip to well over 2 ms.
async fn wait_until(at: Instant) {
    if let Some(coarse) = at.checked_sub(TIMER_TICK)
        && coarse > Instant::now()
    {
        tokio::time::sleep_until(coarse).await;
    }
    let left = at.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return;
    }
    if tokio::task::spawn_blocking(move || std::thread::sleep(left))
        .await
        .is_err()
    {
        // The blocking pool is shutting down: Tokio's timer is still a lower bound.
        tokio::time::sleep_until(at).await;
    }
}

/// Copies one direction of a connection, applying the current mode.
///
/// A reader stamps each chunk with its delivery time and queues it; a writer
/// waits for that time and writes. The two run concurrently, so later chunks
/// are read (and their delay starts) while earlier ones wait. The writer takes
/// the chunks in the order they were read, so none overtakes another, whatever
/// delay each drew.
async fn forward(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mode: watch::Receiver<Mode>,
) -> io::Result<()> {
    let (queue, mut queued) = mpsc::channel::<Chunk>(CHUNK_QUEUE);
    let reader_mode = mode.clone();
    let read = async move {
        let mut buf = vec![0; CHUNK_SIZE];
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                // End of stream: dropping `queue` lets the writer finish.
                return Ok(());
            }
            let Mode {
                latency,
                jitter,
                blackhole,
            } = *reader_mode.borrow();
            if blackhole {
                continue;
            }
            let chunk = Chunk {
                deliver_at: Instant::now() + latency + draw(jitter),
                bytes: buf[..n].to_vec(),
            };
            if queue.send(chunk).await.is_err() {
                return Ok(());
            }
        }
    };
    let write = async move {
        while let Some(chunk) = queued.recv().await {
            wait_until(chunk.deliver_at).await;
            // A black hole started while the chunk was delayed swallows it too.
            if mode.borrow().blackhole {
                continue;
            }
            to.write_all(&chunk.bytes).await?;
        }
        to.shutdown().await
    };
    future::try_join(read, write).await.map(|_| ())
}
