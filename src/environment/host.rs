//! The host part of an [`Environment`]: names, kernel, distribution, CPU and governor,
//! read from `/proc`, `/sys` and `/etc/os-release` under a root directory.

use std::path::Path;

use super::{clean, Environment};
use crate::facts::{Identity, SystemTree};

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
        let host = Identity::read(root);
        let unknown = || UNKNOWN.to_string();
        Environment {
            hostname: host.hostname.unwrap_or_else(unknown),
            kernel: host.kernel.unwrap_or_else(unknown),
            os: host.os.unwrap_or_else(unknown),
            cpu_model: host.cpu.model.unwrap_or_else(unknown),
            cpus: if host.cpu.count > 0 { host.cpu.count } else { std_cpus() },
            governor: host.governor,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_host_reads_what_this_machine_has() {
        let env = Environment::host();
        assert!(!env.hostname.is_empty() && env.hostname != UNKNOWN);
        assert!(env.cpus >= 1);
        assert_eq!(env.rdmabench, env!("CARGO_PKG_VERSION"));
        assert!(env.device.is_none() && env.interface.is_none());
        if cfg!(target_os = "linux") {
            let release = crate::facts::live().read(crate::facts::paths::OSRELEASE).unwrap();
            assert_eq!(env.kernel, release.trim());
            assert_ne!(env.os, UNKNOWN, "no /etc/os-release here?");
        }
    }
}
