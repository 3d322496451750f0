//! Metrics through the `metrics` facade, with the cargo feature
//! `metrics`: this module owns every metric's name and labels, and the rest of the crate records
//! through its functions. Without the feature each function is an empty inline one and the
//! `metrics` crate is not a dependency; with it and no recorder installed, each call is one look
//! for a recorder. Every label value is a `&'static str` with its key built at compile time, so
//! recording allocates nothing.
//!
//! | metric | kind | labels | counts |
//! | --- | --- | --- | --- |
//! | `quorumlock_acquisitions_total` | counter | `topology` (`single`, `quorum`), `outcome` | acquisitions run on the nodes: `won`, or the error's kind (`held`, `unavailable`, `validity_expired`, `cancelled`, `fence_unconfirmed`, `config`) |
//! | `quorumlock_acquire_duration_seconds` | histogram | `topology`, `outcome` | each of those acquisitions' time, from its first request to its result, retries included |
//! | `quorumlock_extensions_total` | counter | `outcome` (`extended`, `extend_failed`, `config`) | calls of `Guard::extend` (a kept lease's renewals are not counted here) |
//! | `quorumlock_releases_total` | counter | `via` (`release`, `drop`) | releases sent to the nodes by a hold's last guard: `Guard::release`, or a guard dropped |
//! | `quorumlock_node_errors_total` | counter | `kind` | failed node requests, by the `NodeError` they failed with: `timeout`, `connection_refused`, `connection`, `auth`, `readonly`, `oom`, `wrongtype`, `noperm`, `loading`, `noscript`, `server` (another error reply), `protocol`, and the gates' refusals (nothing sent): `same_server`, `recovering`, `replaced`, `replica`, `not_durable` |
//! | `quorumlock_kept_leases` | gauge | | leases kept alive now (`Guard::keep_alive`, `Lock::with_lock`) |
//! | `quorumlock_keep_alive_late_total` | counter | | kept leases' extensions that went out more than a quarter of their interval after they were due, having waited for room in a batch: the nodes answer batches slower than leases fall due (a warning says so too, with the shortfall) |
//! | `quorumlock_lost_signals_total` | counter | `reason` (`taken`, `expired`, `max_hold`, `no_runtime`) | kept locks found lost (their lost signal fired) |
//! | `quorumlock_restart_guard_sit_outs_total` | counter | | requests the restart guard held back from a node that may have lost keys in a restart |
//!
//! An acquisition is one run on the nodes, as its `quorumlock.acquire` span is: a waiting call
//! (`Patience::Wait`) that tries again after a release counts each try, and a re-entry by an
//! owner, which sends nothing, counts none.

use std::time::Duration;
#[cfg(feature = "metrics")]
use std::time::Instant;

use crate::error::{Error, Lost};
use crate::outcome::NodeError;

/// When an operation started, for its duration; nothing without the feature.
pub(crate) struct Timer {
    #[cfg(feature = "metrics")]
    started: Instant,
}

impl Timer {
    /// Starts timing now.
    #[inline]
    pub(crate) fn start() -> Timer {
        Timer {
            #[cfg(feature = "metrics")]
            started: Instant::now(),
        }
    }

    /// The time since [`start`](Timer::start).
    #[cfg(feature = "metrics")]
    #[inline]
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Zero: nothing is timed without the feature.
    #[cfg(not(feature = "metrics"))]
    #[inline]
    pub(crate) fn elapsed(&self) -> Duration {
        Duration::ZERO
    }
}

/// `$macro!($name, labels…)` for the literal among `$values` that `$value` equals, `other` for
/// none: one static key per label value, so that no label is built at run time.
#[cfg(feature = "metrics")]
macro_rules! pick {
    ($macro:ident!($name:literal, $label:literal), $value:expr, [$($values:literal),+ $(,)?]) => {
        match $value {
            $($values => ::metrics::$macro!($name, $label => $values),)+
            _ => ::metrics::$macro!($name, $label => "other"),
        }
    };
    ($macro:ident!($name:literal, $fixed:literal => $fixed_value:literal, $label:literal), $value:expr, [$($values:literal),+ $(,)?]) => {
        match $value {
            $($values => ::metrics::$macro!($name, $fixed => $fixed_value, $label => $values),)+
            _ => ::metrics::$macro!($name, $fixed => $fixed_value, $label => "other"),
        }
    };
}

/// The outcome of an acquisition or an extension: `ok`, or the error's kind (`Error::label`).
#[cfg(feature = "metrics")]
fn outcome(result: Result<(), &Error>, ok: &'static str) -> &'static str {
    result.map_or_else(Error::label, |()| ok)
}

/// An acquisition over `nodes` nodes ended with `result` after `elapsed`.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn acquired(nodes: usize, result: Result<(), &Error>, elapsed: Duration) {
    #[cfg(feature = "metrics")]
    {
        let outcome = outcome(result, "won");
        let seconds = elapsed.as_secs_f64();
        macro_rules! on {
            ($topology:literal) => {{
                pick!(
                    counter!("quorumlock_acquisitions_total", "topology" => $topology, "outcome"),
                    outcome,
                    ["won", "held", "unavailable", "validity_expired", "cancelled", "fence_unconfirmed", "config"]
                )
                .increment(1);
                pick!(
                    histogram!("quorumlock_acquire_duration_seconds", "topology" => $topology, "outcome"),
                    outcome,
                    ["won", "held", "unavailable", "validity_expired", "cancelled", "fence_unconfirmed", "config"]
                )
                .record(seconds);
            }};
        }
        if nodes == 1 {
            on!("single")
        } else {
            on!("quorum")
        }
    }
}

/// A call of `Guard::extend` ended with `result`.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn extended(result: Result<(), &Error>) {
    #[cfg(feature = "metrics")]
    {
        pick!(
            counter!("quorumlock_extensions_total", "outcome"),
            outcome(result, "extended"),
            ["extended", "extend_failed", "config"]
        )
        .increment(1);
    }
}

/// A hold's last guard released it on the nodes: by `Guard::release` (`dropped` false) or when
/// dropped.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn released(dropped: bool) {
    #[cfg(feature = "metrics")]
    {
        if dropped {
            ::metrics::counter!("quorumlock_releases_total", "via" => "drop").increment(1);
        } else {
            ::metrics::counter!("quorumlock_releases_total", "via" => "release").increment(1);
        }
    }
}

/// A node request failed with `error`.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn node_error(error: &NodeError) {
    #[cfg(feature = "metrics")]
    {
        let kind = match error {
            NodeError::Timeout(_) => "timeout",
            NodeError::ConnectionRefused => "connection_refused",
            NodeError::Connection(_) => "connection",
            NodeError::Auth(_) => "auth",
            NodeError::ReadOnly(_) => "readonly",
            NodeError::OutOfMemory(_) => "oom",
            NodeError::WrongType(_) => "wrongtype",
            NodeError::NoPermission(_) => "noperm",
            NodeError::Loading => "loading",
            NodeError::Server { code, .. } if code == "NOSCRIPT" => "noscript",
            NodeError::Server { .. } => "server",
            NodeError::Protocol(_) => "protocol",
            // Not met here: the acquisition's ledger refuses it before the node is asked.
            NodeError::ReleaseInFlight => "release_in_flight",
            NodeError::SameServer { .. } => "same_server",
            NodeError::Recovering { .. } => "recovering",
            NodeError::Replaced { .. } => "replaced",
            NodeError::Replica => "replica",
            NodeError::NotDurable => "not_durable",
        };
        pick!(
            counter!("quorumlock_node_errors_total", "kind"),
            kind,
            [
                "timeout",
                "connection_refused",
                "connection",
                "auth",
                "readonly",
                "oom",
                "wrongtype",
                "noperm",
                "loading",
                "noscript",
                "server",
                "protocol",
                "release_in_flight",
                "same_server",
                "recovering",
                "replaced",
                "replica",
                "not_durable",
            ]
        )
        .increment(1);
    }
}

/// The restart guard held a request back from a node.
#[inline]
pub(crate) fn sat_out() {
    #[cfg(feature = "metrics")]
    {
        ::metrics::counter!("quorumlock_restart_guard_sit_outs_total").increment(1);
    }
}

/// A lease joined its lock's keeper.
#[inline]
pub(crate) fn lease_kept() {
    #[cfg(feature = "metrics")]
    {
        ::metrics::gauge!("quorumlock_kept_leases").increment(1.0);
    }
}

/// `leases` kept leases went out later than they were due (the keeper fell behind).
#[inline]
pub(crate) fn keep_alive_late(leases: u64) {
    #[cfg(feature = "metrics")]
    if leases > 0 {
        ::metrics::counter!("quorumlock_keep_alive_late_total").increment(leases);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = leases;
}

/// A lease left its lock's keeper (released, dropped, or found lost).
#[inline]
pub(crate) fn lease_left() {
    #[cfg(feature = "metrics")]
    {
        ::metrics::gauge!("quorumlock_kept_leases").decrement(1.0);
    }
}

/// A kept lock's lost signal fired, for `reason`.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn lost(reason: &Lost) {
    #[cfg(feature = "metrics")]
    {
        let counter = match reason {
            Lost::Taken { .. } => {
                ::metrics::counter!("quorumlock_lost_signals_total", "reason" => "taken")
            }
            Lost::Expired { .. } => {
                ::metrics::counter!("quorumlock_lost_signals_total", "reason" => "expired")
            }
            Lost::MaxHold { .. } => {
                ::metrics::counter!("quorumlock_lost_signals_total", "reason" => "max_hold")
            }
            Lost::NoRuntime => {
                ::metrics::counter!("quorumlock_lost_signals_total", "reason" => "no_runtime")
            }
        };
        counter.increment(1);
    }
}
