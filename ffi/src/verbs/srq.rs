//! `ibv_create_srq(3)`: a shared receive queue, one pool of receives that every queue
//! pair built over it takes its incoming sends from (perftest's `--use-srq`).

use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use super::mr::RecvSges;
use super::{sys, Error, LocalSlice, ProtectionDomain, MAX_SGE};

/// A shared receive queue. Cheap to clone (shared); it is destroyed when the last
/// clone and every queue pair built over it are gone, and it keeps its
/// [`ProtectionDomain`] until then.
///
/// A receive posted here is consumed by whichever of its queue pairs a send (or a
/// write with immediate) arrives on first; the completion comes on that queue pair's
/// receive CQ, with its `qp_num`.
#[derive(Clone)]
pub struct SharedReceiveQueue {
    inner: Arc<SrqInner>,
}

struct SrqInner {
    raw: NonNull<sys::ibv_srq>,
    max_wr: u32,
    max_sge: u32,
    pd: ProtectionDomain,
}

// SAFETY: ibv_post_srq_recv and ibv_destroy_srq are thread-safe in libibverbs.
unsafe impl Send for SrqInner {}
// SAFETY: as above; `&self` methods only post.
unsafe impl Sync for SrqInner {}

impl Drop for SrqInner {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_srq, destroyed once, after every QP over it
        // (each holds a clone of this Arc).
        let rc = unsafe { sys::ibv_destroy_srq(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_srq failed");
    }
}

impl ProtectionDomain {
    /// Creates a shared receive queue of `max_wr` receives of up to `max_sge` SGEs
    /// (`ibv_create_srq(3)`).
    ///
    /// # Errors
    /// `ibv_create_srq` with its errno: EINVAL for sizes over the device's `max_srq_wr`
    /// or `max_srq_sge`, ENOSYS where the provider has no SRQs.
    pub fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<SharedReceiveQueue, Error> {
        // SAFETY: ibv_srq_init_attr is plain data; all-zero is valid.
        let mut init: sys::ibv_srq_init_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        init.attr.max_wr = max_wr;
        init.attr.max_sge = max_sge;
        // SAFETY: live PD; `init` is valid; the library writes the granted sizes back.
        let raw = unsafe { sys::ibv_create_srq(self.as_ptr(), &mut init) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::last_os("ibv_create_srq").on(format!("{max_wr} receives of {max_sge} SGEs"))
        })?;
        let inner = SrqInner {
            raw,
            max_wr: init.attr.max_wr,
            max_sge: init.attr.max_sge.min(MAX_SGE as u32),
            pd: self.clone(),
        };
        Ok(SharedReceiveQueue { inner: Arc::new(inner) })
    }
}

impl SharedReceiveQueue {
    /// How many receives it holds (at least what was asked for).
    pub fn max_wr(&self) -> u32 {
        self.inner.max_wr
    }

    /// The protection domain its receives' memory must be in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.inner.pd
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_srq {
        self.inner.raw.as_ptr()
    }

    pub(crate) fn raw(&self) -> NonNull<sys::ibv_srq> {
        self.inner.raw
    }

    /// The SGEs a receive here may have, and how this queue is named in errors.
    pub(crate) fn recv_queue(&self) -> (&'static str, u32) {
        ("the SRQ", self.inner.max_sge)
    }

    /// Posts one receive into `local` (`ibv_post_srq_recv(3)`). Nothing is allocated.
    ///
    /// # Errors
    /// Refused before posting with more SGEs than the queue takes or an SGE of another
    /// protection domain; ENOMEM from the library when the queue is full.
    #[inline]
    pub fn post_recv(&self, wr_id: u64, local: &[LocalSlice<'_>]) -> Result<(), Error> {
        let mut sges =
            RecvSges::new("ibv_post_srq_recv", local, self.recv_queue(), &self.inner.pd)?;
        let mut wr = sges.wr(wr_id);
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: live SRQ; `wr` and its initialised SGEs live across the call; the
        // regions are live and registered in the SRQ's PD (checked above; LocalSlice
        // borrows them). If a region is dropped before the receive completes,
        // deregistration stops the HCA first.
        let rc = unsafe { sys::ibv_post_srq_recv(self.as_ptr(), &mut wr, &mut bad) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_post_srq_recv", rc));
        }
        Ok(())
    }
}
