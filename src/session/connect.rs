//! Opening the control channel: the server's listener, the client's connect with
//! retries, and the heartbeat a side sends while its peer only waits.

use std::collections::VecDeque;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::auth::{self, AuthKey};
use super::protocol::{Channel, Message, ProtocolError, MAX_FRAME, MAX_HELLO};
use crate::error::{Error, ErrorKind};
use crate::perf::loops::Pulse;
use crate::spec::TestSpec;
use crate::transport::tcp::open_stream;

/// The server's control-channel listener.
pub struct ControlListener {
    listener: TcpListener,
    port: u16,
}

impl ControlListener {
    /// Listens on `bind` (every address when None) and `port`.
    ///
    /// # Errors
    /// The port is taken or the address is not local (kind `io`).
    pub fn bind(bind: Option<IpAddr>, port: u16) -> Result<Self, Error> {
        let ip = bind.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let listener = TcpListener::bind((ip, port))
            .map_err(|e| Error::io(format!("cannot listen on {ip} TCP port {port}: {e}")))?;
        // With port 0 the system picked one: name that one from now on.
        let port = listener.local_addr().map_or(port, |a| a.port());
        Ok(ControlListener { listener, port })
    }

    /// The socket, for a server that accepts on a thread of its own.
    pub fn into_inner(self) -> TcpListener {
        self.listener
    }

    /// The address listened on.
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Waits for one client, up to `wait` (or for ever), and returns its connection and
    /// address (read at accept: a client that resets at once still has one). A
    /// connection still queued when `wait` is over is not taken.
    ///
    /// # Errors
    /// No client in time (kind `peer_unreachable`), or the listener failing.
    pub fn accept(&self, wait: Option<Duration>) -> Result<(TcpStream, SocketAddr), Error> {
        let Some(wait) = wait else {
            self.listener.set_nonblocking(false).map_err(|e| self.failed(e))?;
            return self.listener.accept().map_err(|e| self.failed(e));
        };
        let deadline = Instant::now() + wait;
        loop {
            if Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::PeerUnreachable,
                    format!(
                        "no client connected to port {} within {} s (--timeout)",
                        self.port,
                        wait.as_secs()
                    ),
                ));
            }
            if let Some(accepted) = self.accept_now()? {
                return Ok(accepted);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A connection already queued, without waiting (the stream blocking, as usual).
    ///
    /// # Errors
    /// The listener failing.
    pub fn accept_now(&self) -> Result<Option<(TcpStream, SocketAddr)>, Error> {
        self.listener.set_nonblocking(true).map_err(|e| self.failed(e))?;
        match self.listener.accept() {
            Ok((s, peer)) => {
                s.set_nonblocking(false).map_err(|e| self.failed(e))?;
                Ok(Some((s, peer)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(self.failed(e)),
        }
    }

    fn failed(&self, e: std::io::Error) -> Error {
        Error::io(format!("accepting on port {}: {e}", self.port))
    }
}

/// Connections whose first words a one-shot server reads at once, at most; past it the
/// oldest is dropped. A real client's hello follows its connect within milliseconds.
pub const MAX_HELLOS: usize = 64;

/// The first connection on `listener` to say a proper hello (and, with `key`, prove it)
/// by `deadline`, each read within `read_bound` at most: a one-shot server's client. See
/// [`first_answer`].
///
/// # Errors
/// Nobody said hello by `deadline` (kind `peer_unreachable`, as
/// [`ControlListener::accept`]), or the listener failing.
pub fn first_hello(
    listener: &ControlListener,
    deadline: Instant,
    read_bound: Duration,
    key: Option<&AuthKey>,
    refused: impl FnMut(Refusal),
) -> Result<(Channel, TestSpec), Error> {
    let key = key.cloned();
    let read = move |stream, peer, wait: Duration| {
        handshake(stream, peer, wait.min(read_bound), key.as_ref())
    };
    first_answer(listener, deadline, read, refused)
}

/// The first connection on `listener` that `read` takes by `deadline` (rdmabench's hello,
/// perftest's version record: whatever a one-shot server waits for). Each connection is
/// read on a thread of its own under the same deadline, so a silent stray holds no place
/// before the real client; at most [`MAX_HELLOS`] are read at once (past it the oldest
/// is dropped). `read` returns None for a connection closed without a word; each
/// stray's refusal goes to `refused`; at the deadline the strays still being read are
/// shut down.
///
/// # Errors
/// Nobody was taken by `deadline` (kind `peer_unreachable`, as
/// [`ControlListener::accept`]), or the listener failing.
pub fn first_answer<T, R>(
    listener: &ControlListener,
    deadline: Instant,
    read: R,
    mut refused: impl FnMut(Refusal),
) -> Result<T, Error>
where
    T: Send + 'static,
    R: Fn(TcpStream, SocketAddr, Duration) -> Result<Option<T>, Refusal> + Clone + Send + 'static,
{
    let (done, results) = mpsc::channel();
    let mut reading: VecDeque<(u64, TcpStream)> = VecDeque::new();
    let mut next = 0u64;
    let found = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let port = listener.port;
            let why = format!("no client said hello on port {port} in time (--timeout)");
            break Err(Error::new(ErrorKind::PeerUnreachable, why));
        }
        if ffi::os::termination_signal().is_some() {
            // Ctrl-C (once the process watches for it): no client is coming.
            let why = format!("{} while waiting for a client", crate::error::STOPPED);
            break Err(Error::new(ErrorKind::PeerClosed, why));
        }
        match listener.accept_now() {
            Ok(Some((stream, peer))) => {
                if reading.len() >= MAX_HELLOS {
                    if let Some((_, oldest)) = reading.pop_front() {
                        let _ = oldest.shutdown(Shutdown::Both);
                    }
                }
                next += 1;
                if let Some(handle) = read_aside(stream, peer, left, read.clone(), (next, &done)) {
                    reading.push_back((next, handle));
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if let Ok((id, outcome)) = results.recv_timeout(left.min(Duration::from_millis(20))) {
            reading.retain(|(r, _)| *r != id);
            match outcome {
                Ok(Some(found)) => break Ok(found),
                Ok(None) => {}
                Err(r) => refused(r),
            }
        }
    };
    for (_, stray) in reading {
        let _ = stray.shutdown(Shutdown::Both);
    }
    found
}

/// What a one-shot server's `read` made of one connection: taken, closed without a word,
/// or refused.
type Answer<T> = Result<Option<T>, Refusal>;

/// Reads one connection (within `wait`) with `read` on a thread of its own, which reports
/// it on `done` as `id`. Returns a handle to shut the connection with; None if it could
/// not be read at all (no descriptor or thread to spare: it is closed).
fn read_aside<T, R>(
    stream: TcpStream,
    peer: SocketAddr,
    wait: Duration,
    read: R,
    (id, done): (u64, &mpsc::Sender<(u64, Answer<T>)>),
) -> Option<TcpStream>
where
    T: Send + 'static,
    R: FnOnce(TcpStream, SocketAddr, Duration) -> Result<Option<T>, Refusal> + Send + 'static,
{
    let handle = stream.try_clone().ok()?;
    let done = done.clone();
    let reader = move || {
        let _ = done.send((id, read(stream, peer, wait)));
    };
    std::thread::Builder::new().name(format!("hello {peer}")).spawn(reader).ok()?;
    Some(handle)
}

/// The server's side of a new connection: the client's hello, whole within `timeout`,
/// and with `key`, the proof that the client holds it. `None`: the client closed
/// without a word (a reachability check, as `compare` makes before its sweep).
///
/// # Errors
/// A client that does not say hello properly, or cannot prove it holds the key: it is
/// told why, and the refusal names its address.
pub fn handshake(
    stream: TcpStream,
    peer: SocketAddr,
    timeout: Duration,
    key: Option<&AuthKey>,
) -> Result<Option<(Channel, TestSpec)>, Refusal> {
    let refuse = |error: Error| Refusal { peer, error };
    let mut ch = Channel::new(stream, timeout).map_err(|e| refuse(e.into()))?;
    // A stranger's frames stay small until it is let in.
    ch.limit_frames(MAX_HELLO);
    let error = match ch.recv("hello") {
        Ok(Message::Hello { spec, auth: nonce, .. }) => {
            match auth::check_client(&mut ch, key, nonce.as_deref(), &spec, peer.ip()) {
                Ok(()) => {
                    ch.limit_frames(MAX_FRAME);
                    return Ok(Some((ch, spec)));
                }
                Err(e) => e,
            }
        }
        Err(ProtocolError::Closed { .. }) => return Ok(None),
        Ok(other) => {
            Error::refused(format!("control channel: expected hello, got {}", other.name()))
        }
        Err(e) => Error::from(e),
    };
    ch.send_error(&error);
    Err(refuse(error))
}

/// A client the server would not take, and why.
#[derive(Debug)]
pub struct Refusal {
    /// The client's address.
    pub peer: SocketAddr,
    /// Why.
    pub error: Error,
}

/// Connects the control channel to `host:port`, from `source` when given (else the
/// address the route chooses). A refused connection is retried until `window`, so a
/// client may start before its server; then one clear error.
///
/// # Errors
/// Kind `peer_unreachable`: the name does not resolve, or nobody answers.
pub fn connect(
    host: &str,
    port: u16,
    source: Option<IpAddr>,
    timeout: Duration,
    window: Duration,
) -> Result<TcpStream, Error> {
    let start = Instant::now();
    connect_retrying(host, port, source, timeout, window).map_err(|f| {
        let message = match f {
            ConnectFailure::Resolve(e) => format!("cannot resolve server '{host}': {e}"),
            ConnectFailure::NoAddress => format!("server '{host}' resolves to no address"),
            ConnectFailure::Io(e) => format!(
                "cannot reach the server at {host}:{port}: {e} (after {} s; is `rdmabench` running there, with -p {port}?)",
                start.elapsed().as_secs()
            ),
        };
        Error::new(ErrorKind::PeerUnreachable, message)
    })
}

/// Why [`connect_retrying`] gave up.
pub(crate) enum ConnectFailure {
    /// The name did not resolve.
    Resolve(std::io::Error),
    /// It resolved to no address.
    NoAddress,
    /// The last attempt's error.
    Io(std::io::Error),
}

/// How soon a refused connection is tried again: a server started beside its client
/// listens a moment later (a test pair, a lab), and each retry is one SYN and its RST.
const REFUSED_RETRY: Duration = Duration::from_millis(25);

/// Connects to `host:port` from `source` (if given), each attempt waiting up to
/// `per_try`; a refused connection (a server still starting) is retried every
/// [`REFUSED_RETRY`] for up to `window`.
pub(crate) fn connect_retrying(
    host: &str,
    port: u16,
    source: Option<IpAddr>,
    per_try: Duration,
    window: Duration,
) -> Result<TcpStream, ConnectFailure> {
    let addrs: Vec<_> = (host, port).to_socket_addrs().map_err(ConnectFailure::Resolve)?.collect();
    let start = Instant::now();
    let mut told = None;
    loop {
        let mut last = None;
        for addr in &addrs {
            match open_stream(addr, source, per_try) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && start.elapsed() < window
                    // Ctrl-C while waiting for a server: no more tries.
                    && ffi::os::termination_signal().is_none() =>
            {
                countdown(host, port, start.elapsed(), window, &mut told);
                std::thread::sleep(REFUSED_RETRY);
            }
            Some(e) => return Err(ConnectFailure::Io(e)),
            None => return Err(ConnectFailure::NoAddress),
        }
    }
}

/// A client waiting for its server says so on stderr, naming it, with the seconds left:
/// once refused for 3 s (a server still starting is not worth a line, nor is the short
/// wait of `compare` and `qualify`), then every 5 s.
fn countdown(host: &str, port: u16, waited: Duration, window: Duration, told: &mut Option<u64>) {
    let left = window.saturating_sub(waited).as_secs();
    let due = match *told {
        None => waited >= Duration::from_secs(3),
        Some(last) => last >= left + 5,
    };
    if due && left > 0 {
        eprintln!("rdmabench: no server at {host}:{port} yet (connection refused); retrying, {left} s left");
        *told = Some(left);
    }
}

/// While this side runs a size alone, its loop tells the waiting peer it is alive: at
/// once, then at most once a second (the loop calls it: see [`Pulse`]). The peer's wait
/// began before this side's set-up, so the first beat cannot wait a second. Each beat
/// first looks whether the peer closed the connection: a killed peer's kernel closes its
/// socket at once, but its QPs may only go quiet (soft-RoCE drops work for a QP that is
/// gone), and the loop would wait out its `--timeout` (a lab run: 30 s) for nothing.
/// A closed connection, or a failed send, ends the loop: the peer is gone.
pub struct Heartbeat<'a> {
    ch: &'a mut Channel,
    last: Option<Instant>,
    gone: bool,
}

impl<'a> Heartbeat<'a> {
    /// Beats on `ch`.
    pub fn new(ch: &'a mut Channel) -> Self {
        Heartbeat { ch, last: None, gone: false }
    }
}

impl Pulse for Heartbeat<'_> {
    fn alive(&mut self, now: Instant) -> bool {
        let due =
            self.last.is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_secs(1));
        if !self.gone && due {
            self.last = Some(now);
            self.gone = self.ch.peer_closed() || self.ch.send(&Message::Heartbeat).is_err();
        }
        !self.gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_sends_at_most_once_a_second_of_the_loop_s_time() {
        use std::io::Read;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        let mut ch = Channel::new(stream, Duration::from_secs(5)).unwrap();
        let mut beat = Heartbeat::new(&mut ch);
        let start = Instant::now();
        for ms in [0, 500, 900, 1000, 1200, 1900, 2100] {
            beat.alive(start + Duration::from_millis(ms));
        }
        drop(ch);
        // Beats at 0, 1000 and 2100 ms: one frame each, and nothing else.
        let mut got = Vec::new();
        peer.read_to_end(&mut got).unwrap();
        let one = super::super::protocol::encode(&serde_json::to_vec(&Message::Heartbeat).unwrap());
        assert_eq!(got, one.unwrap().repeat(3));
    }

    #[test]
    fn a_heartbeat_finds_a_peer_gone_at_its_next_beat_and_sends_no_more() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (peer, _) = listener.accept().unwrap();
        let mut ch = Channel::new(stream, Duration::from_secs(5)).unwrap();
        let mut beat = Heartbeat::new(&mut ch);
        let start = Instant::now();
        assert!(beat.alive(start), "the peer is there");
        drop(peer); // (its kernel closes the socket, as a killed peer's does)
        std::thread::sleep(Duration::from_millis(50));
        // Not yet due: no look, the loop goes on.
        assert!(beat.alive(start + Duration::from_millis(500)));
        assert!(!beat.alive(start + Duration::from_millis(1000)), "gone at the next beat");
        assert!(!beat.alive(start + Duration::from_millis(2500)), "and stays gone");
    }

    #[test]
    fn a_server_that_starts_late_is_reached_and_a_missing_one_is_not() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
            l.accept().map(drop)
        });
        let start = Instant::now();
        let got = connect_retrying(
            "127.0.0.1",
            port,
            None,
            Duration::from_secs(1),
            Duration::from_secs(5),
        );
        assert!(got.is_ok(), "refusals before the listener exists are retried");
        assert!(start.elapsed() >= Duration::from_millis(300));
        late.join().unwrap().unwrap();
        // Nobody ever listens: the window ends it, with the refusal as the reason.
        let start = Instant::now();
        let e =
            connect("127.0.0.1", port, None, Duration::from_secs(1), Duration::from_millis(300));
        let e = e.unwrap_err();
        assert_eq!(e.kind, ErrorKind::PeerUnreachable);
        assert!(e.message.contains("cannot reach the server at 127.0.0.1"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(3));
    }
}
