//! The TCP connection to a perftest peer, as perftest uses it: no framing and no tags,
//! every exchange lock-step (the client writes, then reads; the server reads, then
//! writes), each message one write of its exact length. Every read has this side's
//! timeout and the exact length of the message expected; a wait that perftest leaves
//! silent for a whole run is kept alive only by the device's packet counters moving.

use std::io::{ErrorKind as IoKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::records::{self, BwReport, Key, REPORT_FIELDS, VERSION_LEN};
use crate::error::{Error, ErrorKind};

/// perftest's `DEF_PORT`.
pub const PERFTEST_PORT: u16 = 18515;

/// What the preamble settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreed {
    /// The peer's version string.
    pub version: String,
    /// The larger page size of the two: perftest's `cycle_buffer`, the span its
    /// bandwidth loops cycle through in the peer's buffer.
    pub cycle_buffer: u32,
    /// The path MTU both use, the smaller of the two: its `enum ibv_mtu` code (1 for
    /// 256 B … 5 for 4096 B).
    pub mtu_code: u8,
}

/// A connection to a perftest peer.
pub struct Wire {
    stream: TcpStream,
    client: bool,
    timeout: Duration,
    peer: SocketAddr,
}

impl Wire {
    /// `client`: this side connected (and writes first in every exchange).
    ///
    /// # Errors
    /// The socket refusing its options.
    pub fn new(stream: TcpStream, client: bool, timeout: Duration) -> Result<Wire, Error> {
        let io = |e: std::io::Error| Error::io(format!("perftest connection: {e}"));
        // Each message must leave in one segment: perftest reads it with one read().
        stream.set_nodelay(true).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        let peer = stream.peer_addr().map_err(io)?;
        Ok(Wire { stream, client, timeout, peer })
    }

    /// The longest this side waits for any message from now on.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        let _ = self.stream.set_write_timeout(Some(timeout));
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// This side's IPv4 address on the connection (its RoCE GID is chosen by it).
    pub fn local_ipv4(&self) -> Option<Ipv4Addr> {
        match self.stream.local_addr().ok()?.ip() {
            std::net::IpAddr::V4(a) => Some(a),
            std::net::IpAddr::V6(a) => a.to_ipv4_mapped(),
        }
    }

    /// One lock-step exchange: `mine` out, `len` bytes back.
    ///
    /// # Errors
    /// The peer closing, staying silent for the timeout, or the socket failing.
    pub fn exchange(&mut self, mine: &[u8], len: usize, what: &str) -> Result<Vec<u8>, Error> {
        self.exchange_while(mine, len, what, &mut || false)
    }

    /// As [`Self::exchange`], for a message the peer sends only when its run is over:
    /// each time the timeout passes, `alive` says whether the run still moves.
    ///
    /// # Errors
    /// As [`Self::exchange`].
    pub fn exchange_while(
        &mut self,
        mine: &[u8],
        len: usize,
        what: &str,
        alive: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<u8>, Error> {
        if self.client {
            self.send(mine, what)?;
            self.recv(len, what, alive)
        } else {
            let theirs = self.recv(len, what, alive)?;
            self.send(mine, what)?;
            Ok(theirs)
        }
    }

    fn send(&mut self, bytes: &[u8], what: &str) -> Result<(), Error> {
        self.stream.write_all(bytes).map_err(|e| self.failed(&e, what))
    }

    fn recv(
        &mut self,
        len: usize,
        what: &str,
        alive: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<u8>, Error> {
        let mut buf = vec![0u8; len];
        let mut filled = 0;
        let mut since = Instant::now();
        while filled < len {
            let left = self.timeout.saturating_sub(since.elapsed()).max(Duration::from_millis(1));
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| Error::io(format!("perftest connection: {e}")))?;
            match self.stream.read(&mut buf[filled..]) {
                Ok(0) => {
                    return Err(Error::new(
                        ErrorKind::PeerClosed,
                        format!(
                            "the perftest peer {} closed the connection (waiting for {what})",
                            self.peer
                        ),
                    ))
                }
                Ok(n) => {
                    filled += n;
                    since = Instant::now();
                }
                Err(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::TimedOut) => {
                    if since.elapsed() >= self.timeout {
                        if alive() {
                            since = Instant::now();
                            continue;
                        }
                        return Err(Error::new(
                            ErrorKind::PeerSilent,
                            format!(
                                "the perftest peer {} sent nothing for {} s (--timeout) while this side waited for {what}",
                                self.peer,
                                self.timeout.as_secs()
                            ),
                        ));
                    }
                }
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(self.failed(&e, what)),
            }
        }
        Ok(buf)
    }

    fn failed(&self, e: &std::io::Error, what: &str) -> Error {
        let kind = match e.kind() {
            IoKind::ConnectionReset | IoKind::BrokenPipe | IoKind::ConnectionAborted => {
                ErrorKind::PeerClosed
            }
            _ => ErrorKind::Io,
        };
        Error::new(kind, format!("perftest connection to {} ({what}): {e}", self.peer))
    }

    /// The versions: what every perftest test exchanges first. Returns the peer's.
    ///
    /// # Errors
    /// A peer that is not perftest, or one older than 5.70.
    pub fn versions(&mut self) -> Result<String, Error> {
        let theirs = self.exchange(&records::version(), VERSION_LEN, "perftest's version")?;
        records::peer_version(&theirs)
    }

    /// After the versions: the page and cache-line sizes, then the MTU (`mtu_code`:
    /// this side's port's, 1..=5).
    ///
    /// # Errors
    /// The connection failing, or values out of range.
    pub fn agree(&mut self, mtu_code: u8, version: &str) -> Result<Agreed, Error> {
        let version = version.to_string();
        let page = u32::try_from(page_size()).unwrap_or(4096);
        let peer_page = self.be_u32(page, "the page size")?;
        // Both sides cycle through the larger page, and each buffer holds two of them
        // per QP: a power of two no larger than Linux's largest base page (64 KiB, on
        // arm64 and ppc64), so a peer's number cannot size this side's memory.
        if !peer_page.is_power_of_two() || peer_page > 1 << 16 {
            return Err(Error::refused(format!(
                "the perftest peer's page size {peer_page} is no page size"
            )));
        }
        let line = self.be_u32(64, "the cache line size")?;
        if !line.is_power_of_two() || line > 4096 {
            return Err(Error::refused(format!(
                "the perftest peer's cache line {line} B is out of range"
            )));
        }
        let mine = mtu_code.clamp(1, 5);
        let theirs = self.exchange(&[b'0' + mine, 0], 2, "the MTU")?;
        // perftest ignores an MTU it does not know; so does this side.
        let peer =
            Some(theirs[0].wrapping_sub(b'0')).filter(|c| (1..=5).contains(c) && theirs[1] == 0);
        let mtu_code = peer.map_or(mine, |p| p.min(mine));
        Ok(Agreed { version, cycle_buffer: page.max(peer_page), mtu_code })
    }

    fn be_u32(&mut self, mine: u32, what: &str) -> Result<u32, Error> {
        let theirs = self.exchange(&mine.to_be_bytes(), 4, what)?;
        Ok(u32::from_be_bytes([theirs[0], theirs[1], theirs[2], theirs[3]]))
    }

    /// One queue pair record each way: perftest's handshake and its barrier alike.
    ///
    /// # Errors
    /// As [`Self::exchange`], and a malformed record.
    pub fn keys(&mut self, mine: &Key, what: &str) -> Result<Key, Error> {
        let gid = mine.gid.is_some();
        let len = if gid { records::KEY_GID_LEN } else { records::KEY_LEN };
        let raw = self.exchange(&mine.encode(), len, what)?;
        Key::decode(&raw, gid)
    }

    /// [`Self::keys`] as a barrier that may last a whole run on the peer's side.
    ///
    /// # Errors
    /// As [`Self::keys`], or nothing moving for the timeout.
    pub fn keys_after_run(
        &mut self,
        mine: &Key,
        what: &str,
        alive: &mut dyn FnMut() -> bool,
    ) -> Result<Key, Error> {
        let gid = mine.gid.is_some();
        let len = if gid { records::KEY_GID_LEN } else { records::KEY_LEN };
        let raw = self.exchange_while(&mine.encode(), len, what, alive)?;
        Key::decode(&raw, gid)
    }

    /// The bandwidth reports, one field at a time as perftest exchanges them; the
    /// peer's fields come back unread (see [`BwReport::from_fields`]).
    ///
    /// # Errors
    /// As [`Self::exchange`].
    pub fn reports(&mut self, mine: &BwReport) -> Result<[[u8; 8]; REPORT_FIELDS], Error> {
        let mut theirs = [[0u8; 8]; REPORT_FIELDS];
        for (t, m) in theirs.iter_mut().zip(mine.fields()) {
            let got = self.exchange(&m, 8, "the bandwidth report")?;
            t.copy_from_slice(&got);
        }
        Ok(theirs)
    }

    /// perftest's close: `"done"` each way, then the connection ends. perftest never
    /// reads the peer's; this side reads it when it comes, so neither end resets the
    /// other's last bytes.
    pub fn close(mut self) {
        let _ = self.stream.write_all(b"done\0");
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut done = [0u8; 5];
        let _ = self.stream.read_exact(&mut done);
    }
}

/// This machine's page size (perftest's `sysconf(_SC_PAGESIZE)`).
#[cfg(unix)]
fn page_size() -> u64 {
    ffi::os::page_size().unwrap_or(4096)
}

/// This machine's page size (4 KiB on Windows' x86-64 and arm64).
#[cfg(not(unix))]
fn page_size() -> u64 {
    4096
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connected pair: (client, server).
    fn pair(timeout: Duration) -> (Wire, Wire) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (Wire::new(c, true, timeout).unwrap(), Wire::new(s, false, timeout).unwrap())
    }

    #[test]
    fn both_sides_agree_on_the_larger_page_and_the_smaller_mtu() {
        let (mut c, mut s) = pair(Duration::from_secs(10));
        let server = std::thread::spawn(move || {
            let v = s.versions().unwrap();
            let agreed = s.agree(5, &v).unwrap();
            let k =
                Key { lid: 7, out_reads: 1, qpn: 2, psn: 3, rkey: 4, vaddr: 5, gid: None, srqn: 0 };
            let theirs = s.keys(&k, "test").unwrap();
            let report = s.reports(&BwReport::default()).unwrap();
            (agreed, theirs, BwReport::from_fields(&report, 64).unwrap())
        });
        let v = c.versions().unwrap();
        assert_eq!(v, records::ANNOUNCED_VERSION);
        let agreed = c.agree(3, &v).unwrap();
        let k =
            Key { lid: 1, out_reads: 16, qpn: 9, psn: 8, rkey: 7, vaddr: 6, gid: None, srqn: 0 };
        let theirs = c.keys(&k, "test").unwrap();
        let mine = BwReport { size: 64, iters: 10, peak: 1.5, avg: 1.25, msg_rate: 0.02 };
        c.reports(&mine).unwrap();
        let (s_agreed, s_theirs, s_report) = server.join().unwrap();
        assert_eq!(agreed, s_agreed);
        assert_eq!(agreed.mtu_code, 3);
        assert_eq!(u64::from(agreed.cycle_buffer), page_size());
        assert_eq!((theirs.lid, s_theirs), (7, k));
        assert_eq!(s_report, mine);
    }

    #[test]
    fn a_silent_peer_ends_the_wait_unless_the_run_moves() {
        let (mut c, _s) = pair(Duration::from_millis(200));
        let start = Instant::now();
        let mut polls = 0;
        let e = c
            .exchange_while(b"x", 4, "the end of run", &mut || {
                polls += 1;
                polls < 3
            })
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::PeerSilent, "{e}");
        assert!(e.message.contains("while this side waited for the end of run"), "{e}");
        // Two timeouts were let through while the counters moved, the third was not.
        assert_eq!(polls, 3);
        assert!(start.elapsed() >= Duration::from_millis(600), "{:?}", start.elapsed());
    }

    #[test]
    fn a_page_size_no_machine_has_is_refused_before_it_sizes_a_buffer() {
        let (mut c, s) = pair(Duration::from_secs(10));
        let mut raw = s.stream;
        let fake = std::thread::spawn(move || {
            let mut buf = [0u8; 16];
            raw.read_exact(&mut buf).unwrap();
            raw.write_all(&records::version()).unwrap();
            raw.read_exact(&mut buf[..4]).unwrap();
            raw.write_all(&(1u32 << 20).to_be_bytes()).unwrap();
            raw
        });
        let v = c.versions().unwrap();
        let e = c.agree(3, &v).unwrap_err();
        assert!(e.message.contains("page size 1048576 is no page size"), "{e}");
        drop(fake.join().unwrap());
    }

    #[test]
    fn a_peer_that_leaves_is_named() {
        let (mut c, s) = pair(Duration::from_secs(10));
        drop(s);
        let e = c.versions().unwrap_err();
        assert_eq!(e.kind, ErrorKind::PeerClosed, "{e}");
    }
}
