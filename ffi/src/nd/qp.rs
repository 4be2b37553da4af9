//! `IND2QueuePair`: send, receive, RDMA write and read. A queue pair keeps its
//! completion queues alive by holding references to them.
//!
//! Posting borrows checked ranges of registered regions ([`NdSlice`]) for the call
//! only, as verbs does: if a region is deregistered while work still names it, the
//! adapter refuses its token and the work completes in error; it never reaches freed
//! memory.

use std::ffi::c_void;
use std::sync::Arc;

use super::adapter::{create, Adapter, AdapterShared};
use super::com::ComPtr;
use super::cq::CompletionQueue;
use super::mr::NdSlice;
use super::status::{check, NdError, ND_INVALID_PARAMETER_MIX};
use super::sys::{self, ND2_SGE};
use crate::types::RemoteSlice;

/// The shared signature of `IND2QueuePair::Read` and `::Write`.
type OneSided = unsafe extern "system" fn(
    *mut sys::IND2QueuePair,
    *mut c_void,
    *const ND2_SGE,
    u32,
    u64,
    u32,
    u32,
) -> sys::HRESULT;

/// Most SGEs one request may carry here (requests are built on the stack).
pub const MAX_SGE: usize = 4;

/// `ND_OP_FLAG_*` for one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpFlags(pub u32);

impl OpFlags {
    /// No completion on success (verbs' unsignaled); failures still complete.
    pub const SILENT_SUCCESS: OpFlags = OpFlags(sys::ND_OP_FLAG_SILENT_SUCCESS);
    /// Wait for earlier reads before this request.
    pub const READ_FENCE: OpFlags = OpFlags(sys::ND_OP_FLAG_READ_FENCE);
    /// Wake a peer waiting for solicited events.
    pub const SOLICIT: OpFlags = OpFlags(sys::ND_OP_FLAG_SEND_AND_SOLICIT_EVENT);
    /// Copy the payload into the request.
    pub const INLINE: OpFlags = OpFlags(sys::ND_OP_FLAG_INLINE);

    /// Flags for a request that completes (`signaled`) or not, inline or not.
    pub fn new(signaled: bool, inline: bool) -> Self {
        let mut f = 0;
        if !signaled {
            f |= sys::ND_OP_FLAG_SILENT_SUCCESS;
        }
        if inline {
            f |= sys::ND_OP_FLAG_INLINE;
        }
        OpFlags(f)
    }
}

/// Queue sizes of a new queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Receive queue depth.
    pub receive_depth: u32,
    /// Initiator (send) queue depth.
    pub initiator_depth: u32,
    /// SGEs per receive.
    pub receive_sge: u32,
    /// SGEs per send, write or read.
    pub initiator_sge: u32,
    /// Inline payload size.
    pub inline_data: u32,
}

/// A queue pair.
pub struct QueuePair {
    pub(crate) ptr: ComPtr<sys::IND2QueuePair>,
    caps: QpCaps,
    _receive_cq: ComPtr<sys::IND2CompletionQueue>,
    _initiator_cq: ComPtr<sys::IND2CompletionQueue>,
    _adapter: Arc<AdapterShared>,
}

impl Adapter {
    /// Creates a queue pair over the two completion queues (they may be the same);
    /// `context` comes back in every result's `QueuePairContext`.
    ///
    /// # Errors
    /// `CreateQueuePair` failing (depths or SGEs over the adapter's limits).
    pub fn create_qp(
        &self,
        receive_cq: &CompletionQueue,
        initiator_cq: &CompletionQueue,
        caps: QpCaps,
        context: u64,
    ) -> Result<QueuePair, NdError> {
        if caps.initiator_sge as usize > MAX_SGE || caps.receive_sge as usize > MAX_SGE {
            return Err(NdError::new("IND2Adapter::CreateQueuePair", ND_INVALID_PARAMETER_MIX));
        }
        let a = &self.shared;
        let ptr = create("IND2Adapter::CreateQueuePair", |out| {
            // SAFETY: live adapter and CQs; out-pointer valid.
            unsafe {
                (a.ptr.vtbl().CreateQueuePair)(
                    a.ptr.as_raw(),
                    &sys::IID_IND2QueuePair,
                    receive_cq.ptr.as_unknown(),
                    initiator_cq.ptr.as_unknown(),
                    context as usize as *mut c_void,
                    caps.receive_depth,
                    caps.initiator_depth,
                    caps.receive_sge,
                    caps.initiator_sge,
                    caps.inline_data,
                    out,
                )
            }
        })?;
        Ok(QueuePair {
            ptr,
            caps,
            _receive_cq: receive_cq.ptr.clone(),
            _initiator_cq: initiator_cq.ptr.clone(),
            _adapter: self.shared.clone(),
        })
    }
}

fn sges(call: &'static str, local: &[NdSlice<'_>]) -> Result<([ND2_SGE; MAX_SGE], u32), NdError> {
    if local.len() > MAX_SGE {
        return Err(NdError::new(call, ND_INVALID_PARAMETER_MIX));
    }
    let mut out =
        [ND2_SGE { Buffer: std::ptr::null_mut(), BufferLength: 0, MemoryRegionToken: 0 }; MAX_SGE];
    for (o, s) in out.iter_mut().zip(local) {
        *o = s.sge();
    }
    Ok((out, local.len() as u32))
}

impl QueuePair {
    /// What it was created with.
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// The raw object (what a connector connects).
    pub fn as_com(&self) -> &ComPtr<sys::IND2QueuePair> {
        &self.ptr
    }

    /// Sends `local` to the peer, consuming one of its receives.
    ///
    /// # Errors
    /// The provider refusing the request (queue full: `ND_INSUFFICIENT_RESOURCES`).
    #[inline]
    pub fn send(&self, context: u64, local: &[NdSlice<'_>], flags: OpFlags) -> Result<(), NdError> {
        let (sge, n) = sges("IND2QueuePair::Send", local)?;
        // SAFETY: live QP; `sge` lists `n` entries of registered memory, read during
        // the call (the provider copies the SGE list).
        let hr = unsafe {
            (self.ptr.vtbl().Send)(
                self.ptr.as_raw(),
                context as usize as *mut c_void,
                sge.as_ptr(),
                n,
                flags.0,
            )
        };
        check("IND2QueuePair::Send", hr).map(drop)
    }

    /// Posts a receive into `local`.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    #[inline]
    pub fn receive(&self, context: u64, local: &[NdSlice<'_>]) -> Result<(), NdError> {
        let (sge, n) = sges("IND2QueuePair::Receive", local)?;
        // SAFETY: as `send`; the region's flags allow local writes or the provider
        // refuses the token.
        let hr = unsafe {
            (self.ptr.vtbl().Receive)(
                self.ptr.as_raw(),
                context as usize as *mut c_void,
                sge.as_ptr(),
                n,
            )
        };
        check("IND2QueuePair::Receive", hr).map(drop)
    }

    /// RDMA-writes `local` to `remote`.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    #[inline]
    pub fn write(
        &self,
        context: u64,
        local: &[NdSlice<'_>],
        remote: RemoteSlice,
        flags: OpFlags,
    ) -> Result<(), NdError> {
        self.one_sided("IND2QueuePair::Write", self.ptr.vtbl().Write, context, local, remote, flags)
    }

    /// RDMA-reads `remote` into `local`.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    #[inline]
    pub fn read(
        &self,
        context: u64,
        local: &[NdSlice<'_>],
        remote: RemoteSlice,
        flags: OpFlags,
    ) -> Result<(), NdError> {
        self.one_sided("IND2QueuePair::Read", self.ptr.vtbl().Read, context, local, remote, flags)
    }

    /// `Read` and `Write` share their signature: the slot is the only difference.
    #[inline]
    fn one_sided(
        &self,
        call: &'static str,
        slot: OneSided,
        context: u64,
        local: &[NdSlice<'_>],
        remote: RemoteSlice,
        flags: OpFlags,
    ) -> Result<(), NdError> {
        let (sge, n) = sges(call, local)?;
        // SAFETY: live QP and one of its own vtable slots; `sge` lists `n` entries of
        // registered memory, read during the call; the remote range is the peer's to
        // check against its token.
        let hr = unsafe {
            slot(
                self.ptr.as_raw(),
                context as usize as *mut c_void,
                sge.as_ptr(),
                n,
                remote.addr(),
                remote.rkey(),
                flags.0,
            )
        };
        check(call, hr).map(drop)
    }

    /// Completes every outstanding request with `ND_CANCELED`.
    ///
    /// # Errors
    /// `Flush` failing.
    pub fn flush(&self) -> Result<(), NdError> {
        // SAFETY: live QP.
        check("IND2QueuePair::Flush", unsafe { (self.ptr.vtbl().Flush)(self.ptr.as_raw()) })
            .map(drop)
    }
}
