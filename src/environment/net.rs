//! The interface part of an [`Environment`](super::Environment): which network interface
//! holds a TCP test's local address (`getifaddrs`, through `ffi::os`), and its MTU and
//! speed from sysfs; on Windows the adapter, its MTU and speed from
//! `GetAdaptersAddresses`.

use std::net::IpAddr;
use std::path::Path;

use ffi::os::InterfaceAddress;

use super::{clean, InterfaceEnvironment};
use crate::facts::{Netdev, SystemTree};

impl InterfaceEnvironment {
    /// The interface that holds local address `ip` (`127.0.0.1` → `lo`), with its MTU and
    /// speed read under `root` (on Windows, as the adapter list gives them). `None` when
    /// no interface holds it (an unspecified or remote address) or the platform cannot
    /// list addresses.
    pub fn for_ip(ip: IpAddr, root: &Path) -> Option<InterfaceEnvironment> {
        if cfg!(windows) {
            let want = ip.to_canonical();
            let adapters = ffi::os::adapter_addresses().ok()?;
            let a = adapters.into_iter().find(|a| a.addr.to_canonical() == want)?;
            return Some(InterfaceEnvironment {
                name: clean(&a.adapter),
                mtu: a.mtu,
                speed_mbps: a.speed_bps.map(|bps| bps / 1_000_000).filter(|&s| s > 0),
            });
        }
        let addresses = ffi::os::interface_addresses().ok()?;
        holder(ip, &addresses).map(|name| InterfaceEnvironment::named(name, root))
    }

    /// Interface `name`, its MTU and speed read from `sys/class/net/<name>/` under `root`.
    /// The speed is `None` when the file is missing or unreadable (`lo` gives EINVAL) or
    /// says -1 (no link, or a driver that does not know).
    pub fn named(name: &str, root: &Path) -> InterfaceEnvironment {
        let netdev = Netdev::read(&SystemTree::new(root), name);
        InterfaceEnvironment {
            name: clean(name),
            mtu: netdev.mtu,
            speed_mbps: netdev.speed_mbps.filter(|&s| s > 0),
        }
    }
}

/// The interface among `addresses` that holds `ip`, IPv4-mapped IPv6 addresses counting
/// as their IPv4 address. An IPv4 alias label (`eth0:1`) names its interface (`eth0`).
fn holder(ip: IpAddr, addresses: &[InterfaceAddress]) -> Option<&str> {
    let want = ip.to_canonical();
    if want.is_unspecified() {
        return None;
    }
    let found = addresses.iter().find(|a| a.addr.to_canonical() == want)?;
    found.interface.split(':').next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(interface: &str, addr: &str) -> InterfaceAddress {
        InterfaceAddress { interface: interface.to_string(), addr: addr.parse().unwrap() }
    }

    #[test]
    fn the_interface_holding_an_address_is_found() {
        let addresses = [
            address("lo", "127.0.0.1"),
            address("eth0", "192.0.2.2"),
            address("eth0:1", "192.0.2.3"),
            address("lo", "::1"),
            address("eth0", "fe80::fc00:ff:fe00:1"),
        ];
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert_eq!(holder(ip("127.0.0.1"), &addresses), Some("lo"));
        assert_eq!(holder(ip("::ffff:127.0.0.1"), &addresses), Some("lo"));
        assert_eq!(holder(ip("192.0.2.2"), &addresses), Some("eth0"));
        assert_eq!(holder(ip("192.0.2.3"), &addresses), Some("eth0"));
        assert_eq!(holder(ip("::1"), &addresses), Some("lo"));
        assert_eq!(holder(ip("fe80::fc00:ff:fe00:1"), &addresses), Some("eth0"));
        assert_eq!(holder(ip("192.0.2.9"), &addresses), None);
        assert_eq!(holder(ip("0.0.0.0"), &addresses), None);
        assert_eq!(holder(ip("::"), &addresses), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn loopback_on_this_machine_is_lo() {
        let lo =
            InterfaceEnvironment::for_ip("127.0.0.1".parse().unwrap(), Path::new("/")).unwrap();
        assert_eq!(lo.name, "lo");
        let mtu = std::fs::read_to_string("/sys/class/net/lo/mtu").unwrap();
        assert_eq!(lo.mtu, Some(mtu.trim().parse().unwrap()));
        assert_eq!(lo.speed_mbps, None, "lo has no speed");
        assert_eq!(InterfaceEnvironment::for_ip("0.0.0.0".parse().unwrap(), Path::new("/")), None);
    }
}
