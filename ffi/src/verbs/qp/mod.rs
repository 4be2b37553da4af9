//! `ibv_create_qp(3)`, `ibv_modify_qp(3)` and posting: queue pairs for RC, UC and UD,
//! in two kinds.
//!
//! - [`BasicQueuePair`] posts through `ibv_post_send(3)`: any number of SGEs up to the
//!   queue's limit, linked lists ([`QueuePair::post_send_list`]) and reusable
//!   [`SendBatch`]es.
//! - [`ExtendedQueuePair`] posts through the extended send API (`ibv_wr_start`,
//!   `ibv_wr_rdma_write`, …, `ibv_wr_complete`; `ibv_wr_post(3)`), as perftest does by
//!   default: the provider writes each request straight into its queue. One SGE per
//!   request.
//!
//! What both kinds do — state changes, queries, receives, single and listed sends,
//! prepared sends — is the [`QueuePair`] trait; what only one kind does is a method of
//! that kind alone, so no post checks at run time which API its QP has.
//! [`GenericQueuePair`] holds either kind, chosen once at set-up.

mod basic;
mod bound;
mod builder;
mod common;
mod emit;
mod extended;
mod generic;
mod prepared;
mod receive;
mod request;

use std::mem::MaybeUninit;

use super::sys;
use crate::types::{Gid, QpEndpoint};

pub use basic::{BasicQueuePair, SendBatch};
pub use bound::BoundSend;
pub use builder::{ExtendedQpError, QueuePairBuilder};
pub use common::QueuePair;
pub use extended::ExtendedQueuePair;
pub use generic::GenericQueuePair;
pub use prepared::PreparedSend;
pub use receive::PreparedRecv;
pub use request::{SendFlags, SendOp, SendRequest, UdDest};

/// Most scatter/gather entries one work request may carry through this layer.
pub const MAX_SGE: usize = 32;

/// Requests [`BasicQueuePair`]'s [`post_send_list`](QueuePair::post_send_list) links into one
/// `ibv_post_send` call.
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

    /// The `enum ibv_mtu` code (1 for 256 … 5 for 4096).
    pub fn code(self) -> u32 {
        self as u32
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

/// How a path's packets are classed: the service level (InfiniBand's virtual lane, a
/// VLAN priority on RoCE where the driver maps it) and, in the GRH, the traffic class
/// (RoCE v2: the IP header's DSCP and ECN) and flow label.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathClass {
    /// Service level, 0-15.
    pub sl: u8,
    /// Traffic class (GRH).
    pub traffic_class: u8,
    /// Flow label, 20 bits (GRH).
    pub flow_label: u32,
}

impl AddressVector {
    /// This path with `class`'s service level and, where it has a GRH, its traffic
    /// class and flow label. Returns None when the class needs a GRH this path lacks
    /// (InfiniBand routed by LID alone).
    pub fn with_class(mut self, class: PathClass) -> Option<Self> {
        self.sl = class.sl;
        match &mut self.grh {
            Some(g) => {
                g.traffic_class = class.traffic_class;
                g.flow_label = class.flow_label;
            }
            None if class.traffic_class != 0 || class.flow_label != 0 => return None,
            None => {}
        }
        Some(self)
    }

    /// The class of this path.
    pub fn class(&self) -> PathClass {
        PathClass {
            sl: self.sl,
            traffic_class: self.grh.map_or(0, |g| g.traffic_class),
            flow_label: self.grh.map_or(0, |g| g.flow_label),
        }
    }

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
    fn a_path_class_rides_in_the_grh_where_there_is_one() {
        let peer = QpEndpoint { lid: 7, gid: Gid([9; 16]), qpn: 5, psn: 1 };
        let class = PathClass { sl: 3, traffic_class: 96, flow_label: 0x12345 };
        let routed = AddressVector::to_peer(&peer, 1, Some(0)).with_class(class).unwrap();
        assert_eq!(routed.class(), class);
        let raw = routed.raw();
        assert_eq!((raw.sl, raw.grh.traffic_class, raw.grh.flow_label), (3, 96, 0x12345));
        // By LID alone: the service level applies, a traffic class has nowhere to go.
        let sl_only = PathClass { sl: 5, ..PathClass::default() };
        let by_lid = AddressVector::to_peer(&peer, 1, None).with_class(sl_only).unwrap();
        assert_eq!(by_lid.raw().sl, 5);
        assert!(AddressVector::to_peer(&peer, 1, None).with_class(class).is_none());
    }
}
