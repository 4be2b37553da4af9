//! The command line (clap derive), as close to the flags as possible. Each subcommand
//! has its own argument group; `run` turns them into plain configs once.

use clap::{Args, Parser, Subcommand};

/// RDMA and TCP bandwidth/latency benchmarks with perftest's habits.
#[derive(Debug, Parser)]
#[command(name = "rdmabench", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List RDMA devices: adapter, firmware, ports, link rate, GID table, PCIe, NUMA.
    Devices(DevicesArgs),
}

/// `rdmabench devices`.
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Only this device (e.g. mlx4_0, rxe0), as perftest's -d.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Everything: limits, GUIDs, PCIe link, NUMA node, LIDs.
    #[arg(short, long)]
    pub verbose: bool,
    /// JSON on stdout instead of text (schema in docs/json.md).
    #[arg(long)]
    pub json: bool,
}

/// Parses `args`. Help and version are printed here and reported as `Ok(None)`; a
/// usage error becomes its one-line message.
pub fn parse<I, T>(args: I) -> Result<Option<Cli>, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => Ok(Some(cli)),
        Err(e) if !e.use_stderr() => {
            // --help / --version: clap's own text on stdout.
            let _ = e.print();
            Ok(None)
        }
        Err(e) => Err(first_line(&e.render().to_string())),
    }
}

/// clap's error text is several lines (error, tip, usage); keep the error itself.
fn first_line(rendered: &str) -> String {
    let line = rendered.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid arguments");
    let line = line.strip_prefix("error: ").unwrap_or(line);
    format!("{line} (see rdmabench --help)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_flags_parse() {
        let cli = parse(["rdmabench", "devices", "-d", "mlx4_0", "-v", "--json"]).unwrap().unwrap();
        let Command::Devices(args) = cli.command;
        assert_eq!(args.device.as_deref(), Some("mlx4_0"));
        assert!(args.verbose && args.json);
        let cli = parse(["rdmabench", "devices", "--ib-dev=rxe0"]).unwrap().unwrap();
        let Command::Devices(args) = cli.command;
        assert_eq!(args.device.as_deref(), Some("rxe0"));
    }

    #[test]
    fn usage_errors_are_one_line_naming_the_problem() {
        let err = parse(["rdmabench", "devices", "--bogus"]).unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("--bogus"), "{err}");
        let err = parse(["rdmabench", "frobnicate"]).unwrap_err();
        assert!(err.contains("frobnicate"), "{err}");
        let err = parse(["rdmabench", "devices", "-d"]).unwrap_err();
        assert!(err.contains("DEVICE"), "{err}");
    }
}
