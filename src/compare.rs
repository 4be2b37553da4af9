//! `rdmabench compare HOST`: RDMA against TCP over a size sweep, against a
//! `rdmabench serve`. Each point is one ordinary test run as a client (the same code,
//! clock and CPU accounting as `write-bw` or `tcp-bw`); the points are gathered into
//! one report, written as JSON, CSV, SVG charts and an HTML page.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::{self, tool, Side};
use crate::error::{Error, ErrorKind};
use crate::report::compare::{self, CompareReport, Row, Series};
use crate::report::svg::size_label;
use crate::session::connect::{connect_retrying, ConnectFailure};
use crate::spec::rules::{self, RdmaRequest, TcpRequest};
use crate::spec::{Local, Measure, TestKind, TestSpec, Verb, MAX_SWEEP_SIZE};

/// How long `compare` waits for a server that refuses connections (one still starting).
pub(crate) const SERVER_STARTING: Duration = Duration::from_secs(3);

/// What `compare` runs: the command line's flags (`cli::CompareArgs`), or code's own.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The `rdmabench serve` to run against.
    pub host: String,
    /// Where the report files go.
    pub out: PathBuf,
    /// `--sizes` (None: [`default_sizes`]).
    pub sizes: Option<Vec<u64>>,
    /// `--all-sizes`: every power of two from 2 B to 8 MiB.
    pub all_sizes: bool,
    /// `--tcp-only`: the TCP series alone.
    pub tcp_only: bool,
    /// TCP streams of the multi-stream series (`-P`).
    pub streams: u32,
    /// Bytes each bandwidth point moves (its iterations follow); None: the default
    /// budget, [`DEFAULT_BYTES`] with at least [`DEFAULT_MIN_BW_ITERS`] iterations.
    pub bytes: Option<u64>,
    /// Bytes each latency point moves.
    pub lat_bytes: u64,
    /// No progress bar.
    pub quiet: bool,
    /// How to reach the server.
    pub client: ClientOptions,
}

/// How a client of `rdmabench serve` reaches it: what `compare` and `qualify` share.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Control port (None: the default).
    pub port: Option<u16>,
    /// This side's device (`-d`).
    pub device: Option<String>,
    /// This side's GID index (`-x`).
    pub gid_index: Option<u8>,
    /// Per-step timeout, seconds.
    pub timeout: u64,
    /// The shared key's file (`--auth-key`).
    pub auth_key: Option<PathBuf>,
}

impl ClientOptions {
    /// This side's settings for each test it runs against the server.
    ///
    /// # Errors
    /// A `--timeout` out of range, or an `--auth-key` file that cannot be used.
    pub fn local(&self) -> Result<Local, Error> {
        Ok(Local {
            device: self.device.clone(),
            gid_index: self.gid_index,
            port: self.port.unwrap_or(crate::spec::DEFAULT_PORT),
            timeout: rules::timeout(self.timeout)?,
            connect_window: SERVER_STARTING,
            auth: self.auth_key.as_deref().map(crate::spec::key::AuthKey::load).transpose()?,
            // compare and qualify draw one bar over all their points.
            quiet: true,
            ..Local::default()
        })
    }
}

/// The default sweep: 2 B … 8 MiB in steps of ×4.
pub fn default_sizes() -> Vec<u64> {
    (0..12).map(|i| 2u64 << (2 * i)).collect()
}

/// The series a comparison runs, bandwidth first.
pub fn series(streams: u32) -> Vec<Series> {
    let rdma = |verb: Verb, measure: Measure, label: &str| {
        let kind = TestKind { verb, measure };
        Series {
            id: format!("rdma_{}", kind.id()),
            label: label.into(),
            kind,
            tcp: false,
            streams: 1,
        }
    };
    let tcp = |measure: Measure, streams: u32, label: String| Series {
        id: match measure {
            Measure::Bw => format!("tcp_bw_{streams}"),
            Measure::Lat => "tcp_lat".into(),
        },
        label,
        kind: TestKind { verb: Verb::Send, measure },
        tcp: true,
        streams,
    };
    let mut all = vec![
        rdma(Verb::Write, Measure::Bw, "RDMA write"),
        rdma(Verb::Read, Measure::Bw, "RDMA read"),
        rdma(Verb::Send, Measure::Bw, "RDMA send"),
        tcp(Measure::Bw, 1, "TCP 1 stream".into()),
    ];
    if streams > 1 {
        all.push(tcp(Measure::Bw, streams, format!("TCP {streams} streams")));
    }
    all.extend([
        rdma(Verb::Write, Measure::Lat, "RDMA write"),
        rdma(Verb::Read, Measure::Lat, "RDMA read"),
        rdma(Verb::Send, Measure::Lat, "RDMA send"),
        tcp(Measure::Lat, 1, "TCP".into()),
    ]);
    all
}

/// A bandwidth point's default byte budget (`--bytes`).
pub const DEFAULT_BYTES: u64 = 64 << 20;
/// The fewest iterations a bandwidth point of the default budget runs: 64 MiB is 8
/// messages of 8 MiB, too few to measure (TCP read 1333 MiB/s in 8, 2502 in 128).
pub const DEFAULT_MIN_BW_ITERS: u64 = 100;
/// Failed points in a row that stop the sweep (the server is taken for gone).
const FAILURES_IN_A_ROW: usize = 3;

/// Iterations for a point: a byte budget spread over messages of `size`, bounded.
fn iterations(budget: u64, size: u64, min: u64, max: u64) -> u64 {
    (budget / size.max(1)).clamp(min, max)
}

/// The spec of one point: the series' test at `size`, perftest's defaults otherwise.
fn point_spec(args: &CompareOptions, s: &Series, size: u64) -> Result<TestSpec, Error> {
    let iters = match s.kind.measure {
        Measure::Bw => match args.bytes {
            Some(bytes) => iterations(bytes, size, 5, 5000),
            None => iterations(DEFAULT_BYTES, size, DEFAULT_MIN_BW_ITERS, 5000),
        },
        Measure::Lat => iterations(args.lat_bytes, size, 5, 1000),
    };
    if s.tcp {
        let r = TcpRequest {
            size: Some(size),
            iters: Some(iters),
            streams: Some(s.streams),
            ..Default::default()
        };
        return rules::tcp(s.kind.measure, &r);
    }
    rules::rdma(s.kind, &RdmaRequest { size: Some(size), iters: Some(iters), ..Default::default() })
}

/// The sizes `--sizes`/`--all-sizes` ask for, checked.
fn sizes(args: &CompareOptions) -> Result<Vec<u64>, Error> {
    let sizes = match (&args.sizes, args.all_sizes) {
        (_, true) => (1..24).map(|i| 1u64 << i).collect(),
        (Some(list), false) => list.clone(),
        (None, false) => default_sizes(),
    };
    if sizes.is_empty() {
        return Err(Error::usage("--sizes: give at least one size"));
    }
    if let Some(&big) = sizes.iter().find(|&&s| s > MAX_SWEEP_SIZE) {
        return Err(Error::usage(format!(
            "--sizes: {big} bytes is over the {MAX_SWEEP_SIZE}-byte limit of a sweep"
        )));
    }
    if args.streams == 0 || args.streams > rules::MAX_STREAMS {
        return Err(Error::usage(format!(
            "-P {}: between 1 and {} streams",
            args.streams,
            rules::MAX_STREAMS
        )));
    }
    Ok(sizes)
}

/// Tries a busy server again: another user's test on a shared `serve` ends in time.
const BUSY_RETRIES: u32 = 5;
const BUSY_PAUSE: Duration = Duration::from_secs(3);

/// One point; a busy server is asked again a few times before the busy error stands.
pub(crate) fn run_point(spec: &TestSpec, side: &Side, local: &Local) -> engine::Outcome {
    let mut outcome = engine::run(spec, side, local, false, &mut io::sink());
    for _ in 0..BUSY_RETRIES {
        if outcome.error.as_ref().is_none_or(|e| e.kind != ErrorKind::Busy) {
            break;
        }
        std::thread::sleep(BUSY_PAUSE);
        outcome = engine::run(spec, side, local, false, &mut io::sink());
    }
    outcome
}

/// Runs the sweep, prints the table and writes the report files. Returns the exit
/// status: 0, or 1 when some points failed (they are in the report, marked).
///
/// # Errors
/// Bad options, an output directory that cannot be written, or a server that is gone
/// (unreachable, or closed mid-sweep: the partial report is written first).
pub fn compare(args: &CompareOptions, out: &mut dyn Write) -> Result<u8, Error> {
    let sizes = sizes(args)?;
    let local = args.client.local()?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Error::io(format!("cannot create --out {}: {e}", args.out.display())))?;
    reach_server(&args.host, &local)?;
    let series: Vec<Series> =
        series(args.streams).into_iter().filter(|s| s.tcp || !args.tcp_only).collect();
    let total = series.len() * sizes.len();
    let progress = crate::progress::Progress::new(total, args.quiet);
    let mut report = CompareReport {
        schema_version: crate::report::SCHEMA_VERSION,
        kind: "compare",
        tool: tool(),
        server: args.host.clone(),
        started: crate::stamp::utc_now(),
        environment: None,
        sizes: sizes.clone(),
        series: series.clone(),
        rows: Vec::with_capacity(total),
    };
    let side = Side::Client { host: args.host.clone() };
    // A host without an RDMA stack fails its RDMA points at once, on this side: those
    // are not the server's failures, and the TCP series still run.
    let stackless = crate::inventory::verbs_stack_present().is_err();
    let mut in_a_row = 0;
    for s in &series {
        for &size in &sizes {
            progress.running(&format!("{} {}", s.id, size_label(size)));
            let row = match point_spec(args, s, size) {
                Ok(spec) => {
                    let outcome = run_point(&spec, &side, &local);
                    if report.environment.is_none() && outcome.report.peer_params.is_some() {
                        report.environment = outcome.report.environment.clone();
                    }
                    let result = outcome.report.results.into_iter().next();
                    Row { series: s.id.clone(), size, result, error: outcome.error }
                }
                Err(e) => Row { series: s.id.clone(), size, result: None, error: Some(e) },
            };
            // A point's own failure is marked and the sweep goes on; a server that is
            // gone, refuses this side's key or is busy ends it at once, and so do three
            // failures in a row.
            let mut gone = row.error.clone().filter(|e| e.kind.peer_unavailable());
            match &row.error {
                None => in_a_row = 0,
                Some(_) if stackless && !s.tcp => {}
                Some(e) => {
                    in_a_row += 1;
                    if in_a_row == FAILURES_IN_A_ROW && gone.is_none() {
                        let why =
                            format!("{FAILURES_IN_A_ROW} points failed in a row (the last: {e})");
                        gone = Some(Error::new(e.kind, why));
                    }
                }
            }
            report.rows.push(row);
            progress.done_one();
            if let Some(e) = gone {
                drop(progress);
                write_files(&args.out, &report)?;
                return Err(Error::new(
                    e.kind,
                    format!("the sweep stopped: {e}; partial results in {}", args.out.display()),
                ));
            }
        }
    }
    drop(progress);
    write_files(&args.out, &report)?;
    let mut text = compare::table(&report);
    text.push_str(&format!(" report: {}\n", args.out.join("report.html").display()));
    out.write_all(text.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    let _ = out.flush();
    let failed = report.failures();
    if failed > 0 {
        let hint =
            if stackless { " (no RDMA stack here: --tcp-only measures TCP alone)" } else { "" };
        eprintln!("rdmabench: {failed} of {total} points failed (marked FAIL in the report){hint}");
        return Ok(crate::error::EXIT_VERDICT);
    }
    Ok(0)
}

/// One connection attempt before the sweep: a wrong host or port fails at once with
/// one line, instead of each point retrying for its timeout.
pub(crate) fn reach_server(host: &str, local: &Local) -> Result<(), Error> {
    let port = local.port;
    let wait = local.timeout.min(Duration::from_secs(10));
    // A server started a moment ago may not listen yet: refusals are retried briefly,
    // and anything else fails at once.
    match connect_retrying(host, port, None, wait, local.connect_window) {
        // serve takes this as a client that left before its hello.
        Ok(_) => Ok(()),
        Err(ConnectFailure::Resolve(e)) => {
            Err(Error::new(ErrorKind::PeerUnreachable, format!("cannot resolve server '{host}': {e}")))
        }
        Err(f) => Err(Error::new(
            ErrorKind::PeerUnreachable,
            format!(
                "cannot reach `rdmabench serve` at {host}:{port}: {} (is it running there, with -p {port}?)",
                match f {
                    ConnectFailure::Io(e) => e.to_string(),
                    _ => "no address".to_string(),
                }
            ),
        )),
    }
}

/// results.json, results.csv, the charts and report.html into `dir`.
fn write_files(dir: &Path, report: &CompareReport) -> Result<(), Error> {
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| Error::io(format!("cannot write {}: {e}", dir.join(name).display())))
    };
    write("results.json", &crate::report::to_json(report))?;
    write("results.csv", &compare::csv(report))?;
    let charts = compare::charts(report);
    for (name, svg) in &charts {
        write(name, svg)?;
    }
    write("report.html", &compare::html(report, &charts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_sweep_spans_2_bytes_to_8_mib() {
        let s = default_sizes();
        assert_eq!((s[0], *s.last().unwrap(), s.len()), (2, 8 << 20, 12));
    }

    #[test]
    fn series_cover_rdma_and_tcp_for_both_measures() {
        let ids: Vec<String> = series(4).into_iter().map(|s| s.id).collect();
        assert_eq!(
            ids,
            [
                "rdma_write_bw",
                "rdma_read_bw",
                "rdma_send_bw",
                "tcp_bw_1",
                "tcp_bw_4",
                "rdma_write_lat",
                "rdma_read_lat",
                "rdma_send_lat",
                "tcp_lat"
            ]
        );
        assert_eq!(series(1).len(), 8);
    }

    #[test]
    fn points_get_valid_specs_with_bounded_iterations() {
        let args = CompareOptions {
            host: "10.0.0.1".into(),
            out: "x".into(),
            sizes: None,
            all_sizes: false,
            tcp_only: false,
            streams: 4,
            bytes: None,
            lat_bytes: 16 << 20,
            quiet: true,
            client: ClientOptions {
                port: None,
                device: None,
                gid_index: None,
                timeout: 30,
                auth_key: None,
            },
        };
        for s in series(4) {
            for size in default_sizes() {
                let spec = point_spec(&args, &s, size).unwrap();
                assert_eq!((spec.kind, spec.id()), (s.kind, s.test_id()));
                assert_eq!(spec.sizes, [size]);
                assert_eq!(spec.connections(), s.streams);
            }
        }
        assert_eq!(iterations(64 << 20, 2, 5, 5000), 5000);
        assert_eq!(iterations(64 << 20, 8 << 20, 5, 5000), 8);
        assert_eq!(iterations(16 << 20, 8 << 20, 5, 1000), 5);
        // The default budget: 64 MiB, but never fewer than 100 messages of a large size.
        let iters = |args: &CompareOptions, size| {
            let s = &series(4)[3];
            assert_eq!(s.id, "tcp_bw_1");
            point_spec(args, s, size).unwrap().run.iterations()
        };
        assert_eq!(
            (iters(&args, 8 << 20), iters(&args, 64 << 10), iters(&args, 2)),
            (100, 1024, 5000)
        );
        // A --bytes given is taken as given (the lab's small budgets).
        let small = CompareOptions { bytes: Some(16 << 20), ..args };
        assert_eq!((iters(&small, 8 << 20), iters(&small, 64 << 10)), (5, 256));
    }
}
