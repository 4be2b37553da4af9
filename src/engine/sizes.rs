//! A test between the two sides once the hello is answered: the backend opens and
//! connects, each side describes itself, then every size in turn (a barrier, the
//! step, the results), then done. Generic over the [`Backend`]; the report fills as
//! it goes, so a failure keeps every size that completed.

use std::io::Write;

use crate::backend::{Attachment, Backend, Setup, SetupContext};
use crate::counters::PortCounters;
use crate::error::Error;
use crate::perf::header;
use crate::results::RunReport;
use crate::session::protocol::{Channel, Message};
use crate::spec::RunLength;
use crate::transport::Connection;

use super::describe;
use super::step::{SizeError, Step};

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
    let counters = port_counters(ctx, &setup.attachment)?;
    if ctx.spec.rdma().is_some() {
        setup.params.cpu_affinity = Some(super::affinity::apply(ctx.local, &setup.attachment)?);
    }
    describe::exchange(ctx, ch, &setup, report)?;
    report.params = Some(setup.params.clone());
    [report.local, report.remote] = setup.endpoints.clone();
    report.peer_address = ch.peer_addr().map(|a| a.to_string());
    print_header(ctx, report, &setup, out)?;
    let mut step = Step::new(ctx.spec, ctx.local, &ctx.plan);
    step.counters = counters;
    if let Some(affinity) = &setup.params.cpu_affinity {
        // --threads: the CPUs the measuring thread may use, or where the kernel lets it.
        step.thread_cpus = match &affinity.cpus[..] {
            [] => ffi::os::current_thread_cpus().unwrap_or_default(),
            cpus => cpus.to_vec(),
        };
    }
    if let (Some(watch), Attachment::Device { name, port }) =
        (step.soak.get_mut(), &setup.attachment)
    {
        let all = crate::counters::CounterSelection::All;
        watch.watch_port(name, *port, ctx.local.counters.as_ref().unwrap_or(&all));
    }
    for c in &setup.conns {
        step.check(c.capabilities())?;
    }
    if ctx.spec.rdma().is_none() {
        pin_measuring_thread::<B::Conn>(ctx, setup.conns.len())?;
    }
    if ctx.spec.rdma().is_some_and(|r| r.run_infinitely) {
        super::infinite::run(&step, ch, &mut setup.conns, ctx.gbits, report, out)?;
    } else {
        sweep(ctx, ch, &step, &mut setup.conns, report)?;
    }
    // Measuring is over: serve lets the next client wait for the teardown from here on.
    // Before this side's done, not after the peer's: its client, done as soon as it has
    // both, may be back for its next test before this thread wakes (then told `busy`).
    if let Some(ending) = ctx.ending {
        ending();
    }
    ch.send(&Message::Done)?;
    match ch.recv("done")? {
        Message::Done => Ok(()),
        other => {
            Err(Error::refused(format!("control channel: expected done, got {}", other.name())))
        }
    }
}

/// Every size in turn: a barrier, the step, its result into `report`.
fn sweep<C: Connection + Send>(
    ctx: &SetupContext<'_>,
    ch: &mut Channel,
    step: &Step<'_>,
    conns: &mut [C],
    report: &mut RunReport,
) -> Result<(), Error> {
    let progress = sweep_progress(ctx);
    for &size in &ctx.spec.sizes {
        progress.running(&size_message(size, &ctx.spec.run));
        // Barrier: both sides ready for this size, or either done (stopped by a signal:
        // the sizes so far are the run, as --run_infinitely's intervals are).
        let stopping = crate::perf::loops::stop_requested();
        ch.send(&if stopping { Message::Done } else { Message::Ready { size } })?;
        match ch.recv("ready")? {
            Message::Done => break,
            Message::Ready { size: peer } if peer == size && !stopping => {}
            Message::Ready { size: peer } if peer == size => break,
            other => {
                return Err(Error::refused(format!(
                    "control channel: expected ready for {size} B, got {}",
                    other.name()
                )))
            }
        }
        match step.run(ch, conns, size) {
            Ok(result) => report.results.push(result),
            Err(SizeError { error, kept }) => {
                // A size that failed after measuring (a duration run's peer gone) is
                // reported with what this side measured until then, beside the error.
                report.results.extend(kept.map(|k| *k));
                return Err(error);
            }
        }
        progress.done_one();
    }
    Ok(())
}

pub(crate) fn print_header<C>(
    ctx: &SetupContext<'_>,
    report: &RunReport,
    setup: &Setup<C>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let env = report.environment.as_ref();
    let role = &ctx.plan.role;
    let mut head = header::header(ctx.spec, role, &setup.params, env, report.clock.as_ref());
    for l in setup.local.iter().chain(&setup.remote) {
        head.push_str(l);
        head.push('\n');
    }
    head.push_str(crate::report::RESULT_LINE);
    head.push('\n');
    out.write_all(head.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    let _ = out.flush();
    Ok(())
}

/// `-W`'s counters of the port this side runs on.
pub(crate) fn port_counters(
    ctx: &SetupContext<'_>,
    on: &Attachment,
) -> Result<Option<PortCounters>, Error> {
    match (&ctx.local.counters, on) {
        (None, _) => Ok(None),
        (Some(selection), Attachment::Device { name, port }) => {
            PortCounters::open(name, *port, selection).map(Some)
        }
        (Some(_), _) => Err(Error::usage("-W: only a verbs device's port keeps counters")),
    }
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

/// The bar of a sweep or a timed run (the size running, sizes done, time left); none for
/// one counted size, with `--quiet`, or when stderr is not a terminal.
fn sweep_progress(ctx: &SetupContext<'_>) -> crate::progress::Progress {
    let sizes = ctx.spec.sizes.len();
    match ctx.spec.run {
        // The clock moves, where a count of sizes would sit at 0/1 for the whole run.
        RunLength::Duration { secs, .. } => crate::progress::Progress::timed(
            std::time::Duration::from_secs(secs.saturating_mul(sizes as u64)),
            ctx.local.quiet,
        ),
        RunLength::Iterations(_) => {
            crate::progress::Progress::new(sizes, ctx.local.quiet || sizes == 1)
        }
    }
}

fn size_message(size: u64, run: &RunLength) -> String {
    match run {
        RunLength::Duration { secs, .. } => format!("{size} B, {secs} s each"),
        RunLength::Iterations(_) => format!("{size} B"),
    }
}
