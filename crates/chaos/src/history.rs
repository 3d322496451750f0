//! What happened during a chaos run, on one monotonic clock: every hold of a lock (for a hold
//! kept alive, also what its lease said: its margin and its lost signal), every write to the
//! protected store (and the store's final state), every acquisition attempt and every injected
//! fault.
//!
//! (Over 500 lines: plain record types with their builders and docs, and the recorder; the
//! tests are short.)
//!
//! Instants are microseconds since the start of the run ([`Clock`]), so a [`History`] is plain
//! data: it can be built by hand in tests, checked by [`check`](super::check), serialised to JSON
//! and plotted.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

/// The run's monotonic clock: instants become microseconds since its epoch.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn start() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }

    /// A clock with the given epoch.
    pub fn with_epoch(epoch: Instant) -> Clock {
        Clock { epoch }
    }

    /// The epoch.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// `instant` in microseconds since the epoch (0 for instants before it).
    pub fn us(&self, instant: Instant) -> u64 {
        micros(instant.saturating_duration_since(self.epoch))
    }

    /// Now, in microseconds since the epoch.
    pub fn now_us(&self) -> u64 {
        self.us(Instant::now())
    }
}

/// One successful acquisition, from the holder's point of view.
///
/// The holder believes it holds the lock from `acquired_us` (the moment the grant was decided,
/// [`Guard::decided_at`](quorumlock::Guard::decided_at)) until the earlier of `valid_until_us`
/// (the guard's validity) and `released_us` (it started to release). That is its
/// [`window`](Hold::window). A successful [`Guard::extend`](quorumlock::Guard::extend) moves
/// `valid_until_us` to the extended validity.
///
/// A hold kept alive ([`Guard::keep_alive`](quorumlock::Guard::keep_alive)) has a
/// [`keep_alive`](Hold::keep_alive) record: its `valid_until_us` is then the lease's
/// [`valid_until`](quorumlock::Lease::valid_until), as last read (the keep-alive moves it in the
/// background at each extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Hold {
    /// The locked resource.
    pub resource: String,
    /// The client task that held it.
    pub holder: usize,
    /// The acquisition's token (unique per hold).
    pub token: String,
    /// When the acquire call started: no key of this hold was set before. Its lease on the nodes
    /// starts no earlier.
    pub acquire_started_us: u64,
    /// When the grant was decided ([`Guard::decided_at`](quorumlock::Guard::decided_at)): the
    /// holder believes it holds from here on.
    pub acquired_us: u64,
    /// [`Guard::valid_until`](quorumlock::Guard::valid_until), after the last successful
    /// extension if any.
    pub valid_until_us: u64,
    /// How many times the holder extended the hold successfully.
    pub extensions: u32,
    /// When the holder started to release (`None`: it never did; the lock expired).
    pub released_us: Option<u64>,
    /// What the keep-alive's lease said, for a hold kept alive (`None`: the holder kept the
    /// guard itself).
    pub keep_alive: Option<KeptLease>,
    /// An election leader's term (`None`: a lock's hold).
    pub term: Option<u64>,
}

/// What the lease of a hold kept alive said: how far its trusted deadline lies before the
/// validity, and whether and when it signalled the lock lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KeptLease {
    /// How long before the validity the lease's trusted deadline lies (µs): the keep-alive's
    /// margin, measured once as the guard's `valid_until` less the lease's right after
    /// [`Guard::keep_alive`](quorumlock::Guard::keep_alive). The validity of the hold's last
    /// successful extension ends at [`Hold::valid_until_us`] plus this.
    pub margin_us: u64,
    /// The lost signal, if [`Lease::lost`](quorumlock::Lease::lost) completed while the hold was
    /// held.
    pub lost: Option<LostSignal>,
}

/// A lease's lost signal: when a task that did nothing but await
/// [`Lease::lost`](quorumlock::Lease::lost) saw it complete, and the reason it gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LostSignal {
    /// When it was seen (µs).
    pub at_us: u64,
    /// Why the lock was lost.
    pub reason: LossReason,
}

/// Why a lease said its lock was lost ([`quorumlock::Lost`], without its details).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LossReason {
    /// A majority answered that the key is gone ([`Lost::Taken`](quorumlock::Lost::Taken)).
    Taken,
    /// No extension succeeded before the validity ran out
    /// ([`Lost::Expired`](quorumlock::Lost::Expired)).
    Expired,
    /// `max_hold` was reached ([`Lost::MaxHold`](quorumlock::Lost::MaxHold)).
    MaxHold,
    /// Any other reason (no runtime to keep the lock alive on).
    Other,
}

impl LossReason {
    /// The reason of a [`quorumlock::Lost`].
    pub fn of(lost: &quorumlock::Lost) -> LossReason {
        match lost {
            quorumlock::Lost::Taken { .. } => LossReason::Taken,
            quorumlock::Lost::Expired { .. } => LossReason::Expired,
            quorumlock::Lost::MaxHold { .. } => LossReason::MaxHold,
            _ => LossReason::Other,
        }
    }
}

impl Hold {
    /// A hold of `resource` by `holder` with `token`, believed from `acquired_us` until
    /// `valid_until_us`; the acquire call started at `acquired_us` and nothing was released (see
    /// [`started`](Hold::started) and [`released`](Hold::released)).
    pub fn new(
        resource: impl Into<String>,
        holder: usize,
        token: impl Into<String>,
        acquired_us: u64,
        valid_until_us: u64,
    ) -> Hold {
        Hold {
            resource: resource.into(),
            holder,
            token: token.into(),
            acquire_started_us: acquired_us,
            acquired_us,
            valid_until_us,
            extensions: 0,
            released_us: None,
            keep_alive: None,
            term: None,
        }
    }

    /// Marks the hold as an election leader's, of `term`.
    #[must_use]
    pub fn led(mut self, term: u64) -> Hold {
        self.term = Some(term);
        self
    }

    /// Sets when the acquire call started.
    #[must_use]
    pub fn started(mut self, acquire_started_us: u64) -> Hold {
        self.acquire_started_us = acquire_started_us;
        self
    }

    /// Records a successful extension: the hold is now valid until `valid_until_us`.
    #[must_use]
    pub fn extended(mut self, valid_until_us: u64) -> Hold {
        self.valid_until_us = valid_until_us;
        self.extensions = self.extensions.saturating_add(1);
        self
    }

    /// Sets when the holder started to release.
    #[must_use]
    pub fn released(mut self, released_us: u64) -> Hold {
        self.released_us = Some(released_us);
        self
    }

    /// Marks the hold as kept alive, its lease's trusted deadline `margin_us` before the
    /// validity, not (yet) lost.
    #[must_use]
    pub fn kept(mut self, margin_us: u64) -> Hold {
        self.keep_alive = Some(KeptLease {
            margin_us,
            lost: None,
        });
        self
    }

    /// Records the lease's lost signal, seen at `at_us` for `reason` (marking the hold as kept
    /// alive with no margin if it was not).
    #[must_use]
    pub fn lost(mut self, at_us: u64, reason: LossReason) -> Hold {
        self.signal_lost(LostSignal { at_us, reason });
        self
    }

    fn signal_lost(&mut self, signal: LostSignal) {
        self.keep_alive
            .get_or_insert(KeptLease {
                margin_us: 0,
                lost: None,
            })
            .lost = Some(signal);
    }

    /// For a hold kept alive, when the validity of its last successful extension (or of the
    /// acquisition) ends: the lease's deadline plus its margin. The lost signal must come by
    /// then.
    pub fn validity_end_us(&self) -> Option<u64> {
        self.keep_alive
            .as_ref()
            .map(|lease| self.valid_until_us.saturating_add(lease.margin_us))
    }

    /// When the holder stops believing it holds the lock: the earlier of the end of its validity
    /// and the start of its release.
    pub fn end_us(&self) -> u64 {
        self.released_us.map_or(self.valid_until_us, |released| {
            released.min(self.valid_until_us)
        })
    }

    /// Whether the holder started to release before its validity ended (else the hold ended
    /// by expiry).
    pub fn ended_by_release(&self) -> bool {
        self.released_us
            .is_some_and(|released| released < self.valid_until_us)
    }

    /// `(acquired_us, end_us)`: the half-open interval in which the holder may rely on the lock.
    pub fn window(&self) -> (u64, u64) {
        (self.acquired_us, self.end_us())
    }
}

/// One protected write: a read-modify-write of the resource's register in the protected store
/// (read the value, then write value + 1 and append `(token, value + 1)` to the resource's log),
/// as two round trips.
///
/// A write that was sent but not acknowledged ([`acked`](Write::acked) false) may or may not have
/// landed; one with no [`written`](Write::written) value got no further than its read (the read
/// went unanswered, or the deadline passed after it). A write whose deadline had passed before
/// anything was sent is not recorded.
///
/// With fencing, the write carries its holder's [`fence`](Write::fence) and the store may
/// refuse it ([`rejected`](Write::rejected)): then it changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Write {
    /// The resource whose register was written.
    pub resource: String,
    /// The client task that wrote.
    pub holder: usize,
    /// The token of the hold the writer believed it had.
    pub token: String,
    /// When the write was invoked: before its read was sent.
    pub invoked_us: u64,
    /// When it completed: the write's acknowledgement arrived; for an unacknowledged write, when
    /// the writer gave up on it.
    pub completed_us: u64,
    /// The value read (`None`: not recorded, or no read was answered).
    pub read: Option<u64>,
    /// The value written, the value read + 1 (`None`: not recorded, or no write was sent).
    pub written: Option<u64>,
    /// Whether the store acknowledged the write by the writer's deadline (an acknowledgement
    /// that came later counts as none: the writer had given up). A rejection is an answer too.
    pub acked: bool,
    /// The fence of the hold the write was made under (`None`: the run had no fencing).
    pub fence: Option<u64>,
    /// Why the fenced store refused the write, if it did (whenever the answer came): a
    /// rejected write changed nothing.
    pub rejected: Option<Rejection>,
}

/// Why the fenced protected store refused a write. The check and the write are one atomic
/// step in the store, so a refused write changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rejection {
    /// Its fence was below the last fence the store accepted: a later holder had written.
    OlderFence,
    /// The register no longer held the value the writer read: another write landed between
    /// the read and the write.
    ValueChanged,
}

impl Write {
    /// An acknowledged write to `resource` by `holder` under `token`, invoked at `invoked_us`
    /// and completed at `completed_us`, whose values were not recorded (see
    /// [`read_then_wrote`](Write::read_then_wrote)).
    pub fn new(
        resource: impl Into<String>,
        holder: usize,
        token: impl Into<String>,
        invoked_us: u64,
        completed_us: u64,
    ) -> Write {
        Write {
            resource: resource.into(),
            holder,
            token: token.into(),
            invoked_us,
            completed_us,
            read: None,
            written: None,
            acked: true,
            fence: None,
            rejected: None,
        }
    }

    /// Sets the fence the write carried.
    #[must_use]
    pub fn fenced(mut self, fence: u64) -> Write {
        self.fence = Some(fence);
        self
    }

    /// Marks the write as refused by the fenced store, for `reason`: it changed nothing.
    #[must_use]
    pub fn rejected(mut self, reason: Rejection) -> Write {
        self.rejected = Some(reason);
        self
    }

    /// Sets the value read, and the value written after it (read + 1).
    #[must_use]
    pub fn read_then_wrote(mut self, read: u64) -> Write {
        self.read = Some(read);
        self.written = Some(read.saturating_add(1));
        self
    }

    /// Marks the write as not acknowledged: it may or may not have landed.
    #[must_use]
    pub fn unacked(mut self) -> Write {
        self.acked = false;
        self
    }

    /// Marks the write as never sent: its read went unanswered, or its deadline passed after
    /// the read, so nothing was written.
    #[must_use]
    pub fn not_sent(mut self) -> Write {
        self.written = None;
        self.acked = false;
        self
    }
}

/// One entry of a resource's write log in the protected store: who wrote which value, under
/// which fence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LogEntry {
    /// The writer's token.
    pub token: String,
    /// The value it wrote.
    pub value: u64,
    /// The fence the write carried (`None`: the run had no fencing).
    pub fence: Option<u64>,
}

impl LogEntry {
    /// An entry: `token` wrote `value`, without a fence.
    pub fn new(token: impl Into<String>, value: u64) -> LogEntry {
        LogEntry {
            token: token.into(),
            value,
            fence: None,
        }
    }

    /// Sets the fence the write carried.
    #[must_use]
    pub fn fenced(mut self, fence: u64) -> LogEntry {
        self.fence = Some(fence);
        self
    }
}

/// One resource's state in the protected store, read back after the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Register {
    /// The resource.
    pub resource: String,
    /// The register's final value (`None`: never written).
    pub value: Option<u64>,
    /// Every write that landed, in the order the store applied them.
    pub log: Vec<LogEntry>,
}

impl Register {
    /// The final state of `resource`'s register: `value` and its `log`.
    pub fn new(resource: impl Into<String>, value: Option<u64>, log: Vec<LogEntry>) -> Register {
        Register {
            resource: resource.into(),
            value,
            log,
        }
    }
}

/// How one acquisition attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// A guard was returned.
    Acquired,
    /// [`Error::Held`](quorumlock::Error::Held): someone else holds it.
    Held,
    /// [`Error::Unavailable`](quorumlock::Error::Unavailable): too few nodes answered.
    Unavailable,
    /// [`Error::ValidityExpired`](quorumlock::Error::ValidityExpired): the round took the whole TTL.
    ValidityExpired,
    /// Any other error.
    Other,
}

impl Outcome {
    /// The outcome of an acquire call's result.
    pub fn of<T>(result: &Result<T, quorumlock::Error>) -> Outcome {
        match result {
            Ok(_) => Outcome::Acquired,
            Err(quorumlock::Error::Held { .. }) => Outcome::Held,
            Err(quorumlock::Error::Unavailable { .. }) => Outcome::Unavailable,
            Err(quorumlock::Error::ValidityExpired { .. }) => Outcome::ValidityExpired,
            Err(_) => Outcome::Other,
        }
    }
}

/// One acquisition attempt (one round over the nodes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Attempt {
    /// The resource asked for.
    pub resource: String,
    /// The client task.
    pub holder: usize,
    /// When the call started.
    pub started_us: u64,
    /// When it returned.
    pub finished_us: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// For a call of waiting call of [`Lock::acquire`](quorumlock::Lock::acquire) (`Patience::Wait`): the wait it was
    /// given (µs); `None` for a single round.
    pub wait_us: Option<u64>,
}

impl Attempt {
    /// An attempt on `resource` by `holder` from `started_us` to `finished_us`.
    pub fn new(
        resource: impl Into<String>,
        holder: usize,
        started_us: u64,
        finished_us: u64,
        outcome: Outcome,
    ) -> Attempt {
        Attempt {
            resource: resource.into(),
            holder,
            started_us,
            finished_us,
            outcome,
            wait_us: None,
        }
    }

    /// Marks the attempt as a call that waited up to `wait_us` for the lock.
    #[must_use]
    pub fn waited(mut self, wait_us: u64) -> Attempt {
        self.wait_us = Some(wait_us);
        self
    }

    /// How long the attempt took, in microseconds.
    pub fn latency_us(&self) -> u64 {
        self.finished_us.saturating_sub(self.started_us)
    }
}

/// A stretch in which the run's runtime fired no timer: the stall probe asked to be woken at
/// `from_us` and was woken at `to_us`. A lease's lost signal is a timer on the same runtime, so
/// it cannot come before such a stretch ends (the caveat of `docs/ARCHITECTURE.md`: a runtime
/// starved for longer than the margin fires it late).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Stall {
    /// When the probe was due (µs).
    pub from_us: u64,
    /// When it was woken (µs).
    pub to_us: u64,
}

impl Stall {
    /// A stall from `from_us` to `to_us`.
    pub fn new(from_us: u64, to_us: u64) -> Stall {
        Stall { from_us, to_us }
    }
}

/// A semaphore of the run: its name and how many may hold it at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Semaphore {
    /// The name its slots are named after (`name:0` …).
    pub name: String,
    /// Its permits.
    pub permits: u32,
}

impl Semaphore {
    /// The semaphore `name` of `permits` permits.
    pub fn new(name: impl Into<String>, permits: u32) -> Semaphore {
        Semaphore {
            name: name.into(),
            permits,
        }
    }

    /// Whether `resource` is one of its slots: its name, a colon and a number.
    pub fn has_slot(&self, resource: &str) -> bool {
        resource
            .strip_prefix(self.name.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
            .is_some_and(|slot| !slot.is_empty() && slot.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// A read-write lock of the run: a writer's hold is recorded under its name, a reader's under
/// `name:read:<client>:<n>` (one resource per reader hold, so readers holding together are no
/// overlap of one resource).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ReadWrite {
    /// The lock's name, its writers' resource.
    pub name: String,
}

impl ReadWrite {
    /// The read-write lock `name`.
    pub fn new(name: impl Into<String>) -> ReadWrite {
        ReadWrite { name: name.into() }
    }

    /// The resource a reader's hold is recorded under: `name:read:<client>:<n>`.
    pub fn reader(&self, client: usize, n: usize) -> String {
        format!("{}:read:{client}:{n}", self.name)
    }

    /// Whether `resource` is one of its readers' holds.
    pub fn has_reader(&self, resource: &str) -> bool {
        resource
            .strip_prefix(self.name.as_str())
            .is_some_and(|rest| rest.starts_with(":read:"))
    }
}

/// An injected fault, from when it was applied until it was lifted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FaultWindow {
    /// What was done, e.g. `kill` or `latency +15ms`.
    pub label: String,
    /// The nodes affected (empty for client-side faults).
    pub nodes: Vec<usize>,
    /// The resource a client-side fault hit (`None` for node faults).
    pub resource: Option<String>,
    /// When it was applied.
    pub start_us: u64,
    /// When it was lifted (`None`: it lasted until the end of the run).
    pub end_us: Option<u64>,
}

impl FaultWindow {
    /// A fault `label` on `nodes` from `start_us`, not yet lifted.
    pub fn new(label: impl Into<String>, nodes: Vec<usize>, start_us: u64) -> FaultWindow {
        FaultWindow {
            label: label.into(),
            nodes,
            resource: None,
            start_us,
            end_us: None,
        }
    }

    /// Marks the fault as hitting a client that works on `resource`.
    #[must_use]
    pub fn on_resource(mut self, resource: impl Into<String>) -> FaultWindow {
        self.resource = Some(resource.into());
        self
    }
}

/// Everything recorded in one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct History {
    /// Every successful acquisition.
    pub holds: Vec<Hold>,
    /// Every protected write.
    pub writes: Vec<Write>,
    /// Every acquisition attempt, successful or not.
    pub attempts: Vec<Attempt>,
    /// Every injected fault.
    pub faults: Vec<FaultWindow>,
    /// Every stretch in which the runtime fired no timer for longer than the stall probe
    /// allows, in time order.
    pub stalls: Vec<Stall>,
    /// The semaphores the clients took permits of: each one's holds are those of its slots,
    /// `name:0` … (a hold of any `name:i` counts, a slot past the permits included).
    pub semaphores: Vec<Semaphore>,
    /// The read-write locks the clients took sides of: a writer's holds are those of its name,
    /// a reader's those of `name:read:…`.
    pub read_writes: Vec<ReadWrite>,
    /// How long clients ran, in microseconds (the denominator of rates).
    pub duration_us: u64,
    /// The protected store's final state, one register per resource, read back after the run
    /// (`None`: there was no store to read, e.g. a history recorded by hand; then the checker
    /// audits nothing).
    pub store: Option<Vec<Register>>,
    /// How far past its wait a waiting call may return (µs): one attempt, as bounded by the
    /// lock's settings ([`Lock::attempt_bound`](quorumlock::Lock::attempt_bound)). `None` when
    /// nobody waited; then no call is judged late.
    pub wait_slack_us: Option<u64>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// The time from `from_us` to `to_us` in which the runtime ran: less the parts of its
    /// [`stalls`](History::stalls) within it.
    pub fn running_us(&self, from_us: u64, to_us: u64) -> u64 {
        let stalled: u64 = self
            .stalls
            .iter()
            .map(|stall| {
                to_us
                    .min(stall.to_us)
                    .saturating_sub(from_us.max(stall.from_us))
            })
            .sum();
        to_us.saturating_sub(from_us).saturating_sub(stalled)
    }
}

/// A protected write as its writer saw it, on the `Instant` clock: what
/// [`Recorder::write`] records as a [`Write`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct StampedWrite<'a> {
    /// The resource.
    pub resource: &'a str,
    /// The client task.
    pub holder: usize,
    /// The token of the hold the writer believed it had.
    pub token: &'a str,
    /// Before the read was sent.
    pub invoked: Instant,
    /// After the acknowledgement, or when the writer gave up.
    pub completed: Instant,
    /// The value read, if the read succeeded.
    pub read: Option<u64>,
    /// The value written, if a write was sent.
    pub written: Option<u64>,
    /// Whether the write was acknowledged (accepted or rejected) by the deadline.
    pub acked: bool,
    /// The fence the write carried, if the run had fencing.
    pub fence: Option<u64>,
    /// Why the fenced store refused the write, if it did.
    pub rejected: Option<Rejection>,
}

/// Which hold a [`Recorder`] handed out, to record its release later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldId(usize);

/// Which fault window a [`Recorder`] opened, to close it later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultId(usize);

/// Records a [`History`] from many tasks at once; cheap to clone (clones share the history).
///
/// Every event is stamped on the recorder's [`Clock`].
#[derive(Debug, Clone)]
pub struct Recorder {
    clock: Clock,
    history: Arc<Mutex<History>>,
}

impl Recorder {
    /// A recorder on `clock`, with an empty history.
    pub fn new(clock: Clock) -> Recorder {
        Recorder {
            clock,
            history: Arc::default(),
        }
    }

    /// The recorder's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    fn lock(&self) -> MutexGuard<'_, History> {
        // Every change is a single push or field update: the history stays consistent even if
        // a recording task panicked.
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records an acquisition attempt.
    pub fn attempt(
        &self,
        resource: &str,
        holder: usize,
        started: Instant,
        finished: Instant,
        outcome: Outcome,
    ) {
        let attempt = self.new_attempt(resource, holder, (started, finished), outcome);
        self.lock().attempts.push(attempt);
    }

    /// An attempt between two instants, on the history's clock.
    fn new_attempt(
        &self,
        resource: &str,
        holder: usize,
        (started, finished): (Instant, Instant),
        outcome: Outcome,
    ) -> Attempt {
        Attempt::new(
            resource,
            holder,
            self.clock.us(started),
            self.clock.us(finished),
            outcome,
        )
    }

    /// Records a call that waited up to `wait` for the lock (one attempt in the history, with
    /// its wait).
    pub fn waited(
        &self,
        resource: &str,
        holder: usize,
        (started, finished): (Instant, Instant),
        wait: Duration,
        outcome: Outcome,
    ) {
        let attempt = self
            .new_attempt(resource, holder, (started, finished), outcome)
            .waited(micros(wait));
        self.lock().attempts.push(attempt);
    }

    /// Records how far past its wait a waiting call may return.
    pub fn set_wait_slack(&self, slack: Duration) {
        self.lock().wait_slack_us = Some(micros(slack));
    }

    /// Records the start of a hold: the acquire call started at `started`, returned the guard
    /// at `acquired`, valid until `valid_until`.
    pub fn begin_hold(
        &self,
        resource: &str,
        holder: usize,
        token: &str,
        started: Instant,
        acquired: Instant,
        valid_until: Instant,
    ) -> HoldId {
        let hold = Hold::new(
            resource,
            holder,
            token,
            self.clock.us(acquired),
            self.clock.us(valid_until),
        )
        .started(self.clock.us(started));
        let mut history = self.lock();
        history.holds.push(hold);
        HoldId(history.holds.len() - 1)
    }

    /// Records that `hold` is an election leader's, of `term`.
    pub fn term(&self, hold: HoldId, term: u64) {
        if let Some(hold) = self.lock().holds.get_mut(hold.0) {
            hold.term = Some(term);
        }
    }

    /// Records that the holder of `hold` started to release at `released`.
    pub fn end_hold(&self, hold: HoldId, released: Instant) {
        let released = self.clock.us(released);
        if let Some(hold) = self.lock().holds.get_mut(hold.0) {
            hold.released_us = Some(released);
        }
    }

    /// Records that `hold` was extended: it is now valid until `valid_until`.
    pub fn extend_hold(&self, hold: HoldId, valid_until: Instant) {
        let valid_until = self.clock.us(valid_until);
        if let Some(hold) = self.lock().holds.get_mut(hold.0) {
            hold.valid_until_us = valid_until;
            hold.extensions = hold.extensions.saturating_add(1);
        }
    }

    /// Records that `hold` is kept alive from now on: its lease trusts it until `valid_until`,
    /// `margin` before the validity.
    pub fn keep_alive(&self, hold: HoldId, valid_until: Instant, margin: Duration) {
        let valid_until = self.clock.us(valid_until);
        let margin_us = micros(margin);
        if let Some(hold) = self.lock().holds.get_mut(hold.0) {
            hold.valid_until_us = valid_until;
            hold.keep_alive = Some(KeptLease {
                margin_us,
                lost: None,
            });
        }
    }

    /// Records what the lease of the kept `hold` says now: `extensions` successful extensions,
    /// trusted until `valid_until`. Both only grow: an older reading recorded late changes
    /// nothing.
    pub fn lease_read(&self, hold: HoldId, extensions: u64, valid_until: Instant) {
        let valid_until = self.clock.us(valid_until);
        let extensions = u32::try_from(extensions).unwrap_or(u32::MAX);
        if let Some(hold) = self.lock().holds.get_mut(hold.0) {
            hold.valid_until_us = hold.valid_until_us.max(valid_until);
            hold.extensions = hold.extensions.max(extensions);
        }
    }

    /// Records that the lease of the kept `hold` signalled its lock lost for `reason`, seen at
    /// `at`.
    pub fn lost(&self, hold: HoldId, at: Instant, reason: LossReason) {
        let at_us = self.clock.us(at);
        if let Some(hold) = self.lock().holds.get_mut(hold.0) {
            hold.signal_lost(LostSignal { at_us, reason });
        }
    }

    /// Records a protected write, stamping its instants on the recorder's clock.
    pub fn write(&self, write: StampedWrite<'_>) {
        let mut recorded = Write::new(
            write.resource,
            write.holder,
            write.token,
            self.clock.us(write.invoked),
            self.clock.us(write.completed),
        );
        recorded.read = write.read;
        recorded.written = write.written;
        recorded.acked = write.acked;
        recorded.fence = write.fence;
        recorded.rejected = write.rejected;
        self.lock().writes.push(recorded);
    }

    /// Records the protected store's final state.
    pub fn set_store(&self, registers: Vec<Register>) {
        self.lock().store = Some(registers);
    }

    /// Records that fault `label` was applied to `nodes` now.
    pub fn fault(&self, label: impl Into<String>, nodes: &[usize]) -> FaultId {
        let window = FaultWindow::new(label, nodes.to_vec(), self.clock.now_us());
        let mut history = self.lock();
        history.faults.push(window);
        FaultId(history.faults.len() - 1)
    }

    /// Records that a client working on `resource` was hit by fault `label` now (a pause,
    /// say).
    pub fn client_fault(&self, label: impl Into<String>, resource: &str) -> FaultId {
        let window = FaultWindow::new(label, Vec::new(), self.clock.now_us()).on_resource(resource);
        let mut history = self.lock();
        history.faults.push(window);
        FaultId(history.faults.len() - 1)
    }

    /// Records that fault `fault` was lifted now.
    pub fn lift(&self, fault: FaultId) {
        let now = self.clock.now_us();
        if let Some(window) = self.lock().faults.get_mut(fault.0) {
            window.end_us = Some(now);
        }
    }

    /// Records that the stall probe, due at `due`, was woken only at `woke`.
    pub fn stall(&self, due: Instant, woke: Instant) {
        let stall = Stall::new(self.clock.us(due), self.clock.us(woke));
        self.lock().stalls.push(stall);
    }

    /// Records that the clients take permits of `semaphore`.
    pub fn semaphore(&self, semaphore: Semaphore) {
        self.lock().semaphores.push(semaphore);
    }

    /// Records that the clients take sides of `lock`.
    pub fn read_write(&self, lock: ReadWrite) {
        self.lock().read_writes.push(lock);
    }

    /// Every resource a write was recorded for, in order: the registers the store audit needs
    /// (a holder may write to one the run did not plan, as a semaphore's slot past its
    /// permits).
    pub fn written_resources(&self) -> Vec<String> {
        let resources: std::collections::BTreeSet<String> = self
            .lock()
            .writes
            .iter()
            .map(|write| write.resource.clone())
            .collect();
        resources.into_iter().collect()
    }

    /// Sets how long the clients ran.
    pub fn set_duration(&self, duration_us: u64) {
        self.lock().duration_us = duration_us;
    }

    /// A copy of the history so far.
    pub fn snapshot(&self) -> History {
        self.lock().clone()
    }

    /// The history so far, leaving an empty one behind: for the end of a run, when nothing
    /// records any more (a [`snapshot`](Recorder::snapshot) would hold two copies of a long
    /// run's history at once).
    pub fn take(&self) -> History {
        std::mem::take(&mut *self.lock())
    }
}

/// `duration` in whole microseconds, saturating.
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_end_at_the_earlier_of_validity_and_release() {
        let hold = Hold::new("r", 0, "t", 10, 100);
        assert_eq!(hold.window(), (10, 100));
        assert_eq!(hold.clone().released(50).window(), (10, 50));
        assert!(hold.clone().released(50).ended_by_release());
        assert_eq!(hold.clone().released(150).window(), (10, 100));
        assert!(!hold.clone().released(150).ended_by_release());
        assert_eq!(hold.clone().extended(200).released(150).window(), (10, 150));
        assert!(!hold.ended_by_release());
    }

    #[test]
    fn the_recorder_stamps_on_its_clock() {
        let clock = Clock::start();
        let epoch = clock.epoch();
        let recorder = Recorder::new(clock);
        let ms = Duration::from_millis;
        let id = recorder.begin_hold("r", 1, "t", epoch, epoch + ms(2), epoch + ms(10));
        recorder.write(StampedWrite {
            resource: "r",
            holder: 1,
            token: "t",
            invoked: epoch + ms(3),
            completed: epoch + ms(4),
            read: Some(6),
            written: Some(7),
            acked: true,
            fence: Some(4),
            rejected: Some(Rejection::OlderFence),
        });
        recorder.extend_hold(id, epoch + ms(20));
        recorder.end_hold(id, epoch + ms(5));
        let history = recorder.snapshot();
        assert_eq!(history.holds[0].window(), (2_000, 5_000));
        assert_eq!(history.holds[0].extensions, 1);
        assert!(history.holds[0].ended_by_release());
        assert_eq!(history.holds[0].acquire_started_us, 0);
        let write = &history.writes[0];
        assert_eq!((write.invoked_us, write.completed_us), (3_000, 4_000));
        assert_eq!(
            (write.read, write.written, write.acked),
            (Some(6), Some(7), true)
        );
        assert_eq!(
            (write.fence, write.rejected),
            (Some(4), Some(Rejection::OlderFence))
        );
        assert_eq!(clock.us(epoch - ms(1)), 0);
        assert_eq!(recorder.take(), history);
        assert_eq!(recorder.snapshot(), History::new());
    }

    /// A hold kept alive: the lease's deadline replaces the guard's validity, a reading only
    /// moves it (and the extensions) forward, and the lost signal keeps its instant and reason.
    #[test]
    fn the_recorder_follows_a_kept_lease() {
        let clock = Clock::start();
        let epoch = clock.epoch();
        let recorder = Recorder::new(clock);
        let ms = Duration::from_millis;
        let id = recorder.begin_hold("r", 1, "t", epoch, epoch + ms(2), epoch + ms(10));
        recorder.keep_alive(id, epoch + ms(9), ms(1));
        recorder.lease_read(id, 2, epoch + ms(30));
        // An older reading, recorded late.
        recorder.lease_read(id, 1, epoch + ms(20));
        recorder.lost(id, epoch + ms(29), LossReason::Expired);
        let hold = recorder.snapshot().holds.remove(0);
        assert_eq!((hold.valid_until_us, hold.extensions), (30_000, 2));
        assert_eq!(hold.validity_end_us(), Some(31_000));
        assert_eq!(
            hold,
            Hold::new("r", 1, "t", 2_000, 9_000)
                .started(0)
                .kept(1_000)
                .extended(20_000)
                .extended(30_000)
                .lost(29_000, LossReason::Expired)
        );
        assert_eq!(Hold::new("r", 1, "t", 0, 10).validity_end_us(), None);
    }
}
