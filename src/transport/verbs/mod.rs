//! [`Transport`] over Linux verbs (`ffi::verbs`): RC, UC and UD queue pairs, one CQ
//! per connection, one registered buffer. This file opens the device and connects;
//! [`connection`] is the connected queue pair the loops post and poll.

mod connection;

pub use connection::VerbsConnection;

use std::net::Ipv4Addr;
use std::time::Duration;

use ffi::verbs::{
    Access, AddressHandle, AddressVector, CmConnection, CompletionQueue, ConnectRequest, Context,
    DeviceList, Error as VerbsError, GenericQueuePair, InitAttr, MemoryRegion, Mtu, PathClass,
    ProtectionDomain, QpCaps, QpEndpoint, QpType, QueuePair, RemoteBuffer, ResolvedRoute, RtrAttr,
    RtsAttr, SharedReceiveQueue, GRH_LEN,
};
use serde::{Deserialize, Serialize};

use super::{Capabilities, ConnectionConfig, Service, Transport, TransportError};

impl From<VerbsError> for TransportError {
    fn from(e: VerbsError) -> Self {
        TransportError::Verbs(e)
    }
}

/// Where to open the adapter.
#[derive(Clone, Debug, Default)]
pub struct VerbsOptions {
    /// Device (`-d`); `None` takes the first.
    pub device: Option<String>,
    /// Port (`-i`), 1-based.
    pub port: u8,
    /// GID index (`-x`); `None` picks as [`Context::pick_gid_index`] does.
    pub gid_index: Option<u8>,
    /// The local IPv4 address used to reach the peer: the GID holding it is preferred.
    pub local_ipv4: Option<Ipv4Addr>,
    /// Path MTU (`-m`); `None` uses the port's active MTU.
    pub mtu: Option<Mtu>,
    /// Outstanding RDMA reads/atomics (`-o`); `None`: the device's maximum, at most 16.
    pub max_rd_atomic: Option<u32>,
    /// RC ACK timeout exponent (`-u`).
    pub qp_timeout: u8,
    /// RC retries (`--retry_count`).
    pub retry_count: u8,
    /// Service level, traffic class, flow label (`-S`, `--tclass`, `--flow_label`).
    pub class: PathClass,
    /// Register buffers for on-demand paging (`--odp`), which the device must offer
    /// for this transport and these operations.
    pub odp: Option<OdpNeed>,
    /// Buffers in huge pages (`--use_hugepages`).
    pub hugepages: bool,
    /// Every connection takes receives from one shared receive queue of this many
    /// entries (`--use-srq`).
    pub shared_receives: Option<u32>,
}

/// What `--odp` needs of the device: on-demand paging for `service`'s queue pairs,
/// covering `ops` (`IBV_ODP_SUPPORT_*` bits: send 1, receive 2, write 4, read 8,
/// atomic 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OdpNeed {
    /// RC, UC or UD.
    pub service: Service,
    /// The operations the buffers serve.
    pub ops: u32,
}

/// The system's default huge page (`Hugepagesize` in /proc/meminfo; 2 MiB, x86's,
/// where it is not said).
fn huge_page_size() -> usize {
    crate::facts::system::meminfo("Hugepagesize").map_or(2 << 20, |kib| (kib as usize) << 10)
}

/// Whether `context` pages memory on demand for `need`; the refusal names what lacks.
fn check_odp(context: &Context, need: OdpNeed) -> Result<(), TransportError> {
    let caps = context.odp_caps()?;
    let name = context.name();
    if !caps.supported {
        return Err(TransportError::Unsupported(format!(
            "--odp: {name} has no on-demand paging (ibv_query_device_ex: no IBV_ODP_SUPPORT)"
        )));
    }
    let have = match need.service {
        Service::Rc => caps.rc,
        Service::Uc => caps.uc,
        Service::Ud => caps.ud,
    };
    if have & need.ops != need.ops {
        return Err(TransportError::Unsupported(format!(
            "--odp: {name}'s on-demand paging for {} covers operations {have:#x}, this test needs {:#x} \
             (send 1, receive 2, write 4, read 8, atomic 16)",
            need.service.name(),
            need.ops
        )));
    }
    Ok(())
}

/// An opened verbs device and port.
pub struct VerbsTransport {
    context: Context,
    pd: ProtectionDomain,
    port: u8,
    gid_index: Option<u8>,
    local: QpEndpoint,
    qp_timeout: u8,
    retry_count: u8,
    class: PathClass,
    /// How buffers are registered (with `ON_DEMAND` under `--odp`).
    access: Access,
    /// Buffers in huge pages of this size (`--use_hugepages`).
    huge_page: Option<usize>,
    /// The one receive queue of every connection (`--use-srq`).
    srq: Option<SharedReceiveQueue>,
    mtu: Mtu,
    /// Why `mtu` is not the port's active MTU, when a device erratum lowered it.
    mtu_erratum: Option<&'static str>,
    caps: Capabilities,
    max_qp_rd_atom: u8,
}

/// ConnectX-3 and ConnectX-3 Pro (mlx4 parts 4099, 4100, 4103, 4104) have a hardware
/// erratum at a 4096 B MTU; perftest forces such a port's active 4096 to 2048 unless
/// `-m` asks otherwise, and so does rdmabench. Returns the MTU to use, and why when it
/// is not `active`.
pub fn mtu_for(part: u32, active: Mtu, asked: Option<Mtu>) -> (Mtu, Option<&'static str>) {
    match asked {
        Some(m) => (m, None),
        None if active == Mtu::Mtu4096 && matches!(part, 4099 | 4100 | 4103 | 4104) => (
            Mtu::Mtu2048,
            Some("MTU 2048: ConnectX-3's 4096 B MTU has a hardware erratum (perftest forces 2048 too; -m 4096 overrides)"),
        ),
        None => (active, None),
    }
}

/// The exchange record of a verbs connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerbsEndpoint {
    /// Queue pair address.
    pub qp: QpEndpoint,
    /// The buffer the peer may target.
    pub buffer: RemoteBuffer,
    /// Service, so a mismatch is refused instead of hanging.
    pub service: Service,
}

/// A connection's resources before the peer is known.
pub struct VerbsPrepared {
    cq: CompletionQueue,
    qp: GenericQueuePair,
    mr: MemoryRegion,
    local: VerbsEndpoint,
    events: bool,
}

impl VerbsTransport {
    /// Opens the device and port.
    ///
    /// # Errors
    /// No such device (the message lists the ones there are), or a query failing.
    pub fn open(opts: &VerbsOptions) -> Result<Self, TransportError> {
        // No device list at all: a kernel or library without RDMA.
        let list = DeviceList::new().map_err(|e| TransportError::NoDevice(e.to_string()))?;
        let device = match &opts.device {
            Some(name) => list.find(name).ok_or_else(|| {
                let have: Vec<String> = list.iter().map(|d| d.name()).collect();
                TransportError::NoDevice(format!(
                    "no RDMA device named '{name}' (found: {})",
                    have.join(", ")
                ))
            })?,
            None => list
                .get(0)
                .ok_or_else(|| TransportError::NoDevice("no RDMA device found".into()))?,
        };
        let context = device.open()?;
        if let Some(need) = opts.odp {
            check_odp(&context, need)?;
        }
        let dev = context.query_device()?;
        let port_attr = context.query_port(opts.port)?;
        let gid_index = match opts.gid_index {
            Some(i) => Some(i),
            None => context.pick_gid_index(opts.port, opts.local_ipv4)?,
        };
        let gid = match gid_index {
            Some(i) => context.query_gid(opts.port, u32::from(i))?,
            None => Default::default(),
        };
        let active = Mtu::from_code(port_attr.active_mtu).unwrap_or(Mtu::Mtu1024);
        let (mtu, mtu_erratum) = mtu_for(dev.vendor_part_id, active, opts.mtu);
        let caps = Capabilities {
            backend: "verbs",
            send: true,
            rdma_write: true,
            rdma_read: true,
            atomics: dev.atomic_cap != 0,
            immediate: true,
            max_inline: 0, // known per QP once created; see Connection::capabilities
            max_message: u64::from(port_attr.max_msg_sz),
            recv_overhead: 0,
            events: true,
        };
        let pd = context.alloc_pd()?;
        let srq = opts
            .shared_receives
            .map(|depth| pd.create_srq(depth, 1))
            .transpose()
            .map_err(|e| TransportError::Unsupported(format!("--use-srq: {e}")))?;
        Ok(VerbsTransport {
            local: QpEndpoint { lid: port_attr.lid, gid, qpn: 0, psn: 0 },
            context,
            pd,
            qp_timeout: opts.qp_timeout,
            retry_count: opts.retry_count,
            class: opts.class,
            access: if opts.odp.is_some() { Access::ALL | Access::ON_DEMAND } else { Access::ALL },
            huge_page: opts.hugepages.then(huge_page_size),
            srq,
            port: opts.port,
            gid_index,
            mtu,
            mtu_erratum,
            caps,
            max_qp_rd_atom: {
                let device_max = u32::try_from(dev.max_qp_rd_atom.clamp(1, 255)).unwrap_or(1);
                let wanted = opts.max_rd_atomic.unwrap_or(16).clamp(1, device_max);
                u8::try_from(wanted).unwrap_or(16)
            },
        })
    }

    /// The GID index in use (`None`: routed by LID).
    pub fn gid_index(&self) -> Option<u8> {
        self.gid_index
    }

    /// Path MTU in use.
    pub fn mtu(&self) -> Mtu {
        self.mtu
    }

    /// Why the MTU in use is lower than the port's, when a device erratum made it so.
    pub fn mtu_erratum(&self) -> Option<&'static str> {
        self.mtu_erratum
    }

    /// The device context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The class set on every path (`-S`, `--tclass`, `--flow_label`).
    pub fn class(&self) -> PathClass {
        self.class
    }

    /// Outstanding RDMA reads/atomics each QP allows.
    pub fn max_rd_atomic(&self) -> u8 {
        self.max_qp_rd_atom
    }

    /// Connects like [`Transport::connect`] with an agreed path MTU (both sides use
    /// the smaller of their two).
    ///
    /// # Errors
    /// As [`Transport::connect`].
    pub fn connect_with_mtu(
        &self,
        p: VerbsPrepared,
        peer: &VerbsEndpoint,
        mtu: Mtu,
    ) -> Result<VerbsConnection, TransportError> {
        self.connect_to(p, peer, mtu, self.max_qp_rd_atom)
    }

    /// Connects like [`Self::connect_with_mtu`] to a peer that said how many reads it
    /// answers at once (perftest's `out_reads`): this side keeps no more in flight.
    ///
    /// # Errors
    /// As [`Transport::connect`].
    pub fn connect_with_peer_reads(
        &self,
        p: VerbsPrepared,
        peer: &VerbsEndpoint,
        mtu: Mtu,
        peer_reads: u16,
    ) -> Result<VerbsConnection, TransportError> {
        let reads = u8::try_from(peer_reads).unwrap_or(u8::MAX).clamp(1, self.max_qp_rd_atom);
        self.connect_to(p, peer, mtu, reads)
    }

    /// `initiator_depth`: RDMA reads and atomics this side keeps in flight.
    fn connect_to(
        &self,
        p: VerbsPrepared,
        peer: &VerbsEndpoint,
        mtu: Mtu,
        initiator_depth: u8,
    ) -> Result<VerbsConnection, TransportError> {
        if peer.service != p.local.service {
            return Err(TransportError::Unsupported(format!(
                "connection type mismatch: this side uses {:?}, the peer {:?}",
                p.local.service, peer.service
            )));
        }
        let av = AddressVector::to_peer(&peer.qp, self.port, self.gid_index)
            .with_class(self.class)
            .ok_or_else(|| {
                TransportError::Unsupported(
                    "--tclass and --flow_label travel in the GRH, and this path has none \
                     (InfiniBand routed by LID: give -x)"
                        .into(),
                )
            })?;
        let mut ah = None;
        if p.local.service == Service::Ud {
            p.qp.to_rtr(None)?;
            ah = Some(self.pd.create_ah(&av)?);
        } else {
            let rtr = RtrAttr {
                max_dest_rd_atomic: self.max_qp_rd_atom,
                ..RtrAttr::new(&peer.qp, av, mtu)
            };
            p.qp.to_rtr(Some(&rtr))?;
        }
        let rts = RtsAttr {
            max_rd_atomic: initiator_depth,
            timeout: self.qp_timeout,
            retry_cnt: self.retry_count,
            ..RtsAttr::new(p.local.qp.psn)
        };
        p.qp.to_rts(&rts)?;
        Ok(self.finish(p, peer.buffer, peer.qp.qpn, ah, None, mtu))
    }

    /// Client side of `-R`: connects the prepared QP through rdma_cm.
    ///
    /// # Errors
    /// A rejected or unreachable peer, a timeout, a failed transition.
    pub fn connect_cm_client(
        &self,
        p: VerbsPrepared,
        route: ResolvedRoute,
        remote: RemoteBuffer,
        timeout: Duration,
    ) -> Result<VerbsConnection, TransportError> {
        let cm = route.connect(&p.qp, &[], timeout)?;
        Ok(self.finish(p, remote, 0, None, Some(cm), self.mtu))
    }

    /// Server side of `-R`: accepts a connection request with the prepared QP.
    ///
    /// # Errors
    /// A failed transition or accept, or no ESTABLISHED within `timeout`.
    pub fn accept_cm(
        &self,
        p: VerbsPrepared,
        request: ConnectRequest,
        remote: RemoteBuffer,
        timeout: Duration,
    ) -> Result<VerbsConnection, TransportError> {
        let cm = request.accept(&p.qp, &[], timeout)?;
        Ok(self.finish(p, remote, 0, None, Some(cm), self.mtu))
    }

    fn finish(
        &self,
        p: VerbsPrepared,
        remote: RemoteBuffer,
        remote_qpn: u32,
        ah: Option<AddressHandle>,
        cm: Option<CmConnection>,
        mtu: Mtu,
    ) -> VerbsConnection {
        let mut caps = self.caps.clone();
        caps.max_inline = p.qp.caps().max_inline_data;
        match p.local.service {
            Service::Rc => {}
            Service::Uc => {
                caps.rdma_read = false;
                caps.atomics = false;
            }
            Service::Ud => {
                caps.rdma_read = false;
                caps.rdma_write = false;
                caps.atomics = false;
                caps.max_message = u64::from(mtu.bytes());
                caps.recv_overhead = GRH_LEN as u32;
            }
        }
        caps.events = p.events;
        VerbsConnection { remote, remote_qpn, ah, caps, cq: p.cq, qp: p.qp, mr: p.mr, _cm: cm }
    }
}

fn qp_type(service: Service) -> QpType {
    match service {
        Service::Rc => QpType::Rc,
        Service::Uc => QpType::Uc,
        Service::Ud => QpType::Ud,
    }
}

/// A PSN that differs between connections and runs, as perftest draws one.
fn fresh_psn() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos ^ std::process::id().rotate_left(12)) & 0xff_ffff
}

impl Transport for VerbsTransport {
    type Prepared = VerbsPrepared;
    type Connection = VerbsConnection;
    type Endpoint = VerbsEndpoint;

    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    fn prepare(
        &self,
        cfg: &ConnectionConfig,
    ) -> Result<(VerbsPrepared, VerbsEndpoint), TransportError> {
        let channel = if cfg.events { Some(self.context.create_comp_channel()?) } else { None };
        let cq = self.context.create_cq(cfg.tx_depth + cfg.rx_depth, channel.as_ref())?;
        let caps = QpCaps {
            max_send_wr: cfg.tx_depth,
            max_recv_wr: cfg.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: cfg.max_inline,
        };
        // The extended send API where the provider has it, as perftest: cheaper per post.
        // Chosen once here; each post matches the kind.
        let builder = self.pd.create_qp(qp_type(cfg.service), &cq, &cq).caps(caps);
        let qp = match &self.srq {
            Some(srq) => builder.srq(srq),
            None => builder,
        }
        .build_extended_or_basic()?;
        qp.to_init(&InitAttr::new(self.port))?;
        let extra = if cfg.service == Service::Ud { GRH_LEN } else { 0 };
        let len = cfg.buf_len + extra;
        let mr = match self.huge_page {
            None => self.pd.reg_mr(len, self.access)?,
            Some(page) => self.pd.reg_mr_huge(len, self.access, page).map_err(|e| {
                TransportError::Unsupported(format!(
                    "--use_hugepages: {e}: reserve huge pages (sysctl vm.nr_hugepages; \
                     {} KiB each, {} free now)",
                    page >> 10,
                    crate::facts::system::meminfo("HugePages_Free").unwrap_or(0)
                ))
            })?,
        };
        let local = VerbsEndpoint {
            qp: qp.endpoint(self.local.lid, self.local.gid, fresh_psn()),
            buffer: mr.remote(),
            service: cfg.service,
        };
        Ok((VerbsPrepared { cq, qp, mr, local: local.clone(), events: cfg.events }, local))
    }

    fn connect(
        &self,
        p: VerbsPrepared,
        peer: &VerbsEndpoint,
    ) -> Result<VerbsConnection, TransportError> {
        self.connect_with_mtu(p, peer, self.mtu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connectx3_ports_at_4096_run_at_2048_as_perftest_and_say_why() {
        for part in [4099, 4100, 4103, 4104] {
            let (mtu, why) = mtu_for(part, Mtu::Mtu4096, None);
            assert_eq!(mtu, Mtu::Mtu2048, "part {part}");
            assert!(why.is_some_and(|w| w.contains("erratum")), "part {part}");
        }
        // -m is the user's choice; other parts and MTUs keep the port's.
        assert_eq!(mtu_for(4099, Mtu::Mtu4096, Some(Mtu::Mtu4096)), (Mtu::Mtu4096, None));
        assert_eq!(mtu_for(4099, Mtu::Mtu2048, None), (Mtu::Mtu2048, None));
        assert_eq!(mtu_for(4115, Mtu::Mtu4096, None), (Mtu::Mtu4096, None), "ConnectX-4");
        assert_eq!(mtu_for(0, Mtu::Mtu4096, None), (Mtu::Mtu4096, None), "soft-RoCE");
    }
}
