//! Every `/sys` and `/proc` path rdmabench reads, once, relative to a root (`/` on a live
//! host; a `doctor --capture` tree or a test fixture otherwise). The kernel's layout:
//! Documentation/ABI/stable/sysfs-class-infiniband, sysfs-class-net,
//! sysfs-devices-system-cpu, proc(5).

use std::path::{Path, PathBuf};

/// The RDMA devices (`NAME/` each).
pub const CLASS_INFINIBAND: &str = "sys/class/infiniband";
/// The network interfaces.
pub const CLASS_NET: &str = "sys/class/net";
/// The CPUs (`cpuN/` each, and `online`, `possible`).
pub const SYSTEM_CPU: &str = "sys/devices/system/cpu";
/// The NUMA nodes (`nodeN/cpulist` each).
pub const SYSTEM_NODE: &str = "sys/devices/system/node";
/// Where a capture puts the PCI functions it copies.
pub const PCI_DEVICES: &str = "sys/devices/pci";
/// The kernel's current clock source.
pub const CLOCKSOURCE: &str = "sys/devices/system/clocksource/clocksource0/current_clocksource";
/// The machine's CPU times.
pub const PROC_STAT: &str = "proc/stat";
/// The CPUs' models and clocks.
pub const PROC_CPUINFO: &str = "proc/cpuinfo";
/// Memory and huge pages.
pub const PROC_MEMINFO: &str = "proc/meminfo";
/// This process's status (`Cpus_allowed_list`, `CapEff`).
pub const SELF_STATUS: &str = "proc/self/status";
/// This process's resource limits (locked memory).
pub const SELF_LIMITS: &str = "proc/self/limits";
/// What this process has mapped (the libibverbs it runs with).
pub const SELF_MAPS: &str = "proc/self/maps";
/// The mounts this process sees (a store's file system).
pub const SELF_MOUNTINFO: &str = "proc/self/mountinfo";
/// The host's name.
pub const HOSTNAME: &str = "proc/sys/kernel/hostname";
/// The kernel's release.
pub const OSRELEASE: &str = "proc/sys/kernel/osrelease";
/// The distribution, and its fallback (os-release(5)).
pub const OS_RELEASE: [&str; 2] = ["etc/os-release", "usr/lib/os-release"];
/// dpkg's package database.
pub const DPKG_STATUS: &str = "var/lib/dpkg/status";
/// The library folders a libibverbs is looked for in, after `<base>/<multiarch>/`.
pub const LIB_DIRS: [&str; 4] = ["usr/lib64", "lib64", "usr/lib", "lib"];
/// The bases whose `*-linux-*` folders are multiarch library folders.
pub const MULTIARCH_BASES: [&str; 2] = ["usr/lib", "lib"];
/// A port's counter folders.
pub const COUNTER_FOLDERS: [&str; 2] = ["counters", "hw_counters"];

/// The host files `doctor --capture` copies besides the per-device, per-interface,
/// per-CPU and per-node ones.
pub const CAPTURED: [&str; 10] = [
    SELF_LIMITS,
    PROC_MEMINFO,
    SELF_STATUS,
    HOSTNAME,
    OSRELEASE,
    PROC_CPUINFO,
    OS_RELEASE[0],
    "sys/module/intel_idle/parameters/max_cstate",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/possible",
];

/// `rel` on this host: `/rel`.
pub fn live(rel: impl AsRef<Path>) -> PathBuf {
    Path::new("/").join(rel)
}

/// `rel` as a message shows it: `/sys/class/infiniband`.
pub fn shown(rel: impl AsRef<Path>) -> String {
    live(rel).display().to_string()
}

/// RDMA device `name`'s folder.
pub fn device_dir(name: &str) -> PathBuf {
    Path::new(CLASS_INFINIBAND).join(name)
}

/// Port `port` of RDMA device `name`.
pub fn port_dir(name: &str, port: u8) -> PathBuf {
    device_dir(name).join("ports").join(port.to_string())
}

/// Network interface `name`'s folder.
pub fn netdev_dir(name: &str) -> PathBuf {
    Path::new(CLASS_NET).join(name)
}

/// The CPU list of NUMA node `n`.
pub fn node_cpulist(n: u32) -> PathBuf {
    Path::new(SYSTEM_NODE).join(format!("node{n}")).join("cpulist")
}

/// CPU `cpu`'s folder (`cpu` is its name: `cpu0`).
pub fn cpu_dir(cpu: &str) -> PathBuf {
    Path::new(SYSTEM_CPU).join(cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_relative_and_show_absolute() {
        assert_eq!(port_dir("rxe0", 1), Path::new("sys/class/infiniband/rxe0/ports/1"));
        assert_eq!(netdev_dir("ib0"), Path::new("sys/class/net/ib0"));
        assert_eq!(node_cpulist(3), Path::new("sys/devices/system/node/node3/cpulist"));
        assert_eq!(cpu_dir("cpu7"), Path::new("sys/devices/system/cpu/cpu7"));
        assert_eq!(shown(CLASS_INFINIBAND), "/sys/class/infiniband");
        assert_eq!(live(PROC_STAT), Path::new("/proc/stat"));
        for rel in CAPTURED.iter().chain(&[CLASS_NET, SYSTEM_NODE, CLOCKSOURCE, SELF_MAPS]) {
            assert!(!rel.starts_with('/'), "{rel}: relative, read under a root");
        }
    }
}
