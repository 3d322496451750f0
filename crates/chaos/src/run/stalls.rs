//! The stall probe: a task on the clients' runtime that asks to be woken every millisecond and
//! records each time it was woken more than [`STALL`] late. Those are the stretches in which
//! the runtime fired no timer (two cores shared with five servers and the other tests, a debug
//! build), so the keep-alive's lost signal, a timer too, could not fire either: the checker
//! tells a signal late for that from one the keeper sent late.

use std::time::{Duration, Instant};

use crate::history::Recorder;

/// How often the probe asks to be woken.
const TICK: Duration = Duration::from_millis(1);

/// How late a wake-up is recorded as a stall: above the timer wheel's millisecond and the
/// scheduling noise of a busy two-core machine, below the smallest lease margin (5 ms).
const STALL: Duration = Duration::from_millis(4);

/// Probes the runtime until `until`, recording every stall on `recorder`.
pub(super) async fn watch(recorder: Recorder, until: Instant) {
    let mut due = Instant::now() + TICK;
    while due < until {
        tokio::time::sleep_until(due.into()).await;
        let woke = Instant::now();
        if woke.saturating_duration_since(due) > STALL {
            recorder.stall(due, woke);
        }
        due = woke + TICK;
    }
}
