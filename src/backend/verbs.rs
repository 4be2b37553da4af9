//! Linux verbs: open the device, prepare one queue pair per `-q`, swap endpoints over
//! the control channel and connect them (perftest's way), or connect each through
//! rdma_cm first and swap only the buffers (`-R`).

use std::net::{Ipv4Addr, ToSocketAddrs};

use ffi::verbs::{
    CmListener, ConnectRequest, Mtu, PathClass, QueuePair, RemoteBuffer, ResolvedRoute,
};

use super::{
    address_lines, exchange_endpoints, params, prepare_all, Attachment, Backend, Setup,
    SetupContext,
};
use crate::error::{Error, ErrorKind, Refusal};
use crate::results::{Granted, PathParams};
use crate::session::protocol::Channel;
use crate::spec::Verb;
use crate::transport::verbs::{
    OdpNeed, VerbsConnection, VerbsEndpoint, VerbsOptions, VerbsTransport,
};
use crate::transport::Transport;

/// The verbs backend, opened.
pub struct Verbs {
    opened: Opened,
    local_ipv4: Option<Ipv4Addr>,
}

enum Opened {
    /// The device, its queue pairs to be connected by exchanging endpoints.
    Device(VerbsTransport),
    /// `-R`: rdma_cm picks the device per connection; the server listens already.
    Cm(Option<CmListener>),
}

/// One rdma_cm connection in the making: the client's resolved route, or a request
/// that reached the server.
enum CmStep {
    Connect(ResolvedRoute),
    Accept(ConnectRequest),
}

impl Backend for Verbs {
    type Conn = VerbsConnection;

    fn open(ctx: &SetupContext<'_>, ch: &Channel) -> Result<Self, Error> {
        // Without -x, each side takes the RoCE v2 GID of the address it talks to the
        // peer from: the same kind of GID on both sides.
        let local_ipv4 = ch.local_ipv4();
        let rdma_cm = ctx.spec.rdma().is_some_and(|r| r.rdma_cm);
        let opened = match (rdma_cm, ctx.client()) {
            (false, _) => Opened::Device(open(ctx, ctx.local.device.clone(), local_ipv4)?),
            (true, true) => Opened::Cm(None),
            // The server listens for rdma_cm before the client is told to go on.
            // At the address and port the client reached (not every address: --bind).
            (true, false) => {
                let ip =
                    ch.local_ip().ok_or_else(|| Error::io("control channel: no local address"))?;
                let port = ch.local_port().unwrap_or(ctx.local.port);
                let here = std::net::SocketAddr::from((ip, port));
                Opened::Cm(Some(CmListener::bind(here).map_err(|e| cm_error(&e))?))
            }
        };
        Ok(Verbs { opened, local_ipv4 })
    }

    fn establish(
        self,
        ctx: &SetupContext<'_>,
        ch: &mut Channel,
    ) -> Result<Setup<VerbsConnection>, Error> {
        let qps = ctx.spec.connections() as usize;
        match self.opened {
            Opened::Device(t) => {
                let (prepared, mine) = prepare_all(&t, &ctx.plan, ctx.spec.connections())?;
                let (peers, peer_mtu) =
                    exchange_endpoints(ch, ctx.client(), t.mtu().bytes(), &mine, Some(qps))?;
                let mtu = t.mtu().bytes().min(peer_mtu);
                let mtu = Mtu::from_bytes(mtu).unwrap_or(t.mtu());
                let conns = prepared
                    .into_iter()
                    .zip(&peers)
                    .map(|(p, peer)| t.connect_with_mtu(p, peer, mtu))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(finish(ctx, &t, conns, &mine, &peers, mtu.bytes()))
            }
            Opened::Cm(listener) => {
                let (t, mut conns, mine) = cm_connections(ctx, listener.as_ref(), self.local_ipv4)?;
                // The peer's buffer comes with the endpoints, after the connection.
                let (peers, _) =
                    exchange_endpoints(ch, ctx.client(), t.mtu().bytes(), &mine, Some(qps))?;
                for (c, peer) in conns.iter_mut().zip(&peers) {
                    c.set_remote(peer.buffer);
                }
                Ok(finish(ctx, &t, conns, &mine, &peers, t.mtu().bytes()))
            }
        }
    }
}

/// Opens `device` (or the first) with this side's port, GID and MTU settings.
pub(crate) fn open(
    ctx: &SetupContext<'_>,
    device: Option<String>,
    local_ipv4: Option<Ipv4Addr>,
) -> Result<VerbsTransport, Error> {
    let rdma = ctx.spec.rdma();
    let opts = VerbsOptions {
        device,
        port: ctx.local.ib_port,
        gid_index: ctx.local.gid_index,
        local_ipv4,
        mtu: rdma.and_then(|r| r.mtu).and_then(Mtu::from_bytes),
        max_rd_atomic: rdma.and_then(|r| r.outs),
        qp_timeout: rdma.map_or(crate::spec::DEFAULT_QP_TIMEOUT, |r| r.qp_timeout),
        retry_count: rdma.map_or(crate::spec::DEFAULT_RETRY_COUNT, |r| r.retry_count),
        class: rdma.map_or(PathClass::default(), |r| PathClass {
            sl: r.sl,
            traffic_class: r.traffic_class,
            flow_label: r.flow_label,
        }),
        hugepages: rdma.is_some_and(|r| r.hugepages),
        shared_receives: ctx.plan.shared_receives,
        odp: rdma.filter(|r| r.odp).map(|r| OdpNeed {
            service: r.service,
            // IBV_ODP_SUPPORT_*: what this test's buffers serve.
            ops: match ctx.spec.kind.verb {
                Verb::Send => 1 | 2,
                Verb::Write => 4,
                Verb::Read => 8,
                Verb::Atomic => 16,
            },
        }),
    };
    let t = VerbsTransport::open(&opts)?;
    if ctx.spec.kind.verb == Verb::Atomic && !t.capabilities().atomics {
        return Err(Error::refusal(
            Refusal::Device { what: "atomics".into() },
            format!("{} has no atomic support (atomic_cap NONE)", t.context().name()),
        ));
    }
    Ok(t)
}

fn cm_error(e: &ffi::verbs::Error) -> Error {
    Error::new(ErrorKind::Device, format!("-R: {e}"))
}

/// `-R`: each QP is resolved (client) or requested (server), prepared on the device
/// rdma_cm routes through, and connected in turn.
fn cm_connections(
    ctx: &SetupContext<'_>,
    listener: Option<&CmListener>,
    local_ipv4: Option<Ipv4Addr>,
) -> Result<(VerbsTransport, Vec<VerbsConnection>, Vec<VerbsEndpoint>), Error> {
    let conn_cfg = ctx.plan.connection();
    let timeout = ctx.local.timeout;
    let mut t: Option<VerbsTransport> = None;
    let (mut conns, mut mine) = (Vec::new(), Vec::new());
    for _ in 0..ctx.spec.connections() {
        let step = match (ctx.host, listener) {
            (Some(host), _) => {
                let addr = (host, ctx.local.port)
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::PeerUnreachable,
                            format!("-R: cannot resolve '{host}'"),
                        )
                    })?;
                CmStep::Connect(ResolvedRoute::resolve(addr, timeout).map_err(|e| cm_error(&e))?)
            }
            (None, Some(l)) => CmStep::Accept(l.get_request(timeout).map_err(|e| cm_error(&e))?),
            (None, None) => {
                return Err(Error::new(ErrorKind::Device, "-R: the server has no rdma_cm listener"))
            }
        };
        if t.is_none() {
            let routed = match &step {
                CmStep::Connect(route) => route.device_name(),
                CmStep::Accept(request) => request.device_name(),
            };
            if let Some(d) = ctx.local.device.as_ref().filter(|d| **d != routed) {
                return Err(Error::usage(format!(
                    "-R: the peer is reached through {routed}, not -d {d}"
                )));
            }
            t = Some(open(ctx, Some(routed), local_ipv4)?);
        }
        let tr = t.as_ref().ok_or_else(|| Error::new(ErrorKind::Device, "-R: no device"))?;
        let (p, ep) = tr.prepare(&conn_cfg)?;
        mine.push(ep);
        let unknown = RemoteBuffer { addr: 0, len: 0, rkey: 0 };
        let conn = match step {
            CmStep::Connect(route) => tr.connect_cm_client(p, route, unknown, timeout),
            CmStep::Accept(request) => tr.accept_cm(p, request, unknown, timeout),
        };
        conns.push(conn?);
    }
    let t = t.ok_or_else(|| Error::usage("-R: no queue pair to connect"))?;
    Ok((t, conns, mine))
}

fn endpoint_line(ep: &VerbsEndpoint, verb: Verb) -> String {
    let mut line =
        format!("address: LID {:#06x} QPN {:#08x} PSN {:#08x}", ep.qp.lid, ep.qp.qpn, ep.qp.psn);
    if matches!(verb, Verb::Read | Verb::Write | Verb::Atomic) {
        line.push_str(&format!(" RKey {:#010x} VAddr {:#018x}", ep.buffer.rkey, ep.buffer.addr));
    }
    if !ep.qp.gid.is_zero() {
        let bytes: Vec<String> = ep.qp.gid.0.iter().map(|b| format!("{b:02}")).collect();
        line.push_str(&format!("\n GID: {}", bytes.join(":")));
    }
    line
}

/// An endpoint for JSON: what [`endpoint_line`] prints.
fn endpoint(ep: &VerbsEndpoint, verb: Verb) -> crate::results::Endpoint {
    let buffer = matches!(verb, Verb::Read | Verb::Write | Verb::Atomic);
    crate::results::Endpoint {
        qpn: Some(ep.qp.qpn),
        psn: Some(ep.qp.psn),
        rkey: buffer.then_some(ep.buffer.rkey),
        vaddr: buffer.then_some(ep.buffer.addr),
        gid: (!ep.qp.gid.is_zero()).then(|| std::net::Ipv6Addr::from(ep.qp.gid.0).to_string()),
        lid: Some(ep.qp.lid),
        address: None,
    }
}

/// The class of the path as the first queue pair holds it (what the driver kept of
/// `-S`, `--tclass`, `--flow_label`); UD's queue pairs have none, so what was set.
fn path_of(t: &VerbsTransport, conns: &[VerbsConnection]) -> Option<PathParams> {
    let class = match conns.first() {
        Some(c) if c.qp().qp_type() != ffi::verbs::QpType::Ud => c.qp().path_class().ok()?,
        _ => t.class(),
    };
    Some(PathParams {
        sl: class.sl,
        traffic_class: class.traffic_class,
        flow_label: class.flow_label,
    })
}

/// What the driver did not keep of the class asked for, a line each: soft-RoCE, for
/// one, keeps no service level (RoCE carries none but as a VLAN priority).
fn class_notes(t: &VerbsTransport, kept: PathParams) -> Vec<String> {
    let asked = t.class();
    let dev = t.context().name();
    [
        ("-S", "service level", u32::from(asked.sl), u32::from(kept.sl)),
        (
            "--tclass",
            "traffic class",
            u32::from(asked.traffic_class),
            u32::from(kept.traffic_class),
        ),
        ("--flow_label", "flow label", asked.flow_label, kept.flow_label),
    ]
    .into_iter()
    .filter(|(_, _, want, got)| want != got)
    .map(|(flag, what, want, got)| {
        format!(" note: {flag} {want} asked; {dev}'s queue pairs keep {what} {got}")
    })
    .collect()
}

pub(crate) fn finish(
    ctx: &SetupContext<'_>,
    t: &VerbsTransport,
    conns: Vec<VerbsConnection>,
    mine: &[VerbsEndpoint],
    peers: &[VerbsEndpoint],
    mtu: u32,
) -> Setup<VerbsConnection> {
    let inline =
        conns.first().map_or(0, |c| crate::transport::Connection::capabilities(c).max_inline);
    let port = ctx.local.ib_port;
    let link = t.context().query_port(port).map(|p| p.link_layer).unwrap_or(0);
    let retries = ctx.spec.rdma().filter(|r| r.service == crate::transport::Service::Rc);
    let granted = Granted {
        device: t.context().name().to_string(),
        ib_port: port,
        link_layer: if link == 2 { "Ethernet" } else { "InfiniBand" }.into(),
        gid_index: t.gid_index(),
        mtu,
        inline_size: inline,
        outs: t.max_rd_atomic().into(),
        qp_timeout: retries.map(|r| r.qp_timeout),
        retry_count: retries.map(|r| r.retry_count),
        path: path_of(t, &conns),
    };
    let verb = ctx.spec.kind.verb;
    let mut local = address_lines("local ", mine, |e| endpoint_line(e, verb));
    local.extend(t.mtu_erratum().map(|why| format!(" {why}")));
    local.extend(granted.path.map_or_else(Vec::new, |kept| class_notes(t, kept)));
    Setup {
        local,
        remote: address_lines("remote ", peers, |e| endpoint_line(e, verb)),
        endpoints: [mine, peers].map(|eps| eps.iter().map(|e| endpoint(e, verb)).collect()),
        attachment: Attachment::Device { name: t.context().name().to_string(), port },
        params: params(ctx, granted),
        conns,
    }
}
