//! The control channel: versioned, typed, length-limited JSON messages over TCP, every
//! read under a timeout. docs/protocol.md documents the wire format and the order.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, RunLimit};
use crate::results::SizeResult;
use crate::spec::TestSpec;

/// Four bytes that open every frame.
pub const MAGIC: [u8; 4] = *b"RDMB";
/// Protocol version; a peer speaking another is refused with both numbers named.
/// 2: the hello carries the whole spec; errors carry their kind; each side describes
/// its environment after set-up. 3: with `--auth-key` the client proves itself first
/// (the challenge carries no proof; the server's proof follows the client's).
pub const VERSION: u16 = 3;
/// Largest payload accepted, bytes.
pub const MAX_FRAME: u32 = 1 << 20;
/// Largest payload a server accepts before the client is authenticated and its test
/// admitted (the hello, the proof): a spec of 64 sizes is a few KiB.
pub const MAX_HELLO: u32 = 64 << 10;

/// Every message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // one message at a time; boxing buys nothing
pub enum Message {
    /// Client → server: who I am and the test I want.
    Hello {
        /// `rdmabench 0.1.0`.
        tool: String,
        /// The test, whole: a server that serves any test runs exactly this.
        spec: TestSpec,
        /// With `--auth-key`: the client's nonce (hex), asking the server to prove it
        /// holds the key ([`super::auth`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<String>,
    },
    /// Server → client, to a hello with a nonce, when the server has `--auth-key`.
    Challenge {
        /// The server's nonce (hex).
        nonce: String,
    },
    /// Client → server, answering a challenge: the client's proof over both nonces; then
    /// server → client, once the client's holds: the server's.
    Proof {
        /// Hex HMAC-SHA256.
        proof: String,
    },
    /// Server → client: parameters agreed.
    Accept {
        /// `rdmabench 0.1.0`.
        tool: String,
    },
    /// Each way: how to reach this side's queue pairs and buffers.
    Endpoints {
        /// Path MTU this side will use, bytes (both use the smaller).
        mtu: u32,
        /// One backend endpoint record per QP.
        qps: Vec<serde_json::Value>,
    },
    /// Each way, after set-up: what this side runs on and with.
    Describe {
        /// Host, device or interface ([`crate::environment::Environment`]).
        environment: crate::environment::Environment,
        /// The parameters in effect on this side.
        params: crate::results::EffectiveParams,
    },
    /// Each way, before each size: a barrier.
    Ready {
        /// The size about to run.
        size: u64,
    },
    /// Client → server while a test runs: still alive.
    Heartbeat,
    /// After each size, from each side that measured.
    Result {
        /// What it measured.
        result: SizeResult,
    },
    /// Either way, instead of the expected message: why this side stops.
    Error {
        /// One line.
        message: String,
        /// Why, in a word (absent from peers that do not say).
        #[serde(default)]
        kind: Option<ErrorKind>,
    },
    /// Each way: the run is over.
    Done,
}

impl Message {
    /// Name for messages about the protocol itself.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Challenge { .. } => "challenge",
            Message::Proof { .. } => "proof",
            Message::Accept { .. } => "accept",
            Message::Endpoints { .. } => "endpoints",
            Message::Describe { .. } => "describe",
            Message::Ready { .. } => "ready",
            Message::Heartbeat => "heartbeat",
            Message::Result { .. } => "result",
            Message::Error { .. } => "error",
            Message::Done => "done",
        }
    }
}

/// Why the control channel failed.
#[derive(Debug)]
pub enum ProtocolError {
    /// Nothing arrived in time.
    Timeout {
        /// What we waited for.
        waiting_for: &'static str,
        /// How long.
        after: Duration,
    },
    /// The peer closed the connection.
    Closed {
        /// What we waited for.
        waiting_for: &'static str,
    },
    /// The peer closed the connection while we were sending.
    Gone,
    /// The session ran past the end this side set for it ([`Channel::end_by`]).
    Overtime {
        /// The limit, from the session's start.
        limit: RunLimit,
    },
    /// This side was stopped by a termination signal ([`Channel::stop_on_signal`]).
    Stopped {
        /// What we waited for.
        waiting_for: &'static str,
    },
    /// Not our protocol, another version, or a malformed message.
    Invalid(String),
    /// The peer sent an error message.
    Peer(Error),
    /// A socket error.
    Io(io::Error),
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolError::Timeout { waiting_for, after } => {
                write!(
                    f,
                    "the peer sent no whole message for {} s (waiting for {waiting_for})",
                    after.as_secs()
                )
            }
            ProtocolError::Closed { waiting_for } => {
                write!(f, "the peer closed the control connection (waiting for {waiting_for})")
            }
            ProtocolError::Gone => f.write_str("the peer closed the control connection"),
            ProtocolError::Overtime { limit } => write!(f, "{} {limit}", crate::error::OVERTIME),
            ProtocolError::Stopped { waiting_for } => {
                write!(f, "{} (waiting for {waiting_for})", crate::error::STOPPED)
            }
            ProtocolError::Invalid(why) => write!(f, "control channel: {why}"),
            ProtocolError::Peer(e) => write!(f, "the peer stopped: {e}"),
            ProtocolError::Io(e) => write!(f, "control channel: {e}"),
        }
    }
}

impl std::error::Error for ProtocolError {}

impl From<ProtocolError> for Error {
    fn from(e: ProtocolError) -> Self {
        let kind = match &e {
            ProtocolError::Timeout { .. } => ErrorKind::PeerSilent,
            // A side stopped by a signal goes away: to its peer, the peer's leaving.
            ProtocolError::Closed { .. } | ProtocolError::Gone | ProtocolError::Stopped { .. } => {
                ErrorKind::PeerClosed
            }
            ProtocolError::Invalid(_) | ProtocolError::Overtime { .. } => ErrorKind::Refused,
            // The peer's own reason: its kind, when it says one.
            ProtocolError::Peer(peer) => peer.kind,
            ProtocolError::Io(_) => ErrorKind::Io,
        };
        let status = match &e {
            ProtocolError::Peer(peer) => peer.status.clone(),
            _ => None,
        };
        Error { status, ..Error::new(kind, e.to_string()) }
    }
}

/// How often a wait of a channel that [stops on a signal](Channel::stop_on_signal) looks
/// for one.
pub const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// One end of the control channel.
pub struct Channel {
    stream: TcpStream,
    timeout: Duration,
    /// No message is waited for past this, heartbeats or not, with the limit it came from.
    end: Option<(Instant, RunLimit)>,
    /// Largest payload read now: [`MAX_FRAME`], or less while a stranger is let in.
    max_frame: u32,
    /// Whether a termination signal ends a wait ([`Channel::stop_on_signal`]).
    stop_on_signal: bool,
}

impl Channel {
    /// Wraps a connected stream; every read waits at most `timeout`.
    ///
    /// # Errors
    /// Setting socket options failing.
    pub fn new(stream: TcpStream, timeout: Duration) -> Result<Self, ProtocolError> {
        stream.set_nodelay(true).map_err(ProtocolError::Io)?;
        stream.set_read_timeout(Some(timeout)).map_err(ProtocolError::Io)?;
        stream.set_write_timeout(Some(timeout)).map_err(ProtocolError::Io)?;
        Ok(Channel { stream, timeout, end: None, max_frame: MAX_FRAME, stop_on_signal: false })
    }

    /// From now on a termination signal (once the process watches for them) ends any wait
    /// for the peer within [`SIGNAL_POLL`], with [`ProtocolError::Stopped`]: a one-shot
    /// server stopped while its client measures ends at once, with what it has.
    pub fn stop_on_signal(&mut self) {
        self.stop_on_signal = true;
    }

    /// Waits `timeout` for each message from now on (the handshake may have had less).
    ///
    /// # Errors
    /// Setting the socket's write timeout failing.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), ProtocolError> {
        self.stream.set_write_timeout(Some(timeout)).map_err(ProtocolError::Io)?;
        self.timeout = timeout;
        Ok(())
    }

    /// How long each message is waited for.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Reads no payload over `max` bytes (at most [`MAX_FRAME`]) from now on.
    pub fn limit_frames(&mut self, max: u32) {
        self.max_frame = max.min(MAX_FRAME);
    }

    /// Waits for no message past `limit` from now, however the peer beats: a served
    /// test cannot hold the server longer.
    pub fn end_by(&mut self, limit: RunLimit) {
        self.end = Some((Instant::now() + limit.after, limit));
    }

    /// Sends one message as one frame.
    ///
    /// # Errors
    /// The socket failing.
    pub fn send(&mut self, msg: &Message) -> Result<(), ProtocolError> {
        let payload = serde_json::to_vec(msg).map_err(|e| ProtocolError::Invalid(e.to_string()))?;
        let frame = encode(&payload)?;
        self.stream.write_all(&frame).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => ProtocolError::Gone,
            _ => ProtocolError::Io(e),
        })
    }

    /// Receives the next message other than a heartbeat. The whole message must arrive
    /// within the timeout, heartbeats or not: a peer that trickles bytes, or only
    /// beats, is as silent as one that sends nothing. An `Error` message from the peer
    /// becomes [`ProtocolError::Peer`].
    ///
    /// # Errors
    /// Timeout, closed connection, foreign or malformed frames, the peer's error.
    pub fn recv(&mut self, waiting_for: &'static str) -> Result<Message, ProtocolError> {
        self.recv_until(waiting_for, false)
    }

    /// As [`recv`](Self::recv), while the peer works alone (a client measuring while
    /// the server idles): each heartbeat starts the timeout again.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn recv_while_peer_works(
        &mut self,
        waiting_for: &'static str,
    ) -> Result<Message, ProtocolError> {
        self.recv_until(waiting_for, true)
    }

    fn recv_until(
        &mut self,
        waiting_for: &'static str,
        beats_extend: bool,
    ) -> Result<Message, ProtocolError> {
        let mut deadline = Instant::now() + self.timeout;
        loop {
            let result = match self.end {
                Some((end, limit)) if end < deadline => match self.recv_any(waiting_for, end) {
                    Err(ProtocolError::Timeout { .. }) => Err(ProtocolError::Overtime { limit }),
                    other => other,
                },
                _ => self.recv_any(waiting_for, deadline),
            };
            match result? {
                Message::Heartbeat if beats_extend => deadline = Instant::now() + self.timeout,
                Message::Heartbeat => {}
                Message::Error { message, kind } => {
                    let kind = kind.unwrap_or(ErrorKind::Refused);
                    return Err(ProtocolError::Peer(Error::new(kind, message)));
                }
                other => return Ok(other),
            }
        }
    }

    fn recv_any(
        &mut self,
        waiting_for: &'static str,
        deadline: Instant,
    ) -> Result<Message, ProtocolError> {
        let mut header = [0u8; HEADER_LEN];
        self.read_exact(&mut header, waiting_for, deadline)?;
        let len = decode_header(&header)?;
        if len > self.max_frame {
            return Err(ProtocolError::Invalid(format!(
                "a {len}-byte {waiting_for} is over the {}-byte limit",
                self.max_frame
            )));
        }
        let mut payload = vec![0u8; len as usize];
        self.read_exact(&mut payload, waiting_for, deadline)?;
        serde_json::from_slice(&payload)
            .map_err(|e| ProtocolError::Invalid(format!("malformed {waiting_for}: {e}")))
    }

    /// Fills `buf` by `deadline`, however the bytes come.
    fn read_exact(
        &mut self,
        buf: &mut [u8],
        waiting_for: &'static str,
        deadline: Instant,
    ) -> Result<(), ProtocolError> {
        let timeout = ProtocolError::Timeout { waiting_for, after: self.timeout };
        let mut filled = 0;
        while filled < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timeout);
            }
            let wait = if self.stop_on_signal { left.min(SIGNAL_POLL) } else { left };
            self.stream.set_read_timeout(Some(wait)).map_err(ProtocolError::Io)?;
            match self.stream.read(&mut buf[filled..]) {
                Ok(0) => return Err(ProtocolError::Closed { waiting_for }),
                Ok(n) => filled += n,
                Err(e) => match e.kind() {
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut if self.stop_on_signal => {
                        if ffi::os::termination_signal().is_some() {
                            return Err(ProtocolError::Stopped { waiting_for });
                        }
                    }
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => return Err(timeout),
                    io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe => {
                        return Err(ProtocolError::Closed { waiting_for })
                    }
                    _ => return Err(ProtocolError::Io(e)),
                },
            }
        }
        Ok(())
    }

    /// This side's IPv4 address on the control connection: on RoCE, the GID holding it
    /// is the one to use, on both sides alike.
    pub fn local_ipv4(&self) -> Option<std::net::Ipv4Addr> {
        match self.stream.local_addr().ok()?.ip() {
            std::net::IpAddr::V4(a) => Some(a),
            std::net::IpAddr::V6(a) => a.to_ipv4_mapped(),
        }
    }

    /// This side's address on the control connection (the TCP data streams listen
    /// there), IPv4-mapped IPv6 as IPv4.
    pub fn local_ip(&self) -> Option<std::net::IpAddr> {
        Some(self.stream.local_addr().ok()?.ip().to_canonical())
    }

    /// This side's port on the control connection.
    pub fn local_port(&self) -> Option<u16> {
        Some(self.stream.local_addr().ok()?.port())
    }

    /// This side's address of the connection.
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.stream.local_addr().ok()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.stream.peer_addr().ok()
    }

    /// Whether the peer has sent something (or closed): a peer that finished a duration
    /// run says so this way. Never blocks.
    pub fn has_pending(&self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut b = [0u8; 1];
        let r = self.stream.peek(&mut b);
        let _ = self.stream.set_nonblocking(false);
        r.is_ok()
    }

    /// Whether the peer has closed the connection (or reset it). Never blocks.
    pub fn peer_closed(&self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut b = [0u8; 1];
        let r = self.stream.peek(&mut b);
        let _ = self.stream.set_nonblocking(false);
        match r {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
            ),
        }
    }

    /// Whether the peer closes the connection within `wait` (polled; an error path's
    /// question: a peer killed mid-run may fail this side's RDMA work before its
    /// socket's close arrives).
    pub fn peer_closes_within(&self, wait: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + wait;
        loop {
            if self.peer_closed() {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Tells the peer why we stop; errors are ignored (it may be gone already). An
    /// error that is the peer's own (it closed, it went silent) is not echoed back.
    pub fn send_error(&mut self, e: &Error) {
        let _ = self.send(&Message::Error { message: e.message.clone(), kind: Some(e.kind) });
    }
}

/// A frame: magic, version (u16 BE), reserved (u16), length (u32 BE), JSON payload.
pub fn encode(payload: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    let len = u32::try_from(payload.len()).ok().filter(|&l| l <= MAX_FRAME).ok_or_else(|| {
        ProtocolError::Invalid(format!("a {}-byte message is over the limit", payload.len()))
    })?;
    let mut frame = Vec::with_capacity(HEADER_LEN + payload.len());
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&VERSION.to_be_bytes());
    frame.extend_from_slice(&[0, 0]);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(payload);
    Ok(frame)
}

/// Frame header length: magic (4), version (2), reserved (2), payload length (4).
pub const HEADER_LEN: usize = 12;

/// Checks a frame header; returns the payload length.
pub fn decode_header(h: &[u8; HEADER_LEN]) -> Result<u32, ProtocolError> {
    if h[..4] != MAGIC {
        return Err(ProtocolError::Invalid(
            "the peer does not speak rdmabench's protocol (another service on this port? perftest is spoken to with --perftest)"
                .into(),
        ));
    }
    let version = u16::from_be_bytes([h[4], h[5]]);
    if version != VERSION {
        return Err(ProtocolError::Invalid(format!(
            "protocol version mismatch: this side speaks {VERSION}, the peer {version} (run the same rdmabench release on both sides)"
        )));
    }
    let len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
    if len > MAX_FRAME {
        return Err(ProtocolError::Invalid(format!(
            "a {len}-byte message is over the {MAX_FRAME}-byte limit"
        )));
    }
    Ok(len)
}

/// Names every parameter the two sides must agree on that differs:
/// `sizes: client [65536], server [4096]`.
pub fn mismatches(client: &TestSpec, server: &TestSpec) -> Vec<String> {
    let (a, b) = (client.agreement(), server.agreement());
    // Keys of both sides: a key only one side has (RDMA vs TCP) still differs.
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let shown = |m: &serde_json::Map<String, serde_json::Value>, k: &String| match m.get(k) {
        Some(v) => v.to_string(),
        None => "(none)".into(),
    };
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k}{}: client {}, server {}", flag(k), shown(&a, k), shown(&b, k)))
        .collect()
}

/// The flag that sets an agreed parameter, as ` (-P)` after its name.
fn flag(key: &str) -> &'static str {
    match key {
        "sizes" => " (-s/-a)",
        "run" => " (-n/-D/-f)",
        "validate" => " (--validate)",
        "backend" => " (--backend)",
        "service" => " (-c)",
        "qps" => " (-q)",
        "bidirectional" => " (-b)",
        "rdma_cm" => " (-R)",
        "atomic_type" => " (-A)",
        "run_infinitely" => " (--run_infinitely)",
        "reversed" => " (--reversed)",
        "immediate" => " (--write_with_imm/--send_with_imm)",
        "streams" => " (-P)",
        "window" => " (-w)",
        "nodelay" => " (-N)",
        _ => "",
    }
}

#[cfg(test)]
mod tests;
