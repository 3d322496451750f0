//! How a cluster's servers listen and how the harness reaches them: plain TCP, or (cargo
//! feature `tls`) TLS only. One [`Transport`] per cluster, shared by its nodes on either backend.

use std::net::SocketAddr;
use std::path::Path;
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::error::HarnessError;
use crate::options::ClusterOptions;
use crate::probe::connect_plain;
#[cfg(feature = "tls")]
use crate::tls::TlsFiles;

/// Plain TCP, or TLS with the cluster's own CA and certificate.
#[derive(Debug, Clone, Default)]
pub(crate) enum Transport {
    #[default]
    Plain,
    #[cfg(feature = "tls")]
    Tls(Arc<TlsFiles>),
}

impl Transport {
    /// The transport `options` ask for; makes the TLS files if they ask for TLS.
    pub(crate) fn for_options(options: &ClusterOptions) -> Result<Transport, HarnessError> {
        #[cfg(feature = "tls")]
        if options.tls || options.tls_auth_clients {
            let files = TlsFiles::generate(options.tls_auth_clients)?;
            return Ok(Transport::Tls(Arc::new(files)));
        }
        let _ = options;
        Ok(Transport::Plain)
    }

    /// The cluster's TLS files, if it uses TLS.
    #[cfg(feature = "tls")]
    pub(crate) fn tls_files(&self) -> Option<&TlsFiles> {
        match self {
            Transport::Plain => None,
            Transport::Tls(files) => Some(files),
        }
    }

    /// The host directory to make visible to a server (as a container mount), if any.
    #[cfg(feature = "docker")]
    pub(crate) fn host_dir(&self) -> Option<&Path> {
        match self {
            Transport::Plain => None,
            #[cfg(feature = "tls")]
            Transport::Tls(files) => Some(files.dir()),
        }
    }

    /// `redis://addr` or, with TLS, `rediss://addr`.
    pub(crate) fn url(&self, addr: SocketAddr) -> String {
        match self {
            Transport::Plain => format!("redis://{addr}"),
            #[cfg(feature = "tls")]
            Transport::Tls(_) => format!("rediss://{addr}"),
        }
    }

    /// The `redis-server` arguments that make it listen on `port`: `--port` alone, or TLS only
    /// (`--port 0 --tls-port …`) with the files in `dir` as the server sees it (`None`: the
    /// host directory).
    #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
    pub(crate) fn listen_args(&self, port: u16, dir: Option<&Path>) -> Vec<String> {
        match self {
            Transport::Plain => vec!["--port".into(), port.to_string()],
            #[cfg(feature = "tls")]
            Transport::Tls(files) => {
                crate::tls::server_args(port, dir.unwrap_or(files.dir()), files.auth_clients())
            }
        }
    }

    /// A connection to the server on `127.0.0.1:port`; `timeout` bounds connecting and each
    /// response.
    pub(crate) async fn connect(
        &self,
        port: u16,
        timeout: Duration,
    ) -> redis::RedisResult<MultiplexedConnection> {
        match self {
            Transport::Plain => connect_plain(port, timeout).await,
            #[cfg(feature = "tls")]
            Transport::Tls(files) => files.connect(port, timeout).await,
        }
    }
}
