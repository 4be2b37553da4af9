//! rdmabench: RDMA (verbs, NetworkDirect) and TCP benchmarks that keep perftest's habits.
//!
//! How a test flows, top down (docs/architecture.md, whose floors `ci/floors` checks:
//! a module imports only its own floor or those below):
//! - [`cli`]: clap flags, turned into a [`spec::TestOptions`] or a command's options once;
//! - [`compare`], [`rails`], [`serve`], [`qualify`], [`mesh`], [`doctor`], [`health`]: the commands,
//!   each with its own options;
//! - [`engine`]: runs a spec as client or server — the control [`session`], this
//!   side's role, one size at a time — and returns a typed outcome ([`perftest`]: the
//!   same against perftest's own exchange);
//! - [`backend`]: one set-up path per backend (verbs, NetworkDirect, TCP);
//! - [`perf`]: the loops, and a run in print; [`report`]: the other printers;
//! - [`stats`] (comparing runs with a baseline's), [`store`] (the results history),
//!   [`history`] (`rdmabench history`, `diff`);
//! - [`spec`]: what to run, with perftest's defaults and every rule in [`spec::rules`];
//! - [`environment`], [`inventory`]: the host, devices and interfaces results record;
//! - [`transport`]: the backend-neutral `Connection` the loops drive;
//! - the ground: [`results`] (the result model every floor above reads), [`facts`] (the host as `/sys` and `/proc` state it: every such path and
//!   read, bounded, and the one device model), [`measure`] (pure arithmetic), [`counters`], [`error`] (one error type
//!   with a kind, mapped once to the exit status), [`files`], [`text`], [`stamp`],
//!   [`progress`], [`version`].
//!
//! All `unsafe` code lives in the `rdmabench-ffi` crate (imported as `ffi`); this crate
//! forbids it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// docs/architecture.md, included so that its example of driving the engine from code
/// is compiled (not run: it needs a server) with the doctests, and stays true.
#[cfg(doctest)]
#[doc = include_str!("../docs/architecture.md")]
pub struct ArchitectureDoc;

pub mod backend;
pub mod cli;
pub mod compare;
pub mod counters;
pub mod doctor;
pub mod engine;
pub mod environment;
pub mod error;
pub mod facts;
pub mod files;
pub mod health;
pub mod history;
pub mod inventory;
pub mod measure;
pub mod mesh;
pub mod perf;
pub mod perftest;
pub mod progress;
pub mod qualify;
pub mod rails;
pub mod report;
pub mod results;
pub mod serve;
pub mod session;
pub mod spec;
pub mod stamp;
pub mod stats;
pub mod store;
pub mod text;
pub mod transport;
pub mod version;

use std::io::{self, Write};

use cli::{Cli, Command, DevicesArgs, DoctorArgs, TestArgs};
use error::Error;

pub use error::{EXIT_ERROR, EXIT_VERDICT};

/// Runs a parsed command, writing its report to `out`. Returns the process exit status.
///
/// # Errors
/// What stopped the command; [`Error::kind`]'s `exit_code` is the exit status.
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<u8, Error> {
    match cli.command {
        Command::Devices(args) => devices(&args, out),
        Command::Perf(kind, args) => test(args.to_test(kind)?, out),
        Command::Tcp(measure, args) => test(args.to_test(measure)?, out),
        Command::Serve(args) => serve::serve(&args.options(), out),
        Command::Compare(args) => compare::compare(&args.options(), out),
        Command::Doctor(args) => doctor(&args, out),
        Command::Health(args) => health::command(&args.options()?, out),
        Command::Qualify(args) => qualify::qualify(&args.options()?, out),
        Command::History(args) => history::history(&args.options()?, out),
        Command::Diff(args) => history::diff(&args.options(), out),
        Command::Mesh(args) => {
            let options = args.to_options()?;
            // An output on stdout holds it alone: the text goes to stderr.
            let mut stderr = io::stderr();
            let out: &mut dyn Write = if options.to_stdout() { &mut stderr } else { out };
            mesh::launch::command(&options, out)
        }
        Command::Completions(args) => cli::generate::completions(args.shell, out).map(|()| 0),
        Command::Manpages(args) => {
            for page in cli::generate::manpages(&args.dir)? {
                let _ = writeln!(out, "{}", page.display());
            }
            Ok(0)
        }
    }
}

/// One test on this side, from the command line (over several rails when `-d` names
/// several devices).
fn test(t: TestArgs, out: &mut dyn Write) -> Result<u8, Error> {
    // --json -: stdout holds the document alone, the table goes to stderr.
    let mut stderr = io::stderr();
    let out: &mut dyn Write = if t.output.json_to_stdout() { &mut stderr } else { out };
    if let Some(rails) = rails::plan(&t)? {
        return rails::run(&t, rails, out);
    }
    // Opened, its schema and tables checked and a write tried, before the run: a store
    // that cannot take the run stops it at once.
    let store = t.output.store.as_deref().map(store::Store::open).transpose()?;
    if let Some(path) = &t.output.json {
        // Checked (and emptied) before the run: a result is never lost to a bad path,
        // and an older file never survives to read as this run's.
        report::prepare_json(path)?;
        if !files::is_stdout(path) {
            report::write_json(path, &report::to_json(&unfinished(&t)))?;
        }
    }
    if let Some(path) = t.local.interval_lines.as_ref().and_then(|l| l.json_lines.as_ref()) {
        // Emptied before the run: the records appended are this run's alone.
        files::create(path)
            .map_err(|e| Error::io(format!("--json-lines {}: {e}", path.display())))?;
    }
    // Ctrl-C (or SIGTERM, SIGHUP) stops the run where it stands, the results so far
    // printed and written; a second one ends it at once. A client cuts its window or
    // sweep; a one-shot server stops waiting for its client, or leaves its test (its
    // client is told). perftest's server keeps the default: Ctrl-C ends it.
    if t.host.is_some() || !t.perftest {
        let _ = ffi::os::watch_termination_once();
    }
    let side = match &t.host {
        Some(host) => engine::Side::Client { host: host.clone() },
        None => engine::Side::Server,
    };
    // --output: the figures alone, no header (as perftest's).
    let mut sink = io::sink();
    let header: &mut dyn Write = if t.output.only.is_some() { &mut sink } else { &mut *out };
    let mut outcome = if t.perftest {
        perftest::run(&t.spec, &side, &t.local, t.output.report_gbits, header)
    } else {
        engine::run(&t.spec, &side, &t.local, t.output.report_gbits, header)
    };
    let signal = ffi::os::termination_signal();
    // A server's wait that the signal ended is the stop, not a failure.
    if signal.is_some()
        && outcome.error.as_ref().is_some_and(|e| e.message.contains(error::STOPPED))
    {
        outcome.error = None;
    }
    outcome.report.stopped = results::Stopped::of(signal, outcome.error.as_ref());
    let status = perf::finish::finish(&t.spec, outcome, &t.output, store, out)?;
    // Stopped by a signal: the shell's status for it (130 for SIGINT, 143 for SIGTERM),
    // once the results so far are out. Not a --run_infinitely run: a signal is how it
    // ends, its summary the run's (exit 0, as documented since it was built).
    let infinite = t.spec.rdma().is_some_and(|r| r.run_infinitely);
    Ok(signal.filter(|_| !infinite).map_or(status, |s| 128 + s as u8))
}

/// The `--json` document in place while the run goes: valid, failed, `unfinished`.
fn unfinished(t: &TestArgs) -> results::RunReport {
    let role = if t.host.is_some() { "client" } else { "server" };
    let mut report = results::RunReport::new(t.spec.id(), role, engine::tool());
    report.stopped = Some(results::Stopped::Unfinished);
    report.verdict.pass = false;
    report.verdict.failures.push("the run had not finished".into());
    report
}

fn devices(args: &DevicesArgs, out: &mut dyn Write) -> Result<u8, Error> {
    let backend = args.backend.map_or_else(transport::Backend::native, Into::into);
    let inventory = inventory::collect(args.device.as_deref(), backend)?;
    let text = if args.json {
        report::to_json(&inventory)
    } else {
        report::devices::render(&inventory, args.verbose)
    };
    write_out(out, &text)?;
    Ok(0)
}

fn doctor(args: &DoctorArgs, out: &mut dyn Write) -> Result<u8, Error> {
    let backend = args.backend.map_or_else(transport::Backend::native, Into::into);
    let root = args.root.clone().unwrap_or_else(|| "/".into());
    if !root.is_dir() {
        return Err(Error::usage(format!("--root {}: not a directory", root.display())));
    }
    if let Some(dir) = &args.capture {
        doctor::capture::capture(&root, dir)?;
        return Ok(0);
    }
    let target = doctor::Target { device: args.device.as_deref(), root: &root, backend };
    let (started, clock) = (stamp::utc_now(), std::time::Instant::now());
    // `-`: that output on stdout, and the checks' text on stderr.
    let dashed =
        files::one_stdout(&[("--json", args.json.as_deref()), ("--junit", args.junit.as_deref())])?;
    let report = doctor::diagnose(&target)?;
    if dashed {
        write_out(&mut io::stderr(), &doctor::render(&report))?;
    } else {
        write_out(out, &doctor::render(&report))?;
    }
    if let Some(path) = &args.json {
        files::write_output("--json", path, &report::to_json(&report))?;
    }
    if let Some(path) = &args.junit {
        let seconds = clock.elapsed().as_secs_f64();
        files::write_output("--junit", path, &doctor::junit::document(&report, &started, seconds))?;
    }
    Ok(if report.worst() == doctor::Status::Fail { EXIT_VERDICT } else { 0 })
}

/// Writes a report; a closed pipe (`| head`) is not an error.
fn write_out(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(Error::io(format!("writing output: {e}")))
        }
        _ => Ok(()),
    }
}
