//! How to start a cluster: [`ClusterOptions`] and what it chooses, [`Persistence`] and the
//! [`Backend`] (read from `QUORUMLOCK_BACKEND` here; the type itself is in `backend.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::Backend;
use crate::env::{BACKEND_ENV, REDIS_SERVER_ENV};
use crate::error::HarnessError;

impl Backend {
    /// The backend named by `QUORUMLOCK_BACKEND` ([`BACKEND_ENV`]): `process` or `docker`
    /// (ASCII case and surrounding blanks ignored); unset or empty means [`Backend::Process`].
    ///
    /// # Errors
    ///
    /// [`HarnessError::UnknownBackend`] for any other value.
    pub fn from_env() -> Result<Backend, HarnessError> {
        match std::env::var(BACKEND_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(Backend::Process),
            Err(std::env::VarError::NotUnicode(value)) => Err(HarnessError::UnknownBackend {
                value: value.to_string_lossy().into_owned(),
            }),
            Ok(value) => value.parse(),
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = HarnessError;

    /// `process` or `docker` (ASCII case and surrounding blanks ignored); empty means
    /// [`Backend::Process`].
    fn from_str(value: &str) -> Result<Backend, HarnessError> {
        let trimmed = value.trim();
        if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("process") {
            Ok(Backend::Process)
        } else if trimmed.eq_ignore_ascii_case("docker") {
            Ok(Backend::Docker)
        } else {
            Err(HarnessError::UnknownBackend {
                value: value.to_owned(),
            })
        }
    }
}

/// What a node keeps across a restart.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Persistence {
    /// Nothing: no RDB snapshots, no AOF. A node comes back from
    /// [`kill`](crate::TestCluster::kill), [`stop`](crate::TestCluster::stop) or
    /// [`restart`](crate::TestCluster::restart) empty (the default).
    #[default]
    None,
    /// `--appendonly yes --appendfsync always`: every write is in the append-only file (and
    /// fsynced) before it is answered, and a node comes back with all its acknowledged data,
    /// even after SIGKILL. Unless [`ClusterOptions::data_dir`] says otherwise, the files live
    /// on `/dev/shm` (tmpfs) where it exists: they survive any kill or restart of a node, not a
    /// reboot of the machine, and the fsync costs nothing (on a disk it can cost milliseconds
    /// per write).
    AofAlways,
}

/// Where node data directories are made when [`ClusterOptions::data_dir`] is not set and AOF is
/// on: memory-backed, so that `appendfsync always` is cheap.
const TMPFS: &str = "/dev/shm";

/// How to start a [`TestCluster`](crate::TestCluster); build it from `ClusterOptions::default()`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClusterOptions {
    pub(crate) nodes: usize,
    pub(crate) proxies: bool,
    pub(crate) redis_server: PathBuf,
    pub(crate) extra_args: Vec<String>,
    pub(crate) ready_timeout: Duration,
    pub(crate) backend: Backend,
    persistence: Persistence,
    data_dir: Option<PathBuf>,
    pub(crate) clock_rates: BTreeMap<usize, f64>,
    pub(crate) clock_jumps: BTreeSet<usize>,
    #[cfg(feature = "tls")]
    pub(crate) tls: bool,
    #[cfg(feature = "tls")]
    pub(crate) tls_auth_clients: bool,
}

impl Default for ClusterOptions {
    /// Five nodes, no proxies, the `redis-server` named by
    /// `QUORUMLOCK_REDIS_SERVER` (or found on `PATH`), no extra arguments,
    /// ten seconds to become ready, the process backend (whatever
    /// `QUORUMLOCK_BACKEND` says: use [`Backend::from_env`] to honour it), no
    /// persistence, node data in the system's temporary directory (on `/dev/shm` with
    /// [`Persistence::AofAlways`]), every clock at real time, plain TCP (no TLS).
    fn default() -> Self {
        let redis_server = std::env::var_os(REDIS_SERVER_ENV)
            .filter(|path| !path.is_empty())
            .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from);
        ClusterOptions {
            nodes: 5,
            proxies: false,
            redis_server,
            extra_args: Vec::new(),
            ready_timeout: Duration::from_secs(10),
            backend: Backend::Process,
            persistence: Persistence::None,
            data_dir: None,
            clock_rates: BTreeMap::new(),
            clock_jumps: BTreeSet::new(),
            #[cfg(feature = "tls")]
            tls: false,
            #[cfg(feature = "tls")]
            tls_auth_clients: false,
        }
    }
}

impl ClusterOptions {
    /// Number of `redis-server` processes (default 5).
    #[must_use]
    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// Puts a [`FaultProxy`](crate::FaultProxy) in front of every node and makes
    /// [`TestCluster::urls`](crate::TestCluster::urls) point at the proxies (default `false`).
    #[must_use]
    pub fn proxies(mut self, proxies: bool) -> Self {
        self.proxies = proxies;
        self
    }

    /// The `redis-server` binary to run. A wrapper script must `exec` the
    /// server: the harness recognises its server by the process id it reports.
    #[must_use]
    pub fn redis_server(mut self, path: impl Into<PathBuf>) -> Self {
        self.redis_server = path.into();
        self
    }

    /// Extra command-line arguments for every `redis-server`, appended after
    /// the harness's own (so they can override them), e.g.
    /// `["--maxmemory", "10mb"]`.
    #[must_use]
    pub fn extra_args(mut self, args: Vec<String>) -> Self {
        self.extra_args = args;
        self
    }

    /// How long each node may take to answer after being started (default 10 s).
    #[must_use]
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Where the nodes run (default [`Backend::Process`]). [`Backend::Docker`] needs the
    /// `docker` cargo feature; without it [`TestCluster::start`](crate::TestCluster::start)
    /// fails with [`HarnessError::BackendNotCompiled`]. The `redis_server` setting only applies
    /// to processes; containers run the image named by `QUORUMLOCK_REDIS_IMAGE`.
    #[must_use]
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// What every node keeps across restarts (default [`Persistence::None`]).
    #[must_use]
    pub fn persistence(mut self, persistence: Persistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// The directory in which each node gets its own data directory (deleted with the
    /// cluster). By default: `/dev/shm` (tmpfs) with [`Persistence::AofAlways`] when it exists,
    /// so that `appendfsync always` costs nothing, else the system's temporary directory. Give
    /// a directory on a disk to measure what the fsync really costs there.
    ///
    /// On the docker backend this matters only with [`Persistence::AofAlways`]: each container
    /// then bind-mounts its own directory made here at `/data`, so its append-only file survives
    /// the container being stopped and started (a tmpfs mount would not: Docker empties it at
    /// every stop). The engine must run on this machine.
    #[must_use]
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// The persistence asked for.
    #[cfg(feature = "docker")]
    pub(crate) fn persistence_mode(&self) -> Persistence {
        self.persistence
    }

    /// Where node data directories are made: the one set, else `/dev/shm` with AOF on (if it is
    /// a directory), else `None` for the system's temporary directory.
    pub(crate) fn data_parent(&self) -> Option<PathBuf> {
        if let Some(dir) = &self.data_dir {
            return Some(dir.clone());
        }
        let tmpfs = Path::new(TMPFS);
        (self.persistence == Persistence::AofAlways && tmpfs.is_dir()).then(|| tmpfs.to_owned())
    }

    /// A new, empty data directory for node `index` (see [`data_parent`](Self::data_parent)).
    pub(crate) fn node_data_dir(&self, index: usize) -> std::io::Result<tempfile::TempDir> {
        let prefix = format!("quorumlock-node{index}-");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix);
        match self.data_parent() {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        }
    }

    /// Makes node `node`'s clocks (wall and monotonic) run at `rate` times real time, from the
    /// moment it starts (and again from each restart): with `10.0` a `PX 2000` key expires
    /// after 200 ms, with `0.5` after 4 s. Setting a node again replaces its rate.
    ///
    /// Done with libfaketime (`LD_PRELOAD`, `FAKETIME="+0 x<rate>"`): processes need it
    /// installed (Debian package `faketime`; see [`LIBFAKETIME_ENV`](crate::LIBFAKETIME_ENV)),
    /// containers need it in the image (`scripts/redis-image.sh` puts it there). `libc.so.6` is
    /// preloaded after it so that glibc's allocator serves `malloc`: libfaketime's lazy
    /// initialisation deadlocks inside jemalloc's, which Debian's `redis-server` links.
    ///
    /// Checked by [`TestCluster::start`](crate::TestCluster::start):
    /// [`HarnessError::InvalidClockRate`] unless `rate` is finite and above zero,
    /// [`HarnessError::NoSuchNode`] if `node` is out of range.
    #[must_use]
    pub fn clock_rate(mut self, node: usize, rate: f64) -> Self {
        self.clock_rates.insert(node, rate);
        self
    }

    /// Lets node `node`'s wall clock jump at run time, forward or back, with
    /// [`TestCluster::set_clock_offset`](crate::TestCluster::set_clock_offset); it starts at
    /// real time (at the rate of [`clock_rate`](Self::clock_rate), if one is set too).
    ///
    /// Done with libfaketime reading its offset from a file of the node's own
    /// (`FAKETIME_TIMESTAMP_FILE` with `FAKETIME_NO_CACHE=1`, so a change shows at the next
    /// clock call; on the docker backend its directory is bind-mounted at `/faketime`). Without
    /// a clock rate only the wall clock (`CLOCK_REALTIME`, what key expiry uses) jumps, as when
    /// an operator or NTP steps a clock (`FAKETIME_DONT_FAKE_MONOTONIC=1`); with one, the
    /// monotonic clock is faked too, as for the rate alone. The offset is kept across
    /// restarts. Needs libfaketime as [`clock_rate`](Self::clock_rate) does;
    /// [`HarnessError::NoSuchNode`] at start if `node` is out of range.
    #[must_use]
    pub fn clock_jumps(mut self, node: usize) -> Self {
        self.clock_jumps.insert(node);
        self
    }

    /// Whether any node needs libfaketime.
    pub(crate) fn fakes_clocks(&self) -> bool {
        !self.clock_rates.is_empty() || !self.clock_jumps.is_empty()
    }

    /// Makes every node speak TLS only (default `false`; cargo feature `tls`).
    ///
    /// At [`TestCluster::start`](crate::TestCluster::start) the harness makes a CA for this
    /// cluster alone and one server certificate signed by it (valid for `127.0.0.1` and
    /// `localhost`), with rcgen, in a temporary directory deleted with the cluster. Each
    /// `redis-server` then runs with `--port 0 --tls-port <port> --tls-cert-file …
    /// --tls-key-file … --tls-ca-cert-file … --tls-auth-clients no`: no plain port, and no
    /// client certificate asked for ([`tls_auth_clients`](Self::tls_auth_clients) asks for one). On the docker backend the directory is bind-mounted
    /// read-only at `/tls` in each container.
    ///
    /// [`TestCluster::urls`](crate::TestCluster::urls) then gives `rediss://127.0.0.1:<port>`;
    /// a client trusts the nodes through [`TestCluster::tls_ca_pem`](crate::TestCluster::tls_ca_pem)
    /// or the file at [`TlsFiles::ca_cert_path`](crate::TlsFiles::ca_cert_path). The harness's own
    /// readiness probes and [`TestCluster::connection`](crate::TestCluster::connection) go over
    /// TLS, trusting that CA (through tokio-rustls, so the `redis` crate needs no TLS feature of
    /// its own). [`Backend::Docker`]'s image must hold a `redis-server` built with TLS (Debian's
    /// is, and so is the image `scripts/redis-image.sh` builds from it).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[must_use]
    pub fn tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// Makes every node speak TLS only, as [`tls`](Self::tls) does, and require a client
    /// certificate signed by the cluster's CA (`--tls-auth-clients yes`: mutual TLS; default
    /// `false`; cargo feature `tls`). `true` implies `tls(true)`.
    ///
    /// The harness makes that client certificate with the cluster's CA
    /// ([`TlsFiles::client_cert_pem`](crate::TlsFiles::client_cert_pem),
    /// [`TlsFiles::client_key_pem`](crate::TlsFiles::client_key_pem)) and presents it on its own
    /// connections; a client under test without it fails the TLS handshake.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[must_use]
    pub fn tls_auth_clients(mut self, required: bool) -> Self {
        self.tls_auth_clients = required;
        self
    }

    /// Checks the per-node settings against the node count.
    pub(crate) fn validate(&self) -> Result<(), HarnessError> {
        for (&node, &rate) in &self.clock_rates {
            if node >= self.nodes {
                return Err(HarnessError::NoSuchNode(node));
            }
            if !rate.is_finite() || rate <= 0.0 {
                return Err(HarnessError::InvalidClockRate { node, rate });
            }
        }
        if let Some(&node) = self.clock_jumps.iter().find(|&&node| node >= self.nodes) {
            return Err(HarnessError::NoSuchNode(node));
        }
        Ok(())
    }

    /// `redis-server` arguments shared by both backends: persistence, then the extra arguments.
    pub(crate) fn persistence_args(&self) -> Vec<String> {
        let mut args: Vec<String> = vec!["--save".into(), String::new()];
        match self.persistence {
            Persistence::None => args.extend(["--appendonly".into(), "no".into()]),
            Persistence::AofAlways => args.extend([
                "--appendonly".into(),
                "yes".into(),
                "--appendfsync".into(),
                "always".into(),
            ]),
        }
        args
    }

    /// libfaketime's environment for node `index`, empty if its clock is real: `LD_PRELOAD`
    /// (`libfaketime` is the library's path where the server runs), and `FAKETIME` for a rate
    /// alone, or the clock file (`clock_file`, its path where the server runs) for a clock that
    /// jumps.
    pub(crate) fn clock_env(
        &self,
        index: usize,
        libfaketime: &Path,
        clock_file: Option<&Path>,
    ) -> Vec<(String, String)> {
        let rate = self.clock_rates.get(&index);
        let mut env = match (clock_file, rate) {
            (None, None) => return Vec::new(),
            (None, Some(rate)) => vec![("FAKETIME".to_owned(), format!("+0 x{rate}"))],
            (Some(file), rate) => {
                let mut env = vec![
                    (
                        "FAKETIME_TIMESTAMP_FILE".to_owned(),
                        file.display().to_string(),
                    ),
                    ("FAKETIME_NO_CACHE".to_owned(), "1".to_owned()),
                ];
                if rate.is_none() {
                    env.push(("FAKETIME_DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned()));
                }
                env
            }
        };
        env.push((
            "LD_PRELOAD".to_owned(),
            format!("{} libc.so.6", libfaketime.display()),
        ));
        env
    }
}
