//! `rdmabench mesh`'s flags, and their translation into a [`MeshSpec`] plus this rank's
//! own settings. The pair tests' names where they mean the same.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::args::{BackendArg, ConnectionArg};
use crate::error::Error;
use crate::mesh::findings::{Judge, Thresholds};
use crate::mesh::launch::MeshOptions;
use crate::mesh::pattern::{Pattern, PatternList, PatternSpec};
use crate::mesh::schedule::Pairs;
use crate::mesh::MeshSpec;
use crate::spec::rules::{self, RdmaRequest, TcpRequest};
use crate::spec::{parse_size, Local, Measure, TestKind, Verb};

/// What fails the run (`--judge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum JudgeArg {
    /// Bandwidth only (latency is measured and shown).
    Bw,
    /// Latency only.
    Lat,
    /// Both.
    Both,
}

/// Which operation the RDMA tests of a mesh use (`--verb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MeshVerb {
    /// write_bw and write_lat (perftest's defaults for a cluster check).
    Write,
    /// read_bw and read_lat.
    Read,
    /// send_bw and send_lat.
    Send,
}

#[doc = concat!("`rdmabench mesh`: started by mpirun or srun, one rank per node or device.")]
#[derive(Clone, Debug, Args)]
pub struct MeshArgs {
    /// RDMA device of this rank (default: the first).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub device: Option<String>,
    /// Device port.
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u8>,
    /// GID index (default: the RoCE v2 GID of --address on RoCE).
    #[arg(short = 'x', long = "gid-index", value_name = "N")]
    pub gid_index: Option<u8>,
    /// Message size of both tests, bytes (K/M/G suffixes). Default 65536 (bandwidth), 2
    /// (latency).
    #[arg(short = 's', long = "size", value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Iterations of each test. Default 5000 (write_bw, tcp_bw), 1000 otherwise.
    #[arg(short = 'n', long = "iters", value_name = "N")]
    pub iters: Option<u64>,
    /// Run each test for this many seconds instead of a number of iterations.
    #[arg(short = 'D', long = "duration", value_name = "SECS")]
    pub duration: Option<u64>,
    /// Warm-up and cool-down margin excluded from a -D window, seconds each (default: D/4
    /// exactly, to the millisecond: 0.5 s of -D 2).
    #[arg(short = 'f', long = "margin", value_name = "SECS")]
    pub margin: Option<u64>,
    /// Queue pairs of the bandwidth test.
    #[arg(short = 'q', long = "qp", value_name = "N")]
    pub qps: Option<u32>,
    /// Send queue depth of the bandwidth test (default 128): a shallow one makes a link's
    /// bandwidth follow its round trip, as a window-bound flow's does.
    #[arg(short = 't', long = "tx-depth", value_name = "N")]
    pub tx_depth: Option<u32>,
    /// Connection type: RC, UC or UD, where the operation allows.
    #[arg(short = 'c', long = "connection", value_enum, value_name = "TYPE")]
    pub connection: Option<ConnectionArg>,
    /// The operation: write, read or send.
    #[arg(long = "verb", value_enum, value_name = "OP", default_value = "write")]
    pub verb: MeshVerb,
    /// RDMA interface: verbs, or nd (NetworkDirect).
    #[arg(long = "backend", value_enum, value_name = "API")]
    pub backend: Option<BackendArg>,
    /// Over TCP instead of RDMA (tcp-bw and tcp-lat).
    #[arg(long = "tcp")]
    pub tcp: bool,
    /// Parallel streams of the TCP bandwidth test.
    #[arg(short = 'P', long = "parallel", value_name = "N", requires = "tcp")]
    pub streams: Option<u32>,
    /// Which pairs: all, ring (each rank and the next), random:K (K partners per rank), or
    /// auto: all up to 64 ranks, random:16 beyond (docs/mesh.md#at-scale).
    #[arg(long = "pairs", value_name = "SET", default_value = "auto")]
    pub pairs: Pairs,
    /// Seed of random:K and of bisection's halves (default: rank 0 picks one and prints
    /// it).
    #[arg(long = "seed", value_name = "N")]
    pub seed: Option<u64>,
    /// Traffic patterns run after the pairs, each against the same links alone: pairs
    /// (the pairs only), incast (N-1 senders into one receiver), all-to-all, bisection
    /// (half the ranks to the other half); a comma-separated list runs several.
    #[arg(long = "pattern", value_name = "LIST", default_value = "pairs")]
    pub pattern: PatternList,
    /// Incast into this rank only (default: into every rank in turn).
    #[arg(long = "incast-root", value_name = "RANK")]
    pub incast_root: Option<usize>,
    /// Bisection: how many random cuts into halves (drawn from --seed).
    #[arg(long = "bisection-rounds", value_name = "N", default_value_t = 4)]
    pub bisection_rounds: usize,
    /// A pattern round whose aggregate is below this fraction of its links' sum alone
    /// fails the run (default: none does; the ratios are reported).
    #[arg(long = "min-pattern-ratio", value_name = "X")]
    pub min_pattern_ratio: Option<f64>,
    /// Each flow of a pattern round runs this long (the pairs' bandwidth test as a -D
    /// run), so that all of a round's flows overlap in a shared window.
    #[arg(long = "pattern-secs", value_name = "SECS", default_value_t = 2)]
    pub pattern_secs: u64,
    /// Rank 0 ends the job, naming the ranks it waited for, when a round takes longer.
    #[arg(long = "round-timeout", value_name = "SECS", default_value_t = 120)]
    pub round_timeout: u64,
    /// How long a pair test waits for its peer at each step, seconds.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// A link whose BW average is below this, MB/s (2^20 B/s), is measured again alone;
    /// below it again, it fails the run.
    #[arg(long = "min-bw", value_name = "MB/S")]
    pub min_bw: Option<f64>,
    /// Bandwidth: a link is suspect only when a byte takes over 1 + PCT/100 times as long
    /// as on its peers' typical link (and it is 4 MADs off).
    #[arg(long = "outlier", value_name = "PCT", default_value_t = 25.0)]
    pub outlier: f64,
    /// Latency: a link is suspect only past this many times its peers' typical t_typical…
    #[arg(long = "lat-ratio", value_name = "X", default_value_t = 3.0)]
    pub lat_ratio: f64,
    /// …and this many µs above it (scheduler ticks on a busy host never trip it).
    #[arg(long = "lat-floor", value_name = "USEC", default_value_t = 50.0)]
    pub lat_floor: f64,
    /// What fails the run: bw, lat or both. A suspect fails it only when measured again
    /// alone it is slow again.
    #[arg(long = "judge", value_enum, value_name = "WHAT", default_value = "both")]
    pub judge: JudgeArg,
    /// At most this many suspect pairs are measured again alone (the worst first).
    #[arg(long = "recheck", value_name = "N", default_value_t = 32)]
    pub recheck: usize,
    /// A recheck alone runs this many times the first measurement's iterations (at least
    /// 100; a -D run this many times as long). Default: 1 up to 64 ranks, 4 beyond.
    #[arg(long = "recheck-length", value_name = "X", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub recheck_length: Option<u32>,
    /// This rank's address for the control connections (default: the device's RoCE
    /// IPv4 address, else the host name's).
    #[arg(long = "address", value_name = "IP")]
    pub address: Option<std::net::IpAddr>,
    /// This rank's control port (default 0: the system picks one; the ranks exchange it).
    #[arg(short = 'p', long = "port", value_name = "PORT", default_value_t = 0)]
    pub port: u16,
    /// Rank 0 writes the matrices, links and findings as JSON to FILE (after every round
    /// too, so a stopped job keeps what it measured); `-`: stdout at the end, the text
    /// then on stderr.
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Rank 0 writes one row per directed link as CSV to FILE (`-`: stdout).
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Rank 0 writes an HTML page with the heatmaps to FILE (`-`: stdout).
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl MeshArgs {
    /// What the mesh runs with, checked once.
    ///
    /// # Errors
    /// One line naming the flag (kind `usage`).
    pub fn to_options(&self) -> Result<MeshOptions, Error> {
        crate::files::one_stdout(&[
            ("--json", self.json.as_deref()),
            ("--csv", self.csv.as_deref()),
            ("--html", self.html.as_deref()),
        ])?;
        Ok(MeshOptions {
            mesh: self.to_mesh()?,
            local: self.local(),
            tcp: self.tcp,
            backend: self.backend.map_or_else(crate::transport::Backend::native, Into::into),
            address: self.address,
            json: self.json.clone(),
            csv: self.csv.clone(),
            html: self.html.clone(),
        })
    }

    /// The mesh every rank runs, checked once.
    ///
    /// # Errors
    /// One line naming the flag (kind `usage`).
    pub fn to_mesh(&self) -> Result<MeshSpec, Error> {
        let run = self;
        let verb = match self.verb {
            MeshVerb::Write => Verb::Write,
            MeshVerb::Read => Verb::Read,
            MeshVerb::Send => Verb::Send,
        };
        let (bw, lat) = if self.tcp {
            if self.device.is_some()
                || self.qps.is_some()
                || self.tx_depth.is_some()
                || self.connection.is_some()
                || self.backend.is_some()
            {
                return Err(Error::usage("--tcp: -d, -q, -t, -c and --backend are RDMA flags"));
            }
            let r = TcpRequest {
                size: run.size,
                iters: run.iters,
                duration: run.duration,
                margin: run.margin,
                streams: self.streams,
                ..TcpRequest::default()
            };
            (
                rules::tcp(Measure::Bw, &r)?,
                rules::tcp(Measure::Lat, &TcpRequest { streams: None, ..r })?,
            )
        } else {
            let r = RdmaRequest {
                size: run.size,
                iters: run.iters,
                duration: run.duration,
                margin: run.margin,
                service: self.connection.map(Into::into),
                backend: self.backend.map(Into::into),
                ..RdmaRequest::default()
            };
            let bw = rules::rdma(
                TestKind { verb, measure: Measure::Bw },
                &RdmaRequest { qps: self.qps, tx_depth: self.tx_depth, ..r.clone() },
            )?;
            (bw, rules::rdma(TestKind { verb, measure: Measure::Lat }, &r)?)
        };
        if !(self.outlier.is_finite() && self.outlier > 0.0) {
            return Err(Error::usage(format!("--outlier {}: a percentage above 0", self.outlier)));
        }
        if !(self.lat_ratio.is_finite() && self.lat_ratio >= 1.0) {
            return Err(Error::usage(format!(
                "--lat-ratio {}: a ratio of 1 or more",
                self.lat_ratio
            )));
        }
        if !(self.lat_floor.is_finite() && self.lat_floor >= 0.0) {
            return Err(Error::usage(format!(
                "--lat-floor {}: microseconds, 0 or more",
                self.lat_floor
            )));
        }
        if self.min_bw.is_some_and(|b| !(b.is_finite() && b > 0.0)) {
            return Err(Error::usage("--min-bw: a bandwidth above 0 MB/s"));
        }
        if self.round_timeout == 0 || self.timeout == 0 {
            return Err(Error::usage("--round-timeout and --timeout: at least 1 second"));
        }
        let patterns = self.patterns()?;
        Ok(MeshSpec {
            bw,
            lat,
            pairs: self.pairs,
            seed: self.seed,
            round_timeout: Duration::from_secs(self.round_timeout),
            thresholds: Thresholds {
                min_bw: self.min_bw,
                outlier_pct: self.outlier,
                lat_ratio: self.lat_ratio,
                lat_floor_usec: self.lat_floor,
                judge: match self.judge {
                    JudgeArg::Bw => Judge::Bw,
                    JudgeArg::Lat => Judge::Lat,
                    JudgeArg::Both => Judge::Both,
                },
                recheck_max: self.recheck,
                iterations: self.iters,
                recheck_length: self.recheck_length,
            },
            patterns,
        })
    }

    /// The patterns after the pairs, checked (the rank count is checked at run time).
    fn patterns(&self) -> Result<PatternSpec, Error> {
        let list: Vec<Pattern> =
            self.pattern.0.iter().copied().filter(|p| *p != Pattern::Pairs).collect();
        if self.incast_root.is_some() && !list.contains(&Pattern::Incast) {
            return Err(Error::usage("--incast-root: for --pattern incast"));
        }
        if self.bisection_rounds == 0 {
            return Err(Error::usage("--bisection-rounds: at least 1"));
        }
        if self.min_pattern_ratio.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Err(Error::usage("--min-pattern-ratio: a ratio above 0 (e.g. 0.8)"));
        }
        if !(1..=3600).contains(&self.pattern_secs) {
            return Err(Error::usage("--pattern-secs: 1 to 3600 seconds"));
        }
        Ok(PatternSpec {
            patterns: list,
            incast_root: self.incast_root,
            bisection_rounds: self.bisection_rounds,
            min_ratio: self.min_pattern_ratio,
            secs: self.pattern_secs,
        })
    }

    /// This rank's own settings.
    pub fn local(&self) -> Local {
        let timeout = Duration::from_secs(self.timeout);
        Local {
            device: self.device.clone(),
            ib_port: self.ib_port.unwrap_or(1),
            gid_index: self.gid_index,
            port: self.port,
            timeout,
            connect_window: timeout,
            quiet: true,
            ..Local::default()
        }
    }
}
