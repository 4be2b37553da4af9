//! `IND2MemoryRegion`: a buffer registered with the adapter. Registration may
//! complete asynchronously (`ND_PENDING`); the tokens are read after it.

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::Duration;

use super::adapter::{create, Adapter, AdapterShared};
use super::com::ComPtr;
use super::overlapped::Overlapped;
use super::status::NdError;
use super::sys;
use crate::buffer::{wait_byte, PageBuffer};
use crate::types::{RangeError, RemoteBuffer};

/// Registration rights (`ND_MR_FLAG_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrFlags(pub u32);

impl MrFlags {
    /// The adapter may write it (receives, read results).
    pub const LOCAL_WRITE: MrFlags = MrFlags(sys::ND_MR_FLAG_ALLOW_LOCAL_WRITE);
    /// Peers may read it.
    pub const REMOTE_READ: MrFlags = MrFlags(sys::ND_MR_FLAG_ALLOW_REMOTE_READ);
    /// Peers may write it (implies local write).
    pub const REMOTE_WRITE: MrFlags = MrFlags(sys::ND_MR_FLAG_ALLOW_REMOTE_WRITE);
    /// Everything a benchmark buffer needs.
    pub const ALL: MrFlags = MrFlags(
        sys::ND_MR_FLAG_ALLOW_LOCAL_WRITE
            | sys::ND_MR_FLAG_ALLOW_REMOTE_READ
            | sys::ND_MR_FLAG_ALLOW_REMOTE_WRITE,
    );
}

impl std::ops::BitOr for MrFlags {
    type Output = MrFlags;
    fn bitor(self, rhs: MrFlags) -> MrFlags {
        MrFlags(self.0 | rhs.0)
    }
}

/// How long registration and deregistration may pend.
const REGISTRATION_WAIT: Duration = Duration::from_secs(30);

/// A registered buffer (`IND2MemoryRegion`) that owns its memory.
///
/// Dropping it deregisters first and frees the memory after: once deregistered, the
/// adapter no longer touches it, and requests still naming its token complete in error.
pub struct MemoryRegion {
    ptr: ComPtr<sys::IND2MemoryRegion>,
    ov: Overlapped,
    buf: ManuallyDrop<PageBuffer>,
    len: usize,
    flags: MrFlags,
    local_token: u32,
    remote_token: u32,
    _adapter: Arc<AdapterShared>,
}

// SAFETY: plain memory and a free-threaded ND object; mutation needs `&mut self`.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for MemoryRegion {}

impl Adapter {
    /// Allocates `len` zeroed, page-aligned bytes and registers them with `flags`.
    ///
    /// # Errors
    /// `len == 0`, `CreateMemoryRegion` or `Register` failing (over
    /// `MaxRegistrationSize`, out of resources).
    pub fn register(&self, len: usize, flags: MrFlags) -> Result<MemoryRegion, NdError> {
        if len == 0 {
            return Err(NdError::new(
                "IND2MemoryRegion::Register",
                super::status::ND_INVALID_BUFFER_SIZE,
            ));
        }
        let a = &self.shared;
        let ptr: ComPtr<sys::IND2MemoryRegion> =
            create("IND2Adapter::CreateMemoryRegion", |out| {
                // SAFETY: live adapter and overlapped file; out-pointer valid.
                unsafe {
                    (a.ptr.vtbl().CreateMemoryRegion)(
                        a.ptr.as_raw(),
                        &sys::IID_IND2MemoryRegion,
                        a.file,
                        out,
                    )
                }
            })?;
        let buf = PageBuffer::new(len)
            .ok_or(NdError::new("IND2MemoryRegion::Register", super::status::ND_NO_MEMORY))?;
        let mut ov = Overlapped::new()?;
        let p = ov.start();
        // SAFETY: live MR object; `buf` stays allocated until after Deregister (Drop);
        // the OVERLAPPED is boxed and outlives the request.
        let hr = unsafe {
            (ptr.vtbl().Register)(ptr.as_raw(), buf.ptr.as_ptr().cast(), len, flags.0, p)
        };
        ov.finish(&ptr, "IND2MemoryRegion::Register", hr, Some(REGISTRATION_WAIT))?;
        // SAFETY: registered region.
        let local_token = unsafe { (ptr.vtbl().GetLocalToken)(ptr.as_raw()) };
        // SAFETY: as above.
        let remote_token = unsafe { (ptr.vtbl().GetRemoteToken)(ptr.as_raw()) };
        Ok(MemoryRegion {
            ptr,
            ov,
            buf: ManuallyDrop::new(buf),
            len,
            flags,
            local_token,
            remote_token,
            _adapter: self.shared.clone(),
        })
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        let p = self.ov.start();
        // SAFETY: registered region, deregistered once, before the memory is freed.
        let hr = unsafe { (self.ptr.vtbl().Deregister)(self.ptr.as_raw(), p) };
        let done =
            self.ov.finish(&self.ptr, "IND2MemoryRegion::Deregister", hr, Some(REGISTRATION_WAIT));
        if done.is_ok() {
            // SAFETY: deregistered: the adapter no longer uses the memory; dropped once.
            unsafe { ManuallyDrop::drop(&mut self.buf) };
        }
        // Otherwise the adapter may still use the memory: it is leaked, not freed.
    }
}

impl MemoryRegion {
    /// The token for local SGEs.
    pub fn local_token(&self) -> u32 {
        self.local_token
    }

    /// The token peers use (opaque; the provider chose its byte order).
    pub fn remote_token(&self) -> u32 {
        self.remote_token
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty (registration refuses 0 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rights it was registered with.
    pub fn flags(&self) -> MrFlags {
        self.flags
    }

    /// Address of the first byte.
    pub fn addr(&self) -> u64 {
        self.buf.ptr.as_ptr() as u64
    }

    /// The bytes (peers and the adapter may change them while work is posted).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` bytes allocated for the region's life.
        unsafe { std::slice::from_raw_parts(self.buf.ptr.as_ptr(), self.len) }
    }

    /// The bytes, for filling before posting.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`; `&mut self` makes our borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.buf.ptr.as_ptr(), self.len) }
    }

    /// Reads the byte at `offset` as the adapter left it, without caching, until it is
    /// `expect`, at most `reads` times: the reads left when one saw it, counting that one,
    /// or 0 when none did (as the verbs region's `wait_u8`). Panics past the end.
    #[inline(always)]
    pub fn wait_u8(&self, offset: usize, expect: u8, reads: u32) -> u32 {
        assert!(offset < self.len, "offset {offset} past the {}-byte region", self.len);
        // SAFETY: in bounds (checked above) of memory valid for the region's life, which
        // `&self` outlives the call with.
        unsafe { wait_byte(self.buf.ptr.as_ptr().add(offset), expect, reads) }
    }

    /// What a peer needs to target the whole region.
    pub fn remote(&self) -> RemoteBuffer {
        RemoteBuffer { addr: self.addr(), len: self.len as u64, rkey: self.remote_token }
    }

    /// The range `offset .. offset + len` as one SGE.
    ///
    /// # Errors
    /// The range is not inside the region, or is 4 GiB or longer.
    pub fn slice(&self, offset: usize, len: usize) -> Result<NdSlice<'_>, RangeError> {
        let len = RangeError::check("local range", offset as u64, len as u64, self.len as u64)?;
        Ok(NdSlice { mr: self, offset, len })
    }
}

/// A checked range of a [`MemoryRegion`].
#[derive(Clone, Copy)]
pub struct NdSlice<'mr> {
    mr: &'mr MemoryRegion,
    offset: usize,
    len: u32,
}

impl NdSlice<'_> {
    /// Length.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn sge(&self) -> sys::ND2_SGE {
        sys::ND2_SGE {
            // The provider reads (sends, writes) or writes (receives, reads) here;
            // the region's flags say which it may.
            Buffer: (self.mr.addr() + self.offset as u64) as *mut std::ffi::c_void,
            BufferLength: self.len,
            MemoryRegionToken: self.mr.local_token,
        }
    }
}
