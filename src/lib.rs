//! rdmabench: RDMA (verbs, NetworkDirect) and TCP benchmarks that keep perftest's habits.
//!
//! Architecture, top down:
//! - [`cli`]: clap flags, parsed once and turned into plain configs;
//! - [`inventory`]: the backend-neutral device model behind `rdmabench devices`;
//! - [`transport`]: the backend-neutral [`transport::Transport`] / [`transport::Connection`]
//!   interface the tests are written against, and its verbs implementation;
//! - [`report`]: human and JSON printers over finished models.
//!
//! All `unsafe` code lives in the `rdmabench-ffi` crate (imported as `ffi`); this crate
//! forbids it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod cli;
pub mod compare;
pub mod environment;
pub mod inventory;
pub mod measure;
pub mod perf;
pub mod report;
pub mod serve;
pub mod session;
pub mod transport;

use std::io::{self, Write};

use cli::{Cli, Command, DevicesArgs};

/// Exit status for a run that failed for a reason the user can fix (bad input, no
/// device, peer gone): 2, as perftest and ripgrep use.
pub const EXIT_ERROR: u8 = 2;

/// Runs a parsed command, writing its report to `out`. Returns the process exit status.
///
/// # Errors
/// A one-line, user-facing message; the caller prints it and exits [`EXIT_ERROR`].
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<u8, String> {
    match cli.command {
        Command::Devices(args) => devices(&args, out),
        Command::Perf(test, args) => {
            let cfg = perf::config::TestConfig::from_args(test, &args)?;
            perf::run::run(&cfg, out)
        }
        Command::Tcp(measure, args) => {
            let cfg = perf::config::TestConfig::from_tcp_args(measure, &args)?;
            perf::run::run(&cfg, out)
        }
        Command::Serve(args) => serve::serve(&args, out),
        Command::Compare(args) => compare::compare(&args, out),
    }
}

fn devices(args: &DevicesArgs, out: &mut dyn Write) -> Result<u8, String> {
    let backend = args.backend.unwrap_or_else(transport::Backend::native);
    let inventory =
        inventory::collect(args.device.as_deref(), backend).map_err(|e| e.to_string())?;
    let text = if args.json {
        report::to_json(&inventory)
    } else {
        report::devices::render(&inventory, args.verbose)
    };
    write_out(out, &text)?;
    Ok(0)
}

/// Writes a report; a closed pipe (`| head`) is not an error.
fn write_out(out: &mut dyn Write, text: &str) -> Result<(), String> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(()),
    }
}
