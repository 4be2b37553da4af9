//! TCP as a [`Connection`], so the RDMA test loops and their timing code run over
//! sockets unchanged: a send writes the message (blocking, as iperf3's writes) and
//! completes once the kernel has taken it; a posted receive completes when its bytes
//! have all arrived. A zero-length send with [`END_IMM`](crate::perf::loops::END_IMM)
//! half-closes the stream, and end-of-stream is reported to the receiver as that
//! marker: the duration runs end the same way as over verbs.
//!
//! Where the verbs-shaped interface does not fit TCP: there are no remote buffers
//! (RDMA read/write, atomics, immediate data are refused by [`Capabilities`]), no
//! completion events (`-e`), and a connection is made by a listener and a connect, not
//! by exchanging symmetric endpoint records, so [`DataListener`] and [`connect_streams`]
//! stand in for `Transport::prepare`/`connect`.
//!
//! This file is the connection the loops post to and poll; [`streams`] makes them (the
//! server's listener, the client's connects, each stream's greeting).

mod streams;
mod wait;

pub use streams::{connect_streams, open_stream, DataListener};
pub use wait::TICK;
use wait::{broken, past, send_all, ticked, waited};

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::END_IMM;
use super::{
    Capabilities, Completion, CompletionKind, Connection, Op, RecvRange, Status, TransportError,
    WorkRequest,
};
use crate::error::RunLimit;

/// Socket options of a data stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// SO_SNDBUF / SO_RCVBUF asked for; None leaves the kernel's autotuning on.
    pub window: Option<u32>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// Every read and write gives up after this long.
    pub timeout: Duration,
    /// Bytes of the message buffer.
    pub buf_len: usize,
    /// The test's end and the limit it came from (`serve --max-time`): every read and
    /// write gives up there with [`TransportError::Overtime`], however the peer trickles
    /// or keeps silent. The socket then waits at most [`TICK`] at a time.
    pub end: Option<(Instant, RunLimit)>,
}

/// Where the client connects its data streams: the server's data listener, and a
/// cookie that ties them to this test's control connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpEndpoint {
    /// The data listener's address.
    pub addr: SocketAddr,
    /// Sent first on every stream; a stream with another is refused.
    pub cookie: u64,
}

/// What a stream sends first: cookie and stream index, 12 bytes.
const GREETING_LEN: usize = 12;

fn capabilities() -> Capabilities {
    Capabilities {
        backend: "TCP",
        send: true,
        rdma_write: false,
        rdma_read: false,
        atomics: false,
        immediate: false,
        max_inline: 0,
        max_message: u64::from(u32::MAX),
        recv_overhead: 0,
        events: false,
    }
}

/// A posted receive.
#[derive(Clone, Copy, Debug)]
struct PostedRecv {
    wr_id: u64,
    offset: usize,
    len: usize,
}

/// One TCP data stream with its message buffer.
#[derive(Debug)]
pub struct TcpConnection {
    stream: TcpStream,
    buf: Vec<u8>,
    caps: Capabilities,
    /// Signaled sends done but not yet polled (preallocated; no allocation per message).
    sent: VecDeque<Completion>,
    /// Posted receives, filled in order.
    recvs: VecDeque<PostedRecv>,
    /// Bytes of the first posted receive already read.
    filled: usize,
    /// End of stream seen.
    eof: bool,
    timeout: Duration,
    window: Option<u32>,
    /// [`StreamOptions::end`].
    end: Option<(Instant, RunLimit)>,
}

impl TcpConnection {
    fn new(stream: TcpStream, opts: &StreamOptions) -> Result<Self, TransportError> {
        let io = |e: io::Error| broken("set-up", &e, opts.timeout);
        stream.set_nodelay(opts.nodelay).map_err(io)?;
        let wait = if opts.end.is_some() { opts.timeout.min(TICK) } else { opts.timeout };
        stream.set_read_timeout(Some(wait)).map_err(io)?;
        stream.set_write_timeout(Some(wait)).map_err(io)?;
        let window = match opts.window {
            Some(w) => {
                set_window(&stream, w).map_err(io)?;
                granted_window(&stream)
            }
            None => None,
        };
        Ok(TcpConnection {
            stream,
            buf: vec![0; opts.buf_len],
            caps: capabilities(),
            sent: VecDeque::with_capacity(1024),
            recvs: VecDeque::with_capacity(1024),
            filled: 0,
            eof: false,
            timeout: opts.timeout,
            window,
            end: opts.end,
        })
    }

    /// The socket buffer the kernel granted when -w asked for one (Linux reports
    /// twice the request, its bookkeeping included).
    pub fn window(&self) -> Option<u32> {
        self.window
    }

    /// This stream's local address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.stream.local_addr().ok()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.stream.peer_addr().ok()
    }

    fn range(&self, offset: usize, len: usize) -> Result<std::ops::Range<usize>, TransportError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.buf.len() => Ok(offset..end),
            _ => Err(TransportError::Broken(format!(
                "{len} bytes at offset {offset} do not fit the {}-byte buffer",
                self.buf.len()
            ))),
        }
    }
}

/// Asks for `bytes` of send and receive buffer (Linux doubles the value for its
/// bookkeeping and caps it at `net.core.{w,r}mem_max`; Windows takes it as asked):
/// [`granted_window`] tells what the stack granted.
fn set_window<'s, S>(s: &'s S, bytes: u32) -> io::Result<()>
where
    socket2::SockRef<'s>: From<&'s S>,
{
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    let sock = socket2::SockRef::from(s);
    sock.set_send_buffer_size(bytes)?;
    sock.set_recv_buffer_size(bytes)
}

fn granted_window<'s, S>(s: &'s S) -> Option<u32>
where
    socket2::SockRef<'s>: From<&'s S>,
{
    let granted = socket2::SockRef::from(s).recv_buffer_size().ok()?;
    u32::try_from(granted).ok()
}

impl Connection for TcpConnection {
    const BLOCKING_POLL: bool = true;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn local(&self) -> &[u8] {
        &self.buf
    }

    fn local_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    // Nothing writes the buffer behind the stream's back: one look answers.
    fn wait_u8(&self, offset: usize, expect: u8, reads: u32) -> u32 {
        if self.buf[offset] == expect {
            reads
        } else {
            0
        }
    }

    // Nothing to encode ahead: a prepared request is the request.
    type Prepared = WorkRequest;

    fn prepare(&mut self, wr: &WorkRequest) -> Result<WorkRequest, TransportError> {
        Ok(*wr)
    }

    fn post_prepared(
        &mut self,
        req: &mut WorkRequest,
        wr_id: u64,
        signaled: bool,
    ) -> Result<(), TransportError> {
        self.post(&WorkRequest { wr_id, signaled, ..*req })
    }

    #[inline]
    fn post(&mut self, wr: &WorkRequest) -> Result<(), TransportError> {
        match wr.op {
            Op::Send => {
                let r = self.range(wr.local_offset, wr.len as usize)?;
                send_all(&mut self.stream, &self.buf[r], self.timeout, self.end)?;
            }
            // The end marker: no more data on this stream.
            Op::SendImm(END_IMM) if wr.len == 0 => {
                self.stream
                    .shutdown(Shutdown::Write)
                    .map_err(|e| broken("shutdown", &e, self.timeout))?;
            }
            other => {
                self.caps.check(&other, u64::from(wr.len), false)?;
                return Err(TransportError::Unsupported(format!(
                    "{} is not supported by TCP",
                    other.name()
                )));
            }
        }
        if wr.signaled {
            self.sent.push_back(Completion {
                wr_id: wr.wr_id,
                kind: CompletionKind::Send,
                byte_len: wr.len,
                ..Default::default()
            });
        }
        Ok(())
    }

    fn post_recv(&mut self, wr_id: u64, offset: usize, len: u32) -> Result<(), TransportError> {
        let r = self.range(offset, len as usize)?;
        self.recvs.push_back(PostedRecv { wr_id, offset: r.start, len: len as usize });
        Ok(())
    }

    type PreparedRecv = RecvRange;

    fn prepare_recv(&mut self, offset: usize, len: u32) -> Result<RecvRange, TransportError> {
        self.range(offset, len as usize)?;
        Ok(RecvRange { offset, len })
    }

    #[inline]
    fn post_prepared_recv(&mut self, r: &mut RecvRange, wr_id: u64) -> Result<(), TransportError> {
        self.post_recv(wr_id, r.offset, r.len)
    }

    /// Send completions first; then, with a receive posted, reads until that message
    /// is complete (blocking, as a TCP receiver does). Nothing for the timeout is an error.
    type Completion = Completion;

    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, TransportError> {
        let mut n = 0;
        while n < out.len() {
            match self.sent.pop_front() {
                Some(c) => {
                    out[n] = c;
                    n += 1;
                }
                None => break,
            }
        }
        if n > 0 || out.is_empty() {
            return Ok(n);
        }
        let Some(head) = self.recvs.front().copied() else { return Ok(0) };
        if self.eof {
            // The receive stays posted, as an RDMA receive would after the last message.
            out[0] = end_marker(head.wr_id);
            return Ok(1);
        }
        let mut quiet = None;
        while self.filled < head.len {
            let at = head.offset + self.filled;
            match self.stream.read(&mut self.buf[at..head.offset + head.len]) {
                Ok(0) if self.filled == 0 => {
                    self.eof = true;
                    out[0] = end_marker(head.wr_id);
                    return Ok(1);
                }
                Ok(0) => {
                    return Err(TransportError::PeerClosed(format!(
                        "TCP receive: the peer closed the data connection {} bytes into a {}-byte message",
                        self.filled, head.len
                    )))
                }
                Ok(k) => {
                    self.filled += k;
                    // A trickling peer's message never completes: its end still comes.
                    if self.filled < head.len && self.end.is_some() {
                        quiet = None;
                        past(self.end)?;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if self.end.is_some() && waited(&e) => {
                    ticked(&mut quiet, self.end, self.timeout, "receive", &e)?;
                }
                Err(e) => return Err(broken("receive", &e, self.timeout)),
            }
        }
        self.recvs.pop_front();
        self.filled = 0;
        out[0] = Completion {
            wr_id: head.wr_id,
            status: Status::Success,
            kind: CompletionKind::Recv,
            byte_len: head.len as u32,
            imm: None,
        };
        Ok(1)
    }

    fn arm(&mut self) -> Result<(), TransportError> {
        Err(TransportError::Unsupported("completion events are not supported by TCP".into()))
    }

    fn wait(&mut self, _timeout: Duration) -> Result<bool, TransportError> {
        Err(TransportError::Unsupported("completion events are not supported by TCP".into()))
    }

    fn check_state(&self) -> Result<(), TransportError> {
        match self.stream.take_error() {
            Ok(None) => Ok(()),
            Ok(Some(e)) | Err(e) => Err(broken("socket", &e, self.timeout)),
        }
    }
}

fn end_marker(wr_id: u64) -> Completion {
    Completion {
        wr_id,
        status: Status::Success,
        kind: CompletionKind::Recv,
        byte_len: 0,
        imm: Some(END_IMM),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::net::IpAddr;

    pub(super) fn opts() -> StreamOptions {
        StreamOptions {
            window: None,
            nodelay: true,
            timeout: Duration::from_secs(5),
            buf_len: 64,
            end: None,
        }
    }

    /// `n` data streams on 127.0.0.1: the client's ends, the server's.
    pub(crate) fn pair(n: u32) -> (Vec<TcpConnection>, Vec<TcpConnection>) {
        let l = DataListener::bind(IpAddr::from([127, 0, 0, 1]), &opts()).unwrap();
        let ep = l.endpoint().unwrap();
        let client = std::thread::spawn(move || connect_streams(&ep, n, None, &opts()).unwrap());
        let server = l.accept_streams(n, &opts(), None, || false).unwrap();
        (client.join().unwrap(), server)
    }

    fn send(off: usize, len: u32, id: u64) -> WorkRequest {
        WorkRequest {
            wr_id: id,
            op: Op::Send,
            local_offset: off,
            len,
            remote_offset: 0,
            signaled: true,
            inline: false,
        }
    }

    #[test]
    fn messages_arrive_in_posted_receives_and_the_end_marker_ends_the_stream() {
        let (mut c, mut s) = pair(1);
        let (c, s) = (&mut c[0], &mut s[0]);
        c.local_mut()[..8].copy_from_slice(b"abcdefgh");
        s.post_recv(1, 16, 5).unwrap();
        s.post_recv(2, 32, 3).unwrap();
        c.post(&send(0, 5, 7)).unwrap();
        c.post(&send(5, 3, 8)).unwrap();
        let mut wc = [Completion::default(); 4];
        assert_eq!(c.poll(&mut wc).unwrap(), 2);
        assert_eq!((wc[0].wr_id, wc[1].wr_id, wc[1].kind), (7, 8, CompletionKind::Send));
        assert_eq!(s.poll(&mut wc).unwrap(), 1);
        assert_eq!((wc[0].wr_id, wc[0].byte_len, wc[0].kind), (1, 5, CompletionKind::Recv));
        assert_eq!(s.poll(&mut wc).unwrap(), 1);
        assert_eq!(wc[0].wr_id, 2);
        assert_eq!(&s.local()[16..21], b"abcde");
        assert_eq!(&s.local()[32..35], b"fgh");
        // Nothing posted: nothing to read, and no blocking.
        assert_eq!(s.poll(&mut wc).unwrap(), 0);
        s.post_recv(3, 0, 4).unwrap();
        c.post(&WorkRequest { op: Op::SendImm(END_IMM), len: 0, ..send(0, 0, 9) }).unwrap();
        assert_eq!(s.poll(&mut wc).unwrap(), 1);
        assert_eq!((wc[0].wr_id, wc[0].imm), (3, Some(END_IMM)));
    }

    #[test]
    fn rdma_operations_and_out_of_range_sends_are_refused_by_name() {
        let (mut c, _s) = pair(1);
        let err = c[0].post(&WorkRequest { op: Op::Write, ..send(0, 8, 1) }).unwrap_err();
        assert_eq!(err.to_string(), "RDMA write is not supported by TCP");
        let err = c[0].post(&WorkRequest { op: Op::FetchAdd(1), ..send(0, 8, 1) }).unwrap_err();
        assert_eq!(err.to_string(), "atomics is not supported by TCP");
        let err = c[0].post(&send(60, 8, 1)).unwrap_err();
        assert!(err.to_string().contains("do not fit the 64-byte buffer"), "{err}");
        assert!(c[0].arm().unwrap_err().to_string().contains("not supported by TCP"));
    }

    #[test]
    fn socket_buffers_are_set_and_read_back() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        set_window(&l, 256 * 1024).unwrap();
        // Linux doubles the request (capped by rmem_max, at least 2 × 128 KiB here);
        // Windows grants it as asked.
        assert!(granted_window(&l).unwrap() >= 256 * 1024);
    }

    #[test]
    fn a_send_the_peer_stops_taking_fails_after_one_timeout() {
        // A small window, a message far larger, and a receiver that never reads: the
        // first write copies what fits and waits for room until the timeout.
        let quick = StreamOptions {
            timeout: Duration::from_secs(1),
            window: Some(64 << 10),
            buf_len: 32 << 20,
            ..opts()
        };
        let l = DataListener::bind(IpAddr::from([127, 0, 0, 1]), &quick).unwrap();
        let ep = l.endpoint().unwrap();
        let client = std::thread::spawn(move || connect_streams(&ep, 1, None, &quick).unwrap());
        let _s = l.accept_streams(1, &quick, None, || false).unwrap();
        let mut c = client.join().unwrap();
        let start = Instant::now();
        let err = c[0].post(&send(0, 32 << 20, 1)).unwrap_err();
        assert!(err.to_string().contains("TCP send: nothing moved for 1 s"), "{err}");
        let took = start.elapsed();
        assert!(took < Duration::from_millis(1800), "one timeout, not two: {took:?}");
    }

    #[test]
    fn a_silent_peer_times_out_instead_of_hanging() {
        let quick = StreamOptions { timeout: Duration::from_millis(300), ..opts() };
        let l = DataListener::bind(IpAddr::from([127, 0, 0, 1]), &quick).unwrap();
        let ep = l.endpoint().unwrap();
        let client = std::thread::spawn(move || connect_streams(&ep, 1, None, &quick).unwrap());
        let mut s = l.accept_streams(1, &quick, None, || false).unwrap();
        let _c = client.join().unwrap();
        s[0].post_recv(1, 0, 8).unwrap();
        let err = s[0].poll(&mut [Completion::default()]).unwrap_err();
        assert!(err.to_string().contains("nothing moved for 0 s"), "{err}");
        let err = l.accept_streams(1, &quick, None, || false).unwrap_err();
        assert!(err.to_string().contains("only 0 of 1 TCP data streams"), "{err}");
        let err = l.accept_streams(1, &opts(), None, || true).unwrap_err();
        assert!(err.to_string().contains("the client stopped before"), "{err}");
    }
}
