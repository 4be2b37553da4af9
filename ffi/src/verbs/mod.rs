//! Safe wrappers over Linux ibverbs, one file per verbs object.
//!
//! Ownership mirrors the C library's rules: each object holds what must outlive it
//! (a [`Context`] keeps the device open), so dropping in any order is safe.

mod context;
mod device;
mod error;
pub mod sys;

pub use context::{Context, DeviceAttr, GidEntry, PortAttr};
pub use device::{Device, DeviceList};
pub use error::Error;
