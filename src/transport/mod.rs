//! The one interface every test loop is written against, whatever moves the bytes:
//! verbs, NetworkDirect or TCP.
//!
//! A [`Transport`] is an opened adapter. It [`prepare`](Transport::prepare)s a
//! connection — queue pair, completion queue, registered buffer — and describes it in
//! an [`Transport::Endpoint`], the record the two sides exchange out of band (over the
//! control channel, or through rdma_cm / an ND connector). [`connect`](Transport::connect)
//! finishes it with the peer's record. The resulting [`Connection`] posts
//! [`WorkRequest`]s that name ranges of the local buffer and of the peer's, and polls
//! [`Completion`]s into a caller-provided slice.
//!
//! What a backend cannot do is in its [`Capabilities`]; test loops check them once, up
//! front ([`Capabilities::check`]), and never test mode flags while running.

mod error;
pub mod nd;
pub mod tcp;
#[cfg(target_os = "linux")]
pub mod verbs;

pub use error::TransportError;

use std::fmt;
use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};

/// Immediate value that tells a receiver the sender is finished (duration runs).
pub const END_IMM: u32 = 0xFFFF_FFFF;

/// Immediate value of every measured message with `--write_with_imm` or
/// `--send_with_imm` ("RDMB"): never [`END_IMM`].
pub const DATA_IMM: u32 = 0x5244_4D42;

/// What a backend can do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Backend name as users see it: `verbs`, `NetworkDirect`, `TCP`.
    pub backend: &'static str,
    /// Send/receive.
    pub send: bool,
    /// One-sided RDMA write.
    pub rdma_write: bool,
    /// One-sided RDMA read.
    pub rdma_read: bool,
    /// Fetch-and-add and compare-and-swap.
    pub atomics: bool,
    /// 32-bit immediate data on sends and writes.
    pub immediate: bool,
    /// Largest inline payload, bytes (0: none).
    pub max_inline: u32,
    /// Largest message, bytes.
    pub max_message: u64,
    /// Bytes a receive buffer needs beyond the payload (UD: the 40-byte GRH).
    pub recv_overhead: u32,
    /// Completion events (`-e`) rather than busy polling only.
    pub events: bool,
}

/// One operation a test posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Send, consuming a receive at the peer.
    Send,
    /// Send with immediate data.
    SendImm(u32),
    /// RDMA write into the peer's buffer.
    Write,
    /// RDMA write with immediate data, consuming a receive at the peer.
    WriteImm(u32),
    /// RDMA read from the peer's buffer.
    Read,
    /// 64-bit fetch-and-add at the remote offset; the old value lands locally.
    FetchAdd(u64),
    /// 64-bit compare-and-swap at the remote offset; the old value lands locally.
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// Replacement.
        swap: u64,
    },
}

impl Op {
    /// The operation's name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::SendImm(_) => "send with immediate",
            Op::Write => "RDMA write",
            Op::WriteImm(_) => "RDMA write with immediate",
            Op::Read => "RDMA read",
            Op::FetchAdd(_) => "fetch-and-add",
            Op::CompareSwap { .. } => "compare-and-swap",
        }
    }
}

impl Capabilities {
    /// Whether `op` (of `len` bytes, `inline` or not) is possible here; checked once
    /// before a test starts.
    ///
    /// # Errors
    /// [`TransportError::Unsupported`] naming the operation and the backend.
    pub fn check(&self, op: &Op, len: u64, inline: bool) -> Result<(), TransportError> {
        match self.lacks(op, len, inline) {
            Some((_, message)) => Err(TransportError::Unsupported(message)),
            None => Ok(()),
        }
    }

    /// What these connections lack for `op` on messages of `len` bytes (`inline`: sent
    /// inline): `atomics` (or the operation's name, `immediate data`), `message size` or
    /// `inline size`, with the line that says so; None when they can.
    pub fn lacks(&self, op: &Op, len: u64, inline: bool) -> Option<(&'static str, String)> {
        let (supported, what) = match op {
            Op::Send => (self.send, op.name()),
            Op::SendImm(_) => (self.send && self.immediate, "immediate data"),
            Op::Write => (self.rdma_write, op.name()),
            Op::WriteImm(_) => (self.rdma_write && self.immediate, "immediate data"),
            Op::Read => (self.rdma_read, op.name()),
            Op::FetchAdd(_) | Op::CompareSwap { .. } => (self.atomics, "atomics"),
        };
        if !supported {
            return Some((what, format!("{what} is not supported by {}", self.backend)));
        }
        if len > self.max_message {
            let m = format!(
                "{len}-byte messages exceed {}'s limit of {} bytes",
                self.backend, self.max_message
            );
            return Some(("message size", m));
        }
        if inline && len > u64::from(self.max_inline) {
            let m = format!(
                "{len} bytes inline exceed the {} bytes {} allows",
                self.max_inline, self.backend
            );
            return Some(("inline size", m));
        }
        None
    }
}

/// One work request: an operation over `len` bytes at `local_offset` of the local
/// buffer and, for one-sided operations, `remote_offset` of the peer's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkRequest {
    /// Returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: Op,
    /// Start in the local buffer.
    pub local_offset: usize,
    /// Bytes (8 for atomics).
    pub len: u32,
    /// Start in the peer's buffer (one-sided operations).
    pub remote_offset: u64,
    /// Ask for a completion.
    pub signaled: bool,
    /// Send the payload inline.
    pub inline: bool,
}

/// Kind of completed work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CompletionKind {
    /// A send.
    #[default]
    Send,
    /// An RDMA write.
    Write,
    /// An RDMA read.
    Read,
    /// An atomic.
    Atomic,
    /// A receive (of a send).
    Recv,
    /// A receive consumed by a write with immediate.
    RecvWriteImm,
    /// Anything else the backend reports.
    Other,
}

impl CompletionKind {
    /// A receive consumed by a send or by a write with immediate data.
    #[inline]
    pub fn is_receive(self) -> bool {
        matches!(self, CompletionKind::Recv | CompletionKind::RecvWriteImm)
    }
}

/// How work ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Status {
    /// It completed.
    #[default]
    Success,
    /// It failed.
    Failed(Failure),
}

/// A failed completion's status: the backend's code, and the backend's way of naming
/// it (`IBV_WC_REM_ACCESS_ERR`, `ND_ACCESS_VIOLATION`) and saying what it means, looked
/// up when it is reported. A completion stays small: the loops move one on every
/// operation.
#[derive(Clone, Copy)]
pub struct Failure {
    /// Backend status code.
    pub code: u32,
    describe: fn(u32) -> (&'static str, &'static str),
}

impl Failure {
    /// A failure with `code`, named by `describe` (name, meaning).
    pub fn new(code: u32, describe: fn(u32) -> (&'static str, &'static str)) -> Self {
        Failure { code, describe }
    }
    /// The backend's name of the status.
    pub fn name(&self) -> &'static str {
        (self.describe)(self.code).0
    }
    /// What it means.
    pub fn meaning(&self) -> &'static str {
        (self.describe)(self.code).1
    }
}

impl PartialEq for Failure {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.name() == other.name()
    }
}

impl Eq for Failure {}

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.code)
    }
}

/// A completion, backend-neutral.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: Status,
    /// What completed (meaningful on success only: failed completions carry no
    /// opcode).
    pub kind: CompletionKind,
    /// Bytes received, or read.
    pub byte_len: u32,
    /// Immediate data, if any.
    pub imm: Option<u32>,
}

impl Completion {
    /// Whether it succeeded.
    pub fn is_success(&self) -> bool {
        self.status == Status::Success
    }
}

/// A completion as a backend's [`poll`](Connection::poll) leaves it: each backend's own
/// record (verbs: the provider's `ibv_wc` itself), read through these accessors, so a
/// poll converts nothing and a loop reads only what it needs.
pub trait Polled: Default {
    /// The work request's id.
    fn wr_id(&self) -> u64;
    /// Outcome.
    fn status(&self) -> Status;
    /// A receive was consumed (a send's, or a write's with immediate data).
    fn is_receive(&self) -> bool;
    /// Immediate data, if any.
    fn imm(&self) -> Option<u32>;
    /// Everything, backend-neutral.
    fn completion(&self) -> Completion;
}

impl Polled for Completion {
    fn wr_id(&self) -> u64 {
        self.wr_id
    }
    fn status(&self) -> Status {
        self.status
    }
    fn is_receive(&self) -> bool {
        self.kind.is_receive()
    }
    fn imm(&self) -> Option<u32> {
        self.imm
    }
    fn completion(&self) -> Completion {
        *self
    }
}

/// Sizes and modes of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// Registered buffer, bytes.
    pub buf_len: usize,
    /// Connection service (perftest's `-c`).
    pub service: Service,
    /// Send queue depth (`-t`).
    pub tx_depth: u32,
    /// Receive queue depth (`-r`).
    pub rx_depth: u32,
    /// Inline size wanted (`-I`).
    pub max_inline: u32,
    /// Completion events instead of busy polling (`-e`).
    pub events: bool,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            buf_len: 65536,
            service: Service::Rc,
            tx_depth: 128,
            rx_depth: 512,
            max_inline: 0,
            events: false,
        }
    }
}

/// The RDMA interface a test runs over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Linux ibverbs.
    #[default]
    Verbs,
    /// Windows NetworkDirect (NDSPI v2).
    Nd,
}

impl Backend {
    /// The platform's own: NetworkDirect on Windows, verbs elsewhere.
    pub fn native() -> Backend {
        if cfg!(windows) {
            Backend::Nd
        } else {
            Backend::Verbs
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Verbs => "verbs",
            Backend::Nd => "NetworkDirect",
        }
    }

    /// Whether it is verbs (the field is left out of the hello then, as before ND).
    pub fn is_verbs(&self) -> bool {
        *self == Backend::Verbs
    }
}

/// Transport service (perftest's `-c RC|UC|UD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Service {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl Service {
    /// `RC`, `UC`, `UD`.
    pub fn name(self) -> &'static str {
        match self {
            Service::Rc => "RC",
            Service::Uc => "UC",
            Service::Ud => "UD",
        }
    }
}

/// An opened adapter that makes connections.
pub trait Transport {
    /// A connection after [`prepare`](Self::prepare), before the peer is known.
    type Prepared;
    /// A connected connection.
    type Connection: Connection;
    /// What one side tells the other to connect (queue pair address, buffer and key).
    type Endpoint: Serialize + DeserializeOwned + Clone + fmt::Debug;

    /// What this adapter can do.
    fn capabilities(&self) -> Capabilities;

    /// Allocates a connection's resources; returns them with the record for the peer.
    ///
    /// # Errors
    /// Resource allocation failing (limits, memory lock limit).
    fn prepare(
        &self,
        cfg: &ConnectionConfig,
    ) -> Result<(Self::Prepared, Self::Endpoint), TransportError>;

    /// Connects a prepared connection to the peer described by `peer`.
    ///
    /// # Errors
    /// The peer's record not fitting (other service, unreachable address) or the
    /// transition failing.
    fn connect(
        &self,
        prepared: Self::Prepared,
        peer: &Self::Endpoint,
    ) -> Result<Self::Connection, TransportError>;
}

/// A connected endpoint: what test loops drive.
pub trait Connection {
    /// Whether [`poll`](Self::poll) blocks until a posted receive is complete (up to the
    /// connection's timeout) instead of returning 0 at once: a TCP stream reads as a
    /// receiver does. A loop over such a connection cannot look at anything else
    /// between messages, so each one runs in a thread of its own and ends by its
    /// sender's end of stream.
    const BLOCKING_POLL: bool = false;

    /// What it can do.
    fn capabilities(&self) -> &Capabilities;

    /// The local registered buffer.
    fn local(&self) -> &[u8];

    /// The local registered buffer, for filling before posting.
    fn local_mut(&mut self) -> &mut [u8];

    /// Reads one byte of the local buffer as the peer left it (no caching) until it is
    /// `expect`, at most `reads` times: what a write ping-pong spins on. The reads left
    /// when one saw it, counting that one (`reads` when the first did), or 0 when none
    /// did.
    fn wait_u8(&self, offset: usize, expect: u8, reads: u32) -> u32;

    /// Writes one byte of the local buffer: what a write ping-pong changes in its
    /// message before each post.
    fn store_u8(&mut self, offset: usize, value: u8) {
        self.local_mut()[offset] = value;
    }

    /// Posts one work request.
    ///
    /// # Errors
    /// Ranges outside either buffer, an operation the backend cannot do, a full queue.
    fn post(&mut self, wr: &WorkRequest) -> Result<(), TransportError>;

    /// Posts several work requests as one list (perftest's `-l`): verbs links them
    /// into one `ibv_post_send` call. The default posts them one by one.
    ///
    /// # Errors
    /// As [`post`](Self::post); requests before the refused one may have been posted.
    fn post_list(&mut self, wrs: &[WorkRequest]) -> Result<(), TransportError> {
        for wr in wrs {
            self.post(wr)?;
        }
        Ok(())
    }

    /// A request checked (and, where the backend can, encoded) once by
    /// [`prepare`](Self::prepare), then posted again and again by
    /// [`post_prepared`](Self::post_prepared) with a new `wr_id`: a latency loop's one
    /// request, as perftest re-posts its one work request.
    type Prepared;

    /// Checks `wr` and encodes it for [`post_prepared`](Self::post_prepared). Prepare
    /// once the connection is complete: a request holds the peer's buffer as it was.
    ///
    /// # Errors
    /// As [`post`](Self::post), before anything is posted.
    fn prepare(&mut self, wr: &WorkRequest) -> Result<Self::Prepared, TransportError>;

    /// Posts `req` with `wr_id` and `signaled` in place of what it was prepared with.
    ///
    /// # Errors
    /// A full queue, a connection that broke.
    fn post_prepared(
        &mut self,
        req: &mut Self::Prepared,
        wr_id: u64,
        signaled: bool,
    ) -> Result<(), TransportError>;

    /// Posts a receive of up to `len` payload bytes at `offset` of the local buffer
    /// (plus [`Capabilities::recv_overhead`] in front, on UD).
    ///
    /// # Errors
    /// A range outside the buffer, a full receive queue.
    fn post_recv(&mut self, wr_id: u64, offset: usize, len: u32) -> Result<(), TransportError>;

    /// A receive checked (and, where the backend can, encoded) once by
    /// [`prepare_recv`](Self::prepare_recv), then posted again and again by
    /// [`post_prepared_recv`](Self::post_prepared_recv) with a new `wr_id`: a send
    /// latency loop's repost of the one receive it consumed.
    type PreparedRecv;

    /// Checks a receive as [`post_recv`](Self::post_recv) would, for
    /// [`post_prepared_recv`](Self::post_prepared_recv).
    ///
    /// # Errors
    /// As [`post_recv`](Self::post_recv), before anything is posted.
    fn prepare_recv(
        &mut self,
        offset: usize,
        len: u32,
    ) -> Result<Self::PreparedRecv, TransportError>;

    /// Posts `recv` with `wr_id`.
    ///
    /// # Errors
    /// A full receive queue, a connection that broke.
    fn post_prepared_recv(
        &mut self,
        recv: &mut Self::PreparedRecv,
        wr_id: u64,
    ) -> Result<(), TransportError>;

    /// What [`poll`](Self::poll) fills.
    type Completion: Polled;

    /// Moves finished work into `out`; returns how many. Allocates nothing. Returns
    /// at once, unless [`BLOCKING_POLL`](Self::BLOCKING_POLL).
    ///
    /// # Errors
    /// The completion queue failing (overrun).
    fn poll(&mut self, out: &mut [Self::Completion]) -> Result<usize, TransportError>;

    /// Arms completion events: the next completion will wake [`wait`](Self::wait).
    /// Poll once more after arming, then wait: a completion that arrived before the
    /// arm does not fire an event.
    ///
    /// # Errors
    /// Events not enabled for this connection.
    fn arm(&mut self) -> Result<(), TransportError>;

    /// Waits up to `timeout` for the armed event; `false` on timeout. Poll afterwards.
    ///
    /// # Errors
    /// Events not enabled for this connection, or the wait failing.
    fn wait(&mut self, timeout: Duration) -> Result<bool, TransportError>;

    /// `Ok` while the connection can carry work; an error naming the state otherwise
    /// (a queue pair that an error completion moved to ERROR).
    ///
    /// # Errors
    /// The state, or the query failing.
    fn check_state(&self) -> Result<(), TransportError>;
}

/// A receive as its place in the local buffer: the prepared receive of a backend with
/// nothing to encode ahead (each post checks the range again).
#[derive(Clone, Copy, Debug)]
pub struct RecvRange {
    /// Where the payload lands.
    pub offset: usize,
    /// Its largest length.
    pub len: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nd_like() -> Capabilities {
        Capabilities {
            backend: "NetworkDirect",
            send: true,
            rdma_write: true,
            rdma_read: true,
            atomics: false,
            immediate: false,
            max_inline: 64,
            max_message: 1 << 30,
            recv_overhead: 0,
            events: true,
        }
    }

    #[test]
    fn unsupported_operations_name_what_and_where() {
        let caps = nd_like();
        assert!(caps.check(&Op::Write, 65536, false).is_ok());
        assert!(caps.check(&Op::Read, 8, false).is_ok());
        let err = caps.check(&Op::FetchAdd(1), 8, false).unwrap_err();
        assert_eq!(err.to_string(), "atomics is not supported by NetworkDirect");
        let err = caps.check(&Op::WriteImm(3), 8, false).unwrap_err();
        assert_eq!(err.to_string(), "immediate data is not supported by NetworkDirect");
        let err = caps.check(&Op::Send, 2 << 30, false).unwrap_err();
        assert!(err.to_string().contains("exceed NetworkDirect's limit"), "{err}");
        let err = caps.check(&Op::Send, 65, true).unwrap_err();
        assert_eq!(err.to_string(), "65 bytes inline exceed the 64 bytes NetworkDirect allows");
        assert!(caps.check(&Op::Send, 64, true).is_ok());
    }

    #[test]
    fn ranges_convert_into_transport_errors() {
        let buf = ffi::types::RemoteBuffer { addr: 0, len: 16, rkey: 1 };
        let err: TransportError = buf.slice(10, 10).unwrap_err().into();
        assert_eq!(err.to_string(), "remote range: 10+10 is outside the 16-byte buffer");
    }
}
