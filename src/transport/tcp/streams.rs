//! How TCP data streams are made: the server's listener on a port the kernel picks, the
//! client's connects, and the greeting (cookie and stream index) that ties each stream
//! to its test's control connection.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::{broken, set_window, StreamOptions, TcpConnection, TcpEndpoint, GREETING_LEN};
use crate::transport::TransportError;

/// How long the listener keeps accepting after the client has spoken on the control
/// connection: its streams connected just before are then already on their way.
pub(super) const GONE_GRACE: Duration = Duration::from_millis(500);

/// The server's listener for data streams, on the address the control connection
/// arrived at and a port the kernel picks.
pub struct DataListener {
    listener: TcpListener,
    cookie: u64,
}

impl DataListener {
    /// Listens on `ip`, with the socket buffer of `opts` set before any connection
    /// arrives (so the window scale of the handshake accounts for it).
    ///
    /// # Errors
    /// Binding or the socket options failing.
    pub fn bind(ip: IpAddr, opts: &StreamOptions) -> Result<Self, TransportError> {
        let listener = TcpListener::bind((ip, 0)).map_err(|e| {
            TransportError::Broken(format!("cannot listen for TCP data streams on {ip}: {e}"))
        })?;
        if let Some(w) = opts.window {
            set_window(&listener, w).map_err(|e| broken("set-up", &e, opts.timeout))?;
        }
        Ok(DataListener { listener, cookie: new_cookie() })
    }

    /// What the client needs to connect.
    pub fn endpoint(&self) -> Result<TcpEndpoint, TransportError> {
        let addr = self.listener.local_addr().map_err(|e| broken("set-up", &e, Duration::ZERO))?;
        Ok(TcpEndpoint { addr, cookie: self.cookie })
    }

    /// Accepts `n` streams carrying this listener's cookie, in stream order, from the
    /// address `from` only (the control connection's peer) when given. Strays (another
    /// address, another cookie, a port scanner) are dropped, those from elsewhere unread.
    /// Greetings are read side by side, without blocking, so a silent stranger holds no
    /// stream's place: at most [`MAX_GREETING`] connections owe theirs (past it the
    /// oldest goes). The whole wait is bounded by `opts.timeout` and by `opts.end`, and ends early,
    /// [`GONE_GRACE`] after `client_gone` first says so.
    ///
    /// # Errors
    /// Fewer than `n` streams in time, the client gone, or a socket error.
    pub fn accept_streams(
        &self,
        n: u32,
        opts: &StreamOptions,
        from: Option<std::net::IpAddr>,
        mut client_gone: impl FnMut() -> bool,
    ) -> Result<Vec<TcpConnection>, TransportError> {
        let deadline = Instant::now() + opts.timeout;
        self.listener.set_nonblocking(true).map_err(|e| broken("accept", &e, opts.timeout))?;
        let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
        let mut greeting: VecDeque<Greeting> = VecDeque::new();
        let mut have = 0;
        let mut gone_since = None;
        while have < n {
            match self.listener.accept() {
                Ok((_, addr)) if from.is_some_and(|ip| ip != addr.ip().to_canonical()) => continue,
                Ok((s, _)) => {
                    s.set_nonblocking(true).map_err(|e| broken("accept", &e, opts.timeout))?;
                    if greeting.len() >= MAX_GREETING {
                        greeting.pop_front();
                    }
                    greeting.push_back(Greeting { stream: s, got: [0; GREETING_LEN], filled: 0 });
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(broken("accept", &e, opts.timeout)),
            }
            for (cookie, index, s) in greeted(&mut greeting) {
                if let Some(slot @ None) = streams.get_mut(index as usize) {
                    if cookie == self.cookie {
                        *slot = Some(s);
                        have += 1;
                    }
                }
            }
            if have == n {
                break;
            }
            // The client speaks on the control connection when it gives up, but also as
            // soon as its connects return: a stream's last handshake packet may still
            // be on its way to this listener's queue then.
            if client_gone() {
                let since = *gone_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= GONE_GRACE {
                    return Err(TransportError::Broken(format!(
                        "the client stopped before its TCP data streams connected ({have} of {n})"
                    )));
                }
            }
            super::past(opts.end)?;
            if Instant::now() >= deadline {
                return Err(TransportError::Broken(format!(
                    "only {have} of {n} TCP data streams connected within {} s",
                    opts.timeout.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        streams
            .into_iter()
            .flatten()
            .map(|s| {
                s.set_nonblocking(false).map_err(|e| broken("accept", &e, opts.timeout))?;
                TcpConnection::new(s, opts)
            })
            .collect()
    }
}

/// Reads what has arrived of each pending greeting, without blocking; returns the whole
/// ones (cookie, stream index, stream) and drops connections that closed or failed.
fn greeted(pending: &mut VecDeque<Greeting>) -> Vec<(u64, u32, TcpStream)> {
    let mut whole = Vec::new();
    let mut k = 0;
    while k < pending.len() {
        let g = &mut pending[k];
        let read = (&g.stream).read(&mut g.got[g.filled..]);
        match read {
            Ok(0) => drop(pending.remove(k)),
            Ok(m) if g.filled + m == GREETING_LEN => {
                if let Some(g) = pending.remove(k) {
                    let cookie = u64::from_be_bytes(g.got[..8].try_into().unwrap_or_default());
                    let index = u32::from_be_bytes(g.got[8..].try_into().unwrap_or_default());
                    whole.push((cookie, index, g.stream));
                }
            }
            Ok(m) => {
                g.filled += m;
                k += 1;
            }
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) =>
            {
                k += 1;
            }
            Err(_) => drop(pending.remove(k)),
        }
    }
    whole
}

/// Connections to a [`DataListener`] owing their greeting at most: a real client's
/// streams greet within milliseconds of their connect.
const MAX_GREETING: usize = 256;

/// A data connection whose greeting is still arriving (its socket non-blocking).
struct Greeting {
    stream: TcpStream,
    got: [u8; GREETING_LEN],
    filled: usize,
}

/// A TCP connection to `addr` within `timeout`, from `source` (any port) when given:
/// the traffic then leaves from that address, not the one the route would choose.
///
/// # Errors
/// The source is not a local address of `addr`'s family, or the connection fails.
pub fn open_stream(
    addr: &SocketAddr,
    source: Option<IpAddr>,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let Some(source) = source else { return TcpStream::connect_timeout(addr, timeout) };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(*addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.bind(&SocketAddr::new(source, 0).into())?;
    socket.connect_timeout(&(*addr).into(), timeout)?;
    Ok(socket.into())
}

/// Connects `n` data streams to the server's listener from `source` (the control
/// connection's local address: the server takes streams from that address only), each
/// announcing itself.
///
/// # Errors
/// A connection failing.
pub fn connect_streams(
    peer: &TcpEndpoint,
    n: u32,
    source: Option<IpAddr>,
    opts: &StreamOptions,
) -> Result<Vec<TcpConnection>, TransportError> {
    (0..n)
        .map(|i| {
            let mut s = open_stream(&peer.addr, source, opts.timeout).map_err(|e| {
                TransportError::Broken(format!(
                    "cannot connect TCP data stream {i} to {}: {e}",
                    peer.addr
                ))
            })?;
            let mut g = [0u8; GREETING_LEN];
            g[..8].copy_from_slice(&peer.cookie.to_be_bytes());
            g[8..].copy_from_slice(&i.to_be_bytes());
            s.set_write_timeout(Some(opts.timeout))
                .map_err(|e| broken("connect", &e, opts.timeout))?;
            s.write_all(&g).map_err(|e| broken("connect", &e, opts.timeout))?;
            TcpConnection::new(s, opts)
        })
        .collect()
}

/// A cookie no stranger can guess: 64 bits from the system's random source (the time
/// and the process id, hashed with std's random keys, if that fails).
fn new_cookie() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_ok() {
        return u64::from_ne_bytes(bytes);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::super::tests::opts;
    use super::*;
    use crate::transport::{Completion, Connection, END_IMM};

    #[test]
    fn streams_are_ordered_strays_dropped_and_a_closed_peer_named() {
        let l = DataListener::bind(IpAddr::from([127, 0, 0, 1]), &opts()).unwrap();
        let ep = l.endpoint().unwrap();
        let stray = TcpEndpoint { cookie: ep.cookie ^ 1, ..ep };
        let client = std::thread::spawn(move || {
            let strays = connect_streams(&stray, 1, None, &opts()).unwrap();
            (strays, connect_streams(&ep, 3, None, &opts()).unwrap())
        });
        let server = l.accept_streams(3, &opts(), None, || false).unwrap();
        let (_strays, client) = client.join().unwrap();
        for (c, s) in client.iter().zip(&server) {
            assert_eq!(c.local_addr(), s.peer_addr());
        }
        let mut s = server;
        drop(client);
        s[0].post_recv(1, 0, 8).unwrap();
        let mut wc = [Completion::default(); 1];
        // A close before any byte is the end marker; mid-message it is an error.
        assert_eq!(s[0].poll(&mut wc).unwrap(), 1);
        assert_eq!(wc[0].imm, Some(END_IMM));
    }

    #[test]
    fn a_stream_landing_just_after_the_client_spoke_is_still_taken() {
        // The client's next control message can reach the server before the last
        // packet of its stream's handshake reaches the listener (seen under load in the
        // mesh); a stream that lands within the grace is taken, later ones are not.
        let l = DataListener::bind(IpAddr::from([127, 0, 0, 1]), &opts()).unwrap();
        let ep = l.endpoint().unwrap();
        let client = std::thread::spawn(move || {
            std::thread::sleep(GONE_GRACE / 4);
            connect_streams(&ep, 1, None, &opts()).unwrap()
        });
        let start = Instant::now();
        let server = l.accept_streams(1, &opts(), None, || true).unwrap();
        assert!(start.elapsed() < GONE_GRACE, "taken as it landed: {:?}", start.elapsed());
        let client = client.join().unwrap();
        assert_eq!(client[0].local_addr(), server[0].peer_addr());
        let start = Instant::now();
        let err = l.accept_streams(1, &opts(), None, || true).unwrap_err();
        assert!(start.elapsed() >= GONE_GRACE, "{:?}", start.elapsed());
        assert!(err.to_string().contains("(0 of 1)"), "{err}");
    }

    #[test]
    fn streams_from_another_address_than_the_clients_are_not_taken() {
        let quick = StreamOptions { timeout: Duration::from_millis(500), ..opts() };
        let l = DataListener::bind(IpAddr::from([127, 0, 0, 1]), &quick).unwrap();
        let ep = l.endpoint().unwrap();
        // The right cookie, from 127.0.0.1, while the control peer is 127.0.0.2.
        let client = std::thread::spawn(move || connect_streams(&ep, 1, None, &quick));
        let other = Some(IpAddr::from([127, 0, 0, 2]));
        let err = l.accept_streams(1, &quick, other, || false).unwrap_err();
        assert!(err.to_string().contains("only 0 of 1 TCP data streams"), "{err}");
        let _ = client.join().unwrap();
    }

    #[test]
    fn a_connection_from_a_chosen_source_leaves_from_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let source: IpAddr = "127.0.0.2".parse().unwrap();
        let s = open_stream(&to, Some(source), Duration::from_secs(1)).unwrap();
        assert_eq!(s.local_addr().unwrap().ip(), source);
        assert_eq!(l.accept().unwrap().1.ip(), source, "the server sees it too");
        let plain = open_stream(&to, None, Duration::from_secs(1)).unwrap();
        assert_eq!(plain.local_addr().unwrap().ip(), to.ip());
        let e = open_stream(&to, Some("192.0.2.1".parse().unwrap()), Duration::from_secs(1));
        assert!(e.is_err(), "not a local address");
    }
}
