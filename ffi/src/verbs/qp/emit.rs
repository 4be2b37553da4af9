//! The extended send API's writers: the provider's builders looked up once ([`Span`]),
//! and one writer per kind of request ([`emitter`]), chosen when a request is prepared
//! or posted, that puts it into an open span.

use std::ptr::{self, NonNull};

use super::super::sys;
use super::request::Operands;
use super::SendOp;

/// The provider's builders every post calls, looked up once: `ibv_wr_start` and its
/// kin look theirs up in the `ibv_qp_ex`, and check it, on every call.
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub(super) start: unsafe extern "C" fn(*mut sys::ibv_qp_ex),
    pub(super) complete: unsafe extern "C" fn(*mut sys::ibv_qp_ex) -> i32,
    pub(super) set_sge: unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32, u64, u32),
}

impl Span {
    /// `qpx`'s builders; `None` when the provider lacks one.
    pub(super) fn of(qpx: NonNull<sys::ibv_qp_ex>) -> Option<Span> {
        // SAFETY: a live extended QP; its builder pointers are plain fields.
        let x = unsafe { qpx.as_ref() };
        Some(Span { start: x.wr_start?, complete: x.wr_complete?, set_sge: x.wr_set_sge? })
    }
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
