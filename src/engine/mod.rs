//! The test engine, as a library: run a [`TestSpec`] as the client or the server and
//! get a typed [`Outcome`] back — every size that completed, and the error if one
//! stopped the run. The CLI, `serve` and `compare` drive it; so can your own code
//! (`examples/engine.rs`).
//!
//! How one test flows (docs/architecture.md): the spec is validated once; the client
//! connects and says hello with the whole spec, the server answers; the backend for
//! the spec's link opens and establishes its connections ([`crate::backend`]); each
//! side describes itself; then the session runs each size through the step (this
//! side's plan, [`crate::spec::plan::SidePlan`], made once) and exchanges the results.
//!
//! The front door (docs/architecture.md, `## Front doors`): the library API below, and
//! for perftest's driver, which runs its own exchange over the engine's set-up, loops'
//! plans and figures, the few items re-exported for it here. The rooms inside are
//! private.

mod affinity;
mod describe;
mod exchange;
mod infinite;
mod intervals;
#[cfg(target_os = "linux")]
mod link;
mod sizes;
mod soak;
mod step;
mod threads;

pub(crate) use affinity::numa_node_cpus;
// perftest's driver's door (Linux: it runs over verbs).
#[cfg(target_os = "linux")]
pub(crate) use {
    affinity::apply as apply_affinity,
    exchange::cpu_cost,
    intervals::IntervalPrinter,
    link::LinkWatch,
    sizes::{port_counters, print_header},
    step::{bw_result, Step},
};

use std::io::Write;
use std::time::{Duration, Instant};

use crate::backend::{self, SetupContext};
use crate::environment::Environment;
use crate::error::{Error, ErrorKind};
use crate::perf::loops;
pub use crate::results::Outcome;
use crate::results::{EnvironmentReport, RunReport};
use crate::session::auth::{self, Nonce};
use crate::session::connect::{connect, first_hello, ControlListener, Refusal};
use crate::session::protocol::{mismatches, Channel, Message, ProtocolError};
use crate::spec::{Link, Local, TestSpec};
use crate::transport::Backend;

/// The tool name sent in the handshake: `rdmabench 0.1.0 (abc123456789)`.
pub fn tool() -> String {
    crate::version::tool()
}

/// Which end of the test this side is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Side {
    /// Connects to the server at this host.
    Client {
        /// Name or address.
        host: String,
    },
    /// Waits for one client on `Local::bind` and `Local::port`.
    Server,
}

/// Runs `spec` on this side and returns its outcome, printing perftest's header to
/// `out` as the run starts (the table is the caller's: see
/// [`crate::perf::finish`]). `gbits`: bandwidth in Gb/s in the header's units.
pub fn run(
    spec: &TestSpec,
    side: &Side,
    local: &Local,
    gbits: bool,
    out: &mut dyn Write,
) -> Outcome {
    let client = matches!(side, Side::Client { .. });
    let mut report = new_report(spec, client);
    // The spec, and this side's settings against it: what the CLI refuses, a program's
    // hand-built test is refused the same way (spec::options).
    let checked = spec.validate().and_then(|()| local.validate_for(spec));
    let result = checked.and_then(|()| match side {
        Side::Client { host } => {
            let mut ch = match stack_present(spec) {
                Ok(()) => hello(spec, host, local)?,
                // No stack here: one try at the server (no 30 s of retries), so that what
                // its hello refuses (another backend, a perftest server) is still said;
                // anything else is this side's own cause, not the peer's.
                Err(no_stack) => {
                    let once = Local { connect_window: Duration::ZERO, ..local.clone() };
                    return Err(match hello(spec, host, &once) {
                        Err(e) if matches!(e.kind, ErrorKind::Mismatch | ErrorKind::Refused) => e,
                        _ => no_stack,
                    });
                }
            };
            let _limited = limit_test(&mut ch, spec, local);
            let ctx = SetupContext::new(spec, local, Some(host), gbits);
            guarded(&mut ch, |ch| dispatch(&ctx, ch, &mut report, out))
        }
        Side::Server => {
            device_present(spec, local)?;
            let listener = ControlListener::bind(local.bind, local.port)?;
            serve_one(&listener, spec, local, (gbits, true), &mut report, out)
        }
    });
    Outcome { report, error: result.err() }
}

/// A one-shot verbs server's device, looked up before it listens: a host without one
/// fails at start (exit 2, naming why), not when a client has come.
fn device_present(spec: &TestSpec, local: &Local) -> Result<(), Error> {
    match spec.rdma() {
        Some(r) if r.backend == Backend::Verbs => {
            crate::inventory::collect(local.device.as_deref(), r.backend)?;
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A verbs client's own RDMA stack, looked up before it reaches for its server: a host
/// without one fails at once with the words `devices` and a server use, not after
/// retrying the connection or as the peer's refusal.
fn stack_present(spec: &TestSpec) -> Result<(), Error> {
    match spec.rdma() {
        Some(r) if r.backend == Backend::Verbs => Ok(crate::inventory::verbs_stack_present()?),
        _ => Ok(()),
    }
}

/// Runs `spec` as the server for the first client on `listener` that says a proper
/// hello within `local.timeout`: a one-shot server on a listener the caller keeps
/// (`rdmabench mesh` opens one per rank for all its pair tests).
pub fn serve_on(
    listener: &ControlListener,
    spec: &TestSpec,
    local: &Local,
    out: &mut dyn Write,
) -> Outcome {
    let mut report = new_report(spec, false);
    let result = spec
        .validate()
        .and_then(|()| serve_one(listener, spec, local, (false, false), &mut report, out));
    Outcome { report, error: result.err() }
}

/// The one-shot server's test: its client, the same parameters, the session. `gbits`:
/// the header's units; `stops`: a termination signal ends its waits for the client
/// ([`Channel::stop_on_signal`]; the command line's server, not a mesh rank's).
fn serve_one(
    listener: &ControlListener,
    spec: &TestSpec,
    local: &Local,
    (gbits, stops): (bool, bool),
    report: &mut RunReport,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let (mut ch, theirs) = accept_client(listener, local, out)?;
    // `--run_infinitely` ends on a signal by design: its test then finishes the exchange
    // with the client (the whole run's summary on both sides, exit 0).
    if stops && !spec.rdma().is_some_and(|r| r.run_infinitely) {
        ch.stop_on_signal();
    }
    let spec = if local.follows_client && follows_client(spec, &theirs) { &theirs } else { spec };
    let diff = mismatches(&theirs, spec);
    if !diff.is_empty() {
        let e = Error::new(ErrorKind::Mismatch, format!("parameter mismatch: {}", diff.join("; ")));
        ch.send_error(&e);
        return Err(e);
    }
    let _limited = limit_test(&mut ch, spec, local);
    let ctx = SetupContext::new(spec, local, None, gbits);
    guarded(&mut ch, |ch| dispatch(&ctx, ch, report, out))
}

/// Sets this side's limit on the test ([`Local::run_limit`]) for the control channel's
/// waits and every loop this thread runs, until the guard is dropped. (`serve` sets its
/// own, on each client's thread.)
fn limit_test(ch: &mut Channel, spec: &TestSpec, local: &Local) -> loops::TestsLimited {
    let limit = local.run_limit(spec);
    if let Some(limit) = limit {
        ch.end_by(limit);
    }
    loops::limit_tests(limit)
}

/// A one-shot TCP server given no test flags (`Local::follows_client`) runs what its
/// client asks, as `iperf3 -s` does (streams, duration, sizes): the same test, a spec
/// that holds. Given any, it refuses a client whose test differs, as perftest does.
fn follows_client(mine: &TestSpec, theirs: &TestSpec) -> bool {
    mine.rdma().is_none()
        && theirs.rdma().is_none()
        && theirs.kind == mine.kind
        && theirs.validate().is_ok()
}

/// The server's side of one test for a client whose hello (`spec`) is in: what
/// `rdmabench serve` runs for each client, with the client's parameters whole.
/// `ending` is called once the measuring is over, before this side's done and the teardown.
pub fn serve_client(
    spec: &TestSpec,
    mut ch: Channel,
    local: &Local,
    ending: &(dyn Fn() + Sync),
    out: &mut dyn Write,
) -> Outcome {
    let mut report = new_report(spec, false);
    let result = match spec.validate() {
        Err(e) => {
            ch.send_error(&e);
            Err(e)
        }
        Ok(()) => {
            let ctx = SetupContext {
                ending: Some(ending),
                ..SetupContext::new(spec, local, None, false)
            };
            guarded(&mut ch, |ch| dispatch(&ctx, ch, &mut report, out))
        }
    };
    Outcome { report, error: result.err() }
}

/// A one-shot server's client: the first to say a proper hello within `--timeout`.
/// Stray connections (a port scan, a reachability check, garbage, a wrong key) are told
/// why, named on stderr and ignored, so they cannot end the server; their hellos are
/// read side by side under the one deadline, so none can stretch it or hold the client.
fn accept_client(
    listener: &ControlListener,
    local: &Local,
    out: &mut dyn Write,
) -> Result<(Channel, TestSpec), Error> {
    let port = listener.local_addr().map_or(local.port, |a| a.port());
    // Where and for how long, as perftest and iperf3 say (the port, too, when the
    // system picked it).
    let ip = listener.local_addr().map_or_else(|| "?".into(), |a| a.ip().to_string());
    let secs = local.timeout.as_secs();
    let wait = if local.wait_forever {
        "until a client comes (--timeout 0)".to_string()
    } else {
        format!("for {secs} s (--timeout)")
    };
    let _ = writeln!(out, " Listening on {ip} {wait}. Waiting for a client on port {port}");
    let _ = out.flush();
    // For ever: a century, as far as an Instant goes.
    let forever = || Instant::now().checked_add(Duration::from_secs(100 * 365 * 86_400));
    let deadline = match local.wait_forever.then(forever).flatten() {
        Some(never) => never,
        None => Instant::now() + local.timeout,
    };
    let mut stray: Option<Refusal> = None;
    let ignore = |r: Refusal| {
        eprintln!("rdmabench: ignored {}: {} ({})", r.peer, r.error, r.error.kind);
        stray = Some(r);
    };
    let found = first_hello(listener, deadline, local.timeout, local.auth.as_ref(), ignore);
    let (mut ch, spec) = found.map_err(|e| no_client(e, stray.as_ref(), port, local.timeout))?;
    // The hello had what was left of the wait; the test has the whole timeout.
    ch.set_timeout(local.timeout)?;
    Ok((ch, spec))
}

/// Why a one-shot server gave up: nobody came in `--timeout`, or only strays did (the
/// last is named), or the listener failed.
fn no_client(e: Error, stray: Option<&Refusal>, port: u16, timeout: Duration) -> Error {
    if e.kind != ErrorKind::PeerUnreachable {
        return e;
    }
    let waited = format!("within {} s (--timeout)", timeout.as_secs());
    let message = match stray {
        None => format!("no client connected to port {port} {waited}"),
        Some(s) => format!(
            "no client said hello {waited}; the last connection, from {}, was refused: {}",
            s.peer, s.error
        ),
    };
    Error::new(e.kind, message)
}

pub(crate) fn new_report(spec: &TestSpec, client: bool) -> RunReport {
    let mut report = RunReport::new(spec.id(), if client { "client" } else { "server" }, tool());
    report.environment = Some(EnvironmentReport { local: Environment::host(), peer: None });
    report.clock = Some(crate::measure::clock::ClockInfo::measured());
    report
}

/// The client's half of the handshake: connect, hello, the server's accept.
fn hello(spec: &TestSpec, host: &str, local: &Local) -> Result<Channel, Error> {
    // A server listens on `bind`; a client given one (a mesh rank) connects from it.
    let stream = connect(host, local.port, local.bind, local.timeout, local.connect_window)?;
    let mut ch = Channel::new(stream, local.timeout)?;
    let nonce = local.auth.as_ref().map(|_| Nonce::fresh()).transpose()?;
    let auth = nonce.as_ref().map(Nonce::to_hex);
    ch.send(&Message::Hello { tool: tool(), spec: spec.clone(), auth })?;
    if let (Some(key), Some(nonce)) = (&local.auth, &nonce) {
        auth::prove_to_server(&mut ch, key, nonce, spec)?;
    }
    match ch.recv("the server's answer") {
        Ok(Message::Accept { .. }) => Ok(ch),
        Ok(other) => {
            Err(Error::refused(format!("control channel: expected accept, got {}", other.name())))
        }
        Err(e @ ProtocolError::Peer(_)) => Err(Error::from(e).context("the server refused")),
        Err(e) => Err(e.into()),
    }
}

/// Runs `f`; if it fails, tells the peer why (it may be gone already).
fn guarded(
    ch: &mut Channel,
    f: impl FnOnce(&mut Channel) -> Result<(), Error>,
) -> Result<(), Error> {
    let result = f(ch);
    if let Err(e) = &result {
        ch.send_error(e);
    }
    result
}

/// The session over the backend the spec's link names.
fn dispatch(
    ctx: &SetupContext<'_>,
    ch: &mut Channel,
    report: &mut RunReport,
    out: &mut dyn Write,
) -> Result<(), Error> {
    match &ctx.spec.link {
        Link::Tcp(_) => sizes::run::<backend::Tcp>(ctx, ch, report, out),
        Link::Rdma(r) if r.backend == Backend::Nd => {
            sizes::run::<backend::Nd>(ctx, ch, report, out)
        }
        #[cfg(target_os = "linux")]
        Link::Rdma(_) => {
            let watch = LinkWatch::start();
            sizes::run::<backend::Verbs>(ctx, ch, report, out)
                .map_err(|e| watch.name_the_cause(e, report.params.as_ref()))
        }
        #[cfg(not(target_os = "linux"))]
        Link::Rdma(_) => Err(Error::new(
            ErrorKind::NoDevice,
            "verbs is Linux's RDMA interface: on this platform use --backend nd (NetworkDirect)",
        )),
    }
}
