//! Where an RDMA test's measuring thread runs: the CPUs `--pin_cores` lists, those of
//! `--numa_node`, or by default those of the device's own NUMA node (perftest's default
//! too: memory and completions stay near the adapter). What the kernel then allows is
//! read back for the header and JSON.

use std::path::Path;

use crate::backend::Attachment;
use crate::error::Error;
use crate::results::{cpu_ranges, CpuAffinity};
use crate::spec::rules::parse_cpu_list;
use crate::spec::Local;

/// Where Linux describes NUMA nodes and RDMA devices.
const NODES: &str = "/sys/devices/system/node";
const DEVICES: &str = "/sys/class/infiniband";

/// Pins the calling (measuring) thread as this side asked, or near the device; returns
/// what to report.
///
/// # Errors
/// Kind `usage`: `--numa_node` names no node, or the kernel refuses the CPUs.
pub(crate) fn apply(local: &Local, on: &Attachment) -> Result<CpuAffinity, Error> {
    let (cpus, source) = if !local.pin.is_empty() {
        (local.pin.clone(), "--pin_cores".to_string())
    } else if let Some(n) = local.numa_node {
        let cpus = node_cpus(Path::new(NODES), n).ok_or_else(|| {
            Error::usage(format!("--numa_node {n}: no such NUMA node ({NODES}/node{n}/cpulist)"))
        })?;
        (cpus, format!("--numa_node {n}"))
    } else {
        let Attachment::Device { name, .. } = on else {
            return Ok(unpinned("NetworkDirect adapters' NUMA nodes are not looked up"));
        };
        match device_node(Path::new(DEVICES), name) {
            Some(n) => match node_cpus(Path::new(NODES), n) {
                Some(cpus) => (cpus, format!("{name}'s NUMA node {n}")),
                None => return Ok(unpinned(&format!("{name}'s NUMA node {n} lists no CPUs"))),
            },
            None => return Ok(unpinned(&format!("{name} reports no NUMA node"))),
        }
    };
    ffi::os::set_current_thread_cpus(&cpus).map_err(|e| {
        Error::usage(format!("{source}: cannot run on CPUs {}: {e}", cpu_ranges(&cpus)))
    })?;
    let cpus = ffi::os::current_thread_cpus().unwrap_or(cpus);
    Ok(CpuAffinity { cpus, source })
}

fn unpinned(why: &str) -> CpuAffinity {
    CpuAffinity { cpus: Vec::new(), source: format!("not pinned: {why}") }
}

/// The NUMA node of RDMA device `name` (`device/numa_node`; -1 or absent: none, as for
/// soft-RoCE, whose device is no PCI function).
fn device_node(devices: &Path, name: &str) -> Option<u32> {
    let text = std::fs::read_to_string(devices.join(name).join("device/numa_node")).ok()?;
    u32::try_from(text.trim().parse::<i64>().ok()?).ok()
}

/// The CPUs of NUMA node `n` on this machine; empty when unknown.
pub(crate) fn numa_node_cpus(n: u32) -> Vec<usize> {
    node_cpus(Path::new(NODES), n).unwrap_or_default()
}

/// The CPUs of NUMA node `n` (`nodeN/cpulist`, `0-7,16-23`).
fn node_cpus(nodes: &Path, n: u32) -> Option<Vec<usize>> {
    let path = nodes.join(format!("node{n}/cpulist"));
    let text = crate::files::read_text(&path, crate::files::SYSTEM_FILE_LIMIT).ok()?;
    parse_cpu_list(text.trim()).ok().filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_devices_node_and_its_cpus_come_from_sysfs() {
        let root = std::env::temp_dir().join(format!("rdmabench-numa-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |p: &str, v: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        };
        write("ib/mlx4_0/device/numa_node", "1\n");
        write("ib/rxe0/device/numa_node", "-1\n");
        write("node/node1/cpulist", "8-11,24\n");
        assert_eq!(device_node(&root.join("ib"), "mlx4_0"), Some(1));
        assert_eq!(device_node(&root.join("ib"), "rxe0"), None, "-1: no node");
        assert_eq!(device_node(&root.join("ib"), "absent"), None);
        assert_eq!(node_cpus(&root.join("node"), 1), Some(vec![8, 9, 10, 11, 24]));
        assert_eq!(node_cpus(&root.join("node"), 2), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn cpu_lists_print_as_cpu_ranges() {
        assert_eq!(cpu_ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_ranges(&[5]), "5");
        assert_eq!(cpu_ranges(&[]), "");
    }
}
