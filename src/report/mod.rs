//! Printers. They take finished models and never touch a device or a socket.

pub mod compare;
pub mod devices;
pub mod svg;

/// Version of the JSON documents rdmabench writes; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Serializes any report model as pretty JSON with a trailing newline.
pub fn to_json<T: serde::Serialize>(model: &T) -> String {
    let mut text = serde_json::to_string_pretty(model).expect("report models serialize");
    text.push('\n');
    text
}
