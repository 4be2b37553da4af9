//! perftest's rules, once: the defaults each test takes ([`rdma`], [`tcp`]) and the
//! limits on what a peer may ask for; the invariants every spec must hold before it
//! runs are `super::validate`'s. Messages name the flag, as a user knows it.

use std::time::Duration;

use super::{
    AtomicType, Link, Measure, RdmaSpec, RunLength, TcpSpec, TestKind, TestSpec, Verb,
    MAX_SWEEP_SIZE,
};
use crate::error::{Error, Refusal};
use crate::transport::{Backend, Service};

/// Largest message, bytes (verbs' `max_msg_sz` is 2^31 on every device we know).
pub const MAX_MESSAGE: u64 = (u32::MAX / 2) as u64;
/// Most sizes one run may have (a full sweep has 23).
pub const MAX_SIZES: usize = 64;
/// Longest `-D`, seconds (a day).
pub const MAX_DURATION: u64 = 86_400;
/// Most queue pairs (`-q`).
pub const MAX_QPS: u32 = 1024;
/// Most TCP streams (`-P`).
pub const MAX_STREAMS: u32 = 128;
/// Most buffer memory a test holds on one side, all its QPs or streams together, bytes
/// (4 GiB: the two slots of one largest message). A peer's hello cannot make a server
/// allocate, and touch, more.
pub const MAX_BUFFERS: u64 = 4 << 30;

/// perftest's flags for an RDMA test, as given (None: not given).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RdmaRequest {
    /// `-s`.
    pub size: Option<u64>,
    /// `-a`.
    pub all: bool,
    /// `-n`.
    pub iters: Option<u64>,
    /// `-D`.
    pub duration: Option<u64>,
    /// `-f`.
    pub margin: Option<u64>,
    /// `-t`.
    pub tx_depth: Option<u32>,
    /// `-r`.
    pub rx_depth: Option<u32>,
    /// `-q`.
    pub qps: Option<u32>,
    /// `-c`.
    pub service: Option<Service>,
    /// `-m`.
    pub mtu: Option<u32>,
    /// `-u`.
    pub qp_timeout: Option<u8>,
    /// `--retry_count`.
    pub retry_count: Option<u8>,
    /// `-S`.
    pub sl: Option<u8>,
    /// `--tclass`.
    pub traffic_class: Option<u8>,
    /// `--flow_label`.
    pub flow_label: Option<u32>,
    /// `--rate_limit`.
    pub rate_limit: Option<f64>,
    /// `--rate_units`.
    pub rate_units: Option<super::RateUnits>,
    /// `--burst_size`.
    pub burst_size: Option<u32>,
    /// `--perform_warm_up`.
    pub warm_up: bool,
    /// `--odp`.
    pub odp: bool,
    /// `--use_hugepages`.
    pub hugepages: bool,
    /// `--use-srq`.
    pub shared_receives: bool,
    /// `--write_with_imm`.
    pub write_with_imm: bool,
    /// `--send_with_imm`.
    pub send_with_imm: bool,
    /// `--reversed`.
    pub reversed: bool,
    /// `--run_infinitely`.
    pub run_infinitely: bool,
    /// `-I`.
    pub inline_size: Option<u32>,
    /// `-Q`.
    pub cq_mod: Option<u32>,
    /// `-l`.
    pub post_list: Option<u32>,
    /// `-b`.
    pub bidirectional: bool,
    /// `-R`.
    pub rdma_cm: bool,
    /// `-e`.
    pub events: bool,
    /// `-o`.
    pub outs: Option<u32>,
    /// `-A`.
    pub atomic_type: Option<AtomicType>,
    /// `--validate`.
    pub validate: bool,
    /// `--backend` (None: the platform's own).
    pub backend: Option<Backend>,
}

/// The flags of a TCP test, as given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TcpRequest {
    /// `-s`.
    pub size: Option<u64>,
    /// `-a`.
    pub all: bool,
    /// `-n`.
    pub iters: Option<u64>,
    /// `-D`.
    pub duration: Option<u64>,
    /// `-f`.
    pub margin: Option<u64>,
    /// `-P`.
    pub streams: Option<u32>,
    /// `-w`.
    pub window: Option<u64>,
    /// `-N`.
    pub nodelay: bool,
}

/// Accepts `65536`, `64K`, `8M`, `1G` (binary multiples, as perftest).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 =
        digits.parse().map_err(|_| format!("'{text}' is not a size (like 65536, 64K, 8M)"))?;
    n.checked_mul(1 << shift)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("size '{text}' is out of range"))
}

/// `--timeout SECS`: at least 1 second, at most a day.
pub fn timeout(secs: u64) -> Result<Duration, Error> {
    match secs {
        0 => Err(Error::usage("--timeout 0: at least 1 second")),
        s if s > 86_400 => Err(Error::usage(format!("--timeout {s}: at most 86400 seconds"))),
        s => Ok(Duration::from_secs(s)),
    }
}

/// `--max-time SECS`, a test's or `serve`'s: 1 s to a day.
pub fn max_time(secs: u64) -> Result<Duration, Error> {
    match secs {
        1..=86_400 => Ok(Duration::from_secs(secs)),
        s => Err(Error::usage(format!("--max-time {s}: from 1 to 86400 seconds"))),
    }
}

pub use crate::facts::cpus::{cpu_list_within, MAX_CPUS};

/// `--cpus 0,2-3` → `[0, 2, 3]`, through [`cpu_list_within`].
///
/// # Errors
/// Empty, malformed or over [`MAX_CPUS`] (kind `usage`).
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, Error> {
    let shown = crate::text::clean(text);
    let bad = |why: String| Error::usage(format!("--cpus '{shown}': {why}"));
    let mut left = MAX_CPUS;
    match cpu_list_within(text, &mut left) {
        Ok(cpus) if cpus.is_empty() => Err(bad("a CPU list like 0,2-3".into())),
        Ok(cpus) => Ok(cpus),
        Err(why) => Err(bad(why)),
    }
}

/// `-D`, `-f`, `-n` and `-a` into a [`RunLength`].
fn run_length(
    duration: Option<u64>,
    margin: Option<u64>,
    iters: Option<u64>,
    all: bool,
    default_iters: u64,
) -> Result<RunLength, Error> {
    if duration.is_some() && iters.is_some() {
        return Err(Error::refusal(
            Refusal::exclusive("-D", "-n"),
            "-D and -n exclude each other: run for a time or for a number of iterations",
        ));
    }
    if duration.is_some() && all {
        return Err(Error::refusal(
            Refusal::exclusive("-D", "-a"),
            "-D cannot be combined with -a (a sweep runs each size for -n iterations)",
        ));
    }
    if margin.is_some() && duration.is_none() {
        return Err(Error::refusal(Refusal::needs("-f", "-D"), "-f: a margin needs -D"));
    }
    Ok(match (duration, iters) {
        (Some(secs), _) => RunLength::Duration {
            secs,
            // D/4 exactly (-D 2: 0.5 s), or -f's whole seconds.
            margin_ms: margin.map_or(secs.saturating_mul(250), |m| m.saturating_mul(1000)),
        },
        (None, Some(n)) => RunLength::Iterations(n),
        (None, None) => RunLength::Iterations(default_iters),
    })
}

/// `-a` and `-s` exclude each other: a sweep has its own sizes.
fn one_way_to_size(all: bool, size: Option<u64>) -> Result<(), Error> {
    match (all, size) {
        (true, Some(s)) => Err(Error::refusal(
            Refusal::exclusive("-a", "-s"),
            format!("-a -s {s}: a sweep runs every size from 2 B to 8 MiB; drop -s or -a"),
        )),
        _ => Ok(()),
    }
}

/// `-a`: every power of two from 2 B up to `top`.
fn sweep(top: u64) -> Vec<u64> {
    (1..24).map(|i| 1u64 << i).filter(|&s| s <= top).collect()
}

/// Applies perftest's defaults for `kind` to `r` and checks the result.
///
/// # Errors
/// One line naming the flag and what is wrong with it (kind `usage`).
pub fn rdma(kind: TestKind, r: &RdmaRequest) -> Result<TestSpec, Error> {
    let bw = kind.measure == Measure::Bw;
    let service = r.service.unwrap_or(Service::Rc);
    // (-s other than 8 on atomics and -A on other tests: the spec shows them, and its
    // validation refuses them, whoever built it.)
    if kind.verb == Verb::Atomic && r.all {
        return Err(Error::refusal(
            Refusal::not_this_test("-a", kind.id()),
            "-a: atomics have one size (8 bytes); there is nothing to sweep",
        ));
    }
    one_way_to_size(r.all, r.size)?;
    let sizes = if r.all {
        sweep(if service == Service::Ud {
            u64::from(r.mtu.unwrap_or(4096))
        } else {
            MAX_SWEEP_SIZE
        })
    } else {
        vec![match (kind.verb, r.size) {
            (_, Some(s)) => s,
            (Verb::Atomic, None) => 8,
            (_, None) if bw => 65536,
            (_, None) => 2,
        }]
    };
    let write_bw = kind == TestKind { verb: Verb::Write, measure: Measure::Bw };
    let run = run_length(r.duration, r.margin, r.iters, r.all, if write_bw { 5000 } else { 1000 })?;
    let run = if r.run_infinitely { endless(run, r.margin.is_some()) } else { run };
    let iters = run.iterations();
    let at_most_iters = |v: u32| u32::try_from(u64::from(v).min(iters)).unwrap_or(v);
    let tx_depth = at_most_iters(r.tx_depth.unwrap_or(if bw { 128 } else { 1 }));
    let immediate = immediate(kind, r)?;
    // A write with immediate data consumes a receive, as a send does.
    let rx_depth = match (r.rx_depth, kind.receives() || immediate) {
        (Some(d), true) => at_most_iters(d),
        (Some(d), false) => d,
        // perftest's DEF_RX_SEND for every test that receives: a latency loop reposts
        // only while more messages are due, so the first 512 cost nothing inside it.
        (None, true) => at_most_iters(512),
        (None, false) => 1,
    };
    let inline_size = r.inline_size.unwrap_or_else(|| default_inline(kind, service));
    let cq_mod = r.cq_mod.unwrap_or_else(|| default_cq_mod(r, service, &sizes));
    let spec = TestSpec {
        kind,
        sizes,
        run,
        validate: r.validate,
        link: Link::Rdma(RdmaSpec {
            backend: r.backend.unwrap_or_else(Backend::native),
            service,
            qps: r.qps.unwrap_or(1),
            bidirectional: r.bidirectional,
            rdma_cm: r.rdma_cm,
            atomic_type: r.atomic_type.unwrap_or_default(),
            tx_depth,
            rx_depth,
            inline_size,
            // The moderation fits the queue; an out-of-range -Q stays as given, for
            // validate to name.
            cq_mod: if cq_mod == 0 || cq_mod > 1024 { cq_mod } else { cq_mod.min(tx_depth).max(1) },
            post_list: r.post_list.unwrap_or(1).max(1),
            outs: r.outs,
            events: r.events,
            mtu: r.mtu,
            qp_timeout: r.qp_timeout.unwrap_or(super::DEFAULT_QP_TIMEOUT),
            retry_count: r.retry_count.unwrap_or(super::DEFAULT_RETRY_COUNT),
            sl: r.sl.unwrap_or(0),
            traffic_class: r.traffic_class.unwrap_or(0),
            flow_label: r.flow_label.unwrap_or(0),
            rate_limit: rate_limit(r, tx_depth)?,
            warm_up: r.warm_up,
            odp: r.odp,
            hugepages: r.hugepages,
            shared_receives: r.shared_receives,
            immediate,
            reversed: r.reversed,
            run_infinitely: r.run_infinitely,
        }),
    };
    spec.validate()?;
    Ok(spec)
}

/// `--write_with_imm` (write tests) or `--send_with_imm` (send tests), as perftest.
fn immediate(kind: TestKind, r: &RdmaRequest) -> Result<bool, Error> {
    if r.write_with_imm && kind.verb != Verb::Write {
        return Err(Error::refusal(
            Refusal::not_this_test("--write_with_imm", kind.id()),
            format!(
                "--write_with_imm: write_bw and write_lat write with immediate data, not {}",
                kind.id()
            ),
        ));
    }
    if r.send_with_imm && kind.verb != Verb::Send {
        return Err(Error::refusal(
            Refusal::not_this_test("--send_with_imm", kind.id()),
            format!(
                "--send_with_imm: send_bw and send_lat send with immediate data, not {}",
                kind.id()
            ),
        ));
    }
    Ok(r.write_with_imm || r.send_with_imm)
}

/// `--run_infinitely`: `-D` is the interval, each measured whole (no margin unless
/// `-f` gave one, which validation refuses, as it refuses a run without `-D`).
fn endless(run: RunLength, margin_given: bool) -> RunLength {
    match run {
        RunLength::Duration { secs, .. } if !margin_given => {
            RunLength::Duration { secs, margin_ms: 0 }
        }
        other => other,
    }
}

/// `--rate_limit` with its units and burst (perftest's defaults: Gb/s, a burst of the
/// send queue's depth); the units and burst only with a limit, as perftest.
fn rate_limit(r: &RdmaRequest, tx_depth: u32) -> Result<Option<super::RateLimit>, Error> {
    let Some(rate) = r.rate_limit else {
        return match (r.rate_units, r.burst_size) {
            (Some(_), _) => Err(Error::refusal(
                Refusal::needs("--rate_units", "--rate_limit"),
                "--rate_units: only with --rate_limit",
            )),
            (_, Some(_)) => Err(Error::refusal(
                Refusal::needs("--burst_size", "--rate_limit"),
                "--burst_size: only with --rate_limit",
            )),
            _ => Ok(None),
        };
    };
    // (On a latency test: validation refuses the limit the spec then holds.)
    Ok(Some(super::RateLimit {
        rate,
        units: r.rate_units.unwrap_or(super::RateUnits::GbitPerSec),
        burst: r.burst_size.unwrap_or(tx_depth),
    }))
}

/// Applies the TCP tests' defaults to `r` and checks the result.
///
/// # Errors
/// One line naming the flag and what is wrong with it (kind `usage`).
pub fn tcp(measure: Measure, r: &TcpRequest) -> Result<TestSpec, Error> {
    let bw = measure == Measure::Bw;
    let window = match r.window {
        None => None,
        Some(w) => Some(u32::try_from(w).map_err(|_| window_error(w))?),
    };
    one_way_to_size(r.all, r.size)?;
    let spec = TestSpec {
        kind: TestKind { verb: Verb::Send, measure },
        sizes: if r.all {
            sweep(MAX_SWEEP_SIZE)
        } else {
            vec![r.size.unwrap_or(if bw { 65536 } else { 2 })]
        },
        run: run_length(r.duration, r.margin, r.iters, r.all, if bw { 5000 } else { 1000 })?,
        validate: false,
        link: Link::Tcp(TcpSpec {
            streams: r.streams.unwrap_or(1),
            window,
            nodelay: r.nodelay || !bw,
        }),
    };
    spec.validate()?;
    Ok(spec)
}

/// perftest's inline defaults: the latency tests' payloads go inline.
fn default_inline(kind: TestKind, service: Service) -> u32 {
    match (kind.measure, kind.verb) {
        (Measure::Bw, _) => 0,
        (_, Verb::Write) => 220,
        (_, Verb::Send) if service == Service::Ud => 188,
        (_, Verb::Send) => 236,
        _ => 0,
    }
}

/// perftest's moderation: large messages are signaled one by one unless asked
/// otherwise, everything else once per 100.
fn default_cq_mod(r: &RdmaRequest, service: Service, sizes: &[u64]) -> u32 {
    let big = sizes.iter().any(|&s| s > 8192);
    if big && !r.all && !r.events && service != Service::Ud {
        1
    } else {
        100
    }
}

pub(super) fn window_error(w: u64) -> Error {
    Error::usage(format!("-w {w}: a socket buffer between 4 KiB and 1 GiB"))
}
