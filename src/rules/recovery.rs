//! The restart guard, as pure logic: what a node says about itself when we connect, and from when
//! on its vote may count.
//!
//! A master that crashed and came back without its data has forgotten every key it held, so it
//! could grant a lock that another client still holds on it. The Redlock remedy is a delayed
//! restart: a node stays out of the vote until every key it could have lost has expired anyway.
//! The client enforces it on every (re)connect, so it holds even where operators forget:
//!
//! - a node that persists every write before answering (AOF with `appendfsync always`) lost
//!   nothing and votes at once;
//! - any other node votes once it has been up for longer than the largest TTL in use plus the
//!   drift allowance.
//!
//! `uptime_in_seconds` is not the uptime rounded down: Redis computes it as the difference of two
//! whole-second wall-clock readings (now and the start, each rounded down), so it can be one more
//! than the real uptime: a server started at 12:00:00.9 reports 1 at 12:00:01.0. The uptime used
//! here is therefore one second less than the reported one, which the real uptime always exceeds.
//! (Being wall-clock time, it also jumps with the node's clock, as key expiry does: clock jumps
//! are outside Redlock's timing assumptions.)
//!
//! When the fsync policy cannot be read (a least-privilege user may not run `CONFIG GET`), the
//! node is assumed to lose recent writes.

use std::time::Duration;

/// How much `uptime_in_seconds` can exceed the real uptime: it is `floor(now) - floor(start)` in
/// whole seconds.
const UPTIME_OVERSTATEMENT: Duration = Duration::from_secs(1);

/// The value of `name` in `INFO` text (`name:value` lines, CRLF or LF), trimmed.
pub(crate) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        let (key, value) = line.trim_end_matches('\r').split_once(':')?;
        (key == name).then(|| value.trim())
    })
}

/// What a node told about itself on connect (`INFO server`, `INFO persistence`, `INFO
/// replication`, and `CONFIG GET appendfsync` when allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerFacts {
    /// `run_id`: new every time the server starts.
    pub(crate) run_id: String,
    /// `uptime_in_seconds` as reported (see the module docs for why it may be one second
    /// more than the real uptime).
    pub(crate) uptime: Duration,
    /// `aof_enabled:1`.
    pub(crate) aof_enabled: bool,
    /// `appendfsync always`, if the policy could be read.
    pub(crate) fsync_always: Option<bool>,
    /// `role:slave`: a replica.
    pub(crate) replica: bool,
    /// `master_replid`, if given: the ID of its data's replication history.
    pub(crate) replid: Option<String>,
    /// `master_replid2` set (not all zeros): the server was promoted from a replica.
    pub(crate) promoted: bool,
}

impl ServerFacts {
    /// Reads the facts out of the text of `INFO server`, `INFO persistence` and `INFO
    /// replication` (in any order, sections concatenated; a missing replication section reads
    /// as a master that was never a replica). `None` when `run_id` or `uptime_in_seconds` is missing or
    /// malformed: then nothing is known about the node and it must not vote.
    pub(crate) fn from_info(info: &str, fsync_always: Option<bool>) -> Option<ServerFacts> {
        let field = |name: &str| info_field(info, name);
        let run_id = field("run_id").filter(|id| !id.is_empty())?.to_owned();
        let uptime = Duration::from_secs(field("uptime_in_seconds")?.parse().ok()?);
        let aof_enabled = field("aof_enabled") == Some("1");
        let set = |value: &&str| !value.is_empty() && value.bytes().any(|byte| byte != b'0');
        Some(ServerFacts {
            run_id,
            uptime,
            aof_enabled,
            fsync_always,
            replica: field("role") == Some("slave"),
            replid: field("master_replid").filter(set).map(str::to_owned),
            promoted: field("master_replid2").is_some_and(|id| set(&id)),
        })
    }

    /// Whether the node persists every write before answering (AOF on, `appendfsync always`).
    pub(crate) fn persists_every_write(&self) -> bool {
        self.aof_enabled && self.fsync_always == Some(true)
    }

    /// The least the node can have been up when it answered: the reported uptime less the one
    /// second by which it may exceed the real one.
    pub(crate) fn surely_up(&self) -> Duration {
        self.uptime.saturating_sub(UPTIME_OVERSTATEMENT)
    }

    /// How long from the moment the facts were read until the node's vote may count: zero for a
    /// node that persists every write or has surely been up long enough, else what is left of
    /// `guard` (the largest TTL in use plus the drift allowance) after the uptime it surely had.
    pub(crate) fn votes_after(&self, guard: Duration) -> Duration {
        if self.persists_every_write() {
            return Duration::ZERO;
        }
        guard.saturating_sub(self.surely_up())
    }
}

/// Reads the reply to `CONFIG GET appendfsync` (`["appendfsync", "always"]`): whether the policy
/// is `always`, or `None` if the reply says nothing about it.
pub(crate) fn fsync_always(config_reply: &[String]) -> Option<bool> {
    match config_reply {
        [name, value] if name.eq_ignore_ascii_case("appendfsync") => {
            Some(value.eq_ignore_ascii_case("always"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const INFO: &str = "# Server\r\nredis_version:7.0.15\r\nrun_id:8f3a\r\nuptime_in_seconds:42\r\n\
                        \r\n# Persistence\r\nloading:0\r\naof_enabled:1\r\n";

    #[test]
    fn info_text_gives_the_facts() {
        let facts = ServerFacts::from_info(INFO, Some(true)).unwrap();
        assert_eq!(facts.run_id, "8f3a");
        assert_eq!(facts.uptime, Duration::from_secs(42));
        assert!(facts.aof_enabled);
        assert_eq!(facts.fsync_always, Some(true));
    }

    #[test]
    fn info_replication_tells_a_replica_and_a_promoted_server() {
        assert!(
            !ServerFacts::from_info(INFO, None).unwrap().promoted,
            "no section: a master"
        );
        let zeros = "0000000000000000000000000000000000000000";
        let master = format!(
            "{INFO}# Replication\r\nrole:master\r\nmaster_replid:9a1b\r\nmaster_replid2:{zeros}\r\n"
        );
        let facts = ServerFacts::from_info(&master, None).unwrap();
        assert!(!facts.replica && !facts.promoted);
        assert_eq!(facts.replid.as_deref(), Some("9a1b"));
        let promoted = master.replace(&format!("master_replid2:{zeros}"), "master_replid2:77c0");
        assert!(ServerFacts::from_info(&promoted, None).unwrap().promoted);
        let replica = master.replace("role:master", "role:slave");
        assert!(ServerFacts::from_info(&replica, None).unwrap().replica);
    }

    #[test]
    fn without_an_identity_or_an_uptime_nothing_is_known() {
        assert_eq!(
            ServerFacts::from_info("uptime_in_seconds:5\r\n", None),
            None
        );
        assert_eq!(ServerFacts::from_info("run_id:ab\r\n", None), None);
        assert_eq!(
            ServerFacts::from_info("run_id:\r\nuptime_in_seconds:5\r\n", None),
            None
        );
        assert_eq!(
            ServerFacts::from_info("run_id:ab\r\nuptime_in_seconds:-1\r\n", None),
            None
        );
    }

    #[test]
    fn the_fsync_policy_is_read_only_from_its_own_reply() {
        assert_eq!(
            fsync_always(&["appendfsync".into(), "always".into()]),
            Some(true)
        );
        assert_eq!(
            fsync_always(&["appendfsync".into(), "everysec".into()]),
            Some(false)
        );
        assert_eq!(fsync_always(&[]), None);
        assert_eq!(fsync_always(&["save".into(), "always".into()]), None);
    }

    #[test]
    fn a_node_that_persists_every_write_votes_at_once() {
        let facts = ServerFacts::from_info(INFO, Some(true)).unwrap();
        assert_eq!(facts.votes_after(Duration::from_secs(3600)), Duration::ZERO);
    }

    #[test]
    fn a_node_started_just_before_a_second_boundary_is_not_taken_as_a_second_old() {
        // Started at x.9 s, asked at (x+1).0 s: Redis reports 1 after 0.1 s.
        let facts = ServerFacts::from_info("run_id:a\r\nuptime_in_seconds:1\r\n", None).unwrap();
        let guard = Duration::from_millis(1_500);
        assert_eq!(facts.votes_after(guard), guard);
        let facts = ServerFacts::from_info("run_id:a\r\nuptime_in_seconds:2\r\n", None).unwrap();
        assert_eq!(facts.votes_after(guard), Duration::from_millis(500));
    }

    proptest! {
        /// A node that may have lost writes never votes before it has been up for the whole
        /// guard period, and never waits longer than that period.
        #[test]
        fn a_node_that_may_have_lost_writes_waits_out_the_guard(
            uptime in 0u64..10_000,
            guard_ms in 0u64..20_000_000,
            aof in any::<bool>(),
            fsync in prop_oneof![Just(None), Just(Some(false)), Just(Some(true))],
        ) {
            prop_assume!(!(aof && fsync == Some(true)));
            let facts = ServerFacts {
                run_id: "x".into(),
                uptime: Duration::from_secs(uptime),
                aof_enabled: aof,
                fsync_always: fsync,
                replica: false,
                replid: None,
                promoted: false,
            };
            let guard = Duration::from_millis(guard_ms);
            let wait = facts.votes_after(guard);
            prop_assert!(wait <= guard);
            prop_assert_eq!(facts.surely_up() + wait >= guard, true);
            prop_assert_eq!(wait.is_zero(), facts.surely_up() >= guard);
        }

        /// Whatever fraction of a second the server started at and however long it has really
        /// been up, the uptime it reports plus the wait never adds up to less than the guard
        /// period: it never votes early.
        #[test]
        fn the_reported_uptime_never_lets_a_node_vote_early(
            start_ms in 0u64..1_000_000_000,
            up_ms in 0u64..100_000,
            guard_ms in 0u64..200_000,
        ) {
            // What Redis computes: whole wall-clock seconds now, less whole seconds at start.
            let reported = (start_ms + up_ms) / 1_000 - start_ms / 1_000;
            let facts = ServerFacts {
                run_id: "x".into(),
                uptime: Duration::from_secs(reported),
                aof_enabled: false,
                fsync_always: None,
                replica: false,
                replid: None,
                promoted: false,
            };
            let guard = Duration::from_millis(guard_ms);
            let wait = facts.votes_after(guard);
            prop_assert!(Duration::from_millis(up_ms) + wait >= guard);
        }
    }
}
