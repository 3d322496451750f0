//! Whether the server answering at a node's address is still the one the lock knew, as pure
//! logic. A failover behind one address (Sentinel promoting a replica behind the same DNS name,
//! a managed service moving its endpoint, a proxy switched to another server) puts a server
//! there that may lack keys the old one held: it could grant a lock another client still holds.
//! Unlike a restart, it may have been running for hours and persist every write, so the restart
//! guard alone lets it vote at once.
//!
//! Told apart on every (re)connect from what the new connection's server says (`run_id`,
//! `uptime_in_seconds`, and `INFO replication`'s `role`, `master_replid`, `master_replid2`) and
//! when the lock last heard from the server it knew:
//!
//! - a new `run_id` on a server that was surely running before that last reply is another
//!   server, not a restart;
//! - a server that was promoted from a replica (`master_replid2` set) the lock had not seen as
//!   it is now may have missed the latest writes, however long ago it was promoted;
//! - the same `run_id` with another `master_replid` changed its data's history (resynced or
//!   promoted) while at this address;
//! - a replica never votes.
//!
//! Such a server sits out acquisitions (and the fence's write-back) for the restart guard's
//! period from the moment the lock noticed, so every key the old server held has expired
//! everywhere by then. A new `run_id` on a server started after the last reply is a restart,
//! which the restart guard (`recovery.rs`) judges by its persistence.

use std::time::Duration;

use super::recovery::ServerFacts;

/// The server the lock last knew at a node's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Known {
    /// Its `run_id`.
    pub(crate) run_id: String,
    /// Its `master_replid`, if it said.
    pub(crate) replid: Option<String>,
}

impl Known {
    /// What the lock knows of the server `facts` describe, once it has judged it.
    pub(crate) fn from_facts(facts: &ServerFacts) -> Known {
        Known {
            run_id: facts.run_id.clone(),
            replid: facts.replid.clone(),
        }
    }
}

/// Why a server sits out: another one than the lock knew answers at the address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Replacement {
    /// A new `run_id`, on a server that was already running before the lock last heard from
    /// the old one: a different server (a replica promoted behind the same name, a proxy or
    /// DNS entry pointed elsewhere), not a restart.
    #[error(
        "run_id {run_id} replaced {previous_run_id} at this address, and it was running before the lock last heard from the old one"
    )]
    OtherServer {
        /// The `run_id` the lock knew there.
        previous_run_id: String,
        /// The `run_id` that answers now.
        run_id: String,
    },
    /// The server was promoted from a replica (`master_replid2` in `INFO replication`) and the
    /// lock had not known it so: it may have missed the latest writes of its old master.
    #[error("the server was promoted from a replica, which may have missed the latest writes")]
    Promoted,
    /// The same server (`run_id`) with another replication ID (`master_replid`): its data was
    /// replaced (a resync from another master, or a promotion) while it answered here.
    #[error("the server's replication ID changed: its data may have been replaced")]
    ReplicationChanged,
}

/// How the server at a node's address relates to the one the lock knew there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Succession {
    /// The same server as before, or the first the lock sees there and nothing says it came
    /// from a replica: the restart guard alone decides.
    Known,
    /// A new `run_id` on a server started after the lock last heard from the old one: a
    /// restart, which the restart guard judges.
    Restarted,
    /// Another server: it sits out for the restart guard's period from now.
    Replaced(Replacement),
    /// A replica: it never votes while it is one.
    Replica,
}

/// Judges the server `facts` describe, at an address where the lock knew `known` (if any) and
/// last heard from it `heard_ago` before the facts were read (if ever).
pub(crate) fn succession(
    known: Option<&Known>,
    facts: &ServerFacts,
    heard_ago: Option<Duration>,
) -> Succession {
    if facts.replica {
        return Succession::Replica;
    }
    let Some(known) = known else {
        return if facts.promoted {
            Succession::Replaced(Replacement::Promoted)
        } else {
            Succession::Known
        };
    };
    if known.run_id == facts.run_id {
        return if known.replid.is_some() && facts.replid.is_some() && known.replid != facts.replid {
            Succession::Replaced(Replacement::ReplicationChanged)
        } else {
            Succession::Known
        };
    }
    // Surely running at the last reply: it has been up for longer than that reply is old.
    if heard_ago.is_some_and(|heard_ago| facts.surely_up() > heard_ago) {
        return Succession::Replaced(Replacement::OtherServer {
            previous_run_id: known.run_id.clone(),
            run_id: facts.run_id.clone(),
        });
    }
    if facts.promoted {
        // Started after the last reply and already promoted: a replica that took over.
        return Succession::Replaced(Replacement::Promoted);
    }
    Succession::Restarted
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A master that persists every write, up for `uptime_s` as it reports it.
    pub(crate) fn facts(run_id: &str, uptime_s: u64) -> ServerFacts {
        ServerFacts {
            run_id: run_id.to_owned(),
            uptime: Duration::from_secs(uptime_s),
            aof_enabled: true,
            fsync_always: Some(true),
            replica: false,
            replid: Some(format!("replid-of-{run_id}")),
            promoted: false,
        }
    }

    fn known(run_id: &str) -> Known {
        Known::from_facts(&facts(run_id, 0))
    }

    const JUST_NOW: Option<Duration> = Some(Duration::from_millis(50));

    #[test]
    fn a_server_running_before_the_last_reply_from_the_old_one_is_another_server() {
        let switched = succession(Some(&known("a")), &facts("b", 10), JUST_NOW);
        assert_eq!(
            switched,
            Succession::Replaced(Replacement::OtherServer {
                previous_run_id: "a".into(),
                run_id: "b".into()
            })
        );
    }

    #[test]
    fn a_server_started_after_the_last_reply_is_a_restart() {
        for uptime_s in [0, 1] {
            assert_eq!(
                succession(Some(&known("a")), &facts("b", uptime_s), JUST_NOW),
                Succession::Restarted,
                "uptime {uptime_s} s: surely up 0 s"
            );
        }
        // Long unheard of: an old server may still have started after the last reply.
        let heard_an_hour_ago = Some(Duration::from_secs(3600));
        assert_eq!(
            succession(Some(&known("a")), &facts("b", 600), heard_an_hour_ago),
            Succession::Restarted
        );
    }

    #[test]
    fn an_uptime_no_longer_than_the_time_since_the_last_reply_is_a_restart() {
        // Reported 2 s: surely up 1 s, exactly as long ago as the last reply. It may have
        // started just after it.
        assert_eq!(
            succession(
                Some(&known("a")),
                &facts("b", 2),
                Some(Duration::from_secs(1))
            ),
            Succession::Restarted
        );
        assert!(matches!(
            succession(
                Some(&known("a")),
                &facts("b", 2),
                Some(Duration::from_millis(999))
            ),
            Succession::Replaced(Replacement::OtherServer { .. })
        ));
    }

    #[test]
    fn a_new_run_id_never_heard_from_before_is_judged_by_promotion_alone() {
        assert_eq!(
            succession(Some(&known("a")), &facts("b", 600), None),
            Succession::Restarted
        );
    }

    #[test]
    fn a_promoted_replica_sits_out_whether_or_not_the_lock_knew_the_address() {
        let promoted = ServerFacts {
            promoted: true,
            ..facts("b", 0)
        };
        for known in [None, Some(known("a"))] {
            assert_eq!(
                succession(known.as_ref(), &promoted, JUST_NOW),
                Succession::Replaced(Replacement::Promoted)
            );
        }
        // Once known as it is now (judged and sat out), the same server is known.
        let now_known = Known::from_facts(&promoted);
        assert_eq!(
            succession(Some(&now_known), &promoted, JUST_NOW),
            Succession::Known
        );
    }

    #[test]
    fn the_same_server_with_another_replication_id_had_its_data_replaced() {
        let resynced = ServerFacts {
            replid: Some("another".into()),
            ..facts("a", 600)
        };
        assert_eq!(
            succession(Some(&known("a")), &resynced, JUST_NOW),
            Succession::Replaced(Replacement::ReplicationChanged)
        );
        assert_eq!(
            succession(Some(&known("a")), &facts("a", 600), JUST_NOW),
            Succession::Known
        );
    }

    #[test]
    fn a_replica_never_votes_and_a_first_plain_master_is_known() {
        let replica = ServerFacts {
            replica: true,
            ..facts("a", 600)
        };
        assert_eq!(succession(None, &replica, None), Succession::Replica);
        assert_eq!(
            succession(Some(&known("a")), &replica, JUST_NOW),
            Succession::Replica
        );
        assert_eq!(succession(None, &facts("a", 600), None), Succession::Known);
    }

    proptest! {
        /// Whatever the inputs: a new run_id is called a restart only if the new server may
        /// have started after the last reply, and never when it says it was promoted.
        #[test]
        fn a_restart_is_never_a_server_that_was_surely_running_at_the_last_reply(
            uptime_s in 0u64..100_000,
            heard_ago_ms in proptest::option::of(0u64..100_000_000),
            promoted in any::<bool>(),
        ) {
            let facts = ServerFacts { promoted, ..facts("b", uptime_s) };
            let heard_ago = heard_ago_ms.map(Duration::from_millis);
            let verdict = succession(Some(&known("a")), &facts, heard_ago);
            if verdict == Succession::Restarted {
                prop_assert!(!promoted);
                prop_assert!(heard_ago.is_none_or(|ago| facts.surely_up() <= ago));
            } else {
                prop_assert!(matches!(verdict, Succession::Replaced(_)));
            }
        }
    }
}
