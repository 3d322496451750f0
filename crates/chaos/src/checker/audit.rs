//! The store audit, pure: which writes the protected store lost ([`LostWrite`]), from its final
//! state and the history's writes; which holders' writes interleaved ([`Interleaving`]), from
//! the writes' invocation and completion instants; and, with fencing, where the store accepted a
//! write with a lower fence than the one before it ([`FenceRegression`]), from its log. Writes
//! the fenced store rejected changed nothing and are left out of all three.
//!
//! (Just over 500 lines: the three audits share the reasoning below, and their unit and
//! property tests stay beside them.)
//!
//! # Why a correct lock shows neither, and a broken one does
//!
//! Each protected write is a read-modify-write of one register: read `v`, then write `v + 1` and
//! append `(token, v + 1)` to the resource's log in one transaction. The log is therefore the
//! order in which the store applied the writes, and the register always holds the last logged
//! value. If no two holders' writes interleave, every read is sent after the previous write of
//! the resource was acknowledged (by an earlier holder, or by the same holder awaiting its own
//! write), so it sees that value: consecutive log entries go `v`, `v + 1`, and every
//! acknowledged write is in the log. A writer that overlaps another one can read a value the
//! other is about to replace: then both write the same value, one increment is gone, and the log
//! shows an entry whose successor did not read it (a lost update), even when the holders'
//! windows were recorded as clean.
//!
//! Interleaving is read from the history alone: the writes of one hold (one token) span from the
//! first one's invocation to the last one's completion (an unacknowledged write counts by its
//! invocation only: when it landed, if at all, is unknown, and the log audit covers its
//! effect); two spans of different tokens on one resource that overlap mean the two holders
//! wrote at the same time. A correct lock never produces that: every acknowledged write of a
//! hold is invoked and completed inside the hold's window, every other one invoked inside it
//! (else it is a stale write), and the windows of one resource do not overlap.
//!
//! The one timing assumption: a write sent but not acknowledged by its holder's deadline (the
//! end of its validity) lands before the next holder reads. Its holder then does not release
//! (it lets the keys expire), so the next holder gets in no earlier than the drift (6 ms at the
//! 400 ms TTL) after that deadline; the store is local and never faulted.
//!
//! # Fences
//!
//! The lock's fences grow strictly from one holder of a resource to the next, and the fenced
//! store accepts a write only if its fence is at least the last one it accepted. So in the log
//! (the order the store applied the writes in) the fences never go down: a lower fence after a
//! higher one is an earlier holder's write accepted after a later holder's, the very thing
//! fencing exists to stop. The audit needs no instants: it holds whatever the clients' timing.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::history::{History, LogEntry, Write};

/// Why a write counts as lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LostReason {
    /// Acknowledged, but not in the store's log.
    NotInLog,
    /// In the log, but the next write in the log did not read its value: its increment was
    /// overwritten unseen (a lost update).
    Overwritten,
    /// The last write in the log, but the register holds another value.
    NotInRegister,
}

/// A write whose effect is missing from the store's final state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LostWrite {
    /// The resource.
    pub resource: String,
    /// The writer's token.
    pub token: String,
    /// The value it wrote.
    pub value: u64,
    /// What is missing.
    pub reason: LostReason,
}

/// The writes of one hold (one token) on one resource: from the first one's invocation to the
/// last one's completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WriteSpan {
    /// The client task.
    pub holder: usize,
    /// The token the writes were made under.
    pub token: String,
    /// The first write's invocation (µs).
    pub start_us: u64,
    /// The last write's completion (µs).
    pub end_us: u64,
}

/// Two holders whose writes to one resource overlapped in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Interleaving {
    /// The resource.
    pub resource: String,
    /// The span that started first.
    pub first: WriteSpan,
    /// The span that started while the first one was still writing.
    pub second: WriteSpan,
    /// How long both were writing (µs).
    pub overlap_us: u64,
}

/// Where the fenced store accepted a write with a lower fence than the write before it in the
/// resource's log: an earlier holder's write applied after a later holder's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FenceRegression {
    /// The resource.
    pub resource: String,
    /// The position of the later entry in the resource's log (from 0).
    pub position: usize,
    /// The entry before it, with the higher fence.
    pub before: LogEntry,
    /// The entry with the lower fence, accepted after it.
    pub after: LogEntry,
}

/// Every write whose effect the store's final state lacks; nothing when the history has no
/// store state. Unacknowledged writes may be missing from the log, but once in it, their
/// increment must survive like any other.
pub(super) fn lost_writes(history: &History) -> Vec<LostWrite> {
    let Some(registers) = &history.store else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut logged: HashMap<(&str, &str, u64), usize> = HashMap::new();
    for register in registers {
        let resource = register.resource.as_str();
        for entry in &register.log {
            *logged
                .entry((resource, entry.token.as_str(), entry.value))
                .or_default() += 1;
        }
        let lost = |entry: &LogEntry, reason| LostWrite {
            resource: resource.to_owned(),
            token: entry.token.clone(),
            value: entry.value,
            reason,
        };
        for pair in register.log.windows(2) {
            if let [earlier, later] = pair
                && later.value != earlier.value.saturating_add(1)
            {
                found.push(lost(earlier, LostReason::Overwritten));
            }
        }
        if let Some(last) = register.log.last()
            && register.value != Some(last.value)
        {
            found.push(lost(last, LostReason::NotInRegister));
        }
    }
    for write in history
        .writes
        .iter()
        .filter(|write| write.acked && write.rejected.is_none())
    {
        let Some(value) = write.written else {
            continue;
        };
        let key = (write.resource.as_str(), write.token.as_str(), value);
        match logged.get_mut(&key) {
            Some(count) if *count > 0 => *count -= 1,
            _ => found.push(LostWrite {
                resource: write.resource.clone(),
                token: write.token.clone(),
                value,
                reason: LostReason::NotInLog,
            }),
        }
    }
    found
}

/// Every pair of consecutive entries of a resource's log, both fenced, whose fence went down;
/// nothing when the history has no store state.
pub(super) fn fence_regressions(history: &History) -> Vec<FenceRegression> {
    let Some(registers) = &history.store else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for register in registers {
        for (position, pair) in register.log.windows(2).enumerate() {
            if let [before, after] = pair
                && let (Some(higher), Some(lower)) = (before.fence, after.fence)
                && lower < higher
            {
                found.push(FenceRegression {
                    resource: register.resource.clone(),
                    position: position + 1,
                    before: before.clone(),
                    after: after.clone(),
                });
            }
        }
    }
    found
}

/// Every pair of holds (tokens) of one resource whose write spans overlap. Unacknowledged
/// writes (also those that got no further than the read) count by their invocation; rejected
/// ones not at all.
pub(super) fn interleavings(writes: &[Write]) -> Vec<Interleaving> {
    let mut spans: BTreeMap<&str, BTreeMap<&str, WriteSpan>> = BTreeMap::new();
    for write in writes.iter().filter(|write| write.rejected.is_none()) {
        let end_us = if write.acked {
            write.completed_us.max(write.invoked_us)
        } else {
            write.invoked_us
        };
        spans
            .entry(write.resource.as_str())
            .or_default()
            .entry(write.token.as_str())
            .and_modify(|span| {
                span.start_us = span.start_us.min(write.invoked_us);
                span.end_us = span.end_us.max(end_us);
            })
            .or_insert_with(|| WriteSpan {
                holder: write.holder,
                token: write.token.clone(),
                start_us: write.invoked_us,
                end_us,
            });
    }
    let mut found = Vec::new();
    for (resource, by_token) in spans {
        let mut spans: Vec<WriteSpan> = by_token.into_values().collect();
        spans.sort_by(|a, b| {
            (a.start_us, a.end_us, &a.token).cmp(&(b.start_us, b.end_us, &b.token))
        });
        for (i, first) in spans.iter().enumerate() {
            // Sorted by start: once a later span starts at or after this one's end, so do all
            // that follow it.
            for second in spans.iter().skip(i + 1) {
                if second.start_us >= first.end_us {
                    break;
                }
                found.push(Interleaving {
                    resource: resource.to_owned(),
                    first: first.clone(),
                    second: second.clone(),
                    overlap_us: first.end_us.min(second.end_us) - second.start_us,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Register, Rejection};
    use proptest::prelude::*;

    fn history(writes: Vec<Write>, registers: Vec<Register>) -> History {
        History {
            writes,
            store: Some(registers),
            ..History::default()
        }
    }

    fn log(entries: &[(&str, u64)]) -> Vec<LogEntry> {
        entries
            .iter()
            .map(|(token, value)| LogEntry::new(*token, *value))
            .collect()
    }

    #[test]
    fn serial_writes_lose_nothing() {
        let writes = vec![
            Write::new("r", 1, "a", 0, 10).read_then_wrote(0),
            Write::new("r", 1, "a", 20, 30).read_then_wrote(1),
            Write::new("r", 2, "b", 40, 50).read_then_wrote(2),
        ];
        let store = vec![Register::new(
            "r",
            Some(3),
            log(&[("a", 1), ("a", 2), ("b", 3)]),
        )];
        let history = history(writes, store);
        assert!(lost_writes(&history).is_empty());
        assert!(interleavings(&history.writes).is_empty());
    }

    /// Two holders read 1, both write 2: the first 2 was overwritten unseen, and their writes
    /// overlapped.
    #[test]
    fn a_lost_update_is_lost_and_interleaved() {
        let writes = vec![
            Write::new("r", 1, "a", 0, 10).read_then_wrote(0),
            Write::new("r", 1, "a", 20, 40).read_then_wrote(1),
            Write::new("r", 2, "b", 25, 35).read_then_wrote(1),
        ];
        let store = vec![Register::new(
            "r",
            Some(2),
            log(&[("a", 1), ("b", 2), ("a", 2)]),
        )];
        let history = history(writes, store);
        let lost: Vec<_> = lost_writes(&history)
            .into_iter()
            .map(|l| (l.token, l.value, l.reason))
            .collect();
        assert_eq!(lost, vec![("b".to_owned(), 2, LostReason::Overwritten)]);
        let interleaved = interleavings(&history.writes);
        assert_eq!(interleaved.len(), 1);
        assert_eq!(interleaved[0].overlap_us, 10);
        assert_eq!(
            (interleaved[0].first.holder, interleaved[0].second.holder),
            (1, 2)
        );
    }

    #[test]
    fn acknowledged_writes_must_be_in_the_log_and_the_last_in_the_register() {
        let writes = vec![
            Write::new("r", 1, "a", 0, 10).read_then_wrote(0),
            Write::new("r", 1, "a", 20, 30).read_then_wrote(1),
            // Unacknowledged and absent: allowed.
            Write::new("r", 2, "b", 40, 50).read_then_wrote(2).unacked(),
            // Never sent: allowed.
            Write::new("r", 2, "b", 60, 70).not_sent(),
        ];
        let store = vec![Register::new("r", Some(5), log(&[("a", 1)]))];
        let lost: Vec<_> = lost_writes(&history(writes, store))
            .into_iter()
            .map(|l| (l.value, l.reason))
            .collect();
        assert_eq!(
            lost,
            vec![(1, LostReason::NotInRegister), (2, LostReason::NotInLog)]
        );
    }

    #[test]
    fn without_a_store_nothing_is_audited() {
        let mut history = history(
            vec![Write::new("r", 1, "a", 0, 10).read_then_wrote(0)],
            vec![],
        );
        assert_eq!(lost_writes(&history).len(), 1);
        history.store = None;
        assert!(lost_writes(&history).is_empty());
    }

    #[test]
    fn back_to_back_spans_do_not_interleave() {
        let writes = vec![
            Write::new("r", 1, "a", 0, 10),
            Write::new("r", 2, "b", 10, 20),
            Write::new("s", 3, "c", 5, 15),
            // An unacknowledged write counts from its invocation only.
            Write::new("r", 5, "e", 20, 40).read_then_wrote(3).unacked(),
            Write::new("r", 6, "f", 21, 22),
        ];
        assert!(interleavings(&writes).is_empty());
    }

    /// A write that got no further than its read still read inside another holder's writes.
    #[test]
    fn a_read_inside_another_span_interleaves() {
        let writes = vec![
            Write::new("r", 1, "a", 0, 10),
            Write::new("r", 1, "a", 20, 30),
            Write::new("r", 2, "b", 15, 40)
                .read_then_wrote(4)
                .not_sent(),
        ];
        assert_eq!(interleavings(&writes).len(), 1);
    }

    /// A rejected write is in no log and overlaps nothing: neither lost nor interleaved.
    #[test]
    fn rejected_writes_are_neither_lost_nor_interleaved() {
        let writes = vec![
            Write::new("r", 1, "a", 0, 10).read_then_wrote(0).fenced(1),
            Write::new("r", 2, "b", 20, 30).read_then_wrote(1).fenced(2),
            Write::new("r", 1, "a", 25, 26)
                .read_then_wrote(2)
                .fenced(1)
                .rejected(Rejection::OlderFence),
            Write::new("r", 2, "b", 40, 50).read_then_wrote(2).fenced(2),
        ];
        let store = vec![Register::new(
            "r",
            Some(3),
            vec![
                LogEntry::new("a", 1).fenced(1),
                LogEntry::new("b", 2).fenced(2),
                LogEntry::new("b", 3).fenced(2),
            ],
        )];
        let history = history(writes, store);
        assert!(lost_writes(&history).is_empty());
        assert!(interleavings(&history.writes).is_empty());
        assert!(fence_regressions(&history).is_empty());
    }

    /// The log's fences may stay or grow; a fence below the one before it is a regression, and
    /// entries without a fence are not compared.
    #[test]
    fn a_fence_that_goes_down_in_the_log_is_a_regression() {
        let store = vec![
            Register::new(
                "r",
                Some(5),
                vec![
                    LogEntry::new("a", 1).fenced(3),
                    LogEntry::new("a", 2).fenced(3),
                    LogEntry::new("b", 3).fenced(4),
                    LogEntry::new("a", 4).fenced(3),
                    LogEntry::new("c", 5).fenced(5),
                ],
            ),
            Register::new(
                "s",
                Some(2),
                vec![LogEntry::new("x", 1).fenced(9), LogEntry::new("y", 2)],
            ),
        ];
        let regressions = fence_regressions(&history(vec![], store));
        assert_eq!(
            regressions,
            vec![FenceRegression {
                resource: "r".to_owned(),
                position: 3,
                before: LogEntry::new("b", 3).fenced(4),
                after: LogEntry::new("a", 4).fenced(3),
            }]
        );
        let mut without_store = history(vec![], vec![]);
        without_store.store = None;
        assert!(fence_regressions(&without_store).is_empty());
    }

    /// One operation of a simulated store run: which hold writes, and whether its read saw the
    /// value before the last write instead of the current one (a lost update).
    type Op = (usize, bool);

    /// Runs `ops` against a simulated register, in order, one instant apart: the writes and
    /// the final state a store would leave.
    fn simulate(ops: &[Op]) -> History {
        let (mut value, mut previous) = (0u64, 0u64);
        let mut entries = Vec::new();
        let mut writes = Vec::new();
        for (i, &(hold, stale)) in ops.iter().enumerate() {
            let read = if stale { previous } else { value };
            let token = format!("t{hold}");
            let at = i as u64 * 10;
            writes.push(Write::new("r", hold, token.clone(), at, at + 5).read_then_wrote(read));
            previous = value;
            value = read + 1;
            entries.push(LogEntry::new(token, value));
        }
        history(writes, vec![Register::new("r", Some(value), entries)])
    }

    /// Holds in turn: each writes one or more times, none reads a stale value.
    fn serial_ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(1usize..4, 1..20).prop_map(|writes_per_hold| {
            writes_per_hold
                .into_iter()
                .enumerate()
                .flat_map(|(hold, writes)| std::iter::repeat_n((hold, false), writes))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn serial_runs_lose_nothing(ops in serial_ops()) {
            let history = simulate(&ops);
            prop_assert!(lost_writes(&history).is_empty(), "{:#?}", history);
            prop_assert!(interleavings(&history.writes).is_empty());
        }

        #[test]
        fn one_stale_read_is_a_lost_write(ops in serial_ops(), pick in any::<prop::sample::Index>()) {
            prop_assume!(ops.len() >= 2);
            let mut ops = ops;
            let i = pick.index(ops.len() - 1) + 1;
            ops[i].1 = true;
            let lost = lost_writes(&simulate(&ops));
            prop_assert_eq!(lost.len(), 1);
            prop_assert_eq!(lost[0].reason, LostReason::Overwritten);
        }

        #[test]
        fn one_shifted_write_interleaves(ops in serial_ops(), pick in any::<prop::sample::Index>()) {
            let mut history = simulate(&ops);
            let holds = ops.last().map_or(0, |op| op.0 + 1);
            prop_assume!(holds >= 2);
            // Move the first write of a later hold into the previous hold's span.
            let hold = pick.index(holds - 1) + 1;
            let previous_end = history
                .writes
                .iter()
                .filter(|w| w.holder == hold - 1)
                .map(|w| w.completed_us)
                .max()
                .unwrap_or(0);
            if let Some(write) = history.writes.iter_mut().find(|w| w.holder == hold) {
                write.invoked_us = previous_end - 1;
            }
            prop_assert!(!interleavings(&history.writes).is_empty());
        }
    }
}
