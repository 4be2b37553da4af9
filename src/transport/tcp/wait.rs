//! A TCP stream's waits: every read and write gives up when nothing moved for the
//! timeout, and, with an end (`serve --max-time`), at the end however the peer trickles
//! or keeps silent ([`TICK`]). Used by the connection ([`super`]) and its set-up.

use std::io::{self, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::error::RunLimit;
use crate::measure::Stopwatch;
use crate::transport::TransportError;

/// How long a socket waits at a time when the stream has an end: how late past its end
/// a stream notices it.
pub const TICK: Duration = Duration::from_millis(200);

/// Whether `e` is a socket's wait running out.
pub(super) fn waited(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// [`TransportError::Overtime`] once `end` has passed.
pub(super) fn past(end: Option<(Instant, RunLimit)>) -> Result<(), TransportError> {
    match end {
        Some((at, limit)) if Instant::now() >= at => Err(TransportError::Overtime { limit }),
        _ => Ok(()),
    }
}

/// A stream's wait ran out at a tick: fails past the end, or when nothing moved since
/// `quiet` (set at the first tick of a silence) for the whole timeout.
pub(super) fn ticked(
    quiet: &mut Option<Instant>,
    end: Option<(Instant, RunLimit)>,
    timeout: Duration,
    what: &str,
    e: &io::Error,
) -> Result<(), TransportError> {
    past(end)?;
    let now = Instant::now();
    let since = *quiet.get_or_insert(now.checked_sub(TICK).unwrap_or(now));
    if now.duration_since(since) >= timeout {
        return Err(broken(what, e, timeout));
    }
    Ok(())
}

/// Writes all of `buf`; fails when the socket had no room for `timeout`. Not
/// `write_all`: a write that has copied part of the message and then waited the whole
/// SO_SNDTIMEO for room returns that part, and the next write waits the timeout again,
/// so a peer that vanished mid-message (a cut link, a stopped process) took twice the
/// timeout to notice. A short write that took the timeout (less a tenth: the kernel
/// counts in jiffies) is that wait running out. Writes go in chunks of at most
/// [`SEND_CHUNK`], so a write that takes that long on a link that still moves would mean
/// under a chunk per timeout: nothing a benchmark can call moving.
///
/// With an `end`, the socket waits a [`TICK`] at a time: a short write or a wait that
/// ran out checks the end, and only the whole timeout without a byte moving fails.
pub(super) fn send_all(
    stream: &mut TcpStream,
    mut buf: &[u8],
    timeout: Duration,
    end: Option<(Instant, RunLimit)>,
) -> Result<(), TransportError> {
    let fail = |e: io::Error| broken("send", &e, timeout);
    let mut quiet = None;
    while !buf.is_empty() {
        let chunk = &buf[..buf.len().min(SEND_CHUNK)];
        // On the cycle counter: a clock read per message would be a system call where
        // the vDSO falls back (the lab), and only a short write asks the time.
        let started = Stopwatch::start();
        match stream.write(chunk) {
            Ok(0) => return Err(fail(io::ErrorKind::WriteZero.into())),
            Ok(n)
                if end.is_none()
                    && n < chunk.len()
                    && started.elapsed() >= timeout.mul_f64(0.9) =>
            {
                return Err(fail(io::ErrorKind::TimedOut.into()))
            }
            Ok(n) => {
                buf = &buf[n..];
                if n < chunk.len() && end.is_some() {
                    quiet = None;
                    past(end)?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if end.is_some() && waited(&e) => {
                ticked(&mut quiet, end, timeout, "send", &e)?;
            }
            Err(e) => return Err(fail(e)),
        }
    }
    Ok(())
}

/// Largest write [`send_all`] makes at once.
const SEND_CHUNK: usize = 1 << 20;

pub(super) fn broken(what: &str, e: &io::Error, timeout: Duration) -> TransportError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => TransportError::PeerSilent(format!(
            "TCP {what}: nothing moved for {} s: is the peer still there?",
            timeout.as_secs()
        )),
        io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::UnexpectedEof => TransportError::PeerClosed(format!(
            "TCP {what}: the peer closed the data connection ({e})"
        )),
        _ => TransportError::Broken(format!("TCP {what}: {e}")),
    }
}
