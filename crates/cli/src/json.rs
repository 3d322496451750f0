//! Writing a command's results as JSON (`--json`), shared by `bench` and `chaos`.

use std::path::Path;

/// Writes `value` as pretty JSON to `path`, creating missing parent folders.
pub(crate) fn write_json_file(path: &Path, value: &impl serde::Serialize) -> Result<(), String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let file =
        std::fs::File::create(path).map_err(|e| format!("writing {}: {e}", path.display()))?;
    serde_json::to_writer_pretty(std::io::BufWriter::new(file), value)
        .map_err(|e| format!("writing {}: {e}", path.display()))
}
