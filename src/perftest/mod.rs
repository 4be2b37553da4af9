//! Talking to perftest (`--perftest`): a test run against perftest 5.70 or later
//! (`ib_write_bw`, `ib_read_lat`, …) on either side, over perftest's own out-of-band
//! exchange on its port (18515), so that rdmabench's figures can be checked against
//! perftest's on a host where only perftest runs. rdmabench's own protocol stays the
//! default; docs/protocol.md, "Talking to perftest", has the exchange.
//!
//! perftest negotiates nothing (until 6.28, which rdmabench's announced version keeps
//! from negotiating): both sides must be started with the same test, size, iterations
//! and queue pairs, as two perftests must. What the exchange cannot carry is refused
//! here, by name, before anything is sent.
//!
//! - [`records`]: the version, queue pair and report records, encoded and checked;
//! - [`wire`]: the lock-step connection, with its timeouts;
//! - `driver`: the six tests in each perftest main's order.

#[cfg(target_os = "linux")]
mod driver;
pub mod records;
pub mod wire;

use std::io::Write;
use std::time::Instant;

pub use wire::PERFTEST_PORT;

use crate::engine::{Outcome, Side};
use crate::error::{Error, ErrorKind};
use crate::spec::{Link, Local, TestSpec, Verb};
use crate::transport::Backend;

/// Runs `spec` on this side against a perftest peer, printing the header as the run
/// starts (the table is the caller's, as for [`crate::engine::run`]).
pub fn run(
    spec: &TestSpec,
    side: &Side,
    local: &Local,
    gbits: bool,
    out: &mut dyn Write,
) -> Outcome {
    let client = matches!(side, Side::Client { .. });
    let mut report = crate::engine::new_report(spec, client);
    let result = spec.validate().and_then(|()| conveyable(spec)).and_then(|()| {
        let host = match side {
            Side::Client { host } => Some(host.as_str()),
            Side::Server => None,
        };
        let ctx = crate::backend::SetupContext::new(spec, local, host, gbits);
        let (wire, version) = match host {
            Some(host) => connect(host, local)?,
            None => accept(local, out)?,
        };
        // perftest's exchange waits each step for --timeout; the loops end here.
        let _limited = crate::perf::loops::limit_tests(local.run_limit(spec));
        run_session(&ctx, wire, &version, &mut report, out)
    });
    Outcome { report, error: result.err() }
}

#[cfg(target_os = "linux")]
fn run_session(
    ctx: &crate::backend::SetupContext<'_>,
    wire: wire::Wire,
    version: &str,
    report: &mut crate::results::RunReport,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let watch = crate::engine::LinkWatch::start();
    driver::run(ctx, wire, version, report, out)
        .map_err(|e| watch.name_the_cause(e, report.params.as_ref()))
}

#[cfg(not(target_os = "linux"))]
fn run_session(
    _: &crate::backend::SetupContext<'_>,
    _: wire::Wire,
    _: &str,
    _: &mut crate::results::RunReport,
    _: &mut dyn Write,
) -> Result<(), Error> {
    Err(Error::new(
        ErrorKind::NoDevice,
        "--perftest: perftest runs over verbs, Linux's RDMA interface",
    ))
}

/// What perftest's exchange cannot carry, or this side does not run against it yet,
/// refused by name.
///
/// # Errors
/// Kind `usage`, naming the flag.
pub fn conveyable(spec: &TestSpec) -> Result<(), Error> {
    let no = |what: &str| Err(Error::usage(format!("--perftest: {what}")));
    let Link::Rdma(r) = &spec.link else {
        return no("perftest's tests are RDMA tests (for TCP, iperf3 is the reference)");
    };
    if r.backend != Backend::Verbs {
        return no("perftest runs over verbs, not NetworkDirect");
    }
    if spec.kind.verb == Verb::Atomic {
        return no("atomic tests are not run against perftest yet (write, read and send are)");
    }
    if spec.run.duration().is_some() {
        return no("-D is not run against perftest yet (give -n)");
    }
    if r.rdma_cm {
        return no("-R (rdma_cm) is not run against perftest yet");
    }
    if spec.validate {
        return no("--validate: perftest neither lays nor checks rdmabench's pattern");
    }
    if r.reversed {
        return no("--reversed is not run against perftest yet");
    }
    if r.immediate {
        return no("--write_with_imm and --send_with_imm are not run against perftest yet");
    }
    Ok(())
}

/// The client's connection, and the peer's version.
fn connect(host: &str, local: &Local) -> Result<(wire::Wire, String), Error> {
    let stream = crate::session::connect::connect(
        host,
        local.port,
        local.bind,
        local.timeout,
        local.connect_window,
    )?;
    let mut w = wire::Wire::new(stream, true, local.timeout)?;
    let version = w.versions()?;
    Ok((w, version))
}

/// The server's peer: the first connection within `--timeout` that announces a
/// perftest version; strays (a port scan, garbage, rdmabench's own hello) are named on
/// stderr and do not end the wait. Each connection is read aside under the one deadline
/// (`session::connect::first_answer`), so a silent stray holds no place before the real
/// client.
fn accept(local: &Local, out: &mut dyn Write) -> Result<(wire::Wire, String), Error> {
    use crate::session::connect::{first_answer, ControlListener, Refusal};
    let listener = ControlListener::bind(local.bind, local.port)?;
    let port = listener.local_addr().map_or(local.port, |a| a.port());
    let _ = writeln!(out, " Waiting for a perftest client on port {port}");
    let _ = out.flush();
    let deadline = Instant::now() + local.timeout;
    let read = |stream, peer, wait| {
        let versions = wire::Wire::new(stream, false, wait).and_then(|mut w| {
            let version = w.versions()?;
            Ok((w, version))
        });
        versions.map(Some).map_err(|error| Refusal { peer, error })
    };
    let mut last: Option<Error> = None;
    let ignore = |r: Refusal| {
        eprintln!("rdmabench: ignored {}: {} ({})", r.peer, r.error, r.error.kind);
        last = Some(r.error);
    };
    let (mut w, version) = first_answer(&listener, deadline, read, ignore).map_err(|e| {
        if e.kind != ErrorKind::PeerUnreachable {
            return e;
        }
        let waited = format!("within {} s (--timeout)", local.timeout.as_secs());
        let message = match &last {
            None => format!("no perftest client connected to port {port} {waited}"),
            Some(l) => format!("no perftest client {waited}; the last connection was refused: {l}"),
        };
        Error::new(e.kind, message)
    })?;
    // The versions had what was left of the wait; the test has the whole timeout.
    w.set_timeout(local.timeout);
    Ok((w, version))
}
