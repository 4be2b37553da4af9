//! NetworkDirect: open the adapter that owns the address this side reaches the peer
//! from (or `-d IP`), prepare the queue pairs, swap endpoints, and connect them: the
//! client's connector to the server's listener, one queue pair after the other.

use std::net::IpAddr;

use super::{
    address_lines, exchange_endpoints, params, prepare_all, Attachment, Backend, Setup,
    SetupContext,
};
use crate::error::Error;
use crate::results::Granted;
use crate::session::protocol::Channel;
use crate::spec::Verb;
use crate::transport::nd::{NdConnection, NdEndpoint, NdRole, NdTransport};
use crate::transport::Transport;

/// The NetworkDirect backend, opened (the server's listener waits already).
pub struct Nd {
    transport: NdTransport,
    local: IpAddr,
}

impl Backend for Nd {
    type Conn = NdConnection;

    fn open(ctx: &SetupContext<'_>, ch: &Channel) -> Result<Self, Error> {
        let local = match &ctx.local.device {
            Some(d) => d
                .parse::<IpAddr>()
                .map_err(|_| Error::usage(format!("-d {d}: not an IP address")))?,
            None => ch.local_ip().ok_or_else(|| Error::io("control channel: no local address"))?,
        };
        let role = if ctx.client() { NdRole::Connect } else { NdRole::Accept };
        let outs = ctx.spec.rdma().and_then(|r| r.outs);
        let transport = NdTransport::open(local, role, ctx.local.timeout, outs)?;
        Ok(Nd { transport, local })
    }

    fn establish(
        self,
        ctx: &SetupContext<'_>,
        ch: &mut Channel,
    ) -> Result<Setup<NdConnection>, Error> {
        let Nd { transport: t, local } = self;
        let qps = ctx.spec.connections() as usize;
        let (prepared, mine) = prepare_all(&t, &ctx.plan, ctx.spec.connections())?;
        // ND has no path MTU to agree on: 0.
        let (peers, _) = exchange_endpoints::<NdEndpoint>(ch, ctx.client(), 0, &mine, Some(qps))?;
        let conns = prepared
            .into_iter()
            .zip(&peers)
            .map(|(p, peer)| t.connect(p, peer))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::from(e).context("NetworkDirect"))?;
        let peer_ip = ch.peer_addr().map_or(local, |a| a.ip());
        let granted = Granted {
            device: format!("{local} ({})", t.adapter().provider().name()),
            ib_port: ctx.local.ib_port,
            link_layer: "NetworkDirect".into(),
            inline_size: t.capabilities().max_inline,
            outs: t.read_limit(),
            ..Granted::default()
        };
        let verb = ctx.spec.kind.verb;
        Ok(Setup {
            local: address_lines("local ", &mine, |e| endpoint_line(e, local, verb)),
            remote: address_lines("remote ", &peers, |e| endpoint_line(e, peer_ip, verb)),
            endpoints: [(&mine, local), (&peers, peer_ip)]
                .map(|(eps, at)| eps.iter().map(|e| endpoint(e, at, verb)).collect()),
            attachment: Attachment::Adapter(local),
            params: params(ctx, granted),
            conns,
        })
    }
}

/// An endpoint for JSON: what [`endpoint_line`] prints.
fn endpoint(ep: &NdEndpoint, at: IpAddr, verb: Verb) -> crate::results::Endpoint {
    let buffer = matches!(verb, Verb::Read | Verb::Write);
    crate::results::Endpoint {
        rkey: buffer.then_some(ep.buffer.rkey),
        vaddr: buffer.then_some(ep.buffer.addr),
        address: Some(ep.listen.map_or_else(|| at.to_string(), |l| l.to_string())),
        ..Default::default()
    }
}

fn endpoint_line(ep: &NdEndpoint, at: IpAddr, verb: Verb) -> String {
    let mut line = match ep.listen {
        Some(l) => format!("address: NetworkDirect {l} QP #{}", ep.index),
        None => format!("address: NetworkDirect {at} QP #{}", ep.index),
    };
    if matches!(verb, Verb::Read | Verb::Write) {
        line.push_str(&format!(" Token {:#010x} VAddr {:#018x}", ep.buffer.rkey, ep.buffer.addr));
    }
    line
}
