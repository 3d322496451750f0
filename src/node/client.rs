//! How a node's connection details become a `redis::Client`: `TCP_NODELAY` as configured and,
//! for a TLS node, the configured certificate authorities and client certificate, unless the node
//! brought TLS parameters of its own.

use redis::{ConnectionAddr, ConnectionInfo};

use crate::error::ConfigError;
use crate::settings::Settings;

/// The client for node `index`. Nothing is sent.
pub(super) fn open(
    index: usize,
    info: ConnectionInfo,
    settings: &Settings,
) -> Result<redis::Client, ConfigError> {
    let tcp = info
        .tcp_settings()
        .clone()
        .set_nodelay(settings.tcp_nodelay);
    let info = info.set_tcp_settings(tcp);
    let ConnectionAddr::TcpTls { tls_params, .. } = info.addr() else {
        return redis::Client::open(info).map_err(|err| rejected(index, err));
    };
    #[cfg(feature = "tls")]
    {
        let Some(certificates) = settings.tls_certificates() else {
            return redis::Client::open(info).map_err(|err| rejected(index, err));
        };
        // A node's own TLS parameters cannot be read back or merged with ours: say so rather
        // than drop one of them unseen.
        if tls_params.is_some() {
            return Err(ConfigError::ConflictingTls { index });
        }
        redis::Client::build_with_tls(info, certificates).map_err(|err| rejected(index, err))
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = tls_params;
        Err(ConfigError::TlsDisabled { index })
    }
}

/// redis-rs refused the node's details: certificates that do not parse, or an address this
/// build cannot reach. No URL is left to show, and the reason names no credential.
fn rejected(index: usize, err: redis::RedisError) -> ConfigError {
    ConfigError::InvalidNode {
        index,
        reason: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use redis::IntoConnectionInfo;
    use redis::io::tcp::TcpSettings;

    use super::*;
    use crate::LockOptions;

    /// A node's own `TCP_NODELAY` gives way to the lock's, either way.
    #[test]
    fn the_locks_tcp_nodelay_wins_over_the_nodes() {
        for nodelay in [true, false] {
            let settings = LockOptions::new().tcp_nodelay(nodelay).validate(1).unwrap();
            let info = "redis://127.0.0.1:6379"
                .into_connection_info()
                .unwrap()
                .set_tcp_settings(TcpSettings::default().set_nodelay(!nodelay));
            let client = open(0, info, &settings).unwrap();
            assert_eq!(
                client.get_connection_info().tcp_settings().nodelay(),
                nodelay
            );
        }
    }
}
