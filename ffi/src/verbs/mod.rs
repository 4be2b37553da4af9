//! Safe wrappers over Linux ibverbs, one file per verbs object.
//!
//! Ownership mirrors the C library's rules: each object holds what must outlive it (a
//! queue pair — [`BasicQueuePair`] or [`ExtendedQueuePair`] — its [`ProtectionDomain`]
//! and [`CompletionQueue`]s, every object its [`Context`]), so dropping in any order is
//! safe. docs/verbs.md explains the model,
//! including why posting is safe.

mod ah;
mod cm;
mod context;
mod cq;
mod device;
mod error;
pub mod loopback;
mod mr;
mod pd;
mod qp;
mod srq;
pub mod sys;

pub use ah::AddressHandle;
pub use cm::{CmConnection, CmListener, ConnectRequest, ResolvedRoute};
pub use context::{Context, DeviceAttr, GidEntry, OdpCaps, PortAttr};
pub use cq::{Completion, CompletionChannel, CompletionQueue, WcOpcode, WcStatus};
pub use device::{Device, DeviceList};
pub use error::Error;
pub use mr::{Access, LocalSlice, MemoryRegion};
pub use pd::ProtectionDomain;
pub use qp::{
    AddressVector, BasicQueuePair, BoundSend, ExtendedQpError, ExtendedQueuePair, GenericQueuePair,
    GlobalRoute, InitAttr, Mtu, PathClass, PreparedRecv, PreparedSend, QpCaps, QpState, QpType,
    QueuePair, QueuePairBuilder, RtrAttr, RtsAttr, SendBatch, SendFlags, SendOp, SendRequest,
    UdDest, DEFAULT_QKEY, GRH_LEN, MAX_POST_LIST, MAX_SGE,
};
pub use srq::SharedReceiveQueue;

pub use crate::types::{Gid, Guid, QpEndpoint, RangeError, RemoteBuffer, RemoteSlice};
