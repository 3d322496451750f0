//! Reaching a node's server, on either backend: plain connections with a timeout (TLS ones are
//! in `tls.rs`, and `transport.rs` picks), and the pacing of the readiness probes sent while a
//! server starts.

use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use crate::port::redis_url;

/// Connect and response timeout of one readiness probe.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// First and longest pause between readiness probes.
const PROBE_BACKOFF_MIN: Duration = Duration::from_millis(10);
const PROBE_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// Upper bound on probes per start, on top of the time bound.
const MAX_PROBES: u32 = 10_000;

/// Opens a plain TCP connection to the server on `port` with the given connect and
/// response timeout (see `Transport::connect` for either transport).
pub(crate) async fn connect_plain(
    port: u16,
    timeout: Duration,
) -> redis::RedisResult<MultiplexedConnection> {
    let client = redis::Client::open(redis_url(port))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// Paces readiness probes, on either backend: pauses doubling from [`PROBE_BACKOFF_MIN`] to
/// [`PROBE_BACKOFF_MAX`], never past the deadline, for at most [`MAX_PROBES`] probes.
pub(crate) struct ProbeBackoff {
    deadline: Instant,
    pause: Duration,
    pauses_left: u32,
}

impl ProbeBackoff {
    pub(crate) fn until(deadline: Instant) -> Self {
        ProbeBackoff {
            deadline,
            pause: PROBE_BACKOFF_MIN,
            pauses_left: MAX_PROBES - 1,
        }
    }

    /// Waits before the next probe; false (without waiting) once the deadline has passed or
    /// the probes are used up.
    pub(crate) async fn wait(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline || self.pauses_left == 0 {
            return false;
        }
        self.pauses_left -= 1;
        tokio::time::sleep(self.pause.min(self.deadline - now)).await;
        self.pause = (self.pause * 2).min(PROBE_BACKOFF_MAX);
        true
    }
}
