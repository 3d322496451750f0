//! TLS for a cluster's nodes (cargo feature `tls`): the CA, server certificate and client
//! certificate the harness makes for each cluster with rcgen, the files `redis-server` reads them
//! from, and the harness's own TLS connections (readiness probes,
//! [`TestCluster::connection`](crate::TestCluster::connection)), made with tokio-rustls (showing
//! the client certificate, for nodes that require one) and handed to redis-rs as a ready stream.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisConnectionInfo};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tempfile::TempDir;

use crate::error::HarnessError;

/// File name of the CA certificate (PEM) in [`TlsFiles::dir`].
pub const CA_CERT_FILE: &str = "ca.crt";
/// File name of the server certificate (PEM) in [`TlsFiles::dir`].
pub const CERT_FILE: &str = "server.crt";
/// File name of the server's private key (PEM, PKCS#8) in [`TlsFiles::dir`].
pub const KEY_FILE: &str = "server.key";
/// The names the server certificate is valid for: the loopback address every node listens on,
/// and `localhost`.
pub const SERVER_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// The TLS material of one cluster started with [`ClusterOptions::tls`](crate::ClusterOptions::tls):
/// a CA made for this cluster alone, one server certificate signed by it (ECDSA P-256, valid
/// for [`SERVER_NAMES`]) shared by every node, and one client certificate signed by it, in a
/// temporary directory deleted with the cluster.
///
/// A client under test trusts the nodes by trusting [`ca_pem`](Self::ca_pem) (or the file at
/// [`ca_cert_path`](Self::ca_cert_path), e.g. `redis-cli --tls --cacert <path>`). The nodes ask
/// clients for a certificate only with
/// [`ClusterOptions::tls_auth_clients`](crate::ClusterOptions::tls_auth_clients)
/// (`--tls-auth-clients yes`, else `no`); a client under test then presents
/// [`client_cert_pem`](Self::client_cert_pem) with [`client_key_pem`](Self::client_key_pem).
pub struct TlsFiles {
    dir: TempDir,
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
    /// The nodes require a client certificate.
    auth_clients: bool,
    /// Trusts the CA above and nothing else, and shows the client certificate; used for the
    /// harness's own connections.
    client: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsFiles")
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl TlsFiles {
    /// Makes a new CA, server certificate and client certificate and writes them to a new
    /// temporary directory; `auth_clients`: the nodes will require a client certificate.
    pub(crate) fn generate(auth_clients: bool) -> Result<TlsFiles, HarnessError> {
        let ca_key = KeyPair::generate().map_err(tls_error("generate the CA key"))?;
        let mut ca_params = CertificateParams::default();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "quorumlock-harness test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key)
            .map_err(tls_error("sign the CA certificate"))?;

        let server_key = KeyPair::generate().map_err(tls_error("generate the server key"))?;
        let names: Vec<String> = SERVER_NAMES.iter().map(|&name| name.to_owned()).collect();
        let mut params =
            CertificateParams::new(names).map_err(tls_error("name the server certificate"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, SERVER_NAMES[0]);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = params
            .signed_by(&server_key, &ca)
            .map_err(tls_error("sign the server certificate"))?;

        let client_key = KeyPair::generate().map_err(tls_error("generate the client key"))?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "quorumlock-harness test client");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = params
            .signed_by(&client_key, &ca)
            .map_err(tls_error("sign the client certificate"))?;

        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(ca.der().clone())
            .map_err(tls_error("trust the CA certificate"))?;
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(tls_error("set up the harness's TLS client"))?
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![client_cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(client_key.serialize_der())),
        )
        .map_err(tls_error("set up the harness's client certificate"))?;

        let dir = tempfile::Builder::new()
            .prefix("quorumlock-tls-")
            .tempdir()?;
        let ca_pem = ca.pem();
        std::fs::write(dir.path().join(CA_CERT_FILE), &ca_pem)?;
        std::fs::write(dir.path().join(CERT_FILE), server.pem())?;
        std::fs::write(dir.path().join(KEY_FILE), server_key.serialize_pem())?;
        Ok(TlsFiles {
            dir,
            ca_pem,
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
            auth_clients,
            client: Arc::new(client),
        })
    }

    /// The CA certificate, PEM-encoded: what a client must trust to verify the nodes.
    #[must_use]
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A client certificate signed by the cluster's CA (PEM), for mutual TLS: what a client
    /// under test presents to nodes that require one
    /// ([`ClusterOptions::tls_auth_clients`](crate::ClusterOptions::tls_auth_clients)).
    #[must_use]
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert_pem
    }

    /// The private key of [`client_cert_pem`](Self::client_cert_pem) (PEM, PKCS#8).
    #[must_use]
    pub fn client_key_pem(&self) -> &str {
        &self.client_key_pem
    }

    /// Whether the nodes require a client certificate (`--tls-auth-clients yes`).
    #[must_use]
    pub fn auth_clients(&self) -> bool {
        self.auth_clients
    }

    /// The directory holding [`CA_CERT_FILE`], [`CERT_FILE`] and [`KEY_FILE`]; deleted when the
    /// cluster is dropped.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA certificate file (PEM).
    #[must_use]
    pub fn ca_cert_path(&self) -> PathBuf {
        self.dir.path().join(CA_CERT_FILE)
    }

    /// The server certificate file (PEM) every node presents.
    #[must_use]
    pub fn cert_path(&self) -> PathBuf {
        self.dir.path().join(CERT_FILE)
    }

    /// The server's private key file (PEM).
    #[must_use]
    pub fn key_path(&self) -> PathBuf {
        self.dir.path().join(KEY_FILE)
    }

    /// A connection to the TLS node on `127.0.0.1:port`, verifying its certificate against the
    /// cluster's CA and showing the client certificate if asked for one; `timeout` bounds connecting (TCP, TLS handshake, connection setup) and each
    /// response.
    pub(crate) async fn connect(
        &self,
        port: u16,
        timeout: Duration,
    ) -> redis::RedisResult<MultiplexedConnection> {
        let connector = tokio_rustls::TlsConnector::from(self.client.clone());
        let handshake = async {
            let tcp = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
            tcp.set_nodelay(true)?;
            let name = ServerName::from(IpAddr::V4(Ipv4Addr::LOCALHOST));
            connector.connect(name, tcp).await
        };
        let stream = tokio::time::timeout(timeout, handshake)
            .await
            .map_err(|_| timed_out("TLS connect"))??;
        let config = AsyncConnectionConfig::new().set_response_timeout(Some(timeout));
        let info = RedisConnectionInfo::default();
        let setup = MultiplexedConnection::new_with_config(&info, stream, config);
        let (connection, driver) = tokio::time::timeout(timeout, setup)
            .await
            .map_err(|_| timed_out("connection setup"))??;
        // The driver ends once every handle of the connection is dropped.
        tokio::spawn(driver);
        Ok(connection)
    }
}

/// `redis-server` arguments for a TLS-only server on `port`, with the files in `dir` as the
/// server sees it (the host directory for processes, the mount point in a container), requiring
/// a client certificate if `auth_clients`.
pub(crate) fn server_args(port: u16, dir: &Path, auth_clients: bool) -> Vec<String> {
    let file = |name: &str| dir.join(name).display().to_string();
    vec![
        "--port".into(),
        "0".into(),
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        file(CERT_FILE),
        "--tls-key-file".into(),
        file(KEY_FILE),
        "--tls-ca-cert-file".into(),
        file(CA_CERT_FILE),
        "--tls-auth-clients".into(),
        if auth_clients { "yes" } else { "no" }.into(),
    ]
}

fn tls_error<E: fmt::Display>(action: &'static str) -> impl FnOnce(E) -> HarnessError {
    move |err| HarnessError::Tls {
        reason: format!("could not {action}: {err}"),
    }
}

fn timed_out(what: &str) -> redis::RedisError {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what} timed out")).into()
}
