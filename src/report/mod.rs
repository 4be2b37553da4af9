//! Printers. They take finished models and never touch a device or a socket.

pub mod compare;
pub mod devices;
pub mod environment;
pub mod junit;
pub mod svg;

pub use crate::stamp::SCHEMA_VERSION;
pub use environment::{changes_list, environment_table};

/// perftest's separator line (87 dashes).
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";

/// Serializes any report model as pretty JSON with a trailing newline.
pub fn to_json<T: serde::Serialize>(model: &T) -> String {
    let mut text = serde_json::to_string_pretty(model).expect("report models serialize");
    text.push('\n');
    text
}

/// `--json PATH` before a run: a path that cannot be written fails now, and an older
/// file is emptied so it never reads as this run's. `-` (stdout) has nothing to check.
///
/// # Errors
/// The path cannot be written.
pub fn prepare_json(path: &std::path::Path) -> Result<(), crate::error::Error> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    crate::files::create(path)
        .map(drop)
        .map_err(|e| crate::error::Error::io(format!("--json {}: {e}", path.display())))
}

/// `--json PATH` after a run: the document into the file, or onto stdout for `-` (a
/// closed pipe there is not an error).
///
/// # Errors
/// The file cannot be written.
pub fn write_json(path: &std::path::Path, json: &str) -> Result<(), crate::error::Error> {
    use std::io::Write;
    if path.as_os_str() != "-" {
        return crate::files::write_whole(path, json.as_bytes())
            .map_err(|e| crate::error::Error::io(format!("--json {}: {e}", path.display())));
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(json.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(crate::error::Error::io(format!("--json -: {e}")))
        }
        _ => Ok(()),
    }
}
