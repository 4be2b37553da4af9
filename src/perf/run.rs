//! One perftest-style run, either side: control channel, connection set-up, each size
//! in turn, results exchanged, the report printed by both sides.

// Only the verbs backend drives these helpers for now; NetworkDirect will on Windows.
#![cfg_attr(not(target_os = "linux"), allow(unused_imports, dead_code))]

use std::io::Write;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::config::{AtomicType, Measure, RunLength, TestConfig, Verb};
use super::loops::{self, BwPlan, Clock, LatPlan};
use super::report::{self, EffectiveParams, RunReport, SizeResult, Validation};
use crate::measure::{self, BwStats};
use crate::session::protocol::{mismatches, Channel, Message};
use crate::transport::{Connection, ConnectionConfig, Op};

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
    #[cfg(target_os = "linux")]
    {
        verbs_side::run(cfg, out)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (cfg, out);
        Err("no RDMA backend for this platform yet: NetworkDirect support is planned".into())
    }
}

/// Connects the control channel to `host:port`. A refused connection is retried
/// until `timeout`, so a client may start before its server; then one clear error.
fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, String> {
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve server '{host}': {e}"))?
        .collect();
    let start = Instant::now();
    loop {
        let mut last = None;
        for addr in &addrs {
            match TcpStream::connect_timeout(addr, timeout) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && start.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Some(e) => {
                return Err(format!(
                    "cannot reach the server at {host}:{port}: {e} (after {} s; is `rdmabench` running there, with -p {port}?)",
                    start.elapsed().as_secs()
                ))
            }
            None => return Err(format!("server '{host}' resolves to no address")),
        }
    }
}

/// Waits up to `timeout` for one client on `port`.
fn accept(port: u16, timeout: Duration) -> Result<TcpStream, String> {
    let listener = TcpListener::bind(("0.0.0.0", port))
        .map_err(|e| format!("cannot listen on TCP port {port}: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let start = Instant::now();
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if start.elapsed() > timeout {
                    return Err(format!(
                        "no client connected to port {port} within {} s (--timeout)",
                        timeout.as_secs()
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(format!("accepting on port {port}: {e}")),
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

    struct Setup {
        conns: Vec<VerbsConnection>,
        params: EffectiveParams,
        local: Vec<String>,
        remote: Vec<String>,
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
    ) -> Result<Setup, String> {
        let s = &cfg.shared;
        let max_size = *s.sizes.iter().max().unwrap_or(&8);
        let slots = slots_for(max_size);
        let conn_cfg = ConnectionConfig {
            buf_len: (max_size.max(8) * u64::from(slots)) as usize,
            service: s.service,
            tx_depth: if s.test.measure == Measure::Lat {
                cfg.tx_depth.max(16)
            } else {
                cfg.tx_depth
            },
            rx_depth: cfg.rx_depth.max(1),
            max_inline: cfg.inline_size,
            events: cfg.events,
        };
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
        // Exchange endpoints: the client sends first, as perftest.
        let send_mine = |ch: &mut Channel| {
            ch.send(&Message::Endpoints {
                mtu: t.mtu().bytes(),
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
        let peers: Vec<VerbsEndpoint> = qps
            .into_iter()
            .map(serde_json::from_value)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("control channel: malformed endpoint: {e}"))?;
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

    pub(super) fn run(cfg: &TestConfig, out: &mut dyn Write) -> Result<u8, String> {
        let s = &cfg.shared;
        let (mut ch, cm_listener) = match &cfg.host {
            Some(host) => {
                let stream = connect(host, cfg.port, cfg.timeout)?;
                let mut ch = Channel::new(stream, cfg.timeout).map_err(|e| e.to_string())?;
                ch.send(&Message::Hello { tool: tool(), params: s.clone() })
                    .map_err(|e| e.to_string())?;
                match ch
                    .recv("the server's answer")
                    .map_err(|e| format!("the server refused: {e}"))?
                {
                    Message::Accept { .. } => {}
                    other => {
                        return Err(format!(
                            "control channel: expected accept, got {}",
                            other.name()
                        ))
                    }
                }
                (ch, None)
            }
            None => {
                let stream = accept(cfg.port, cfg.timeout)?;
                let mut ch = Channel::new(stream, cfg.timeout).map_err(|e| e.to_string())?;
                let hello = ch.recv("hello").map_err(|e| e.to_string())?;
                let Message::Hello { params, .. } = hello else {
                    ch.send_error("expected hello");
                    return Err(format!("control channel: expected hello, got {}", hello.name()));
                };
                let diff = mismatches(&params, s);
                if !diff.is_empty() {
                    let msg = format!("parameter mismatch: {}", diff.join("; "));
                    ch.send_error(&msg);
                    return Err(msg);
                }
                let cm = if s.rdma_cm {
                    let any = std::net::SocketAddr::from(([0, 0, 0, 0], cfg.port));
                    Some(CmListener::bind(any).map_err(|e| format!("-R: {e}"))?)
                } else {
                    None
                };
                ch.send(&Message::Accept { tool: tool() }).map_err(|e| e.to_string())?;
                (ch, cm)
            }
        };
        let result = session(cfg, &mut ch, cm_listener, out);
        if let Err(msg) = &result {
            ch.send_error(msg);
        }
        result
    }

    fn session(
        cfg: &TestConfig,
        ch: &mut Channel,
        cm: Option<CmListener>,
        out: &mut dyn Write,
    ) -> Result<u8, String> {
        let s = &cfg.shared;
        let mut setup = setup(cfg, ch, cm)?;
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
            let r = run_size(cfg, &mut setup.conns, ch, size)?;
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
        finish(cfg, report, out)
    }

    /// Runs one size on this side; returns the result both sides print.
    fn run_size(
        cfg: &TestConfig,
        conns: &mut [VerbsConnection],
        ch: &mut Channel,
        size: u64,
    ) -> Result<SizeResult, String> {
        let s = &cfg.shared;
        let client = cfg.is_client();
        let slots = slots_for(size);
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
        let receives_bw = s.test.measure == Measure::Bw
            && s.test.verb == Verb::Send
            && (!client || s.bidirectional);
        if receives_bw {
            loops::post_receives(conns, size32, u64::from(cfg.rx_depth).min(iters), slots)
                .map_err(|e| e.to_string())?;
        }
        if s.test.measure == Measure::Lat && s.test.verb == Verb::Send {
            loops::post_receives(&mut conns[..1], size32, u64::from(cfg.rx_depth), 1)
                .map_err(|e| e.to_string())?;
        }
        // The server waits on the control channel while the client works alone; the
        // client tells it every second that it is alive.
        let server_idle = match s.test.measure {
            Measure::Bw => s.test.verb != Verb::Send && !s.bidirectional,
            Measure::Lat => matches!(s.test.verb, Verb::Read | Verb::Atomic),
        };
        // A small barrier so the pattern is in place before the peer starts.
        ch.send(&Message::Ready { size }).map_err(|e| e.to_string())?;
        ch.recv("ready").map_err(|e| e.to_string())?;
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
                    peak: duration.is_none() && iters <= 20_000,
                    timeout: cfg.timeout,
                    events: cfg.events,
                };
                let receives = s.test.verb == Verb::Send && (!client || s.bidirectional);
                if sends(cfg) {
                    let hb = if client && server_idle { Some(Heartbeat::start(ch)?) } else { None };
                    let outcome = if receives {
                        // send_bw -b: this side also receives, on the same queue pairs.
                        let posted = u64::from(cfg.rx_depth).min(iters);
                        let mut recv =
                            loops::Reposting::new(conns.len(), iters, posted, size32, slots);
                        loops::bw_send(conns, &plan, Clock::start(), &mut recv)
                    } else {
                        loops::bw_send(conns, &plan, Clock::start(), &mut loops::NoRecv)
                    }
                    .map_err(|e| e.to_string())?;
                    if s.test.verb == Verb::Send && duration.is_some() {
                        loops::send_end_markers(conns, cfg.timeout).map_err(|e| e.to_string())?;
                    }
                    drop(hb);
                    let (total, per_qp, iterations) = bw_result(size, &outcome, &s.run);
                    local.bw = Some(total);
                    local.iterations = iterations;
                    if per_qp.len() > 1 {
                        local.per_qp = per_qp;
                    }
                } else if receives {
                    let received = loops::bw_recv(
                        conns,
                        size32,
                        iters,
                        u64::from(cfg.rx_depth).min(iters),
                        slots,
                        cfg.timeout,
                        || ch.has_pending(),
                    )
                    .map_err(|e| e.to_string())?;
                    local.iterations = received.first().copied().unwrap_or(0);
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
                };
                let conn = &mut conns[0];
                let rec = match s.test.verb {
                    Verb::Read | Verb::Atomic if client => {
                        let hb = Heartbeat::start(ch)?;
                        let r = loops::lat_round_trip(conn, op_for(cfg), &plan);
                        drop(hb);
                        Some(r.map_err(|e| e.to_string())?)
                    }
                    Verb::Read | Verb::Atomic => None,
                    Verb::Write => Some(
                        loops::lat_write_pingpong(conn, client, &plan, || ch.has_pending())
                            .map_err(|e| e.to_string())?,
                    ),
                    Verb::Send => Some(
                        loops::lat_send_pingpong(conn, client, &plan, || ch.has_pending())
                            .map_err(|e| e.to_string())?,
                    ),
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
        // received checks the pattern once the sender says it is done.
        let mut shown = if client {
            ch.send(&Message::Result { result: local.clone() }).map_err(|e| e.to_string())?;
            local.clone()
        } else {
            match ch.recv("the client's result").map_err(|e| e.to_string())? {
                Message::Result { result } => result,
                other => {
                    return Err(format!("control channel: expected result, got {}", other.name()))
                }
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
                    if s.bidirectional {
                        if let (Some(mine), Some(theirs)) = (local.bw, result.bw) {
                            let sum = measure::aggregate(&[(mine, 0), (theirs, 0)]);
                            shown.directions = Some([mine, theirs]);
                            shown.bw = Some(sum);
                        }
                    }
                }
                other => {
                    return Err(format!("control channel: expected result, got {}", other.name()))
                }
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
                other => {
                    return Err(format!("control channel: expected result, got {}", other.name()))
                }
            };
        }
        Ok(shown)
    }
}
