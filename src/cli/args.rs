//! The flags of the tests, with perftest's and iperf3's names, and their translation
//! into a spec ([`crate::spec`]) plus this side's own settings. Nothing here decides a
//! default or a rule: [`crate::spec::rules`] does.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::error::Error;
use crate::spec::key::AuthKey;
/// One test on this side (`spec::TestOptions`), under the name the command line has long used.
pub use crate::spec::TestOptions as TestArgs;
use crate::spec::{parse_size, Local};
use crate::transport::{Backend, Service};

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

impl From<ConnectionArg> for Service {
    fn from(c: ConnectionArg) -> Service {
        match c {
            ConnectionArg::Rc => Service::Rc,
            ConnectionArg::Uc => Service::Uc,
            ConnectionArg::Ud => Service::Ud,
        }
    }
}

/// perftest's `-A`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AtomicArg {
    /// Fetch-and-add (default).
    FetchAndAdd,
    /// Compare-and-swap.
    CmpAndSwap,
}

/// perftest's `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum FigureArg {
    /// BW average only.
    Bandwidth,
    /// MsgRate only.
    MessageRate,
    /// Average latency only.
    Latency,
}

/// perftest's `--rate_units`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RateUnitsArg {
    /// MiB/s.
    #[value(name = "M")]
    M,
    /// Gb/s.
    #[value(name = "g")]
    G,
    /// Messages (packets) per second.
    #[value(name = "p")]
    P,
}

/// perftest's `--rate_limit_type`: only its software limiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RateLimitTypeArg {
    /// Software pacing.
    #[value(name = "SW")]
    Sw,
}

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// Linux ibverbs.
    Verbs,
    /// Windows NetworkDirect (NDSPI v2).
    Nd,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Backend {
        match b {
            BackendArg::Verbs => Backend::Verbs,
            BackendArg::Nd => Backend::Nd,
        }
    }
}

#[doc = concat!("The flags of every perftest-style test, with perftest's names.")]
#[derive(Clone, Debug, Default, Args)]
pub struct PerfArgs {
    /// Server to connect to; without it, this side is the server.
    pub host: Option<String>,
    /// RDMA device (default: the first); several, comma-separated, run a bandwidth test
    /// over each at once (multi-rail, ports -p, -p+1, …; HOST may list one per rail).
    #[arg(short = 'd', long = "ib-dev", alias = "devices", value_name = "DEV[,DEV…]")]
    pub device: Option<String>,
    /// Device port.
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u8>,
    /// GID index (default: the RoCE v2 IPv4 GID on RoCE, none on InfiniBand).
    #[arg(short = 'x', long = "gid-index", value_name = "N")]
    pub gid_index: Option<u8>,
    /// Size, sweep, iterations or duration.
    #[command(flatten)]
    pub run: RunArgs,
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
    /// TCP port of the control channel (and of rdma_cm with -R): default 18520, 18515 with --perftest.
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
    /// RC ACK timeout: 4.096 µs × 2^N before a retry (perftest's -u; default 14, 67 ms).
    #[arg(short = 'u', long = "qp-timeout", value_name = "N")]
    pub qp_timeout: Option<u8>,
    /// RC retries before the work fails with IBV_WC_RETRY_EXC_ERR (0-7; default 7).
    #[arg(long = "retry_count", alias = "retry-count", value_name = "N")]
    pub retry_count: Option<u8>,
    /// Service level, 0-15 (the virtual lane on InfiniBand).
    #[arg(short = 'S', long = "sl", value_name = "SL")]
    pub sl: Option<u8>,
    /// GRH traffic class (RoCE v2: the IP header's DSCP << 2 | ECN).
    #[arg(long = "tclass", value_name = "N")]
    pub traffic_class: Option<u8>,
    /// GRH flow label, 20 bits.
    #[arg(long = "flow_label", alias = "flow-label", value_name = "N")]
    pub flow_label: Option<u32>,
    /// Pace the sender to this rate, in --rate_units (software: bursts, then a pause).
    #[arg(long = "rate_limit", alias = "rate-limit", value_name = "RATE")]
    pub rate_limit: Option<f64>,
    /// --rate_limit's units: M (MiB/s), g (Gb/s, the default) or p (messages/s).
    #[arg(long = "rate_units", alias = "rate-units", value_enum, value_name = "M|g|p")]
    pub rate_units: Option<RateUnitsArg>,
    /// Messages per burst under --rate_limit (default: the send queue depth, -t).
    #[arg(long = "burst_size", alias = "burst-size", value_name = "N")]
    pub burst_size: Option<u32>,
    /// Run the measuring thread on these CPUs, e.g. 0,2-3 (default: the device's NUMA node).
    #[arg(long = "pin_cores", alias = "pin-cores", value_name = "LIST")]
    pub pin_cores: Option<String>,
    /// Run the measuring thread on this NUMA node's CPUs (default: the device's node).
    #[arg(long = "numa_node", alias = "numa-node", value_name = "N")]
    pub numa_node: Option<u32>,
    /// Bandwidth tests: spread the -q queue pairs over this many threads, each on a CPU of
    /// the device's NUMA node (or of --pin_cores), one aggregate result (default 1).
    #[arg(long = "threads", value_name = "T")]
    pub threads: Option<u32>,
    /// Run until SIGINT, printing the bandwidth of every -D seconds; then their summary.
    #[arg(long = "run_infinitely", alias = "run-infinitely")]
    pub run_infinitely: bool,
    /// Print every latency sample, sorted, before the table (latency tests, -n runs).
    #[arg(short = 'H', long = "report-histogram", alias = "report-histogrm")]
    pub histogram: bool,
    /// Print every latency sample in the order measured (implies -H's listing).
    #[arg(short = 'U', long = "report-unsorted")]
    pub unsorted: bool,
    /// Before each size, a full send queue on each QP, unmeasured (write, read, atomic BW).
    #[arg(long = "perform_warm_up", alias = "perform-warm-up")]
    pub warm_up: bool,
    /// Accepted for perftest compatibility: -b always shows each direction and the sum.
    #[arg(long = "report-both", alias = "report_both")]
    pub report_both: bool,
    /// Buffers in huge pages (reserved with sysctl vm.nr_hugepages).
    #[arg(long = "use_hugepages", alias = "use-hugepages")]
    pub hugepages: bool,
    /// The receiver's QPs take receives from one shared receive queue of -r entries
    /// (send tests).
    #[arg(long = "use-srq", alias = "use_srq")]
    pub shared_receives: bool,
    /// RDMA writes with immediate data: each consumes a receive at the peer, which
    /// counts them (write tests).
    #[arg(long = "write_with_imm", alias = "write-with-imm")]
    pub write_with_imm: bool,
    /// Sends with immediate data (send tests).
    #[arg(long = "send_with_imm", alias = "send-with-imm")]
    pub send_with_imm: bool,
    /// The server sends and measures, the client receives (bandwidth tests; both sides
    /// give it, as perftest's).
    #[arg(long = "reversed")]
    pub reversed: bool,
    /// Register the buffers for on-demand paging instead of pinning them (where the
    /// device offers it).
    #[arg(long = "odp")]
    pub odp: bool,
    /// Accepted for perftest compatibility: every QP always has its own memory region.
    #[arg(long = "mr_per_qp", alias = "mr-per-qp")]
    pub mr_per_qp: bool,
    /// The rate limiter: SW, software pacing (perftest's HW and PP are not implemented).
    #[arg(long = "rate_limit_type", value_enum, value_name = "SW")]
    pub rate_limit_type: Option<RateLimitTypeArg>,
    /// Atomic operation.
    #[arg(short = 'A', long = "atomic_type", value_enum, value_name = "TYPE")]
    pub atomic_type: Option<AtomicArg>,
    /// The receiver checks a per-message pattern in its buffer after the run.
    #[arg(long = "validate")]
    pub validate: bool,
    /// RDMA interface: verbs, or nd (NetworkDirect). Default: nd on Windows, verbs elsewhere.
    #[arg(long = "backend", value_enum, value_name = "API")]
    pub backend: Option<BackendArg>,
    /// The peer is perftest (ib_write_bw, …): speak its exchange on its port (18515
    /// unless -p). Start both sides with the same flags, as two perftests.
    #[arg(long = "perftest")]
    pub perftest: bool,
    /// perftest's name for --min-bw: exit 1 below this BW average (report units).
    #[arg(short = 'w', long = "limit_bw", value_name = "BW")]
    pub limit_bw: Option<f64>,
    /// Exit 1 if the message rate of any size falls below this many Mpps (perftest's -y).
    #[arg(short = 'y', long = "limit_msgrate", value_name = "MPPS")]
    pub limit_msgrate: Option<f64>,
    /// Print only this figure, a number per size, no header (perftest's --output).
    #[arg(long = "output", value_enum, value_name = "FIGURE")]
    pub output: Option<FigureArg>,
    /// Show how this side's port counters moved over each size, with a warning when an
    /// error, discard, retry or NAK counter did: `all` (those that moved) or a list.
    #[arg(short = 'W', long = "report-counters", value_name = "all|LIST")]
    pub report_counters: Option<String>,
    /// Where a server listens, and the shared secret.
    #[command(flatten)]
    pub access: AccessArgs,
    /// Output, thresholds, timeout.
    #[command(flatten)]
    pub report: ReportArgs,
}

#[doc = concat!(
    "Who may reach a server, and the secret both sides prove they hold: alike on every ",
    "test.",
)]
#[derive(Clone, Debug, Default, Args)]
pub struct AccessArgs {
    /// Server: listen on this address only (default: every address).
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// Both sides: run only with a peer that proves it holds the secret in FILE (/usr/share/doc/rdmabench/docs/security.md).
    #[arg(long = "auth-key", value_name = "FILE")]
    pub auth_key: Option<PathBuf>,
}

impl AccessArgs {
    /// Sets this side's listening address and key, checked against its side.
    pub(super) fn apply(&self, client: bool, local: &mut Local) -> Result<(), Error> {
        if client && self.bind.is_some() {
            return Err(Error::usage("--bind: only a server listens (a client names HOST)"));
        }
        if client && local.port == 0 {
            return Err(Error::usage("-p 0: a client needs the server's port"));
        }
        local.bind = self.bind;
        local.auth = self.auth_key.as_deref().map(AuthKey::load).transpose()?;
        Ok(())
    }
}

#[doc = concat!("How much every test runs, RDMA or TCP, with perftest's names.")]
#[derive(Clone, Debug, Default, Args)]
pub struct RunArgs {
    /// Message size in bytes (K/M/G suffixes). Default 65536 (bandwidth), 2 (latency).
    #[arg(short = 's', long = "size", value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Sweep sizes 2 B … 8 MiB.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations per size (per QP or stream). Default 5000 (write_bw, tcp_bw), 1000 otherwise.
    #[arg(short = 'n', long = "iters", value_name = "N")]
    pub iters: Option<u64>,
    /// Run for this many seconds instead of a number of iterations.
    #[arg(short = 'D', long = "duration", value_name = "SECS")]
    pub duration: Option<u64>,
    /// Warm-up and cool-down margin excluded from a -D window, seconds each (default: D/4
    /// exactly, to the millisecond: 0.5 s of -D 2).
    #[arg(short = 'f', long = "margin", value_name = "SECS")]
    pub margin: Option<u64>,
}

#[doc = concat!("What every test takes alike, RDMA or TCP: output, thresholds, the step timeout.")]
#[derive(Clone, Debug, Args)]
pub struct ReportArgs {
    /// Report Gb/s (10^9 bit/s) instead of MiB/s (2^20 B/s).
    #[arg(long = "report_gbits", alias = "report-gbits")]
    pub report_gbits: bool,
    /// Write the whole run (every size) as one JSON document to FILE (`-`: stdout, the
    /// table then goes to stderr).
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 1 if the average bandwidth of any size falls below this (report units).
    #[arg(long = "min-bw", value_name = "BW")]
    pub min_bw: Option<f64>,
    /// Exit 1 if the typical (median) latency of any size exceeds this many µs.
    #[arg(long = "max-lat", value_name = "USEC")]
    pub max_lat: Option<f64>,
    /// Seconds to wait for the peer at each step before giving up. 0, on a one-shot
    /// server: wait for ever for the first client (as perftest and iperf3 servers), each
    /// step once it is connected still bounded by 30 s.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// The longest this side lets the test run once connected, whatever the peer does
    /// (1 to 86400; default: a -D run's seconds plus --timeout for set-up and each size,
    /// else 3600, as serve's; none for --run_infinitely).
    #[arg(long = "max-time", value_name = "SECS")]
    pub max_time: Option<u64>,
    /// No progress bar during a sweep (-a) or a timed run (-D); there is none either
    /// when stderr is not a terminal.
    #[arg(long = "quiet")]
    pub quiet: bool,
    /// Print both sides' CPU cost under each size (as perftest's; always in --json).
    #[arg(long = "cpu_util", alias = "cpu-util")]
    pub cpu_util: bool,
    /// A row per QP or stream under each size's total (perftest's -v is --mac_fwd: long
    /// only).
    #[arg(long = "verbose")]
    pub verbose: bool,
    /// Record the run in the results store (rdmabench history): `--store` alone (last, or
    /// before another flag) the default one ($XDG_DATA_HOME/rdmabench/results.db);
    /// `--store PATH` or `--store=PATH` another. The word after `--store` is its PATH:
    /// write `HOST --store`, not `--store HOST` (refused when it leaves no HOST and the
    /// PATH is not a store: no `.db`, no `/`, no such file).
    #[arg(long = "store", value_name = "PATH", num_args = 0..=1)]
    pub store: Option<Option<PathBuf>>,
    /// Bandwidth tests: print the bytes, bandwidth and message rate of every SECS
    /// interval as the run goes, on the sending side (iperf3's -i; TCP tests also take
    /// -i, which is --ib-port on RDMA tests).
    #[arg(long = "interval", value_name = "SECS")]
    pub interval: Option<f64>,
    /// Bandwidth tests: append one JSON record per interval (--interval's, else 1 s) to
    /// FILE as the run goes, on the sending side: its time (RFC 3339), bytes, bandwidth,
    /// message rate and a verdict (below --min-bw, error counters moved, link changed;
    /// any failed interval fails the run) (docs/json.md#json-lines).
    #[arg(long = "json-lines", value_name = "FILE")]
    pub json_lines: Option<PathBuf>,
}

impl Default for ReportArgs {
    /// As the command line without these flags.
    fn default() -> Self {
        ReportArgs {
            report_gbits: false,
            json: None,
            min_bw: None,
            max_lat: None,
            timeout: 30,
            max_time: None,
            quiet: false,
            cpu_util: false,
            verbose: false,
            store: None,
            interval: None,
            json_lines: None,
        }
    }
}

#[doc = concat!(
    "The flags of `tcp-bw` and `tcp-lat`: perftest's where they mean the same, iperf3's ",
    "for the rest (`-P`, `-w`, `-N`).",
)]
#[derive(Clone, Debug, Default, Args)]
pub struct TcpArgs {
    /// Server to connect to; without it, this side is the server: given none of -s -a -n
    /// -D -f -P -w -N it runs what its client asks (iperf3 -s); given any, it refuses a
    /// client whose test differs, naming each flag (perftest).
    #[arg(value_name = "HOST")]
    pub host: Option<String>,
    /// Size, sweep, iterations or duration.
    #[command(flatten)]
    pub run: RunArgs,
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
    /// The same as --interval SECS (iperf3's -i).
    #[arg(short = 'i', value_name = "SECS")]
    pub interval_short: Option<f64>,
    /// Control-channel TCP port, default 18520 (the data streams use a port the server picks).
    #[arg(short = 'p', long = "port")]
    pub port: Option<u16>,
    /// Where a server listens, and the shared secret.
    #[command(flatten)]
    pub access: AccessArgs,
    /// Output, thresholds, timeout.
    #[command(flatten)]
    pub report: ReportArgs,
}
