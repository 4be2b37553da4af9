//! `rdmabench doctor --capture DIR`: copies the files doctor reads ([`crate::facts`] and
//! the host [`Environment`](crate::environment::Environment)) from `/` (or `--root`) into
//! DIR, so `doctor --root DIR` judges that host later, anywhere, with the same verdicts
//! (docs/qualify.md#what-doctor-reads). The lab's rxe tree, a test fixture
//! (tests/fixtures/doctor/lab-rxe), is such a capture.
//!
//! A device's PCI function becomes `DIR/sys/devices/pci/ADDR`, and both the RDMA device's
//! and the netdev's `device` become relative links to it: doctor pairs an IPoIB netdev
//! with its HCA by where those links lead, as on the real `/sys`.

use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::error::Error;
use crate::facts::{entries, paths, SystemTree};

const IB_FILES: [&str; 8] = [
    "fw_ver",
    "node_type",
    "node_guid",
    "sys_image_guid",
    "hca_type",
    "board_id",
    "hw_rev",
    "parent",
];
const PORT_FILES: [&str; 7] =
    ["state", "phys_state", "rate", "link_layer", "lid", "sm_lid", "cap_mask"];
const PCI_FILES: [&str; 10] = [
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
    "numa_node",
    "local_cpulist",
];
const NET_FILES: [&str; 9] =
    ["mtu", "type", "speed", "operstate", "address", "dev_port", "dev_id", "mode", "ifindex"];
const IDLE_FILES: [&str; 4] = ["name", "desc", "latency", "disable"];

/// Where a capture is read from and written to.
struct Capture<'a> {
    from: SystemTree,
    to: &'a Path,
}

/// Copies what doctor reads under `root` into `dir` (created if missing).
///
/// # Errors
/// A file that cannot be written, or one under `root` refused for what it is (a FIFO,
/// a device, too large).
pub fn capture(root: &Path, dir: &Path) -> Result<(), Error> {
    let c = Capture { from: SystemTree::new(root), to: dir };
    for ib in entries(&c.from, paths::CLASS_INFINIBAND) {
        let rel = paths::device_dir(&ib).to_string_lossy().into_owned();
        c.copy_all(&rel, &IB_FILES)?;
        for port in entries(&c.from, format!("{rel}/ports")) {
            let prel = format!("{rel}/ports/{port}");
            c.copy_all(&prel, &PORT_FILES)?;
            for index in entries(&c.from, format!("{prel}/gids")) {
                // Only the valid entries: an empty one reads as all zeros and has no type.
                let gid = c.from.read(format!("{prel}/gids/{index}")).unwrap_or_default();
                if gid.trim().chars().all(|ch| ch == '0' || ch == ':') {
                    continue;
                }
                for sub in ["gids", "gid_attrs/types", "gid_attrs/ndevs"] {
                    c.copy(&format!("{prel}/{sub}/{index}"))?;
                }
            }
        }
        c.pci_function(&rel)?;
    }
    for net in entries(&c.from, paths::CLASS_NET) {
        let rel = paths::netdev_dir(&net).to_string_lossy().into_owned();
        c.copy_all(&rel, &NET_FILES)?;
        c.pci_function(&rel)?;
    }
    let cpus = paths::SYSTEM_CPU;
    for cpu in entries(&c.from, cpus).iter().filter(|n| numbered(n, "cpu")) {
        c.copy(&format!("{cpus}/{cpu}/cpufreq/scaling_governor"))?;
        let idle = format!("{cpus}/{cpu}/cpuidle");
        for state in entries(&c.from, &idle).iter().filter(|n| n.starts_with("state")) {
            c.copy_all(&format!("{idle}/{state}"), &IDLE_FILES)?;
        }
    }
    let nodes = paths::SYSTEM_NODE;
    for node in entries(&c.from, nodes).iter().filter(|n| numbered(n, "node")) {
        c.copy(&format!("{nodes}/{node}/cpulist"))?;
    }
    c.copy_all("", &paths::CAPTURED)?;
    match c.from.refused() {
        Some(e) => Err(Error::io(e.to_string())),
        None => Ok(()),
    }
}

/// `cpu12` for prefix `cpu`, not `cpufreq`.
fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix).is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
}

impl Capture<'_> {
    /// `dir/name` for each name; those that cannot be read are left out.
    fn copy_all(&self, dir: &str, names: &[&str]) -> Result<(), Error> {
        names.iter().try_for_each(|n| self.copy(&Path::new(dir).join(n).to_string_lossy()))
    }

    /// `rel`, when it can be read.
    fn copy(&self, rel: &str) -> Result<(), Error> {
        match self.from.read(rel) {
            Some(text) => self.write(rel, &text),
            None => Ok(()),
        }
    }

    fn write(&self, rel: &str, text: &str) -> Result<(), Error> {
        let path = self.to.join(rel);
        let fail = |e: std::io::Error| Error::io(format!("--capture {}: {e}", path.display()));
        fs::create_dir_all(path.parent().unwrap_or(self.to)).map_err(fail)?;
        fs::write(&path, text).map_err(fail)
    }

    /// `class_rel`'s `device`, when it is a PCI function: its files, and a relative link
    /// to them.
    fn pci_function(&self, class_rel: &str) -> Result<(), Error> {
        let root = fs::canonicalize(self.from.root()).unwrap_or_default();
        let Ok(dev) = fs::canonicalize(self.from.join(class_rel).join("device")) else {
            return Ok(());
        };
        let Ok(inside) = dev.strip_prefix(&root) else { return Ok(()) };
        let (Some(addr), true) = (dev.file_name(), inside.to_string_lossy().contains("/pci"))
        else {
            return Ok(());
        };
        if !dev.join("vendor").exists() {
            return Ok(());
        }
        let pci = Path::new(paths::PCI_DEVICES).join(addr);
        for name in PCI_FILES {
            if let Some(text) = self.from.read(inside.join(name)) {
                self.write(&pci.join(name).to_string_lossy(), &text)?;
            }
        }
        let link = self.to.join(class_rel).join("device");
        let fail = |e: std::io::Error| Error::io(format!("--capture {}: {e}", link.display()));
        if link.symlink_metadata().is_err() {
            fs::create_dir_all(self.to.join(class_rel)).map_err(fail)?;
            symlink(&relative(&pci, Path::new(class_rel)), &link).map_err(fail)?;
        }
        Ok(())
    }
}

/// `to` from directory `from`, both relative to the same root: `../../../devices/pci/X`.
fn relative(to: &Path, from: &Path) -> PathBuf {
    let ups = from.components().filter(|c| matches!(c, Component::Normal(_))).count();
    (0..ups).map(|_| Path::new("..")).collect::<PathBuf>().join(to)
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(_: &Path, link: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!("{}: a capture needs symbolic links", link.display()),
    ))
}
