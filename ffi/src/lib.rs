//! Every `unsafe` line of rdmabench: safe wrappers over Linux ibverbs (through the
//! [`rdma-sys`](https://docs.rs/rdma-sys) bindings) and Windows NetworkDirect
//! (bindings of our own in [`nd`], compiled and tested on every target).
//!
//! This crate is what you take for your own criterion microbenchmarks of verbs
//! operations; the `rdmabench` binary is built on nothing else.
//!
//! # Quick start
//!
//! ```no_run
//! # #[cfg(target_os = "linux")]
//! # fn main() -> Result<(), rdmabench_ffi::verbs::Error> {
//! use rdmabench_ffi::verbs::DeviceList;
//!
//! let devices = DeviceList::new()?;
//! for device in devices.iter() {
//!     let context = device.open()?;
//!     let attr = context.query_device()?;
//!     println!("{} fw {} ports {}", device.name(), attr.fw_ver, attr.phys_port_cnt);
//! }
//! # Ok(())
//! # }
//! # #[cfg(not(target_os = "linux"))]
//! # fn main() {}
//! ```
//!
//! # Platform support
//!
//! [`verbs`] exists on Linux only (it links `libibverbs` and `librdmacm`). [`nd`]
//! builds on every target: its bindings are our own, and only provider discovery (the
//! Winsock catalog) and the events pending requests are waited on are Windows calls.
//! The workspace's development crate `rdmabench-nd-soft` (`ffi/nd-soft`, never
//! published) is an in-process provider that fills the same vtables and registers
//! itself through [`nd::register`], so ND code runs and is tested on Linux. The value
//! types in [`types`] build everywhere.
//!
//! # Resource cleanup
//!
//! Every verbs object is released when its Rust owner is dropped. An object that
//! needs another one alive (a port query needs its device context) holds it by
//! ownership, so the release order of the C library is kept by construction.
#![deny(missing_docs, unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

mod buffer;
pub mod nd;
pub mod os;
pub mod tsc;
pub mod types;
#[cfg(target_os = "linux")]
pub mod verbs;
