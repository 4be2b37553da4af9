//! Microsoft NetworkDirect (NDSPI v2): bindings written from the public headers, and
//! safe wrappers over them, one file per ND object.
//!
//! Everything here compiles on every target: the layout of the bindings is tested in
//! Linux CI, and so are the wrappers, driven by an in-process software provider that
//! fills the same vtables (the development crate `rdmabench-nd-soft`, `ffi/nd-soft`,
//! which builds on [`sys`], [`com`], [`addr`], [`status`] and the registration hook
//! [`register`]). Only provider discovery and the events pending requests are waited
//! on are Windows-only.
//!
//! ```text
//! discover() / open_adapter(ip) ─► Adapter ─┬─► CompletionQueue
//!                                           ├─► MemoryRegion (owns its buffer)
//!                                           ├─► QueuePair (holds its CQs)
//!                                           ├─► Connector (connect / accept)
//!                                           └─► Listener
//! ```
//!
//! Every object is one [`com::ComPtr`] (AddRef/Release written once) plus an `Arc` of
//! the adapter, so the adapter and its overlapped file outlive what was made from it.
//! Errors are [`NdError`]s: the call and the HRESULT with its ND name.

pub mod adapter;
pub mod addr;
pub mod com;
pub mod connector;
pub mod cq;
pub mod listener;
pub mod mr;
pub mod overlapped;
pub mod provider;
pub mod qp;
pub mod status;
pub mod sys;
#[cfg(windows)]
mod win;

pub use adapter::{open_adapter, Adapter, OpenError};
pub use connector::Connector;
pub use cq::{CompletionQueue, NdCompletion, RequestKind};
pub use listener::Listener;
pub use mr::{MemoryRegion, MrFlags, NdSlice};
pub use provider::{discover, register, Discovery, Provider};
pub use qp::{OpFlags, QpCaps, QueuePair};
pub use status::NdError;
pub use sys::ND2_ADAPTER_INFO as AdapterInfo;
