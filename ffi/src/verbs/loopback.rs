//! Two queue pairs of one device connected to each other in one process: the set-up
//! every microbenchmark and lab test starts from. Built only from the safe wrappers.

use super::{
    Access, AddressHandle, AddressVector, BasicQueuePair, CompletionChannel, CompletionQueue,
    Context, DeviceList, Error, ExtendedQueuePair, InitAttr, MemoryRegion, Mtu, ProtectionDomain,
    QpCaps, QpEndpoint, QpType, QueuePair, QueuePairBuilder, RtrAttr, RtsAttr,
};

/// How to build a [`Loopback`].
#[derive(Clone, Debug)]
pub struct LoopbackConfig {
    /// Device name; `None` takes the first device.
    pub device: Option<String>,
    /// Port (1-based).
    pub port: u8,
    /// GID index; `None` picks one ([`Context::pick_gid_index`]).
    pub gid_index: Option<u8>,
    /// Transport service of both QPs.
    pub qp_type: QpType,
    /// Bytes of registered memory on each side (all access rights).
    pub buf_len: usize,
    /// Queue sizes of both QPs.
    pub caps: QpCaps,
    /// CQ entries per side.
    pub cq_entries: u32,
    /// Give each CQ a completion channel (event mode).
    pub event_mode: bool,
    /// RTS parameters (retry counts, timeout); PSNs are set per side.
    pub rts: RtsAttr,
}

impl Default for LoopbackConfig {
    fn default() -> Self {
        LoopbackConfig {
            device: std::env::var("RDMABENCH_DEVICE").ok(),
            port: 1,
            gid_index: None,
            qp_type: QpType::Rc,
            buf_len: 4096,
            caps: QpCaps::default(),
            cq_entries: 256,
            event_mode: false,
            rts: RtsAttr::new(0),
        }
    }
}

/// One side of a [`Loopback`]: its CQ (send and receive), QP and buffer.
pub struct Side<Q = BasicQueuePair> {
    /// Completion queue for both directions of this QP.
    pub cq: CompletionQueue,
    /// The queue pair.
    pub qp: Q,
    /// Registered buffer, every access right.
    pub mr: MemoryRegion,
    /// How the other side reaches this one.
    pub endpoint: QpEndpoint,
}

/// Two connected QPs (RC/UC: RTS toward each other; UD: RTS, with address handles),
/// both basic ([`Loopback::new`]) or both extended ([`Loopback::new_extended`]).
pub struct Loopback<Q = BasicQueuePair> {
    /// Device context.
    pub context: Context,
    /// Shared protection domain.
    pub pd: ProtectionDomain,
    /// GID index used (None: routed by LID).
    pub gid_index: Option<u8>,
    /// Path MTU (the port's active MTU).
    pub mtu: Mtu,
    /// First side.
    pub a: Side<Q>,
    /// Second side.
    pub b: Side<Q>,
    /// UD only: the address handle both sides use (same port).
    pub ah: Option<AddressHandle>,
}

impl Loopback<BasicQueuePair> {
    /// Opens the device and builds and connects both sides, with basic QPs.
    ///
    /// # Errors
    /// Any verb that fails on the way, or a missing device (ENODEV).
    pub fn new(cfg: &LoopbackConfig) -> Result<Self, Error> {
        Self::with(cfg, |b| b.build())
    }
}

impl Loopback<ExtendedQueuePair> {
    /// Opens the device and builds and connects both sides, with extended QPs
    /// ([`QueuePairBuilder::build_extended`]).
    ///
    /// # Errors
    /// As [`Loopback::new`]; refused when the device makes no extended QP of this
    /// configuration (no provider support, or `caps.max_send_sge` over 1).
    pub fn new_extended(cfg: &LoopbackConfig) -> Result<Self, Error> {
        Self::with(cfg, |b| Ok(b.build_extended()?))
    }
}

impl<Q: QueuePair> Loopback<Q> {
    fn with(
        cfg: &LoopbackConfig,
        build: impl Fn(QueuePairBuilder<'_>) -> Result<Q, Error>,
    ) -> Result<Self, Error> {
        let list = DeviceList::new()?;
        let device = match &cfg.device {
            Some(name) => list.find(name),
            None => list.get(0),
        }
        .ok_or_else(|| {
            Error::from_errno("ibv_open_device", libc::ENODEV)
                .on(cfg.device.clone().unwrap_or_else(|| "any".into()))
        })?;
        let context = device.open()?;
        let port = context.query_port(cfg.port)?;
        let gid_index = match cfg.gid_index {
            Some(i) => Some(i),
            None => context.pick_gid_index(cfg.port, None)?,
        };
        let gid = match gid_index {
            Some(i) => context.query_gid(cfg.port, u32::from(i))?,
            None => Default::default(),
        };
        let mtu = Mtu::from_code(port.active_mtu).unwrap_or(Mtu::Mtu1024);
        let pd = context.alloc_pd()?;
        let side = |psn: u32| -> Result<Side<Q>, Error> {
            let channel: Option<CompletionChannel> =
                if cfg.event_mode { Some(context.create_comp_channel()?) } else { None };
            let cq = context.create_cq(cfg.cq_entries, channel.as_ref())?;
            let qp = build(pd.create_qp(cfg.qp_type, &cq, &cq).caps(cfg.caps))?;
            qp.to_init(&InitAttr::new(cfg.port))?;
            let mr = pd.reg_mr(cfg.buf_len, Access::ALL)?;
            let endpoint = qp.endpoint(port.lid, gid, psn);
            Ok(Side { cq, qp, mr, endpoint })
        };
        let a = side(0x1234)?;
        let b = side(0x5678)?;
        let mut ah = None;
        if cfg.qp_type == QpType::Ud {
            for s in [&a, &b] {
                s.qp.to_rtr(None)?;
                s.qp.to_rts(&RtsAttr { sq_psn: s.endpoint.psn, ..cfg.rts })?;
            }
            ah = Some(pd.create_ah(&AddressVector::to_peer(&b.endpoint, cfg.port, gid_index))?);
        } else {
            for (me, peer) in [(&a, &b), (&b, &a)] {
                let av = AddressVector::to_peer(&peer.endpoint, cfg.port, gid_index);
                me.qp.to_rtr(Some(&RtrAttr::new(&peer.endpoint, av, mtu)))?;
                me.qp.to_rts(&RtsAttr { sq_psn: me.endpoint.psn, ..cfg.rts })?;
            }
        }
        Ok(Loopback { context, pd, gid_index, mtu, a, b, ah })
    }
}
