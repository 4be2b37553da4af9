//! `ibv_create_qp(3)`, `ibv_modify_qp(3)` and posting (`ibv_post_send(3)`,
//! `ibv_post_recv(3)`): queue pairs for RC, UC and UD.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

use super::sys::{self, ibv_qp_attr_mask as mask};
use super::{AddressHandle, CompletionQueue, Error, LocalSlice, MemoryRegion, ProtectionDomain};
use crate::types::{Gid, QpEndpoint, RemoteSlice};

/// Most scatter/gather entries one work request may carry through this layer.
pub const MAX_SGE: usize = 32;

/// Requests [`QueuePair::post_send_list`] links into one `ibv_post_send` call.
pub const MAX_POST_LIST: usize = 32;

/// Bytes of Global Routing Header that start every UD receive buffer.
pub const GRH_LEN: usize = 40;

/// Transport service of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected: every operation.
    Rc,
    /// Unreliable connected: send and RDMA write.
    Uc,
    /// Unreliable datagram: send only, one MTU per message, through address handles.
    Ud,
}

impl QpType {
    fn raw(self) -> sys::ibv_qp_type::Type {
        match self {
            QpType::Rc => sys::ibv_qp_type::IBV_QPT_RC,
            QpType::Uc => sys::ibv_qp_type::IBV_QPT_UC,
            QpType::Ud => sys::ibv_qp_type::IBV_QPT_UD,
        }
    }
}

/// Queue pair state (`enum ibv_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum QpState {
    Reset,
    Init,
    ReadyToReceive,
    ReadyToSend,
    SendQueueDrain,
    SendQueueError,
    Error,
    Unknown(u32),
}

impl QpState {
    fn from_raw(code: u32) -> Self {
        use sys::ibv_qp_state::*;
        match code {
            IBV_QPS_RESET => QpState::Reset,
            IBV_QPS_INIT => QpState::Init,
            IBV_QPS_RTR => QpState::ReadyToReceive,
            IBV_QPS_RTS => QpState::ReadyToSend,
            IBV_QPS_SQD => QpState::SendQueueDrain,
            IBV_QPS_SQE => QpState::SendQueueError,
            IBV_QPS_ERR => QpState::Error,
            other => QpState::Unknown(other),
        }
    }
}

/// Path MTU (`enum ibv_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Mtu {
    Mtu256 = 1,
    Mtu512 = 2,
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

impl Mtu {
    /// The MTU for a size in bytes (256, 512, 1024, 2048, 4096).
    pub fn from_bytes(bytes: u32) -> Option<Mtu> {
        Some(match bytes {
            256 => Mtu::Mtu256,
            512 => Mtu::Mtu512,
            1024 => Mtu::Mtu1024,
            2048 => Mtu::Mtu2048,
            4096 => Mtu::Mtu4096,
            _ => return None,
        })
    }

    /// The MTU for a port's `active_mtu` code.
    pub fn from_code(code: u32) -> Option<Mtu> {
        Self::from_bytes(128u32.checked_shl(code)?)
    }

    /// Size in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// Queue sizes asked for at creation; the provider may round them up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Outstanding receive work requests.
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Largest inline send in bytes.
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps {
            max_send_wr: 128,
            max_recv_wr: 128,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        }
    }
}

/// Where a connected QP sends, or what an address handle points at
/// (`struct ibv_ah_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressVector {
    /// Local port (1-based).
    pub port: u8,
    /// Destination LID (InfiniBand).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Global route: required on RoCE, optional on InfiniBand.
    pub grh: Option<GlobalRoute>,
}

/// The GRH part of an address vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalRoute {
    /// Destination GID.
    pub dgid: Gid,
    /// Index of the local GID to send from (perftest's `-x`).
    pub sgid_index: u8,
    /// Hop limit (IPv6 TTL on RoCE v2).
    pub hop_limit: u8,
    /// Traffic class (DSCP/ECN on RoCE v2).
    pub traffic_class: u8,
    /// Flow label.
    pub flow_label: u32,
}

impl AddressVector {
    /// The path to `peer` from `port`: by LID alone when `sgid_index` is `None`
    /// (InfiniBand), else routed by GID (RoCE, or IB across subnets).
    pub fn to_peer(peer: &QpEndpoint, port: u8, sgid_index: Option<u8>) -> Self {
        AddressVector {
            port,
            dlid: peer.lid,
            sl: 0,
            grh: sgid_index.map(|sgid_index| GlobalRoute {
                dgid: peer.gid,
                sgid_index,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            }),
        }
    }

    pub(crate) fn raw(&self) -> sys::ibv_ah_attr {
        // SAFETY: ibv_ah_attr is plain data; all-zero is a valid value.
        let mut ah: sys::ibv_ah_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        ah.dlid = self.dlid;
        ah.sl = self.sl;
        ah.port_num = self.port;
        if let Some(g) = &self.grh {
            ah.is_global = 1;
            ah.grh.dgid.raw = g.dgid.0;
            ah.grh.sgid_index = g.sgid_index;
            ah.grh.hop_limit = g.hop_limit;
            ah.grh.traffic_class = g.traffic_class;
            ah.grh.flow_label = g.flow_label;
        }
        ah
    }
}

/// Parameters of RESET → INIT.
#[derive(Clone, Copy, Debug)]
pub struct InitAttr {
    /// Port (1-based).
    pub port: u8,
    /// P_Key index.
    pub pkey_index: u16,
    /// What peers may do to memory through this QP (RC/UC); taken from the
    /// memory-region flags `REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC`.
    pub access: super::Access,
    /// Q_Key (UD).
    pub qkey: u32,
}

impl InitAttr {
    /// Port `port`, P_Key index 0, every remote right, Q_Key 0x11111111 (perftest's).
    pub fn new(port: u8) -> Self {
        InitAttr { port, pkey_index: 0, access: super::Access::ALL, qkey: DEFAULT_QKEY }
    }
}

/// The Q_Key perftest uses for UD.
pub const DEFAULT_QKEY: u32 = 0x1111_1111;

/// Parameters of INIT → RTR (RC and UC; UD needs none).
#[derive(Clone, Copy, Debug)]
pub struct RtrAttr {
    /// Path MTU.
    pub path_mtu: Mtu,
    /// The peer's QP number.
    pub dest_qpn: u32,
    /// The peer's first PSN.
    pub rq_psn: u32,
    /// How to reach the peer.
    pub av: AddressVector,
    /// RDMA reads/atomics the peer may have outstanding against us (RC).
    pub max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer code (RC; 12 = 0.64 ms).
    pub min_rnr_timer: u8,
}

impl RtrAttr {
    /// RTR toward `peer` over `av`, with perftest's defaults (16 outstanding reads,
    /// RNR timer 12).
    pub fn new(peer: &QpEndpoint, av: AddressVector, path_mtu: Mtu) -> Self {
        RtrAttr {
            path_mtu,
            dest_qpn: peer.qpn,
            rq_psn: peer.psn,
            av,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 12,
        }
    }
}

/// Parameters of RTR → RTS.
#[derive(Clone, Copy, Debug)]
pub struct RtsAttr {
    /// Our first PSN.
    pub sq_psn: u32,
    /// Local ACK timeout code (RC): 4.096 µs × 2^timeout; 14 ≈ 67 ms.
    pub timeout: u8,
    /// Transport retries before IBV_WC_RETRY_EXC_ERR (RC, 0–7).
    pub retry_cnt: u8,
    /// RNR retries before IBV_WC_RNR_RETRY_EXC_ERR (RC; 7 = forever).
    pub rnr_retry: u8,
    /// RDMA reads/atomics we may have outstanding (RC).
    pub max_rd_atomic: u8,
}

impl RtsAttr {
    /// RTS with perftest's defaults: timeout 14, 7 retries, infinite RNR retry, 16
    /// outstanding reads.
    pub fn new(sq_psn: u32) -> Self {
        RtsAttr { sq_psn, timeout: 14, retry_cnt: 7, rnr_retry: 7, max_rd_atomic: 16 }
    }
}

/// Builds a queue pair: `pd.create_qp(QpType::Rc, &send_cq, &recv_cq).caps(…).build()`.
pub struct QueuePairBuilder<'a> {
    pd: &'a ProtectionDomain,
    qp_type: QpType,
    send_cq: &'a CompletionQueue,
    recv_cq: &'a CompletionQueue,
    caps: QpCaps,
    sq_sig_all: bool,
    extended: bool,
}

impl ProtectionDomain {
    /// Starts building a queue pair of `qp_type` in this domain.
    pub fn create_qp<'a>(
        &'a self,
        qp_type: QpType,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
    ) -> QueuePairBuilder<'a> {
        QueuePairBuilder {
            pd: self,
            qp_type,
            send_cq,
            recv_cq,
            caps: QpCaps::default(),
            sq_sig_all: false,
            extended: false,
        }
    }
}

impl QueuePairBuilder<'_> {
    /// Queue sizes.
    pub fn caps(mut self, caps: QpCaps) -> Self {
        self.caps = caps;
        self
    }

    /// Signal every send, whatever its flags say.
    pub fn sq_sig_all(mut self, yes: bool) -> Self {
        self.sq_sig_all = yes;
        self
    }

    /// Post through the extended send API (`ibv_wr_start` … `ibv_wr_complete`,
    /// `ibv_wr_post(3)`), as perftest does by default: the provider writes each request
    /// straight into its queue instead of decoding an `ibv_send_wr`. Only for queues of
    /// one SGE per request (`max_send_sge` ≤ 1): soft-RoCE's `ibv_wr_set_sge_list` in
    /// rdma-core 44 makes requests of two SGEs fail with LOC_QP_OP_ERR. A device without
    /// it, or a queue with more SGEs, gets a classic QP; [`QueuePair::is_extended`] says
    /// which was made.
    pub fn extended(mut self, yes: bool) -> Self {
        self.extended = yes;
        self
    }

    /// Creates the QP, in the RESET state.
    ///
    /// # Errors
    /// `ibv_create_qp` with its errno (EINVAL for sizes over the device's limits,
    /// ENOMEM when out of QPs).
    pub fn build(self) -> Result<QueuePair, Error> {
        // SAFETY: ibv_qp_init_attr is plain data; all-zero is valid.
        let mut init: sys::ibv_qp_init_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        init.send_cq = self.send_cq.as_ptr();
        init.recv_cq = self.recv_cq.as_ptr();
        init.qp_type = self.qp_type.raw();
        init.sq_sig_all = i32::from(self.sq_sig_all);
        init.cap = sys::ibv_qp_cap {
            max_send_wr: self.caps.max_send_wr,
            max_recv_wr: self.caps.max_recv_wr,
            max_send_sge: self.caps.max_send_sge,
            max_recv_sge: self.caps.max_recv_sge,
            max_inline_data: self.caps.max_inline_data,
        };
        let extended = if self.extended && self.caps.max_send_sge <= 1 {
            self.create_extended(&mut init)
        } else {
            None
        };
        let raw = match extended {
            Some(raw) => raw,
            None => {
                // SAFETY: live PD and CQs (the QP keeps clones of them); `init` is valid.
                let raw = unsafe { sys::ibv_create_qp(self.pd.as_ptr(), &mut init) };
                NonNull::new(raw).ok_or_else(|| {
                    Error::last_os("ibv_create_qp")
                        .on(format!("{:?} {:?}", self.qp_type, self.caps))
                })?
            }
        };
        let qpx = if extended.is_some() {
            // SAFETY: a live QP created with send_ops_flags: it has an ibv_qp_ex.
            NonNull::new(unsafe { sys::ibv_qp_to_qp_ex(raw.as_ptr()) })
        } else {
            None
        };
        // The library writes back what it actually allocated.
        // An extended QP posts one SGE per request, whatever the library granted.
        let sge_cap = if extended.is_some() { 1 } else { MAX_SGE as u32 };
        let caps = QpCaps {
            max_send_wr: init.cap.max_send_wr,
            max_recv_wr: init.cap.max_recv_wr,
            max_send_sge: init.cap.max_send_sge.min(sge_cap),
            max_recv_sge: init.cap.max_recv_sge.min(MAX_SGE as u32),
            max_inline_data: init.cap.max_inline_data,
        };
        Ok(QueuePair {
            raw,
            qpx,
            qp_type: self.qp_type,
            caps,
            pd: self.pd.clone(),
            _send_cq: self.send_cq.clone(),
            _recv_cq: self.recv_cq.clone(),
        })
    }
}

impl QueuePairBuilder<'_> {
    /// `ibv_create_qp_ex` with the send operations this QP type can do; `None` (a
    /// classic QP follows) when the provider has no extended QPs. `init` gets the caps
    /// the library granted.
    fn create_extended(&self, init: &mut sys::ibv_qp_init_attr) -> Option<NonNull<sys::ibv_qp>> {
        use sys::ibv_qp_create_send_ops_flags as ops;
        let mut flags = ops::IBV_QP_EX_WITH_SEND.0 | ops::IBV_QP_EX_WITH_SEND_WITH_IMM.0;
        if self.qp_type != QpType::Ud {
            flags |= ops::IBV_QP_EX_WITH_RDMA_WRITE.0 | ops::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM.0;
        }
        if self.qp_type == QpType::Rc {
            flags |= ops::IBV_QP_EX_WITH_RDMA_READ.0
                | ops::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP.0
                | ops::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD.0;
        }
        // SAFETY: ibv_qp_init_attr_ex is plain data; all-zero is valid.
        let mut ex: sys::ibv_qp_init_attr_ex = unsafe { MaybeUninit::zeroed().assume_init() };
        ex.send_cq = init.send_cq;
        ex.recv_cq = init.recv_cq;
        ex.cap = init.cap;
        ex.qp_type = init.qp_type;
        ex.sq_sig_all = init.sq_sig_all;
        ex.pd = self.pd.as_ptr();
        ex.comp_mask = (sys::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD
            | sys::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
            .0;
        ex.send_ops_flags = u64::from(flags);
        // verbs.h's ibv_create_qp_ex, written out: rdma-sys 0.3's copy compares
        // `abi_compat` with u32::MAX where rdma-core marks extended contexts with
        // UINTPTR_MAX, so it never finds create_qp_ex on 64-bit hosts.
        // SAFETY: the PD is live, so its context is.
        let ctx = unsafe { (*self.pd.as_ptr()).context };
        // SAFETY: a live context; abi_compat is a plain pointer-sized field.
        if unsafe { (*ctx).abi_compat } as usize != usize::MAX {
            return None;
        }
        let offset = std::mem::offset_of!(sys::verbs_context, context);
        // SAFETY: an extended context (checked above) is the `context` member of a
        // verbs_context, which starts `offset` bytes before it (verbs.h's container_of).
        let vctx = unsafe { ctx.cast::<u8>().sub(offset).cast::<sys::verbs_context>() };
        // SAFETY: as above; `sz` says how much of the struct this library version has.
        let (sz, create) = unsafe { ((*vctx).sz, (*vctx).create_qp_ex) };
        if sz
            < std::mem::size_of::<sys::verbs_context>()
                - std::mem::offset_of!(sys::verbs_context, create_qp_ex)
        {
            return None;
        }
        // SAFETY: the provider's create_qp_ex on its own live context; `ex` is a valid
        // request whose CQs and PD outlive the QP (it keeps clones of them).
        let raw = unsafe { create?(ctx, &mut ex) };
        let raw = NonNull::new(raw)?;
        init.cap = ex.cap;
        Some(raw)
    }
}

/// A queue pair. It keeps its protection domain and both completion queues alive, so
/// they are destroyed after it whatever the drop order.
pub struct QueuePair {
    raw: NonNull<sys::ibv_qp>,
    /// The extended view when created with [`QueuePairBuilder::extended`].
    qpx: Option<NonNull<sys::ibv_qp_ex>>,
    qp_type: QpType,
    caps: QpCaps,
    pd: ProtectionDomain,
    _send_cq: CompletionQueue,
    _recv_cq: CompletionQueue,
}

// SAFETY: posting and modifying are thread-safe in libibverbs.
unsafe impl Send for QueuePair {}
// SAFETY: as above.
unsafe impl Sync for QueuePair {}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp, destroyed once, before its PD and CQs
        // (held by this struct, dropped after this body).
        let rc = unsafe { sys::ibv_destroy_qp(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_qp failed");
    }
}

/// Flags of one send work request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// Generate a completion.
    pub signaled: bool,
    /// Copy the payload into the work request (no lkey needed; up to `max_inline_data`).
    pub inline: bool,
    /// Set the solicited-event bit (wakes a peer armed with `solicited_only`).
    pub solicited: bool,
    /// Wait for earlier RDMA reads and atomics before starting.
    pub fence: bool,
}

impl SendFlags {
    fn raw(self) -> u32 {
        use sys::ibv_send_flags as f;
        let mut bits = 0;
        if self.signaled {
            bits |= f::IBV_SEND_SIGNALED.0;
        }
        if self.inline {
            bits |= f::IBV_SEND_INLINE.0;
        }
        if self.solicited {
            bits |= f::IBV_SEND_SOLICITED.0;
        }
        if self.fence {
            bits |= f::IBV_SEND_FENCE.0;
        }
        bits
    }
}

/// The operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// Send (consumes a receive at the peer).
    Send,
    /// Send with 32-bit immediate data (host order here).
    SendImm(u32),
    /// RDMA write into the peer's memory.
    Write(RemoteSlice),
    /// RDMA write that also consumes a receive at the peer, carrying immediate data.
    WriteImm(RemoteSlice, u32),
    /// RDMA read from the peer's memory into the local SGEs.
    Read(RemoteSlice),
    /// 64-bit compare-and-swap at an 8-byte-aligned remote address; the old value
    /// lands in the one 8-byte local SGE.
    CompareSwap {
        /// Remote 8 bytes.
        remote: RemoteSlice,
        /// Expected value.
        compare: u64,
        /// New value if it matched.
        swap: u64,
    },
    /// 64-bit fetch-and-add; the old value lands in the one 8-byte local SGE.
    FetchAdd {
        /// Remote 8 bytes.
        remote: RemoteSlice,
        /// Addend.
        add: u64,
    },
}

/// Where a UD send goes.
#[derive(Clone, Copy)]
pub struct UdDest<'a> {
    /// Path to the peer's port.
    pub ah: &'a AddressHandle,
    /// Peer QP number.
    pub remote_qpn: u32,
    /// Peer Q_Key.
    pub remote_qkey: u32,
}

/// One send work request: operation, local SGEs (ranges of registered memory that
/// outlive the request), flags and, on UD, the destination.
#[derive(Clone, Copy)]
pub struct SendRequest<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Local data: the payload, or where read/atomic results land.
    pub local: &'a [LocalSlice<'a>],
    /// Signaled, inline, solicited, fence.
    pub flags: SendFlags,
    /// UD destination (UD QPs only).
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendRequest<'a> {
    /// An unsignaled request; chain `.signaled()`, `.inline()`, `.to(…)`.
    pub fn new(wr_id: u64, op: SendOp, local: &'a [LocalSlice<'a>]) -> Self {
        SendRequest { wr_id, op, local, flags: SendFlags::default(), ud: None }
    }

    /// Ask for a completion.
    pub fn signaled(mut self) -> Self {
        self.flags.signaled = true;
        self
    }

    /// Send the payload inline.
    pub fn inline(mut self) -> Self {
        self.flags.inline = true;
        self
    }

    /// Set the solicited-event bit.
    pub fn solicited(mut self) -> Self {
        self.flags.solicited = true;
        self
    }

    /// UD destination.
    pub fn to(mut self, dest: UdDest<'a>) -> Self {
        self.ud = Some(dest);
        self
    }
}

impl QueuePair {
    /// Queue pair number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: live QP; plain field read.
        unsafe { self.raw.as_ref() }.qp_num
    }

    /// The C handle, for calling rdma-sys directly (microbenchmarks comparing this
    /// layer with raw verbs). Using it is `unsafe`; it is valid while `self` lives.
    pub fn as_raw(&self) -> *mut sys::ibv_qp {
        self.raw.as_ptr()
    }

    /// Transport service.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Queue sizes as the provider allocated them.
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// The domain it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    /// This QP's endpoint for a peer: `lid` and `gid` of the port it uses, our PSN.
    pub fn endpoint(&self, lid: u16, gid: Gid, psn: u32) -> QpEndpoint {
        QpEndpoint { lid, gid, qpn: self.qp_num(), psn: psn & 0xff_ffff }
    }

    fn modify(
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

    fn zeroed_attr(state: sys::ibv_qp_state::Type) -> sys::ibv_qp_attr {
        // SAFETY: ibv_qp_attr is plain data; all-zero is valid.
        let mut attr: sys::ibv_qp_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        attr.qp_state = state;
        attr
    }

    /// RESET → INIT.
    ///
    /// # Errors
    /// `ibv_modify_qp` with its errno (EINVAL for a bad port or a wrong state).
    pub fn to_init(&self, a: &InitAttr) -> Result<(), Error> {
        let mut attr = Self::zeroed_attr(sys::ibv_qp_state::IBV_QPS_INIT);
        attr.port_num = a.port;
        attr.pkey_index = a.pkey_index;
        let mut bits = mask::IBV_QP_STATE.0 | mask::IBV_QP_PKEY_INDEX.0 | mask::IBV_QP_PORT.0;
        if self.qp_type == QpType::Ud {
            attr.qkey = a.qkey;
            bits |= mask::IBV_QP_QKEY.0;
        } else {
            // Only the remote rights matter to a QP; UC cannot grant read or atomics.
            let mut access = a.access.bits()
                & (super::Access::REMOTE_WRITE
                    | super::Access::REMOTE_READ
                    | super::Access::REMOTE_ATOMIC)
                    .bits();
            if self.qp_type == QpType::Uc {
                access &= super::Access::REMOTE_WRITE.bits();
            }
            attr.qp_access_flags = access;
            bits |= mask::IBV_QP_ACCESS_FLAGS.0;
        }
        self.modify(&mut attr, bits, "INIT")
    }

    /// INIT → RTR. On UD only the state changes (`a` may be `None`).
    ///
    /// # Errors
    /// Refused when a connected QP gets no attributes; `ibv_modify_qp` otherwise.
    pub fn to_rtr(&self, a: Option<&RtrAttr>) -> Result<(), Error> {
        let mut attr = Self::zeroed_attr(sys::ibv_qp_state::IBV_QPS_RTR);
        let mut bits = mask::IBV_QP_STATE.0;
        if self.qp_type != QpType::Ud {
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
            if self.qp_type == QpType::Rc {
                attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
                attr.min_rnr_timer = a.min_rnr_timer;
                bits |= mask::IBV_QP_MAX_DEST_RD_ATOMIC.0 | mask::IBV_QP_MIN_RNR_TIMER.0;
            }
        }
        self.modify(&mut attr, bits, "RTR")
    }

    /// RTR → RTS.
    ///
    /// # Errors
    /// `ibv_modify_qp` with its errno.
    pub fn to_rts(&self, a: &RtsAttr) -> Result<(), Error> {
        let mut attr = Self::zeroed_attr(sys::ibv_qp_state::IBV_QPS_RTS);
        attr.sq_psn = a.sq_psn & 0xff_ffff;
        let mut bits = mask::IBV_QP_STATE.0 | mask::IBV_QP_SQ_PSN.0;
        if self.qp_type == QpType::Rc {
            attr.timeout = a.timeout;
            attr.retry_cnt = a.retry_cnt;
            attr.rnr_retry = a.rnr_retry;
            attr.max_rd_atomic = a.max_rd_atomic;
            bits |= mask::IBV_QP_TIMEOUT.0
                | mask::IBV_QP_RETRY_CNT.0
                | mask::IBV_QP_RNR_RETRY.0
                | mask::IBV_QP_MAX_QP_RD_ATOMIC.0;
        }
        self.modify(&mut attr, bits, "RTS")
    }

    /// Moves the QP to ERROR: outstanding work completes with IBV_WC_WR_FLUSH_ERR.
    ///
    /// # Errors
    /// `ibv_modify_qp` with its errno.
    pub fn to_error(&self) -> Result<(), Error> {
        let mut attr = Self::zeroed_attr(sys::ibv_qp_state::IBV_QPS_ERR);
        self.modify(&mut attr, mask::IBV_QP_STATE.0, "ERR")
    }

    /// Applies attributes computed elsewhere (rdma_cm's `rdma_init_qp_attr`).
    pub(crate) fn modify_raw(
        &self,
        attr: &mut sys::ibv_qp_attr,
        bits: i32,
        what: &'static str,
    ) -> Result<(), Error> {
        self.modify(attr, u32::try_from(bits).unwrap_or(0), what)
    }

    /// The current state (`ibv_query_qp(3)`): shows a QP that an error completion
    /// moved to ERROR.
    ///
    /// # Errors
    /// `ibv_query_qp` with its errno.
    pub fn state(&self) -> Result<QpState, Error> {
        let mut attr = Self::zeroed_attr(0);
        // SAFETY: ibv_qp_init_attr is plain data; all-zero is valid.
        let mut init: sys::ibv_qp_init_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        // SAFETY: live QP; both out-structs are valid.
        let rc = unsafe {
            sys::ibv_query_qp(self.raw.as_ptr(), &mut attr, mask::IBV_QP_STATE.0 as i32, &mut init)
        };
        if rc != 0 {
            return Err(Error::from_errno("ibv_query_qp", rc).on(format!("QP {}", self.qp_num())));
        }
        Ok(QpState::from_raw(attr.qp_state))
    }

    /// Checks a request against this QP and turns it into C form. `sges` receives the
    /// scatter list; `wr.sg_list` is left for the caller to point at it.
    fn encode(
        &self,
        r: &SendRequest<'_>,
        sges: &mut [MaybeUninit<sys::ibv_sge>],
    ) -> Result<sys::ibv_send_wr, Error> {
        self.check(r)?;
        for (slice, slot) in r.local.iter().zip(sges.iter_mut()) {
            slot.write(slice.sge());
        }
        self.build_wr(r)
    }

    /// Everything the library would not check, or would check too late: SGE count and
    /// PD, inline size, operation against QP type, atomic shape.
    fn check(&self, r: &SendRequest<'_>) -> Result<(), Error> {
        let refuse =
            |why: String| Error::invalid("ibv_post_send", why).on(format!("QP {}", self.qp_num()));
        if r.local.len() > self.caps.max_send_sge as usize {
            return Err(refuse(format!(
                "{} SGEs, the QP takes {}",
                r.local.len(),
                self.caps.max_send_sge
            )));
        }
        let mut total: u64 = 0;
        for (i, slice) in r.local.iter().enumerate() {
            if !ptr::eq(slice.region().pd().as_ptr(), self.pd.as_ptr()) {
                return Err(refuse(format!(
                    "SGE {i} is in a memory region of another protection domain"
                )));
            }
            total += u64::from(slice.len());
        }
        if r.flags.inline && total > u64::from(self.caps.max_inline_data) {
            return Err(refuse(format!(
                "{total} bytes inline, the QP takes {}",
                self.caps.max_inline_data
            )));
        }
        match (self.qp_type, &r.op, r.ud.is_some()) {
            (QpType::Ud, SendOp::Send | SendOp::SendImm(_), true) => {}
            (QpType::Ud, SendOp::Send | SendOp::SendImm(_), false) => {
                return Err(refuse(
                    "a UD send needs a destination (address handle, QPN, Q_Key)".into(),
                ))
            }
            (QpType::Ud, op, _) => {
                return Err(refuse(format!("{op:?} is not possible on a UD QP")))
            }
            (_, _, true) => return Err(refuse("only UD sends take a destination".into())),
            (
                QpType::Uc,
                SendOp::Read(_) | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. },
                _,
            ) => return Err(refuse("UC QPs do not do RDMA read or atomics".into())),
            _ => {}
        }
        if let SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. } = &r.op {
            check_atomic(r, remote).map_err(refuse)?;
        }
        Ok(())
    }

    /// The C form of a checked request; `sg_list` is left for the caller.
    fn build_wr(&self, r: &SendRequest<'_>) -> Result<sys::ibv_send_wr, Error> {
        use sys::ibv_wr_opcode::*;
        // SAFETY: ibv_send_wr is plain data (null pointers, integers); all-zero is valid.
        let mut wr: sys::ibv_send_wr = unsafe { MaybeUninit::zeroed().assume_init() };
        wr.wr_id = r.wr_id;
        wr.num_sge = r.local.len() as i32;
        wr.send_flags = r.flags.raw();
        let rdma =
            |remote: &RemoteSlice| sys::rdma_t { remote_addr: remote.addr(), rkey: remote.rkey() };
        match r.op {
            SendOp::Send => wr.opcode = IBV_WR_SEND,
            SendOp::SendImm(imm) => {
                wr.opcode = IBV_WR_SEND_WITH_IMM;
                wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
            }
            SendOp::Write(remote) => {
                wr.opcode = IBV_WR_RDMA_WRITE;
                wr.wr.rdma = rdma(&remote);
            }
            SendOp::WriteImm(remote, imm) => {
                wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
                wr.wr.rdma = rdma(&remote);
                wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
            }
            SendOp::Read(remote) => {
                wr.opcode = IBV_WR_RDMA_READ;
                wr.wr.rdma = rdma(&remote);
            }
            SendOp::CompareSwap { remote, compare, swap } => {
                wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
                wr.wr.atomic = sys::atomic_t {
                    remote_addr: remote.addr(),
                    compare_add: compare,
                    swap,
                    rkey: remote.rkey(),
                };
            }
            SendOp::FetchAdd { remote, add } => {
                wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
                wr.wr.atomic = sys::atomic_t {
                    remote_addr: remote.addr(),
                    compare_add: add,
                    swap: 0,
                    rkey: remote.rkey(),
                };
            }
        }
        if let Some(dest) = &r.ud {
            wr.wr.ud = sys::ud_t {
                ah: dest.ah.as_ptr(),
                remote_qpn: dest.remote_qpn,
                remote_qkey: dest.remote_qkey,
            };
        }
        Ok(wr)
    }

    /// Whether this QP posts through the extended send API.
    pub fn is_extended(&self) -> bool {
        self.qpx.is_some()
    }

    /// Posts `requests` between one `ibv_wr_start` and `ibv_wr_complete`, each checked
    /// first (a refused request posts nothing).
    fn post_extended(
        &self,
        qpx: NonNull<sys::ibv_qp_ex>,
        requests: &[SendRequest<'_>],
    ) -> Result<(), Error> {
        for r in requests {
            self.check(r)?;
        }
        let x = qpx.as_ptr();
        // SAFETY: a live extended QP; the provider takes the send queue's lock here
        // and releases it in ibv_wr_complete below, which is always reached.
        unsafe { sys::ibv_wr_start(x) };
        for r in requests {
            let ud = r.ud.as_ref().map(|d| (d.ah.as_ptr(), d.remote_qpn, d.remote_qkey));
            // SAFETY: between wr_start and wr_complete on a live extended QP; every
            // builder called is one this QP type was created with (check() refused the
            // others), and every SGE names a live registered region the request
            // borrows, which outlives the call (inline data is copied before it returns).
            unsafe {
                emit_extended(x, r.wr_id, r.flags, &r.op, ud, r.local.first().map(LocalSlice::sge))
            };
        }
        // SAFETY: closes the wr_start above on the same live QP.
        let rc = unsafe { sys::ibv_wr_complete(x) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_wr_complete", rc).on(format!(
                "QP {}, {} request(s)",
                self.qp_num(),
                requests.len()
            )));
        }
        Ok(())
    }

    /// Posts one send work request (`ibv_post_send(3)`). Nothing is allocated.
    ///
    /// # Errors
    /// Refused before posting: more SGEs than the QP takes, an SGE from another PD,
    /// inline data over `max_inline_data`, an operation the QP type cannot do, a
    /// misaligned or wrongly sized atomic. From the library: ENOMEM when the send
    /// queue is full, EINVAL for a QP not in RTS.
    #[inline]
    pub fn post_send(&self, r: &SendRequest<'_>) -> Result<(), Error> {
        if let Some(qpx) = self.qpx {
            return self.post_extended(qpx, std::slice::from_ref(r));
        }
        let mut sges = [MaybeUninit::<sys::ibv_sge>::uninit(); MAX_SGE];
        let mut wr = self.encode(r, &mut sges)?;
        wr.sg_list = sges.as_mut_ptr().cast();
        // SAFETY: `wr` and the `num_sge` initialised SGEs live across the call; every
        // SGE names a live, registered region (LocalSlice borrows it).
        unsafe { self.post_one(&mut wr) }
    }

    /// `ibv_post_send` of one encoded request, its errno named with the QP.
    ///
    /// # Safety
    /// `wr` is a checked request whose SGE list is valid for the call and names live
    /// registered memory; inline payloads are copied before the call returns.
    #[inline]
    unsafe fn post_one(&self, wr: &mut sys::ibv_send_wr) -> Result<(), Error> {
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: live QP in whatever state (the library checks); the request is as
        // the caller guarantees.
        let rc = unsafe { sys::ibv_post_send(self.raw.as_ptr(), wr, &mut bad) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_post_send", rc).on(format!("QP {}", self.qp_num())));
        }
        Ok(())
    }

    /// Posts every request in `batch` with one `ibv_post_send` call, then empties it.
    ///
    /// # Errors
    /// As [`post_send`](Self::post_send); the message names the first request the
    /// library refused (those before it were posted).
    pub fn post_send_batch(&self, batch: &mut SendBatch<'_>) -> Result<(), Error> {
        if batch.wrs.is_empty() {
            return Ok(());
        }
        if self.qpx.is_some() {
            batch.clear();
            return Err(Error::invalid(
                "ibv_post_send",
                "an extended QP posts lists with post_send_list, not a SendBatch",
            )
            .on(format!("QP {}", self.qp_num())));
        }
        // Link the list now that the vectors no longer move.
        let sge_base = batch.sges.as_mut_ptr();
        for (wr, &first) in batch.wrs.iter_mut().zip(&batch.first_sge) {
            // SAFETY: `first` indexes into `sges`: push added this request's SGEs there.
            wr.sg_list = unsafe { sge_base.add(first) };
        }
        let n = batch.wrs.len();
        let wr_base = batch.wrs.as_mut_ptr();
        for i in 0..n {
            let next = if i + 1 < n {
                // SAFETY: i + 1 < n: inside the vector.
                unsafe { wr_base.add(i + 1) }
            } else {
                ptr::null_mut()
            };
            // SAFETY: i < n: a valid element, reached only through `wr_base` from here on.
            unsafe { (*wr_base.add(i)).next = next };
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: as post_send; the linked list and its SGEs live in `batch`, which
        // outlives the call, and its regions outlive `batch` (lifetime `'a`).
        let rc = unsafe { sys::ibv_post_send(self.raw.as_ptr(), wr_base, &mut bad) };
        let failed_at = if bad.is_null() {
            0
        } else {
            (bad as usize - wr_base as usize) / std::mem::size_of::<sys::ibv_send_wr>()
        };
        batch.clear();
        if rc != 0 {
            return Err(Error::from_errno("ibv_post_send", rc)
                .on(format!("QP {}, request {failed_at} of {n}", self.qp_num())));
        }
        Ok(())
    }

    /// Posts `requests` linked into one list per `ibv_post_send` call (perftest's
    /// `-l`), up to [`MAX_POST_LIST`] at a time, built on the stack: no allocation.
    ///
    /// # Errors
    /// As [`post_send`](Self::post_send), checked for every request before any is
    /// posted; the message names the request the library refused (those before it in
    /// its list were posted).
    pub fn post_send_list(&self, requests: &[SendRequest<'_>]) -> Result<(), Error> {
        const SGES: usize = 4;
        if let Some(qpx) = self.qpx {
            return self.post_extended(qpx, requests);
        }
        for (k, chunk) in requests.chunks(MAX_POST_LIST).enumerate() {
            let mut wrs = [const { MaybeUninit::<sys::ibv_send_wr>::uninit() }; MAX_POST_LIST];
            let mut sges = [[MaybeUninit::<sys::ibv_sge>::uninit(); SGES]; MAX_POST_LIST];
            let n = chunk.len();
            for (i, r) in chunk.iter().enumerate() {
                if r.local.len() > SGES {
                    return Err(Error::invalid(
                        "ibv_post_send",
                        format!(
                            "a listed request takes at most {SGES} SGEs, not {}",
                            r.local.len()
                        ),
                    )
                    .on(format!("QP {}", self.qp_num())));
                }
                let mut wr = self.encode(r, &mut sges[i])?;
                wr.sg_list = sges[i].as_mut_ptr().cast();
                wrs[i].write(wr);
            }
            let base: *mut sys::ibv_send_wr = wrs.as_mut_ptr().cast();
            for i in 0..n {
                let next = if i + 1 < n {
                    // SAFETY: i + 1 < n ≤ MAX_POST_LIST: inside the array.
                    unsafe { base.add(i + 1) }
                } else {
                    ptr::null_mut()
                };
                // SAFETY: i < n: the loop above initialised this element.
                unsafe { (*base.add(i)).next = next };
            }
            let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
            // SAFETY: as post_send: the first `n` requests are initialised and linked,
            // their SGEs live in `sges` across the call, and every SGE names a live
            // registered region (the requests borrow them).
            let rc = unsafe { sys::ibv_post_send(self.raw.as_ptr(), base, &mut bad) };
            if rc != 0 {
                let at = if bad.is_null() {
                    0
                } else {
                    (bad as usize - base as usize) / std::mem::size_of::<sys::ibv_send_wr>()
                };
                return Err(Error::from_errno("ibv_post_send", rc).on(format!(
                    "QP {}, listed request {} of {}",
                    self.qp_num(),
                    k * MAX_POST_LIST + at,
                    requests.len()
                )));
            }
        }
        Ok(())
    }

    /// Posts a receive (`ibv_post_recv(3)`) into `local`. On UD, the first
    /// [`GRH_LEN`] bytes of what arrives are the GRH.
    ///
    /// # Errors
    /// Refused with more SGEs than the QP takes or an SGE of another PD; ENOMEM when
    /// the receive queue is full.
    #[inline]
    pub fn post_recv(&self, wr_id: u64, local: &[LocalSlice<'_>]) -> Result<(), Error> {
        if local.len() > self.caps.max_recv_sge as usize {
            return Err(Error::invalid(
                "ibv_post_recv",
                format!("{} SGEs, the QP takes {}", local.len(), self.caps.max_recv_sge),
            ));
        }
        let mut sges = [MaybeUninit::<sys::ibv_sge>::uninit(); MAX_SGE];
        for (i, (slice, slot)) in local.iter().zip(sges.iter_mut()).enumerate() {
            if !ptr::eq(slice.region().pd().as_ptr(), self.pd.as_ptr()) {
                return Err(Error::invalid(
                    "ibv_post_recv",
                    format!("SGE {i} is in a memory region of another protection domain"),
                ));
            }
            slot.write(slice.sge());
        }
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: sges.as_mut_ptr().cast(),
            num_sge: local.len() as i32,
        };
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: live QP; `wr` and its initialised SGEs live across the call; the
        // regions are live and registered (LocalSlice borrows them). If a region is
        // dropped before the receive completes, deregistration stops the HCA first.
        let rc = unsafe { sys::ibv_post_recv(self.raw.as_ptr(), &mut wr, &mut bad) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_post_recv", rc).on(format!("QP {}", self.qp_num())));
        }
        Ok(())
    }
}

fn check_atomic(r: &SendRequest<'_>, remote: &RemoteSlice) -> Result<(), String> {
    if r.local.len() != 1 || r.local[0].len() != 8 {
        return Err("an atomic needs exactly one 8-byte local SGE for the old value".into());
    }
    if remote.len() != 8 || remote.addr() % 8 != 0 {
        return Err(format!(
            "an atomic targets 8 aligned bytes, not {} at {:#x}",
            remote.len(),
            remote.addr()
        ));
    }
    if r.flags.inline {
        return Err("an atomic cannot be inline".into());
    }
    Ok(())
}

/// Writes one request into an open `ibv_wr_start` … `ibv_wr_complete` span.
///
/// # Safety
/// `x` is a live extended QP between `ibv_wr_start` and `ibv_wr_complete`; `op` is one
/// the QP was created for; `ud` names a live address handle (UD QPs only); `sge` names
/// live registered memory (copied before return when inline).
unsafe fn emit_extended(
    x: *mut sys::ibv_qp_ex,
    wr_id: u64,
    flags: SendFlags,
    op: &SendOp,
    ud: Option<(*mut sys::ibv_ah, u32, u32)>,
    sge: Option<sys::ibv_sge>,
) {
    // SAFETY: the caller's contract covers every call below.
    unsafe {
        (*x).wr_id = wr_id;
        (*x).wr_flags = flags.raw();
        match *op {
            SendOp::Send => sys::ibv_wr_send(x),
            SendOp::SendImm(imm) => sys::ibv_wr_send_imm(x, imm.to_be()),
            SendOp::Write(t) => sys::ibv_wr_rdma_write(x, t.rkey(), t.addr()),
            SendOp::WriteImm(t, imm) => {
                sys::ibv_wr_rdma_write_imm(x, t.rkey(), t.addr(), imm.to_be())
            }
            SendOp::Read(t) => sys::ibv_wr_rdma_read(x, t.rkey(), t.addr()),
            SendOp::CompareSwap { remote, compare, swap } => {
                sys::ibv_wr_atomic_cmp_swp(x, remote.rkey(), remote.addr(), compare, swap)
            }
            SendOp::FetchAdd { remote, add } => {
                sys::ibv_wr_atomic_fetch_add(x, remote.rkey(), remote.addr(), add)
            }
        }
        if let Some((ah, qpn, qkey)) = ud {
            sys::ibv_wr_set_ud_addr(x, ah, qpn, qkey);
        }
        // An extended QP takes at most one SGE (check() refused more).
        match (flags.inline, sge) {
            (true, Some(sge)) => {
                sys::ibv_wr_set_inline_data(x, sge.addr as *mut _, sge.length as usize)
            }
            (false, Some(sge)) => sys::ibv_wr_set_sge(x, sge.lkey, sge.addr, sge.length),
            (_, None) => sys::ibv_wr_set_sge_list(x, 0, ptr::null()),
        }
    }
}

/// A send request checked and encoded once, then posted again and again with only
/// its id changing: what a latency loop does (perftest keeps one `ibv_send_wr` and
/// changes nothing but `wr_id`). Made by [`QueuePair::prepare_send`] for one QP and at
/// most one SGE, on connected QPs.
pub struct PreparedSend {
    qp: NonNull<sys::ibv_qp>,
    region: Option<NonNull<sys::ibv_mr>>,
    wr: sys::ibv_send_wr,
    sge: sys::ibv_sge,
    flags: SendFlags,
    op: SendOp,
}

// SAFETY: plain data; the pointers are identities (QP, region) checked on each post
// and addresses the adapter reads, never dereferenced by Rust.
unsafe impl Send for PreparedSend {}

impl QueuePair {
    /// Checks and encodes `r` once, for [`post_prepared`](Self::post_prepared).
    ///
    /// # Errors
    /// As [`post_send`](Self::post_send)'s checks; also refused for UD destinations
    /// and for more than one SGE.
    pub fn prepare_send(&self, r: &SendRequest<'_>) -> Result<PreparedSend, Error> {
        self.check(r)?;
        if r.ud.is_some() || r.local.len() > 1 {
            return Err(Error::invalid(
                "ibv_post_send",
                "a prepared request has at most one SGE and no UD destination",
            ));
        }
        let mut wr = self.build_wr(r)?;
        let sge =
            r.local.first().map_or(sys::ibv_sge { addr: 0, length: 0, lkey: 0 }, LocalSlice::sge);
        wr.sg_list = ptr::null_mut();
        Ok(PreparedSend {
            qp: self.raw,
            region: r.local.first().map(|l| l.region().raw()),
            wr,
            sge,
            flags: r.flags,
            op: r.op,
        })
    }

    /// Posts a prepared request again under id `wr_id`, asking for a completion or not
    /// (`signaled`: latency loops signal one request in several). `region` is the
    /// region its SGE names, borrowed for the call as any post borrows its SGEs.
    ///
    /// # Errors
    /// Refused when `p` was prepared on another QP or over another region; from the
    /// library as [`post_send`](Self::post_send).
    #[inline]
    pub fn post_prepared(
        &self,
        p: &mut PreparedSend,
        region: &MemoryRegion,
        wr_id: u64,
        signaled: bool,
    ) -> Result<(), Error> {
        if p.qp != self.raw || p.region.is_some_and(|r| r != region.raw()) {
            return Err(Error::invalid(
                "ibv_post_send",
                "a prepared request posted on another QP or region than it was made for",
            ));
        }
        let flags = SendFlags { signaled, ..p.flags };
        if let Some(qpx) = self.qpx {
            let x = qpx.as_ptr();
            let sge = p.region.map(|_| p.sge);
            // SAFETY: a live extended QP; wr_start/complete bracket one request that
            // check() accepted for this QP when it was prepared; its SGE names `region`,
            // live and borrowed across the call (the identity was checked above).
            let rc = unsafe {
                sys::ibv_wr_start(x);
                emit_extended(x, wr_id, flags, &p.op, None, sge);
                sys::ibv_wr_complete(x)
            };
            if rc != 0 {
                return Err(
                    Error::from_errno("ibv_wr_complete", rc).on(format!("QP {}", self.qp_num()))
                );
            }
            return Ok(());
        }
        p.wr.wr_id = wr_id;
        p.wr.send_flags = flags.raw();
        p.wr.next = ptr::null_mut();
        p.wr.sg_list = if p.region.is_some() { &mut p.sge } else { ptr::null_mut() };
        // SAFETY: checked when prepared; `p.wr` and its one SGE live across the call;
        // the SGE names `region`, live and borrowed (identity checked above).
        unsafe { self.post_one(&mut p.wr) }
    }
}

/// Several send work requests posted with one call. Reuse it: after warm-up, pushing
/// and posting allocate nothing.
pub struct SendBatch<'a> {
    wrs: Vec<sys::ibv_send_wr>,
    sges: Vec<sys::ibv_sge>,
    first_sge: Vec<usize>,
    _regions: PhantomData<&'a MemoryRegion>,
}

impl<'a> SendBatch<'a> {
    /// Room for `requests` requests of one SGE each before growing.
    pub fn with_capacity(requests: usize) -> Self {
        SendBatch {
            wrs: Vec::with_capacity(requests),
            sges: Vec::with_capacity(requests),
            first_sge: Vec::with_capacity(requests),
            _regions: PhantomData,
        }
    }

    /// Checks `r` against `qp` and appends it.
    ///
    /// # Errors
    /// The refusals of [`QueuePair::post_send`].
    pub fn push(&mut self, qp: &QueuePair, r: &SendRequest<'a>) -> Result<(), Error> {
        let mut sges = [MaybeUninit::<sys::ibv_sge>::uninit(); MAX_SGE];
        let wr = qp.encode(r, &mut sges)?;
        self.first_sge.push(self.sges.len());
        for sge in &sges[..r.local.len()] {
            // SAFETY: encode initialised the first `local.len()` entries.
            self.sges.push(unsafe { sge.assume_init() });
        }
        self.wrs.push(wr);
        Ok(())
    }

    /// Number of requests waiting.
    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    /// Whether none is waiting.
    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }

    /// Drops the waiting requests, keeping the storage.
    pub fn clear(&mut self) {
        self.wrs.clear();
        self.sges.clear();
        self.first_sge.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_sizes_and_codes() {
        assert_eq!(Mtu::from_bytes(1024), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::Mtu4096.bytes(), 4096);
        assert_eq!(Mtu::from_code(3), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::from_code(5), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::from_bytes(1500), None);
        assert_eq!(Mtu::from_code(0), None);
        assert_eq!(Mtu::from_code(40), None);
    }

    #[test]
    fn address_vector_routes_by_gid_only_when_asked() {
        let peer = QpEndpoint { lid: 7, gid: Gid([9; 16]), qpn: 5, psn: 1 };
        let by_lid = AddressVector::to_peer(&peer, 1, None).raw();
        assert_eq!((by_lid.dlid, by_lid.is_global, by_lid.port_num), (7, 0, 1));
        let by_gid = AddressVector::to_peer(&peer, 1, Some(3)).raw();
        assert_eq!(by_gid.is_global, 1);
        assert_eq!(by_gid.grh.sgid_index, 3);
        // SAFETY: reading the raw bytes of a GID union we just wrote.
        assert_eq!(unsafe { by_gid.grh.dgid.raw }, [9; 16]);
    }

    #[test]
    fn send_flags_map_to_verbs_bits() {
        let f = SendFlags { signaled: true, inline: true, solicited: false, fence: false };
        assert_eq!(f.raw(), 2 | 8);
        assert_eq!(SendFlags::default().raw(), 0);
    }
}
