//! `rdmabench mesh`'s flags, and their translation into a [`MeshSpec`] plus this rank's
//! own settings. The pair tests' names where they mean the same.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::args::{BackendArg, ConnectionArg, RunArgs};
use crate::error::Error;
use crate::mesh::analysis::Thresholds;
use crate::mesh::schedule::Pairs;
use crate::mesh::MeshSpec;
use crate::spec::rules::{self, RdmaRequest, TcpRequest};
use crate::spec::{Local, Measure, TestKind, Verb};

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
    /// Size, iterations or duration of both tests, as the pair tests take them (one
    /// size: no -a).
    #[command(flatten)]
    pub run: RunArgs,
    /// Queue pairs of the bandwidth test.
    #[arg(short = 'q', long = "qp", value_name = "N")]
    pub qps: Option<u32>,
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
    /// Which pairs: all, ring (each rank and the next) or random:K (K partners per rank).
    #[arg(long = "pairs", value_name = "SET", default_value = "all")]
    pub pairs: Pairs,
    /// Seed of random:K (default: rank 0 picks one and prints it).
    #[arg(long = "seed", value_name = "N")]
    pub seed: Option<u64>,
    /// Rank 0 ends the job, naming the ranks it waited for, when a round takes longer.
    #[arg(long = "round-timeout", value_name = "SECS", default_value_t = 120)]
    pub round_timeout: u64,
    /// How long a pair test waits for its peer at each step, seconds.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// Exit 1 if any link's BW average is below this, MB/s (2^20 B/s).
    #[arg(long = "min-bw", value_name = "MB/S")]
    pub min_bw: Option<f64>,
    /// Exit 1 if a link is slower than the median link by more than PCT percent: a byte
    /// (bandwidth) or a message (latency) takes over 1 + PCT/100 times as long.
    #[arg(long = "outlier", value_name = "PCT", default_value_t = 25.0)]
    pub outlier: f64,
    /// This rank's address for the control connections (default: the device's RoCE
    /// IPv4 address, else the host name's).
    #[arg(long = "address", value_name = "IP")]
    pub address: Option<std::net::IpAddr>,
    /// This rank's control port (default 0: the system picks one; the ranks exchange it).
    #[arg(short = 'p', long = "port", value_name = "PORT", default_value_t = 0)]
    pub port: u16,
    /// Rank 0 writes the matrices, links and findings as JSON to FILE (after every round
    /// too, so a stopped job keeps what it measured).
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Rank 0 writes one row per directed link as CSV to FILE.
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Rank 0 writes an HTML page with the heatmaps to FILE.
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl MeshArgs {
    /// The mesh every rank runs, checked once.
    ///
    /// # Errors
    /// One line naming the flag (kind `usage`).
    pub fn to_mesh(&self) -> Result<MeshSpec, Error> {
        let run = &self.run;
        if run.all {
            return Err(Error::usage("-a: a mesh measures one size per test (give -s)"));
        }
        let verb = match self.verb {
            MeshVerb::Write => Verb::Write,
            MeshVerb::Read => Verb::Read,
            MeshVerb::Send => Verb::Send,
        };
        let (bw, lat) = if self.tcp {
            if self.device.is_some()
                || self.qps.is_some()
                || self.connection.is_some()
                || self.backend.is_some()
            {
                return Err(Error::usage("--tcp: -d, -q, -c and --backend are RDMA flags"));
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
                &RdmaRequest { qps: self.qps, ..r.clone() },
            )?;
            (bw, rules::rdma(TestKind { verb, measure: Measure::Lat }, &r)?)
        };
        if !(self.outlier.is_finite() && self.outlier > 0.0) {
            return Err(Error::usage(format!("--outlier {}: a percentage above 0", self.outlier)));
        }
        if self.min_bw.is_some_and(|b| !(b.is_finite() && b > 0.0)) {
            return Err(Error::usage("--min-bw: a bandwidth above 0 MB/s"));
        }
        if self.round_timeout == 0 || self.timeout == 0 {
            return Err(Error::usage("--round-timeout and --timeout: at least 1 second"));
        }
        Ok(MeshSpec {
            bw,
            lat,
            pairs: self.pairs,
            seed: self.seed,
            round_timeout: Duration::from_secs(self.round_timeout),
            thresholds: Thresholds { min_bw: self.min_bw, outlier_pct: self.outlier },
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
