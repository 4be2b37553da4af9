//! One connection to `serve`, on its own thread: the handshake under its deadline,
//! the server's own limits, the test slot, the test, one log line.

use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use super::admission::{Admission, ConnectionTicket, PendingTicket};
use super::{summary, Config, Event};
use crate::engine::serve_client;
use crate::error::{Error, ErrorKind, RunLimit};
use crate::session::connect::handshake;
use crate::spec::role::server_leads;
use crate::spec::{RunLength, TestSpec};

/// How long a client that arrives while another's test ends (measuring over, the
/// server tears down) waits for it (at most the timeout) before it is told the server is
/// busy; one that arrives while a test measures is told at once.
pub const BUSY_WAIT: Duration = Duration::from_secs(5);

/// Serves one connection to its end and reports it on `events`.
pub(super) fn handle(
    stream: TcpStream,
    addr: SocketAddr,
    tickets: (ConnectionTicket, PendingTicket),
    admission: &Arc<Admission>,
    config: &Config,
    events: &Sender<Event>,
) {
    let (_connection, pending) = tickets;
    let peer = addr.to_string();
    let say = |line: String| {
        let _ = events.send(Event::Line(line));
    };
    let key = config.local.auth.as_ref();
    let (mut ch, spec) = match handshake(stream, addr, config.local.timeout, key) {
        Ok(Some(accepted)) => accepted,
        // A reachability check (compare's), not a test: neither logged nor counted.
        Ok(None) => return,
        Err(r) => return say(format!("{peer} refused: {} ({})", r.error, r.error.kind)),
    };
    if !pending.said_hello() {
        // Dropped for a flood while its hello was read: its socket is shut already.
        return;
    }
    let test = spec.id();
    let wait = config.local.timeout.min(BUSY_WAIT);
    let running = match admit(&spec, config).and_then(|()| admission.start(test, wait)) {
        Ok(running) => running,
        Err(e) => {
            ch.send_error(&e);
            return say(format!("{peer} {test} refused: {e} ({})", e.kind));
        }
    };
    // However the client beats or sends, the server serves it no longer than this.
    let limit = RunLimit { after: config.max_time, serve: true };
    ch.end_by(limit);
    crate::perf::loops::end_tests_by(limit);
    // The client's spec whole: both sides run with the same parameters.
    let ending = || running.ending();
    let outcome = serve_client(&spec, ch, &config.local, &ending, &mut std::io::sink());
    drop(running);
    let line = match &outcome.error {
        None => format!("{peer} {test} ok: {}{}", summary(&outcome.report), whose(&spec)),
        Some(e) => format!("{peer} {test} FAILED: {e} ({})", e.kind),
    };
    let _ = events.send(Event::Tested { line, error: outcome.error.map(|e| e.kind) });
}

/// Whose figures the log line shows: the side that leads measures, and the client leads
/// unless the server sends (`--reversed`). A client's are its claim, checked for range
/// only (the engine's results exchange), and said to be.
fn whose(spec: &TestSpec) -> &'static str {
    if server_leads(spec) {
        ""
    } else {
        " (as the client reports)"
    }
}

/// The server's own limits on a client's test, beyond the rules every test obeys.
fn admit(spec: &TestSpec, config: &Config) -> Result<(), Error> {
    spec.validate()?;
    let needs = spec.buffer_bytes();
    if needs > config.max_memory {
        return Err(Error::new(
            ErrorKind::Usage,
            format!(
                "the test needs {} MiB of buffers; this server allows {} MiB (serve --max-memory)",
                needs.div_ceil(1 << 20),
                config.max_memory >> 20
            ),
        ));
    }
    if let RunLength::Duration { secs, .. } = spec.run {
        let total = secs.saturating_mul(spec.sizes.len() as u64);
        if total > config.max_time.as_secs() {
            return Err(Error::usage(format!(
                "the test runs {total} s; this server allows {} s per test (serve --max-time)",
                config.max_time.as_secs()
            )));
        }
    }
    Ok(())
}
