//! Finding libfaketime on this machine, for per-node clock rates on the process backend.

use std::path::PathBuf;

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
