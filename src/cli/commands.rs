//! The other commands' flags (`devices`, `doctor`, `health`, `qualify`, `serve`, `compare`,
//! `completions`, `manpages`), each turned into its command's own options.

use clap::Args;

use super::args::BackendArg;

use crate::compare::{ClientOptions, CompareOptions};
use crate::error::Error;
use crate::serve::ServeOptions;
use crate::spec::parse_size;

#[doc = concat!("`rdmabench devices`.")]
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Only this device (e.g. mlx4_0, rxe0), as perftest's -d.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Everything: limits, GUIDs, PCIe link, NUMA node, LIDs.
    #[arg(short, long)]
    pub verbose: bool,
    /// JSON on stdout instead of text (schema: /usr/share/doc/rdmabench/docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// RDMA interface: verbs, or nd (NetworkDirect; -d then takes an adapter's IP).
    /// Default: nd on Windows, verbs elsewhere.
    #[arg(long = "backend", value_enum, value_name = "API")]
    pub backend: Option<BackendArg>,
}

#[doc = concat!("`rdmabench completions`.")]
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[doc = concat!("`rdmabench manpages`.")]
#[derive(Debug, Args)]
pub struct ManpagesArgs {
    /// Where the pages go (created if missing).
    #[arg(value_name = "DIR", value_parser = folder)]
    pub dir: std::path::PathBuf,
}

#[doc = concat!("`rdmabench doctor`.")]
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Only this device's checks (host checks always run).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Also write the checks as JSON to FILE (/usr/share/doc/rdmabench/docs/json.md); `-`:
    /// stdout, the checks' text then on stderr.
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Also write the checks as JUnit XML to FILE (N/A skipped, warnings in system-out);
    /// `-`: stdout.
    #[arg(long = "junit", value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// Judge the /sys and /proc under DIR (a tree `--capture` wrote) instead of this
    /// host's; no device is opened.
    #[arg(long = "root", value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
    /// Judge nothing: copy the files doctor reads (under --root, else this host's) into
    /// DIR, for `doctor --root DIR` to judge later, anywhere.
    #[arg(long = "capture", value_name = "DIR", value_parser = folder, conflicts_with_all = ["json", "junit", "device"])]
    pub capture: Option<std::path::PathBuf>,
    /// RDMA interface: verbs, or nd (NetworkDirect's checks). Default: nd on Windows,
    /// verbs elsewhere.
    #[arg(long = "backend", value_enum, value_name = "API")]
    pub backend: Option<BackendArg>,
}

#[doc = concat!("`rdmabench health`.")]
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// A device (all its ports) or DEVICE:PORT to test; repeat for several (default:
    /// every port of every device).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE[:PORT]")]
    pub ports: Vec<String>,
    /// Seconds of loopback write bandwidth (64 KiB) per port.
    #[arg(short = 'D', long = "duration", value_name = "SECS", default_value_t = 2,
          value_parser = clap::value_parser!(u64).range(1..=60))]
    pub seconds: u64,
    /// The bandwidth tests' message size, bytes with K/M suffixes (4K … 1M).
    #[arg(short = 's', long = "size", value_name = "BYTES", default_value = "64K", value_parser = health_size)]
    pub size: u64,
    /// Round trips of loopback write latency (2 bytes) per port.
    #[arg(short = 'n', long = "iters", value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(5..=1_000_000))]
    pub lat_iters: u64,
    /// The loopbacks' first control-channel TCP port (two per RDMA port, in turn).
    #[arg(short = 'p', long = "port", value_name = "PORT", default_value_t = crate::health::DEFAULT_BASE_PORT)]
    pub base_port: u16,
    /// Seconds to wait at each step of a loopback.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// Absolute floors from a qualify profile (built-in name or TOML file): its
    /// write_bw min_bw and write_lat max_lat_typical (default: write_bw ≥ 90% link).
    #[arg(long = "profile", value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Also write the report as JSON to FILE (/usr/share/doc/rdmabench/docs/json.md); `-`:
    /// stdout, the text then on stderr.
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Also write JUnit XML, a testcase per host, to FILE (`-`: stdout).
    #[arg(long = "junit", value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// Also write CSV, a row per finding (and per healthy host), to FILE (`-`: stdout).
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<std::path::PathBuf>,
    /// Write the unhealthy hosts, a name a line, to FILE (`-`: stdout).
    #[arg(long = "hostlist", value_name = "FILE")]
    pub hostlist: Option<std::path::PathBuf>,
    /// Print `scontrol update NodeName=… State=DRAIN Reason=…` for each unhealthy host
    /// (printed, never run).
    #[arg(long = "drain")]
    pub drain: bool,
    /// Write each host's figures and codes in Prometheus' text format to FILE on that host
    /// (node_exporter's textfile collector: DIR/rdmabench_health.prom).
    #[arg(long = "prometheus", value_name = "FILE")]
    pub prometheus: Option<std::path::PathBuf>,
    /// Where every host's result is recorded (`history --host`): on by default.
    #[command(flatten)]
    pub store: super::StoreArgs,
    /// Under mpirun/srun: a port below this fraction of the job's median loopback for its
    /// model and rate, or a host both of whose ring pairs' bandwidth are, is named.
    #[arg(long = "peer-fraction", value_name = "FRACTION", default_value_t = crate::health::DEFAULT_PEER_FRACTION)]
    pub peer_fraction: f64,
    /// Under mpirun/srun: a host both of whose ring pairs' latency are past X times the
    /// other pairs' median, and --lat-floor µs above it, is named.
    #[arg(long = "lat-ratio", value_name = "X", default_value_t = crate::health::DEFAULT_LAT_RATIO)]
    pub lat_ratio: f64,
    /// Under mpirun/srun: see --lat-ratio.
    #[arg(long = "lat-floor", value_name = "USEC", default_value_t = crate::health::DEFAULT_LAT_FLOOR_US)]
    pub lat_floor: f64,
}

impl HealthArgs {
    /// The flags as `health`'s options.
    ///
    /// # Errors
    /// No `--store` or `--no-store`, and no data directory for the default store.
    pub fn options(&self) -> Result<crate::health::HealthOptions, Error> {
        let store = match self.store.choice()? {
            crate::store::Choice::At(path) => Some(path),
            crate::store::Choice::Nowhere => None,
        };
        Ok(crate::health::HealthOptions {
            ports: self.ports.clone(),
            base_port: self.base_port,
            seconds: self.seconds,
            size: self.size,
            lat_iters: self.lat_iters,
            timeout: self.timeout,
            profile: self.profile.clone(),
            json: self.json.clone(),
            junit: self.junit.clone(),
            csv: self.csv.clone(),
            hostlist: self.hostlist.clone(),
            drain: self.drain,
            prometheus: self.prometheus.clone(),
            store,
            peer_fraction: self.peer_fraction,
            lat_ratio: self.lat_ratio,
            lat_floor_us: self.lat_floor,
        })
    }
}

#[doc = concat!("`rdmabench qualify`.")]
#[derive(Debug, Args)]
pub struct QualifyArgs {
    /// A built-in profile (quick, sweep) or a profile file (TOML; /usr/share/doc/rdmabench/examples/qualify-profile.toml).
    #[arg(value_name = "PROFILE")]
    pub profile: String,
    /// The host running `rdmabench serve`.
    #[arg(
        long = "server",
        value_name = "HOST",
        required_unless_present = "print_profile",
        default_value = "",
        hide_default_value = true
    )]
    pub server: String,
    /// Print the built-in PROFILE as TOML (to start one's own from) and exit.
    #[arg(long = "print-profile")]
    pub print_profile: bool,
    /// Take a baseline: doctor's firmware check is recorded, not judged (old firmware
    /// below the minimum does not fail the run), as the profile's firmware = "record".
    #[arg(long = "baseline-only")]
    pub baseline_only: bool,
    /// An earlier qualify JSON, or a stored run's id (rdmabench history): each point is
    /// judged better, same, worse or inconclusive against it; worse fails.
    #[arg(long = "baseline", value_name = "FILE|ID")]
    pub baseline: Option<String>,
    /// Write every run, the verdicts and the environments as JSON to FILE (`-`: stdout,
    /// the table then on stderr).
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Write JUnit XML (one testcase per check and test point) to FILE (`-`: stdout).
    #[arg(long = "junit", value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// Where qualify.json, junit.xml and report.html go.
    #[arg(long = "out", value_name = "DIR", default_value = "rdmabench-qualify", value_parser = folder)]
    pub out: std::path::PathBuf,
    /// No progress bar (there is none either when stderr is not a terminal).
    #[arg(long = "quiet")]
    pub quiet: bool,
    /// How this side reaches the server (`-d`: also the device doctor checks).
    #[command(flatten)]
    pub client: ClientArgs,
    /// Where the run is recorded.
    #[command(flatten)]
    pub store: super::StoreArgs,
}

#[doc = concat!("`rdmabench serve`.")]
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Listen on this address only (default: every address).
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// Control-channel TCP port (default 18520).
    #[arg(short = 'p', long = "port")]
    pub port: Option<u16>,
    /// RDMA device for the RDMA tests (default: the first).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Device port.
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u8>,
    /// GID index (default: the RoCE v2 GID of the address the client reached).
    #[arg(short = 'x', long = "gid-index", value_name = "N")]
    pub gid_index: Option<u8>,
    /// Seconds to wait for a client at each step of a test.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// Exit after this many tests have run (default: serve for ever); exit status 0
    /// only if every one passed.
    #[arg(long = "count", value_name = "N")]
    pub count: Option<u64>,
    /// Most buffer memory one test may hold, bytes with K/M/G suffixes (default 1G, at most 4G).
    #[arg(long = "max-memory", value_name = "BYTES", value_parser = parse_size)]
    pub max_memory: Option<u64>,
    /// Longest a test may hold the server, seconds (default 3600, at most 86400).
    #[arg(long = "max-time", value_name = "SECS")]
    pub max_time: Option<u64>,
    /// Serve only clients that prove they hold the shared secret in FILE (/usr/share/doc/rdmabench/docs/security.md).
    #[arg(long = "auth-key", value_name = "FILE")]
    pub auth_key: Option<std::path::PathBuf>,
}

#[doc = concat!("`rdmabench compare`.")]
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The host running `rdmabench serve`.
    #[arg(value_name = "HOST")]
    pub host: String,
    /// Where results.json, results.csv, the charts and report.html go.
    #[arg(long = "out", value_name = "DIR", default_value = "rdmabench-compare", value_parser = folder)]
    pub out: std::path::PathBuf,
    /// Message sizes (K/M suffixes), comma-separated (default: 2 B … 8 MiB, ×4 steps).
    #[arg(long = "sizes", value_name = "LIST", value_delimiter = ',', value_parser = parse_size)]
    pub sizes: Option<Vec<u64>>,
    /// Every power of two from 2 B to 8 MiB.
    #[arg(long = "all-sizes", conflicts_with = "sizes")]
    pub all_sizes: bool,
    /// The TCP series alone (iperf3's and qperf's figures, no RDMA): on a host without
    /// RDMA, or for a TCP baseline.
    #[arg(long = "tcp-only")]
    pub tcp_only: bool,
    /// Streams of the parallel TCP test.
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 4)]
    pub streams: u32,
    /// Bytes each bandwidth point moves (iterations = this / size, 5 … 5000). Default
    /// 64M, and at least 100 iterations a point (8 MiB: 800 MiB), so a large size is not
    /// measured in a handful of messages.
    #[arg(long = "bytes", value_parser = parse_size, value_name = "BYTES")]
    pub bytes: Option<u64>,
    /// Bytes each latency point moves (iterations = this / size, 5 … 1000).
    #[arg(long = "lat-bytes", value_name = "BYTES", value_parser = parse_size, default_value = "16M")]
    pub lat_bytes: u64,
    /// No progress bar (there is none either when stderr is not a terminal).
    #[arg(long = "quiet")]
    pub quiet: bool,
    /// How this side reaches the server.
    #[command(flatten)]
    pub client: ClientArgs,
}

#[doc = concat!(
    "How a client of `rdmabench serve` reaches it: what `compare` and `qualify` share.",
)]
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Control-channel TCP port of the server (default 18520).
    #[arg(short = 'p', long = "port")]
    pub port: Option<u16>,
    /// RDMA device on this side (default: the first).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// GID index on this side.
    #[arg(short = 'x', long = "gid-index", value_name = "N")]
    pub gid_index: Option<u8>,
    /// Seconds to wait for the server at each step.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// Prove to the server (and check) the shared secret in FILE (/usr/share/doc/rdmabench/docs/security.md).
    #[arg(long = "auth-key", value_name = "FILE")]
    pub auth_key: Option<std::path::PathBuf>,
}

impl ClientArgs {
    /// This side's settings for each test it runs against the server.
    ///
    /// # Errors
    /// A `--timeout` out of range, or an `--auth-key` file that cannot be used.
    pub fn local(&self) -> Result<crate::spec::Local, Error> {
        self.options().local()
    }

    /// The flags as the library's options.
    pub fn options(&self) -> ClientOptions {
        ClientOptions {
            port: self.port,
            device: self.device.clone(),
            gid_index: self.gid_index,
            timeout: self.timeout,
            auth_key: self.auth_key.clone(),
        }
    }
}

/// `health -s`: a message size from 4 KiB to 1 MiB.
fn health_size(text: &str) -> Result<u64, String> {
    let size = parse_size(text).map_err(|e| e.to_string())?;
    if !(4096..=1 << 20).contains(&size) {
        return Err(format!("{text}: from 4K to 1M"));
    }
    Ok(size)
}

/// A folder option's value: `-` (stdout) is a file option's, and is refused here, not
/// made a folder named `-`.
fn folder(text: &str) -> Result<std::path::PathBuf, String> {
    if text == "-" {
        return Err(
            "a folder of files, not stdout: `-` is stdout for a FILE option (--json -)".into()
        );
    }
    Ok(text.into())
}

impl CompareArgs {
    /// The flags as `compare`'s options.
    pub fn options(&self) -> CompareOptions {
        CompareOptions {
            host: self.host.clone(),
            out: self.out.clone(),
            sizes: self.sizes.clone(),
            all_sizes: self.all_sizes,
            tcp_only: self.tcp_only,
            streams: self.streams,
            bytes: self.bytes,
            lat_bytes: self.lat_bytes,
            quiet: self.quiet,
            client: self.client.options(),
        }
    }
}

impl ServeArgs {
    /// The flags as `serve`'s options.
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            bind: self.bind,
            port: self.port,
            device: self.device.clone(),
            ib_port: self.ib_port,
            gid_index: self.gid_index,
            timeout: self.timeout,
            count: self.count,
            max_memory: self.max_memory,
            max_time: self.max_time,
            auth_key: self.auth_key.clone(),
        }
    }
}
