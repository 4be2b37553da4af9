//! A test between the two sides once the hello is answered: the backend opens and
//! connects, each side describes itself, then every size in turn (a barrier, the
//! step, the results), then done. Generic over the [`Backend`]; the report fills as
//! it goes, so a failure keeps every size that completed.

use std::io::Write;

use crate::backend::{Backend, Setup, SetupContext};
use crate::error::Error;
use crate::perf::report::{self, RunReport};
use crate::session::protocol::{Channel, Message};
use crate::spec::RunLength;
use crate::transport::Connection;

use super::describe;
use super::step::Step;

/// Runs the test over backend `B` on this side, printing the header as it starts;
/// `report` collects what is known as it becomes known.
///
/// # Errors
/// Whatever stops the run; `report` keeps what completed.
pub fn run<B: Backend>(
    ctx: &SetupContext<'_>,
    ch: &mut Channel,
    report: &mut RunReport,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let backend = B::open(ctx, ch)?;
    if !ctx.client() {
        // What the client will connect to is open: it may go on.
        ch.send(&Message::Accept { tool: super::tool() })?;
    }
    let mut setup = backend.establish(ctx, ch)?;
    describe::exchange(ctx, ch, &setup, report)?;
    report.params = Some(setup.params.clone());
    report.local = setup.local.clone();
    report.remote = setup.remote.clone();
    print_header(ctx, report, &setup, out)?;
    let step = Step::new(ctx.spec, ctx.local, ctx.client());
    for c in &setup.conns {
        step.check(c.capabilities())?;
    }
    pin_measuring_thread::<B::Conn>(ctx, setup.conns.len())?;
    let progress = Progress::new(ctx);
    for (k, &size) in ctx.spec.sizes.iter().enumerate() {
        progress.show(k, size);
        // Barrier: both sides ready for this size.
        ch.send(&Message::Ready { size })?;
        match ch.recv("ready")? {
            Message::Ready { size: peer } if peer == size => {}
            other => {
                return Err(Error::refused(format!(
                    "control channel: expected ready for {size} B, got {}",
                    other.name()
                )))
            }
        }
        let result = step.run(ch, &mut setup.conns, size)?;
        report.results.push(result);
    }
    progress.end();
    ch.send(&Message::Done)?;
    match ch.recv("done")? {
        Message::Done => Ok(()),
        other => {
            Err(Error::refused(format!("control channel: expected done, got {}", other.name())))
        }
    }
}

fn print_header<C>(
    ctx: &SetupContext<'_>,
    report: &RunReport,
    setup: &Setup<C>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let mut head =
        report::header(ctx.spec, &setup.params, report.role, report.environment.as_ref());
    for l in setup.local.iter().chain(&setup.remote) {
        head.push_str(l);
        head.push('\n');
    }
    head.push_str(report::RESULT_LINE);
    head.push('\n');
    out.write_all(head.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    let _ = out.flush();
    Ok(())
}

/// With `--cpus`, a run measured by one thread (every loop but a thread per
/// connection) runs on the first CPU of the list.
fn pin_measuring_thread<C: Connection>(ctx: &SetupContext<'_>, conns: usize) -> Result<(), Error> {
    match ctx.local.pin.first() {
        Some(&cpu) if !C::BLOCKING_POLL || conns == 1 => ffi::os::pin_current_thread(cpu)
            .map_err(|e| Error::usage(format!("--cpus: cannot pin to CPU {cpu}: {e}"))),
        _ => Ok(()),
    }
}

/// `size 4096 (3/23)` on a terminal, for sweeps and duration runs.
struct Progress {
    on: bool,
    total: usize,
    eta: String,
}

impl Progress {
    fn new(ctx: &SetupContext<'_>) -> Self {
        let spec = ctx.spec;
        let duration = matches!(spec.run, RunLength::Duration { .. });
        Progress {
            on: std::io::IsTerminal::is_terminal(&std::io::stderr())
                && (spec.sizes.len() > 1 || duration),
            total: spec.sizes.len(),
            eta: match spec.run {
                RunLength::Duration { secs, .. } => format!(", {secs} s"),
                RunLength::Iterations(_) => String::new(),
            },
        }
    }

    fn show(&self, k: usize, size: u64) {
        if self.on {
            eprint!("\rrdmabench: size {size} ({}/{}{})   ", k + 1, self.total, self.eta);
        }
    }

    fn end(&self) {
        if self.on {
            eprintln!();
        }
    }
}
