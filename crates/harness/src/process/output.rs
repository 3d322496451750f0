//! A node's log and console files, and the end of them that goes into error messages: only
//! what one start attempt wrote, as the files are appended to across restarts.

use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Server log, inside the node's directory.
pub(super) const LOG_FILE: &str = "redis.log";
/// Server stdout and stderr (config errors are printed there, not logged).
pub(super) const CONSOLE_FILE: &str = "redis.console";
/// How much of the log and console output an error message carries.
const OUTPUT_TAIL_BYTES: u64 = 4096;

/// Where a node's log and console files ended before an attempt started.
pub(super) struct OutputStart {
    log: u64,
    console: u64,
}

impl OutputStart {
    pub(super) fn of(dir: &Path) -> OutputStart {
        let len = |name| std::fs::metadata(dir.join(name)).map_or(0, |meta| meta.len());
        OutputStart {
            log: len(LOG_FILE),
            console: len(CONSOLE_FILE),
        }
    }

    /// The end of what was written to the log and console since, for errors.
    pub(super) fn read_since(&self, dir: &Path) -> String {
        let mut output = String::new();
        for (name, start) in [(CONSOLE_FILE, self.console), (LOG_FILE, self.log)] {
            match read_tail(&dir.join(name), start) {
                Ok(text) if !text.trim().is_empty() => {
                    let _ = write!(output, "--- {name} ---\n{text}");
                    if !text.ends_with('\n') {
                        output.push('\n');
                    }
                }
                Ok(_) => {}
                Err(err) => {
                    let _ = writeln!(output, "--- {name}: unreadable: {err}");
                }
            }
        }
        output
    }
}

/// At most the last [`OUTPUT_TAIL_BYTES`] of `path` after offset `start`.
fn read_tail(path: &Path, start: u64) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let from = start.max(len.saturating_sub(OUTPUT_TAIL_BYTES)).min(len);
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(OUTPUT_TAIL_BYTES).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
