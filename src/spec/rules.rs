//! perftest's rules, once: the defaults each test takes ([`rdma`], [`tcp`]) and the
//! invariants every spec must hold before it runs ([`TestSpec::validate`]), with the
//! limits on what a peer may ask for. Messages name the flag, as a user knows it.

use std::time::Duration;

use super::{
    AtomicType, Link, Measure, RdmaSpec, RunLength, TcpSpec, TestKind, TestSpec, Verb,
    MAX_SWEEP_SIZE,
};
use crate::error::Error;
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

/// `0,2-3` → `[0, 2, 3]`.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, Error> {
    let shown = crate::text::clean(text);
    let bad = || Error::usage(format!("--cpus '{shown}': a CPU list like 0,2-3"));
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => {
                (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?)
            }
            None => {
                let v: usize = part.trim().parse().map_err(|_| bad())?;
                (v, v)
            }
        };
        // CPUs below 4096, and no more of them than that all ranges together.
        if a > b || b >= 4096 || b - a >= 4096 - cpus.len() {
            return Err(bad());
        }
        cpus.extend(a..=b);
    }
    Ok(cpus)
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
        return Err(Error::usage(
            "-D and -n exclude each other: run for a time or for a number of iterations",
        ));
    }
    if duration.is_some() && all {
        return Err(Error::usage(
            "-D cannot be combined with -a (a sweep runs each size for -n iterations)",
        ));
    }
    if margin.is_some() && duration.is_none() {
        return Err(Error::usage("-f: a margin needs -D"));
    }
    Ok(match (duration, iters) {
        (Some(secs), _) => RunLength::Duration { secs, margin: margin.unwrap_or(secs / 4) },
        (None, Some(n)) => RunLength::Iterations(n),
        (None, None) => RunLength::Iterations(default_iters),
    })
}

/// `-a` and `-s` exclude each other: a sweep has its own sizes.
fn one_way_to_size(all: bool, size: Option<u64>) -> Result<(), Error> {
    match (all, size) {
        (true, Some(s)) => Err(Error::usage(format!(
            "-a -s {s}: a sweep runs every size from 2 B to 8 MiB; drop -s or -a"
        ))),
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
    if kind.verb == Verb::Atomic {
        if r.size.is_some_and(|s| s != 8) {
            return Err(Error::usage("-s: atomics are always 8 bytes"));
        }
        if r.all {
            return Err(Error::usage(
                "-a: atomics have one size (8 bytes); there is nothing to sweep",
            ));
        }
    } else if r.atomic_type.is_some() {
        return Err(Error::usage(format!(
            "-A: only the atomic tests take an atomic type, not {}",
            kind.id()
        )));
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
            (Verb::Atomic, _) => 8,
            (_, Some(s)) => s,
            (_, None) if bw => 65536,
            (_, None) => 2,
        }]
    };
    let write_bw = kind == TestKind { verb: Verb::Write, measure: Measure::Bw };
    let run = run_length(r.duration, r.margin, r.iters, r.all, if write_bw { 5000 } else { 1000 })?;
    let run = if r.run_infinitely { endless(run, r.margin.is_some(), bw)? } else { run };
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
            rate_limit: rate_limit(r, bw, tx_depth)?,
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
        return Err(Error::usage(format!(
            "--write_with_imm: write_bw and write_lat write with immediate data, not {}",
            kind.id()
        )));
    }
    if r.send_with_imm && kind.verb != Verb::Send {
        return Err(Error::usage(format!(
            "--send_with_imm: send_bw and send_lat send with immediate data, not {}",
            kind.id()
        )));
    }
    Ok(r.write_with_imm || r.send_with_imm)
}

/// `--run_infinitely`: `-D` is the interval, each measured whole (no margin).
fn endless(run: RunLength, margin_given: bool, bw: bool) -> Result<RunLength, Error> {
    if !bw {
        return Err(Error::usage("--run_infinitely: bandwidth tests print a figure per interval"));
    }
    match run {
        RunLength::Duration { .. } if margin_given => {
            Err(Error::usage("-f: --run_infinitely measures each -D interval whole"))
        }
        RunLength::Duration { secs, .. } => Ok(RunLength::Duration { secs, margin: 0 }),
        RunLength::Iterations(_) => {
            Err(Error::usage("--run_infinitely: give -D SECS, the interval between figures"))
        }
    }
}

/// `--rate_limit` with its units and burst (perftest's defaults: Gb/s, a burst of the
/// send queue's depth); the units and burst only with a limit, as perftest.
fn rate_limit(r: &RdmaRequest, bw: bool, tx_depth: u32) -> Result<Option<super::RateLimit>, Error> {
    let Some(rate) = r.rate_limit else {
        return match (r.rate_units, r.burst_size) {
            (Some(_), _) => Err(Error::usage("--rate_units: only with --rate_limit")),
            (_, Some(_)) => Err(Error::usage("--burst_size: only with --rate_limit")),
            _ => Ok(None),
        };
    };
    if !bw {
        return Err(Error::usage("--rate_limit: paces a bandwidth test's sends"));
    }
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

fn window_error(w: u64) -> Error {
    Error::usage(format!("-w {w}: a socket buffer between 4 KiB and 1 GiB"))
}

fn check(ok: bool, message: impl FnOnce() -> String) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::usage(message()))
    }
}

impl TestSpec {
    /// Checks every rule a spec must hold, whoever built it: the CLI, `compare`, or a
    /// peer's hello (every number a peer sends is bounded here before anything is
    /// allocated).
    ///
    /// # Errors
    /// The first rule broken, naming the flag (kind `usage`).
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_common()?;
        match &self.link {
            Link::Rdma(r) => self.validate_rdma(r)?,
            Link::Tcp(t) => self.validate_tcp(t)?,
        }
        let buffers = self.buffer_bytes();
        check(buffers <= MAX_BUFFERS, || {
            let flag = if self.rdma().is_some() { "-q" } else { "-P" };
            format!(
                "-s {} {flag} {}: {buffers} bytes of buffers, over the {} GiB one side may hold",
                self.max_size(),
                self.connections(),
                MAX_BUFFERS >> 30
            )
        })
    }

    fn validate_common(&self) -> Result<(), Error> {
        check(!self.sizes.is_empty() && self.sizes.len() <= MAX_SIZES, || {
            format!("a run has 1 to {MAX_SIZES} sizes, not {}", self.sizes.len())
        })?;
        check(self.sizes.iter().all(|&s| s > 0), || "-s 0: a message has at least 1 byte".into())?;
        check(self.max_size() <= MAX_MESSAGE, || {
            format!("-s {}: the largest message is {MAX_MESSAGE} bytes", self.max_size())
        })?;
        match self.run {
            RunLength::Iterations(n) => check(n >= 5, || format!("-n {n}: at least 5 iterations")),
            RunLength::Duration { secs, margin } => {
                check(secs > 0, || "-D 0: the duration must be at least 1 second".into())?;
                check(secs <= MAX_DURATION, || {
                    format!("-D {secs}: at most {MAX_DURATION} seconds")
                })?;
                check(secs > margin.saturating_mul(2), || {
                    format!("-D {secs} -f {margin}: the duration must exceed twice the margin (nothing left to measure)")
                })?;
                check(self.sizes.len() == 1, || {
                    "-D cannot be combined with -a (a sweep runs each size for -n iterations)"
                        .into()
                })?;
                check(!self.validate, || {
                    "--validate needs -n: a duration run has no known final pattern".into()
                })
            }
        }
    }

    fn validate_tcp(&self, t: &TcpSpec) -> Result<(), Error> {
        check(self.kind.verb == Verb::Send, || {
            "TCP tests send; they have no RDMA operations".into()
        })?;
        check((1..=MAX_STREAMS).contains(&t.streams), || {
            format!("-P {}: between 1 and {MAX_STREAMS} streams", t.streams)
        })?;
        check(self.kind.measure == Measure::Bw || t.streams == 1, || {
            "-P: tcp_lat is one ping-pong stream".into()
        })?;
        if let Some(w) = t.window {
            check((4096..=1 << 30).contains(&w), || window_error(u64::from(w)).message)?;
        }
        check(!self.validate, || "--validate: TCP tests have no pattern check".into())
    }

    fn validate_rdma(&self, r: &RdmaSpec) -> Result<(), Error> {
        let (id, verb, bw) = (self.kind.id(), self.kind.verb, self.kind.measure == Measure::Bw);
        let allowed = match verb {
            Verb::Write => &[Service::Rc, Service::Uc][..],
            Verb::Send => &[Service::Rc, Service::Uc, Service::Ud][..],
            Verb::Read | Verb::Atomic => &[Service::Rc][..],
        };
        check(allowed.contains(&r.service), || {
            let names = match verb {
                Verb::Write => "RC or UC",
                Verb::Send => "RC, UC or UD",
                _ => "RC",
            };
            format!("-c {}: {id} runs over {names} only", r.service.name())
        })?;
        check(verb != Verb::Atomic || self.sizes == [8], || {
            "-s: atomics are always 8 bytes".into()
        })?;
        check((1..=MAX_QPS).contains(&r.qps), || {
            format!("-q {}: between 1 and {MAX_QPS} QPs", r.qps)
        })?;
        check(bw || r.qps == 1, || "-q: latency tests use one QP".into())?;
        check(bw || !r.bidirectional, || "-b: only bandwidth tests are bidirectional".into())?;
        check(
            self.kind != (TestKind { verb: Verb::Write, measure: Measure::Lat })
                || !r.events
                || r.immediate,
            || {
                "-e: write_lat polls memory, it has no completions to wait for \
                 (--write_with_imm has)"
                    .into()
            },
        )?;
        if let Some(m) = r.mtu {
            check(matches!(m, 256 | 512 | 1024 | 2048 | 4096), || {
                format!("-m {m}: the MTU is one of 256, 512, 1024, 2048, 4096")
            })?;
            check(r.service != Service::Ud || self.max_size() <= u64::from(m), || {
                format!("-s {}: a UD message must fit the MTU ({m} bytes)", self.max_size())
            })?;
        }
        self.validate_queues(r, id, bw)?;
        self.validate_modes(r)?;
        if r.backend == Backend::Nd {
            nd_rules(self.kind, r)?;
        }
        Ok(())
    }

    fn validate_queues(&self, r: &RdmaSpec, id: &str, bw: bool) -> Result<(), Error> {
        let t = r.tx_depth;
        check(t > 0, || "-t 0: the send queue needs at least one entry".into())?;
        check(t <= 15000, || format!("-t {t}: at most 15000"))?;
        check(r.rx_depth > 0, || "-r 0: the receive queue needs at least one entry".into())?;
        check(r.rx_depth <= 16384, || format!("-r {}: at most 16384", r.rx_depth))?;
        check(self.receives() || r.rx_depth == 1, || {
            format!("-r {}: {id} posts no receives", r.rx_depth)
        })?;
        check(r.inline_size <= 1024, || format!("-I {}: at most 1024 bytes", r.inline_size))?;
        check(matches!(self.kind.verb, Verb::Write | Verb::Send) || r.inline_size == 0, || {
            format!("-I {}: {id} has no payload to inline", r.inline_size)
        })?;
        check(r.cq_mod > 0, || "-Q 0: at least one completion per 1 work request".into())?;
        check(r.cq_mod <= 1024, || format!("-Q {}: at most 1024", r.cq_mod))?;
        check(r.cq_mod <= t, || format!("-Q {}: more than the send queue (-t {t})", r.cq_mod))?;
        check(r.qp_timeout <= 31, || format!("-u {}: between 0 and 31", r.qp_timeout))?;
        check(r.retry_count <= 7, || format!("--retry_count {}: between 0 and 7", r.retry_count))?;
        check(r.sl <= 15, || format!("-S {}: a service level is 0 to 15", r.sl))?;
        check(r.flow_label <= 0xF_FFFF, || {
            format!("--flow_label {}: a flow label is 20 bits (at most 1048575)", r.flow_label)
        })?;
        check(r.outs.is_none_or(|o| (1..=255).contains(&o)), || {
            format!("-o {}: between 1 and 255", r.outs.unwrap_or(0))
        })?;
        let l = r.post_list;
        check(l >= 1, || "-l 0: at least one request per post".into())?;
        if l > 1 {
            let iters = self.run.iterations();
            check(bw, || "-l: post lists are for bandwidth tests".into())?;
            check(l <= t, || format!("-l {l}: longer than the send queue (-t {t})"))?;
            check(iters == u64::MAX || iters % u64::from(l) == 0, || {
                format!("-l {l}: -n {iters} must be a multiple of the post list")
            })?;
        }
        Ok(())
    }

    fn validate_modes(&self, r: &RdmaSpec) -> Result<(), Error> {
        let duration = matches!(self.run, RunLength::Duration { .. });
        check(!(duration && r.bidirectional && self.receives()), || {
            format!(
                "-b with {}{} needs -n: each side must know how many messages to expect",
                self.kind.id(),
                if r.immediate && self.kind.verb == Verb::Write { " --write_with_imm" } else { "" }
            )
        })?;
        check(!(duration && r.events), || "-D cannot be combined with -e".into())?;
        check(self.kind.verb == Verb::Atomic || r.atomic_type == AtomicType::FetchAndAdd, || {
            format!("-A: only the atomic tests take an atomic type, not {}", self.kind.id())
        })?;
        if self.validate {
            check(
                r.atomic_type != AtomicType::CmpAndSwap || self.kind.verb != Verb::Atomic,
                || "--validate: only fetch-and-add leaves a checkable sum".into(),
            )?;
            check(r.service != Service::Ud, || {
                "--validate: UD receives carry a 40-byte GRH in front of each message; use RC or UC"
                    .into()
            })?;
        }
        check(!(r.rdma_cm && r.service == Service::Ud), || {
            "-R: rdma_cm connects RC or UC queue pairs".into()
        })?;
        if r.shared_receives {
            check(self.kind.verb == Verb::Send, || {
                format!("--use-srq: {} posts no receives; the send tests do", self.kind.id())
            })?;
            check(r.rx_depth >= r.qps, || {
                format!(
                    "--use-srq: -r {} is less than -q {}: each QP starts with an equal part of \
                     the shared receive queue",
                    r.rx_depth, r.qps
                )
            })?;
            check(!self.validate, || {
                "--validate: with --use-srq a message lands in whichever QP's receive came \
                 first, not in its own QP's buffer"
                    .into()
            })?;
        }
        if r.reversed {
            check(self.kind.measure == Measure::Bw, || {
                format!(
                    "--reversed: turns a bandwidth test around; {}'s traffic goes both ways",
                    self.kind.id()
                )
            })?;
            check(!r.bidirectional, || "--reversed with -b: -b already sends both ways".into())?;
        }
        if let Some(l) = r.rate_limit {
            check(l.rate.is_finite() && l.rate > 0.0, || {
                format!("--rate_limit {}: a rate above 0", l.rate)
            })?;
            check((1..=1 << 20).contains(&l.burst), || {
                format!("--burst_size {}: between 1 and 1048576 messages", l.burst)
            })?;
            check(self.kind.measure == Measure::Bw, || {
                "--rate_limit: paces a bandwidth test's sends".into()
            })?;
        }
        if r.warm_up {
            check(self.kind.measure == Measure::Bw && !self.receives(), || {
                "--perform_warm_up: write, read and atomic bandwidth tests warm up (as perftest), \
                 without immediate data (its messages would take the measured run's receives)"
                    .into()
            })?;
            check(!(self.validate && self.kind.verb == Verb::Atomic), || {
                "--perform_warm_up with --validate: the warm-up's adds would join the checked sum"
                    .into()
            })?;
        }
        let classed = r.sl != 0 || r.traffic_class != 0 || r.flow_label != 0;
        check(!(r.rdma_cm && classed), || {
            "-S, --tclass, --flow_label: not with -R yet (rdma_cm resolves the path itself)".into()
        })
    }
}

/// What NetworkDirect cannot do, refused before anything starts.
fn nd_rules(kind: TestKind, r: &RdmaSpec) -> Result<(), Error> {
    check(kind.verb != Verb::Atomic, || {
        format!("{}: atomics are not supported by NetworkDirect", kind.id())
    })?;
    check(r.service == Service::Rc, || {
        format!(
            "-c {}: not supported by NetworkDirect (it connects RC queue pairs only)",
            r.service.name()
        )
    })?;
    check(!r.rdma_cm, || "-R: NetworkDirect connects through its own connector; drop -R".into())?;
    check(r.mtu.is_none(), || "-m: NetworkDirect does not set the path MTU".into())?;
    check(r.sl == 0 && r.traffic_class == 0 && r.flow_label == 0, || {
        "-S, --tclass, --flow_label: NetworkDirect does not set a path's class".into()
    })?;
    check(!r.odp, || "--odp: NetworkDirect registers memory its own way (pinned)".into())?;
    check(!r.hugepages, || "--use_hugepages: not with NetworkDirect (Linux's MAP_HUGETLB)".into())?;
    check(!r.shared_receives, || "--use-srq: not implemented for NetworkDirect".into())?;
    check(!r.immediate, || {
        "--write_with_imm, --send_with_imm: immediate data is not supported by NetworkDirect".into()
    })
}

/// What NetworkDirect cannot take from this side's own flags.
///
/// # Errors
/// `-x`, `-i` other than 1, or a `-d` that is not an IP address.
pub fn nd_local_rules(local: &super::Local) -> Result<(), Error> {
    check(local.gid_index.is_none(), || {
        "-x: NetworkDirect has no GID table; it addresses adapters by IP".into()
    })?;
    check(local.ib_port == 1, || "-i: NetworkDirect adapters have no ports to choose".into())?;
    check(local.counters.is_none(), || {
        "-W: reads a verbs port's counters in sysfs; NetworkDirect adapters have none".into()
    })?;
    match &local.device {
        Some(d) if d.parse::<std::net::IpAddr>().is_err() => Err(Error::usage(format!(
            "-d {d}: with NetworkDirect, name the adapter by one of its IP addresses"
        ))),
        _ => Ok(()),
    }
}
