//! The command line (clap derive), as close to the flags as possible. Each subcommand
//! has its own argument group; [`args`] turns a test's flags into a spec once.

pub mod args;
pub mod commands;
pub mod generate;
pub mod history;
pub mod mesh;
mod test;

use clap::{CommandFactory, Parser, Subcommand};

pub use args::{BackendArg, PerfArgs, ReportArgs, TcpArgs, TestArgs};
pub use commands::{
    ClientArgs, CompareArgs, CompletionsArgs, DevicesArgs, DoctorArgs, HealthArgs, ManpagesArgs,
    QualifyArgs, ServeArgs,
};
pub use history::{DiffArgs, HistoryArgs, StoreArgs};
pub use mesh::MeshArgs;

use crate::error::Error;
use crate::spec::{Measure, TestKind, Verb};

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
/// twenty (600 KB of heap and most of the CLI's code, at every start).
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
    #[command(alias = "write_bw")]
    WriteBw(PerfArgs),
    /// RDMA read bandwidth (ib_read_bw).
    #[command(alias = "read_bw")]
    ReadBw(PerfArgs),
    /// Send bandwidth (ib_send_bw).
    #[command(alias = "send_bw")]
    SendBw(PerfArgs),
    /// Atomic bandwidth (ib_atomic_bw).
    #[command(alias = "atomic_bw")]
    AtomicBw(PerfArgs),
    /// RDMA write latency, half a ping-pong round trip (ib_write_lat).
    #[command(alias = "write_lat")]
    WriteLat(PerfArgs),
    /// RDMA read latency, a full round trip (ib_read_lat).
    #[command(alias = "read_lat")]
    ReadLat(PerfArgs),
    /// Send latency, half a ping-pong round trip (ib_send_lat).
    #[command(alias = "send_lat")]
    SendLat(PerfArgs),
    /// Atomic latency, a full round trip (ib_atomic_lat).
    #[command(alias = "atomic_lat")]
    AtomicLat(PerfArgs),
    /// TCP bandwidth over -P parallel streams (iperf3). Without HOST: server.
    #[command(alias = "tcp_bw")]
    TcpBw(TcpArgs),
    /// TCP latency, half a ping-pong round trip (qperf tcp_lat).
    #[command(alias = "tcp_lat")]
    TcpLat(TcpArgs),
    /// One long-lived server for every test, RDMA or TCP, one client after another.
    Serve(ServeArgs),
    /// RDMA against TCP over a size sweep, against `rdmabench serve`: table, JSON, CSV, charts, HTML.
    Compare(CompareArgs),
    /// Preflight: port, link rate, PCIe, NUMA, CPU governor and C-states, MTU, GIDs,
    /// memlock, firmware, IPoIB, NIC homogeneity; PASS/WARN/FAIL with the fix.
    Doctor(DoctorArgs),
    /// Node health: every port's facts, a loopback write_bw and write_lat pinned to its
    /// NUMA node, counters before and after; `HOST | Healthy` or `HOST | CODE …`.
    Health(HealthArgs),
    /// Qualify a NIC, firmware or driver: doctor, then a profile's tests against `serve`,
    /// judged by thresholds and a baseline; table, JSON, JUnit XML, HTML.
    Qualify(QualifyArgs),
    /// The stored runs (every qualify, and tests run with --store): filter by host, device, firmware, profile, date; --show ID prints one again.
    History(HistoryArgs),
    /// Two runs, B against A (stored ids or --json files): tests by parameters, environment and each size's figures; qualifications as `qualify --baseline` would.
    Diff(DiffArgs),
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
    /// `rdmabench health`.
    Health(HealthArgs),
    /// `rdmabench qualify`.
    Qualify(Box<QualifyArgs>),
    /// `rdmabench history`.
    History(HistoryArgs),
    /// `rdmabench diff`.
    Diff(DiffArgs),
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
            RawCommand::Health(a) => Command::Health(a),
            RawCommand::Qualify(a) => Command::Qualify(Box::new(a)),
            RawCommand::History(a) => Command::History(a),
            RawCommand::Diff(a) => Command::Diff(a),
            RawCommand::Mesh(a) => Command::Mesh(Box::new(a)),
            RawCommand::Completions(a) => Command::Completions(a),
            RawCommand::Manpages(a) => Command::Manpages(a),
        }
    }
}

/// Parses `args`. Help and version are printed here and reported as `Ok(None)`; a
/// usage error becomes its one-line message.
pub fn parse<I, T>(args: I) -> Result<Option<Cli>, Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    match RawCli::try_parse_from(&args) {
        Ok(cli) => Ok(Some(Cli { command: cli.command.into() })),
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayVersion => {
            // -V and --version alike: the commit and the RDMA libraries too.
            // Not print!: it panics when the reader went away (`--version | head -0`).
            let mut stdout = std::io::stdout();
            written(
                std::io::Write::write_all(&mut stdout, crate::version::long().as_bytes())
                    .and_then(|()| std::io::Write::flush(&mut stdout)),
            )?;
            Ok(None)
        }
        Err(e) if !e.use_stderr() => {
            // --help / --version: clap's own text on stdout.
            written(e.print().and_then(|()| std::io::Write::flush(&mut std::io::stdout())))?;
            Ok(None)
        }
        Err(e) => Err(Error::usage(usage_error(&e, &args))),
    }
}

/// Help or version text written, or why not: a reader that went away is no error (as
/// the commands' output), any other failure (`> /dev/full`) is.
fn written(result: std::io::Result<()>) -> Result<(), Error> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::io(format!("writing output: {e}")))
        }
        _ => Ok(()),
    }
}

/// clap's error as one line: the error, the near miss clap or iperf3's habit suggests,
/// and the help to read (the subcommand's, when one was named).
fn usage_error(e: &clap::Error, args: &[std::ffi::OsString]) -> String {
    let rendered = e.render().to_string();
    let sub = subcommand(args);
    let mut line = first_line(&rendered);
    if let Some(tip) = iperf3_habit(e, sub.as_deref()).or_else(|| similar(&rendered)) {
        line = format!("{line}; {tip}");
    }
    match sub {
        Some(sub) => format!("{line} (see rdmabench {sub} --help)"),
        None => format!("{line} (see rdmabench --help)"),
    }
}

/// The subcommand the line names (its first word that is one, alias included).
fn subcommand(args: &[std::ffi::OsString]) -> Option<String> {
    let cmd = RawCli::command();
    let word = args.get(1)?.to_str()?;
    let name = cmd
        .get_subcommands()
        .find(|c| c.get_name() == word || c.get_all_aliases().any(|a| a == word))
        .map(|c| c.get_name().to_string());
    name
}

/// clap's own suggestion, its likeliest one (clap lists them likeliest last), a
/// subcommand's alias (`write_bw`) only when nothing else came near: `a similar
/// subcommand exists: 'write-bw'`.
fn similar(rendered: &str) -> Option<String> {
    let tip = rendered.lines().find_map(|l| {
        let tip = l.trim().strip_prefix("tip: ")?;
        tip.contains("similar").then_some(tip)
    })?;
    let what = if tip.contains("subcommand") { "subcommand" } else { "argument" };
    let names: Vec<&str> = tip.split('\'').skip(1).step_by(2).collect();
    let alias = |n: &&str| what == "subcommand" && n.contains('_');
    let best = names.iter().rev().find(|n| !alias(n)).or(names.last())?;
    Some(format!("tip: a similar {what} exists: '{best}'"))
}

/// iperf3's flags on a TCP test, unknown here: rdmabench's spelling of each.
fn iperf3_habit(e: &clap::Error, sub: Option<&str>) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument || !matches!(sub, Some("tcp-bw" | "tcp-lat")) {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    let flag = arg.split('=').next().unwrap_or(arg);
    let ours = match flag {
        "-t" | "--time" => "iperf3's -t SECS is -D SECS here",
        "-c" | "--client" => "iperf3's -c HOST is HOST alone here (no HOST: the server)",
        "-l" | "--length" => "iperf3's -l SIZE is -s SIZE here",
        _ => return None,
    };
    Some(ours.to_string())
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
    line
}

#[cfg(test)]
mod tests;
