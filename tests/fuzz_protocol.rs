//! Fuzzing the control protocol on stable Rust (docs/protocol.md#fuzzing).
//!
//! `fuzz_decoders`: a seeded generator makes raw bytes, frame headers with boundary
//! lengths, real messages of every type (specs from `spec::rules` with random
//! requests) mutated at the JSON and the byte level, and hostile hellos; each input
//! goes through the frame decoder, the message decoder and, for a hello, what the
//! server does before it allocates anything (`TestSpec::validate` and everything the
//! engine derives from a validated spec). Nothing may panic, and a validated spec stays
//! within the limits of `spec::rules`. In process, no sockets: a million inputs take
//! seconds. `RDMABENCH_FUZZ_INPUTS` (default 20 000) chooses how many; each run takes a
//! fresh seed, which it prints first, and `RDMABENCH_FUZZ_SEED` replays one. `ci/test`
//! runs a million and checks the count this test prints.
//!
//! `serve_outlives_hostile_sessions`: a few dozen hostile sessions against a live
//! `rdmabench serve`, which must stay up and serve a normal client at the end.
//!
//! `fuzz_store_reader`: damaged results stores (a valid one's bytes flipped or cut)
//! read as `history`, `diff` and qualify's trend read them, and opened as a writer.

mod common;

use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::Value;

use rdmabench::backend::{self, SetupContext};
use rdmabench::environment::Environment;
use rdmabench::error::{one_line, Error, ErrorKind};
use rdmabench::measure::{BwStats, LatStats};
use rdmabench::results::{Granted, SizeResult, Validation};
use rdmabench::session::auth::{AuthKey, Nonce, Party, Transcript};
use rdmabench::session::protocol::{
    decode_header, encode, mismatches, Message, ProtocolError, HEADER_LEN, MAGIC, MAX_FRAME,
    MAX_HELLO, VERSION,
};
use rdmabench::spec::plan::SidePlan;
use rdmabench::spec::role::Role;
use rdmabench::spec::rules::{
    self, RdmaRequest, TcpRequest, MAX_BUFFERS, MAX_DURATION, MAX_MESSAGE, MAX_QPS, MAX_SIZES,
    MAX_STREAMS,
};
use rdmabench::spec::{
    AtomicType, Link, Local, Measure, RateUnits, RdmaSpec, RunLength, TcpSpec, TestKind, TestSpec,
    Verb,
};
use rdmabench::transport::nd::NdEndpoint;
use rdmabench::transport::tcp::TcpEndpoint;
use rdmabench::transport::{Backend, Service};

// ---------------------------------------------------------------------------------
// The generator: splitmix64, and values that sit on the limits.

/// splitmix64: tiny, fast, and every seed gives a full-period stream.
struct Rng(u64);

impl Rng {
    /// The stream of input `index` of a run seeded with `seed`: any input can be
    /// made again on its own.
    fn for_input(seed: u64, index: u64) -> Rng {
        let mut r = Rng(seed ^ index.wrapping_mul(0xd134_2543_de82_ef95));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 0 ..= n-1 (0 when n is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// Any width, the small ones as likely as the large: `bits` bits at most.
    fn log_uniform(&mut self, bits: u32) -> u64 {
        match self.below(u64::from(bits) + 1) {
            0 => 0,
            b => {
                let top = 1u64 << (b - 1);
                top | self.below(top)
            }
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Numbers on every limit of the rules and of the integer types.
#[rustfmt::skip]
const EDGES: [u64; 34] = [
    0, 1, 2, 4, 5, 7, 8, 9, 16, 64, 65, 100, 255, 256, 1024, 1025, 4096, 15_000, 15_001,
    16_384, 16_385, 65_536, 86_400, 86_401, 1 << 20, (1 << 20) + 1, 1 << 23, MAX_MESSAGE,
    MAX_MESSAGE + 1, u32::MAX as u64, 1 << 32, 1 << 53, 1 << 62, u64::MAX,
];

fn edgy_u64(rng: &mut Rng) -> u64 {
    match rng.below(4) {
        0 | 1 => *rng.pick(&EDGES),
        2 => rng.below(100),
        _ => rng.log_uniform(64),
    }
}

fn edgy_u32(rng: &mut Rng) -> u32 {
    u32::try_from(edgy_u64(rng)).unwrap_or(u32::MAX)
}

/// A message size: mostly plausible, sometimes on or past a limit.
fn size(rng: &mut Rng) -> u64 {
    match rng.below(10) {
        0..=3 => rng.log_uniform(31).max(1),
        4..=6 => 1 << rng.below(24),
        7 => rng.below(65_536) + 1,
        _ => edgy_u64(rng),
    }
}

fn sizes(rng: &mut Rng) -> Vec<u64> {
    let n = match rng.below(10) {
        0..=6 => rng.below(4) + 1,
        7 | 8 => rng.below(70),
        _ => *rng.pick(&[0, 63, 64, 65, 1000]),
    };
    (0..n).map(|_| size(rng)).collect()
}

fn run_length(rng: &mut Rng) -> RunLength {
    if rng.chance(70) {
        RunLength::Iterations(if rng.chance(50) { rng.below(20_000) } else { edgy_u64(rng) })
    } else {
        let secs = if rng.chance(50) { rng.below(20) } else { edgy_u64(rng) };
        let margin = if rng.chance(50) { rng.below(secs / 2 + 2) } else { edgy_u64(rng) };
        // Milliseconds, in the range the JSON's seconds carry exactly.
        RunLength::Duration { secs, margin_ms: margin % (1 << 40) }
    }
}

fn kind(rng: &mut Rng) -> TestKind {
    TestKind {
        verb: *rng.pick(&[Verb::Write, Verb::Read, Verb::Send, Verb::Atomic]),
        measure: *rng.pick(&[Measure::Bw, Measure::Lat]),
    }
}

fn service(rng: &mut Rng) -> Service {
    *rng.pick(&[Service::Rc, Service::Uc, Service::Ud])
}

fn maybe<T>(rng: &mut Rng, percent: u64, f: impl FnOnce(&mut Rng) -> T) -> Option<T> {
    if rng.chance(percent) {
        Some(f(rng))
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------
// Specs: real ones from the rules, then perturbed field by field as a hostile client
// would write them.

/// The flags every test has: `-s`, `-a`, `-n`, `-D`, `-f`.
struct RunFlags {
    size: Option<u64>,
    all: bool,
    iters: Option<u64>,
    duration: Option<u64>,
    margin: Option<u64>,
}

fn run_flags(rng: &mut Rng) -> RunFlags {
    RunFlags {
        size: maybe(rng, 40, size),
        all: rng.chance(15),
        iters: maybe(rng, 30, |r| if r.chance(80) { r.below(5000) + 5 } else { edgy_u64(r) }),
        duration: maybe(rng, 10, |r| r.below(10) + 1),
        margin: maybe(rng, 5, |r| r.below(4)),
    }
}

fn rdma_request(rng: &mut Rng) -> RdmaRequest {
    let small =
        |rng: &mut Rng| if rng.chance(80) { rng.below(600) as u32 + 1 } else { edgy_u32(rng) };
    let RunFlags { size, all, iters, duration, margin } = run_flags(rng);
    RdmaRequest {
        size,
        all,
        iters,
        duration,
        margin,
        tx_depth: maybe(rng, 20, small),
        rx_depth: maybe(rng, 20, small),
        qps: maybe(rng, 30, |r| if r.chance(80) { r.below(16) as u32 + 1 } else { edgy_u32(r) }),
        service: maybe(rng, 30, service),
        mtu: maybe(rng, 15, |r| *r.pick(&[256, 512, 1024, 2048, 4096, 0, 3000])),
        inline_size: maybe(rng, 15, small),
        cq_mod: maybe(rng, 15, small),
        post_list: maybe(rng, 10, |r| *r.pick(&[1, 2, 4, 5, 8, 32])),
        bidirectional: rng.chance(20),
        rdma_cm: rng.chance(10),
        events: rng.chance(10),
        outs: maybe(rng, 10, small),
        qp_timeout: maybe(
            rng,
            10,
            |r| if r.chance(80) { r.below(32) as u8 } else { r.next() as u8 },
        ),
        retry_count: maybe(
            rng,
            10,
            |r| if r.chance(80) { r.below(8) as u8 } else { r.next() as u8 },
        ),
        atomic_type: maybe(rng, 10, |r| {
            *r.pick(&[AtomicType::FetchAndAdd, AtomicType::CmpAndSwap])
        }),
        validate: rng.chance(20),
        backend: maybe(rng, 20, |r| *r.pick(&[Backend::Verbs, Backend::Nd])),
        sl: maybe(rng, 10, |r| if r.chance(80) { r.below(16) as u8 } else { r.next() as u8 }),
        traffic_class: maybe(rng, 10, |r| r.next() as u8),
        flow_label: maybe(rng, 10, |r| r.next() as u32),
        rate_limit: maybe(rng, 10, |r| {
            *r.pick(&[0.5, 10.0, 1e9, 0.0, -1.0, f64::NAN, f64::INFINITY, 1e-300])
        }),
        rate_units: maybe(rng, 10, |r| {
            *r.pick(&[RateUnits::MibPerSec, RateUnits::GbitPerSec, RateUnits::MsgPerSec])
        }),
        burst_size: maybe(rng, 10, small),
        warm_up: rng.chance(10),
        odp: rng.chance(5),
        hugepages: rng.chance(5),
        shared_receives: rng.chance(5),
        write_with_imm: rng.chance(5),
        send_with_imm: rng.chance(5),
        reversed: rng.chance(5),
        run_infinitely: rng.chance(5),
    }
}

fn tcp_request(rng: &mut Rng) -> TcpRequest {
    let RunFlags { size, all, iters, duration, margin } = run_flags(rng);
    TcpRequest {
        size,
        all,
        iters,
        duration,
        margin,
        streams: maybe(rng, 30, |r| if r.chance(80) { r.below(8) as u32 + 1 } else { edgy_u32(r) }),
        window: maybe(rng, 15, edgy_u64),
        nodelay: rng.chance(30),
    }
}

/// A spec the rules accept, from random flags (perftest's defaults when every try fails).
fn valid_spec(rng: &mut Rng) -> TestSpec {
    for _ in 0..8 {
        let spec = if rng.chance(70) {
            rules::rdma(kind(rng), &rdma_request(rng))
        } else {
            rules::tcp(*rng.pick(&[Measure::Bw, Measure::Lat]), &tcp_request(rng))
        };
        if let Ok(spec) = spec {
            return spec;
        }
    }
    rules::rdma(kind(rng), &RdmaRequest::default())
        .or_else(|_| rules::tcp(Measure::Bw, &TcpRequest::default()))
        .expect("the default TCP test is valid")
}

/// One to three fields set to values on or past their limits.
fn perturb(rng: &mut Rng, spec: &mut TestSpec) {
    for _ in 0..=rng.below(3) {
        match rng.below(8) {
            0 => spec.sizes = sizes(rng),
            1 => spec.run = run_length(rng),
            2 => spec.validate = !spec.validate,
            3 => spec.kind = kind(rng),
            4 => spec.link = valid_spec(rng).link,
            _ => match &mut spec.link {
                Link::Rdma(r) => perturb_rdma(rng, r),
                Link::Tcp(t) => match rng.below(3) {
                    0 => t.streams = edgy_u32(rng),
                    1 => t.window = maybe(rng, 80, edgy_u32),
                    _ => t.nodelay = !t.nodelay,
                },
            },
        }
    }
}

fn perturb_rdma(rng: &mut Rng, r: &mut RdmaSpec) {
    match rng.below(16) {
        0 => r.backend = *rng.pick(&[Backend::Verbs, Backend::Nd]),
        1 => r.service = service(rng),
        2 => r.qps = edgy_u32(rng),
        3 => r.bidirectional = !r.bidirectional,
        4 => r.rdma_cm = !r.rdma_cm,
        5 => r.atomic_type = *rng.pick(&[AtomicType::FetchAndAdd, AtomicType::CmpAndSwap]),
        6 => r.tx_depth = edgy_u32(rng),
        7 => r.rx_depth = edgy_u32(rng),
        8 => r.inline_size = edgy_u32(rng),
        9 => r.cq_mod = edgy_u32(rng),
        10 => r.post_list = edgy_u32(rng),
        11 => r.outs = maybe(rng, 80, edgy_u32),
        12 => r.events = !r.events,
        13 => r.qp_timeout = rng.next() as u8,
        14 => r.retry_count = rng.next() as u8,
        _ => r.mtu = maybe(rng, 80, edgy_u32),
    }
}

// ---------------------------------------------------------------------------------
// Messages of every type, with real contents.

/// What every input shares: this host's environment, read once.
struct Ctx {
    environment: Environment,
}

fn remote_buffer(rng: &mut Rng) -> ffi::types::RemoteBuffer {
    ffi::types::RemoteBuffer { addr: rng.next(), len: edgy_u64(rng), rkey: rng.next() as u32 }
}

/// One endpoint record of some backend, as `exchange_endpoints` sends it.
fn endpoint(rng: &mut Rng) -> Value {
    let addr = SocketAddr::from(([10, 0, 0, rng.next() as u8], rng.next() as u16));
    let value = match rng.below(3) {
        0 => serde_json::to_value(TcpEndpoint { addr, cookie: rng.next() }),
        1 => serde_json::to_value(NdEndpoint {
            buffer: remote_buffer(rng),
            listen: maybe(rng, 50, |_| addr),
            index: edgy_u32(rng),
        }),
        _ => {
            // A verbs record (its type is Linux's only).
            let qp = ffi::types::QpEndpoint {
                lid: rng.next() as u16,
                gid: ffi::types::Gid(rng.bytes(16).try_into().expect("16 bytes")),
                qpn: rng.next() as u32 & 0xff_ffff,
                psn: rng.next() as u32 & 0xff_ffff,
            };
            let (buffer, service) = (remote_buffer(rng), service(rng));
            Ok(serde_json::json!({ "qp": qp, "buffer": buffer, "service": service }))
        }
    };
    value.expect("endpoint records serialize")
}

fn error_kind(rng: &mut Rng) -> ErrorKind {
    *rng.pick(&[
        ErrorKind::Usage,
        ErrorKind::NoDevice,
        ErrorKind::Device,
        ErrorKind::PeerUnreachable,
        ErrorKind::PeerClosed,
        ErrorKind::PeerSilent,
        ErrorKind::Mismatch,
        ErrorKind::Refused,
        ErrorKind::Completion,
        ErrorKind::Threshold,
        ErrorKind::Validation,
        ErrorKind::Io,
        ErrorKind::Auth,
        ErrorKind::Busy,
    ])
}

fn size_result(rng: &mut Rng) -> SizeResult {
    let bw = BwStats {
        messages: rng.below(1 << 20),
        bytes: rng.next(),
        window_ns: rng.next(),
        avg_bytes_per_sec: rng.next() as f64 / 7.0,
        peak_bytes_per_sec: maybe(rng, 50, |r| r.next() as f64),
        min_bytes_per_sec: maybe(rng, 50, |r| r.next() as f64 / 3.0),
        interval_ns: maybe(rng, 50, Rng::next),
        msg_rate: rng.below(1 << 30) as f64 / 3.0,
    };
    let lat = LatStats {
        samples: rng.below(1 << 20),
        t_min_us: 1.25,
        t_typical_us: rng.below(1000) as f64 / 3.0,
        histogram: vec![[rng.below(100), rng.below(100)]; rng.index(4)],
        ..Default::default()
    };
    let measure = rng.chance(50);
    SizeResult {
        size: size(rng),
        iterations: rng.next(),
        bw: measure.then_some(bw),
        per_qp: if rng.chance(20) { vec![bw; rng.index(5)] } else { Vec::new() },
        per_thread: if rng.chance(10) { vec![bw; rng.index(4)] } else { Vec::new() },
        directions: maybe(rng, 10, |_| [bw, bw]),
        lat: (!measure).then_some(lat),
        validation: maybe(rng, 20, |r| Validation {
            checked_bytes: r.next(),
            corrupted_bytes: r.below(3),
            first_corrupted_offset: maybe(r, 50, Rng::next),
        }),
        received_bytes: maybe(rng, 30, Rng::next),
        cpu: Default::default(),
        // Never sent by rdmabench; a peer that says so is refused.
        partial: rng.chance(2),
        // A peer's counters travel (never shown: each side shows its own port's).
        // A peer's interval verdicts travel too (never judged: each side judges its own).
        interval_verdicts: maybe(rng, 10, |r| rdmabench::results::IntervalVerdicts {
            judged: r.below(1000),
            failed: r.below(1000),
        }),
        counters: maybe(rng, 10, |r| rdmabench::counters::CounterChanges {
            port: "rxe0/1".into(),
            changes: [("hw_counters/sent_pkts".to_string(), r.next())].into(),
        }),
        stability: maybe(rng, 20, |r| rdmabench::measure::Stability {
            samples: r.below(1 << 20),
            interval_ns: maybe(r, 50, Rng::next),
            cv: r.below(1000) as f64 / 100.0,
            lowest: r.below(1 << 30) as f64,
            median: r.below(1 << 30) as f64,
            highest: r.below(1 << 30) as f64,
            spike: r.below(100) as f64 / 10.0,
            warm_up_dropped: maybe(r, 50, |r| r.below(100)),
            ..Default::default()
        }),
        intervals: maybe(rng, 5, Rng::next),
        samples_ns: None,
        progress: None,
    }
}

/// A nonce as a client sends it: 32 hex digits (sometimes not quite).
fn nonce(rng: &mut Rng) -> String {
    let n: String = (0..16).map(|_| format!("{:02x}", rng.next() as u8)).collect();
    if rng.chance(90) {
        n
    } else {
        n[..rng.index(n.len())].to_string()
    }
}

/// A message of any type, as this version sends it.
fn message(rng: &mut Rng, ctx: &Ctx) -> Message {
    let tool = rdmabench::engine::tool;
    match rng.below(12) {
        0..=2 => {
            Message::Hello { tool: tool(), spec: valid_spec(rng), auth: maybe(rng, 30, nonce) }
        }
        9 => Message::Challenge { nonce: nonce(rng) },
        10 => Message::Proof { proof: nonce(rng).repeat(2) },
        3 => Message::Accept { tool: tool() },
        4 => Message::Endpoints {
            mtu: *rng.pick(&[0, 256, 1024, 4096]),
            qps: (0..rng.below(5)).map(|_| endpoint(rng)).collect(),
        },
        5 => {
            let spec = valid_spec(rng);
            let local = Local::default();
            let setup = SetupContext::new(&spec, &local, None, rng.chance(50));
            let retries = maybe(rng, 50, |r| (r.next() as u8, r.next() as u8));
            let granted = Granted {
                device: "rxe0".into(),
                ib_port: 1,
                link_layer: "Ethernet".into(),
                gid_index: maybe(rng, 50, |r| r.next() as u8),
                mtu: 1024,
                inline_size: rng.below(256) as u32,
                outs: 16,
                qp_timeout: retries.map(|(timeout, _)| timeout),
                retry_count: retries.map(|(_, count)| count),
                path: None,
            };
            let mut environment = ctx.environment.clone();
            environment.cpus = rng.next() as u32;
            Message::Describe { environment, params: backend::params(&setup, granted) }
        }
        6 => Message::Ready { size: size(rng) },
        7 => Message::Heartbeat,
        8 => Message::Result { result: size_result(rng) },
        _ if rng.chance(50) => Message::Done,
        _ => Message::Error {
            message: "parameter mismatch: sizes: client [65536], server [4096]".into(),
            kind: maybe(rng, 80, error_kind),
        },
    }
}

// ---------------------------------------------------------------------------------
// Mutations: of the JSON value, of its text, of the bytes.

/// A string value starting with this is written as raw JSON text (numbers no
/// `Value` holds, `NaN`, deep nesting).
const RAW: &str = "\u{1}raw:";

/// Literals on and past the limits of every number type, and the wrong types.
#[rustfmt::skip]
const LITERALS: [&str; 28] = [
    "0", "-1", "1", "2147483647", "2147483648", "4294967295", "4294967296",
    "9007199254740992", "4611686018427387904", "18446744073709551615",
    "18446744073709551616", "-9223372036854775809", "1e308", "-1e308", "1e400", "1e-400",
    "1.5", "-0", "0.0", "NaN", "Infinity", "\"NaN\"", "\"-1\"", "\"\"", "null", "true", "[]",
    "{}",
];

/// Bytes that break JSON text, or UTF-8.
const PIECES: [&[u8]; 10] =
    [b"\"", b"{", b"}", b",", b"\\u0000", b"\\ud800", b"\xff\xfe", b"\xc3", b"\0", b"RDMB"];

/// Every message type's name, one in another case, and names no version knows.
#[rustfmt::skip]
const TYPE_NAMES: [&str; 12] = [
    "hello", "accept", "endpoints", "describe", "ready", "heartbeat", "result", "error",
    "done", "Hello", "teleport", "",
];

fn raw(text: impl Into<String>) -> Value {
    Value::String(format!("{RAW}{}", text.into()))
}

/// A node of `v`: the root, or deeper.
fn node<'a>(v: &'a mut Value, rng: &mut Rng) -> &'a mut Value {
    let n = match v {
        Value::Array(a) => a.len(),
        Value::Object(m) => m.len(),
        _ => 0,
    };
    if n == 0 || rng.chance(25) {
        return v;
    }
    let i = rng.index(n);
    match v {
        Value::Array(a) => node(&mut a[i], rng),
        Value::Object(m) => node(m.values_mut().nth(i).expect("i < len"), rng),
        _ => v,
    }
}

fn mutate_value(v: &mut Value, rng: &mut Rng) {
    let target = node(v, rng);
    match rng.below(9) {
        0 | 1 => *target = raw(*rng.pick(&LITERALS)),
        2 => match target {
            Value::Object(m) if !m.is_empty() => {
                let k = m.keys().nth(rng.index(m.len())).expect("i < len").clone();
                m.remove(&k);
            }
            Value::Array(a) if !a.is_empty() => {
                a.remove(rng.index(a.len()));
            }
            other => *other = Value::Null,
        },
        3 => {
            // Nesting past serde_json's recursion limit (128), written as text so this
            // side never recurses that deep either.
            let depth = *rng.pick(&[2, 100, 127, 128, 129, 1000, 100_000]);
            let (open, close) = if rng.chance(50) { ("[", "]") } else { ("{\"a\":", "}") };
            *target = raw(format!("{}{}{}", open.repeat(depth), target, close.repeat(depth)));
        }
        4 => {
            let n = if rng.chance(90) { 100 } else { *rng.pick(&[65_535, 300_000]) };
            let c = *rng.pick(&["x", "é", "\\u0000", "\\ud800", "\\\""]);
            *target = raw(format!("\"{}\"", c.repeat(n / c.len())));
        }
        5 => match target {
            Value::Array(a) if !a.is_empty() => {
                let n = if rng.chance(90) { 65 } else { *rng.pick(&[1025, 20_000]) };
                let first = a[0].clone();
                // Grown no further than a frame can carry (a bigger one is refused by its
                // header): repeated growth of a grown element once reached 23 GB.
                if json_len(&first).saturating_mul(n) <= 2 * MAX_FRAME as usize {
                    a.resize(n, first);
                }
            }
            Value::Object(m) => {
                m.insert(format!("unknown{}", rng.below(3)), Value::from(rng.next()));
            }
            other if json_len(other) <= MAX_FRAME as usize => {
                *other = Value::Array(vec![other.clone(); 3]);
            }
            _ => {}
        },
        6 => {
            if let Some(n) = target.as_u64() {
                *target = Value::from(n.wrapping_add(*rng.pick(&[1, u64::MAX])));
            } else {
                *target = Value::from(edgy_u64(rng));
            }
        }
        7 => {
            // Another message type's name, or none this version knows.
            let name = *rng.pick(&TYPE_NAMES);
            if let Some(m) = v.as_object_mut() {
                m.insert("type".into(), Value::from(name));
            }
        }
        _ => *target = Value::from(edgy_u64(rng)),
    }
}

/// The length of `v`'s JSON text.
fn json_len(v: &Value) -> usize {
    serde_json::to_string(v).map_or(usize::MAX, |t| t.len())
}

/// JSON text of `v`, keys sometimes twice (the second with another value), RAW strings
/// written as they are.
fn write_json(v: &Value, rng: &mut Rng, dup: u64, out: &mut String) {
    match v {
        Value::String(s) if s.starts_with(RAW) => out.push_str(&s[RAW.len()..]),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(x, rng, dup, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                write_json(x, rng, dup, out);
                if rng.chance(dup) {
                    out.push(',');
                    out.push_str(&Value::from(k.as_str()).to_string());
                    out.push(':');
                    let literal = *rng.pick(&LITERALS);
                    out.push_str(literal);
                }
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Byte-level damage: flips, truncation, splicing with another message, insertions.
fn mutate_bytes(b: &mut Vec<u8>, rng: &mut Rng, other: &[u8]) {
    let at = |rng: &mut Rng, b: &Vec<u8>| rng.index(b.len() + 1);
    match rng.below(6) {
        0 => {
            for _ in 0..=rng.below(4) {
                if !b.is_empty() {
                    let i = rng.index(b.len());
                    b[i] ^= 1 << rng.below(8);
                }
            }
        }
        1 => {
            let i = at(rng, b);
            b.truncate(i);
        }
        2 => {
            let (i, j) = (at(rng, b), rng.index(other.len() + 1));
            b.truncate(i);
            b.extend_from_slice(&other[j..]);
        }
        3 => {
            let i = at(rng, b);
            let piece = *rng.pick(&PIECES);
            b.splice(i..i, piece.iter().copied());
        }
        4 => {
            let i = at(rng, b);
            let j = (i + rng.index(32)).min(b.len());
            b.drain(i..j);
        }
        _ => {
            let i = at(rng, b);
            let n = rng.index(16) + 1;
            let noise = rng.bytes(n);
            b.splice(i..i, noise);
        }
    }
}

/// `msg`'s JSON, damaged `rounds` times in the value, the text or the bytes.
fn mutated(rng: &mut Rng, ctx: &Ctx, msg: &Message, rounds: u64) -> Vec<u8> {
    let mut v = serde_json::to_value(msg).expect("messages serialize");
    let structural = rng.below(rounds + 1);
    for _ in 0..structural {
        mutate_value(&mut v, rng);
    }
    let mut text = String::new();
    let dup = if rng.chance(20) { 10 } else { 0 };
    write_json(&v, rng, dup, &mut text);
    let mut bytes = text.into_bytes();
    if structural < rounds {
        let other = serde_json::to_vec(&message(rng, ctx)).expect("messages serialize");
        for _ in structural..rounds {
            mutate_bytes(&mut bytes, rng, &other);
        }
    }
    bytes
}

// ---------------------------------------------------------------------------------
// Frames.

fn header(magic: [u8; 4], version: u16, reserved: u16, len: u32) -> Vec<u8> {
    let mut h = magic.to_vec();
    h.extend_from_slice(&version.to_be_bytes());
    h.extend_from_slice(&reserved.to_be_bytes());
    h.extend_from_slice(&len.to_be_bytes());
    h
}

/// `payload` behind a header that is right, or wrong in one field.
fn framed(rng: &mut Rng, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = if rng.chance(80) {
        header(MAGIC, VERSION, 0, len)
    } else {
        let magic = if rng.chance(70) { MAGIC } else { *rng.pick(&[*b"6.06", *b"RDMA", *b"rdmb"]) };
        let version = if rng.chance(70) { VERSION } else { *rng.pick(&[0, 1, 3, u16::MAX]) };
        let reserved = if rng.chance(70) { 0 } else { rng.next() as u16 };
        let len = *rng.pick(&[
            0,
            1,
            len.saturating_sub(1),
            len,
            len + 1,
            MAX_FRAME,
            MAX_FRAME + 1,
            u32::MAX,
        ]);
        header(magic, version, reserved, len)
    };
    f.extend_from_slice(payload);
    f
}

/// Which generator made an input (named in the report).
const GENERATORS: [&str; 5] =
    ["raw bytes", "frame header", "mutated message", "hostile hello", "valid hello"];

/// One input of generator `g`.
fn generate(rng: &mut Rng, ctx: &Ctx, g: usize) -> Vec<u8> {
    match g {
        // Raw bytes, a few or many, sometimes behind our magic.
        0 => {
            let n = if rng.chance(90) { rng.index(64) } else { rng.index(4096) };
            let mut b = rng.bytes(n);
            if rng.chance(30) && b.len() >= 4 {
                b[..4].copy_from_slice(&MAGIC);
            }
            b
        }
        // A header with any fields and boundary lengths; a short or real payload.
        1 => {
            let len =
                *rng.pick(&[0, 1, 2, 12, 100, MAX_FRAME - 1, MAX_FRAME, MAX_FRAME + 1, u32::MAX]);
            let len = if rng.chance(20) { rng.next() as u32 } else { len };
            let version = if rng.chance(80) { VERSION } else { rng.next() as u16 };
            let mut f =
                header(MAGIC, version, if rng.chance(80) { 0 } else { rng.next() as u16 }, len);
            let payload = if len <= 4096 && rng.chance(50) {
                rng.bytes(len as usize)
            } else if len == MAX_FRAME && rng.chance(2) {
                // The largest payload there is: JSON padded with whitespace.
                let mut p = serde_json::to_vec(&message(rng, ctx)).expect("messages serialize");
                p.resize(MAX_FRAME as usize, b' ');
                p
            } else {
                let n = rng.index(64);
                rng.bytes(n)
            };
            f.extend_from_slice(&payload);
            f
        }
        // A message of any type, damaged.
        2 => {
            let msg = message(rng, ctx);
            // Sometimes whole: every type's round trip is checked too.
            let rounds = rng.below(4);
            let payload = mutated(rng, ctx, &msg, rounds);
            if rng.chance(70) {
                framed(rng, &payload)
            } else {
                payload
            }
        }
        // A hello whose spec breaks a rule, or a damaged one.
        3 => {
            let mut spec = valid_spec(rng);
            perturb(rng, &mut spec);
            let msg = Message::Hello { tool: "fuzz".into(), spec, auth: None };
            let rounds = if rng.chance(60) { 0 } else { rng.below(3) + 1 };
            let payload = mutated(rng, ctx, &msg, rounds);
            framed(rng, &payload)
        }
        // A hello as this version sends it.
        _ => {
            let msg = Message::Hello { tool: "fuzz".into(), spec: valid_spec(rng), auth: None };
            framed(rng, &serde_json::to_vec(&msg).expect("messages serialize"))
        }
    }
}

// ---------------------------------------------------------------------------------
// What the server does with an input, and what must hold.

#[derive(Default)]
struct Seen {
    headers: u64,
    frames: u64,
    /// Messages decoded, by type.
    messages: std::collections::BTreeMap<&'static str, u64>,
    hellos_refused: u64,
    hellos_valid: u64,
}

/// The input as the first bytes of a connection (`Channel::recv_any`: header, then
/// payload), and as a payload on its own.
fn exercise(input: &[u8], seen: &mut Seen) {
    if let Some(h) = input.get(..HEADER_LEN) {
        let h: &[u8; HEADER_LEN] = h.try_into().expect("12 bytes");
        match decode_header(h) {
            Ok(len) => {
                seen.headers += 1;
                assert!(len <= MAX_FRAME, "a {len}-byte payload passed the header check");
                let body = &input[HEADER_LEN..];
                if let Some(payload) = body.get(..len as usize) {
                    seen.frames += 1;
                    if h[6..8] == [0, 0] {
                        let again = encode(payload).expect("a payload within the limit encodes");
                        assert_eq!(again, input[..HEADER_LEN + payload.len()]);
                    }
                    decode(payload, seen);
                }
            }
            Err(e) => {
                assert!(matches!(e, ProtocolError::Invalid(_)), "{e:?}");
                assert_eq!(Error::from(e).kind, ErrorKind::Refused);
            }
        }
    }
    decode(input, seen);
}

/// The payload as `recv_any` decodes it, and as `accept_hello` handles the result.
fn decode(payload: &[u8], seen: &mut Seen) {
    let msg = match serde_json::from_slice::<Message>(payload) {
        Ok(msg) => msg,
        Err(e) => {
            let e = Error::from(ProtocolError::Invalid(format!("malformed hello: {e}")));
            assert_eq!(e.kind, ErrorKind::Refused);
            assert!(!one_line(&e.to_string()).contains('\n'));
            return;
        }
    };
    *seen.messages.entry(msg.name()).or_default() += 1;
    // What this side decoded, it encodes, and decodes again.
    let text = serde_json::to_vec(&msg).expect("a decoded message encodes");
    let back: Message = serde_json::from_slice(&text).expect("an encoded message decodes");
    // Floats too, to the last bit (serde_json's float_roundtrip: without it a hello's rate
    // limit of 1e-30 came back as 9.999999999999999e-31).
    assert_eq!(back, msg, "the round trip changed the message");
    match msg {
        Message::Hello { spec, auth, .. } => {
            // As `auth::check_client` reads a client's nonce.
            if let Some(n) = auth {
                let _ = Nonce::from_hex(&n);
            }
            hello(&spec, seen)
        }
        Message::Challenge { nonce } => {
            // As `auth::prove_to_server` reads a server's nonce.
            let _ = Nonce::from_hex(&nonce);
        }
        Message::Proof { proof } => {
            // As either side checks the other's proof.
            static KEY: std::sync::OnceLock<(AuthKey, TestSpec)> = std::sync::OnceLock::new();
            let (key, spec) = KEY.get_or_init(|| {
                let spec = rules::tcp(Measure::Bw, &TcpRequest::default()).unwrap();
                (AuthKey::from_bytes(b"a fuzzing key, strong enough 7").unwrap(), spec)
            });
            let mine = Nonce::from_hex(&"5a".repeat(16)).unwrap();
            let theirs = Nonce::from_hex(&"a5".repeat(16)).unwrap();
            let t = Transcript::new(mine, theirs, spec, [127, 0, 0, 1].into());
            let genuine = key.proof(Party::Server, &t);
            // Exactly the genuine proof holds (hex in either case); nothing else.
            assert!(key.verify(Party::Server, &t, &genuine));
            let holds = key.verify(Party::Server, &t, &proof);
            assert_eq!(holds, proof.eq_ignore_ascii_case(&genuine), "{proof}");
        }
        Message::Error { message, kind } => {
            let peer = Error::new(kind.unwrap_or(ErrorKind::Refused), message);
            let e = Error::from(ProtocolError::Peer(peer));
            assert_eq!(e.kind, kind.unwrap_or(ErrorKind::Refused));
            let _ = one_line(&e.to_string());
        }
        Message::Endpoints { qps, .. } => {
            // As `exchange_endpoints` reads the peer's records, for each backend.
            for q in &qps {
                let _ = TcpEndpoint::deserialize(q);
                let _ = NdEndpoint::deserialize(q);
                #[cfg(target_os = "linux")]
                let _ = rdmabench::transport::verbs::VerbsEndpoint::deserialize(q);
            }
        }
        other => assert!(!other.name().is_empty()),
    }
}

/// The server's side of a hello: what `serve` and `engine::serve_client` do with the
/// spec before anything is allocated.
fn hello(spec: &TestSpec, seen: &mut Seen) {
    // Before validation: serve names the test; a one-shot server compares the specs.
    let _ = (spec.id(), spec.title());
    static REFERENCE: std::sync::OnceLock<TestSpec> = std::sync::OnceLock::new();
    let reference = REFERENCE.get_or_init(|| {
        rules::tcp(Measure::Bw, &TcpRequest::default()).expect("the default spec is valid")
    });
    let _ = mismatches(spec, reference);
    match spec.validate() {
        Err(e) => {
            seen.hellos_refused += 1;
            assert_eq!(e.kind, ErrorKind::Usage, "{e}");
            assert!(!e.message.is_empty() && !e.message.contains('\n'), "{e:?}");
        }
        Ok(()) => {
            seen.hellos_valid += 1;
            within_limits(spec);
        }
    }
}

/// Everything the engine derives from a validated spec, and the limits it must keep.
fn within_limits(spec: &TestSpec) {
    let n = spec.sizes.len();
    assert!((1..=MAX_SIZES).contains(&n), "{n} sizes");
    assert!(spec.sizes.iter().all(|s| (1..=MAX_MESSAGE).contains(s)), "sizes {:?}", spec.sizes);
    assert_eq!(Some(spec.max_size()), spec.sizes.iter().copied().max());
    match spec.run {
        RunLength::Iterations(i) => assert!(i >= 5, "-n {i}"),
        RunLength::Duration { secs, .. } => {
            assert!(secs <= MAX_DURATION, "-D {secs}");
            assert!(spec.run.window().is_some_and(|w| !w.is_zero()), "{:?}", spec.run);
            assert_eq!(n, 1, "a duration run has one size");
        }
    }
    let conns = spec.connections();
    let per_connection = match &spec.link {
        Link::Rdma(r) => {
            assert!((1..=MAX_QPS).contains(&r.qps), "-q {}", r.qps);
            // The side's plan: one buffer holds every slot of every size.
            let plan = SidePlan::new(spec, true);
            let c = plan.connection();
            for &s in &spec.sizes {
                let slots = plan.slots.slots(s);
                assert!((2..=64).contains(&slots), "{slots} slots for {s} B");
                let need = s * u64::from(slots);
                assert!(need <= c.buf_len as u64, "{slots} x {s} B overrun {} B", c.buf_len);
            }
            assert!(c.tx_depth >= 1 && c.rx_depth >= 1, "{:?}", (c.tx_depth, c.rx_depth));
            c.buf_len as u64
        }
        Link::Tcp(TcpSpec { streams, window, .. }) => {
            assert!((1..=MAX_STREAMS).contains(streams), "-P {streams}");
            assert!(window.is_none_or(|w| (4096..=1 << 30).contains(&w)), "-w {window:?}");
            // backend::tcp: one message per stream.
            spec.max_size()
        }
    };
    // What the rules bound (`TestSpec::buffer_bytes`) is what the backends allocate.
    let total = per_connection.checked_mul(u64::from(conns));
    let bound = spec.buffer_bytes();
    assert!(bound <= MAX_BUFFERS, "{bound} B of buffers");
    assert_eq!(total, Some(bound), "{conns} x {per_connection} B");
    let q = SidePlan::new(spec, false).queues;
    assert!(q.tx_depth >= 1 && q.rx_depth >= 1, "{q:?}");
    assert!((1..=q.tx_depth).contains(&q.cq_mod), "{q:?}");
    assert!((1..=q.tx_depth).contains(&q.post_list), "{q:?}");
    let (client, server) = (Role::new(spec, true), Role::new(spec, false));
    assert!(client.leads != server.leads, "one side leads: {client:?} {server:?}");
    // The client, or the server under --reversed.
    let (leader, other) = if client.leads { (client, server) } else { (server, client) };
    if spec.kind.measure == Measure::Bw {
        assert!(leader.sends && !client.initiates && !server.initiates, "{client:?} {server:?}");
    } else {
        assert!(client.leads, "latency tests are never reversed");
        assert!(client.initiates && !server.initiates && !client.sends && !server.sends);
    }
    assert!(!other.heartbeat, "only the leader beats");
    assert!(!spec.validate || client.pattern_target || server.pattern_target);
    let agreed = spec.agreement();
    assert!(["test", "sizes", "run", "validate"].iter().all(|k| agreed.contains_key(*k)));
    assert!(mismatches(spec, spec).is_empty());
    let text = serde_json::to_vec(spec).expect("a spec encodes");
    let back: TestSpec = serde_json::from_slice(&text).expect("and decodes");
    assert_eq!(&back, spec);
}

// ---------------------------------------------------------------------------------
// The in-process run.

thread_local! {
    /// Set while this thread runs inputs: a panic is recorded here, not printed.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Panics of the fuzzing thread are recorded; every other thread's print as usual.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                CAUGHT.with(|c| *c.borrow_mut() = Some(info.to_string()));
            } else {
                previous(info);
            }
        }));
    });
}

/// A seed of its own for each run (the clock's nanoseconds and the process id, mixed):
/// every run explores inputs the earlier ones did not.
fn fresh_seed() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    Rng::for_input(nanos, u64::from(std::process::id())).next()
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => {
            let v = v.trim().replace('_', "");
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{name}={v}: a number (decimal or 0x…)"))
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first failure: where it happened and the input, whole in a file and its start
/// in hex.
fn report(seed: u64, index: u64, g: usize, input: Option<&[u8]>, why: &str) {
    eprintln!("fuzz: input #{index} (seed {seed:#x}, generator '{}') panicked:", GENERATORS[g]);
    eprintln!("  {}", why.replace('\n', "\n  "));
    match input {
        None => eprintln!("  (while generating the input)"),
        Some(input) => {
            let path = std::env::temp_dir().join(format!("rdmabench-fuzz-{seed:x}-{index}.bin"));
            let saved = std::fs::write(&path, input).map_or_else(
                |e| format!("not saved: {e}"),
                |()| format!("saved to {}", path.display()),
            );
            let shown = &input[..input.len().min(1024)];
            eprintln!("  {} bytes ({saved}); the first {}, hex:", input.len(), shown.len());
            eprintln!("  {}", hex(shown));
        }
    }
    eprintln!(
        "  again: RDMABENCH_FUZZ_SEED={seed:#x} RDMABENCH_FUZZ_INPUTS={} cargo test --test fuzz_protocol",
        index + 1
    );
}

#[test]
fn fuzz_decoders() {
    let inputs = env_u64("RDMABENCH_FUZZ_INPUTS", 20_000);
    let seed = env_u64("RDMABENCH_FUZZ_SEED", fresh_seed());
    // Printed before the run: a run that hangs or is killed can be replayed too.
    println!("fuzz: seed {seed:#x} (again: RDMABENCH_FUZZ_SEED={seed:#x})");
    install_hook();
    let ctx = Ctx { environment: Environment::host() };
    let mut seen = Seen::default();
    let mut per_generator = [0u64; GENERATORS.len()];
    let (mut panics, mut first) = (0u64, None);
    let start = Instant::now();
    CATCHING.with(|c| c.set(true));
    for index in 0..inputs {
        let mut rng = Rng::for_input(seed, index);
        let g = match rng.below(20) {
            0 | 1 => 0,
            2..=4 => 1,
            5..=11 => 2,
            12..=16 => 3,
            _ => 4,
        };
        per_generator[g] += 1;
        let made = panic::catch_unwind(AssertUnwindSafe(|| generate(&mut rng, &ctx, g)));
        let failed = match &made {
            Ok(input) => {
                panic::catch_unwind(AssertUnwindSafe(|| exercise(input, &mut seen))).is_err()
            }
            Err(_) => true,
        };
        if failed {
            panics += 1;
            if first.is_none() {
                let why = CAUGHT.with(|c| c.borrow_mut().take()).unwrap_or_default();
                first = Some((index, g, made.ok(), why));
            }
        }
    }
    CATCHING.with(|c| c.set(false));
    let took = start.elapsed();
    let mix: Vec<String> =
        GENERATORS.iter().zip(per_generator).map(|(name, n)| format!("{n} {name}")).collect();
    println!("fuzz: inputs: {}", mix.join(", "));
    let messages: Vec<String> = seen.messages.iter().map(|(t, n)| format!("{n} {t}")).collect();
    println!(
        "fuzz: decoded: {} valid headers, {} whole frames; messages: {}; hellos: {} refused, {} within the limits",
        seen.headers,
        seen.frames,
        messages.join(", "),
        seen.hellos_refused,
        seen.hellos_valid
    );
    println!(
        "fuzz: {inputs} inputs, seed {seed:#x}, {panics} panics, in {:.1} s",
        took.as_secs_f64()
    );
    if let Some((index, g, input, why)) = first {
        report(seed, index, g, input.as_deref(), &why);
        panic!("fuzz: {panics} of {inputs} inputs panicked; the first is shown above");
    }
    if inputs >= 10_000 {
        // Each path is reached: a generator that silently makes only garbage would
        // test nothing.
        assert!(seen.hellos_valid > inputs / 20 && seen.hellos_refused > inputs / 20);
        assert!(seen.frames > inputs / 4, "{} whole frames", seen.frames);
        assert_eq!(seen.messages.len(), 11, "every message type decoded: {:?}", seen.messages);
    }
}

// ---------------------------------------------------------------------------------
// Hostile sessions against a live `rdmabench serve`.

/// What the server answered: the message of each frame it sent, until it closed.
fn answers(bytes: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some(h) = rest.get(..HEADER_LEN) {
        let Ok(len) = decode_header(h.try_into().expect("12 bytes")) else { break };
        let Some(payload) = rest[HEADER_LEN..].get(..len as usize) else { break };
        out.push(serde_json::from_slice(payload).expect("serve sends well-formed messages"));
        rest = &rest[HEADER_LEN + len as usize..];
    }
    out
}

/// The error `serve` answered with, if it answered one.
fn refusal(bytes: &[u8]) -> String {
    answers(bytes)
        .into_iter()
        .find_map(|m| match m {
            Message::Error { message, kind } => Some(format!("{message} ({kind:?})")),
            _ => None,
        })
        .unwrap_or_default()
}

struct Serve {
    child: std::process::Child,
    port: u16,
}

impl Serve {
    /// One hostile session: `bytes`, then (unless `hold`) the end of what we send; what
    /// the server sent back until it closed. Every wait is bounded.
    fn session(&mut self, bytes: &[u8], hold: bool) -> Vec<u8> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut s =
            TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("serve listens");
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        // The server may close before it has read everything: not an error here.
        let _ = s.write_all(bytes);
        if !hold {
            let _ = s.shutdown(Shutdown::Write);
        }
        let start = Instant::now();
        let mut answer = Vec::new();
        let closed = match s.read_to_end(&mut answer) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        assert!(closed, "serve did not close the session within 15 s");
        assert!(start.elapsed() < Duration::from_secs(15));
        self.alive();
        answer
    }

    fn alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            let mut stderr = String::new();
            if let Some(e) = self.child.stderr.as_mut() {
                let _ = e.read_to_string(&mut stderr);
            }
            panic!("serve exited ({status}); stderr: {stderr}");
        }
    }
}

fn changed(spec: &TestSpec, change: impl FnOnce(&mut TestSpec)) -> TestSpec {
    let mut spec = spec.clone();
    change(&mut spec);
    spec
}

fn rdma_of(spec: &mut TestSpec) -> &mut RdmaSpec {
    match &mut spec.link {
        Link::Rdma(r) => r,
        Link::Tcp(_) => panic!("an RDMA spec"),
    }
}

fn tcp_of(spec: &mut TestSpec) -> &mut TcpSpec {
    match &mut spec.link {
        Link::Tcp(t) => t,
        Link::Rdma(_) => panic!("a TCP spec"),
    }
}

fn hello_frame(spec: &TestSpec) -> Vec<u8> {
    let msg = Message::Hello { tool: "hostile".into(), spec: spec.clone(), auth: None };
    encode(&serde_json::to_vec(&msg).unwrap()).unwrap()
}

fn frame_of(msg: &Message) -> Vec<u8> {
    encode(&serde_json::to_vec(msg).unwrap()).unwrap()
}

#[test]
fn serve_outlives_hostile_sessions() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let p = port.to_string();
    let args = ["serve", "--bind", "127.0.0.1", "-p", &p, "--timeout", "2"];
    let mut serve = Serve { child: common::spawn(false, &args), port };
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "serve did not start listening");
        serve.alive();
        std::thread::sleep(Duration::from_millis(50));
    }
    let tcp_bw =
        rules::tcp(Measure::Bw, &TcpRequest { iters: Some(100), ..Default::default() }).unwrap();
    let write_bw =
        rules::rdma(TestKind { verb: Verb::Write, measure: Measure::Bw }, &RdmaRequest::default())
            .unwrap();

    // Not our protocol: garbage, HTTP, another magic or version.
    let mut rng = Rng::for_input(0x40571e, 0);
    serve.session(&rng.bytes(100), false);
    let a = serve.session(b"GET / HTTP/1.0\r\n\r\n", false);
    assert!(refusal(&a).contains("does not speak rdmabench"), "{}", refusal(&a));
    let a = serve.session(&header(MAGIC, 7, 0, 2), false);
    assert!(refusal(&a).contains("protocol version mismatch"), "{}", refusal(&a));
    // Truncated: half a header, a header without its payload, half a payload.
    let whole = hello_frame(&tcp_bw);
    serve.session(&whole[..6], false);
    serve.session(&whole[..HEADER_LEN], false);
    serve.session(&whole[..whole.len() / 2], false);
    // A header announcing the largest hello, then silence: dropped after serve's --timeout.
    let start = Instant::now();
    serve.session(&header(MAGIC, VERSION, 0, MAX_HELLO), true);
    assert!(start.elapsed() >= Duration::from_millis(1500), "serve waited for the payload");
    // Half a header, then silence.
    serve.session(&whole[..5], true);
    // Lengths over the limit: refused before anything is read or allocated.
    // A stranger's frame over the hello limit (64 KiB) is refused as one over the
    // frame limit (1 MiB) is.
    for len in [MAX_HELLO + 1, MAX_FRAME, MAX_FRAME + 1, u32::MAX] {
        let a = serve.session(&header(MAGIC, VERSION, 0, len), true);
        assert!(refusal(&a).contains("over the"), "{len}: {}", refusal(&a));
    }
    // Malformed JSON, deep nesting, a 1 MiB payload of whitespace.
    let a = serve.session(&encode(b"{\"type\":\"hello\",").unwrap(), false);
    assert!(refusal(&a).contains("malformed hello"), "{}", refusal(&a));
    let deep = format!("{}{}", "[".repeat(30_000), "]".repeat(30_000));
    let a = serve.session(&encode(deep.as_bytes()).unwrap(), false);
    assert!(refusal(&a).contains("malformed hello"), "{}", refusal(&a));
    let a = serve.session(&encode(&vec![b' '; MAX_HELLO as usize]).unwrap(), false);
    assert!(refusal(&a).contains("malformed hello"), "{}", refusal(&a));
    // Valid hellos with limits broken, and TCP tests with absurd sizes and streams:
    // refused by the rules, before any set-up.
    let cases = [
        ("-q 1025", changed(&write_bw, |s| rdma_of(s).qps = 1025)),
        ("-t 4294967295", changed(&write_bw, |s| rdma_of(s).tx_depth = u32::MAX)),
        ("1 to 64 sizes", changed(&write_bw, |s| s.sizes = vec![4096; 65])),
        ("1 to 64 sizes", changed(&write_bw, |s| s.sizes.clear())),
        ("-s 2147483648", changed(&write_bw, |s| s.sizes = vec![MAX_MESSAGE + 1])),
        (
            "-D 86401",
            changed(&write_bw, |s| s.run = RunLength::Duration { secs: 86_401, margin_ms: 0 }),
        ),
        ("-n 0", changed(&write_bw, |s| s.run = RunLength::Iterations(0))),
        ("-s 18446744073709551615", changed(&tcp_bw, |s| s.sizes = vec![u64::MAX])),
        ("-s 0", changed(&tcp_bw, |s| s.sizes = vec![1, 0])),
        ("-P 129", changed(&tcp_bw, |s| tcp_of(s).streams = 129)),
        ("-P 0", changed(&tcp_bw, |s| tcp_of(s).streams = 0)),
        ("-w 4294967295", changed(&tcp_bw, |s| tcp_of(s).window = Some(u32::MAX))),
        (
            "bytes of buffers",
            changed(&tcp_bw, |s| {
                s.sizes = vec![MAX_MESSAGE];
                tcp_of(s).streams = MAX_STREAMS;
            }),
        ),
    ];
    for (want, spec) in &cases {
        let a = serve.session(&hello_frame(spec), false);
        assert!(refusal(&a).contains(want), "{want}: {}", refusal(&a));
        assert!(refusal(&a).ends_with("(Some(Usage))"), "{want}: {}", refusal(&a));
    }
    // Heartbeats: alone then a close, before a hello, and after an accepted one.
    let beat = frame_of(&Message::Heartbeat);
    serve.session(&beat.repeat(200), false);
    let mut beats_then_hello = beat.repeat(50);
    beats_then_hello.extend(hello_frame(&tcp_bw));
    beats_then_hello.extend(beat.repeat(50));
    beats_then_hello.extend(frame_of(&Message::Done));
    let a = serve.session(&beats_then_hello, false);
    assert!(matches!(answers(&a).first(), Some(Message::Accept { .. })), "{:?}", answers(&a));
    assert!(refusal(&a).contains("expected endpoints, got done"), "{}", refusal(&a));
    serve.session(&beat.repeat(3), true);
    // Another message instead of the hello; an error instead of it.
    let a = serve.session(&frame_of(&Message::Ready { size: u64::MAX }), false);
    assert!(refusal(&a).contains("expected hello, got ready"), "{}", refusal(&a));
    let hostile_error = Message::Error { message: "\u{1b}[2J\n".repeat(1000), kind: None };
    serve.session(&frame_of(&hostile_error), false);
    // After an accepted hello: endpoints that are not what a TCP server expects.
    let mut session = hello_frame(&tcp_bw);
    let records = (0..1000).map(|_| endpoint(&mut rng)).collect();
    session.extend(frame_of(&Message::Endpoints { mtu: u32::MAX, qps: records }));
    let a = serve.session(&session, false);
    assert!(refusal(&a).contains("the peer has 1000 QPs"), "{}", refusal(&a));
    // A bare connect and close.
    serve.session(b"", false);
    // Random inputs of every generator.
    let ctx = Ctx { environment: Environment::host() };
    for index in 0..30 {
        let mut rng = Rng::for_input(0x40571e, index);
        let input = generate(&mut rng, &ctx, index as usize % GENERATORS.len());
        serve.session(&input, false);
    }

    // After all that, a normal client is served.
    let client = common::finish(
        common::spawn(false, &["tcp-lat", "-n", "100", "-p", &p, "--timeout", "10", "127.0.0.1"]),
        Duration::from_secs(60),
    );
    assert!(client.status.success(), "tcp-lat: {}", common::err(&client));
    // serve logs a client before it accepts the next: once this closes, the line is out.
    serve.session(b"", false);
    serve.child.kill().unwrap();
    let out = serve.child.wait_with_output().unwrap();
    let (log, stderr) = (common::text(&out), common::err(&out));
    assert!(!stderr.contains("panicked"), "{stderr}");
    let last = log.lines().last().unwrap_or_default();
    assert!(last.contains("tcp_lat ok"), "{log}");
    // One line per session that said something (a bare connect and close is not logged).
    assert!(log.lines().count() >= 40, "{log}");
}

/// The store's readers (and its writer's checks) against damaged databases: a valid
/// store with a few runs, its bytes flipped or cut, read as `history`, `diff` and a
/// qualification's trend read it. Nothing may panic or take long: SQLite reports the
/// damage, and rdmabench makes it one error. `RDMABENCH_FUZZ_STORES` (default 500)
/// chooses how many files; the seed is `fuzz_decoders`'s variable.
#[test]
fn fuzz_store_reader() {
    use rdmabench::store::{NewRun, PointRow, Store};
    let inputs = env_u64("RDMABENCH_FUZZ_STORES", 500);
    let seed = env_u64("RDMABENCH_FUZZ_SEED", fresh_seed());
    println!("fuzz_store_reader: seed {seed:#x} (again: RDMABENCH_FUZZ_SEED={seed:#x})");
    let dir = common::scratch("rdmabench-fuzz-store");
    let good = dir.join("good.db");
    let _ = std::fs::remove_file(&good);
    {
        let mut store = Store::open(&good).unwrap();
        for k in 0..4 {
            let point = |p: &str| PointRow {
                point: p.into(),
                figure: "BW average".into(),
                unit: "MiB/s".into(),
                median: Some(1000.0 + f64::from(k)),
                runs: 3,
            };
            let run = NewRun {
                kind: "qualify".into(),
                started: format!("2026-12-0{}T00:00:00Z", k + 1),
                host: "h".into(),
                profile: "p".into(),
                report: format!("{{\"kind\":\"qualify\",\"n\":{k}}}"),
                points: vec![point("tcp_bw 64K"), point("tcp_bw 1M")],
                ..Default::default()
            };
            store.record(&run).unwrap();
        }
    }
    let bytes = std::fs::read(&good).unwrap();
    install_hook();
    for index in 0..inputs {
        let mut rng = Rng::for_input(seed, index);
        let mut input = bytes.clone();
        if rng.chance(20) {
            input.truncate(rng.index(input.len()));
        } else {
            for _ in 0..=rng.log_uniform(6) {
                let at = rng.index(input.len());
                input[at] = rng.next() as u8;
            }
        }
        let path = dir.join("fuzzed.db");
        for leftover in ["fuzzed.db", "fuzzed.db-wal", "fuzzed.db-shm", "fuzzed.db-journal"] {
            let _ = std::fs::remove_file(dir.join(leftover));
        }
        std::fs::write(&path, &input).unwrap();
        let start = Instant::now();
        CATCHING.with(|c| c.set(true));
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            if let Ok(store) = Store::open_read(&path) {
                let _ = store.list(&Default::default());
                let _ = store.run(1);
                let _ = store.run(3);
                let _ = store.trend("p", "h", 20);
            }
            let _ = Store::open(&path).map(|s| s.list(&Default::default()));
        }));
        CATCHING.with(|c| c.set(false));
        if outcome.is_err() {
            let why = CAUGHT.with(|c| c.borrow_mut().take()).unwrap_or_default();
            let saved = dir.join(format!("fuzzed-{seed:x}-{index}.db"));
            let _ = std::fs::write(&saved, &input);
            panic!(
                "fuzz_store_reader: input #{index} (seed {seed:#x}, {}) panicked: {why}",
                saved.display()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "fuzz_store_reader: input #{index} (seed {seed:#x}) took {:?}",
            start.elapsed()
        );
    }
    println!("fuzz_store_reader: {inputs} damaged stores read without a panic");
}
