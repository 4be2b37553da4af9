//! `ibv_reg_mr(3)`: registered memory, and the local and remote ranges of it that work
//! requests name.

use std::ops::BitOr;
use std::ptr::NonNull;

use super::{sys, Error, ProtectionDomain};
use crate::buffer::{wait_byte, PageBuffer};
use crate::types::{RangeError, RemoteBuffer};

/// Access rights of a memory region (`enum ibv_access_flags`). Combine with `|`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access(u32);

impl Access {
    /// Only the local HCA reads it (send source, RDMA write source).
    pub const NONE: Access = Access(0);
    /// The HCA may write it locally (receive target, RDMA read target). Required by
    /// the remote rights.
    pub const LOCAL_WRITE: Access = Access(sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0);
    /// Peers may RDMA-write it.
    pub const REMOTE_WRITE: Access = Access(sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0);
    /// Peers may RDMA-read it.
    pub const REMOTE_READ: Access = Access(sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0);
    /// Peers may run atomics on it.
    pub const REMOTE_ATOMIC: Access = Access(sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0);
    /// Pages are faulted in by the device as it touches them, not pinned at
    /// registration (on-demand paging; only where [`Context::odp_caps`] says so).
    ///
    /// [`Context::odp_caps`]: super::Context::odp_caps
    pub const ON_DEMAND: Access = Access(sys::ibv_access_flags::IBV_ACCESS_ON_DEMAND.0);
    /// Everything a benchmark buffer needs.
    pub const ALL: Access = Access(
        Self::LOCAL_WRITE.0 | Self::REMOTE_WRITE.0 | Self::REMOTE_READ.0 | Self::REMOTE_ATOMIC.0,
    );

    /// The raw flag bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Whether every right in `other` is in `self`.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// Registered memory (`ibv_reg_mr(3)`).
///
/// [`ProtectionDomain::reg_mr`] gives a region that owns a page-aligned, zeroed buffer.
/// Dropping the region deregisters it *before* the buffer is freed: after
/// `ibv_dereg_mr` returns the HCA no longer touches the memory, and work requests still
/// naming it complete in error rather than reaching freed memory.
///
/// The bytes may change under you while the region is exposed to peers (remote writes,
/// atomics) or is the target of a posted receive or RDMA read: read them after the
/// completion that ends those operations.
pub struct MemoryRegion {
    raw: NonNull<sys::ibv_mr>,
    addr: NonNull<u8>,
    len: usize,
    access: Access,
    // Field order matters only for clarity: Drop deregisters first, then the buffer
    // and the PD are released.
    _buffer: Option<PageBuffer>,
    pd: ProtectionDomain,
}

// SAFETY: the region is plain memory plus a verbs handle; verbs are thread-safe and
// shared access only reads.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above; mutation needs `&mut self`.
unsafe impl Sync for MemoryRegion {}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr, deregistered once, before the buffer goes.
        let rc = unsafe { sys::ibv_dereg_mr(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_dereg_mr failed");
    }
}

impl ProtectionDomain {
    /// Allocates `len` zeroed, page-aligned bytes and registers them with `access`.
    ///
    /// # Errors
    /// Refused for `len == 0`; `ibv_reg_mr` with its errno (ENOMEM / EFAULT when the
    /// locked-memory limit is too low: `ulimit -l`).
    pub fn reg_mr(&self, len: usize, access: Access) -> Result<MemoryRegion, Error> {
        if len == 0 {
            return Err(Error::invalid("ibv_reg_mr", "a memory region needs at least one byte"));
        }
        let buffer =
            PageBuffer::new(len).ok_or_else(|| Error::from_errno("ibv_reg_mr", libc::ENOMEM))?;
        let addr = buffer.ptr;
        // SAFETY: `addr..addr+len` is our allocation; it stays alive (owned by the
        // region) until after ibv_dereg_mr in Drop.
        unsafe { self.register(addr, len, access, Some(buffer)) }
    }

    /// As [`reg_mr`](Self::reg_mr), the bytes in huge pages of `huge_page` bytes
    /// (the region's length is `len`; the mapping is whole pages).
    ///
    /// # Errors
    /// `mmap(MAP_HUGETLB)` with its errno (ENOMEM: too few huge pages free, see
    /// `vm.nr_hugepages`); then as [`reg_mr`](Self::reg_mr).
    pub fn reg_mr_huge(
        &self,
        len: usize,
        access: Access,
        huge_page: usize,
    ) -> Result<MemoryRegion, Error> {
        if len == 0 {
            return Err(Error::invalid("ibv_reg_mr", "a memory region needs at least one byte"));
        }
        let buffer = PageBuffer::huge(len, huge_page)
            .map_err(|errno| Error::from_errno("mmap(MAP_HUGETLB)", errno))?;
        let addr = buffer.ptr;
        // SAFETY: `addr..addr+len` lies in our mapping; it stays mapped (owned by the
        // region) until after ibv_dereg_mr in Drop.
        unsafe { self.register(addr, len, access, Some(buffer)) }
    }

    /// Registers memory the caller owns.
    ///
    /// # Safety
    /// `addr .. addr + len` must be one live allocation that stays valid, and is not
    /// freed or unmapped, until the returned region is dropped. While the region has
    /// remote rights or is the target of posted work, the HCA may write it at any time:
    /// the caller must not hold Rust references to those bytes across such writes.
    ///
    /// # Errors
    /// As [`reg_mr`](Self::reg_mr).
    pub unsafe fn reg_mr_raw(
        &self,
        addr: NonNull<u8>,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, Error> {
        if len == 0 {
            return Err(Error::invalid("ibv_reg_mr", "a memory region needs at least one byte"));
        }
        // SAFETY: forwarded contract.
        unsafe { self.register(addr, len, access, None) }
    }

    /// # Safety
    /// `addr .. addr + len` is valid until the region (which may own it) is dropped.
    unsafe fn register(
        &self,
        addr: NonNull<u8>,
        len: usize,
        access: Access,
        buffer: Option<PageBuffer>,
    ) -> Result<MemoryRegion, Error> {
        let flags = i32::try_from(access.0).unwrap_or(i32::MAX);
        // SAFETY: live PD; the caller guarantees the memory range.
        let raw = unsafe { sys::ibv_reg_mr(self.as_ptr(), addr.as_ptr().cast(), len, flags) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::last_os("ibv_reg_mr").on(format!("{len} bytes")))?;
        Ok(MemoryRegion { raw, addr, len, access, _buffer: buffer, pd: self.clone() })
    }
}

impl MemoryRegion {
    /// The verbs handle: an identity for checks within this crate.
    pub(crate) fn raw(&self) -> NonNull<sys::ibv_mr> {
        self.raw
    }

    /// Local key, for SGEs.
    pub fn lkey(&self) -> u32 {
        // SAFETY: live registration; plain field read.
        unsafe { self.raw.as_ref() }.lkey
    }

    /// Remote key, for peers.
    pub fn rkey(&self) -> u32 {
        // SAFETY: live registration; plain field read.
        unsafe { self.raw.as_ref() }.rkey
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: registration needs one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rights it was registered with.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Virtual address of the first byte.
    pub fn addr(&self) -> u64 {
        self.addr.as_ptr() as u64
    }

    /// The protection domain it is registered in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    /// The bytes (see the type docs on when the HCA may change them).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `addr..addr+len` is valid for the region's life.
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr(), self.len) }
    }

    /// The bytes, for filling before posting.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`, and `&mut self` makes the borrow unique on our side.
        unsafe { std::slice::from_raw_parts_mut(self.addr.as_ptr(), self.len) }
    }

    /// Reads the byte at `offset` as the HCA left it, without caching, until it is
    /// `expect`, at most `reads` times: what a ping-pong spins on while the peer
    /// RDMA-writes the region. The reads left when one saw it, counting that one (`reads`
    /// when the first did), or 0 when none did. One bounds check for all the reads (a
    /// spin's pass is a read, a compare and a count); panics past the end.
    #[inline(always)]
    pub fn wait_u8(&self, offset: usize, expect: u8, reads: u32) -> u32 {
        assert!(offset < self.len, "offset {offset} past the {}-byte region", self.len);
        // SAFETY: in bounds (checked above) of memory valid for the region's life, which
        // `&self` outlives the call with.
        unsafe { wait_byte(self.addr.as_ptr().add(offset), expect, reads) }
    }

    /// Writes one byte: what a ping-pong changes in its message before each post.
    /// Panics past the end.
    #[inline]
    pub fn store_u8(&mut self, offset: usize, value: u8) {
        self.as_mut_slice()[offset] = value;
    }

    /// What to send a peer so it can target the whole region.
    pub fn remote(&self) -> RemoteBuffer {
        RemoteBuffer { addr: self.addr(), len: self.len as u64, rkey: self.rkey() }
    }

    /// The range `offset .. offset + len`, as a local SGE.
    ///
    /// # Errors
    /// Refused when the range is not inside the region or is 4 GiB or longer.
    #[inline]
    pub fn slice(&self, offset: usize, len: usize) -> Result<LocalSlice<'_>, Error> {
        match RangeError::check("local range", offset as u64, len as u64, self.len as u64) {
            Ok(len) => Ok(LocalSlice { mr: self, offset, len }),
            Err(e) => Err(range_error(e)),
        }
    }
}

/// A refused range as this layer's error, out of the receive path's way.
#[cold]
fn range_error(e: RangeError) -> Error {
    e.into()
}

/// A checked range of a local [`MemoryRegion`]: one scatter/gather entry.
#[derive(Clone, Copy)]
pub struct LocalSlice<'mr> {
    mr: &'mr MemoryRegion,
    offset: usize,
    len: u32,
}

impl LocalSlice<'_> {
    /// Length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The region it belongs to.
    pub fn region(&self) -> &MemoryRegion {
        self.mr
    }

    pub(crate) fn sge(&self) -> sys::ibv_sge {
        sys::ibv_sge {
            addr: self.mr.addr() + self.offset as u64,
            length: self.len,
            lkey: self.mr.lkey(),
        }
    }

    /// The bytes of the range.
    pub fn bytes(&self) -> &[u8] {
        &self.mr.as_slice()[self.offset..self.offset + self.len as usize]
    }
}

/// A receive's scatter list, checked: what a queue pair's and a shared receive queue's
/// `post_recv` both hand to the library.
pub(crate) struct RecvSges {
    sges: [std::mem::MaybeUninit<sys::ibv_sge>; super::MAX_SGE],
    len: usize,
}

impl RecvSges {
    /// The SGEs of `local`; `verb` refuses more than the `max_sge` its queue (`queue`:
    /// "the QP", "the SRQ") takes, or one outside `pd`. Inlined, so the array is built
    /// where it is used rather than copied out (a receive is posted per message).
    #[inline(always)]
    pub(crate) fn new(
        verb: &'static str,
        local: &[LocalSlice<'_>],
        (queue, max_sge): (&str, u32),
        pd: &ProtectionDomain,
    ) -> Result<Self, Error> {
        if local.len() > max_sge as usize {
            return Err(Error::invalid(
                verb,
                format!("{} SGEs, {queue} takes {max_sge}", local.len()),
            ));
        }
        let mut sges = [std::mem::MaybeUninit::<sys::ibv_sge>::uninit(); super::MAX_SGE];
        for (i, (slice, slot)) in local.iter().zip(sges.iter_mut()).enumerate() {
            if !std::ptr::eq(slice.region().pd().as_ptr(), pd.as_ptr()) {
                return Err(Error::invalid(
                    verb,
                    format!("SGE {i} is in a memory region of another protection domain"),
                ));
            }
            slot.write(slice.sge());
        }
        Ok(RecvSges { sges, len: local.len() })
    }

    /// The work request over these SGEs; valid while `self` is.
    #[inline(always)]
    pub(crate) fn wr(&mut self, wr_id: u64) -> sys::ibv_recv_wr {
        sys::ibv_recv_wr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: self.sges.as_mut_ptr().cast(),
            num_sge: self.len as i32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_flags_combine() {
        let a = Access::LOCAL_WRITE | Access::REMOTE_READ;
        assert!(a.contains(Access::REMOTE_READ));
        assert!(!a.contains(Access::REMOTE_WRITE));
        assert!(Access::ALL.contains(a | Access::REMOTE_ATOMIC | Access::REMOTE_WRITE));
        assert_eq!(Access::LOCAL_WRITE.bits(), 1);
    }
}
