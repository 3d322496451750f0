//! The named chaos scenarios: what each one does to the nodes or clients, and whether Redlock is
//! expected to stay safe through it.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A named chaos scenario. Each runs many client tasks contending for a few resources with a
/// short TTL while faults are injected; see `docs/chaos.md` for what each one demonstrates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
#[non_exhaustive]
pub enum Scenario {
    /// No faults: the control run.
    Baseline,
    /// Nodes 3 and 4 of 5 are killed, and restarted (empty) later. Safe: every hold keeps a
    /// majority on nodes 0–2.
    MinorityCrash,
    /// Nodes 3 and 4 are frozen with SIGSTOP, then resumed. Safe.
    MinorityFreeze,
    /// Nodes 3 and 4 answer late (below, then above the per-node timeout). Safe.
    MinorityLatency,
    /// Nodes 0–2 answer late: every round waits for a slow node, so validity shrinks and
    /// availability drops. Safe.
    MajorityLatency,
    /// Every packet to and from nodes 3 and 4 is dropped: a partitioned minority. Safe.
    PartitionMinority,
    /// Every packet to and from nodes 0–2 is dropped: no quorum, no lock. Safe.
    PartitionMajority,
    /// Packets to nodes 0–2 are dropped (their replies would pass): they never hear a request,
    /// so nothing lands there and nobody gets a quorum. Safe.
    PartitionOneWay,
    /// Packets from nodes 0–2 are dropped (requests pass): every SET lands on a majority, but
    /// no client ever learns it, so each must release everywhere after failing. Safe.
    PartitionAsymmetric,
    /// Holds are taken while nodes 3 and 4 are unreachable (their keys land on nodes 0–2 only);
    /// then node 1, and after it node 2, is killed and restarted at once without persistence,
    /// forgetting its keys, and another client wins nodes 1, 3 and 4 while the holder still
    /// believes its hold on nodes 0 and 2. Run with the lock's restart guard off (unless
    /// [`RunOptions::restart_guard`](crate::RunOptions::restart_guard) says otherwise), to show
    /// the hazard the guard prevents. Unsafe: shows violations.
    RestartNoPersistence,
    /// The faults of [`RestartNoPersistence`](Scenario::RestartNoPersistence), with the
    /// lock's restart guard on: the restarted nodes sit out acquisitions for the TTL plus the
    /// drift, so the contender cannot win them. Safe.
    RestartGuarded,
    /// As [`RestartNoPersistence`](Scenario::RestartNoPersistence), but the killed nodes stay
    /// down for longer than the TTL. Safe.
    RestartDelayed,
    /// As [`RestartNoPersistence`](Scenario::RestartNoPersistence), but every node writes an
    /// append-only file with `appendfsync always`, so the keys survive the restart. Safe.
    RestartAof,
    /// The addresses of nodes 0–2 (their proxies) are switched to other servers that have been
    /// up for a while and lack the latest writes (promoted replicas on the process backend,
    /// standby masters on docker), and the old connections are cut, while holds are held; the
    /// replaced servers become the next switch's standbys. Safe: a server that replaced the one
    /// a client knew at an address sits out acquisitions for the TTL plus the drift.
    Failover,
    /// Nodes 0–2 count time 0.9 % too fast, the most the lock's default drift allowance
    /// (1 % of the TTL + 2 ms) covers. Safe; a lock that ignores the drift is not.
    ClockDrift,
    /// Nodes 0–2 count time ten times too fast, far beyond the drift allowance: keys expire while
    /// their holders still believe they hold them. Unsafe: shows violations.
    ClockFast,
    /// Holds are taken while nodes 0 and 1 are cut off (their keys land on nodes 2–4 only);
    /// right after a hold was just taken, 0 and 1 come back and the wall clocks of nodes 3 and 4
    /// jump ahead by more than the TTL (their keys expire at once), and later back. Unsafe:
    /// the hold loses its majority in the jump, and a contender wins nodes 0, 1, 3 and 4;
    /// nothing in the lock can see a clock jump (the restart guard only sees restarts).
    ClockJumpMinority,
    /// The wall clocks of nodes 0–2 jump ahead by more than the TTL, and later back: every key
    /// on a majority expires at once while its holder believes it valid. Unsafe: shows
    /// violations.
    ClockJumpMajority,
    /// Some holders pause (as in a long GC) between checking the validity and writing, past the
    /// validity and until a later holder has written: their writes are stale. Unsafe: shows
    /// stale writes (unless run with [`RunOptions::fencing`](crate::RunOptions::fencing)).
    ClientStall,
    /// [`ClientStall`](Scenario::ClientStall) with fencing tokens: every write carries its
    /// holder's fence and the protected store refuses a fence below the last one it accepted,
    /// so the stalled holders' late writes are rejected. Safe: no stale write accepted, and at
    /// least one rejected (else the stall proved nothing).
    ClientStallFenced,
    /// Every hold is kept alive ([`Guard::keep_alive`](quorumlock::Guard::keep_alive)) for
    /// several TTLs, and every packet to and from nodes 0–2 is dropped for longer than a TTL,
    /// mid-hold: the holders lose their majority. Safe: each lease signals the loss before its
    /// validity ends, no holder writes after that, and a later holder gets the lock after the
    /// heal; the run fails its self-check if no hold was lost.
    KeepAliveLoss,
    /// Many callers of waiting [`Lock::acquire`](quorumlock::Lock::acquire), several per
    /// lock (its queue) and several locks per resource (the nodes' wake-up messages), each
    /// waiting up to its own deadline, while nodes are killed, frozen and partitioned in turn
    /// (their subscription connections with them). Safe: no two holders at once, and every
    /// waiter returns by its deadline plus one attempt
    /// ([`Lock::attempt_bound`](quorumlock::Lock::attempt_bound)); the run fails its self-check if
    /// no waiter got the lock after waiting behind a holder, or no fault was injected.
    Waiters,
    /// Sets of resources ([`Lock::try_acquire`](quorumlock::Lock::try_acquire) of a [`Resources`](quorumlock::Resources)): each
    /// client takes two neighbouring resources as one set, so every set overlaps two others,
    /// under the seeded nemesis of [`Random`](Scenario::Random). Safe: no two holders of any
    /// resource at once, whether they hold it in a set or alone.
    Sets,
    /// One semaphore ([`Request::permits`](quorumlock::Request::permits)) of as many permits
    /// as the run has resources, its slots `sem:0` … being the resources, taken by every client
    /// under the seeded nemesis of [`Random`](Scenario::Random): each holder writes to its
    /// slot's register, then releases or lets the keys expire. Safe: never more holders than
    /// permits at one instant, never two holders of one slot.
    Semaphore,
    /// One read-write lock per resource ([`Request::read`](quorumlock::Request::read),
    /// [`Request::write`](quorumlock::Request::write)), its sides taken by every client under
    /// the seeded nemesis of [`Random`](Scenario::Random): three attempts in four read, holding
    /// a while; a writer writes to the resource's register. Safe: never a writer beside any other
    /// holder of its lock, and readers held together.
    ReadWrite,
    /// One election per resource ([`Election`](quorumlock::Election)), every client a
    /// candidate under the seeded nemesis of [`Random`](Scenario::Random): a leader writes to
    /// the resource's register with its term as the fence, then resigns; with fencing (terms
    /// are fences). Safe: one leader at a time, and each leader's term larger than every
    /// earlier leader's.
    Election,
    /// Many leases kept alive at once under the seeded nemesis of [`Random`](Scenario::Random):
    /// each client's holds of its contended resource are kept alive (as in
    /// [`KeepAliveLoss`](Scenario::KeepAliveLoss)), and its lock also keeps a lease on every
    /// bulk resource it can win, of its own block and its neighbour's (two contenders each;
    /// [`RunOptions::leases`](crate::RunOptions::leases) in all, 1,200 by default), held 2–6
    /// TTLs each, at a TTL of at least 1 s (a shorter one is raised, noted). Safe: no two holders of any resource at once, every lost signal before the
    /// validity ends; the run fails its self-check if fewer than half the leases were ever
    /// kept at once.
    ManyLeases,
    /// The clients skip the lock and write anyway: the control for the store check. Unsafe:
    /// shows interleaved (and usually lost) writes.
    NoLock,
    /// The nemesis: kills (with later restarts), restarts at once, freezes, latency, black
    /// holes, refused connections and dropped packets on random subsets of nodes, majorities
    /// included, overlapping in time, drawn from a seed
    /// ([`RunOptions::seed`](crate::RunOptions::seed)) that replays them. Only faults Redlock's
    /// assumptions allow (see [`nemesis`](crate::nemesis)). Safe.
    Random,
    /// The lock's three nodes are Redis Clusters of three shards each (local processes,
    /// AOF `appendfsync always`), not single masters; the keys carry the resource's name as
    /// their hash tag. In each cycle one member loses the shard serving a resource's slot
    /// (killed, restarted with its keys later), and meanwhile another member migrates the slot
    /// of every resource to another shard (`MIGRATING`/`IMPORTING`, keys moved, `ASK`, then
    /// `MOVED`). Safe: a member's vote for a resource comes from the one shard serving its slot,
    /// wherever that is. Not in [`ALL`](Scenario::ALL) (see [`OPT_IN`](Scenario::OPT_IN)).
    ClusterMembers,
}

impl Scenario {
    /// Every scenario, in the order `all` runs them.
    pub const ALL: [Scenario; 29] = [
        Scenario::Baseline,
        Scenario::MinorityCrash,
        Scenario::MinorityFreeze,
        Scenario::MinorityLatency,
        Scenario::MajorityLatency,
        Scenario::PartitionMinority,
        Scenario::PartitionMajority,
        Scenario::PartitionOneWay,
        Scenario::PartitionAsymmetric,
        Scenario::RestartNoPersistence,
        Scenario::RestartGuarded,
        Scenario::RestartDelayed,
        Scenario::RestartAof,
        Scenario::Failover,
        Scenario::ClockDrift,
        Scenario::ClockFast,
        Scenario::ClockJumpMinority,
        Scenario::ClockJumpMajority,
        Scenario::ClientStall,
        Scenario::ClientStallFenced,
        Scenario::KeepAliveLoss,
        Scenario::Waiters,
        Scenario::Sets,
        Scenario::Semaphore,
        Scenario::ReadWrite,
        Scenario::Election,
        Scenario::ManyLeases,
        Scenario::NoLock,
        Scenario::Random,
    ];

    /// The scenarios `all` ([`ALL`](Scenario::ALL)) leaves out, run only when named: they start
    /// more than the five local masters (`cluster-members`: nine Redis Cluster shards, and
    /// `redis-server` with cluster support).
    pub const OPT_IN: [Scenario; 1] = [Scenario::ClusterMembers];

    /// The scenario's name on the command line, e.g. `minority-crash`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Baseline => "baseline",
            Scenario::MinorityCrash => "minority-crash",
            Scenario::MinorityFreeze => "minority-freeze",
            Scenario::MinorityLatency => "minority-latency",
            Scenario::MajorityLatency => "majority-latency",
            Scenario::PartitionMinority => "partition-minority",
            Scenario::PartitionMajority => "partition-majority",
            Scenario::PartitionOneWay => "partition-one-way",
            Scenario::PartitionAsymmetric => "partition-asymmetric",
            Scenario::RestartNoPersistence => "restart-no-persistence",
            Scenario::RestartGuarded => "restart-guarded",
            Scenario::RestartDelayed => "restart-delayed",
            Scenario::RestartAof => "restart-aof",
            Scenario::Failover => "failover",
            Scenario::ClockDrift => "clock-drift",
            Scenario::ClockFast => "clock-fast",
            Scenario::ClockJumpMinority => "clock-jump-minority",
            Scenario::ClockJumpMajority => "clock-jump-majority",
            Scenario::ClientStall => "client-stall",
            Scenario::ClientStallFenced => "client-stall-fenced",
            Scenario::KeepAliveLoss => "keep-alive-loss",
            Scenario::Waiters => "waiters",
            Scenario::Sets => "sets",
            Scenario::Semaphore => "semaphore",
            Scenario::ReadWrite => "rwlock",
            Scenario::Election => "election",
            Scenario::ManyLeases => "many-leases",
            Scenario::NoLock => "no-lock",
            Scenario::Random => "random",
            Scenario::ClusterMembers => "cluster-members",
        }
    }

    /// One line on what the scenario does.
    pub fn description(self) -> &'static str {
        match self {
            Scenario::Baseline => "no faults",
            Scenario::MinorityCrash => "kill nodes 3,4; restart them (empty) 2×TTL later",
            Scenario::MinorityFreeze => "SIGSTOP nodes 3,4 for 2×TTL, then SIGCONT",
            Scenario::MinorityLatency => {
                "+latency on nodes 3,4 (under, then over the node timeout)"
            }
            Scenario::MajorityLatency => {
                "+latency on nodes 0,1,2 (under, then over the node timeout)"
            }
            Scenario::PartitionMinority => "drop all packets of nodes 3,4 for 2×TTL",
            Scenario::PartitionMajority => "drop all packets of nodes 0,1,2 for 2×TTL",
            Scenario::PartitionOneWay => "drop packets to nodes 0,1,2 (requests) for 2×TTL",
            Scenario::PartitionAsymmetric => {
                "drop packets from nodes 0,1,2 (replies; requests land) for 2×TTL"
            }
            Scenario::RestartNoPersistence => {
                "holds taken while 3,4 are cut off; then nodes 1, 2 killed and restarted empty at once (restart guard off)"
            }
            Scenario::RestartGuarded => {
                "as restart-no-persistence, with the restart guard on (the library's default)"
            }
            Scenario::RestartDelayed => {
                "as restart-no-persistence, but nodes 1,2 stay down 1.5×TTL before restarting"
            }
            Scenario::RestartAof => {
                "as restart-no-persistence, with AOF appendfsync always on every node"
            }
            Scenario::Failover => {
                "addresses of nodes 0,1,2 switched to promoted replicas that missed the latest holds; connections cut"
            }
            Scenario::ClockDrift => {
                "nodes 0,1,2 count time ×1.009, inside the 1 % + 2 ms drift allowance"
            }
            Scenario::ClockFast => "nodes 0,1,2 count time 10× too fast",
            Scenario::ClockJumpMinority => {
                "holds taken while 0,1 are cut off; then wall clocks of nodes 3,4 jump 2×TTL ahead, 2×TTL later back"
            }
            Scenario::ClockJumpMajority => {
                "wall clocks of nodes 0,1,2 jump 2×TTL ahead, 2×TTL later back"
            }
            Scenario::ClientStall => {
                "some holders pause past their validity until a later holder wrote, then write"
            }
            Scenario::ClientStallFenced => {
                "client-stall with fencing: the store must reject the late writes"
            }
            Scenario::KeepAliveLoss => {
                "holds kept alive for 3-6×TTL; drop all packets of nodes 0,1,2 for 1.5×TTL mid-hold"
            }
            Scenario::Waiters => {
                "3 waiters per client (acquire with Patience::Wait, 0.75-5×TTL each); nodes killed, frozen, partitioned in turn"
            }
            Scenario::Sets => {
                "each client takes 2 neighbouring resources as one set; seeded nemesis as random"
            }
            Scenario::Semaphore => {
                "each client takes permits of one semaphore (as many as resources; odd clients two at once); seeded nemesis as random"
            }
            Scenario::ReadWrite => {
                "each client reads (3 in 4) or writes one read-write lock per resource; seeded nemesis as random"
            }
            Scenario::Election => {
                "every client campaigns in one election per resource and writes with its term; seeded nemesis as random"
            }
            Scenario::ManyLeases => {
                "kept holds, and a lease kept on every bulk resource a client wins (2 contenders each, 1,200 in all by default), TTL at least 1 s; seeded nemesis as random"
            }
            Scenario::NoLock => "clients skip the lock and write anyway",
            Scenario::Random => {
                "seeded nemesis: kill, freeze, latency, black hole, refuse on random node subsets"
            }
            Scenario::ClusterMembers => {
                "3 Redis Cluster members × 3 shards; a shard of one killed and restarted while another migrates the resources' slots"
            }
        }
    }

    /// Whether Redlock is expected to keep mutual exclusion through this scenario, run with the
    /// restart guard and fencing as the scenario runs them by default
    /// ([`restart_guard`](Scenario::restart_guard), [`fencing`](Scenario::fencing)).
    pub fn expected_safe(self) -> bool {
        self.expected_safe_with(self.restart_guard(), self.fencing())
    }

    /// Whether Redlock is expected to keep mutual exclusion through this scenario with the
    /// lock's restart guard on or off, and with fencing on or off: the restart scenarios without
    /// persistence are safe only with the guard on, the client stalls only with fencing (then
    /// the store rejects the late writes). ([`Random`](Scenario::Random) is safe either way:
    /// without the guard its nodes persist every write.) Fencing makes no other scenario safe:
    /// it protects the store, but two holders at once are still two holders.
    pub fn expected_safe_with(self, restart_guard: bool, fencing: bool) -> bool {
        match self {
            Scenario::RestartNoPersistence | Scenario::RestartGuarded => restart_guard,
            Scenario::ClientStall | Scenario::ClientStallFenced => fencing,
            Scenario::ClockFast
            | Scenario::ClockJumpMinority
            | Scenario::ClockJumpMajority
            | Scenario::NoLock => false,
            _ => true,
        }
    }

    /// For a scenario known to be unsafe (as run by default): how long a run must be, in TTLs
    /// of the TTL it ran with, for it to show its hazard in every run. Each of these scenarios
    /// aims its faults at holds they can break (or, `client-stall`, its pauses at holds a later
    /// holder follows), so its hazard shows in the first fault cycle; a run shorter than that
    /// cycle, or than the cycle and the TTL scaling of a slow backend, may show nothing, and the
    /// verdict then is [`ExpectedVsObserved::TooShort`](crate::ExpectedVsObserved::TooShort),
    /// not a failure. `None` for a scenario expected to be safe.
    pub fn demonstrated_from_ttls(self) -> Option<u32> {
        match self {
            // The first contended hold: keys expire at a tenth of the TTL, writes interleave at
            // once.
            Scenario::ClockFast | Scenario::NoLock => Some(2),
            // The first jump comes after one TTL; every hold then under way is broken.
            Scenario::ClockJumpMajority => Some(4),
            // The first stalled hold (the first of each resource) writes ½ TTL after its
            // validity ended, once a later holder wrote.
            Scenario::ClientStall => Some(4),
            // The first cycle: ½ TTL, the cut (one TTL), a hold just taken (up to one more), the
            // restarts or the jump, and a contender's grant a moment later.
            Scenario::RestartNoPersistence | Scenario::ClockJumpMinority => Some(5),
            _ => None,
        }
    }

    /// Whether the clients' locks hand out fences, and the protected writes carry them, by
    /// default: only in [`ClientStallFenced`](Scenario::ClientStallFenced) and
    /// [`Election`](Scenario::Election), whose terms are fences
    /// ([`RunOptions::fencing`](crate::RunOptions::fencing) turns them on everywhere).
    pub fn fencing(self) -> bool {
        matches!(self, Scenario::ClientStallFenced | Scenario::Election)
    }

    /// Whether the clients' locks run with the restart guard by default: on (the library's
    /// default) everywhere but [`RestartNoPersistence`](Scenario::RestartNoPersistence), which
    /// shows what happens without it.
    pub fn restart_guard(self) -> bool {
        self != Scenario::RestartNoPersistence
    }

    /// Whether the scenario needs to control the nodes (kill, pause, proxies, clocks), so it can
    /// only run on a cluster it starts itself, not on a user's own deployment.
    pub fn needs_node_control(self) -> bool {
        !matches!(
            self,
            Scenario::Baseline
                | Scenario::ClientStall
                | Scenario::ClientStallFenced
                | Scenario::NoLock
        )
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Scenario> for &'static str {
    fn from(scenario: Scenario) -> &'static str {
        scenario.name()
    }
}

/// A scenario name that is not one of [`Scenario::ALL`] or [`Scenario::OPT_IN`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
#[error(
    "unknown scenario {0:?}; known: {known}, and (not in `all`) {opt_in}",
    known = Scenario::ALL.map(Scenario::name).join(", "),
    opt_in = Scenario::OPT_IN.map(Scenario::name).join(", ")
)]
pub struct UnknownScenario(
    /// The name given.
    pub String,
);

impl FromStr for Scenario {
    type Err = UnknownScenario;

    fn from_str(name: &str) -> Result<Scenario, UnknownScenario> {
        Scenario::ALL
            .into_iter()
            .chain(Scenario::OPT_IN)
            .find(|scenario| scenario.name() == name)
            .ok_or_else(|| UnknownScenario(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for scenario in Scenario::ALL.into_iter().chain(Scenario::OPT_IN) {
            assert_eq!(scenario.name().parse::<Scenario>(), Ok(scenario));
        }
        assert!(!Scenario::ALL.contains(&Scenario::ClusterMembers));
        assert!(Scenario::ClusterMembers.expected_safe());
        assert!(Scenario::ClusterMembers.needs_node_control());
        assert!("nope".parse::<Scenario>().is_err());
    }

    #[test]
    fn client_side_scenarios_need_no_node_control() {
        let free: Vec<_> = Scenario::ALL
            .into_iter()
            .filter(|s| !s.needs_node_control())
            .collect();
        assert_eq!(
            free,
            [
                Scenario::Baseline,
                Scenario::ClientStall,
                Scenario::ClientStallFenced,
                Scenario::NoLock
            ]
        );
    }

    #[test]
    fn only_the_restart_without_persistence_runs_without_the_guard_by_default() {
        for scenario in Scenario::ALL {
            assert_eq!(
                scenario.restart_guard(),
                scenario != Scenario::RestartNoPersistence,
                "{scenario}"
            );
        }
        assert!(!Scenario::RestartNoPersistence.expected_safe());
        assert!(Scenario::RestartNoPersistence.expected_safe_with(true, false));
        assert!(Scenario::RestartGuarded.expected_safe());
        assert!(!Scenario::RestartGuarded.expected_safe_with(false, false));
        assert!(Scenario::MinorityCrash.expected_safe_with(false, false));
    }

    /// Every scenario known to be unsafe says from how long a run on it shows its hazard; no
    /// safe one does.
    #[test]
    fn exactly_the_unsafe_scenarios_say_when_they_show_their_hazard() {
        for scenario in Scenario::ALL {
            assert_eq!(
                scenario.demonstrated_from_ttls().is_some(),
                !scenario.expected_safe(),
                "{scenario}"
            );
        }
    }

    /// Only the fenced client stall runs with fencing by default; fencing makes the client
    /// stalls safe, and nothing else.
    #[test]
    fn fencing_makes_only_the_client_stalls_safe() {
        for scenario in Scenario::ALL {
            assert_eq!(
                scenario.fencing(),
                matches!(scenario, Scenario::ClientStallFenced | Scenario::Election),
                "{scenario}"
            );
            let stall = matches!(
                scenario,
                Scenario::ClientStall | Scenario::ClientStallFenced
            );
            let guard = scenario.restart_guard();
            assert_eq!(
                scenario.expected_safe_with(guard, true),
                stall || scenario.expected_safe_with(guard, false),
                "{scenario}"
            );
            if stall {
                assert!(!scenario.expected_safe_with(guard, false), "{scenario}");
            }
        }
        assert!(!Scenario::ClientStall.expected_safe());
        assert!(Scenario::ClientStallFenced.expected_safe());
    }
}
