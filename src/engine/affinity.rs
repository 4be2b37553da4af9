//! Where an RDMA test's measuring thread runs: the CPUs `--pin_cores` lists, those of
//! `--numa_node`, or by default those of the device's own NUMA node (perftest's default
//! too: memory and completions stay near the adapter). What the kernel then allows is
//! read back for the header and JSON.

use crate::backend::Attachment;
use crate::error::Error;
use crate::facts::cpus::{cpu_ranges, node_cpus};
use crate::facts::{self, paths};
use crate::results::CpuAffinity;
use crate::spec::Local;

/// Pins the calling (measuring) thread as this side asked, or near the device; returns
/// what to report.
///
/// # Errors
/// Kind `usage`: `--numa_node` names no node, or the kernel refuses the CPUs.
pub(crate) fn apply(local: &Local, on: &Attachment) -> Result<CpuAffinity, Error> {
    let (cpus, source) = if !local.pin.is_empty() {
        (local.pin.clone(), "--pin_cores".to_string())
    } else if let Some(n) = local.numa_node {
        let cpus = node_cpus(&facts::live(), n).ok_or_else(|| {
            let list = paths::shown(paths::node_cpulist(n));
            Error::usage(format!("--numa_node {n}: no such NUMA node ({list})"))
        })?;
        (cpus, format!("--numa_node {n}"))
    } else {
        let Attachment::Device { name, .. } = on else {
            return Ok(unpinned("NetworkDirect adapters' NUMA nodes are not looked up"));
        };
        let live = facts::live();
        match facts::device::numa_node(&live, name) {
            Some(n) => match node_cpus(&live, n) {
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

/// The CPUs of NUMA node `n` on this machine; empty when unknown.
pub(crate) fn numa_node_cpus(n: u32) -> Vec<usize> {
    node_cpus(&facts::live(), n).unwrap_or_default()
}
