//! How a node URL becomes a `redis::Client`: parsed, with `TCP_NODELAY` as configured and, for a
//! `rediss://` node, the configured certificate authorities; credentials never reach an error
//! message.

use redis::io::tcp::TcpSettings;
use redis::{ConnectionInfo, IntoConnectionInfo, RedisResult};

use crate::error::ConfigError;
use crate::settings::Settings;

/// The client for node `index` at `url`. Nothing is sent.
pub(super) fn open(
    index: usize,
    url: &str,
    settings: &Settings,
) -> Result<redis::Client, ConfigError> {
    let invalid = |err: redis::RedisError| ConfigError::InvalidUrl {
        index,
        url: redact(url),
        reason: err.to_string(),
    };
    let info = url
        .into_connection_info()
        .map_err(invalid)?
        .set_tcp_settings(TcpSettings::default().set_nodelay(settings.tcp_nodelay));
    with_certificates(info, settings).map_err(invalid)
}

/// A client for one node: with the configured certificate authorities for a TLS node, if any.
fn with_certificates(info: ConnectionInfo, settings: &Settings) -> RedisResult<redis::Client> {
    #[cfg(feature = "tls")]
    if let Some(pem) = &settings.tls_root_certificates
        && matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
    {
        let certificates = redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.clone()),
        };
        return redis::Client::build_with_tls(info, certificates);
    }
    #[cfg(not(feature = "tls"))]
    let _ = settings;
    redis::Client::open(info)
}

/// A URL fit for an error message: any credentials replaced by `***`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***@{}", &url[..scheme_end], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockOptions;

    #[test]
    fn credentials_never_reach_error_messages() {
        assert_eq!(
            redact("redis://user:secret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redact("redis://:p@ss@host"), "redis://***@host");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
    }

    #[test]
    fn an_unparsable_url_is_a_configuration_error() {
        let settings = LockOptions::new().validate(1).unwrap();
        for url in ["", "not a url", "http://host", "redis://host:notaport"] {
            let Err(err) = open(3, url, &settings) else {
                panic!("{url:?} was accepted");
            };
            assert!(
                matches!(err, ConfigError::InvalidUrl { index: 3, .. }),
                "{err}"
            );
        }
    }
}
