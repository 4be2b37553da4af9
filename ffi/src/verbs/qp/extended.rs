//! Extended queue pairs: sends through the extended send API (`ibv_wr_start`,
//! `ibv_wr_rdma_write`, …, `ibv_wr_complete`; `ibv_wr_post(3)`), one SGE per request.

use std::ptr::{self, NonNull};

use super::super::{sys, Error, LocalSlice};
use super::common::QpCore;
use super::request::{Operands, NO_SGE};
use super::{PreparedSend, QueuePair, SendOp, SendRequest};

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

/// The provider's builders every post calls, looked up once: `ibv_wr_start` and its
/// kin look theirs up in the `ibv_qp_ex`, and check it, on every call.
#[derive(Clone, Copy)]
pub(super) struct Span {
    start: unsafe extern "C" fn(*mut sys::ibv_qp_ex),
    complete: unsafe extern "C" fn(*mut sys::ibv_qp_ex) -> i32,
    set_sge: unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32, u64, u32),
}

impl Span {
    /// `qpx`'s builders; `None` when the provider lacks one.
    fn of(qpx: NonNull<sys::ibv_qp_ex>) -> Option<Span> {
        // SAFETY: a live extended QP; its builder pointers are plain fields.
        let x = unsafe { qpx.as_ref() };
        Some(Span { start: x.wr_start?, complete: x.wr_complete?, set_sge: x.wr_set_sge? })
    }
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

/// A request's writer into an open span, after its id and flags: one function per kind
/// of operation, of payload and of destination, chosen once (when a request is
/// prepared, or as it is posted), so the writing itself matches on nothing.
pub(super) type Emit = unsafe fn(*mut sys::ibv_qp_ex, &Span, &Operands, &sys::ibv_sge);

// The writers' kinds (const parameters of `emit_as`).
const SEND: u8 = 0;
const SEND_IMM: u8 = 1;
const WRITE: u8 = 2;
const WRITE_IMM: u8 = 3;
const READ: u8 = 4;
const COMPARE_SWAP: u8 = 5;
const FETCH_ADD: u8 = 6;
const NO_DATA: u8 = 0;
const INLINE: u8 = 1;
const ONE_SGE: u8 = 2;

/// The writer of an `op` request, inline or not, with or without its one SGE, to a UD
/// destination or not.
pub(super) fn emitter(op: &SendOp, inline: bool, sge: bool, ud: bool) -> Emit {
    fn with<const OP: u8>(inline: bool, sge: bool, ud: bool) -> Emit {
        match (sge, inline, ud) {
            (false, _, false) => emit_as::<OP, NO_DATA, false>,
            (true, true, false) => emit_as::<OP, INLINE, false>,
            (true, false, false) => emit_as::<OP, ONE_SGE, false>,
            (false, _, true) => emit_as::<OP, NO_DATA, true>,
            (true, true, true) => emit_as::<OP, INLINE, true>,
            (true, false, true) => emit_as::<OP, ONE_SGE, true>,
        }
    }
    match op {
        SendOp::Send => with::<SEND>(inline, sge, ud),
        SendOp::SendImm(_) => with::<SEND_IMM>(inline, sge, ud),
        SendOp::Write(_) => with::<WRITE>(inline, sge, ud),
        SendOp::WriteImm(..) => with::<WRITE_IMM>(inline, sge, ud),
        SendOp::Read(_) => with::<READ>(inline, sge, ud),
        SendOp::CompareSwap { .. } => with::<COMPARE_SWAP>(inline, sge, ud),
        SendOp::FetchAdd { .. } => with::<FETCH_ADD>(inline, sge, ud),
    }
}

/// Writes an `OP` request with `DATA` (and its UD destination when `UD`) into an open
/// span: the operation's builder, the destination, then the payload.
///
/// # Safety
/// `x` is a live extended QP between `ibv_wr_start` and `ibv_wr_complete`, `span` its
/// builders; `OP` is an operation the QP was created for and `o` holds its operands
/// (and, when `UD`, a live address handle); `sge` names live registered memory (copied
/// before return when inline).
unsafe fn emit_as<const OP: u8, const DATA: u8, const UD: bool>(
    x: *mut sys::ibv_qp_ex,
    span: &Span,
    o: &Operands,
    sge: &sys::ibv_sge,
) {
    // SAFETY: the caller's contract covers every call below.
    unsafe {
        match OP {
            SEND => sys::ibv_wr_send(x),
            SEND_IMM => sys::ibv_wr_send_imm(x, o.imm_be),
            WRITE => sys::ibv_wr_rdma_write(x, o.rkey, o.addr),
            WRITE_IMM => sys::ibv_wr_rdma_write_imm(x, o.rkey, o.addr, o.imm_be),
            READ => sys::ibv_wr_rdma_read(x, o.rkey, o.addr),
            COMPARE_SWAP => sys::ibv_wr_atomic_cmp_swp(x, o.rkey, o.addr, o.compare_add, o.swap),
            _ => sys::ibv_wr_atomic_fetch_add(x, o.rkey, o.addr, o.compare_add),
        }
        if UD {
            sys::ibv_wr_set_ud_addr(x, o.ah, o.remote_qpn, o.remote_qkey);
        }
        match DATA {
            INLINE => sys::ibv_wr_set_inline_data(x, sge.addr as *mut _, sge.length as usize),
            ONE_SGE => (span.set_sge)(x, sge.lkey, sge.addr, sge.length),
            _ => sys::ibv_wr_set_sge_list(x, 0, ptr::null()),
        }
    }
}
