//! `rdmabench serve`: one long-lived server. Each client says which test it wants in
//! its hello; the server applies that test's rules and its own limits to the client's
//! parameters, runs its side, logs one line, and goes on listening, whatever the client
//! did. Each connection has its own thread and deadlines, so a silent, slow or hostile
//! client delays nobody; one test runs at a time, and a second client meanwhile is
//! told the server is busy (docs/security.md).

mod admission;
mod client;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{one_line, Error, ErrorKind};
use crate::measure::bw_in_unit;
use crate::results::RunReport;
use crate::session::connect::ControlListener;
use crate::spec::key::AuthKey;
use crate::spec::rules::{timeout, MAX_BUFFERS};
use crate::spec::{Local, DEFAULT_PORT};
use crate::stamp::utc_now;

pub use admission::{MAX_CONNECTIONS, MAX_PENDING, MAX_WAITING};

/// `--max-memory`'s default: the buffers one served test may hold, bytes.
pub const DEFAULT_MAX_MEMORY: u64 = 1 << 30;
/// `--max-time`'s default, seconds.
pub use crate::spec::DEFAULT_MAX_TIME;

/// What `serve` runs with: the command line's flags (`cli::ServeArgs`), or code's own.
/// None: the default.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    /// Address to listen on (None: every address).
    pub bind: Option<std::net::IpAddr>,
    /// Control port.
    pub port: Option<u16>,
    /// Device the tests run on (`-d`).
    pub device: Option<String>,
    /// Its port (`-i`; 1).
    pub ib_port: Option<u8>,
    /// GID index (`-x`).
    pub gid_index: Option<u8>,
    /// Per-step timeout, seconds.
    pub timeout: u64,
    /// Tests to serve before exiting (None: for ever).
    pub count: Option<u64>,
    /// Largest buffer memory one served test may hold, bytes ([`DEFAULT_MAX_MEMORY`]).
    pub max_memory: Option<u64>,
    /// Longest a served test may run, seconds ([`DEFAULT_MAX_TIME`]).
    pub max_time: Option<u64>,
    /// The shared key's file (`--auth-key`).
    pub auth_key: Option<std::path::PathBuf>,
}

/// What every connection's thread needs: this side's settings and limits.
struct Config {
    local: Local,
    /// Largest [`crate::spec::TestSpec::buffer_bytes`] served.
    max_memory: u64,
    /// Longest a served test may wait on its client (and a duration run last).
    max_time: Duration,
}

/// What the threads tell the loop that owns the log.
enum Event {
    /// A new connection, and its address.
    Connected(TcpStream, SocketAddr),
    /// A line for the log.
    Line(String),
    /// A test ran: its line, and its error's kind if it failed.
    Tested { line: String, error: Option<ErrorKind> },
}

/// Serves tests until `--count` of them have run (or for ever), then returns 0 if
/// every one passed.
///
/// # Errors
/// A listener that cannot be opened, a key file that cannot be read; with `--count`,
/// a test that failed (the log says why), as the first failure's kind.
pub fn serve(args: &ServeOptions, out: &mut dyn Write) -> Result<u8, Error> {
    if args.count == Some(0) {
        return Err(Error::usage("--count 0: at least 1 test (or no --count: serve for ever)"));
    }
    let config = Arc::new(config(args)?);
    let listener = ControlListener::bind(args.bind, args.port.unwrap_or(DEFAULT_PORT))?;
    let addr = listener.local_addr().map_or_else(|| "?".to_string(), |a| a.to_string());
    let auth = if config.local.auth.is_some() { "; clients must hold --auth-key" } else { "" };
    log(
        out,
        &format!(
            "serving on {addr} (one test at a time, up to {} s and {} MiB of buffers{auth})",
            config.max_time.as_secs(),
            config.max_memory >> 20
        ),
    );
    let (events, incoming) = mpsc::channel();
    accept_in_background(listener.into_inner(), events.clone());
    let admission = Arc::new(admission::Admission::default());
    let (mut tests, mut first_failure) = (0u64, None);
    while args.count.is_none_or(|n| tests < n) {
        // The loop holds a sender itself: this never ends.
        let Ok(event) = incoming.recv() else { break };
        match event {
            Event::Connected(stream, addr) => {
                if let Some(line) = start_client(stream, addr, &admission, &config, &events) {
                    log(out, &line);
                }
            }
            Event::Line(line) => log(out, &line),
            Event::Tested { line, error } => {
                log(out, &line);
                tests += 1;
                first_failure = first_failure.or(error);
            }
        }
    }
    match first_failure {
        None => Ok(0),
        Some(kind) => {
            Err(Error::new(kind, format!("{tests} tests served, not all passed (see the log)")))
        }
    }
}

/// Hands a new connection to a thread of its own, if there is room. Returns a line for
/// the log: a connection closed for want of room, or one dropped for a flood.
fn start_client(
    stream: TcpStream,
    addr: SocketAddr,
    admission: &Arc<admission::Admission>,
    config: &Arc<Config>,
    events: &Sender<Event>,
) -> Option<String> {
    let Some(connection) = admission.connect() else {
        return Some(format!("{addr} closed: {MAX_CONNECTIONS} connections open"));
    };
    let (pending, dropped) = admission.arrive(&stream, addr);
    let (admission, config, events) = (Arc::clone(admission), Arc::clone(config), events.clone());
    let spawned = std::thread::Builder::new().name(format!("client {addr}")).spawn(move || {
        client::handle(stream, addr, (connection, pending), &admission, &config, &events);
    });
    match (spawned, dropped) {
        (Err(e), _) => Some(format!("{addr} closed: no thread for it ({e})")),
        (Ok(_), Some(d)) => {
            Some(format!("{d} dropped: {MAX_PENDING} connections owed their hello"))
        }
        (Ok(_), None) => None,
    }
}

fn config(args: &ServeOptions) -> Result<Config, Error> {
    let timeout = timeout(args.timeout)?;
    let max_memory = args.max_memory.unwrap_or(DEFAULT_MAX_MEMORY);
    if !(1 << 20..=MAX_BUFFERS).contains(&max_memory) {
        return Err(Error::usage(format!(
            "--max-memory {max_memory}: from 1M to {}M, the most any test may hold",
            MAX_BUFFERS >> 20
        )));
    }
    let max_time = crate::spec::rules::max_time(args.max_time.unwrap_or(DEFAULT_MAX_TIME))?;
    let local = Local {
        device: args.device.clone(),
        ib_port: args.ib_port.unwrap_or(1),
        gid_index: args.gid_index,
        port: args.port.unwrap_or(DEFAULT_PORT),
        bind: args.bind,
        timeout,
        connect_window: timeout,
        pin: Vec::new(),
        auth: args.auth_key.as_deref().map(AuthKey::load).transpose()?,
        // serve's log is its progress.
        quiet: true,
        counters: None,
        keep_samples: false,
        numa_node: None,
        // Each client's test on one measuring thread (a one-shot server takes --threads).
        threads: 1,
        // A client's --interval prints on the client, which sends.
        interval_lines: None,
        // serve runs each client's spec whole (engine::serve_client), never a one-shot's.
        follows_client: false,
        wait_forever: false,
        // Set per client's test from --max-time (client.rs), not from this.
        max_time: None,
    };
    Ok(Config { local, max_memory, max_time })
}

/// Accepts for ever on a thread of its own, handing each connection to the loop. The
/// thread ends with the process (`serve` returns only to exit).
fn accept_in_background(listener: TcpListener, events: Sender<Event>) {
    std::thread::spawn(move || loop {
        match listener.accept() {
            Ok((stream, addr)) => {
                if events.send(Event::Connected(stream, addr)).is_err() {
                    return;
                }
            }
            Err(e) => {
                // Out of descriptors, say: say so, and give the clients time to go.
                let line = format!("accepting: {e}");
                if events.send(Event::Line(line)).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    });
}

/// `3 sizes, 65536 B: 612.30 MiB/sec` or `2 B: t_typical 12.30 usec`: the last size.
pub fn summary(report: &RunReport) -> String {
    let n = report.results.len();
    let Some(last) = report.results.last() else { return "no sizes".into() };
    let what = match (&last.bw, &last.lat) {
        (Some(bw), _) => {
            format!("BW average {:.2} MiB/sec", bw_in_unit(bw.avg_bytes_per_sec, false))
        }
        (None, Some(lat)) => format!("t_typical {:.2} usec", lat.t_typical_us),
        (None, None) => "no figures".into(),
    };
    let sizes = if n > 1 { format!("{n} sizes, last ") } else { String::new() };
    format!("{sizes}{} B x {}: {what}", last.size, last.iterations)
}

fn log(out: &mut dyn Write, line: &str) {
    let _ = writeln!(out, "{} {}", utc_now(), one_line(line));
    let _ = out.flush();
}
