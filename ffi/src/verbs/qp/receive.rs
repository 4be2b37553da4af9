//! A receive checked once and posted again and again: what a send latency loop reposts
//! for every message it takes (perftest keeps one `ibv_recv_wr` and its SGE).

use std::ffi::c_int;
use std::ptr::{self, NonNull};

use super::super::{sys, Error, LocalSlice, MemoryRegion};
use super::common::QpCore;
use crate::verbs::mr::RecvSges;

type PostToQp = unsafe extern "C" fn(
    *mut sys::ibv_qp,
    *mut sys::ibv_recv_wr,
    *mut *mut sys::ibv_recv_wr,
) -> c_int;
type PostToSrq = unsafe extern "C" fn(
    *mut sys::ibv_srq,
    *mut sys::ibv_recv_wr,
    *mut *mut sys::ibv_recv_wr,
) -> c_int;

/// The queue a QP's receives go to, with the provider's post call looked up once
/// (`ibv_post_recv` and `ibv_post_srq_recv` look it up through the context, and check
/// it, on every call).
#[derive(Clone, Copy)]
enum RecvQueue {
    Own(PostToQp),
    Shared(NonNull<sys::ibv_srq>, PostToSrq),
}

/// One receive of one SGE, checked (queue, protection domain) and encoded once by
/// [`QueuePair::prepare_recv`](super::QueuePair::prepare_recv) for one QP: its own
/// receive queue, or the shared one it takes receives from. Posted by that QP's
/// [`post_prepared_recv`](super::QueuePair::post_prepared_recv) with a new `wr_id`.
pub struct PreparedRecv {
    qp: NonNull<sys::ibv_qp>,
    region: NonNull<sys::ibv_mr>,
    sge: sys::ibv_sge,
    queue: RecvQueue,
}

// SAFETY: plain data; the pointers are identities (QP, region) checked on each post,
// the SRQ one kept alive by the QP it was prepared on, and the provider's functions.
unsafe impl Send for PreparedRecv {}

impl PreparedRecv {
    /// A receive into `local` on `qp`.
    pub(super) fn new(qp: &QpCore, local: &LocalSlice<'_>) -> Result<Self, Error> {
        // The checks of any receive posted there (its queue's SGE limit and protection
        // domain), made once.
        let (verb, queue, pd) = match &qp.srq {
            None => ("ibv_post_recv", qp.recv_queue(), &qp.pd),
            Some(srq) => ("ibv_post_srq_recv", srq.recv_queue(), srq.pd()),
        };
        RecvSges::new(verb, std::slice::from_ref(local), queue, pd)?;
        let missing = || Error::invalid(verb, "the provider has no such call");
        // SAFETY: a live QP; its context and the context's ops table are the library's,
        // valid as long as the QP.
        let ops = unsafe { &(*(*qp.raw.as_ptr()).context).ops };
        let queue = match &qp.srq {
            None => RecvQueue::Own(ops.post_recv.ok_or_else(missing)?),
            Some(srq) => RecvQueue::Shared(srq.raw(), ops.post_srq_recv.ok_or_else(missing)?),
        };
        Ok(PreparedRecv { qp: qp.raw, region: local.region().raw(), sge: local.sge(), queue })
    }

    /// Posts it under `wr_id` on `qp`, over `region`: refused on another QP or region
    /// than it was prepared for.
    #[inline(always)]
    pub(super) fn post(
        &mut self,
        qp: &QpCore,
        region: &MemoryRegion,
        wr_id: u64,
    ) -> Result<(), Error> {
        if self.qp != qp.raw || self.region != region.raw() {
            return Err(Error::invalid(
                "ibv_post_recv",
                "a prepared receive posted on another QP or region than it was made for",
            ));
        }
        let mut wr =
            sys::ibv_recv_wr { wr_id, next: ptr::null_mut(), sg_list: &mut self.sge, num_sge: 1 };
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: `qp` is live (borrowed), and so is the SRQ it takes receives from
        // (it holds it); `wr` and its SGE live across the call; the SGE names `region`,
        // live and borrowed, in the queue's protection domain (checked when prepared).
        // If the region is dropped before the receive completes, deregistration stops
        // the HCA first.
        let rc = unsafe {
            match self.queue {
                RecvQueue::Own(post) => post(qp.raw.as_ptr(), &mut wr, &mut bad),
                RecvQueue::Shared(srq, post) => post(srq.as_ptr(), &mut wr, &mut bad),
            }
        };
        if rc != 0 {
            return Err(posting_failed(qp, &self.queue, rc));
        }
        Ok(())
    }
}

#[cold]
fn posting_failed(qp: &QpCore, queue: &RecvQueue, rc: c_int) -> Error {
    match queue {
        RecvQueue::Own(_) => {
            Error::from_errno("ibv_post_recv", rc).on(format!("QP {}", qp.qp_num()))
        }
        RecvQueue::Shared(..) => Error::from_errno("ibv_post_srq_recv", rc),
    }
}
