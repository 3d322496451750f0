//! A read-write lock's promise, checked on the holds of its two sides, pure: no writer's window
//! overlaps any other holder's, reader or writer ([`WriterBeside`]); readers may overlap each
//! other. Windows are the holders' own beliefs (acquired until validity end or release),
//! half-open, so a hand-off at one instant is not an overlap.

use serde::Serialize;

use super::HoldRef;
use crate::history::{History, ReadWrite};

/// A writer that held beside another holder of the same read-write lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WriterBeside {
    /// The read-write lock.
    pub lock: String,
    /// The writer's hold.
    pub writer: HoldRef,
    /// The other holder's hold.
    pub other: HoldRef,
    /// Whether the other holder was a reader (else another writer).
    pub other_reads: bool,
    /// When both held (µs): the later start.
    pub at_us: u64,
}

/// How a read-write lock's sides were used in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SideUse {
    /// The read-write lock.
    pub lock: String,
    /// Holds of its read side.
    pub reads: usize,
    /// Holds of its write side.
    pub writes: usize,
    /// The most readers believed at one instant (above 1 shows readers held together).
    pub most_readers_at_once: usize,
}

/// Every read-write lock of the history, its use, and every pair of a writer and another holder
/// whose windows overlap, in time order.
pub(super) fn sides(history: &History) -> (Vec<SideUse>, Vec<WriterBeside>) {
    let mut uses = Vec::new();
    let mut found = Vec::new();
    for lock in &history.read_writes {
        let (used, beside) = one_lock(history, lock);
        uses.push(used);
        found.extend(beside);
    }
    found.sort_by_key(|beside| beside.at_us);
    (uses, found)
}

fn one_lock(history: &History, lock: &ReadWrite) -> (SideUse, Vec<WriterBeside>) {
    let side = |reads: bool| -> Vec<HoldRef> {
        history
            .holds
            .iter()
            .filter(|hold| {
                if reads {
                    lock.has_reader(&hold.resource)
                } else {
                    hold.resource == lock.name
                }
            })
            .map(HoldRef::of)
            .filter(|hold| hold.start_us < hold.end_us)
            .collect()
    };
    let (readers, writers) = (side(true), side(false));
    let overlap = |a: &HoldRef, b: &HoldRef| a.start_us < b.end_us && b.start_us < a.end_us;
    let mut found = Vec::new();
    for (i, writer) in writers.iter().enumerate() {
        let others = writers
            .iter()
            .skip(i + 1)
            .map(|other| (other, false))
            .chain(readers.iter().map(|reader| (reader, true)));
        for (other, other_reads) in others {
            if overlap(writer, other) {
                found.push(WriterBeside {
                    lock: lock.name.clone(),
                    writer: writer.clone(),
                    other: other.clone(),
                    other_reads,
                    at_us: writer.start_us.max(other.start_us),
                });
            }
        }
    }
    // The most readers at once: ends before starts at one instant (half-open windows).
    let mut edges: Vec<(u64, bool)> = readers
        .iter()
        .flat_map(|hold| [(hold.start_us, true), (hold.end_us, false)])
        .collect();
    edges.sort_unstable();
    let (mut now, mut most) = (0usize, 0usize);
    for (_, starts) in edges {
        if starts {
            now += 1;
            most = most.max(now);
        } else {
            now = now.saturating_sub(1);
        }
    }
    let used = SideUse {
        lock: lock.name.clone(),
        reads: readers.len(),
        writes: writers.len(),
        most_readers_at_once: most,
    };
    (used, found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::checker::tests::history;
    use crate::history::Hold;

    /// Readers together are fine; a writer beside a reader, or two writers, are findings; a
    /// writer starting as a reader ends is a hand-off; other names do not count.
    #[test]
    fn a_writer_beside_any_other_holder_is_a_finding() {
        let lock = ReadWrite::new("rw");
        let holds = vec![
            Hold::new(lock.reader(1, 0), 1, "a", 0, 100),
            Hold::new(lock.reader(2, 0), 2, "b", 50, 150),
            // Starts as "b" ends: a hand-off.
            Hold::new("rw", 3, "c", 150, 200),
            // Beside "c".
            Hold::new(lock.reader(4, 0), 4, "d", 180, 250),
            Hold::new("rw", 5, "e", 300, 400),
            Hold::new("rw", 6, "f", 350, 450),
            // Not its holds.
            Hold::new("rw-other", 7, "g", 300, 400),
            Hold::new("rwx:read:1:0", 7, "h", 300, 400),
        ];
        let mut history = history(holds, vec![]);
        history.read_writes = vec![lock];
        let (uses, found) = sides(&history);
        assert_eq!(
            (uses[0].reads, uses[0].writes, uses[0].most_readers_at_once),
            (3, 3, 2)
        );
        let pairs: Vec<(&str, &str, bool)> = found
            .iter()
            .map(|f| {
                (
                    f.writer.token.as_str(),
                    f.other.token.as_str(),
                    f.other_reads,
                )
            })
            .collect();
        assert_eq!(pairs, [("c", "d", true), ("e", "f", false)]);
        assert_eq!(found[0].at_us, 180);
        let report = check(&history);
        assert!(!report.is_safe());
        assert_eq!(report.writers_beside.len(), 2);
    }

    #[test]
    fn readers_alone_are_safe() {
        let lock = ReadWrite::new("rw");
        let holds = vec![
            Hold::new(lock.reader(1, 0), 1, "a", 0, 100),
            Hold::new(lock.reader(2, 0), 2, "b", 0, 100),
        ];
        let mut history = history(holds, vec![]);
        history.read_writes = vec![lock];
        assert!(check(&history).is_safe());
    }
}
