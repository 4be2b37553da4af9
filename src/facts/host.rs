//! What the host's checks judge ([`HostFacts`]: doctor's and health's view of a
//! Linux host), and who the host is ([`Identity`]: a result's environment), read under
//! a root directory. Reading and judging are apart: these are plain data,
//! [`crate::doctor::checks`] judges them.

use std::path::Path;

use super::cpus::{numa_nodes, refused_unless_within, MAX_CPUS};
use super::device::{self, Device, Netdev};
use super::{entries, number, paths, trimmed, word_in, SystemTree};
use crate::text::clean;

/// Everything the Linux checks judge.
#[derive(Clone, Debug, Default)]
pub struct HostFacts {
    /// The RDMA devices, by name.
    pub nics: Vec<Device>,
    /// Every network interface.
    pub netdevs: Vec<Netdev>,
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

impl HostFacts {
    /// Reads the host under `root`. Missing files give empty facts, never an error:
    /// the checks say N/A for what they cannot see (the tree keeps any file it refused).
    pub fn read(root: &SystemTree) -> HostFacts {
        let (memlock, memlock_known) = memlock(root);
        HostFacts {
            nics: device::devices(root),
            netdevs: device::netdevs(root),
            governors: governors(root),
            idle_states: idle_states(root),
            numa_nodes: numa_nodes(root),
            allowed_cpus: status_field(root, "Cpus_allowed_list").and_then(|l| {
                let mut left = MAX_CPUS;
                refused_unless_within(root, Path::new(paths::SELF_STATUS), &l, &mut left)
            }),
            memlock,
            memlock_known,
            cap_ipc_lock: status_field(root, "CapEff")
                .and_then(|c| u64::from_str_radix(c.trim(), 16).ok())
                .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0),
            hugepages: trimmed(root, paths::PROC_MEMINFO).and_then(|m| hugepages(&m)),
        }
    }

    /// The netdev named `name`.
    pub fn netdev(&self, name: &str) -> Option<&Netdev> {
        self.netdevs.iter().find(|n| n.name == name)
    }
}

/// linux/capability.h.
const CAP_IPC_LOCK: u32 = 14;

fn governors(root: &SystemTree) -> Vec<(usize, String)> {
    entries(root, paths::SYSTEM_CPU)
        .iter()
        .filter_map(|c| {
            let n: usize = c.strip_prefix("cpu")?.parse().ok()?;
            let g = word_in(root, paths::cpu_dir(c).join("cpufreq/scaling_governor"))?;
            Some((n, g))
        })
        .collect()
}

fn idle_states(root: &SystemTree) -> Vec<IdleState> {
    let dir = paths::cpu_dir("cpu0").join("cpuidle");
    entries(root, &dir)
        .iter()
        .filter(|s| s.starts_with("state"))
        .filter_map(|s| {
            Some(IdleState {
                name: word_in(root, dir.join(s).join("name"))?,
                latency_us: number(root, dir.join(s).join("latency"))?,
                disabled: trimmed(root, dir.join(s).join("disable")).is_some_and(|d| d == "1"),
            })
        })
        .collect()
}

/// A field of `proc/self/status`.
fn status_field(root: &SystemTree, field: &str) -> Option<String> {
    let text = trimmed(root, paths::SELF_STATUS)?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(|v| v.trim().to_string()))
}

/// The huge pages of a `proc/meminfo` text; `None` when it has no `HugePages_Total`
/// (a kernel without hugetlbfs).
fn hugepages(meminfo: &str) -> Option<HugePages> {
    let field = |name: &str| meminfo_field(meminfo, name);
    Some(HugePages {
        total: field("HugePages_Total")?,
        free: field("HugePages_Free").unwrap_or(0),
        size: field("Hugepagesize").unwrap_or(0).saturating_mul(1024),
    })
}

/// A number of a `proc/meminfo` text (`Hugepagesize:    2048 kB` gives 2048).
pub fn meminfo_field(meminfo: &str, name: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let value = l.strip_prefix(name)?.strip_prefix(':')?.split_whitespace().next()?;
        value.parse::<u64>().ok()
    })
}

/// RLIMIT_MEMLOCK's soft limit from `proc/self/limits`: (bytes, whether the line was
/// there). `unlimited` gives (None, true).
fn memlock(root: &SystemTree) -> (Option<u64>, bool) {
    let Some(text) = trimmed(root, paths::SELF_LIMITS) else { return (None, false) };
    let Some(line) = text.lines().find(|l| l.starts_with("Max locked memory")) else {
        return (None, false);
    };
    let soft = line["Max locked memory".len()..].split_whitespace().next();
    (soft.and_then(|s| s.parse().ok()), true)
}

/// Who the host is: what a result's environment says of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Identity {
    /// `proc/sys/kernel/hostname`.
    pub hostname: Option<String>,
    /// `proc/sys/kernel/osrelease`.
    pub kernel: Option<String>,
    /// `PRETTY_NAME` of os-release, else its `NAME`, else `Linux`; `None` without it.
    pub os: Option<String>,
    /// `proc/cpuinfo`'s first model.
    pub cpu: CpuInfo,
    /// cpufreq governor of CPU 0; `None` without cpufreq (VMs, `intel_idle` only).
    pub governor: Option<String>,
}

impl Identity {
    /// The host under `root`; what cannot be read is `None` (the tree keeps any file it
    /// refused).
    pub fn read(root: &SystemTree) -> Identity {
        Identity {
            hostname: word_in(root, paths::HOSTNAME),
            kernel: word_in(root, paths::OSRELEASE),
            os: os_release(root),
            cpu: root
                .read(paths::PROC_CPUINFO)
                .map_or_else(CpuInfo::default, |t| CpuInfo::parse(&t)),
            governor: word_in(root, paths::cpu_dir("cpu0").join("cpufreq/scaling_governor")),
        }
    }
}

/// What `/proc/cpuinfo` says about the CPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuInfo {
    /// `model name` of the first CPU (x86, most arm64 kernels), or `cpu` (POWER).
    pub model: Option<String>,
    /// `processor` entries.
    pub count: u32,
}

impl CpuInfo {
    /// A `proc/cpuinfo` text's.
    pub fn parse(text: &str) -> CpuInfo {
        let mut info = CpuInfo::default();
        let mut power_cpu = None;
        for (key, value) in text.lines().filter_map(|l| l.split_once(':')) {
            let value = clean(value);
            match key.trim() {
                "processor" => info.count += 1,
                "model name" if info.model.is_none() && !value.is_empty() => {
                    info.model = Some(value)
                }
                "cpu" if power_cpu.is_none() && !value.is_empty() => power_cpu = Some(value),
                _ => {}
            }
        }
        info.model = info.model.or(power_cpu);
        info
    }
}

/// `PRETTY_NAME` of `etc/os-release` (or `usr/lib/os-release`, its fallback), else its
/// `NAME`, else `Linux` as the os-release specification says; `None` without the file.
fn os_release(root: &SystemTree) -> Option<String> {
    let text = paths::OS_RELEASE.iter().find_map(|rel| root.read(rel))?;
    let value = |want: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == want)
            .map(|(_, v)| clean(&unquote(v.trim())))
            .filter(|v| !v.is_empty())
    };
    Some(value("PRETTY_NAME").or_else(|| value("NAME")).unwrap_or_else(|| "Linux".to_string()))
}

/// An os-release value without its shell quoting: `"…"` with backslash escapes, `'…'`
/// taken literally, or a bare word.
fn unquote(value: &str) -> String {
    let quoted = |q: char| value.len() >= 2 && value.starts_with(q) && value.ends_with(q);
    if quoted('\'') {
        return value[1..value.len() - 1].to_string();
    }
    let inner = if quoted('"') { &value[1..value.len() - 1] } else { value };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        out.extend(if c == '\\' { chars.next() } else { Some(c) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_gives_the_first_model_and_the_count() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
                    model name\t: Intel(R) Xeon(R) CPU   E5-2680 v2 @ 2.80GHz\ncpu MHz\t\t: 1200.000\n\n\
                    processor\t: 1\nmodel name\t: other\n";
        let info = CpuInfo::parse(text);
        assert_eq!(info.model.as_deref(), Some("Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz"));
        assert_eq!(info.count, 2);
    }

    #[test]
    fn cpuinfo_without_model_name_uses_powers_cpu_or_nothing() {
        let power = CpuInfo::parse("processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n");
        assert_eq!(power.model.as_deref(), Some("POWER9 (raw), altivec supported"));
        let arm = CpuInfo::parse("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n");
        assert_eq!(arm, CpuInfo { model: None, count: 1 });
    }

    #[test]
    fn os_release_values_lose_their_quotes() {
        assert_eq!(unquote("\"Debian GNU/Linux 12 (bookworm)\""), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(unquote("'It''s \\ raw'"), "It''s \\ raw");
        assert_eq!(unquote("\"say \\\"hi\\\" \\$x\""), "say \"hi\" $x");
        assert_eq!(unquote("Fedora"), "Fedora");
        assert_eq!(unquote("\""), "\"");
    }

    #[test]
    fn meminfo_fields_are_numbers() {
        let text =
            "MemTotal:       16318128 kB\nHugePages_Total:       4\nHugepagesize:       2048 kB\n";
        assert_eq!(meminfo_field(text, "Hugepagesize"), Some(2048));
        assert_eq!(meminfo_field(text, "HugePages_Free"), None);
        let hp = hugepages(text).unwrap();
        assert_eq!((hp.total, hp.free, hp.size), (4, 0, 2 << 20));
        assert_eq!(hugepages("MemTotal: 1 kB\n"), None);
    }
}
