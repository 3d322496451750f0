//! Which native commands a server offers that the lock can use instead of a Lua script, read
//! from its `INFO server` on connect, so each connection decides for its own server.
//!
//! `SET key value IFEQ old` (Valkey 8.1, Redis 8.4) sets only while the key holds `old`: with
//! `PX`, the extension's compare-and-expire in one command. On Valkey 8.1 its command time was a
//! third of the script's (docs/deployment.md, "Native compare commands"); on servers without
//! it the script stays.

use super::recovery::info_field;

/// The native commands one connection's server offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Commands {
    /// `SET … IFEQ`: the extension is `SET key token IFEQ token PX ttl`.
    pub(crate) set_ifeq: bool,
}

impl Commands {
    /// Reads the server's versions out of its `INFO server` text. Valkey reports
    /// `valkey_version` (and an old `redis_version` for compatibility, which must not count);
    /// Redis only `redis_version`. Anything unreadable offers nothing.
    pub(crate) fn from_info(info: &str) -> Commands {
        let field = |name: &str| info_field(info, name);
        let at_least = |version: &str, wanted: (u32, u32)| {
            let mut parts = version.split('.').map(str::parse::<u32>);
            match (parts.next(), parts.next()) {
                (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= wanted,
                _ => false,
            }
        };
        let set_ifeq = match field("valkey_version") {
            Some(valkey) => at_least(valkey, (8, 1)),
            None => field("redis_version").is_some_and(|redis| at_least(redis, (8, 4))),
        };
        Commands { set_ifeq }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(lines: &[&str]) -> String {
        format!("# Server\r\n{}\r\nrun_id:8f3a\r\n", lines.join("\r\n"))
    }

    #[test]
    fn set_ifeq_from_valkey_8_1_and_redis_8_4() {
        let offers = |lines: &[&str]| Commands::from_info(&info(lines)).set_ifeq;
        assert!(offers(&[
            "redis_version:7.2.4",
            "server_name:valkey",
            "valkey_version:8.1.8"
        ]));
        assert!(offers(&["redis_version:7.2.4", "valkey_version:9.0.0"]));
        assert!(!offers(&["redis_version:7.2.4", "valkey_version:8.0.2"]));
        assert!(!offers(&["redis_version:7.2.4", "valkey_version:7.2.5"]));
        assert!(offers(&["redis_version:8.4.0"]));
        assert!(offers(&["redis_version:10.0.1"]));
        assert!(!offers(&["redis_version:8.2.1"]));
        assert!(!offers(&["redis_version:7.0.15"]));
    }

    #[test]
    fn an_unreadable_version_offers_nothing() {
        for lines in [
            &[][..],
            &["redis_version:"],
            &["redis_version:eight"],
            &["redis_version:8"],
            &["valkey_version:x.y", "redis_version:8.4.0"],
        ] {
            assert_eq!(
                Commands::from_info(&info(lines)),
                Commands::default(),
                "{lines:?}"
            );
        }
    }
}
