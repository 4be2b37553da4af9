//! perftest's flags, validated once into a plain [`TestConfig`]. Every rule that
//! perftest applies silently (defaults per test, CQ moderation forced to 1 for large
//! messages, depths clamped to the iteration count) is applied here and then printed
//! in the report header, so what ran is what is shown.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::transport::{Backend, Service};

/// Default TCP port of the control channel (perftest uses 18515; ours differs so both
/// can run side by side, as the benchmark scripts do).
pub const DEFAULT_PORT: u16 = 18520;

/// Largest message of an `-a` sweep (2^23), as perftest.
pub const MAX_SWEEP_SIZE: u64 = 1 << 23;

/// The operation a test measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// RDMA write.
    Write,
    /// RDMA read.
    Read,
    /// Send/receive.
    Send,
    /// Atomics (fetch-and-add or compare-and-swap).
    Atomic,
    /// Writes to TCP sockets (the baseline RDMA is compared with).
    Tcp,
}

impl Verb {
    /// Whether the receiving side posts receives (send/recv and TCP streams).
    pub fn receives(self) -> bool {
        matches!(self, Verb::Send | Verb::Tcp)
    }
}

/// Bandwidth or latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Bandwidth and message rate.
    Bw,
    /// Latency.
    Lat,
}

/// One of the eight tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct TestKind {
    /// Operation.
    pub verb: Verb,
    /// What is measured.
    pub measure: Measure,
}

impl TestKind {
    /// Identifier as perftest's binary without `ib_`: `write_bw`, `read_lat`, …
    pub fn id(&self) -> &'static str {
        match (self.verb, self.measure) {
            (Verb::Write, Measure::Bw) => "write_bw",
            (Verb::Read, Measure::Bw) => "read_bw",
            (Verb::Send, Measure::Bw) => "send_bw",
            (Verb::Atomic, Measure::Bw) => "atomic_bw",
            (Verb::Write, Measure::Lat) => "write_lat",
            (Verb::Read, Measure::Lat) => "read_lat",
            (Verb::Send, Measure::Lat) => "send_lat",
            (Verb::Atomic, Measure::Lat) => "atomic_lat",
            (Verb::Tcp, Measure::Bw) => "tcp_bw",
            (Verb::Tcp, Measure::Lat) => "tcp_lat",
        }
    }

    /// perftest's title line: `RDMA_Write BW Test`.
    pub fn title(&self) -> String {
        let verb = match self.verb {
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
            Verb::Send => "Send",
            Verb::Atomic => "Atomic",
            Verb::Tcp => "TCP",
        };
        let measure = match self.measure {
            Measure::Bw => "BW",
            Measure::Lat => "Latency",
        };
        format!("{verb} {measure} Test")
    }

    /// Latency samples are half a round trip for write and send (ping-pong), a full
    /// one for read and atomics.
    pub fn rtt_factor(&self) -> u32 {
        match self.verb {
            Verb::Write | Verb::Send | Verb::Tcp => 2,
            Verb::Read | Verb::Atomic => 1,
        }
    }
}

/// perftest's `-c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "UPPER")]
pub enum ConnectionArg {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

/// perftest's `-A`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[value(rename_all = "SCREAMING_SNAKE_CASE")]
#[serde(rename_all = "snake_case")]
pub enum AtomicType {
    /// Fetch-and-add (default).
    FetchAndAdd,
    /// Compare-and-swap.
    CmpAndSwap,
}

/// The flags of every perftest-style test, with perftest's names.
#[derive(Clone, Debug, Default, Args)]
pub struct PerfArgs {
    /// Server to connect to; without it, this side is the server.
    pub host: Option<String>,
    /// RDMA device (default: the first).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub device: Option<String>,
    /// Device port.
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u8>,
    /// GID index (default: the RoCE v2 IPv4 GID on RoCE, none on InfiniBand).
    #[arg(short = 'x', long = "gid-index", value_name = "N")]
    pub gid_index: Option<u8>,
    /// Message size in bytes (K/M suffixes allowed). Default 65536 (BW), 2 (latency).
    #[arg(short = 's', long = "size", value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Sweep sizes 2 B … 8 MiB.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations per size. Default 5000 (write_bw), 1000 otherwise.
    #[arg(short = 'n', long = "iters", value_name = "N")]
    pub iters: Option<u64>,
    /// Run for this many seconds instead of a number of iterations.
    #[arg(short = 'D', long = "duration", value_name = "SECS")]
    pub duration: Option<u64>,
    /// Warm-up and cool-down margin excluded from a -D window (default: duration/4).
    #[arg(short = 'f', long = "margin", value_name = "SECS")]
    pub margin: Option<u64>,
    /// Send queue depth. Default 128 (BW), 1 (latency).
    #[arg(short = 't', long = "tx-depth", value_name = "N")]
    pub tx_depth: Option<u32>,
    /// Receive queue depth (send tests). Default 512.
    #[arg(short = 'r', long = "rx-depth", value_name = "N")]
    pub rx_depth: Option<u32>,
    /// Number of queue pairs (BW tests).
    #[arg(short = 'q', long = "qp", value_name = "N")]
    pub qps: Option<u32>,
    /// Connection type: RC, UC or UD, where the operation allows.
    #[arg(short = 'c', long = "connection", value_enum, value_name = "TYPE")]
    pub connection: Option<ConnectionArg>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (default: the port's active MTU).
    #[arg(short = 'm', long = "mtu", value_name = "BYTES")]
    pub mtu: Option<u32>,
    /// Largest inline message. Default 220 (write_lat), 236 (send_lat), 188 (UD), 0 (BW).
    #[arg(short = 'I', long = "inline_size", value_name = "BYTES")]
    pub inline_size: Option<u32>,
    /// One signaled completion per N work requests (BW). Default 100.
    #[arg(short = 'Q', long = "cq-mod", value_name = "N")]
    pub cq_mod: Option<u32>,
    /// Work requests chained per post call (BW).
    #[arg(short = 'l', long = "post_list", value_name = "N")]
    pub post_list: Option<u32>,
    /// Both sides send (BW tests); each direction is shown and summed.
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    /// TCP port of the control channel (and of rdma_cm with -R).
    #[arg(short = 'p', long = "port", value_name = "PORT")]
    pub port: Option<u16>,
    /// Accepted for perftest compatibility: rdmabench uses a monotonic clock, not the TSC.
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// Connect the test QPs through rdma_cm (HOST must be the RDMA interface's IP).
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Sleep on completion events instead of busy polling.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Outstanding RDMA reads/atomics (default: the device's max_qp_rd_atom, at most 16).
    #[arg(short = 'o', long = "outs", value_name = "N")]
    pub outs: Option<u32>,
    /// Atomic operation.
    #[arg(short = 'A', long = "atomic_type", value_enum, value_name = "TYPE")]
    pub atomic_type: Option<AtomicType>,
    /// The receiver checks a per-message pattern in its buffer after the run.
    #[arg(long = "validate")]
    pub validate: bool,
    /// RDMA interface: verbs, or nd (NetworkDirect). Default: nd on Windows, verbs elsewhere.
    #[arg(long = "backend", value_enum, value_name = "API")]
    pub backend: Option<Backend>,
    /// Output, thresholds, timeout.
    #[command(flatten)]
    pub report: ReportArgs,
}

/// What every test takes alike, RDMA or TCP: output, thresholds, the step timeout.
#[derive(Clone, Debug, Args)]
pub struct ReportArgs {
    /// Report Gb/s (10^9 bit/s) instead of MiB/s (2^20 B/s).
    #[arg(long = "report_gbits", alias = "report-gbits")]
    pub report_gbits: bool,
    /// Write the whole run (every size) as one JSON document to FILE.
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 1 if the average bandwidth of any size falls below this (report units).
    #[arg(long = "min-bw", value_name = "BW")]
    pub min_bw: Option<f64>,
    /// Exit 1 if the typical (median) latency of any size exceeds this many µs.
    #[arg(long = "max-lat", value_name = "USEC")]
    pub max_lat: Option<f64>,
    /// Seconds to wait for the peer at each step before giving up.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
}

impl ReportArgs {
    /// The rules these flags follow in every test; `bw`: a bandwidth test.
    fn check(&self, bw: bool) -> Result<(), String> {
        if self.min_bw.is_some() && !bw {
            return Err("--min-bw: only bandwidth tests have a bandwidth".into());
        }
        if self.max_lat.is_some() && bw {
            return Err("--max-lat: only latency tests have a latency".into());
        }
        if self.timeout == 0 {
            return Err("--timeout 0: at least 1 second".into());
        }
        Ok(())
    }
}

impl Default for ReportArgs {
    /// As the command line without these flags.
    fn default() -> Self {
        ReportArgs { report_gbits: false, json: None, min_bw: None, max_lat: None, timeout: 30 }
    }
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

/// `-D`, `-f` and `-n` into a [`RunLength`].
fn run_length(
    duration: Option<u64>,
    margin: Option<u64>,
    iters: Option<u64>,
    default_iters: u64,
) -> Result<RunLength, String> {
    if duration.is_some() && iters.is_some() {
        return Err(
            "-D and -n exclude each other: run for a time or for a number of iterations".into()
        );
    }
    if margin.is_some() && duration.is_none() {
        return Err("-f: a margin needs -D".into());
    }
    match (duration, iters) {
        (Some(0), _) => Err("-D 0: the duration must be at least 1 second".into()),
        (Some(secs), _) => {
            let margin = margin.unwrap_or(secs / 4);
            if secs <= 2 * margin {
                return Err(format!(
                    "-D {secs} -f {margin}: the duration must exceed twice the margin (nothing left to measure)"
                ));
            }
            Ok(RunLength::Duration { secs, margin })
        }
        (None, Some(n)) if n < 5 => Err(format!("-n {n}: at least 5 iterations")),
        (None, Some(n)) => Ok(RunLength::Iterations(n)),
        (None, None) => Ok(RunLength::Iterations(default_iters)),
    }
}

/// `0,2-3` → `[0, 2, 3]`.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("--cpus '{text}': a CPU list like 0,2-3");
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
        if a > b || b >= 4096 {
            return Err(bad());
        }
        cpus.extend(a..=b);
    }
    Ok(cpus)
}

/// The flags of `tcp-bw` and `tcp-lat`: perftest's where they mean the same, iperf3's
/// for the rest (`-P`, `-w`, `-N`).
#[derive(Clone, Debug, Default, Args)]
pub struct TcpArgs {
    /// Server to connect to; without it, this side is the server.
    #[arg(value_name = "HOST")]
    pub host: Option<String>,
    /// Message (write) size in bytes; K/M/G suffixes (default 65536 for tcp-bw, 2 for tcp-lat).
    #[arg(short = 's', long = "size", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Sweep sizes 2 B … 8 MiB.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Messages per stream (default 5000 for tcp-bw, 1000 for tcp-lat).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Run for this many seconds instead of -n.
    #[arg(short = 'D', long = "duration", value_name = "SECS")]
    pub duration: Option<u64>,
    /// Warm-up and cool-down left out of a -D run, seconds each (default D/4).
    #[arg(short = 'f', long = "margin", value_name = "SECS")]
    pub margin: Option<u64>,
    /// Parallel streams, a thread each (iperf3 -P).
    #[arg(short = 'P', long = "parallel", value_name = "N")]
    pub streams: Option<u32>,
    /// Socket buffer, SO_SNDBUF and SO_RCVBUF, bytes with K/M suffixes (iperf3 -w).
    #[arg(short = 'w', long = "window", value_parser = parse_size)]
    pub window: Option<u64>,
    /// TCP_NODELAY on the data sockets (iperf3 -N; tcp-lat always sets it).
    #[arg(short = 'N', long = "no-delay")]
    pub nodelay: bool,
    /// Pin stream k's thread to the k-th CPU of this list, e.g. 0,2-3.
    #[arg(long = "cpus", value_name = "LIST")]
    pub cpus: Option<String>,
    /// Control-channel TCP port (the data streams use a port the server picks).
    #[arg(short = 'p', long = "port")]
    pub port: Option<u16>,
    /// Output, thresholds, timeout.
    #[command(flatten)]
    pub report: ReportArgs,
}

/// How long each size runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunLength {
    /// A number of iterations per QP.
    Iterations(u64),
    /// A duration with warm-up and cool-down margins; only the middle is measured.
    Duration {
        /// Whole run, seconds.
        secs: u64,
        /// Margin at each end, seconds.
        margin: u64,
    },
}

impl RunLength {
    /// The measured window of a duration run.
    pub fn window(&self) -> Option<Duration> {
        match *self {
            RunLength::Iterations(_) => None,
            RunLength::Duration { secs, margin } => Some(Duration::from_secs(secs - 2 * margin)),
        }
    }
}

/// What NetworkDirect cannot do, refused before anything starts.
fn nd_rules(test: TestKind, a: &PerfArgs, service: Service) -> Result<(), String> {
    if test.verb == Verb::Atomic {
        return Err(format!("{}: atomics are not supported by NetworkDirect", test.id()));
    }
    if service != Service::Rc {
        let name = format!("{service:?}").to_uppercase();
        return Err(format!(
            "-c {name}: not supported by NetworkDirect (it connects RC queue pairs only)"
        ));
    }
    if a.rdma_cm {
        return Err("-R: NetworkDirect connects through its own connector; drop -R".into());
    }
    if a.gid_index.is_some() {
        return Err("-x: NetworkDirect has no GID table; it addresses adapters by IP".into());
    }
    if a.mtu.is_some() {
        return Err("-m: NetworkDirect does not set the path MTU".into());
    }
    if a.ib_port.is_some_and(|p| p != 1) {
        return Err("-i: NetworkDirect adapters have no ports to choose".into());
    }
    if let Some(d) = &a.device {
        if d.parse::<std::net::IpAddr>().is_err() {
            return Err(format!(
                "-d {d}: with NetworkDirect, name the adapter by one of its IP addresses"
            ));
        }
    }
    Ok(())
}

/// The parameters both sides must agree on: exchanged, and a mismatch refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedParams {
    /// The test.
    pub test: TestKind,
    /// Sizes, in order.
    pub sizes: Vec<u64>,
    /// Iterations or duration.
    pub run: RunLength,
    /// Connection type.
    pub service: Service,
    /// Queue pairs.
    pub qps: u32,
    /// Both directions.
    pub bidirectional: bool,
    /// rdma_cm connection.
    pub rdma_cm: bool,
    /// Atomic operation.
    pub atomic_type: AtomicType,
    /// Pattern checking.
    pub validate: bool,
    /// TCP tests: streams and socket options (absent for RDMA tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpParams>,
    /// RDMA interface (left out for verbs, as before NetworkDirect existed).
    #[serde(default, skip_serializing_if = "Backend::is_verbs")]
    pub backend: Backend,
}

/// What a TCP test's two sides agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpParams {
    /// Parallel streams, a thread each.
    pub streams: u32,
    /// Socket buffer (SO_SNDBUF and SO_RCVBUF) asked for, bytes; None: the kernel's autotuning.
    pub window: Option<u32>,
    /// TCP_NODELAY on the data sockets.
    pub nodelay: bool,
}

/// A validated test configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct TestConfig {
    /// What both sides agree on.
    pub shared: SharedParams,
    /// Server address (client side only).
    pub host: Option<String>,
    /// Device.
    pub device: Option<String>,
    /// Port.
    pub ib_port: u8,
    /// GID index (None: automatic).
    pub gid_index: Option<u8>,
    /// Path MTU override.
    pub mtu: Option<u32>,
    /// Send queue depth.
    pub tx_depth: u32,
    /// Receive queue depth.
    pub rx_depth: u32,
    /// Inline size.
    pub inline_size: u32,
    /// CQ moderation.
    pub cq_mod: u32,
    /// Post list.
    pub post_list: u32,
    /// Outstanding reads/atomics (None: device maximum up to 16).
    pub outs: Option<u32>,
    /// Event mode.
    pub events: bool,
    /// Gb/s instead of MiB/s.
    pub report_gbits: bool,
    /// JSON output file.
    pub json: Option<PathBuf>,
    /// Minimum average bandwidth, report units.
    pub min_bw: Option<f64>,
    /// Maximum typical latency, µs.
    pub max_lat: Option<f64>,
    /// Control-channel TCP port.
    pub port: u16,
    /// Per-step timeout.
    pub timeout: Duration,
    /// CPUs the measuring threads are pinned to, one per connection in turn (TCP -P).
    pub pin: Vec<usize>,
    /// Address the server listens on (None: every address).
    pub bind: Option<std::net::IpAddr>,
}

impl TestConfig {
    /// Applies perftest's defaults and rules to `args` for `test`.
    ///
    /// # Errors
    /// One line naming the flag and what is wrong with it.
    pub fn from_args(test: TestKind, a: &PerfArgs) -> Result<Self, String> {
        if test.verb == Verb::Tcp {
            return Err(format!("{} takes the TCP flags (TcpArgs), not perftest's", test.id()));
        }
        let bw = test.measure == Measure::Bw;
        let service = match (a.connection, test.verb) {
            (None | Some(ConnectionArg::Rc), _) => Service::Rc,
            (Some(ConnectionArg::Uc), Verb::Write | Verb::Send) => Service::Uc,
            (Some(ConnectionArg::Ud), Verb::Send) => Service::Ud,
            (Some(c), verb) => {
                let allowed = match verb {
                    Verb::Write => "RC or UC",
                    Verb::Send => "RC, UC or UD",
                    Verb::Read | Verb::Atomic | Verb::Tcp => "RC",
                };
                let name = format!("{c:?}").to_uppercase();
                return Err(format!("-c {name}: {} runs over {allowed} only", test.id()));
            }
        };
        if test.verb == Verb::Atomic {
            if a.size.is_some_and(|s| s != 8) {
                return Err("-s: atomics are always 8 bytes".into());
            }
            if a.all {
                return Err("-a: atomics have one size (8 bytes); there is nothing to sweep".into());
            }
        } else if a.atomic_type.is_some() {
            return Err(format!(
                "-A: only the atomic tests take an atomic type, not {}",
                test.id()
            ));
        }
        if a.duration.is_some() && a.all {
            return Err(
                "-D cannot be combined with -a (a sweep runs each size for -n iterations)".into()
            );
        }
        if a.duration.is_some() && a.bidirectional && test.verb == Verb::Send {
            return Err(
                "-b with send_bw needs -n: each side must know how many messages to expect".into(),
            );
        }
        if a.duration.is_some() && a.events {
            return Err("-D cannot be combined with -e".into());
        }
        if !bw && a.qps.is_some_and(|q| q != 1) {
            return Err("-q: latency tests use one QP".into());
        }
        if !bw && a.bidirectional {
            return Err("-b: only bandwidth tests are bidirectional".into());
        }
        if test.verb == Verb::Write && test.measure == Measure::Lat && a.events {
            return Err("-e: write_lat polls memory, it has no completions to wait for".into());
        }
        let mtu = match a.mtu {
            None => None,
            Some(m @ (256 | 512 | 1024 | 2048 | 4096)) => Some(m),
            Some(m) => return Err(format!("-m {m}: the MTU is one of 256, 512, 1024, 2048, 4096")),
        };
        let sizes: Vec<u64> = if a.all {
            let top = if service == Service::Ud {
                u64::from(mtu.unwrap_or(4096))
            } else {
                MAX_SWEEP_SIZE
            };
            (1..24).map(|i| 1u64 << i).filter(|&s| s <= top).collect()
        } else {
            vec![match (test.verb, a.size) {
                (Verb::Atomic, _) => 8,
                (_, Some(s)) => s,
                (_, None) if bw => 65536,
                (_, None) => 2,
            }]
        };
        if sizes.iter().any(|&s| s > u64::from(u32::MAX / 2)) {
            return Err(format!("-s {}: the largest message is {} bytes", sizes[0], u32::MAX / 2));
        }
        if service == Service::Ud {
            if let Some(m) = mtu {
                if sizes[0] > u64::from(m) {
                    return Err(format!(
                        "-s {}: a UD message must fit the MTU ({m} bytes)",
                        sizes[0]
                    ));
                }
            }
        }
        let default_iters = if test == (TestKind { verb: Verb::Write, measure: Measure::Bw }) {
            5000
        } else {
            1000
        };
        let run = run_length(a.duration, a.margin, a.iters, default_iters)?;
        let iters = match run {
            RunLength::Iterations(n) => n,
            RunLength::Duration { .. } => u64::MAX,
        };
        let clamp = |v: u32| u32::try_from(u64::from(v).min(iters)).unwrap_or(v);
        let tx_depth = match a.tx_depth {
            Some(0) => return Err("-t 0: the send queue needs at least one entry".into()),
            Some(t) if t > 15000 => return Err(format!("-t {t}: at most 15000")),
            Some(t) => clamp(t),
            None => clamp(if bw { 128 } else { 1 }),
        };
        let rx_depth = match (a.rx_depth, test.verb) {
            (Some(r), Verb::Read | Verb::Atomic | Verb::Write | Verb::Tcp) if r > 1 => {
                return Err(format!("-r {r}: {} posts no receives", test.id()))
            }
            (Some(0), _) => return Err("-r 0: the receive queue needs at least one entry".into()),
            (Some(r), _) if r > 16384 => return Err(format!("-r {r}: at most 16384")),
            (Some(r), Verb::Send) => clamp(r),
            (None, Verb::Send) if bw => clamp(512),
            (None, Verb::Send) => clamp(16),
            _ => 1,
        };
        let qps = a.qps.unwrap_or(1);
        if qps == 0 || qps > 1024 {
            return Err(format!("-q {qps}: between 1 and 1024 QPs"));
        }
        let inline_size = match (a.inline_size, test.verb) {
            (Some(i), Verb::Read | Verb::Atomic | Verb::Tcp) if i > 0 => {
                return Err(format!("-I {i}: {} has no payload to inline", test.id()))
            }
            (Some(i), _) if i > 1024 => return Err(format!("-I {i}: at most 1024 bytes")),
            (Some(i), _) => i,
            (None, _) if bw => 0,
            (None, Verb::Write) => 220,
            (None, Verb::Send) if service == Service::Ud => 188,
            (None, Verb::Send) => 236,
            (None, _) => 0,
        };
        let big = sizes.iter().any(|&s| s > 8192);
        let cq_mod = match a.cq_mod {
            Some(0) => return Err("-Q 0: at least one completion per 1 work request".into()),
            Some(q) if q > 1024 => return Err(format!("-Q {q}: at most 1024")),
            Some(q) => q,
            // perftest: large messages are signaled one by one unless asked otherwise.
            None if big && !a.all && !a.events && service != Service::Ud => 1,
            None => 100,
        }
        .min(tx_depth)
        .max(1);
        let post_list = a.post_list.unwrap_or(1).max(1);
        if post_list > 1 {
            if !bw {
                return Err("-l: post lists are for bandwidth tests".into());
            }
            if post_list > tx_depth {
                return Err(format!("-l {post_list}: longer than the send queue (-t {tx_depth})"));
            }
            if iters % u64::from(post_list) != 0 && iters != u64::MAX {
                return Err(format!(
                    "-l {post_list}: -n {iters} must be a multiple of the post list"
                ));
            }
        }
        if a.validate && test.verb == Verb::Atomic && a.atomic_type == Some(AtomicType::CmpAndSwap)
        {
            return Err("--validate: only fetch-and-add leaves a checkable sum".into());
        }
        if a.validate && service == Service::Ud {
            return Err("--validate: UD receives carry a 40-byte GRH in front of each message; use RC or UC".into());
        }
        if a.rdma_cm && service == Service::Ud {
            return Err("-R: rdma_cm connects RC or UC queue pairs".into());
        }
        if a.validate && a.duration.is_some() {
            return Err("--validate needs -n: a duration run has no known final pattern".into());
        }
        a.report.check(bw)?;
        if a.rdma_cm && a.host.as_deref().is_some_and(|h| h.is_empty()) {
            return Err("-R: HOST must be the RDMA interface's IP address".into());
        }
        let backend = a.backend.unwrap_or_else(Backend::native);
        if backend == Backend::Nd {
            nd_rules(test, a, service)?;
        }
        Ok(TestConfig {
            shared: SharedParams {
                test,
                sizes,
                run,
                service,
                qps,
                bidirectional: a.bidirectional,
                rdma_cm: a.rdma_cm,
                atomic_type: a.atomic_type.unwrap_or(AtomicType::FetchAndAdd),
                validate: a.validate,
                tcp: None,
                backend,
            },
            host: a.host.clone(),
            device: a.device.clone(),
            ib_port: a.ib_port.unwrap_or(1),
            gid_index: a.gid_index,
            mtu,
            tx_depth,
            rx_depth,
            inline_size,
            cq_mod,
            post_list,
            outs: a.outs,
            events: a.events,
            report_gbits: a.report.report_gbits,
            json: a.report.json.clone(),
            min_bw: a.report.min_bw,
            max_lat: a.report.max_lat,
            port: a.port.unwrap_or(DEFAULT_PORT),
            timeout: Duration::from_secs(a.report.timeout),
            pin: Vec::new(),
            bind: None,
        })
    }

    /// Whether each connection runs in a thread of its own (TCP streams, as iperf3
    /// -P); RDMA queue pairs share one thread, as perftest's.
    pub fn thread_per_connection(&self) -> bool {
        self.shared.test.verb == Verb::Tcp
    }

    /// The RDMA test `test` as the server side of `serve` runs it for a client that
    /// asked for `shared`: perftest's rules applied to the client's parameters.
    ///
    /// # Errors
    /// The client asked for something these rules refuse.
    pub fn for_served(shared: &SharedParams, port: u16, timeout: Duration) -> Result<Self, String> {
        let mut cfg = if shared.test.verb == Verb::Tcp {
            let t = shared.tcp.unwrap_or(TcpParams { streams: 1, window: None, nodelay: false });
            let a = TcpArgs {
                streams: Some(t.streams),
                window: t.window.map(u64::from),
                nodelay: t.nodelay,
                report: ReportArgs { timeout: timeout.as_secs().max(1), ..Default::default() },
                ..Default::default()
            };
            TestConfig::from_tcp_args(shared.test.measure, &a)?
        } else {
            let a = PerfArgs {
                qps: Some(shared.qps),
                bidirectional: shared.bidirectional,
                rdma_cm: shared.rdma_cm,
                atomic_type: (shared.test.verb == Verb::Atomic).then_some(shared.atomic_type),
                backend: Some(shared.backend),
                validate: shared.validate,
                connection: Some(match shared.service {
                    Service::Rc => ConnectionArg::Rc,
                    Service::Uc => ConnectionArg::Uc,
                    Service::Ud => ConnectionArg::Ud,
                }),
                size: shared
                    .sizes
                    .iter()
                    .max()
                    .copied()
                    .filter(|_| shared.test.verb != Verb::Atomic),
                iters: match shared.run {
                    RunLength::Iterations(n) => Some(n),
                    RunLength::Duration { .. } => None,
                },
                duration: match shared.run {
                    RunLength::Duration { secs, .. } => Some(secs),
                    RunLength::Iterations(_) => None,
                },
                margin: match shared.run {
                    RunLength::Duration { margin, .. } => Some(margin),
                    RunLength::Iterations(_) => None,
                },
                report: ReportArgs { timeout: timeout.as_secs().max(1), ..Default::default() },
                ..Default::default()
            };
            TestConfig::from_args(shared.test, &a)?
        };
        // The client's exact list (an -a sweep, or the sizes compare asks for).
        cfg.shared = shared.clone();
        cfg.port = port;
        Ok(cfg)
    }

    /// Applies the TCP tests' defaults and rules to `a`.
    ///
    /// # Errors
    /// One line naming the flag and what is wrong with it.
    pub fn from_tcp_args(measure: Measure, a: &TcpArgs) -> Result<Self, String> {
        let test = TestKind { verb: Verb::Tcp, measure };
        let bw = measure == Measure::Bw;
        let streams = a.streams.unwrap_or(1);
        if !bw && streams != 1 {
            return Err("-P: tcp_lat is one ping-pong stream".into());
        }
        if streams == 0 || streams > 128 {
            return Err(format!("-P {streams}: between 1 and 128 streams"));
        }
        if a.duration.is_some() && a.all {
            return Err(
                "-D cannot be combined with -a (a sweep runs each size for -n iterations)".into()
            );
        }
        let sizes: Vec<u64> = if a.all {
            (1..24).map(|i| 1u64 << i).collect()
        } else {
            vec![a.size.unwrap_or(if bw { 65536 } else { 2 })]
        };
        if sizes.iter().any(|&s| s > u64::from(u32::MAX / 2)) {
            return Err(format!("-s {}: the largest message is {} bytes", sizes[0], u32::MAX / 2));
        }
        let run = run_length(a.duration, a.margin, a.iters, if bw { 5000 } else { 1000 })?;
        let window = match a.window {
            None => None,
            Some(w) if !(4096..=1 << 30).contains(&w) => {
                return Err(format!("-w {w}: a socket buffer between 4 KiB and 1 GiB"))
            }
            Some(w) => Some(w as u32),
        };
        a.report.check(bw)?;
        let pin = match &a.cpus {
            None => Vec::new(),
            Some(list) => parse_cpu_list(list)?,
        };
        let iters = match run {
            RunLength::Iterations(n) => n,
            RunLength::Duration { .. } => u64::MAX,
        };
        Ok(TestConfig {
            shared: SharedParams {
                test,
                sizes,
                run,
                service: Service::Rc,
                qps: streams,
                bidirectional: false,
                rdma_cm: false,
                atomic_type: AtomicType::FetchAndAdd,
                validate: false,
                tcp: Some(TcpParams { streams, window, nodelay: a.nodelay || !bw }),
                backend: Backend::Verbs,
            },
            host: a.host.clone(),
            device: None,
            ib_port: 1,
            gid_index: None,
            mtu: None,
            // Writes complete when the kernel has the data: the depth only sets how
            // many go out between two looks at the completions.
            tx_depth: 128u64.min(iters) as u32,
            rx_depth: 16u64.min(iters) as u32,
            inline_size: 0,
            cq_mod: 64u64.min(iters).max(1) as u32,
            post_list: 1,
            outs: None,
            events: false,
            report_gbits: a.report.report_gbits,
            json: a.report.json.clone(),
            min_bw: a.report.min_bw,
            max_lat: a.report.max_lat,
            port: a.port.unwrap_or(DEFAULT_PORT),
            timeout: Duration::from_secs(a.report.timeout),
            pin,
            bind: None,
        })
    }

    /// Whether this side is the client.
    pub fn is_client(&self) -> bool {
        self.host.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE_BW: TestKind = TestKind { verb: Verb::Write, measure: Measure::Bw };
    const SEND_BW: TestKind = TestKind { verb: Verb::Send, measure: Measure::Bw };
    const READ_LAT: TestKind = TestKind { verb: Verb::Read, measure: Measure::Lat };
    const WRITE_LAT: TestKind = TestKind { verb: Verb::Write, measure: Measure::Lat };
    const SEND_LAT: TestKind = TestKind { verb: Verb::Send, measure: Measure::Lat };
    const ATOMIC_BW: TestKind = TestKind { verb: Verb::Atomic, measure: Measure::Bw };

    fn cfg(test: TestKind, a: PerfArgs) -> Result<TestConfig, String> {
        TestConfig::from_args(test, &a)
    }

    #[test]
    fn perftest_defaults_per_test() {
        let c = cfg(WRITE_BW, PerfArgs::default()).unwrap();
        assert_eq!(c.shared.sizes, [65536]);
        assert_eq!(c.shared.run, RunLength::Iterations(5000));
        assert_eq!((c.tx_depth, c.rx_depth, c.inline_size, c.qps()), (128, 1, 0, 1));
        // 64 KiB > 8 KiB: signaled one by one, as perftest does.
        assert_eq!(c.cq_mod, 1);
        assert_eq!(c.port, DEFAULT_PORT);
        let c = cfg(SEND_BW, PerfArgs::default()).unwrap();
        assert_eq!((c.shared.run, c.rx_depth), (RunLength::Iterations(1000), 512));
        let c = cfg(READ_LAT, PerfArgs::default()).unwrap();
        assert_eq!((c.shared.sizes.clone(), c.tx_depth, c.inline_size), (vec![2], 1, 0));
        assert_eq!(cfg(WRITE_LAT, PerfArgs::default()).unwrap().inline_size, 220);
        assert_eq!(cfg(SEND_LAT, PerfArgs::default()).unwrap().inline_size, 236);
        let ud = PerfArgs { connection: Some(ConnectionArg::Ud), ..Default::default() };
        assert_eq!(cfg(SEND_LAT, ud).unwrap().inline_size, 188);
        let small = PerfArgs { size: Some(4096), ..Default::default() };
        assert_eq!(cfg(WRITE_BW, small).unwrap().cq_mod, 100);
        assert_eq!(cfg(ATOMIC_BW, PerfArgs::default()).unwrap().shared.sizes, [8]);
    }

    #[test]
    fn sweeps_and_clamps() {
        let c = cfg(WRITE_BW, PerfArgs { all: true, ..Default::default() }).unwrap();
        assert_eq!(c.shared.sizes.len(), 23);
        assert_eq!((c.shared.sizes[0], *c.shared.sizes.last().unwrap()), (2, 1 << 23));
        let ud = PerfArgs {
            all: true,
            connection: Some(ConnectionArg::Ud),
            mtu: Some(1024),
            ..Default::default()
        };
        assert_eq!(*cfg(SEND_BW, ud).unwrap().shared.sizes.last().unwrap(), 1024);
        let few = PerfArgs { iters: Some(10), ..Default::default() };
        let c = cfg(WRITE_BW, few).unwrap();
        assert_eq!((c.tx_depth, c.cq_mod), (10, 1));
        let d = PerfArgs { duration: Some(8), ..Default::default() };
        let c = cfg(WRITE_BW, d).unwrap();
        assert_eq!(c.shared.run, RunLength::Duration { secs: 8, margin: 2 });
        assert_eq!(c.shared.run.window(), Some(Duration::from_secs(4)));
    }

    #[test]
    fn sizes_parse_like_perftest() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("8m"), Ok(8 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12Q").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999999999G").unwrap_err().contains("out of range"));
    }

    #[test]
    fn invalid_combinations_are_one_clear_line() {
        let cases: Vec<(TestKind, PerfArgs, &str)> = vec![
            (
                READ_LAT,
                PerfArgs { connection: Some(ConnectionArg::Uc), ..Default::default() },
                "RC only",
            ),
            (
                WRITE_BW,
                PerfArgs { connection: Some(ConnectionArg::Ud), ..Default::default() },
                "RC or UC only",
            ),
            (ATOMIC_BW, PerfArgs { size: Some(16), ..Default::default() }, "always 8 bytes"),
            (ATOMIC_BW, PerfArgs { all: true, ..Default::default() }, "nothing to sweep"),
            (
                WRITE_BW,
                PerfArgs { duration: Some(10), all: true, ..Default::default() },
                "-D cannot be combined with -a",
            ),
            (
                WRITE_BW,
                PerfArgs { duration: Some(4), margin: Some(2), ..Default::default() },
                "twice the margin",
            ),
            (WRITE_BW, PerfArgs { iters: Some(3), ..Default::default() }, "at least 5 iterations"),
            (READ_LAT, PerfArgs { qps: Some(2), ..Default::default() }, "one QP"),
            (READ_LAT, PerfArgs { bidirectional: true, ..Default::default() }, "bidirectional"),
            (
                WRITE_BW,
                PerfArgs { mtu: Some(1500), ..Default::default() },
                "256, 512, 1024, 2048, 4096",
            ),
            (WRITE_BW, PerfArgs { rx_depth: Some(64), ..Default::default() }, "posts no receives"),
            (
                READ_LAT,
                PerfArgs { inline_size: Some(64), ..Default::default() },
                "no payload to inline",
            ),
            (
                WRITE_BW,
                PerfArgs { post_list: Some(3), iters: Some(1000), ..Default::default() },
                "multiple of the post list",
            ),
            (WRITE_LAT, PerfArgs { events: true, ..Default::default() }, "polls memory"),
            (
                WRITE_BW,
                PerfArgs {
                    report: ReportArgs { max_lat: Some(5.0), ..Default::default() },
                    ..Default::default()
                },
                "only latency tests",
            ),
            (
                READ_LAT,
                PerfArgs {
                    report: ReportArgs { min_bw: Some(5.0), ..Default::default() },
                    ..Default::default()
                },
                "only bandwidth tests",
            ),
            (
                SEND_BW,
                PerfArgs {
                    connection: Some(ConnectionArg::Ud),
                    size: Some(8192),
                    mtu: Some(4096),
                    ..Default::default()
                },
                "must fit the MTU",
            ),
            (WRITE_BW, PerfArgs { margin: Some(1), ..Default::default() }, "needs -D"),
            (
                WRITE_BW,
                PerfArgs { atomic_type: Some(AtomicType::CmpAndSwap), ..Default::default() },
                "only the atomic tests",
            ),
        ];
        for (test, args, needle) in cases {
            let err = cfg(test, args.clone()).unwrap_err();
            assert!(
                err.contains(needle),
                "{}: {args:?} gave {err:?}, wanted {needle:?}",
                test.id()
            );
            assert!(!err.contains('\n'));
        }
    }

    impl TestConfig {
        fn qps(&self) -> u32 {
            self.shared.qps
        }
    }
}
