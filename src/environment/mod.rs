//! What a result was measured on, read: the host (kernel, OS, CPU, governor), the RDMA
//! device and port of an RDMA test, or the network interface of a TCP test. Every result
//! carries one [`Environment`] per side; the record is the result model's
//! (`results/environment.rs`), its JSON form in docs/json.md ("environment").
//!
//! Each reader takes the root directory to read `/proc`, `/sys`, `/etc` and `/usr/lib`
//! under (`/` in production), so the tests run over fixture trees. Text read from the
//! system, and a peer's environment ([`Environment::cleaned`]), is [`clean`]ed (the one
//! sanitiser, [`crate::text`]), so a value never breaks the one-line
//! [`Environment::summary`] nor hides, reorders or repaints what it is shown with.

mod diff;
mod host;
mod net;
mod peer;
mod rdma;
mod summary;
#[cfg(all(test, unix))]
mod tests;

pub use crate::facts::system::rdma_core_version;
pub use crate::facts::Pcie;
pub use crate::results::{DeviceEnvironment, Environment, InterfaceEnvironment};
pub use crate::text::clean;
pub use diff::{diff, Change, ABSENT};
