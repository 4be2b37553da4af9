//! What both kinds of queue pair share: the C handle and what it keeps alive
//! ([`QpCore`]), and the [`QueuePair`] trait, whose default methods are the verbs that
//! do not depend on how sends are posted.

use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

use super::super::{
    sys, Access, CompletionQueue, Error, LocalSlice, MemoryRegion, ProtectionDomain,
    SharedReceiveQueue,
};
use super::{
    sys::ibv_qp_attr_mask as mask, BoundSend, InitAttr, PreparedRecv, PreparedSend, QpCaps,
    QpState, QpType, RtrAttr, RtsAttr, SendRequest,
};
use crate::types::{Gid, QpEndpoint};
use crate::verbs::mr::RecvSges;

/// The part every queue pair has: the C handle, its type and sizes, and the objects it
/// keeps alive (its protection domain, both completion queues and any shared receive
/// queue), so they are destroyed after it whatever the drop order.
///
/// Not nameable outside this crate: it is how the kinds share their verbs, not an API.
pub struct QpCore {
    pub(super) raw: NonNull<sys::ibv_qp>,
    pub(super) qp_type: QpType,
    pub(super) caps: QpCaps,
    pub(super) pd: ProtectionDomain,
    _send_cq: CompletionQueue,
    _recv_cq: CompletionQueue,
    /// The shared receive queue it takes receives from, if any.
    pub(super) srq: Option<SharedReceiveQueue>,
}

// SAFETY: posting and modifying are thread-safe in libibverbs.
unsafe impl Send for QpCore {}
// SAFETY: as above.
unsafe impl Sync for QpCore {}

impl Drop for QpCore {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp or the provider's create_qp_ex, destroyed
        // once, before its PD and CQs (held by this struct, dropped after this body).
        let rc = unsafe { sys::ibv_destroy_qp(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_qp failed");
    }
}

impl QpCore {
    /// Takes ownership of a QP just created in `pd` over the (send, receive) CQs and
    /// `srq`.
    pub(super) fn new(
        raw: NonNull<sys::ibv_qp>,
        qp_type: QpType,
        caps: QpCaps,
        pd: &ProtectionDomain,
        (send_cq, recv_cq): (&CompletionQueue, &CompletionQueue),
        srq: Option<&SharedReceiveQueue>,
    ) -> Self {
        QpCore {
            raw,
            qp_type,
            caps,
            pd: pd.clone(),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
            srq: srq.cloned(),
        }
    }

    /// The SGEs a receive on its own queue may have, and how the queue is named in
    /// errors.
    pub(super) fn recv_queue(&self) -> (&'static str, u32) {
        ("the QP", self.caps.max_recv_sge)
    }

    pub(super) fn qp_num(&self) -> u32 {
        // SAFETY: live QP; plain field read.
        unsafe { self.raw.as_ref() }.qp_num
    }

    /// `ibv_modify_qp` with the attributes named in `bits`; `what` names the target
    /// state in the error.
    pub(crate) fn modify(
        &self,
        attr: &mut sys::ibv_qp_attr,
        bits: u32,
        what: &'static str,
    ) -> Result<(), Error> {
        let bits = i32::try_from(bits).unwrap_or(i32::MAX);
        // SAFETY: live QP; `attr` is valid for the fields named in `bits`.
        let rc = unsafe { sys::ibv_modify_qp(self.raw.as_ptr(), attr, bits) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_modify_qp", rc)
                .on(format!("QP {} to {what}", self.qp_num())));
        }
        Ok(())
    }

    /// `ibv_query_qp` for the attributes named in `bits`.
    pub(crate) fn query(&self, bits: u32) -> Result<sys::ibv_qp_attr, Error> {
        let mut attr = zeroed_attr(0);
        // SAFETY: ibv_qp_init_attr is plain data; all-zero is valid.
        let mut init: sys::ibv_qp_init_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        let bits = i32::try_from(bits).unwrap_or(i32::MAX);
        // SAFETY: live QP; both out-structs are valid.
        let rc = unsafe { sys::ibv_query_qp(self.raw.as_ptr(), &mut attr, bits, &mut init) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_query_qp", rc).on(format!("QP {}", self.qp_num())));
        }
        Ok(attr)
    }

    /// `SGE {i} is in … another protection domain` unless `slice` is in this QP's PD.
    pub(super) fn check_pd(&self, i: usize, slice: &LocalSlice<'_>) -> Result<(), String> {
        if ptr::eq(slice.region().pd().as_ptr(), self.pd.as_ptr()) {
            Ok(())
        } else {
            Err(format!("SGE {i} is in a memory region of another protection domain"))
        }
    }
}

fn zeroed_attr(state: sys::ibv_qp_state::Type) -> sys::ibv_qp_attr {
    // SAFETY: ibv_qp_attr is plain data; all-zero is valid.
    let mut attr: sys::ibv_qp_attr = unsafe { MaybeUninit::zeroed().assume_init() };
    attr.qp_state = state;
    attr
}

/// What every queue pair does, whichever API it posts sends through: the state
/// changes, queries and receives (default methods, shared by both kinds), and single,
/// listed and prepared sends (each kind its own way). Implemented by
/// [`BasicQueuePair`](super::BasicQueuePair),
/// [`ExtendedQueuePair`](super::ExtendedQueuePair) and
/// [`GenericQueuePair`](super::GenericQueuePair); bring it into scope to call them.
///
/// Every send is checked before it reaches the library, and a refused one posts
/// nothing: more SGEs than the QP takes, an SGE from another protection domain, inline
/// data over the QP's limit, an operation its type cannot do (UC reads and atomics, UD
/// writes, a UD send without a destination), an atomic that is not one 8-byte SGE
/// against 8 aligned remote bytes.
pub trait QueuePair: Send + Sync {
    /// The shared part; how the default methods reach the QP.
    #[doc(hidden)]
    fn core(&self) -> &QpCore;

    /// The shared receive queue it takes receives from, if it was built over one: post
    /// them there.
    fn srq(&self) -> Option<&SharedReceiveQueue> {
        self.core().srq.as_ref()
    }

    /// Queue pair number.
    fn qp_num(&self) -> u32 {
        self.core().qp_num()
    }

    /// The C handle, for calling rdma-sys directly (microbenchmarks comparing this
    /// layer with raw verbs). Using it is `unsafe`; it is valid while `self` lives.
    fn as_raw(&self) -> *mut sys::ibv_qp {
        self.core().raw.as_ptr()
    }

    /// Transport service.
    fn qp_type(&self) -> QpType {
        self.core().qp_type
    }

    /// Queue sizes as the provider allocated them (`max_send_sge` is 1 on an extended
    /// QP, whatever the provider granted).
    fn caps(&self) -> QpCaps {
        self.core().caps
    }

    /// The domain it lives in.
    fn pd(&self) -> &ProtectionDomain {
        &self.core().pd
    }

    /// This QP's endpoint for a peer: `lid` and `gid` of the port it uses, our PSN.
    fn endpoint(&self, lid: u16, gid: Gid, psn: u32) -> QpEndpoint {
        QpEndpoint { lid, gid, qpn: self.qp_num(), psn: psn & 0xff_ffff }
    }

    /// RESET → INIT.
    ///
    /// # Errors
    /// `ibv_modify_qp` with its errno (EINVAL for a bad port or a wrong state).
    fn to_init(&self, a: &InitAttr) -> Result<(), Error> {
        let core = self.core();
        let mut attr = zeroed_attr(sys::ibv_qp_state::IBV_QPS_INIT);
        attr.port_num = a.port;
        attr.pkey_index = a.pkey_index;
        let mut bits = mask::IBV_QP_STATE.0 | mask::IBV_QP_PKEY_INDEX.0 | mask::IBV_QP_PORT.0;
        if core.qp_type == QpType::Ud {
            attr.qkey = a.qkey;
            bits |= mask::IBV_QP_QKEY.0;
        } else {
            // Only the remote rights matter to a QP; UC cannot grant read or atomics.
            let mut access = a.access.bits()
                & (Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC).bits();
            if core.qp_type == QpType::Uc {
                access &= Access::REMOTE_WRITE.bits();
            }
            attr.qp_access_flags = access;
            bits |= mask::IBV_QP_ACCESS_FLAGS.0;
        }
        core.modify(&mut attr, bits, "INIT")
    }

    /// INIT → RTR. On UD only the state changes (`a` may be `None`).
    ///
    /// # Errors
    /// Refused when a connected QP gets no attributes; `ibv_modify_qp` otherwise.
    fn to_rtr(&self, a: Option<&RtrAttr>) -> Result<(), Error> {
        let core = self.core();
        let mut attr = zeroed_attr(sys::ibv_qp_state::IBV_QPS_RTR);
        let mut bits = mask::IBV_QP_STATE.0;
        if core.qp_type != QpType::Ud {
            let a = a.ok_or_else(|| {
                Error::invalid("ibv_modify_qp", "a connected QP needs RTR attributes")
            })?;
            attr.path_mtu = a.path_mtu as u32;
            attr.dest_qp_num = a.dest_qpn;
            attr.rq_psn = a.rq_psn & 0xff_ffff;
            attr.ah_attr = a.av.raw();
            bits |= mask::IBV_QP_AV.0
                | mask::IBV_QP_PATH_MTU.0
                | mask::IBV_QP_DEST_QPN.0
                | mask::IBV_QP_RQ_PSN.0;
            if core.qp_type == QpType::Rc {
                attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
                attr.min_rnr_timer = a.min_rnr_timer;
                bits |= mask::IBV_QP_MAX_DEST_RD_ATOMIC.0 | mask::IBV_QP_MIN_RNR_TIMER.0;
            }
        }
        core.modify(&mut attr, bits, "RTR")
    }

    /// RTR → RTS.
    ///
    /// # Errors
    /// `ibv_modify_qp` with its errno.
    fn to_rts(&self, a: &RtsAttr) -> Result<(), Error> {
        let core = self.core();
        let mut attr = zeroed_attr(sys::ibv_qp_state::IBV_QPS_RTS);
        attr.sq_psn = a.sq_psn & 0xff_ffff;
        let mut bits = mask::IBV_QP_STATE.0 | mask::IBV_QP_SQ_PSN.0;
        if core.qp_type == QpType::Rc {
            attr.timeout = a.timeout;
            attr.retry_cnt = a.retry_cnt;
            attr.rnr_retry = a.rnr_retry;
            attr.max_rd_atomic = a.max_rd_atomic;
            bits |= mask::IBV_QP_TIMEOUT.0
                | mask::IBV_QP_RETRY_CNT.0
                | mask::IBV_QP_RNR_RETRY.0
                | mask::IBV_QP_MAX_QP_RD_ATOMIC.0;
        }
        core.modify(&mut attr, bits, "RTS")
    }

    /// Moves the QP to ERROR: outstanding work completes with IBV_WC_WR_FLUSH_ERR.
    ///
    /// # Errors
    /// `ibv_modify_qp` with its errno.
    fn to_error(&self) -> Result<(), Error> {
        let mut attr = zeroed_attr(sys::ibv_qp_state::IBV_QPS_ERR);
        self.core().modify(&mut attr, mask::IBV_QP_STATE.0, "ERR")
    }

    /// The current state (`ibv_query_qp(3)`): shows a QP that an error completion
    /// moved to ERROR.
    ///
    /// # Errors
    /// `ibv_query_qp` with its errno.
    fn state(&self) -> Result<QpState, Error> {
        Ok(QpState::from_raw(self.core().query(mask::IBV_QP_STATE.0)?.qp_state))
    }

    /// Queue sizes as the device reports them now (`ibv_query_qp(3)`'s `cap`): what the
    /// QP was created with, after the provider's rounding; [`caps`](Self::caps) is the
    /// write-back at creation.
    ///
    /// # Errors
    /// `ibv_query_qp` with its errno.
    fn queried_caps(&self) -> Result<QpCaps, Error> {
        let cap = self.core().query(mask::IBV_QP_CAP.0)?.cap;
        Ok(QpCaps {
            max_send_wr: cap.max_send_wr,
            max_recv_wr: cap.max_recv_wr,
            max_send_sge: cap.max_send_sge,
            max_recv_sge: cap.max_recv_sge,
            max_inline_data: cap.max_inline_data,
        })
    }

    /// The class of the path the QP sends on (`ibv_query_qp(3)`'s address vector), as
    /// the driver keeps it after RTR.
    ///
    /// # Errors
    /// `ibv_query_qp` with its errno.
    fn path_class(&self) -> Result<super::PathClass, Error> {
        let ah = self.core().query(mask::IBV_QP_AV.0)?.ah_attr;
        let global = ah.is_global != 0;
        Ok(super::PathClass {
            sl: ah.sl,
            traffic_class: if global { ah.grh.traffic_class } else { 0 },
            flow_label: if global { ah.grh.flow_label } else { 0 },
        })
    }

    /// Posts a receive (`ibv_post_recv(3)`) into `local`. On UD, the first
    /// [`GRH_LEN`](super::GRH_LEN) bytes of what arrives are the GRH.
    ///
    /// # Errors
    /// Refused with more SGEs than the QP takes or an SGE of another PD; ENOMEM when
    /// the receive queue is full.
    #[inline(always)]
    fn post_recv(&self, wr_id: u64, local: &[LocalSlice<'_>]) -> Result<(), Error> {
        let core = self.core();
        if core.srq.is_some() {
            return Err(Error::invalid(
                "ibv_post_recv",
                format!("QP {} takes its receives from a shared receive queue", self.qp_num()),
            ));
        }
        let mut sges = RecvSges::new("ibv_post_recv", local, core.recv_queue(), &core.pd)?;
        let mut wr = sges.wr(wr_id);
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: live QP; `wr` and its initialised SGEs live across the call; the
        // regions are live and registered (LocalSlice borrows them). If a region is
        // dropped before the receive completes, deregistration stops the HCA first.
        let rc = unsafe { sys::ibv_post_recv(core.raw.as_ptr(), &mut wr, &mut bad) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_post_recv", rc).on(format!("QP {}", self.qp_num())));
        }
        Ok(())
    }

    /// Posts one send work request. Nothing is allocated.
    ///
    /// # Errors
    /// Refused before posting as the trait says. From the library: ENOMEM when the send
    /// queue is full, EINVAL for a QP not in RTS.
    fn post_send(&self, r: &SendRequest<'_>) -> Result<(), Error>;

    /// Posts `requests` in one go (perftest's `-l`): on a basic QP linked into one
    /// `ibv_post_send` call per [`MAX_POST_LIST`](super::MAX_POST_LIST) requests, built
    /// on the stack; on an extended QP between one `ibv_wr_start` and
    /// `ibv_wr_complete`. No allocation.
    ///
    /// # Errors
    /// As [`post_send`](Self::post_send), every request checked before any of its list
    /// is posted; the message names the request the library refused (on a basic QP,
    /// those before it in its list were posted).
    fn post_send_list(&self, requests: &[SendRequest<'_>]) -> Result<(), Error>;

    /// Checks and encodes a receive into `local` once, for
    /// [`post_prepared_recv`](Self::post_prepared_recv): on the QP's own receive queue,
    /// or on the shared one it takes its receives from.
    ///
    /// # Errors
    /// Refused for an SGE of another protection domain than the queue's.
    fn prepare_recv(&self, local: &LocalSlice<'_>) -> Result<PreparedRecv, Error> {
        PreparedRecv::new(self.core(), local)
    }

    /// Posts a prepared receive again under id `wr_id`. `region` is the region its SGE
    /// names, borrowed for the call as any post borrows its SGEs.
    ///
    /// # Errors
    /// Refused when `p` was prepared on another QP or over another region; ENOMEM from
    /// the library when the queue is full.
    #[inline(always)]
    fn post_prepared_recv(
        &self,
        p: &mut PreparedRecv,
        region: &MemoryRegion,
        wr_id: u64,
    ) -> Result<(), Error> {
        p.post(self.core(), region, wr_id)
    }

    /// Checks and encodes `r` once, for [`post_prepared`](Self::post_prepared).
    ///
    /// # Errors
    /// As [`post_send`](Self::post_send)'s checks; also refused for more than one SGE.
    fn prepare_send(&self, r: &SendRequest<'_>) -> Result<PreparedSend, Error> {
        PreparedSend::new(self.core(), r)
    }

    /// Posts a prepared request again under id `wr_id`, asking for a completion or not
    /// (`signaled`: latency loops signal one request in several). `region` is the
    /// region its SGE names, borrowed for the call as any post borrows its SGEs.
    ///
    /// # Errors
    /// Refused when `p` was prepared on another QP or over another region; from the
    /// library as [`post_send`](Self::post_send).
    #[inline(always)]
    fn post_prepared(
        &self,
        p: &mut PreparedSend,
        region: &MemoryRegion,
        wr_id: u64,
        signaled: bool,
    ) -> Result<(), Error> {
        p.check_target(self.core(), region)?;
        let bits = p.bits(signaled);
        // SAFETY: prepared on this QP and over `region` (checked above), which is
        // borrowed across the call.
        unsafe { self.post_prepared_unchecked(p, wr_id, Some(bits)) }
    }

    /// Binds a prepared request to this QP and the region its SGE names, both borrowed
    /// for as long as the binding lives: its posts then check nothing (what a post of
    /// [`post_prepared`](Self::post_prepared) checks, the borrows now guarantee), and
    /// carry the flags it was prepared with (signaled or not).
    ///
    /// # Errors
    /// Refused when `p` was prepared on another QP or over another region.
    fn bind_send<'a>(
        &'a self,
        p: PreparedSend,
        region: &'a MemoryRegion,
    ) -> Result<BoundSend<'a, Self>, Error>
    where
        Self: Sized,
    {
        p.check_target(self.core(), region)?;
        Ok(BoundSend::new(self, p))
    }

    /// Posts `p` under `wr_id` with the verbs flag bits `bits`, or with those it holds
    /// (`None`: as [`bind_send`](Self::bind_send) left them), checking nothing.
    ///
    /// # Safety
    /// `p` was prepared on this QP, and the region its SGE names (if it has one) lives
    /// across the call.
    #[doc(hidden)]
    unsafe fn post_prepared_unchecked(
        &self,
        p: &mut PreparedSend,
        wr_id: u64,
        bits: Option<u32>,
    ) -> Result<(), Error>;
}
