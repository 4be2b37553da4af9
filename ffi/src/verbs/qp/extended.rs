//! Extended queue pairs: sends through the extended send API (`ibv_wr_start`,
//! `ibv_wr_rdma_write`, …, `ibv_wr_complete`; `ibv_wr_post(3)`), one SGE per request.

use std::ptr::NonNull;

use super::super::{sys, Error, LocalSlice};
use super::common::QpCore;
use super::emit::{emitter, Span};
use super::request::{Operands, NO_SGE};
use super::{PreparedSend, QueuePair, SendRequest};

/// A queue pair that posts sends through the extended send API, as perftest does by
/// default: the provider writes each request straight into its queue instead of
/// decoding an `ibv_send_wr`. One SGE per request; lists go between one
/// `ibv_wr_start` and `ibv_wr_complete`. Made by
/// [`QueuePairBuilder::build_extended`](super::QueuePairBuilder::build_extended). It
/// keeps its protection domain and both completion queues alive, so they are destroyed
/// after it whatever the drop order.
pub struct ExtendedQueuePair {
    core: QpCore,
    /// The extended view of `core`'s QP, valid as long as it.
    qpx: NonNull<sys::ibv_qp_ex>,
    span: Span,
}

// SAFETY: as QpCore's: posting and modifying are thread-safe in libibverbs (the
// provider takes the send queue's lock in ibv_wr_start and releases it in
// ibv_wr_complete), and `qpx` is a view of the same QP.
unsafe impl Send for ExtendedQueuePair {}
// SAFETY: as above.
unsafe impl Sync for ExtendedQueuePair {}

impl ExtendedQueuePair {
    /// `None` when the provider lacks a builder every post needs.
    pub(super) fn new(core: QpCore, qpx: NonNull<sys::ibv_qp_ex>) -> Option<Self> {
        Some(ExtendedQueuePair { core, qpx, span: Span::of(qpx)? })
    }

    /// Posts `requests` between one `ibv_wr_start` and `ibv_wr_complete`, each checked
    /// first (a refused request posts nothing).
    fn post_many(&self, requests: &[SendRequest<'_>]) -> Result<(), Error> {
        for r in requests {
            self.core.check(r)?;
        }
        let x = self.qpx.as_ptr();
        // SAFETY: a live extended QP; the provider takes the send queue's lock here
        // and releases it in ibv_wr_complete below, which is always reached.
        unsafe { (self.span.start)(x) };
        for r in requests {
            let operands = Operands::of(&r.op, r.ud.as_ref());
            let sge = r.local.first().map_or(NO_SGE, LocalSlice::sge);
            let write = emitter(&r.op, r.flags.inline, !r.local.is_empty(), r.ud.is_some());
            // SAFETY: between wr_start and wr_complete on a live extended QP; every
            // builder called is one this QP type was created with (check() refused the
            // others), its writer the one of its kind; every SGE names a live
            // registered region the request borrows, which outlives the call (inline
            // data is copied before it returns), and a UD destination a live address
            // handle it borrows too.
            unsafe {
                (*x).wr_id = r.wr_id;
                (*x).wr_flags = r.flags.raw();
                write(x, &self.span, &operands, &sge);
            };
        }
        // SAFETY: closes the wr_start above on the same live QP.
        let rc = unsafe { (self.span.complete)(x) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_wr_complete", rc).on(format!(
                "QP {}, {} request(s)",
                self.core.qp_num(),
                requests.len()
            )));
        }
        Ok(())
    }
}

impl QueuePair for ExtendedQueuePair {
    #[inline]
    fn core(&self) -> &QpCore {
        &self.core
    }

    /// Posts one send work request between `ibv_wr_start` and `ibv_wr_complete`.
    /// Nothing is allocated.
    ///
    /// # Errors
    /// Refused before posting as [`QueuePair`] says (more than one SGE included).
    /// From the library (`ibv_wr_complete`): ENOMEM when the send queue is full,
    /// EINVAL for a QP not in RTS.
    #[inline]
    fn post_send(&self, r: &SendRequest<'_>) -> Result<(), Error> {
        self.post_many(std::slice::from_ref(r))
    }

    /// Posts `requests` between one `ibv_wr_start` and `ibv_wr_complete`, however
    /// many there are.
    ///
    /// # Errors
    /// As [`post_send`](QueuePair::post_send), every request checked before any is
    /// posted.
    fn post_send_list(&self, requests: &[SendRequest<'_>]) -> Result<(), Error> {
        self.post_many(requests)
    }

    #[inline(always)]
    unsafe fn post_prepared_unchecked(
        &self,
        p: &mut PreparedSend,
        wr_id: u64,
        bits: Option<u32>,
    ) -> Result<(), Error> {
        let x = self.qpx.as_ptr();
        // SAFETY: a live extended QP; wr_start/complete bracket one request that
        // check() accepted for this QP when it was prepared (the caller's promise),
        // written by the writer chosen for it then; its SGE names a region live across
        // the call (the caller's promise); a UD destination's address handle is kept
        // alive by `p`.
        let rc = unsafe {
            (self.span.start)(x);
            (*x).wr_id = wr_id;
            (*x).wr_flags = bits.unwrap_or(p.wr.send_flags);
            (p.emit)(x, &self.span, &p.operands, &p.sge);
            (self.span.complete)(x)
        };
        if rc != 0 {
            return Err(complete_failed(&self.core, rc));
        }
        Ok(())
    }
}

#[cold]
#[inline(never)]
fn complete_failed(qp: &QpCore, rc: i32) -> Error {
    Error::from_errno("ibv_wr_complete", rc).on(format!("QP {}", qp.qp_num()))
}
