//! TCP streams: the server listens on the control connection's address (a port the
//! kernel picks) and announces it as its one endpoint; the client connects `-P`
//! streams there, each greeting with the listener's cookie and its index.

use std::net::SocketAddr;

use super::{exchange_endpoints, params, Attachment, Backend, Setup, SetupContext};
use crate::error::{Error, ErrorKind};
use crate::results::Granted;
use crate::results::TcpEffective;
use crate::session::protocol::Channel;
use crate::spec::{Link, TcpSpec};
use crate::transport::tcp::{
    connect_streams, DataListener, StreamOptions, TcpConnection, TcpEndpoint,
};

/// The TCP backend, opened: the server's data listener waits already.
pub struct Tcp {
    listener: Option<DataListener>,
    opts: StreamOptions,
    streams: TcpSpec,
}

impl Backend for Tcp {
    type Conn = TcpConnection;

    fn open(ctx: &SetupContext<'_>, ch: &Channel) -> Result<Self, Error> {
        let Link::Tcp(streams) = ctx.spec.link else {
            return Err(Error::usage("the TCP backend runs TCP tests only"));
        };
        let opts = StreamOptions {
            window: streams.window,
            nodelay: streams.nodelay,
            timeout: ctx.local.timeout,
            buf_len: usize::try_from(ctx.plan.buffer_len).unwrap_or(usize::MAX),
            // serve --max-time reaches every read and write of the data streams.
            end: crate::perf::loops::tests_end(),
        };
        let listener = if ctx.client() {
            None
        } else {
            let ip = ch.local_ip().ok_or_else(|| Error::io("control channel: no local address"))?;
            Some(DataListener::bind(ip, &opts)?)
        };
        Ok(Tcp { listener, opts, streams })
    }

    fn establish(
        self,
        ctx: &SetupContext<'_>,
        ch: &mut Channel,
    ) -> Result<Setup<TcpConnection>, Error> {
        let n = self.streams.streams;
        let conns = match &self.listener {
            Some(listener) => {
                let ep = listener.endpoint()?;
                exchange_endpoints::<TcpEndpoint>(ch, false, 0, &[ep], Some(0))?;
                let client = ch.peer_addr().map(|a| a.ip().to_canonical());
                listener.accept_streams(n, &self.opts, client, || ch.has_pending())?
            }
            None => {
                let (eps, _) = exchange_endpoints::<TcpEndpoint>(ch, true, 0, &[], Some(1))?;
                let ep = eps[0];
                // The data goes where the control connection goes, nowhere else.
                let server = ch.peer_addr().map(|a| a.ip().to_canonical());
                if server != Some(ep.addr.ip().to_canonical()) {
                    return Err(Error::new(
                        ErrorKind::Refused,
                        format!(
                            "the server announced its TCP data streams at {}, not at the control connection's address",
                            ep.addr
                        ),
                    ));
                }
                let source = ch.local_addr().map(|a| a.ip());
                connect_streams(&ep, n, source, &self.opts)?
            }
        };
        let line = |side: &str, k: usize, a: Option<SocketAddr>| {
            format!(" {side} address: {} stream {k}", a.map_or("?".into(), |a| a.to_string()))
        };
        let local =
            conns.iter().enumerate().map(|(k, c)| line("local", k, c.local_addr())).collect();
        let remote =
            conns.iter().enumerate().map(|(k, c)| line("remote", k, c.peer_addr())).collect();
        let endpoint = |a: Option<SocketAddr>| crate::results::Endpoint {
            address: a.map(|a| a.to_string()),
            ..Default::default()
        };
        let endpoints = [
            conns.iter().map(|c| endpoint(c.local_addr())).collect(),
            conns.iter().map(|c| endpoint(c.peer_addr())).collect(),
        ];
        let granted = Granted {
            device: "tcp".into(),
            ib_port: ctx.local.ib_port,
            link_layer: "TCP".into(),
            ..Granted::default()
        };
        let mut params = params(ctx, granted);
        let pin = &ctx.local.pin;
        params.tcp = Some(TcpEffective {
            streams: n,
            socket_buffer: conns.first().and_then(TcpConnection::window),
            nodelay: self.streams.nodelay,
            pinned_cpus: (!pin.is_empty()).then(|| pin.clone()),
        });
        let ip = ch.local_ip().unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
        Ok(Setup { conns, params, local, remote, endpoints, attachment: Attachment::Interface(ip) })
    }
}
