//! Plain value types shared by every backend: GUIDs and GIDs as the wire carries them.
//! No `unsafe` here; they build on every target.

use std::fmt;
use std::net::Ipv6Addr;

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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
        assert_eq!(
            gid.to_raw_string(),
            "0000:0000:0000:0000:0000:ffff:7f00:0001"
        );
        assert_eq!(gid.to_ipv4_mapped(), Some(std::net::Ipv4Addr::LOCALHOST));
        assert!(!gid.is_zero());
        assert!(Gid::default().is_zero());
        let link_local = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1]);
        assert_eq!(link_local.to_ipv4_mapped(), None);
        assert_eq!(link_local.to_string(), "fe80::200:ff:fe00:1");
    }
}
