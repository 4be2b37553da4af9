//! The command line (clap derive), as close to the flags as possible. Each subcommand
//! has its own argument group; [`args`] turns a test's flags into a spec once.

pub mod args;
pub mod generate;
pub mod mesh;

use clap::{Args, CommandFactory, Parser, Subcommand};

pub use args::{BackendArg, PerfArgs, ReportArgs, TcpArgs, TestArgs};
pub use mesh::MeshArgs;

use crate::error::Error;
use crate::spec::{parse_size, Measure, TestKind, Verb};

/// RDMA and TCP bandwidth/latency benchmarks with perftest's habits.
#[derive(Debug, Parser)]
#[command(name = "rdmabench", version, about, long_about = None)]
struct RawCli {
    #[command(subcommand)]
    command: RawCommand,
}

/// A parsed command line.
#[derive(Debug)]
pub struct Cli {
    /// What to do.
    pub command: Command,
}

/// Subcommands, as clap sees them. Each one's arguments are defined only when it is the
/// one being parsed (`defer`): a test run builds one subcommand's arguments, not all
/// eighteen (600 KB of heap and most of the CLI's code, at every start).
///
/// The `Args` structs document themselves with `#[doc = concat!(..)]`, not `///`: clap
/// takes a literal doc comment on an `Args` struct for the subcommand's about, and a
/// deferred build applies it last: it would replace the variant's own line below.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum RawCommand {
    /// List RDMA devices: adapter, firmware, ports, link rate, GID table, PCIe, NUMA.
    Devices(DevicesArgs),
    /// RDMA write bandwidth (ib_write_bw). Without HOST: server.
    WriteBw(PerfArgs),
    /// RDMA read bandwidth (ib_read_bw).
    ReadBw(PerfArgs),
    /// Send bandwidth (ib_send_bw).
    SendBw(PerfArgs),
    /// Atomic bandwidth (ib_atomic_bw).
    AtomicBw(PerfArgs),
    /// RDMA write latency, half a ping-pong round trip (ib_write_lat).
    WriteLat(PerfArgs),
    /// RDMA read latency, a full round trip (ib_read_lat).
    ReadLat(PerfArgs),
    /// Send latency, half a ping-pong round trip (ib_send_lat).
    SendLat(PerfArgs),
    /// Atomic latency, a full round trip (ib_atomic_lat).
    AtomicLat(PerfArgs),
    /// TCP bandwidth over -P parallel streams (iperf3). Without HOST: server.
    TcpBw(TcpArgs),
    /// TCP latency, half a ping-pong round trip (qperf tcp_lat).
    TcpLat(TcpArgs),
    /// One long-lived server for every test, RDMA or TCP, one client after another.
    Serve(ServeArgs),
    /// RDMA against TCP over a size sweep, against `rdmabench serve`: table, JSON, CSV, charts, HTML.
    Compare(CompareArgs),
    /// Preflight: port, link rate, PCIe, NUMA, CPU governor and C-states, MTU, GIDs,
    /// memlock, firmware, IPoIB, NIC homogeneity; PASS/WARN/FAIL with the fix.
    Doctor(DoctorArgs),
    /// Qualify a NIC, firmware or driver: doctor, then a profile's tests against `serve`,
    /// judged by thresholds and a baseline; table, JSON, JUnit XML, HTML.
    Qualify(QualifyArgs),
    /// All pairs of an MPI job (mpirun -np N / srun -n N), both directions, bandwidth and
    /// latency: N×N matrices, per-node and per-host summaries, slow links confirmed by a
    /// rerun alone; heatmaps in HTML.
    Mesh(MeshArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(CompletionsArgs),
    /// Write the man pages (rdmabench.1 and one per subcommand) into DIR (ci/package).
    #[command(hide = true)]
    Manpages(ManpagesArgs),
}

/// What to run.
#[derive(Debug)]
pub enum Command {
    /// `rdmabench devices`.
    Devices(DevicesArgs),
    /// One of the eight perftest-style tests.
    Perf(TestKind, Box<PerfArgs>),
    /// `tcp-bw` or `tcp-lat`.
    Tcp(Measure, Box<TcpArgs>),
    /// `rdmabench serve`.
    Serve(ServeArgs),
    /// `rdmabench compare`.
    Compare(Box<CompareArgs>),
    /// `rdmabench doctor`.
    Doctor(DoctorArgs),
    /// `rdmabench qualify`.
    Qualify(Box<QualifyArgs>),
    /// `rdmabench mesh`.
    Mesh(Box<MeshArgs>),
    /// `rdmabench completions SHELL`.
    Completions(CompletionsArgs),
    /// `rdmabench manpages DIR`.
    Manpages(ManpagesArgs),
}

impl From<RawCommand> for Command {
    fn from(raw: RawCommand) -> Self {
        use Measure::{Bw, Lat};
        use Verb::{Atomic, Read, Send, Write};
        let perf = |verb, measure, args| Command::Perf(TestKind { verb, measure }, Box::new(args));
        match raw {
            RawCommand::Devices(a) => Command::Devices(a),
            RawCommand::WriteBw(a) => perf(Write, Bw, a),
            RawCommand::ReadBw(a) => perf(Read, Bw, a),
            RawCommand::SendBw(a) => perf(Send, Bw, a),
            RawCommand::AtomicBw(a) => perf(Atomic, Bw, a),
            RawCommand::WriteLat(a) => perf(Write, Lat, a),
            RawCommand::ReadLat(a) => perf(Read, Lat, a),
            RawCommand::SendLat(a) => perf(Send, Lat, a),
            RawCommand::AtomicLat(a) => perf(Atomic, Lat, a),
            RawCommand::TcpBw(a) => Command::Tcp(Bw, Box::new(a)),
            RawCommand::TcpLat(a) => Command::Tcp(Lat, Box::new(a)),
            RawCommand::Serve(a) => Command::Serve(a),
            RawCommand::Compare(a) => Command::Compare(Box::new(a)),
            RawCommand::Doctor(a) => Command::Doctor(a),
            RawCommand::Qualify(a) => Command::Qualify(Box::new(a)),
            RawCommand::Mesh(a) => Command::Mesh(Box::new(a)),
            RawCommand::Completions(a) => Command::Completions(a),
            RawCommand::Manpages(a) => Command::Manpages(a),
        }
    }
}

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
    #[arg(value_name = "DIR")]
    pub dir: std::path::PathBuf,
}

#[doc = concat!("`rdmabench doctor`.")]
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Only this device's checks (host checks always run).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Also write the checks as JSON to FILE (/usr/share/doc/rdmabench/docs/json.md).
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Judge the /sys and /proc under DIR (a tree `--capture` wrote) instead of this
    /// host's; no device is opened.
    #[arg(long = "root", value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
    /// Judge nothing: copy the files doctor reads (under --root, else this host's) into
    /// DIR, for `doctor --root DIR` to judge later, anywhere.
    #[arg(long = "capture", value_name = "DIR", conflicts_with_all = ["json", "device"])]
    pub capture: Option<std::path::PathBuf>,
    /// RDMA interface: verbs, or nd (NetworkDirect's checks). Default: nd on Windows,
    /// verbs elsewhere.
    #[arg(long = "backend", value_enum, value_name = "API")]
    pub backend: Option<BackendArg>,
}

#[doc = concat!("`rdmabench qualify`.")]
#[derive(Debug, Args)]
pub struct QualifyArgs {
    /// A built-in profile (quick, sweep) or a profile file (TOML; /usr/share/doc/rdmabench/examples/qualify-profile.toml).
    #[arg(value_name = "PROFILE")]
    pub profile: String,
    /// The host running `rdmabench serve`.
    #[arg(long = "server", value_name = "HOST")]
    pub server: String,
    /// An earlier qualify JSON: flag each result that regressed beyond the profile's tolerance.
    #[arg(long = "baseline", value_name = "FILE")]
    pub baseline: Option<std::path::PathBuf>,
    /// Write every run, the verdicts and the environments as JSON to FILE.
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Write JUnit XML (one testcase per check and test point) to FILE.
    #[arg(long = "junit", value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// Where qualify.json, junit.xml and report.html go.
    #[arg(long = "out", value_name = "DIR", default_value = "rdmabench-qualify")]
    pub out: std::path::PathBuf,
    /// No progress bar (there is none either when stderr is not a terminal).
    #[arg(long = "quiet")]
    pub quiet: bool,
    /// How this side reaches the server (`-d`: also the device doctor checks).
    #[command(flatten)]
    pub client: ClientArgs,
}

#[doc = concat!("`rdmabench serve`.")]
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Listen on this address only (default: every address).
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// Control-channel TCP port.
    #[arg(short = 'p', long = "port")]
    pub port: Option<u16>,
    /// RDMA device for the RDMA tests (default: the first).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Device port.
    #[arg(short = 'i', long = "ib-port")]
    pub ib_port: Option<u8>,
    /// GID index (default: the RoCE v2 GID of the address the client reached).
    #[arg(short = 'x', long = "gid-index")]
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
    #[arg(long = "out", value_name = "DIR", default_value = "rdmabench-compare")]
    pub out: std::path::PathBuf,
    /// Message sizes (K/M suffixes), comma-separated (default: 2 B … 8 MiB, ×4 steps).
    #[arg(long = "sizes", value_name = "LIST", value_delimiter = ',', value_parser = parse_size)]
    pub sizes: Option<Vec<u64>>,
    /// Every power of two from 2 B to 8 MiB.
    #[arg(long = "all-sizes", conflicts_with = "sizes")]
    pub all_sizes: bool,
    /// Streams of the parallel TCP test.
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 4)]
    pub streams: u32,
    /// Bytes each bandwidth point moves (iterations = this / size, 5 … 5000).
    #[arg(long = "bytes", value_parser = parse_size, default_value = "64M")]
    pub bytes: u64,
    /// Bytes each latency point moves (iterations = this / size, 5 … 1000).
    #[arg(long = "lat-bytes", value_parser = parse_size, default_value = "16M")]
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
    /// Control-channel TCP port of the server.
    #[arg(short = 'p', long = "port")]
    pub port: Option<u16>,
    /// RDMA device on this side (default: the first).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// GID index on this side.
    #[arg(short = 'x', long = "gid-index")]
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
        Ok(crate::spec::Local {
            device: self.device.clone(),
            gid_index: self.gid_index,
            port: self.port.unwrap_or(crate::spec::DEFAULT_PORT),
            timeout: args::timeout(self.timeout)?,
            connect_window: crate::compare::SERVER_STARTING,
            auth: self.auth_key.as_deref().map(crate::session::auth::AuthKey::load).transpose()?,
            // compare and qualify draw one bar over all their points.
            quiet: true,
            ..crate::spec::Local::default()
        })
    }
}

/// Parses `args`. Help and version are printed here and reported as `Ok(None)`; a
/// usage error becomes its one-line message.
pub fn parse<I, T>(args: I) -> Result<Option<Cli>, Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match RawCli::try_parse_from(args) {
        Ok(cli) => Ok(Some(Cli { command: cli.command.into() })),
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayVersion => {
            // -V and --version alike: the commit and the RDMA libraries too.
            // Not print!: it panics when the reader went away (`--version | head -0`).
            let _ = std::io::Write::write_all(
                &mut std::io::stdout(),
                crate::version::long().as_bytes(),
            );
            Ok(None)
        }
        Err(e) if !e.use_stderr() => {
            // --help / --version: clap's own text on stdout.
            let _ = e.print();
            Ok(None)
        }
        Err(e) => Err(Error::usage(first_line(&e.render().to_string()))),
    }
}

/// The command line's whole definition, for completions and man pages.
pub fn definition() -> clap::Command {
    RawCli::command()
}

/// clap's error text is several lines (error, tip, usage); keep the error itself, with
/// the arguments it lists when it ends in a colon (`… were not provided: <HOST>`).
fn first_line(rendered: &str) -> String {
    let mut lines = rendered.lines().skip_while(|l| l.trim().is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    if line.ends_with(':') {
        let listed: Vec<&str> = lines.map(str::trim).take_while(|l| !l.is_empty()).collect();
        line = format!("{line} {}", listed.join(", "));
    }
    format!("{line} (see rdmabench --help)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::counters::CounterSelection;
    use crate::spec::Figure;

    /// A perftest-style test's command line, as the run would take it.
    fn test(args: &[&str]) -> Result<args::TestArgs, Error> {
        let cli = parse(["rdmabench"].iter().chain(args).copied()).unwrap().unwrap();
        let Command::Perf(kind, a) = cli.command else { panic!("perf") };
        a.to_test(kind)
    }

    #[test]
    fn deferred_subcommands_keep_their_own_line_and_build_only_when_parsed() {
        let unbuilt = RawCli::command();
        let abouts: Vec<(String, String)> = unbuilt
            .get_subcommands()
            .map(|c| {
                (c.get_name().to_string(), c.get_about().map(|a| a.to_string()).unwrap_or_default())
            })
            .collect();
        // Deferred: nothing but the name and the line until a subcommand is parsed.
        assert!(unbuilt.get_subcommands().all(|c| c.get_arguments().next().is_none()));
        assert_eq!(abouts.len(), 18);
        let mut built = RawCli::command();
        built.build();
        for (name, about) in &abouts {
            let sub = built.find_subcommand(name).unwrap();
            assert!(sub.get_arguments().next().is_some(), "{name} has no arguments");
            let built_about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert_eq!(&built_about, about, "{name}");
        }
        assert!(abouts
            .iter()
            .any(|(n, a)| n == "write-lat" && a.starts_with("RDMA write latency")));
    }

    #[test]
    fn devices_flags_parse() {
        let cli = parse(["rdmabench", "devices", "-d", "mlx4_0", "-v", "--json"]).unwrap().unwrap();
        let Command::Devices(args) = cli.command else { panic!("devices") };
        assert_eq!(args.device.as_deref(), Some("mlx4_0"));
        assert!(args.verbose && args.json);
        let cli = parse(["rdmabench", "devices", "--ib-dev=rxe0"]).unwrap().unwrap();
        let Command::Devices(args) = cli.command else { panic!("devices") };
        assert_eq!(args.device.as_deref(), Some("rxe0"));
    }

    #[test]
    fn perftest_flags_parse_with_their_names() {
        let cli = parse([
            "rdmabench",
            "read-bw",
            "-d",
            "mlx4_0",
            "-x",
            "3",
            "-s",
            "64K",
            "-n",
            "2000",
            "-q",
            "4",
            "-c",
            "RC",
            "--report_gbits",
            "-R",
            "server1",
        ])
        .unwrap()
        .unwrap();
        let Command::Perf(test, a) = cli.command else { panic!("perf") };
        assert_eq!(test, TestKind { verb: Verb::Read, measure: Measure::Bw });
        assert_eq!(
            (a.run.size, a.run.iters, a.qps, a.gid_index),
            (Some(65536), Some(2000), Some(4), Some(3))
        );
        assert!(a.report.report_gbits && a.rdma_cm);
        assert_eq!(a.host.as_deref(), Some("server1"));
        let cli = parse(["rdmabench", "atomic-lat", "-A", "CMP_AND_SWAP", "--report-gbits"])
            .unwrap()
            .unwrap();
        let Command::Perf(test, a) = cli.command else { panic!("perf") };
        assert_eq!(test.id(), "atomic_lat");
        assert!(a.host.is_none() && a.report.report_gbits);
        assert!(parse(["rdmabench", "write-bw", "-s", "12Q"])
            .unwrap_err()
            .message
            .contains("not a size"));
    }

    #[test]
    fn perftests_verifier_limits_are_thresholds() {
        let t = test(&["write-bw", "-w", "5000", "-y", "0.5", "--backend", "verbs"]).unwrap();
        assert_eq!((t.output.min_bw, t.output.min_msg_rate), (Some(5000.0), Some(0.5)));
        let t = test(&["send-bw", "--limit_bw", "7", "--min-bw", "7", "--backend", "verbs"]);
        assert_eq!(t.unwrap().output.min_bw, Some(7.0), "the same limit twice is one limit");
        let e = test(&["write-bw", "-w", "1", "--min-bw", "2", "--backend", "verbs"]).unwrap_err();
        assert!(e.message.contains("one limit"), "{e}");
        let e = test(&["write-lat", "-y", "1", "--backend", "verbs"]).unwrap_err();
        assert!(e.message.contains("-y/--limit_msgrate: only bandwidth tests"), "{e}");
        let e = test(&["read-bw", "--limit_bw=-1", "--backend", "verbs"]).unwrap_err();
        assert!(e.message.contains("-w/--limit_bw: a number, 0 or more"), "{e}");
    }

    /// docs/perftest-flags.md is checked against the command line: a flag it calls
    /// **same** is taken by every test, one it says clap refuses is refused.
    #[test]
    fn the_perftest_flag_table_matches_the_command_line() {
        let mut cli = definition();
        cli.build();
        let table = include_str!("../../docs/perftest-flags.md");
        let (mut same, mut refused) = (0, 0);
        for row in table.lines().filter(|l| l.starts_with("| `")) {
            let cols: Vec<&str> = row.split(" | ").collect();
            let status = cols[2];
            // The flags of the row: `-d`, `--ib-dev=<dev>`; `-c XRC` names a value.
            let flags: Vec<&str> = cols[0]
                .split('`')
                .skip(1)
                .step_by(2)
                .filter(|f| f.starts_with('-') && !f.contains(' '))
                .map(|f| f.split('=').next().unwrap())
                .filter(|f| !matches!(*f, "-h" | "--help"))
                .collect();
            for test in ["write-bw", "read-lat", "send-bw", "atomic-lat"] {
                let sub = cli.find_subcommand(test).unwrap();
                let known = |flag: &str| {
                    sub.get_arguments().any(|a| match flag.strip_prefix("--") {
                        Some(long) => {
                            a.get_long() == Some(long)
                                || a.get_all_aliases().is_some_and(|al| al.contains(&long))
                        }
                        None => a.get_short().map(|c| format!("-{c}")).as_deref() == Some(flag),
                    })
                };
                for f in &flags {
                    if status.starts_with("**same**") {
                        assert!(known(f), "{test}: the table says {f} is the same: {row}");
                        same += 1;
                    } else if status.contains("clap: unknown argument") {
                        assert!(!known(f), "{test}: the table says clap refuses {f}: {row}");
                        refused += 1;
                    }
                }
            }
        }
        assert!(same > 100 && refused > 200, "rows read: {same} same, {refused} refused");
    }

    #[test]
    fn output_names_a_figure_the_test_has() {
        let only = |args: &[&str]| test(args).unwrap().output.only;
        assert_eq!(only(&["write-bw", "--output", "bandwidth"]), Some(Figure::Bandwidth));
        assert_eq!(only(&["send-bw", "--output=message_rate"]), Some(Figure::MessageRate));
        assert_eq!(only(&["read-lat", "--output", "latency"]), Some(Figure::Latency));
        assert_eq!(only(&["read-lat"]), None);
        let e = test(&["write-lat", "--output", "bandwidth"]).unwrap_err();
        assert!(e.message.contains("a latency test gives latency"), "{e}");
        let e = test(&["write-bw", "--output", "latency"]).unwrap_err();
        assert!(e.message.contains("bandwidth or message_rate"), "{e}");
        assert!(parse(["rdmabench", "write-bw", "--output", "cpu"]).is_err());
    }

    #[test]
    fn report_counters_name_counters_of_one_verbs_port() {
        let counters = |args: &[&str]| test(args).map(|t| t.local.counters);
        let all = counters(&["write-bw", "-W", "all", "--backend", "verbs"]).unwrap();
        assert_eq!(all, Some(CounterSelection::All));
        let names = "port_xmit_wait,hw_counters/rcvd_pkts";
        let list = counters(&["read-lat", "--report-counters", names, "--backend", "verbs"]);
        let names = vec!["port_xmit_wait".to_string(), "hw_counters/rcvd_pkts".to_string()];
        assert_eq!(list.unwrap(), Some(CounterSelection::Named(names)));
        assert_eq!(counters(&["write-bw", "--backend", "verbs"]).unwrap(), None);
        let e = test(&["write-bw", "-W", "../../etc/passwd"]).unwrap_err();
        assert!(e.message.starts_with("-W \"../../etc/passwd\": a counter is `all` or"), "{e}");
        let e = test(&["write-bw", "-W", "all", "--backend", "nd", "-d", "10.0.0.1"]).unwrap_err();
        assert!(e.message.contains("-W: reads a verbs port's counters"), "{e}");
        let e =
            test(&["write-bw", "-W", "all", "-d", "rxe0,rxe1", "--backend", "verbs"]).unwrap_err();
        assert!(e.message.contains("-W: one device"), "{e}");
    }

    #[test]
    fn the_measuring_thread_goes_where_one_flag_says() {
        let at = |args: &[&str]| test(args).map(|t| (t.local.pin, t.local.numa_node));
        assert_eq!(at(&["write-bw", "--backend", "verbs"]).unwrap(), (vec![], None));
        let cores = at(&["write-bw", "--pin_cores", "0,2-3", "--backend", "verbs"]).unwrap();
        assert_eq!(cores, (vec![0, 2, 3], None));
        assert_eq!(
            at(&["read-lat", "--numa_node", "1", "--backend", "verbs"]).unwrap(),
            (vec![], Some(1))
        );
        let e = test(&["write-bw", "--pin_cores", "1", "--numa_node", "0", "--backend", "verbs"]);
        assert!(e.unwrap_err().message.contains("one of them"));
        let e = test(&["write-bw", "--pin_cores", "x", "--backend", "verbs"]).unwrap_err();
        assert_eq!(e.message, "--pin_cores 'x': a CPU list like 0,2-3");
        let e = test(&["write-bw", "-D", "2", "--run_infinitely", "--output", "bandwidth"]);
        assert!(e.unwrap_err().message.contains("--run_infinitely: prints its table as it goes"));
        let e = test(&["write-bw", "--run_infinitely", "--backend", "verbs"]).unwrap_err();
        assert!(e.message.contains("give -D SECS"), "{e}");
        let e = test(&["write-bw", "-D", "4", "-f", "1", "--run_infinitely", "--backend", "verbs"]);
        assert!(e.unwrap_err().message.contains("-f: --run_infinitely measures"));
        let t = test(&["write-bw", "-D", "4", "--run_infinitely", "--backend", "verbs"]).unwrap();
        assert_eq!(t.spec.run, crate::spec::RunLength::Duration { secs: 4, margin: 0 });
    }

    #[test]
    fn usage_errors_are_one_line_naming_the_problem() {
        let err = parse(["rdmabench", "devices", "--bogus"]).unwrap_err().message;
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("--bogus"), "{err}");
        let err = parse(["rdmabench", "frobnicate"]).unwrap_err().message;
        assert!(err.contains("frobnicate"), "{err}");
        let err = parse(["rdmabench", "devices", "-d"]).unwrap_err().message;
        assert!(err.contains("DEVICE"), "{err}");
    }
}
