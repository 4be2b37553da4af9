//! One test, either side: control channel, connection set-up (verbs or TCP), each
//! size in turn, results and CPU figures exchanged, the report printed by both sides.
//! The session and the per-size steps are generic over [`Connection`]; only the
//! set-up knows the backend.

// Only the verbs backend drives some helpers for now; NetworkDirect will on Windows.
#![cfg_attr(not(target_os = "linux"), allow(unused_imports, dead_code))]

use std::io::Write;
use std::net::{IpAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::config::{AtomicType, Measure, RunLength, SharedParams, TestConfig, Verb};
use super::loops::{self, BwOutcome, BwPlan, Clock, LatPlan, LoopError};
use super::report::{self, EffectiveParams, RunReport, SizeResult, TcpEffective, Validation};
use crate::measure::cpu::{self, CpuSnapshot};
use crate::measure::{self, BwStats};
use crate::session::protocol::{mismatches, Channel, Message, ProtocolError};
use crate::transport::{Backend, Connection, ConnectionConfig, Op, TransportError};

/// Exit status for a run whose thresholds or validation failed.
pub const EXIT_VERDICT: u8 = 1;

/// The tool name sent in the handshake.
pub fn tool() -> String {
    format!("rdmabench {}", env!("CARGO_PKG_VERSION"))
}

/// Buffer slots messages rotate through: enough that `--validate` sees many distinct
/// messages, bounded to 1 MiB of buffer, and at least two (a ping-pong sends from one
/// and receives into the other).
pub fn slots_for(size: u64) -> u32 {
    u32::try_from(((1u64 << 20) / size.max(1)).clamp(2, 64)).unwrap_or(2)
}

/// The byte `--validate` expects at `offset` of `slot` on QP `qp`.
pub fn pattern_byte(qp: usize, slot: u64, offset: u64, size: u64) -> u8 {
    (slot.wrapping_mul(131)
        ^ offset.wrapping_mul(7)
        ^ size.wrapping_mul(13)
        ^ (qp as u64).wrapping_mul(29)) as u8
}

/// Fills the first `slots` messages of `buf` with the pattern.
pub fn fill_pattern(buf: &mut [u8], qp: usize, size: u64, slots: u32) {
    for slot in 0..u64::from(slots) {
        let start = (slot * size) as usize;
        for (j, b) in buf[start..start + size as usize].iter_mut().enumerate() {
            *b = pattern_byte(qp, slot, j as u64, size);
        }
    }
}

/// Compares the first `slots` messages of `buf` with the pattern.
pub fn check_pattern(buf: &[u8], qp: usize, size: u64, slots: u64) -> Validation {
    let mut v = Validation::default();
    for slot in 0..slots {
        let start = (slot * size) as usize;
        for (j, &b) in buf[start..start + size as usize].iter().enumerate() {
            v.checked_bytes += 1;
            if b != pattern_byte(qp, slot, j as u64, size) {
                v.corrupted_bytes += 1;
                v.first_corrupted_offset.get_or_insert((start + j) as u64);
            }
        }
    }
    v
}

fn merge(a: Option<Validation>, b: Validation) -> Option<Validation> {
    let mut a = a.unwrap_or_default();
    a.checked_bytes += b.checked_bytes;
    a.corrupted_bytes += b.corrupted_bytes;
    if a.first_corrupted_offset.is_none() {
        a.first_corrupted_offset = b.first_corrupted_offset;
    }
    Some(a)
}

/// The operation a sender posts.
pub fn op_for(cfg: &TestConfig) -> Op {
    match cfg.shared.test.verb {
        Verb::Write => Op::Write,
        Verb::Read => Op::Read,
        Verb::Send => Op::Send,
        Verb::Atomic => match cfg.shared.atomic_type {
            AtomicType::FetchAndAdd => Op::FetchAdd(1),
            AtomicType::CmpAndSwap => Op::CompareSwap { compare: 0, swap: 0 },
        },
        Verb::Tcp => Op::Send,
    }
}

/// Whether this side posts the measured operation in this test.
fn sends(cfg: &TestConfig) -> bool {
    cfg.is_client() || cfg.shared.bidirectional
}

/// Runs the test on one side and prints the report to `out`. Returns the exit status.
///
/// # Errors
/// One line: what failed, on which side, and why.
pub fn run(cfg: &TestConfig, out: &mut dyn Write) -> Result<u8, String> {
    let report = execute(cfg, out)?;
    finish(cfg, report, out)
}

/// Runs one test on this side, printing the header as it starts, and returns the
/// report without printing the table (`compare` collects reports this way).
///
/// # Errors
/// One line: what failed, on which side, and why. The peer is told too.
pub fn execute(cfg: &TestConfig, out: &mut dyn Write) -> Result<RunReport, String> {
    match &cfg.host {
        Some(host) => {
            let mut ch = open_client(cfg, host)?;
            let result = backend_session(cfg, &mut ch, out);
            if let Err(msg) = &result {
                ch.send_error(msg);
            }
            result
        }
        None => {
            let listener = ControlListener::bind(cfg.bind, cfg.port)?;
            let (mut ch, params) = listener
                .accept_hello(Some(cfg.timeout), cfg.timeout)?
                .ok_or("a client connected and closed before its hello")?;
            let diff = mismatches(&params, &cfg.shared);
            if !diff.is_empty() {
                let msg = format!("parameter mismatch: {}", diff.join("; "));
                ch.send_error(&msg);
                return Err(msg);
            }
            serve_session(cfg, ch, out)
        }
    }
}

/// The server's side of one test once the client's hello is in: a one-shot server
/// and `rdmabench serve` both end here.
///
/// # Errors
/// As [`execute`]; the client is told why.
pub fn serve_session(
    cfg: &TestConfig,
    mut ch: Channel,
    out: &mut dyn Write,
) -> Result<RunReport, String> {
    let result = backend_session(cfg, &mut ch, out);
    if let Err(msg) = &result {
        ch.send_error(msg);
    }
    result
}

fn backend_session(
    cfg: &TestConfig,
    ch: &mut Channel,
    out: &mut dyn Write,
) -> Result<RunReport, String> {
    if cfg.shared.test.verb == Verb::Tcp {
        let setup = tcp_side::setup(cfg, ch)?;
        return session(cfg, ch, setup, out);
    }
    if cfg.shared.backend == Backend::Nd {
        return nd_side::run(cfg, ch, out);
    }
    #[cfg(target_os = "linux")]
    {
        verbs_side::run(cfg, ch, out)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = out;
        Err("verbs is Linux's RDMA interface: on this platform use --backend nd (NetworkDirect)"
            .into())
    }
}

/// The client's half of the handshake: connect, hello, the server's accept.
fn open_client(cfg: &TestConfig, host: &str) -> Result<Channel, String> {
    let stream = connect(host, cfg.port, cfg.timeout)?;
    let mut ch = Channel::new(stream, cfg.timeout).map_err(|e| e.to_string())?;
    ch.send(&Message::Hello { tool: tool(), params: cfg.shared.clone() })
        .map_err(|e| e.to_string())?;
    match ch.recv("the server's answer").map_err(|e| format!("the server refused: {e}"))? {
        Message::Accept { .. } => Ok(ch),
        other => Err(format!("control channel: expected accept, got {}", other.name())),
    }
}

/// The server's control-channel listener.
pub struct ControlListener {
    listener: TcpListener,
    port: u16,
}

impl ControlListener {
    /// Listens on `bind` (every address when None) and `port`.
    ///
    /// # Errors
    /// The port is taken or the address is not local.
    pub fn bind(bind: Option<IpAddr>, port: u16) -> Result<Self, String> {
        let ip = bind.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let listener = TcpListener::bind((ip, port))
            .map_err(|e| format!("cannot listen on {ip} TCP port {port}: {e}"))?;
        Ok(ControlListener { listener, port })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Waits for one client (up to `wait`, or for ever) and reads its hello, every read
    /// bounded by `timeout`. `None`: the client closed without a word (a reachability
    /// check, as `compare` makes before its sweep).
    ///
    /// # Errors
    /// No client in time, or one that does not say hello properly (it is told why).
    pub fn accept_hello(
        &self,
        wait: Option<Duration>,
        timeout: Duration,
    ) -> Result<Option<(Channel, SharedParams)>, String> {
        let stream = self.accept(wait)?;
        let mut ch = Channel::new(stream, timeout).map_err(|e| e.to_string())?;
        match ch.recv("hello") {
            Ok(Message::Hello { params, .. }) => Ok(Some((ch, params))),
            Err(ProtocolError::Closed { .. }) => Ok(None),
            Ok(other) => {
                ch.send_error("expected hello");
                Err(format!("control channel: expected hello, got {}", other.name()))
            }
            Err(e) => {
                ch.send_error(&e.to_string());
                Err(e.to_string())
            }
        }
    }

    fn accept(&self, wait: Option<Duration>) -> Result<TcpStream, String> {
        let port = self.port;
        let Some(wait) = wait else {
            let (s, _) =
                self.listener.accept().map_err(|e| format!("accepting on port {port}: {e}"))?;
            return Ok(s);
        };
        self.listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let start = Instant::now();
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).map_err(|e| e.to_string())?;
                    return Ok(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if start.elapsed() > wait {
                        return Err(format!(
                            "no client connected to port {port} within {} s (--timeout)",
                            wait.as_secs()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(format!("accepting on port {port}: {e}")),
            }
        }
    }
}

/// Connects the control channel to `host:port`. A refused connection is retried
/// until `timeout`, so a client may start before its server; then one clear error.
fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, String> {
    let start = Instant::now();
    connect_retrying(host, port, timeout, timeout).map_err(|f| match f {
        ConnectFailure::Resolve(e) => format!("cannot resolve server '{host}': {e}"),
        ConnectFailure::NoAddress => format!("server '{host}' resolves to no address"),
        ConnectFailure::Io(e) => format!(
            "cannot reach the server at {host}:{port}: {e} (after {} s; is `rdmabench` running there, with -p {port}?)",
            start.elapsed().as_secs()
        ),
    })
}

/// Why [`connect_retrying`] gave up.
pub(crate) enum ConnectFailure {
    /// The name did not resolve.
    Resolve(std::io::Error),
    /// It resolved to no address.
    NoAddress,
    /// The last attempt's error.
    Io(std::io::Error),
}

/// Connects to `host:port`, each attempt waiting up to `per_try`; a refused connection
/// (a server still starting) is retried every 100 ms for up to `window`.
pub(crate) fn connect_retrying(
    host: &str,
    port: u16,
    per_try: Duration,
    window: Duration,
) -> Result<TcpStream, ConnectFailure> {
    let addrs: Vec<_> = (host, port).to_socket_addrs().map_err(ConnectFailure::Resolve)?.collect();
    let start = Instant::now();
    loop {
        let mut last = None;
        for addr in &addrs {
            match TcpStream::connect_timeout(addr, per_try) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && start.elapsed() < window =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Some(e) => return Err(ConnectFailure::Io(e)),
            None => return Err(ConnectFailure::NoAddress),
        }
    }
}

/// While the client runs a size, a thread tells the server it is alive every second.
/// It sleeps on a channel, so it wakes once a second and stops at once when dropped.
struct Heartbeat {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(ch: &Channel) -> Result<Self, String> {
        let mut ch = ch.try_clone().map_err(|e| e.to_string())?;
        let (stop, wake) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                wake.recv_timeout(Duration::from_secs(1))
            {
                if ch.send(&Message::Heartbeat).is_err() {
                    return;
                }
            }
        });
        Ok(Heartbeat { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bandwidth of each QP and the total, from what a sender recorded.
fn bw_result(
    size: u64,
    outcome: &loops::BwOutcome,
    run: &RunLength,
) -> (BwStats, Vec<BwStats>, u64) {
    match run {
        RunLength::Iterations(_) => {
            let per: Vec<(BwStats, u64)> = outcome
                .recorders
                .iter()
                .map(|r| (measure::bw_stats(size, r), r.first_post().unwrap_or(0)))
                .collect();
            let total = measure::aggregate(&per);
            let iterations = per.first().map_or(0, |(b, _)| b.messages);
            (total, per.into_iter().map(|(b, _)| b).collect(), iterations)
        }
        RunLength::Duration { .. } => {
            let per: Vec<BwStats> = outcome
                .windowed
                .iter()
                .map(|w| {
                    measure::windowed_stats(
                        size,
                        w.messages,
                        w.window_ns,
                        w.interval_ns,
                        &w.buckets,
                    )
                })
                .collect();
            let total = measure::aggregate(&per.iter().map(|b| (*b, 0)).collect::<Vec<_>>());
            let iterations = per.first().map_or(0, |b| b.messages);
            (total, per, iterations)
        }
    }
}

fn params_of(
    cfg: &TestConfig,
    device: String,
    link_layer: String,
    gid_index: Option<u8>,
    mtu: u32,
    inline: u32,
    outs: u32,
) -> EffectiveParams {
    let s = &cfg.shared;
    EffectiveParams {
        device,
        ib_port: cfg.ib_port,
        link_layer,
        gid_index,
        mtu,
        connection: format!("{:?}", s.service).to_uppercase(),
        qps: s.qps,
        sizes: s.sizes.clone(),
        run: s.run,
        tx_depth: cfg.tx_depth,
        rx_depth: cfg.rx_depth,
        cq_mod: cfg.cq_mod,
        post_list: cfg.post_list,
        inline_size: inline,
        outs,
        events: cfg.events,
        bidirectional: s.bidirectional,
        rdma_cm: s.rdma_cm,
        atomic_type: (s.test.verb == Verb::Atomic).then(|| format!("{:?}", s.atomic_type)),
        bw_unit: if cfg.report_gbits { "Gb/s" } else { "MiB/s" },
        latency_is: if s.test.rtt_factor() == 2 {
            "one-way (half round trip)"
        } else {
            "round trip"
        },
        validate: s.validate,
        tcp: None,
    }
}

/// Writes the report (and the JSON file) and decides the exit status.
fn finish(cfg: &TestConfig, mut report: RunReport, out: &mut dyn Write) -> Result<u8, String> {
    report.verdict = report::verdict(cfg, &report.results);
    let duration = matches!(cfg.shared.run, RunLength::Duration { .. });
    let mut text = String::new();
    text.push_str(&report::table_header(cfg.shared.test, cfg.report_gbits, duration));
    for r in &report.results {
        text.push_str(&report::table_row(r, cfg.report_gbits, duration));
        text.push_str(&report::details(r, cfg.report_gbits));
    }
    text.push_str(report::RESULT_LINE);
    text.push('\n');
    out.write_all(text.as_bytes()).map_err(|e| format!("writing output: {e}"))?;
    let _ = out.flush();
    if let Some(path) = &cfg.json {
        std::fs::write(path, crate::report::to_json(&report))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if report.verdict.pass {
        Ok(0)
    } else {
        eprintln!("rdmabench: FAIL: {}", report.verdict.failures.join("; "));
        Ok(EXIT_VERDICT)
    }
}

/// A backend's connections, ready to run, and what the report says about them.
struct Setup<C> {
    conns: Vec<C>,
    params: EffectiveParams,
    local: Vec<String>,
    remote: Vec<String>,
}

/// One RDMA connection's sizes, whatever the backend: a buffer of `slots_for` messages
/// of the largest size, and latency tests' send queues deep enough for their
/// unsignaled posts.
fn rdma_connection(cfg: &TestConfig) -> ConnectionConfig {
    let s = &cfg.shared;
    let max_size = *s.sizes.iter().max().unwrap_or(&8);
    ConnectionConfig {
        buf_len: (max_size.max(8) * u64::from(slots_for(max_size))) as usize,
        service: s.service,
        tx_depth: if s.test.measure == Measure::Lat { cfg.tx_depth.max(16) } else { cfg.tx_depth },
        rx_depth: cfg.rx_depth.max(1),
        max_inline: cfg.inline_size,
        events: cfg.events,
    }
}

/// Swaps the endpoint records over the control channel, the client first as perftest
/// does; returns the peer's records and the MTU it announced.
fn exchange_endpoints<E: serde::Serialize + serde::de::DeserializeOwned>(
    cfg: &TestConfig,
    ch: &mut Channel,
    mtu: u32,
    mine: &[E],
) -> Result<(Vec<E>, u32), String> {
    let send_mine = |ch: &mut Channel| {
        ch.send(&Message::Endpoints {
            mtu,
            qps: mine.iter().map(|e| serde_json::to_value(e).unwrap_or_default()).collect(),
        })
    };
    let theirs = if cfg.is_client() {
        send_mine(ch).map_err(|e| e.to_string())?;
        ch.recv("endpoints").map_err(|e| e.to_string())?
    } else {
        let m = ch.recv("endpoints").map_err(|e| e.to_string())?;
        send_mine(ch).map_err(|e| e.to_string())?;
        m
    };
    let Message::Endpoints { mtu: peer_mtu, qps } = theirs else {
        return Err(format!("control channel: expected endpoints, got {}", theirs.name()));
    };
    if qps.len() != mine.len() {
        return Err(format!("the peer has {} QPs, this side {}", qps.len(), mine.len()));
    }
    let peers = qps
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("control channel: malformed endpoint: {e}"))?;
    Ok((peers, peer_mtu))
}

#[cfg(target_os = "linux")]
mod verbs_side {
    use super::*;
    use crate::transport::verbs::{VerbsConnection, VerbsEndpoint, VerbsOptions, VerbsTransport};
    use crate::transport::Transport;
    use ffi::verbs::{CmListener, Mtu, ResolvedRoute};

    fn endpoint_line(ep: &VerbsEndpoint, verb: Verb) -> String {
        let mut line = format!(
            " address: LID {:#06x} QPN {:#08x} PSN {:#08x}",
            ep.qp.lid, ep.qp.qpn, ep.qp.psn
        );
        if matches!(verb, Verb::Read | Verb::Write | Verb::Atomic) {
            line.push_str(&format!(
                " RKey {:#010x} VAddr {:#018x}",
                ep.buffer.rkey, ep.buffer.addr
            ));
        }
        if !ep.qp.gid.is_zero() {
            let bytes: Vec<String> = ep.qp.gid.0.iter().map(|b| format!("{b:02}")).collect();
            line.push_str(&format!("\n GID: {}", bytes.join(":")));
        }
        line
    }

    /// One rdma_cm connection in the making: the client's resolved route, or a request
    /// that reached the server.
    enum CmStep {
        Connect(ResolvedRoute),
        Accept(ffi::verbs::ConnectRequest),
    }

    /// With -R the device is the one rdma_cm routes through; a different -d is an error.
    fn cm_device(device: &mut Option<String>, routed: String) -> Result<(), String> {
        match device {
            Some(d) if *d != routed => {
                Err(format!("-R: the peer is reached through {routed}, not -d {d}"))
            }
            _ => {
                *device = Some(routed);
                Ok(())
            }
        }
    }

    /// Opens the device, prepares one connection per QP, exchanges endpoints and
    /// connects (or runs rdma_cm with -R).
    fn setup(
        cfg: &TestConfig,
        ch: &mut Channel,
        cm_listener: Option<CmListener>,
    ) -> Result<Setup<VerbsConnection>, String> {
        let s = &cfg.shared;
        let conn_cfg = rdma_connection(cfg);
        // Without -x, each side takes the RoCE v2 GID of the address it talks to the
        // peer from: the same kind of GID on both sides.
        let local_ipv4 = ch.local_ipv4();
        let open = |device: Option<String>| -> Result<VerbsTransport, String> {
            let opts = VerbsOptions {
                device,
                port: cfg.ib_port,
                gid_index: cfg.gid_index,
                local_ipv4,
                mtu: cfg.mtu.and_then(Mtu::from_bytes),
                max_rd_atomic: cfg.outs,
            };
            let t = VerbsTransport::open(&opts).map_err(|e| e.to_string())?;
            if s.test.verb == Verb::Atomic && !t.capabilities().atomics {
                return Err(format!(
                    "{} has no atomic support (atomic_cap NONE)",
                    t.context().name()
                ));
            }
            Ok(t)
        };
        let mut mine = Vec::new();
        let mut conns = Vec::new();
        let mut prepared = Vec::new();
        let t = if s.rdma_cm {
            // rdma_cm picks the device from the address, and connects before the
            // buffers are exchanged: each QP is resolved (client) or requested
            // (server), prepared on that device, and connected in turn.
            let mut t: Option<VerbsTransport> = None;
            for _ in 0..s.qps {
                let step = match &cfg.host {
                    Some(host) => {
                        let addr = (host.as_str(), cfg.port)
                            .to_socket_addrs()
                            .ok()
                            .and_then(|mut a| a.next())
                            .ok_or_else(|| format!("-R: cannot resolve '{host}'"))?;
                        CmStep::Connect(
                            ResolvedRoute::resolve(addr, cfg.timeout)
                                .map_err(|e| format!("-R: {e}"))?,
                        )
                    }
                    None => {
                        let listener = cm_listener.as_ref().expect("the server listens with -R");
                        CmStep::Accept(
                            listener.get_request(cfg.timeout).map_err(|e| format!("-R: {e}"))?,
                        )
                    }
                };
                if t.is_none() {
                    let mut device = cfg.device.clone();
                    let routed = match &step {
                        CmStep::Connect(route) => route.device_name(),
                        CmStep::Accept(request) => request.device_name(),
                    };
                    cm_device(&mut device, routed)?;
                    t = Some(open(device)?);
                }
                let tr = t.as_ref().expect("opened above");
                let (p, ep) = tr.prepare(&conn_cfg).map_err(|e| e.to_string())?;
                mine.push(ep);
                // The peer's buffer comes with the endpoints, after the connection.
                let unknown = ffi::verbs::RemoteBuffer { addr: 0, len: 0, rkey: 0 };
                let conn = match step {
                    CmStep::Connect(route) => tr.connect_cm_client(p, route, unknown, cfg.timeout),
                    CmStep::Accept(request) => tr.accept_cm(p, request, unknown, cfg.timeout),
                };
                conns.push(conn.map_err(|e| e.to_string())?);
            }
            t.ok_or("-R: no queue pair to connect")?
        } else {
            let t = open(cfg.device.clone())?;
            for _ in 0..s.qps {
                let (p, ep) = t.prepare(&conn_cfg).map_err(|e| e.to_string())?;
                prepared.push(p);
                mine.push(ep);
            }
            t
        };
        let (peers, peer_mtu) = exchange_endpoints(cfg, ch, t.mtu().bytes(), &mine)?;
        let mtu = t.mtu().bytes().min(peer_mtu);
        if s.rdma_cm {
            for (c, peer) in conns.iter_mut().zip(&peers) {
                c.set_remote(peer.buffer);
            }
        } else {
            for (p, peer) in prepared.into_iter().zip(&peers) {
                let c = t.connect_with_mtu(p, peer, Mtu::from_bytes(mtu).unwrap_or(t.mtu()));
                conns.push(c.map_err(|e| e.to_string())?);
            }
        }
        let inline = conns.first().map_or(0, |c| c.capabilities().max_inline);
        let link = t.context().query_port(cfg.ib_port).map(|p| p.link_layer).unwrap_or(0);
        let params = params_of(
            cfg,
            t.context().name().to_string(),
            if link == 2 { "Ethernet".into() } else { "InfiniBand".into() },
            t.gid_index(),
            mtu,
            inline.min(cfg.inline_size),
            t.max_rd_atomic().into(),
        );
        Ok(Setup {
            local: mine
                .iter()
                .map(|e| format!(" local{}", endpoint_line(e, s.test.verb)))
                .collect(),
            remote: peers
                .iter()
                .map(|e| format!(" remote{}", endpoint_line(e, s.test.verb)))
                .collect(),
            conns,
            params,
        })
    }

    pub(super) fn run(
        cfg: &TestConfig,
        ch: &mut Channel,
        out: &mut dyn Write,
    ) -> Result<RunReport, String> {
        // The server listens for rdma_cm before it accepts, so the client's connect
        // finds it.
        let cm = if !cfg.is_client() && cfg.shared.rdma_cm {
            let any = std::net::SocketAddr::from(([0, 0, 0, 0], cfg.port));
            Some(CmListener::bind(any).map_err(|e| format!("-R: {e}"))?)
        } else {
            None
        };
        if !cfg.is_client() {
            ch.send(&Message::Accept { tool: tool() }).map_err(|e| e.to_string())?;
        }
        let setup = setup(cfg, ch, cm)?;
        session(cfg, ch, setup, out)
    }
}

mod nd_side {
    use super::*;
    use crate::transport::nd::{NdEndpoint, NdRole, NdTransport};
    use crate::transport::Transport;

    fn endpoint_line(ep: &NdEndpoint, at: IpAddr, verb: Verb) -> String {
        let mut line = match ep.listen {
            Some(l) => format!(" address: NetworkDirect {l} QP #{}", ep.index),
            None => format!(" address: NetworkDirect {at} QP #{}", ep.index),
        };
        if matches!(verb, Verb::Read | Verb::Write) {
            line.push_str(&format!(
                " Token {:#010x} VAddr {:#018x}",
                ep.buffer.rkey, ep.buffer.addr
            ));
        }
        line
    }

    /// Opens the adapter that owns the address this side reaches the peer from (or
    /// `-d IP`), prepares the queue pairs, exchanges endpoints and connects them:
    /// the client's connector to the server's listener, one QP after the other.
    pub(super) fn run(
        cfg: &TestConfig,
        ch: &mut Channel,
        out: &mut dyn Write,
    ) -> Result<RunReport, String> {
        let s = &cfg.shared;
        let local = match &cfg.device {
            Some(d) => d.parse::<IpAddr>().map_err(|_| format!("-d {d}: not an IP address"))?,
            None => ch.local_ip().ok_or("control channel: no local address")?,
        };
        let role = if cfg.is_client() { NdRole::Connect } else { NdRole::Accept };
        if !cfg.is_client() {
            ch.send(&Message::Accept { tool: tool() }).map_err(|e| e.to_string())?;
        }
        let t = NdTransport::open(local, role, cfg.timeout, cfg.outs)?;
        let conn_cfg = rdma_connection(cfg);
        let mut prepared = Vec::new();
        let mut mine = Vec::new();
        for _ in 0..s.qps {
            let (p, ep) = t.prepare(&conn_cfg).map_err(|e| e.to_string())?;
            prepared.push(p);
            mine.push(ep);
        }
        // ND has no path MTU to agree on: 0.
        let (peers, _) = exchange_endpoints::<NdEndpoint>(cfg, ch, 0, &mine)?;
        let mut conns = Vec::new();
        for (p, peer) in prepared.into_iter().zip(&peers) {
            conns.push(t.connect(p, peer).map_err(|e| format!("NetworkDirect: {e}"))?);
        }
        let peer_ip = ch.peer_addr().map(|a| a.ip()).unwrap_or(local);
        let inline = t.capabilities().max_inline.min(cfg.inline_size);
        let params = params_of(
            cfg,
            format!("{local} ({})", t.adapter().provider().name()),
            "NetworkDirect".into(),
            None,
            0,
            inline,
            t.read_limit(),
        );
        let setup = Setup {
            local: mine
                .iter()
                .map(|e| format!(" local{}", endpoint_line(e, local, s.test.verb)))
                .collect(),
            remote: peers
                .iter()
                .map(|e| format!(" remote{}", endpoint_line(e, peer_ip, s.test.verb)))
                .collect(),
            conns,
            params,
        };
        session(cfg, ch, setup, out)
    }
}

fn session<C: Connection + Send>(
    cfg: &TestConfig,
    ch: &mut Channel,
    mut setup: Setup<C>,
    out: &mut dyn Write,
) -> Result<RunReport, String> {
    let s = &cfg.shared;
    if let Some(&cpu) = cfg.pin.first() {
        // One thread measures (latency tests): it runs on the first CPU of the list.
        if !cfg.thread_per_connection() || setup.conns.len() == 1 {
            ffi::os::pin_current_thread(cpu)
                .map_err(|e| format!("--cpus: cannot pin to CPU {cpu}: {e}"))?;
        }
    }
    let mhz = cpu::cpu_mhz();
    let role = if cfg.is_client() { "client" } else { "server" };
    let mut head = report::header(s.test, &setup.params, role);
    for l in &setup.local {
        head.push_str(l);
        head.push('\n');
    }
    for l in &setup.remote {
        head.push_str(l);
        head.push('\n');
    }
    head.push_str(report::RESULT_LINE);
    head.push('\n');
    out.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    let _ = out.flush();
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && (s.sizes.len() > 1 || matches!(s.run, RunLength::Duration { .. }));
    let mut results = Vec::new();
    for (k, &size) in s.sizes.iter().enumerate() {
        if progress {
            let eta = match s.run {
                RunLength::Duration { secs, .. } => format!(", {secs} s"),
                RunLength::Iterations(_) => String::new(),
            };
            eprint!("\rrdmabench: size {size} ({}/{}{eta})   ", k + 1, s.sizes.len());
        }
        // Barrier: both sides ready for this size.
        ch.send(&Message::Ready { size }).map_err(|e| e.to_string())?;
        match ch.recv("ready").map_err(|e| e.to_string())? {
            Message::Ready { size: peer } if peer == size => {}
            other => {
                return Err(format!(
                    "control channel: expected ready for {size} B, got {}",
                    other.name()
                ))
            }
        }
        let r = run_size(cfg, &mut setup.conns, ch, size, mhz)?;
        results.push(r);
    }
    if progress {
        eprintln!();
    }
    ch.send(&Message::Done).map_err(|e| e.to_string())?;
    match ch.recv("done").map_err(|e| e.to_string())? {
        Message::Done => {}
        other => return Err(format!("control channel: expected done, got {}", other.name())),
    }
    let report = RunReport {
        schema_version: crate::inventory::SCHEMA_VERSION,
        kind: "perf",
        test: s.test.id(),
        role,
        tool: tool(),
        params: setup.params,
        local: setup.local,
        remote: setup.remote,
        results,
        verdict: Default::default(),
    };
    Ok(report)
}

/// Runs one size on this side; returns the result both sides print.
fn run_size<C: Connection + Send>(
    cfg: &TestConfig,
    conns: &mut [C],
    ch: &mut Channel,
    size: u64,
    mhz: Option<f64>,
) -> Result<SizeResult, String> {
    let s = &cfg.shared;
    let client = cfg.is_client();
    // TCP copies each message into the kernel: one buffer slot keeps the working set in
    // cache, as iperf3's one buffer (TCP tests have no --validate to rotate for).
    let slots = if cfg.thread_per_connection() { 1 } else { slots_for(size) };
    let iters = match s.run {
        RunLength::Iterations(n) => n,
        RunLength::Duration { .. } => u64::MAX,
    };
    let duration = match s.run {
        RunLength::Duration { secs, margin } => {
            Some((Duration::from_secs(secs), Duration::from_secs(margin)))
        }
        RunLength::Iterations(_) => None,
    };
    let size32 =
        u32::try_from(size).map_err(|_| format!("{size} bytes is over the message limit"))?;
    let inline =
        u64::from(cfg.inline_size) >= size && !matches!(s.test.verb, Verb::Read | Verb::Atomic);
    let checks_atomic = s.validate && s.test.verb == Verb::Atomic;
    // Prepare buffers: the source of what is checked carries the pattern; the
    // target starts zeroed so stale data cannot pass.
    for (q, c) in conns.iter_mut().enumerate() {
        c.local_mut().fill(0);
        if s.validate && !checks_atomic {
            let source = match s.test.verb {
                Verb::Read => !client || s.bidirectional,
                _ => client || s.bidirectional,
            };
            if source {
                fill_pattern(c.local_mut(), q, size, slots);
            }
        }
    }
    // Receives go up before the barrier: on UC and UD a message that finds none is lost.
    let receives_bw =
        s.test.measure == Measure::Bw && s.test.verb.receives() && (!client || s.bidirectional);
    if receives_bw {
        loops::post_receives(conns, size32, u64::from(cfg.rx_depth).min(iters), slots)
            .map_err(|e| e.to_string())?;
    }
    if s.test.measure == Measure::Lat && s.test.verb.receives() {
        loops::post_receives(&mut conns[..1], size32, u64::from(cfg.rx_depth), 1)
            .map_err(|e| e.to_string())?;
    }
    // The server waits on the control channel while the client works alone; the
    // client tells it every second that it is alive.
    let server_idle = match s.test.measure {
        Measure::Bw => !s.test.verb.receives() && !s.bidirectional,
        Measure::Lat => matches!(s.test.verb, Verb::Read | Verb::Atomic),
    };
    // A small barrier so the pattern is in place before the peer starts.
    ch.send(&Message::Ready { size }).map_err(|e| e.to_string())?;
    ch.recv("ready").map_err(|e| e.to_string())?;
    let cpu_before = CpuSnapshot::now();
    let mut local: SizeResult = SizeResult { size, ..Default::default() };
    match s.test.measure {
        Measure::Bw => {
            let plan = BwPlan {
                op: op_for(cfg),
                size: size32,
                iters,
                duration,
                tx_depth: cfg.tx_depth,
                cq_mod: cfg.cq_mod,
                post_list: cfg.post_list,
                inline,
                slots,
                // A TCP write completes when the kernel has copied it: no peak to see.
                peak: duration.is_none() && iters <= 20_000 && !cfg.thread_per_connection(),
                timeout: cfg.timeout,
                events: cfg.events,
            };
            if sends(cfg) {
                let hb = if client && server_idle { Some(Heartbeat::start(ch)?) } else { None };
                let outcome = if cfg.thread_per_connection() {
                    bw_send_threads(conns, &plan, &cfg.pin)
                } else if receives_bw {
                    // send_bw -b: this side also receives, on the same queue pairs.
                    let posted = u64::from(cfg.rx_depth).min(iters);
                    let mut recv = loops::Reposting::new(conns.len(), iters, posted, size32, slots);
                    loops::bw_send(conns, &plan, Clock::start(), &mut recv)
                } else {
                    loops::bw_send(conns, &plan, Clock::start(), &mut loops::NoRecv)
                }
                .map_err(|e| e.to_string())?;
                if s.test.verb.receives() && duration.is_some() {
                    loops::send_end_markers(conns, cfg.timeout).map_err(|e| e.to_string())?;
                }
                drop(hb);
                let (total, per_qp, iterations) = bw_result(size, &outcome, &s.run);
                local.bw = Some(total);
                local.iterations = iterations;
                if per_qp.len() > 1 {
                    local.per_qp = per_qp;
                }
            } else if receives_bw {
                let plan = loops::RecvPlan {
                    size: size32,
                    iters,
                    posted: u64::from(cfg.rx_depth).min(iters),
                    slots,
                    timeout: cfg.timeout,
                    events: cfg.events,
                };
                let received = if cfg.thread_per_connection() {
                    // Each stream ends by itself (its sender's end of stream).
                    per_connection(conns, &cfg.pin, |conn| {
                        loops::bw_recv(std::slice::from_mut(conn), &plan, || false)
                    })
                    .map(|counts| counts.concat())
                } else {
                    loops::bw_recv(conns, &plan, || ch.has_pending())
                }
                .map_err(|e| e.to_string())?;
                local.iterations = received.first().copied().unwrap_or(0);
                local.received_bytes = Some(received.iter().sum::<u64>() * size);
            }
        }
        Measure::Lat => {
            let plan = LatPlan {
                size: size32,
                iters,
                duration,
                inline,
                rtt_factor: s.test.rtt_factor(),
                timeout: cfg.timeout,
                events: cfg.events,
                recv_posted: u64::from(cfg.rx_depth),
            };
            let conn = &mut conns[0];
            let rec = match plan.duration {
                None => lat_loop(cfg, conn, ch, &plan, loops::CountedSampler::new(&plan))?,
                Some(_) => lat_loop(cfg, conn, ch, &plan, loops::TimedSampler::new(&plan))?,
            };
            if client {
                if let Some(rec) = rec {
                    local.iterations = rec.count();
                    local.lat = Some(rec.stats());
                }
            }
        }
    }
    // The client's measurement goes to the server; with -b both ways. A side that
    // received checks the pattern once the sender says it is done. Each side's CPU
    // window ends here: the client's with its loop, the server's when the client's
    // result arrives.
    let mut shown = if client {
        let cost = cpu_cost(&cpu_before, &local, mhz);
        local.cpu.client = Some(cost);
        ch.send(&Message::Result { result: local.clone() }).map_err(|e| e.to_string())?;
        local.clone()
    } else {
        match ch.recv("the client's result").map_err(|e| e.to_string())? {
            Message::Result { result } => {
                local.cpu.server = Some(cpu_cost(&cpu_before, &result, mhz));
                result
            }
            other => return Err(format!("control channel: expected result, got {}", other.name())),
        }
    };
    // Validation on the receiving side(s), sent back to the client.
    let mut validation = None;
    if s.validate {
        let target = match s.test.verb {
            Verb::Read => client || s.bidirectional,
            _ => !client || s.bidirectional,
        };
        if target {
            let checked = match s.run {
                RunLength::Iterations(n) => n.min(u64::from(slots)),
                RunLength::Duration { .. } => 0,
            };
            for (q, c) in conns.iter().enumerate() {
                if checks_atomic {
                    let got = u64::from_ne_bytes(c.local()[..8].try_into().unwrap_or([0; 8]));
                    let want = match s.run {
                        RunLength::Iterations(n) => n,
                        RunLength::Duration { .. } => got,
                    };
                    validation = merge(
                        validation,
                        Validation {
                            checked_bytes: 8,
                            corrupted_bytes: if got == want { 0 } else { 8 },
                            first_corrupted_offset: (got != want).then_some(0),
                        },
                    );
                } else {
                    validation = merge(validation, check_pattern(c.local(), q, size, checked));
                }
            }
        }
    }
    // Exchange validation (and the server's own figures with -b).
    if client {
        match ch.recv("the server's result").map_err(|e| e.to_string())? {
            Message::Result { result } => {
                if let Some(v) = result.validation {
                    validation = merge(validation, v);
                }
                shown.cpu.server = result.cpu.server;
                if result.received_bytes.is_some() {
                    shown.received_bytes = result.received_bytes;
                }
                if s.bidirectional {
                    if let (Some(mine), Some(theirs)) = (local.bw, result.bw) {
                        let sum = measure::aggregate(&[(mine, 0), (theirs, 0)]);
                        shown.directions = Some([mine, theirs]);
                        shown.bw = Some(sum);
                    }
                }
            }
            other => return Err(format!("control channel: expected result, got {}", other.name())),
        }
        shown.validation = validation;
        ch.send(&Message::Result { result: shown.clone() }).map_err(|e| e.to_string())?;
    } else {
        let mut mine = local.clone();
        mine.validation = validation;
        ch.send(&Message::Result { result: mine }).map_err(|e| e.to_string())?;
        // The client's final view, so both sides print the same numbers.
        shown = match ch.recv("the final result").map_err(|e| e.to_string())? {
            Message::Result { result } => result,
            other => return Err(format!("control channel: expected result, got {}", other.name())),
        };
    }
    Ok(shown)
}

/// The CPU cost of this side's window, given what the size moved (the client's
/// figures: bandwidth × window, or the latency samples).
/// The latency loop of the test, on this side, with the run's kind of sampler.
fn lat_loop<C: Connection, S: loops::Sampler>(
    cfg: &TestConfig,
    conn: &mut C,
    ch: &mut Channel,
    plan: &LatPlan,
    samples: S,
) -> Result<Option<measure::LatencyRecorder>, String> {
    let client = cfg.is_client();
    let rec = match cfg.shared.test.verb {
        Verb::Read | Verb::Atomic if client => {
            let hb = Heartbeat::start(ch)?;
            let r = loops::lat_round_trip(conn, op_for(cfg), plan, samples);
            drop(hb);
            r
        }
        Verb::Read | Verb::Atomic => return Ok(None),
        Verb::Write => loops::lat_write_pingpong(conn, client, plan, samples, || ch.has_pending()),
        Verb::Send | Verb::Tcp => {
            loops::lat_send_pingpong(conn, client, plan, samples, || ch.has_pending())
        }
    };
    rec.map(Some).map_err(|e| e.to_string())
}

fn cpu_cost(before: &CpuSnapshot, moved: &SizeResult, mhz: Option<f64>) -> cpu::CpuCost {
    let after = CpuSnapshot::now();
    let window = after.secs_since(before);
    let (bytes, messages) = match (&moved.bw, &moved.lat) {
        (Some(bw), _) => ((bw.avg_bytes_per_sec * window) as u64, (bw.msg_rate * window) as u64),
        // Latency tests: a cost per message; per byte says nothing about 2-byte ping-pongs.
        (None, Some(lat)) => (0, lat.samples),
        (None, None) => (0, 0),
    };
    cpu::cost(before, &after, bytes, messages, mhz)
}

/// The CPU for connection `k` from a `--cpus` list (round robin), if any.
fn pin_for(cpus: &[usize], k: usize) -> Option<usize> {
    (!cpus.is_empty()).then(|| cpus[k % cpus.len()])
}

fn pin_thread(cpus: &[usize], k: usize) -> Result<(), LoopError> {
    if let Some(cpu) = pin_for(cpus, k) {
        ffi::os::pin_current_thread(cpu).map_err(|e| {
            LoopError::Transport(TransportError::Broken(format!(
                "--cpus: cannot pin stream {k} to CPU {cpu}: {e}"
            )))
        })?;
    }
    Ok(())
}

fn thread_panicked() -> LoopError {
    LoopError::Transport(TransportError::Broken("a stream's thread panicked".into()))
}

/// Runs `each` on every connection in a thread of its own (TCP streams, iperf3 -P),
/// stream k pinned to the k-th CPU of `cpus`; the results in connection order.
fn per_connection<C: Connection + Send, T: Send>(
    conns: &mut [C],
    cpus: &[usize],
    each: impl Fn(&mut C) -> Result<T, LoopError> + Sync,
) -> Result<Vec<T>, LoopError> {
    let each = &each;
    std::thread::scope(|scope| {
        let threads: Vec<_> = conns
            .iter_mut()
            .enumerate()
            .map(|(k, conn)| {
                scope.spawn(move || {
                    pin_thread(cpus, k)?;
                    each(conn)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|_| Err(thread_panicked()))).collect()
    })
}

/// The sender's loop on every stream at once, all on one clock so their figures
/// aggregate as the QPs of one loop do.
fn bw_send_threads<C: Connection + Send>(
    conns: &mut [C],
    plan: &BwPlan,
    cpus: &[usize],
) -> Result<BwOutcome, LoopError> {
    let clock = Clock::start();
    let outcomes = per_connection(conns, cpus, |conn| {
        loops::bw_send(std::slice::from_mut(conn), plan, clock, &mut loops::NoRecv)
    })?;
    let mut all = BwOutcome { recorders: Vec::new(), windowed: Vec::new() };
    for o in outcomes {
        all.recorders.extend(o.recorders);
        all.windowed.extend(o.windowed);
    }
    Ok(all)
}

/// TCP streams: the server listens on the control connection's address, the client
/// connects `-P` streams there.
mod tcp_side {
    use super::*;
    use crate::perf::config::TcpParams;
    use crate::transport::tcp::{
        connect_streams, DataListener, StreamOptions, TcpConnection, TcpEndpoint,
    };

    pub(super) fn setup(
        cfg: &TestConfig,
        ch: &mut Channel,
    ) -> Result<Setup<TcpConnection>, String> {
        let s = &cfg.shared;
        let t = s.tcp.unwrap_or(TcpParams { streams: 1, window: None, nodelay: false });
        let max_size = *s.sizes.iter().max().unwrap_or(&8);
        let opts = StreamOptions {
            window: t.window,
            nodelay: t.nodelay,
            timeout: cfg.timeout,
            buf_len: max_size as usize,
        };
        let conns = if cfg.is_client() {
            let ep = match ch.recv("endpoints").map_err(|e| e.to_string())? {
                Message::Endpoints { qps, .. } if qps.len() == 1 => {
                    serde_json::from_value::<TcpEndpoint>(qps[0].clone())
                        .map_err(|e| format!("control channel: malformed TCP endpoint: {e}"))?
                }
                other => {
                    return Err(format!(
                        "control channel: expected endpoints, got {}",
                        other.name()
                    ))
                }
            };
            connect_streams(&ep, t.streams, &opts).map_err(|e| e.to_string())?
        } else {
            let ip = ch.local_ip().ok_or("control channel: no local address")?;
            let listener = DataListener::bind(ip, &opts).map_err(|e| e.to_string())?;
            let ep = listener.endpoint().map_err(|e| e.to_string())?;
            ch.send(&Message::Accept { tool: tool() }).map_err(|e| e.to_string())?;
            ch.send(&Message::Endpoints {
                mtu: 0,
                qps: vec![serde_json::to_value(ep).map_err(|e| e.to_string())?],
            })
            .map_err(|e| e.to_string())?;
            listener
                .accept_streams(t.streams, &opts, || ch.has_pending())
                .map_err(|e| e.to_string())?
        };
        let line = |k: usize, a: Option<std::net::SocketAddr>| {
            format!(" address: {} stream {k}", a.map_or("?".into(), |a| a.to_string()))
        };
        let local = conns
            .iter()
            .enumerate()
            .map(|(k, c)| format!(" local{}", line(k, c.local_addr())))
            .collect();
        let remote = conns
            .iter()
            .enumerate()
            .map(|(k, c)| format!(" remote{}", line(k, c.peer_addr())))
            .collect();
        let mut params = params_of(cfg, "tcp".into(), "TCP".into(), None, 0, 0, 0);
        params.connection = "TCP".into();
        params.tcp = Some(TcpEffective {
            streams: t.streams,
            socket_buffer: conns.first().and_then(TcpConnection::window),
            nodelay: t.nodelay,
            pinned_cpus: (!cfg.pin.is_empty()).then(|| cfg.pin.clone()),
        });
        Ok(Setup { conns, params, local, remote })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_starts_late_is_reached_and_a_missing_one_is_not() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
            l.accept().map(drop)
        });
        let start = Instant::now();
        let got =
            connect_retrying("127.0.0.1", port, Duration::from_secs(1), Duration::from_secs(5));
        assert!(got.is_ok(), "refusals before the listener exists are retried");
        assert!(start.elapsed() >= Duration::from_millis(300));
        late.join().unwrap().unwrap();
        // Nobody ever listens: the window ends it, with the refusal as the reason.
        let start = Instant::now();
        let e =
            connect_retrying("127.0.0.1", port, Duration::from_secs(1), Duration::from_millis(300));
        assert!(
            matches!(e, Err(ConnectFailure::Io(ref e)) if e.kind() == std::io::ErrorKind::ConnectionRefused)
        );
        assert!(start.elapsed() < Duration::from_secs(3));
    }
}
