//! What sysfs adds to the verbs queries: the PCIe link and NUMA node of the device's PCI
//! function. Soft devices (rxe, siw) have no PCI function, so both are absent there.

use std::path::Path;

use super::PcieLink;
use crate::files;
use crate::text::clean;

/// A one-value file, [`clean`]ed for showing; `None` when unreadable or empty.
fn read_trimmed(path: &Path) -> Option<String> {
    let text = clean(&files::read_text(path, files::SYSTEM_FILE_LIMIT).ok()?);
    (!text.is_empty()).then_some(text)
}

/// The PCIe link of `<ibdev_path>/device`, if the device has a PCI function.
pub fn pcie_link(ibdev_path: &Path) -> Option<PcieLink> {
    let dev = ibdev_path.join("device");
    let link = PcieLink {
        current_speed: read_trimmed(&dev.join("current_link_speed")),
        current_width: read_trimmed(&dev.join("current_link_width")).and_then(|w| w.parse().ok()),
        max_speed: read_trimmed(&dev.join("max_link_speed")),
        max_width: read_trimmed(&dev.join("max_link_width")).and_then(|w| w.parse().ok()),
    };
    let any = link.current_speed.is_some()
        || link.current_width.is_some()
        || link.max_speed.is_some()
        || link.max_width.is_some();
    any.then_some(link)
}

/// The NUMA node of `<ibdev_path>/device`; `None` when sysfs says -1 or has no file.
pub fn numa_node(ibdev_path: &Path) -> Option<u32> {
    read_trimmed(&ibdev_path.join("device").join("numa_node"))?.parse().ok()
}

/// Port `port` of the device at `ibdev_path` as sysfs words it now: its state
/// (`DOWN`, `ACTIVE`, …) and physical state (`Disabled`, `LinkUp`, …), without the
/// numeric prefixes. `None` when sysfs has no such port.
pub fn port_state(ibdev_path: &Path, port: u8) -> Option<(String, Option<String>)> {
    let dir = ibdev_path.join("ports").join(port.to_string());
    let word = |file: &str| {
        read_trimmed(&dir.join(file))
            .map(|s| s.split_once(": ").map_or(s.clone(), |(_, w)| w.to_string()))
    };
    Some((word("state")?, word("phys_state")))
}

/// Port `port`'s signalling rate as sysfs words it (`100 Gb/sec (4X EDR)`).
pub fn port_rate(ibdev_path: &Path, port: u8) -> Option<String> {
    read_trimmed(&ibdev_path.join("ports").join(port.to_string()).join("rate"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("rdmabench-sysfs-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("device")).unwrap();
        dir
    }

    #[test]
    fn reads_a_pci_function() {
        let dir = scratch("pci");
        fs::write(dir.join("device/current_link_speed"), "5.0 GT/s PCIe\n").unwrap();
        fs::write(dir.join("device/current_link_width"), "8\n").unwrap();
        fs::write(dir.join("device/max_link_speed"), "8.0 GT/s PCIe\n").unwrap();
        fs::write(dir.join("device/max_link_width"), "8\n").unwrap();
        fs::write(dir.join("device/numa_node"), "1\n").unwrap();
        let link = pcie_link(&dir).unwrap();
        assert_eq!(link.current_speed.as_deref(), Some("5.0 GT/s PCIe"));
        assert_eq!(link.current_width, Some(8));
        assert_eq!(link.max_speed.as_deref(), Some("8.0 GT/s PCIe"));
        assert_eq!(numa_node(&dir), Some(1));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn soft_devices_and_unknown_numa_give_none() {
        let dir = scratch("soft");
        assert_eq!(pcie_link(&dir), None);
        assert_eq!(numa_node(&dir), None);
        fs::write(dir.join("device/numa_node"), "-1\n").unwrap();
        assert_eq!(numa_node(&dir), None);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn port_state_in_words() {
        let dev = scratch("port-state");
        let port = dev.join("ports").join("1");
        fs::create_dir_all(&port).unwrap();
        fs::write(port.join("state"), "1: DOWN\n").unwrap();
        fs::write(port.join("phys_state"), "3: Disabled\n").unwrap();
        assert_eq!(port_state(&dev, 1), Some(("DOWN".into(), Some("Disabled".into()))));
        assert_eq!(port_state(&dev, 2), None, "no such port");
        fs::remove_file(port.join("phys_state")).unwrap();
        assert_eq!(port_state(&dev, 1), Some(("DOWN".into(), None)));
    }
}
