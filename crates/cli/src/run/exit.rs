//! The exit statuses of `quorumlock run`, and how a lock error or the command's end maps to one.
//!
//! The codes follow sysexits.h where `run` itself decides, and the shell's convention for the
//! command (its own code, 128 + n for death by signal n, 126/127 when it cannot be run), so a
//! script can tell "did not run, try later" (75) from "ran and was stopped" (69) and from the
//! command's own result.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use quorumlock::Error;

/// Bad usage or configuration (EX_USAGE, as flock(1) uses it): a flag clap rejects, no nodes,
/// an invalid URL or TTL. Nothing was locked or run.
pub(crate) const USAGE: u8 = 64;
/// The lock was lost while the command ran (EX_UNAVAILABLE: the lock service stopped being
/// available mid-run); the command was sent SIGTERM (and SIGKILL after `--kill-after`).
/// Unlike 75, the command did run, maybe partly: retrying may repeat work.
pub(crate) const LOCK_LOST: u8 = 69;
/// An operating-system call `run` itself needs failed (EX_OSERR): installing its signal
/// handlers, or waiting for the command.
pub(crate) const OS_ERROR: u8 = 71;
/// The lock was not acquired (EX_TEMPFAIL, flock -E's convention): held elsewhere, the wait ran
/// out, or too few nodes were reachable. The command did not run; trying again later is safe.
pub(crate) const NOT_ACQUIRED: u8 = 75;
/// The command was found but could not be executed (the shell's 126).
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (the shell's 127).
pub(crate) const NOT_FOUND: u8 = 127;

/// The `--help` text on exit statuses.
pub(crate) const HELP: &str = "\
Exit status:
  the command's own   the command ran and exited; 128+N if signal N killed it
  64   usage: bad flags, no nodes (--nodes or QUORUMLOCK_NODES), invalid URL or TTL
  69   the lock was lost while the command ran; the command got SIGTERM (SIGKILL after
       --kill-after) and may have done part of its work
  71   an operating-system call run needs failed (signal handlers, waiting for the command)
  75   not acquired, the command did not run: held elsewhere, --wait ran out, or too few
       nodes reachable (safe to try again later)
  126  the command could not be executed
  127  the command was not found
  128+N  run got signal N (SIGINT, SIGTERM, SIGHUP) before the lock was acquired";

/// The shell's status for a command that ended with `status`: its exit code, or 128 + the
/// signal that killed it.
pub(crate) fn of_command(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
        (None, Some(signal)) => of_signal(signal),
        // Neither an exit nor a signal: not a status `wait` returns for an ended process.
        (None, None) => OS_ERROR,
    }
}

/// 128 + `signal`, the shell's status for "ended by that signal" (255 at most).
pub(crate) fn of_signal(signal: i32) -> u8 {
    u8::try_from(signal.saturating_add(128).clamp(128, 255)).unwrap_or(u8::MAX)
}

/// The status and one-line message for an acquisition that failed with `error` after waiting
/// up to `wait`.
pub(crate) fn not_acquired(error: &Error, wait: Duration) -> (u8, String) {
    match error {
        Error::Config(config) => (USAGE, format!("invalid configuration: {config}")),
        Error::Held { .. } if wait.is_zero() => {
            (NOT_ACQUIRED, format!("held elsewhere (--wait 0): {error}"))
        }
        Error::Held { .. } => (
            NOT_ACQUIRED,
            format!(
                "the wait ran out (--wait {}): {error}",
                humantime::format_duration(wait)
            ),
        ),
        _ => (NOT_ACQUIRED, format!("lock unavailable: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use quorumlock::ConfigError;

    use super::*;

    #[test]
    fn the_command_s_code_passes_through_and_a_signal_adds_128() {
        // A raw wait status: exit code in bits 8..16, terminating signal in bits 0..7.
        assert_eq!(of_command(ExitStatus::from_raw(0)), 0);
        assert_eq!(of_command(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(of_command(ExitStatus::from_raw(255 << 8)), 255);
        assert_eq!(of_command(ExitStatus::from_raw(15)), 143);
        assert_eq!(of_command(ExitStatus::from_raw(9)), 137);
    }

    #[test]
    fn signal_statuses_stay_in_range() {
        assert_eq!(of_signal(2), 130);
        assert_eq!(of_signal(200), 255);
        assert_eq!(of_signal(-5), 128);
        assert_eq!(of_signal(i32::MAX), 255);
    }

    #[test]
    fn run_s_own_codes_do_not_clash() {
        let own = [
            USAGE,
            LOCK_LOST,
            OS_ERROR,
            NOT_ACQUIRED,
            CANNOT_EXECUTE,
            NOT_FOUND,
        ];
        for (i, a) in own.iter().enumerate() {
            assert!(*a < 128, "{a} would read as death by a signal");
            assert!(own[i + 1..].iter().all(|b| a != b), "{a} twice");
        }
    }

    #[test]
    fn a_configuration_error_is_a_usage_error() {
        // (`Held` and `Unavailable` cannot be built outside the library: tests/run.rs covers
        // them against real nodes.)
        let (code, message) = not_acquired(&Error::Config(ConfigError::NoNodes), Duration::ZERO);
        assert_eq!(code, USAGE);
        assert!(message.starts_with("invalid configuration"), "{message}");
    }
}
