//! Send requests checked and encoded once, then posted again and again with only their
//! id changing ([`PreparedSend`]), on a basic QP (`ibv_send_wr`) or an extended one
//! (its writer).

use std::ptr::{self, NonNull};

use super::super::{sys, AddressHandle, Error, LocalSlice, MemoryRegion};
use super::common::QpCore;
use super::emit::{emitter, Emit};
use super::request::{build_wr, Operands, SendFlags, SendRequest, NO_SGE};

/// A send request checked and encoded once, then posted again and again with only
/// its id changing: what a latency loop does (perftest keeps one `ibv_send_wr` and
/// changes nothing but `wr_id`). Made by [`QueuePair::prepare_send`](super::QueuePair::prepare_send)
/// for one QP and at most one SGE, and posted by that QP's
/// [`post_prepared`](super::QueuePair::post_prepared), whichever kind it is. A UD
/// request keeps its address handle (a clone) alive with it.
pub struct PreparedSend {
    qp: NonNull<sys::ibv_qp>,
    region: Option<NonNull<sys::ibv_mr>>,
    /// A UD request's destination, which `wr` and `operands` point at.
    _ah: Option<AddressHandle>,
    /// The request as `ibv_post_send` takes it (basic QPs).
    pub(super) wr: sys::ibv_send_wr,
    pub(super) sge: sys::ibv_sge,
    /// The request's flags as verbs bits, less "signaled": each post adds that bit or not.
    pub(super) quiet_bits: u32,
    /// Whether it was prepared signaled (what a bound post asks).
    pub(super) signaled: bool,
    /// The operation's operands as the `ibv_wr_*` builders take them (extended QPs).
    pub(super) operands: Operands,
    /// Its writer into an extended QP's span.
    pub(super) emit: Emit,
}

// SAFETY: plain data; the pointers are identities (QP, region) checked on each post,
// addresses the adapter reads, and a UD destination's address handle, kept alive by
// `_ah` (itself Send); none is dereferenced by Rust.
unsafe impl Send for PreparedSend {}

impl PreparedSend {
    /// Checks `r` against `qp` and encodes it.
    pub(super) fn new(qp: &QpCore, r: &SendRequest<'_>) -> Result<Self, Error> {
        qp.check(r)?;
        if r.local.len() > 1 {
            return Err(Error::invalid("ibv_post_send", "a prepared request has at most one SGE"));
        }
        let mut wr = build_wr(r);
        wr.sg_list = ptr::null_mut();
        Ok(PreparedSend {
            qp: qp.raw,
            region: r.local.first().map(|l| l.region().raw()),
            _ah: r.ud.map(|d| d.ah.clone()),
            wr,
            sge: r.local.first().map_or(NO_SGE, LocalSlice::sge),
            quiet_bits: SendFlags { signaled: false, ..r.flags }.raw(),
            signaled: r.flags.signaled,
            operands: Operands::of(&r.op, r.ud.as_ref()),
            emit: emitter(&r.op, r.flags.inline, !r.local.is_empty(), r.ud.is_some()),
        })
    }

    /// The verbs flag bits of a post, signaled or not.
    #[inline(always)]
    pub(super) fn bits(&self, signaled: bool) -> u32 {
        let signal = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        self.quiet_bits | if signaled { signal } else { 0 }
    }

    /// The two identity checks of a post: prepared on `qp`, over `region` (a request
    /// without data names none). One test each, the refusal out of line.
    #[inline(always)]
    pub(super) fn check_target(&self, qp: &QpCore, region: &MemoryRegion) -> Result<(), Error> {
        let region = region.raw();
        if self.qp != qp.raw || self.region.unwrap_or(region) != region {
            return Err(misdirected());
        }
        Ok(())
    }
}

#[cold]
#[inline(never)]
fn misdirected() -> Error {
    Error::invalid(
        "ibv_post_send",
        "a prepared request posted on another QP or region than it was made for",
    )
}
