//! libfaketime for per-node clocks: finding it on this machine (process backend), and the
//! file through which a node's clock jumps at run time ([`ClockFile`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::env::LIBFAKETIME_ENV;
use crate::error::HarnessError;

/// Where distributions install libfaketime.
const LIBFAKETIME_CANDIDATES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
];

/// libfaketime on this machine: `QUORUMLOCK_LIBFAKETIME`, or the first usual location that
/// exists.
pub(crate) fn find_libfaketime() -> Result<PathBuf, HarnessError> {
    if let Some(path) = std::env::var_os(LIBFAKETIME_ENV).filter(|path| !path.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(HarnessError::LibfaketimeNotFound {
                searched: vec![path],
            })
        };
    }
    LIBFAKETIME_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
        .ok_or_else(|| HarnessError::LibfaketimeNotFound {
            searched: LIBFAKETIME_CANDIDATES.iter().map(PathBuf::from).collect(),
        })
}

/// The name of the file libfaketime reads a node's offset (and rate) from, in its
/// [`ClockFile`]'s directory.
pub(crate) const CLOCK_FILE_NAME: &str = "faketime.rc";

/// A node's jumpable clock: a directory of its own holding [`CLOCK_FILE_NAME`], which
/// libfaketime reads on every clock call (`FAKETIME_TIMESTAMP_FILE`, `FAKETIME_NO_CACHE=1`),
/// so a new offset takes effect at once. The directory (not the file) is what a container
/// bind-mounts, so that replacing the file by a rename, which a reader never sees half-written,
/// shows inside too. Deleted with the cluster.
#[derive(Debug)]
pub(crate) struct ClockFile {
    dir: tempfile::TempDir,
    /// The node's clock rate, kept in the file with every offset.
    rate: Option<f64>,
}

impl ClockFile {
    /// A new clock file for node `index`, at offset zero.
    pub(crate) fn new(index: usize, rate: Option<f64>) -> std::io::Result<ClockFile> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("quorumlock-clock{index}-"))
            .tempdir()?;
        let clock = ClockFile { dir, rate };
        clock.set_offset_ms(0)?;
        Ok(clock)
    }

    /// The directory holding the file.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Sets the clock `offset_ms` milliseconds ahead of real time (behind if negative):
    /// `+1.500` in libfaketime's notation, with the rate after it if the node has one.
    pub(crate) fn set_offset_ms(&self, offset_ms: i64) -> std::io::Result<()> {
        let sign = if offset_ms < 0 { '-' } else { '+' };
        let magnitude = offset_ms.unsigned_abs();
        let mut spec = format!("{sign}{}.{:03}", magnitude / 1000, magnitude % 1000);
        if let Some(rate) = self.rate {
            spec.push_str(&format!(" x{rate}"));
        }
        let mut staged = tempfile::NamedTempFile::new_in(self.dir())?;
        writeln!(staged, "{spec}")?;
        staged
            .persist(self.dir().join(CLOCK_FILE_NAME))
            .map_err(|err| err.error)?;
        Ok(())
    }
}
