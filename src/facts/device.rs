//! An RDMA device and a network interface as sysfs shows them (under
//! [`paths::CLASS_INFINIBAND`] and [`paths::CLASS_NET`]): the one device model doctor,
//! health, a result's environment and the engine's affinity read. `devices`' own model
//! ([`crate::inventory::DeviceInfo`]) is what the verbs queries answer, with its PCIe
//! link and NUMA node read here ([`Pcie::read`], [`numa_node`]).

use std::fs;
use std::path::PathBuf;

use super::{decode, entries, number, paths, trimmed, word_in, Pcie, SystemTree};
use crate::text::clean;

/// One RDMA device ([`paths::device_dir`]).
#[derive(Clone, Debug, Default)]
pub struct Device {
    /// `mlx4_0`, `rxe0`.
    pub name: String,
    /// Adapter generation, from the PCI ids (or the soft driver).
    pub model: Option<String>,
    /// `fw_ver`; `None` when empty (soft devices).
    pub fw_ver: Option<String>,
    /// `CA`, `RNIC`, … (`node_type` without its number).
    pub node_type: Option<String>,
    /// True for rxe/siw: no PCI function, no physical link.
    pub soft: bool,
    /// The PCI function, resolved: what IPoIB netdevs are matched by.
    pub pci: Option<PathBuf>,
    /// The PCIe link, when the PCI function states a current speed or width.
    pub pcie: Option<Pcie>,
    /// NUMA node of the PCI function (`None`: -1 or absent).
    pub numa_node: Option<u32>,
    /// The ports, from 1.
    pub ports: Vec<Port>,
    /// The kernel driver ([`driver`]): `mlx4_core`, `rdma_rxe`.
    pub driver: Option<String>,
}

/// One port of a device.
#[derive(Clone, Debug, Default)]
pub struct Port {
    /// Port number.
    pub port: u8,
    /// `ACTIVE`, `DOWN`, `INIT`, … (without the number).
    pub state: String,
    /// `LinkUp`, `Polling`, `Disabled`, …
    pub phys_state: String,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: String,
    /// Nominal Gb/s from `rate` (`56 Gb/sec (4X FDR)` → 56).
    pub rate_gbps: Option<f64>,
    /// Lanes from `rate` (4X → 4).
    pub lanes: Option<u32>,
    /// Lane speed name from `rate` (`FDR`).
    pub speed: Option<String>,
    /// Active MTU, bytes: the verbs query on a live host; for RoCE, derived from the
    /// netdev MTU as the kernel does when only sysfs is at hand.
    pub active_mtu: Option<u32>,
    /// Valid GID entries.
    pub gids: Vec<Gid>,
}

/// One valid GID entry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gid {
    /// Table index.
    pub index: u32,
    /// As sysfs prints it (`0000:0000:0000:0000:0000:ffff:c612:0101`).
    pub raw: String,
    /// `IB`, `RoCE v1` or `RoCE v2`.
    pub gid_type: String,
    /// The netdev it belongs to (RoCE).
    pub netdev: Option<String>,
}

impl Gid {
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn ipv4(&self) -> Option<std::net::Ipv4Addr> {
        let hex: String = self.raw.chars().filter(char::is_ascii_hexdigit).collect();
        if hex.len() != 32 || !hex.starts_with("00000000000000000000ffff") {
            return None;
        }
        let v = u32::from_str_radix(&hex[24..], 16).ok()?;
        Some(std::net::Ipv4Addr::from(v))
    }
}

/// One network interface ([`paths::netdev_dir`]).
#[derive(Clone, Debug, Default)]
pub struct Netdev {
    /// `eth0`, `ib0`.
    pub name: String,
    /// MTU, bytes.
    pub mtu: Option<u32>,
    /// ARP hardware type: 1 Ethernet, 32 InfiniBand (IPoIB), 772 loopback.
    pub hw_type: Option<u32>,
    /// Link speed, Mb/s (`None`: -1 or absent).
    pub speed_mbps: Option<u64>,
    /// IPoIB mode: `datagram` or `connected`.
    pub mode: Option<String>,
    /// `dev_port` (0-based port of a multi-port function), falling back to `dev_id`.
    pub dev_port: Option<u32>,
    /// The PCI function, resolved.
    pub pci: Option<PathBuf>,
}

/// ARPHRD_INFINIBAND: an IPoIB interface.
pub const HW_TYPE_INFINIBAND: u32 = 32;

/// The RDMA devices under `root`, by name.
pub fn devices(root: &SystemTree) -> Vec<Device> {
    entries(root, paths::CLASS_INFINIBAND).iter().map(|n| Device::read(root, n)).collect()
}

/// The network interfaces under `root`, by name.
pub fn netdevs(root: &SystemTree) -> Vec<Netdev> {
    entries(root, paths::CLASS_NET).iter().map(|n| Netdev::read(root, n)).collect()
}

/// Whether `root` has the RDMA devices' class folder at all (an RDMA stack loaded).
pub fn rdma_class_exists(root: &SystemTree) -> bool {
    root.join(paths::CLASS_INFINIBAND).is_dir()
}

impl Device {
    /// RDMA device `name` under `root`. Missing files give empty fields, never an error.
    pub fn read(root: &SystemTree, name: &str) -> Device {
        let dir = paths::device_dir(name);
        let pci_dir = dir.join("device");
        let pci = fs::canonicalize(root.join(&pci_dir)).ok().filter(|_| {
            // A soft device has no `device` link (rxe has `parent`, its netdev).
            root.join(pci_dir.join("vendor")).exists()
        });
        let hex = |file: &str| {
            trimmed(root, pci_dir.join(file))
                .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        };
        let soft = pci.is_none()
            && (root.join(dir.join("parent")).exists()
                || name.starts_with("rxe")
                || name.starts_with("siw"));
        // A soft device has no PCI ids: its name or its being soft names the module.
        let soft_vendor = if name.starts_with("siw") {
            Some(decode::SIW_VENDOR_ID)
        } else {
            soft.then_some(decode::RXE_VENDOR_ID)
        };
        let (vendor, device) = (hex("vendor"), hex("device"));
        let model = match (vendor, device) {
            (Some(v), Some(d)) => decode::pci_model(v, d),
            _ => soft_vendor.and_then(|v| decode::model(v, 0)),
        };
        let ports = entries(root, dir.join("ports"))
            .iter()
            .filter_map(|p| p.parse::<u8>().ok())
            .map(|p| Port::read(root, name, p))
            .collect();
        let pcie = pci.as_ref().and_then(|_| Pcie::read(root, &pci_dir));
        Device {
            driver: driver(root, name, vendor.or(soft_vendor).unwrap_or(0)),
            name: name.to_string(),
            model,
            fw_ver: word_in(root, dir.join("fw_ver")),
            node_type: word_in(root, dir.join("node_type")).map(word),
            soft,
            pcie: pcie.filter(|p| p.current_gts().is_some() || p.current_width.is_some()),
            numa_node: pci.as_ref().and_then(|_| numa_node(root, name)),
            pci,
            ports,
        }
    }
}

/// The NUMA node of RDMA device `name`'s PCI function (`device/numa_node`); `None` when
/// sysfs says -1 (no node, or a soft device) or has no file.
pub fn numa_node(root: &SystemTree, name: &str) -> Option<u32> {
    let n = number::<i64>(root, paths::device_dir(name).join("device/numa_node"))?;
    u32::try_from(n).ok()
}

/// Board id of RDMA device `name` (`board_id`: Mellanox's PSID, `MT_1090120019`), where
/// the driver provides one.
pub fn board_id(root: &SystemTree, name: &str) -> Option<String> {
    plain(name).then(|| word_in(root, paths::device_dir(name).join("board_id"))).flatten()
}

/// The kernel driver of RDMA device `name`: the basename of its `device/driver` link
/// (`mlx4_core`). Soft devices have no such link (rxe0 is a virtual device, whose only
/// own attribute is `parent`, its netdev), so their vendor id names their module:
/// `rdma_rxe` for soft-RoCE, `siw` for soft-iWARP.
pub fn driver(root: &SystemTree, name: &str, vendor_id: u32) -> Option<String> {
    let link = root.join(paths::device_dir(name).join("device/driver"));
    if let Ok(target) = fs::read_link(link) {
        return target.file_name().map(|n| clean(&n.to_string_lossy())).filter(|n| !n.is_empty());
    }
    match vendor_id {
        decode::RXE_VENDOR_ID => Some("rdma_rxe".to_string()),
        decode::SIW_VENDOR_ID => Some("siw".to_string()),
        _ => None,
    }
}

/// A name that is one path component (Linux forbids '/' in device and interface names).
fn plain(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && name != "." && name != ".."
}

/// `1: DOWN` → `DOWN`.
pub(super) fn word(text: String) -> String {
    text.split_once(": ").map_or(text.clone(), |(_, w)| w.trim().to_string())
}

impl Port {
    /// Port `port` of RDMA device `name` under `root`, with its valid GIDs.
    pub fn read(root: &SystemTree, name: &str, port: u8) -> Port {
        let dir = paths::port_dir(name, port);
        let rate = word_in(root, dir.join("rate"));
        let (rate_gbps, lanes, speed) = rate.as_deref().map(parse_rate).unwrap_or_default();
        let gids = entries(root, dir.join("gids"))
            .iter()
            .filter_map(|i| {
                let index: u32 = i.parse().ok()?;
                let raw = word_in(root, dir.join("gids").join(i))?;
                // Unused entries read as zeros and have no type (most of a table: not
                // asked for it).
                if raw.chars().all(|c| c == '0' || c == ':') {
                    return None;
                }
                let gid_type = word_in(root, dir.join("gid_attrs/types").join(i))?;
                let gid_type = match gid_type.as_str() {
                    "IB/RoCE v1" => "RoCE v1".to_string(),
                    "RoCE v2" => "RoCE v2".to_string(),
                    other => other.to_string(),
                };
                Some(Gid {
                    index,
                    raw,
                    gid_type,
                    netdev: word_in(root, dir.join("gid_attrs/ndevs").join(i)),
                })
            })
            .collect();
        Port {
            port,
            state: word_in(root, dir.join("state")).map(word).unwrap_or_default(),
            phys_state: word_in(root, dir.join("phys_state")).map(word).unwrap_or_default(),
            link_layer: word_in(root, dir.join("link_layer")).unwrap_or_default(),
            rate_gbps,
            lanes,
            speed,
            active_mtu: None,
            gids,
        }
    }
}

/// sysfs `rate`: `56 Gb/sec (4X FDR)` → (56, 4, "FDR"); `2.5 Gb/sec (1X SDR)`.
pub fn parse_rate(text: &str) -> (Option<f64>, Option<u32>, Option<String>) {
    let gbps = text.split_whitespace().next().and_then(|n| n.parse().ok());
    let inner = text.split_once('(').and_then(|(_, r)| r.split_once(')')).map(|(i, _)| i);
    let mut lanes = None;
    let mut speed = None;
    if let Some(inner) = inner {
        let mut words = inner.split_whitespace();
        lanes = words.next().and_then(|w| w.strip_suffix('X')).and_then(|n| n.parse().ok());
        speed = words.next().map(str::to_string);
    }
    (gbps, lanes, speed)
}

impl Netdev {
    /// Network interface `name` under `root`; a name that is not one path component
    /// reads as having no files.
    pub fn read(root: &SystemTree, name: &str) -> Netdev {
        if !plain(name) {
            return Netdev { name: name.to_string(), ..Netdev::default() };
        }
        let dir = paths::netdev_dir(name);
        let pci = fs::canonicalize(root.join(dir.join("device")))
            .ok()
            .filter(|p| p.join("vendor").exists());
        let hex_or_dec = |text: String| {
            text.strip_prefix("0x")
                .map_or_else(|| text.parse().ok(), |h| u32::from_str_radix(h, 16).ok())
        };
        Netdev {
            name: name.to_string(),
            mtu: number(root, dir.join("mtu")),
            hw_type: number(root, dir.join("type")),
            speed_mbps: number::<i64>(root, dir.join("speed")).and_then(|s| u64::try_from(s).ok()),
            mode: word_in(root, dir.join("mode")),
            dev_port: trimmed(root, dir.join("dev_port"))
                .and_then(hex_or_dec)
                .filter(|&p| p > 0)
                .or_else(|| trimmed(root, dir.join("dev_id")).and_then(hex_or_dec)),
            pci,
        }
    }
}

/// The RoCE active MTU the kernel gives a port over a netdev of `mtu` bytes: the
/// largest IB MTU that fits after the RoCE headers (mlx4's `iboe_get_mtu` subtracts
/// GRH, BTH, extended headers and ICRC, 88 bytes; rxe a similar header allowance).
pub fn roce_mtu_for(netdev_mtu: u32) -> Option<u32> {
    let room = netdev_mtu.checked_sub(88)?;
    [4096, 2048, 1024, 512, 256].into_iter().find(|&m| m <= room)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_as_the_kernel_prints_them() {
        assert_eq!(parse_rate("56 Gb/sec (4X FDR)"), (Some(56.0), Some(4), Some("FDR".into())));
        assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)"), (Some(2.5), Some(1), Some("SDR".into())));
        assert_eq!(parse_rate("40 Gb/sec (4X QDR)").1, Some(4));
        assert_eq!(parse_rate("garbage"), (None, None, None));
    }

    #[test]
    fn roce_mtu_follows_the_netdev() {
        assert_eq!(roce_mtu_for(1500), Some(1024));
        assert_eq!(roce_mtu_for(9000), Some(4096));
        assert_eq!(roce_mtu_for(4200), Some(4096));
        assert_eq!(roce_mtu_for(2100), Some(1024));
        assert_eq!(roce_mtu_for(65536), Some(4096));
        assert_eq!(roce_mtu_for(60), None);
    }

    #[test]
    fn ipv4_gids() {
        let g = Gid { raw: "0000:0000:0000:0000:0000:ffff:c612:0101".into(), ..Default::default() };
        assert_eq!(g.ipv4(), Some([198, 18, 1, 1].into()));
        let g = Gid { raw: "fe80:0000:0000:0000:0202:c9ff:fe00:0001".into(), ..Default::default() };
        assert_eq!(g.ipv4(), None);
    }

    #[test]
    fn a_devices_numa_node_board_and_driver() {
        let root = std::env::temp_dir().join(format!("rdmabench-device-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let write = |p: PathBuf, v: &str| {
            let p = root.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, v).unwrap();
        };
        write(paths::device_dir("mlx4_0").join("device/numa_node"), "1\n");
        write(paths::device_dir("mlx4_0").join("board_id"), "MT_1090120019\n");
        write(paths::device_dir("rxe0").join("device/numa_node"), "-1\n");
        let tree = SystemTree::new(&root);
        assert_eq!(numa_node(&tree, "mlx4_0"), Some(1));
        assert_eq!(numa_node(&tree, "rxe0"), None, "-1: no node");
        assert_eq!(numa_node(&tree, "absent"), None);
        assert_eq!(board_id(&tree, "mlx4_0").as_deref(), Some("MT_1090120019"));
        assert_eq!(board_id(&tree, "../mlx4_0"), None, "not one component");
        assert_eq!(driver(&tree, "rxe0", decode::RXE_VENDOR_ID).as_deref(), Some("rdma_rxe"));
        assert_eq!(driver(&tree, "mlx4_0", 0x02c9), None);
        let _ = fs::remove_dir_all(&root);
    }
}
