//! What `doctor` looks at on Linux, read from `/sys` and `/proc` under a root directory
//! (`/` on a live host; a tree `doctor --capture` copied, or a test fixture). Reading
//! and judging are apart: [`HostFacts`] is plain data, [`super::checks`] judges it.
//!
//! The layout is the kernel's (Documentation/ABI/stable/sysfs-class-infiniband,
//! sysfs-class-net, sysfs-devices-system-cpu, proc(5)); docs/qualify.md lists each file.

use std::fs;
use std::path::{Path, PathBuf};

use crate::files::SystemTree;
use crate::inventory::decode;
use crate::spec::rules::{cpu_list_within, MAX_CPUS};
use crate::text::clean;

/// Everything the Linux checks judge.
#[derive(Clone, Debug, Default)]
pub struct HostFacts {
    /// The RDMA devices, by name.
    pub nics: Vec<NicFacts>,
    /// Every network interface.
    pub netdevs: Vec<NetdevFacts>,
    /// Each CPU's frequency governor (`cpuN`, governor), where cpufreq exists.
    pub governors: Vec<(usize, String)>,
    /// The idle states of CPU 0 (cpuidle), shallowest first.
    pub idle_states: Vec<IdleState>,
    /// NUMA nodes and their CPUs.
    pub numa_nodes: Vec<(u32, Vec<usize>)>,
    /// The CPUs this process may run on (`Cpus_allowed_list`), i.e. where a test runs.
    pub allowed_cpus: Option<Vec<usize>>,
    /// RLIMIT_MEMLOCK's soft limit, bytes; `None`: unlimited or unknown (see
    /// [`HostFacts::memlock_known`]).
    pub memlock: Option<u64>,
    /// Whether `proc/self/limits` had a locked-memory line.
    pub memlock_known: bool,
    /// CAP_IPC_LOCK in the effective set: registration ignores the limit.
    pub cap_ipc_lock: bool,
    /// The default-size huge pages of `proc/meminfo`; `None` without the file.
    pub hugepages: Option<HugePages>,
}

/// `HugePages_Total`, `HugePages_Free` and `Hugepagesize` of `proc/meminfo`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HugePages {
    /// Pages reserved (`vm.nr_hugepages`).
    pub total: u64,
    /// Of which free.
    pub free: u64,
    /// Bytes per page.
    pub size: u64,
}

/// One RDMA device (`sys/class/infiniband/NAME`).
#[derive(Clone, Debug, Default)]
pub struct NicFacts {
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
    /// PCIe link: (current GT/s, current width, max GT/s, max width).
    pub pcie: Option<PcieFacts>,
    /// NUMA node of the PCI function (`None`: -1 or absent).
    pub numa_node: Option<u32>,
    /// The ports, from 1.
    pub ports: Vec<PortFacts>,
}

/// The PCIe link as numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PcieFacts {
    /// Negotiated GT/s per lane.
    pub current_gts: Option<f64>,
    /// Negotiated lanes.
    pub current_width: Option<u32>,
    /// Best GT/s the device supports.
    pub max_gts: Option<f64>,
    /// Most lanes the device supports.
    pub max_width: Option<u32>,
}

/// One port of a device.
#[derive(Clone, Debug, Default)]
pub struct PortFacts {
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
    /// Valid GID entries: (index, GID text, type `IB`/`RoCE v1`/`RoCE v2`, netdev).
    pub gids: Vec<GidFacts>,
}

/// One valid GID entry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GidFacts {
    /// Table index.
    pub index: u32,
    /// As sysfs prints it (`0000:0000:0000:0000:0000:ffff:c612:0101`).
    pub raw: String,
    /// `IB`, `RoCE v1` or `RoCE v2`.
    pub gid_type: String,
    /// The netdev it belongs to (RoCE).
    pub netdev: Option<String>,
}

impl GidFacts {
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

/// One network interface (`sys/class/net/NAME`).
#[derive(Clone, Debug, Default)]
pub struct NetdevFacts {
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

/// A cpuidle state of CPU 0.
#[derive(Clone, Debug, PartialEq)]
pub struct IdleState {
    /// `POLL`, `C1`, `C6`, …
    pub name: String,
    /// Exit latency, µs.
    pub latency_us: u64,
    /// Whether the state is disabled (`disable` = 1).
    pub disabled: bool,
}

/// ARPHRD_INFINIBAND: an IPoIB interface.
pub const HW_TYPE_INFINIBAND: u32 = 32;

/// A file's text, trimmed, to parse; `None` when unreadable or empty.
fn read(root: &SystemTree, rel: impl AsRef<Path>) -> Option<String> {
    let text = root.read(rel)?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// A file's text to show: [`clean`]ed, so whatever the file holds prints inert.
fn text(root: &SystemTree, rel: impl AsRef<Path>) -> Option<String> {
    let text = clean(&root.read(rel)?);
    (!text.is_empty()).then_some(text)
}

fn number<T: std::str::FromStr>(root: &SystemTree, rel: impl AsRef<Path>) -> Option<T> {
    read(root, rel)?.parse().ok()
}

/// `1: DOWN` → `DOWN`.
fn word(text: String) -> String {
    text.split_once(": ").map_or(text.clone(), |(_, w)| w.trim().to_string())
}

/// The names in `root/rel`, sorted (none when it is not a directory).
pub(super) fn entries(root: &SystemTree, rel: &str) -> Vec<String> {
    // Names are shown, so they are cleaned too (a name that needed it then reads as
    // having no files, and its checks say N/A).
    // A directory that resolves out of the tree lists nothing.
    let Ok(dir) = root.resolve(rel) else { return Vec::new() };
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| clean(&e.file_name().to_string_lossy())).collect())
        .unwrap_or_default();
    names.sort_by_key(|a| natural(a));
    names
}

/// Sort key: `cpu10` after `cpu9`.
fn natural(name: &str) -> (String, u64) {
    let digits = name.trim_start_matches(|c: char| !c.is_ascii_digit());
    let prefix = &name[..name.len() - digits.len()];
    (prefix.to_string(), digits.parse().unwrap_or(0))
}

impl HostFacts {
    /// Reads the host under `root`. Missing files give empty facts, never an error:
    /// the checks say N/A for what they cannot see (the tree keeps any file it refused).
    pub fn read(root: &SystemTree) -> HostFacts {
        let (memlock, memlock_known) = memlock(root);
        HostFacts {
            nics: entries(root, "sys/class/infiniband").iter().map(|n| nic(root, n)).collect(),
            netdevs: entries(root, "sys/class/net").iter().map(|n| netdev(root, n)).collect(),
            governors: governors(root),
            idle_states: idle_states(root),
            numa_nodes: numa_nodes(root),
            allowed_cpus: status_field(root, "Cpus_allowed_list").and_then(|l| {
                let mut left = MAX_CPUS;
                cpu_list(root, "proc/self/status", &l, &mut left)
            }),
            memlock,
            memlock_known,
            cap_ipc_lock: status_field(root, "CapEff")
                .and_then(|c| u64::from_str_radix(c.trim(), 16).ok())
                .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0),
            hugepages: read(root, "proc/meminfo").and_then(|m| hugepages(&m)),
        }
    }

    /// The netdev named `name`.
    pub fn netdev(&self, name: &str) -> Option<&NetdevFacts> {
        self.netdevs.iter().find(|n| n.name == name)
    }
}

/// linux/capability.h.
const CAP_IPC_LOCK: u32 = 14;

fn nic(root: &SystemTree, name: &str) -> NicFacts {
    let dir = PathBuf::from("sys/class/infiniband").join(name);
    let pci_dir = dir.join("device");
    let pci = fs::canonicalize(root.join(&pci_dir)).ok().filter(|_| {
        // A soft device has no `device` link (rxe has `parent`, its netdev).
        root.join(pci_dir.join("vendor")).exists()
    });
    let hex = |file: &str| {
        read(root, pci_dir.join(file))
            .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
    };
    let soft = pci.is_none()
        && (root.join(dir.join("parent")).exists()
            || name.starts_with("rxe")
            || name.starts_with("siw"));
    let model = match (hex("vendor"), hex("device")) {
        (Some(v), Some(d)) => decode::pci_model(v, d),
        _ if name.starts_with("siw") => decode::model(decode::SIW_VENDOR_ID, 0),
        _ if soft => decode::model(decode::RXE_VENDOR_ID, 0),
        _ => None,
    };
    let ports = entries(root, &dir.join("ports").to_string_lossy())
        .iter()
        .filter_map(|p| p.parse::<u8>().ok())
        .map(|p| port(root, &dir, p))
        .collect();
    NicFacts {
        name: name.to_string(),
        model,
        fw_ver: text(root, dir.join("fw_ver")),
        node_type: text(root, dir.join("node_type")).map(word),
        soft,
        pcie: pci.as_ref().and_then(|_| pcie(root, &pci_dir)),
        numa_node: pci
            .as_ref()
            .and_then(|_| number::<i64>(root, pci_dir.join("numa_node")))
            .and_then(|n| u32::try_from(n).ok()),
        pci,
        ports,
    }
}

fn pcie(root: &SystemTree, dev: &Path) -> Option<PcieFacts> {
    let gts = |file: &str| read(root, dev.join(file)).and_then(|s| parse_gts(&s));
    let p = PcieFacts {
        current_gts: gts("current_link_speed"),
        current_width: number(root, dev.join("current_link_width")),
        max_gts: gts("max_link_speed"),
        max_width: number(root, dev.join("max_link_width")),
    };
    (p.current_gts.is_some() || p.current_width.is_some()).then_some(p)
}

/// `8.0 GT/s PCIe` (or the older `8 GT/s`, `5.0 GT/s`) → 8.0.
pub fn parse_gts(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok().filter(|&v: &f64| v > 0.0)
}

fn port(root: &SystemTree, dev: &Path, port: u8) -> PortFacts {
    let dir = dev.join("ports").join(port.to_string());
    let rate = text(root, dir.join("rate"));
    let (rate_gbps, lanes, speed) = rate.as_deref().map(parse_rate).unwrap_or_default();
    let gids = entries(root, &dir.join("gids").to_string_lossy())
        .iter()
        .filter_map(|i| {
            let index: u32 = i.parse().ok()?;
            let raw = text(root, dir.join("gids").join(i))?;
            // Unused entries read as zeros and have no type.
            let gid_type = text(root, dir.join("gid_attrs/types").join(i))?;
            if raw.chars().all(|c| c == '0' || c == ':') {
                return None;
            }
            let gid_type = match gid_type.as_str() {
                "IB/RoCE v1" => "RoCE v1".to_string(),
                "RoCE v2" => "RoCE v2".to_string(),
                other => other.to_string(),
            };
            Some(GidFacts {
                index,
                raw,
                gid_type,
                netdev: text(root, dir.join("gid_attrs/ndevs").join(i)),
            })
        })
        .collect();
    PortFacts {
        port,
        state: text(root, dir.join("state")).map(word).unwrap_or_default(),
        phys_state: text(root, dir.join("phys_state")).map(word).unwrap_or_default(),
        link_layer: text(root, dir.join("link_layer")).unwrap_or_default(),
        rate_gbps,
        lanes,
        speed,
        active_mtu: None,
        gids,
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

fn netdev(root: &SystemTree, name: &str) -> NetdevFacts {
    let dir = PathBuf::from("sys/class/net").join(name);
    let pci =
        fs::canonicalize(root.join(dir.join("device"))).ok().filter(|p| p.join("vendor").exists());
    let hex_or_dec = |text: String| {
        text.strip_prefix("0x")
            .map_or_else(|| text.parse().ok(), |h| u32::from_str_radix(h, 16).ok())
    };
    NetdevFacts {
        name: name.to_string(),
        mtu: number(root, dir.join("mtu")),
        hw_type: number(root, dir.join("type")),
        speed_mbps: number::<i64>(root, dir.join("speed")).and_then(|s| u64::try_from(s).ok()),
        mode: text(root, dir.join("mode")),
        dev_port: read(root, dir.join("dev_port"))
            .and_then(hex_or_dec)
            .filter(|&p| p > 0)
            .or_else(|| read(root, dir.join("dev_id")).and_then(hex_or_dec)),
        pci,
    }
}

fn governors(root: &SystemTree) -> Vec<(usize, String)> {
    entries(root, "sys/devices/system/cpu")
        .iter()
        .filter_map(|c| {
            let n: usize = c.strip_prefix("cpu")?.parse().ok()?;
            let g = text(root, format!("sys/devices/system/cpu/{c}/cpufreq/scaling_governor"))?;
            Some((n, g))
        })
        .collect()
}

fn idle_states(root: &SystemTree) -> Vec<IdleState> {
    let dir = "sys/devices/system/cpu/cpu0/cpuidle";
    entries(root, dir)
        .iter()
        .filter(|s| s.starts_with("state"))
        .filter_map(|s| {
            Some(IdleState {
                name: text(root, format!("{dir}/{s}/name"))?,
                latency_us: number(root, format!("{dir}/{s}/latency"))?,
                disabled: read(root, format!("{dir}/{s}/disable")).is_some_and(|d| d == "1"),
            })
        })
        .collect()
}

/// The NUMA nodes and their CPUs: at most [`MAX_CPUS`] CPUs in all the nodes' lists
/// together (a host's nodes list each CPU once); the first list past it is refused, and
/// the nodes are read no further.
fn numa_nodes(root: &SystemTree) -> Vec<(u32, Vec<usize>)> {
    let mut left = MAX_CPUS;
    let mut nodes = Vec::new();
    for n in entries(root, "sys/devices/system/node") {
        let Some(id) = n.strip_prefix("node").and_then(|i| i.parse::<u32>().ok()) else {
            continue;
        };
        let rel = format!("sys/devices/system/node/{n}/cpulist");
        let Some(text) = root.read(&rel) else { continue };
        let Some(cpus) = cpu_list(root, &rel, &text, &mut left) else { break };
        nodes.push((id, cpus));
    }
    nodes
}

/// A field of `proc/self/status`.
fn status_field(root: &SystemTree, field: &str) -> Option<String> {
    let text = read(root, "proc/self/status")?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(|v| v.trim().to_string()))
}

/// The huge pages of a `proc/meminfo` text; `None` when it has no `HugePages_Total`
/// (a kernel without hugetlbfs).
fn hugepages(meminfo: &str) -> Option<HugePages> {
    let field = |name: &str| {
        meminfo.lines().find_map(|l| {
            let value = l.strip_prefix(name)?.strip_prefix(':')?.split_whitespace().next()?;
            value.parse::<u64>().ok()
        })
    };
    Some(HugePages {
        total: field("HugePages_Total")?,
        free: field("HugePages_Free").unwrap_or(0),
        size: field("Hugepagesize").unwrap_or(0).saturating_mul(1024),
    })
}

/// RLIMIT_MEMLOCK's soft limit from `proc/self/limits`: (bytes, whether the line was
/// there). `unlimited` gives (None, true).
fn memlock(root: &SystemTree) -> (Option<u64>, bool) {
    let Some(text) = read(root, "proc/self/limits") else { return (None, false) };
    let Some(line) = text.lines().find(|l| l.starts_with("Max locked memory")) else {
        return (None, false);
    };
    let soft = line["Max locked memory".len()..].split_whitespace().next();
    (soft.and_then(|s| s.parse().ok()), true)
}

/// `0-3,8,10-11`, the `text` of `root/rel` → its CPUs, taken from `left`
/// ([`cpu_list_within`]); `None` when over the bounds or malformed, which the tree then
/// keeps as refused.
fn cpu_list(root: &SystemTree, rel: &str, text: &str, left: &mut usize) -> Option<Vec<usize>> {
    match cpu_list_within(text, left) {
        Ok(cpus) => Some(cpus),
        Err(why) => {
            root.refuse(rel, why);
            None
        }
    }
}

/// Compact form of a CPU list: `[0,1,2,3,8]` → `0-3,8`.
pub fn cpu_ranges(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        parts.push(if sorted[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", sorted[i])
        });
        i += 1;
    }
    parts.join(",")
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
    fn cpu_lists_round_trip() {
        assert_eq!(cpu_list_within("0-3,8,10-11\n", &mut 64), Ok(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
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
        let g = GidFacts {
            raw: "0000:0000:0000:0000:0000:ffff:c612:0101".into(),
            ..Default::default()
        };
        assert_eq!(g.ipv4(), Some([198, 18, 1, 1].into()));
        let g = GidFacts {
            raw: "fe80:0000:0000:0000:0202:c9ff:fe00:0001".into(),
            ..Default::default()
        };
        assert_eq!(g.ipv4(), None);
    }
}
