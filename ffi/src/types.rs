//! Plain value types shared by every backend: GUIDs and GIDs as the wire carries them.
//! No `unsafe` here; they build on every target.

use std::fmt;
use std::net::Ipv6Addr;

use serde::{Deserialize, Serialize};

/// A 64-bit globally unique identifier (node GUID, system image GUID), held in host
/// byte order. Displays as `ibv_devinfo` and sysfs print it: `0002:c903:0011:2233`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Guid(pub u64);

impl Guid {
    /// Builds a GUID from the big-endian value the verbs library returns.
    pub fn from_be(raw: u64) -> Self {
        Guid(u64::from_be(raw))
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:04x}:{:04x}:{:04x}:{:04x}",
            (v >> 48) & 0xffff,
            (v >> 32) & 0xffff,
            (v >> 16) & 0xffff,
            v & 0xffff
        )
    }
}

/// A 128-bit port GID, in wire (network) byte order.
///
/// On InfiniBand it is subnet prefix + port GUID; on RoCE it is an IPv6 address, or
/// an IPv4-mapped one (`::ffff:a.b.c.d`) for an IPv4 netdev address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// Whether every byte is zero: an unused slot of a RoCE GID table.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    /// The GID read as an IPv6 address.
    pub fn to_ipv6(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }

    /// The IPv4 address inside an IPv4-mapped GID (`::ffff:a.b.c.d`), if it is one.
    pub fn to_ipv4_mapped(&self) -> Option<std::net::Ipv4Addr> {
        self.to_ipv6().to_ipv4_mapped()
    }

    /// The GID in the raw colon form of `ibv_devinfo -v` and sysfs:
    /// `0000:0000:0000:0000:0000:ffff:7f00:0001`.
    pub fn to_raw_string(&self) -> String {
        let mut out = String::with_capacity(39);
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                out.push(':');
            }
            out.push_str(&format!("{:02x}{:02x}", pair[0], pair[1]));
        }
        out
    }
}

impl fmt::Display for Gid {
    /// The IPv6 text form (`fe80::…`, `::ffff:127.0.0.1`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_ipv6())
    }
}

/// What a peer needs to target a registered buffer: address, length and remote key
/// (an rkey on verbs, a token on NetworkDirect). Sent over the out-of-band exchange;
/// remote ranges are checked against it before posting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteBuffer {
    /// Virtual address of the first byte, in the peer's address space.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote key.
    pub rkey: u32,
}

/// A checked range of a peer's memory: the target of an RDMA write, read or atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteSlice {
    addr: u64,
    len: u32,
    rkey: u32,
}

impl RemoteBuffer {
    /// The range `offset .. offset + len` of the buffer.
    ///
    /// # Errors
    /// When the range is not inside what the peer advertised, or is longer than one
    /// message (4 GiB − 1).
    pub fn slice(&self, offset: u64, len: u64) -> Result<RemoteSlice, RangeError> {
        let len = RangeError::check("remote range", offset, len, self.len)?;
        Ok(RemoteSlice { addr: self.addr + offset, len, rkey: self.rkey })
    }

    /// The same buffer with another key: for negative tests.
    pub fn with_rkey(self, rkey: u32) -> RemoteBuffer {
        RemoteBuffer { rkey, ..self }
    }
}

impl RemoteSlice {
    /// Remote virtual address.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }
    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
}

/// A range that does not fit the buffer it names; nothing was posted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeError {
    /// `local range` or `remote range`.
    pub what: &'static str,
    /// Start offset asked for.
    pub offset: u64,
    /// Length asked for.
    pub len: u64,
    /// Size of the buffer.
    pub size: u64,
}

impl RangeError {
    /// Checks `offset + len <= size` and `len < 4 GiB`; returns `len` as a message length.
    #[inline]
    pub(crate) fn check(what: &'static str, offset: u64, len: u64, size: u64) -> Result<u32, Self> {
        let fits = offset.checked_add(len).is_some_and(|end| end <= size);
        match (fits, u32::try_from(len)) {
            (true, Ok(len)) => Ok(len),
            _ => Err(RangeError { what, offset, len, size }),
        }
    }
}

impl RangeError {
    /// Why, without naming which range.
    pub fn reason(&self) -> String {
        if self.len > u64::from(u32::MAX) {
            format!("{} bytes is over the 4 GiB message limit", self.len)
        } else {
            format!("{}+{} is outside the {}-byte buffer", self.offset, self.len, self.size)
        }
    }
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.reason())
    }
}

impl std::error::Error for RangeError {}

/// How a peer reaches a queue pair: what the out-of-band exchange carries per QP
/// (perftest's `LID QPN PSN GID` line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpEndpoint {
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// GID used to reach the port (RoCE; the port GID on InfiniBand).
    pub gid: Gid,
    /// Queue pair number.
    pub qpn: u32,
    /// First packet sequence number.
    pub psn: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_prints_in_four_groups_from_big_endian() {
        let raw = 0x0002_c903_0011_2233u64.to_be();
        assert_eq!(Guid::from_be(raw).to_string(), "0002:c903:0011:2233");
    }

    #[test]
    fn gid_forms() {
        let mut bytes = [0u8; 16];
        bytes[10] = 0xff;
        bytes[11] = 0xff;
        bytes[12..].copy_from_slice(&[127, 0, 0, 1]);
        let gid = Gid(bytes);
        assert_eq!(gid.to_string(), "::ffff:127.0.0.1");
        assert_eq!(gid.to_raw_string(), "0000:0000:0000:0000:0000:ffff:7f00:0001");
        assert_eq!(gid.to_ipv4_mapped(), Some(std::net::Ipv4Addr::LOCALHOST));
        assert!(!gid.is_zero());
        assert!(Gid::default().is_zero());
        let link_local = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1]);
        assert_eq!(link_local.to_ipv4_mapped(), None);
        assert_eq!(link_local.to_string(), "fe80::200:ff:fe00:1");
    }

    #[test]
    fn remote_ranges_are_checked_against_the_advertised_buffer() {
        let remote = RemoteBuffer { addr: 0x1000, len: 64, rkey: 7 };
        let s = remote.slice(8, 8).unwrap();
        assert_eq!((s.addr(), s.len(), s.rkey()), (0x1008, 8, 7));
        assert!(remote.slice(0, 64).is_ok());
        let err = remote.slice(60, 8).unwrap_err();
        assert_eq!(err.to_string(), "remote range: 60+8 is outside the 64-byte buffer");
        assert!(remote.slice(u64::MAX, 2).is_err(), "overflow is refused, not wrapped");
        let big = RemoteBuffer { addr: 0, len: 1 << 33, rkey: 1 };
        let err = big.slice(0, 1 << 32).unwrap_err();
        assert!(err.to_string().contains("over the 4 GiB message limit"), "{err}");
    }

    #[test]
    fn endpoints_round_trip_through_json() {
        let ep = QpEndpoint { lid: 3, gid: Gid([1; 16]), qpn: 0x11, psn: 0xabcdef };
        let text = serde_json::to_string(&ep).unwrap();
        assert_eq!(serde_json::from_str::<QpEndpoint>(&text).unwrap(), ep);
    }
}
