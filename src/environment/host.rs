//! The host part of an [`Environment`]: names, kernel, distribution, CPU and governor,
//! read from `/proc`, `/sys` and `/etc/os-release` under a root directory.

use std::path::Path;

use super::{clean, read_clean, Environment};
use crate::files::SystemTree;

/// What `unknown` text fields say.
const UNKNOWN: &str = "unknown";

impl Environment {
    /// This host, without device or interface: on Linux read from `/`
    /// ([`Environment::host_at`]); elsewhere what `std` knows, `unknown` or `None` for
    /// the rest.
    pub fn host() -> Environment {
        if cfg!(target_os = "linux") {
            Environment::host_at(Path::new("/"))
        } else {
            Environment::from_std()
        }
    }

    /// The host whose `/proc`, `/sys` and `/etc` are under `root`. A file that cannot
    /// be read gives `unknown` (text) or `None`; the CPU count falls back to
    /// [`std::thread::available_parallelism`] when `proc/cpuinfo` lists none.
    pub fn host_at(root: &Path) -> Environment {
        Environment::host_in(&SystemTree::new(root))
    }

    /// [`Environment::host_at`] the root of `root`, which keeps any file it refused.
    pub fn host_in(root: &SystemTree) -> Environment {
        let cpu = CpuInfo::read(root);
        let unknown = || UNKNOWN.to_string();
        Environment {
            hostname: read_clean(root, "proc/sys/kernel/hostname").unwrap_or_else(unknown),
            kernel: read_clean(root, "proc/sys/kernel/osrelease").unwrap_or_else(unknown),
            os: os_release(root).unwrap_or_else(unknown),
            cpu_model: cpu.model.unwrap_or_else(unknown),
            cpus: if cpu.count > 0 { cpu.count } else { std_cpus() },
            governor: read_clean(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            rdmabench: env!("CARGO_PKG_VERSION").to_string(),
            device: None,
            interface: None,
        }
    }

    /// What `std` alone tells, for platforms without `/proc`.
    fn from_std() -> Environment {
        let hostname = ["COMPUTERNAME", "HOSTNAME"].iter().find_map(|v| std::env::var(v).ok());
        let mut os = std::env::consts::OS.chars();
        let os_name: String =
            os.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(os).collect();
        Environment {
            hostname: hostname.map_or_else(|| UNKNOWN.to_string(), |h| clean(&h)),
            // Windows' build number (and wine's version under wine).
            kernel: ffi::os::windows_version().unwrap_or_else(|| UNKNOWN.to_string()),
            os: os_name,
            cpu_model: ffi::os::cpu_model().map_or_else(|| UNKNOWN.to_string(), |m| clean(&m)),
            cpus: std_cpus(),
            governor: None,
            rdmabench: env!("CARGO_PKG_VERSION").to_string(),
            device: None,
            interface: None,
        }
    }
}

/// CPUs this process may use, as `std` counts them (1 if it cannot tell).
fn std_cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

/// What `/proc/cpuinfo` says about the CPUs.
#[derive(Debug, Default, PartialEq)]
struct CpuInfo {
    /// `model name` of the first CPU (x86, most arm64 kernels), or `cpu` (POWER).
    model: Option<String>,
    /// `processor` entries.
    count: u32,
}

impl CpuInfo {
    fn read(root: &SystemTree) -> CpuInfo {
        root.read("proc/cpuinfo").map_or_else(CpuInfo::default, |t| CpuInfo::parse(&t))
    }

    fn parse(text: &str) -> CpuInfo {
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
    let text = ["etc/os-release", "usr/lib/os-release"].iter().find_map(|rel| root.read(rel))?;
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
    fn real_host_reads_what_this_machine_has() {
        let env = Environment::host();
        assert!(!env.hostname.is_empty() && env.hostname != UNKNOWN);
        assert!(env.cpus >= 1);
        assert_eq!(env.rdmabench, env!("CARGO_PKG_VERSION"));
        assert!(env.device.is_none() && env.interface.is_none());
        if cfg!(target_os = "linux") {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
            assert_eq!(env.kernel, release.trim());
            assert_ne!(env.os, UNKNOWN, "no /etc/os-release here?");
        }
    }
}
