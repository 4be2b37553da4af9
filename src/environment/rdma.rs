//! The device part of an [`Environment`](super::Environment): what the inventory knows of a
//! device and port, plus its kernel driver (sysfs) and the rdma-core version.

use std::fs;
use std::path::{Path, PathBuf};

use super::{clean, read_clean, DeviceEnvironment, PcieEnvironment};
use crate::files::SystemTree;
use crate::inventory::decode::{RXE_VENDOR_ID, SIW_VENDOR_ID};
use crate::inventory::{DeviceInfo, PcieLink};

impl DeviceEnvironment {
    /// Device `info`, port `port`, as the inventory describes it, with the kernel driver
    /// and rdma-core version read under `root` (`/` in production). A NetworkDirect
    /// adapter is described as [`DeviceEnvironment::from_nd`] does, on `port`. A port the
    /// device does not have gives link layer `unknown` and no rate or MTU.
    ///
    /// The board id is `sys/class/infiniband/<dev>/board_id` (the PSID on Mellanox
    /// cards), where the driver provides one.
    ///
    /// The driver is the basename of the `sys/class/infiniband/<dev>/device/driver` link
    /// (`mlx4_core`). Soft devices have no such link (rxe0 is a virtual device, whose only
    /// own attribute is `parent`, its netdev), so their vendor id names their module:
    /// `rdma_rxe` for soft-RoCE, `siw` for soft-iWARP. See [`rdma_core_version`] for the
    /// rdma-core version.
    pub fn from_inventory(info: &DeviceInfo, port: u8, root: &Path) -> DeviceEnvironment {
        if info.nd.is_some() {
            return DeviceEnvironment { port, ..DeviceEnvironment::from_nd(info) };
        }
        let tree = SystemTree::new(root);
        let board_id = (!info.name.contains('/'))
            .then(|| read_clean(&tree, &format!("sys/class/infiniband/{}/board_id", info.name)))
            .flatten();
        DeviceEnvironment {
            board_id,
            driver: kernel_driver(info, root),
            rdma_core: rdma_core_version(root),
            ..DeviceEnvironment::common(info, port)
        }
    }

    /// A NetworkDirect adapter from its inventory entry, without sysfs: link layer
    /// `NetworkDirect`, the provider (Winsock catalog name and DLL) as driver, port 1 (ND
    /// adapters have no ports; 1 is what `-i` defaults to), no rate, MTU or rdma-core.
    pub fn from_nd(info: &DeviceInfo) -> DeviceEnvironment {
        DeviceEnvironment {
            link_layer: "NetworkDirect".to_string(),
            driver: info.nd.as_ref().map(|nd| clean(&nd.provider)),
            ..DeviceEnvironment::common(info, 1)
        }
    }

    /// The fields every backend takes from the inventory; no driver or rdma-core.
    fn common(info: &DeviceInfo, port: u8) -> DeviceEnvironment {
        let p = info.ports.iter().find(|p| p.port == port);
        DeviceEnvironment {
            name: clean(&info.name),
            model: info.model.as_deref().map(clean),
            firmware: clean(&info.fw_ver),
            board_id: None,
            link_layer: p.map_or_else(|| "unknown".to_string(), |p| clean(&p.link_layer)),
            rate_gbps: p.and_then(|p| p.rate_gbps),
            active_mtu: p.and_then(|p| p.active_mtu),
            pcie: info.pcie.as_ref().map(PcieEnvironment::from),
            numa_node: info.numa_node,
            driver: None,
            rdma_core: None,
            port,
        }
    }
}

impl From<&PcieLink> for PcieEnvironment {
    fn from(link: &PcieLink) -> PcieEnvironment {
        PcieEnvironment {
            current_speed: link.current_speed.as_deref().map(clean),
            current_width: link.current_width,
            max_speed: link.max_speed.as_deref().map(clean),
            max_width: link.max_width,
        }
    }
}

/// The kernel driver of a verbs device: its PCI (or auxiliary bus) driver, or the soft
/// driver its vendor id names.
fn kernel_driver(info: &DeviceInfo, root: &Path) -> Option<String> {
    kernel_driver_of(&info.name, info.vendor_id, root)
}

/// The kernel driver of the verbs device `name` under `root`: the basename of its
/// `device/driver` link, or, without one (soft devices), the module `vendor_id` names
/// (`rdma_rxe`, `siw`).
pub fn kernel_driver_of(name: &str, vendor_id: u32, root: &Path) -> Option<String> {
    let link = root.join("sys/class/infiniband").join(name).join("device/driver");
    if let Ok(target) = fs::read_link(link) {
        return target.file_name().map(|n| clean(&n.to_string_lossy())).filter(|n| !n.is_empty());
    }
    match vendor_id {
        RXE_VENDOR_ID => Some("rdma_rxe".to_string()),
        SIW_VENDOR_ID => Some("siw".to_string()),
        _ => None,
    }
}

/// The rdma-core version (`44.0`), from the first of:
/// 1. the libibverbs this process has mapped (`proc/self/maps`): its file name is
///    `libibverbs.so.1.<api>.<rdma-core version>` (`libibverbs.so.1.14.44.0`);
/// 2. such a file in the library folders: `usr/lib/<multiarch>/`, `lib/<multiarch>/`
///    (folders named `*-linux-*`), `usr/lib64/`, `lib64/`, `usr/lib/`, `lib/`;
/// 3. the dpkg status (`var/lib/dpkg/status`) of `ibverbs-providers` or `libibverbs1`,
///    without epoch and Debian revision (`44.0-2` → `44.0`).
///
/// `None` when none of them says.
pub fn rdma_core_version(root: &Path) -> Option<String> {
    let tree = SystemTree::new(root);
    let read = |rel: &str| tree.read(rel);
    read("proc/self/maps")
        .and_then(|maps| mapped_libibverbs(&maps))
        .or_else(|| installed_libibverbs(root))
        .or_else(|| dpkg_version(&read("var/lib/dpkg/status")?))
}

/// The rdma-core version a libibverbs file name carries.
fn libibverbs_version(file_name: &str) -> Option<String> {
    let (_api, version) = file_name.strip_prefix("libibverbs.so.1.")?.split_once('.')?;
    version.starts_with(|c: char| c.is_ascii_digit()).then(|| clean(version))
}

/// The version of the libibverbs in a `/proc/PID/maps` text.
fn mapped_libibverbs(maps: &str) -> Option<String> {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find_map(|path| libibverbs_version(path.rsplit('/').next()?))
}

/// The version of the first libibverbs file found in the library folders.
fn installed_libibverbs(root: &Path) -> Option<String> {
    let multiarch = |base: &str| {
        let names = sorted_names(&root.join(base)).into_iter().filter(|n| n.contains("-linux-"));
        names.map(|n| root.join(base).join(n)).collect::<Vec<PathBuf>>()
    };
    let mut dirs = multiarch("usr/lib");
    dirs.extend(multiarch("lib"));
    dirs.extend(["usr/lib64", "lib64", "usr/lib", "lib"].iter().map(|d| root.join(d)));
    dirs.iter().find_map(|dir| sorted_names(dir).iter().find_map(|n| libibverbs_version(n)))
}

/// The entry names of a folder, sorted; empty when it cannot be read.
fn sorted_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> =
        entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    names.sort();
    names
}

/// The upstream version of the first installed rdma-core library package in a dpkg
/// status file.
fn dpkg_version(status: &str) -> Option<String> {
    let stanzas: Vec<&str> = status.split("\n\n").collect();
    ["ibverbs-providers", "libibverbs1"].iter().find_map(|package| {
        stanzas.iter().find_map(|stanza| {
            let field = |name: &str| {
                stanza.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
            };
            let package_name = field("Package")?;
            let installed = field("Status").is_some_and(|s| s.ends_with(" installed"));
            if package_name != *package || !installed {
                return None;
            }
            let version = field("Version")?;
            let version = version.split_once(':').map_or(version, |(_epoch, v)| v);
            let upstream = version.rsplit_once('-').map_or(version, |(u, _revision)| u);
            (!upstream.is_empty()).then(|| clean(upstream))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_file_names_carry_the_rdma_core_version() {
        assert_eq!(libibverbs_version("libibverbs.so.1.14.44.0").as_deref(), Some("44.0"));
        assert_eq!(libibverbs_version("libibverbs.so.1.1.17.1").as_deref(), Some("17.1"));
        assert_eq!(libibverbs_version("libibverbs.so.1"), None);
        assert_eq!(libibverbs_version("libibverbs.so.1.14"), None);
        assert_eq!(libibverbs_version("libibverbs.so"), None);
        assert_eq!(libibverbs_version("libmlx4-rdmav34.so"), None);
    }

    #[test]
    fn maps_name_the_loaded_library() {
        let maps = "7f1c2a000000-7f1c2a00d000 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7f1c2b000000-7f1c2b00d000 r-xp 00004000 08:01 5678 /opt/ofed/lib/libibverbs.so.1.14.2307.0 (deleted)\n\
                    7ffd4c000000-7ffd4c021000 rw-p 00000000 00:00 0 [stack]\n";
        assert_eq!(mapped_libibverbs(maps).as_deref(), Some("2307.0"));
        assert_eq!(mapped_libibverbs("7ffd4c000000-7ffd4c021000 rw-p 00000000 00:00 0\n"), None);
    }

    #[test]
    fn dpkg_status_gives_the_upstream_version_of_an_installed_package() {
        let status = "Package: libibverbs1\nStatus: install ok installed\nVersion: 1:50.0-1\n\n\
                      Package: ibverbs-providers\nStatus: deinstall ok config-files\nVersion: 39.0-1\n\n\
                      Package: ibverbs-providers\nArchitecture: amd64\nStatus: install ok installed\n\
                      Version: 44.0-2\n";
        assert_eq!(dpkg_version(status).as_deref(), Some("44.0"));
        let only_lib = "Package: libibverbs1\nStatus: install ok installed\nVersion: 1:50.0-1\n";
        assert_eq!(dpkg_version(only_lib).as_deref(), Some("50.0"));
        assert_eq!(
            dpkg_version("Package: bash\nStatus: install ok installed\nVersion: 5.2-1\n"),
            None
        );
    }

    #[test]
    fn this_process_finds_its_rdma_core() {
        // Linux builds link libibverbs, so the test binary has it mapped.
        if cfg!(target_os = "linux") {
            let version = rdma_core_version(Path::new("/")).expect("libibverbs is linked");
            assert!(version.starts_with(|c: char| c.is_ascii_digit()), "{version}");
        }
    }
}
