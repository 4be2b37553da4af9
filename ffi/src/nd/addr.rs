//! Socket addresses as NetworkDirect takes them: Winsock's `SOCKADDR_IN(6)` layout
//! (Windows family numbers), built from and read back into `std::net`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::status::{check, NdError, ND_BUFFER_OVERFLOW};
use super::sys::{self, SOCKADDR, SOCKADDR_IN, SOCKADDR_IN6};

/// An address ready to pass as `const struct sockaddr*` plus its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockAddr {
    /// IPv4.
    V4(SOCKADDR_IN),
    /// IPv6.
    V6(SOCKADDR_IN6),
}

impl From<SocketAddr> for SockAddr {
    fn from(a: SocketAddr) -> Self {
        match a {
            SocketAddr::V4(a) => SockAddr::V4(SOCKADDR_IN {
                sin_family: sys::AF_INET,
                sin_port: a.port().to_be(),
                sin_addr: a.ip().octets(),
                sin_zero: [0; 8],
            }),
            SocketAddr::V6(a) => SockAddr::V6(SOCKADDR_IN6 {
                sin6_family: sys::AF_INET6,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: a.ip().octets(),
                sin6_scope_id: a.scope_id(),
            }),
        }
    }
}

impl SockAddr {
    /// The pointer to pass (valid while `self` is).
    pub fn as_ptr(&self) -> *const SOCKADDR {
        match self {
            SockAddr::V4(a) => (a as *const SOCKADDR_IN).cast(),
            SockAddr::V6(a) => (a as *const SOCKADDR_IN6).cast(),
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> u32 {
        match self {
            SockAddr::V4(_) => std::mem::size_of::<SOCKADDR_IN>() as u32,
            SockAddr::V6(_) => std::mem::size_of::<SOCKADDR_IN6>() as u32,
        }
    }

    /// Never empty; for clippy's `len` rule.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Back to `std`.
    pub fn to_std(&self) -> SocketAddr {
        match self {
            SockAddr::V4(a) => {
                SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a.sin_addr)), u16::from_be(a.sin_port))
            }
            SockAddr::V6(a) => SocketAddr::V6(std::net::SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr),
                u16::from_be(a.sin6_port),
                u32::from_be(a.sin6_flowinfo),
                a.sin6_scope_id,
            )),
        }
    }
}

/// Reads a `sockaddr` a provider or the caller filled.
///
/// # Safety
/// `p` points to `len` readable bytes.
pub unsafe fn read(p: *const SOCKADDR, len: usize) -> Option<SocketAddr> {
    if p.is_null() || len < 2 {
        return None;
    }
    // SAFETY: at least the 2-byte family is readable (checked above, caller's contract).
    let family = unsafe { std::ptr::read_unaligned(p.cast::<u16>()) };
    match family {
        sys::AF_INET if len >= std::mem::size_of::<SOCKADDR_IN>() => {
            // SAFETY: `len` covers a SOCKADDR_IN.
            let a = unsafe { std::ptr::read_unaligned(p.cast::<SOCKADDR_IN>()) };
            Some(SockAddr::V4(a).to_std())
        }
        sys::AF_INET6 if len >= std::mem::size_of::<SOCKADDR_IN6>() => {
            // SAFETY: `len` covers a SOCKADDR_IN6.
            let a = unsafe { std::ptr::read_unaligned(p.cast::<SOCKADDR_IN6>()) };
            Some(SockAddr::V6(a).to_std())
        }
        _ => None,
    }
}

/// Parses a `SOCKET_ADDRESS_LIST` that a `QueryAddressList` call wrote into `buf`.
///
/// # Safety
/// `buf` holds a list written by a provider: its entries point into `buf` (or other
/// memory valid for the call's duration) with lengths that fit.
pub(crate) unsafe fn read_list(buf: &[u64]) -> Vec<SocketAddr> {
    let bytes = std::mem::size_of_val(buf);
    if bytes < std::mem::size_of::<i32>() {
        return Vec::new();
    }
    let list = buf.as_ptr().cast::<sys::SOCKET_ADDRESS_LIST>();
    // SAFETY: the count is the first field, inside `buf`.
    let count = usize::try_from(unsafe { (*list).iAddressCount }).unwrap_or(0);
    let first = std::mem::offset_of!(sys::SOCKET_ADDRESS_LIST, Address);
    let room = bytes.saturating_sub(first) / std::mem::size_of::<sys::SOCKET_ADDRESS>();
    let mut out = Vec::new();
    for i in 0..count.min(room) {
        // SAFETY: entry `i` lies inside `buf` (bounded by `room`).
        let entry = unsafe { std::ptr::read_unaligned((*list).Address.as_ptr().add(i)) };
        let len = usize::try_from(entry.iSockaddrLength).unwrap_or(0);
        // SAFETY: the provider wrote a valid pointer/length pair (caller's contract).
        if let Some(a) = unsafe { read(entry.lpSockaddr, len) } {
            out.push(a);
        }
    }
    out
}

/// Writes `addrs` as a `SOCKET_ADDRESS_LIST` into `out` (what a provider's
/// `QueryAddressList` does): the list head, then the entries, then the addresses.
/// Returns the bytes needed; writes only when they fit in `out_len`.
///
/// # Safety
/// `out` is null or points to `out_len` writable bytes aligned for pointers.
pub unsafe fn write_list(addrs: &[SocketAddr], out: *mut u8, out_len: usize) -> usize {
    let first = std::mem::offset_of!(sys::SOCKET_ADDRESS_LIST, Address);
    let entries = std::mem::size_of::<sys::SOCKET_ADDRESS>() * addrs.len().max(1);
    let head = first + entries;
    let sized: Vec<SockAddr> = addrs.iter().map(|&a| SockAddr::from(a)).collect();
    let need = head + sized.iter().map(|s| s.len() as usize).sum::<usize>();
    if out.is_null() || out_len < need {
        return need;
    }
    // SAFETY: `out` has `need` writable, pointer-aligned bytes (checked and contract).
    unsafe {
        out.cast::<i32>().write(addrs.len() as i32);
        let mut at = head;
        for (i, s) in sized.iter().enumerate() {
            let dst = out.add(at);
            std::ptr::copy_nonoverlapping(s.as_ptr().cast::<u8>(), dst, s.len() as usize);
            let entry =
                sys::SOCKET_ADDRESS { lpSockaddr: dst.cast(), iSockaddrLength: s.len() as i32 };
            out.add(first).cast::<sys::SOCKET_ADDRESS>().add(i).write_unaligned(entry);
            at += s.len() as usize;
        }
    }
    need
}

/// The local address this host would use to reach `remote` (the routing table's
/// answer, as `NdResolveAddress` gets it with `SIO_ROUTING_INTERFACE_QUERY`).
///
/// # Errors
/// No route to `remote`.
pub fn local_for(remote: IpAddr) -> std::io::Result<IpAddr> {
    let any: IpAddr =
        if remote.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let s = std::net::UdpSocket::bind((any, 0))?;
    s.connect((remote, 9))?;
    Ok(s.local_addr()?.ip())
}

/// Runs a `QueryAddressList`-shaped call twice: for the size, then for the list.
pub(crate) fn query_list(
    call: &'static str,
    mut f: impl FnMut(*mut sys::SOCKET_ADDRESS_LIST, *mut u32) -> sys::HRESULT,
) -> Result<Vec<SocketAddr>, NdError> {
    let mut len: u32 = 0;
    let hr = f(std::ptr::null_mut(), &mut len);
    if hr != ND_BUFFER_OVERFLOW {
        check(call, hr)?;
        return Ok(Vec::new());
    }
    let mut buf = vec![0u64; (len as usize).div_ceil(8)];
    let mut len = (buf.len() * 8) as u32;
    check(call, f(buf.as_mut_ptr().cast(), &mut len))?;
    // SAFETY: the provider just wrote the list into `buf`.
    Ok(unsafe { read_list(&buf) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_in_winsock_layout() {
        let a: SocketAddr = "192.168.7.9:4791".parse().unwrap();
        let s = SockAddr::from(a);
        assert_eq!(s.len(), 16);
        // SAFETY: `s` is a 16-byte SOCKADDR_IN.
        let bytes = unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), 8) };
        assert_eq!(bytes, &[2, 0, 0x12, 0xb7, 192, 168, 7, 9]);
        // SAFETY: as above.
        assert_eq!(unsafe { read(s.as_ptr(), 16) }, Some(a));
        let b: SocketAddr = "[fe80::1]:18515".parse().unwrap();
        let s6 = SockAddr::from(b);
        assert_eq!(s6.len(), 28);
        // SAFETY: a 28-byte SOCKADDR_IN6.
        assert_eq!(unsafe { read(s6.as_ptr(), 28) }, Some(b));
        // SAFETY: too short for its family: refused, not read past.
        assert_eq!(unsafe { read(s6.as_ptr(), 16) }, None);
    }

    #[test]
    fn the_local_address_for_a_remote_one_comes_from_the_routing_table() {
        let lo: IpAddr = Ipv4Addr::LOCALHOST.into();
        assert_eq!(local_for(lo).unwrap(), lo);
    }

    #[test]
    fn address_lists_are_written_and_read_back() {
        let addrs: Vec<SocketAddr> =
            vec!["10.0.0.1:0".parse().unwrap(), "[2001:db8::5]:0".parse().unwrap()];
        // SAFETY: null asks for the size only.
        let need = unsafe { write_list(&addrs, std::ptr::null_mut(), 0) };
        let mut buf = vec![0u64; need.div_ceil(8)];
        // SAFETY: `buf` has `need` bytes, 8-aligned.
        assert_eq!(unsafe { write_list(&addrs, buf.as_mut_ptr().cast(), need) }, need);
        // SAFETY: written just above, pointers into `buf`.
        assert_eq!(unsafe { read_list(&buf) }, addrs);
    }
}
