//! `rdmabench doctor`: the preflight a lab runs before trusting a number. Each check
//! says PASS, WARN, FAIL or N/A, what it saw, what it expected and the one-line fix
//! (docs/qualify.md). On Linux the checks judge sysfs and /proc under a root directory
//! ([`crate::facts`]), so a captured tree (`doctor --capture`, [`capture`]) or a test fixture is judged
//! exactly as a live host; on Windows they judge NetworkDirect's view ([`windows`]).

pub mod capture;
pub mod check;
pub mod checks;
pub mod firmware;
pub mod junit;
pub mod windows;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use check::{Check, Status};

use crate::environment::{DeviceEnvironment, Environment};
use crate::error::Error;
use crate::facts::{self, paths, HostFacts, SystemTree};
use crate::inventory::{self, InventoryError};
use crate::spec::{rules, Measure, TestKind, Verb};
use crate::transport::Backend;

/// What `doctor --json` writes (docs/json.md#doctor).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DoctorReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// Always `doctor`.
    pub kind: String,
    /// Every check, in the order printed.
    pub checks: Vec<Check>,
    /// The host (and the device, with `-d` or when there is one).
    pub environment: Environment,
}

impl DoctorReport {
    /// The worst verdict (N/A when there is no check).
    pub fn worst(&self) -> Status {
        self.checks.iter().map(|c| c.status).max().unwrap_or(Status::Na)
    }

    /// Whether `device`'s port (the first device's when `None`) has no physical link,
    /// as `port.rate` found (a soft device: its rate is nominal): `rxe0/1: soft device:
    /// no physical link`, else `None`.
    pub fn no_physical_link(&self, device: Option<&str>) -> Option<String> {
        let on = |c: &&Check| device.is_none_or(|d| c.subject.split('/').next() == Some(d));
        let rate = self.checks.iter().filter(|c| c.id == "port.rate").find(on)?;
        (rate.status == Status::Na && rate.observed == checks::NO_PHYSICAL_LINK)
            .then(|| format!("{}: {}", rate.subject, rate.observed))
    }

    /// How many checks have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }
}

/// Where doctor looks.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    /// Only this device's checks (host checks always run).
    pub device: Option<&'a str>,
    /// The root of `/sys` and `/proc`: `/` for this host, else a captured tree (no verbs
    /// queries are made then).
    pub root: &'a Path,
    /// Which checks: verbs (Linux sysfs) or NetworkDirect.
    pub backend: Backend,
}

/// Runs every check for `target`. Without any RDMA device (or stack) the host checks
/// still run, and one failing `rdma.device` check names the device checks that could
/// not.
///
/// # Errors
/// `-d` naming no device of several, a tree that cannot be read, or (NetworkDirect)
/// no provider.
pub fn diagnose(target: &Target<'_>) -> Result<DoctorReport, Error> {
    let (checks, environment) = match target.backend {
        Backend::Nd => windows::diagnose(target.device)?,
        Backend::Verbs => linux(target)?,
    };
    Ok(DoctorReport {
        schema_version: crate::report::SCHEMA_VERSION,
        kind: "doctor".into(),
        checks,
        environment,
    })
}

fn linux(target: &Target<'_>) -> Result<(Vec<Check>, Environment), Error> {
    let root = target.root;
    let tree = SystemTree::new(root);
    let mut host = HostFacts::read(&tree);
    let mut environment = Environment::host_in(&tree);
    // A FIFO, a device or an oversized file where a system file should be: that tree
    // cannot be judged.
    if let Some(e) = tree.refused() {
        return Err(Error::io(e.to_string()));
    }
    if host.nics.is_empty() {
        // The host checks still help (memlock, governor, C-states, huge pages); the
        // device checks fail as one, named.
        let mut checks = checks::all(&host, None, registration());
        checks.insert(0, no_device(&SystemTree::new(root), target.device));
        return Ok((checks, environment));
    }
    if let Some(name) = target.device {
        if !host.nics.iter().any(|n| n.name == name) {
            let available = host.nics.iter().map(|n| n.name.clone()).collect();
            return Err(InventoryError::UnknownDevice { name: name.into(), available }.into());
        }
    }
    // On the live host the verbs query knows what sysfs does not: the active MTU.
    if root == Path::new("/") {
        if let Ok(inv) = inventory::collect(None, Backend::Verbs) {
            overlay(&mut host, &inv);
            let dev = target
                .device
                .map_or_else(|| inv.devices.first(), |d| inv.devices.iter().find(|i| i.name == d));
            environment.device = dev.map(|d| DeviceEnvironment::from_inventory(d, 1, root));
        }
    }
    Ok((checks::all(&host, target.device, registration()), environment))
}

/// The device checks that could not run, as the one failing check `rdma.device`.
fn no_device(tree: &SystemTree, wanted: Option<&str>) -> Check {
    let class = tree.join(paths::CLASS_INFINIBAND);
    let why = if facts::device::rdma_class_exists(tree) {
        format!("no RDMA device in {}", class.display())
    } else {
        format!("no RDMA stack (no {})", class.display())
    };
    let wanted = wanted.map(|d| format!(" ({d} asked for)")).unwrap_or_default();
    let observed = format!("{why}{wanted}: {} not checked", checks::DEVICE_CHECKS.join(", "));
    Check::new(
        "rdma.device",
        "host",
        Status::Fail,
        observed,
        format!("an RDMA device under {}", paths::shown(paths::CLASS_INFINIBAND)),
        "load the driver (modprobe mlx4_ib), or for soft-RoCE: rdma link add rxe0 type rxe netdev IF",
    )
}

/// The verbs inventory's active MTUs into the sysfs facts.
pub fn overlay(host: &mut HostFacts, inv: &inventory::Inventory) {
    for nic in &mut host.nics {
        let Some(d) = inv.devices.iter().find(|d| d.name == nic.name) else { continue };
        for p in &mut nic.ports {
            p.active_mtu = d.ports.iter().find(|q| q.port == p.port).and_then(|q| q.active_mtu);
        }
    }
}

/// What the tests register with their defaults, and with `-a`: the memlock check's
/// yardstick, from the same rules the tests run by.
pub fn registration() -> checks::Registration {
    let mut reg = checks::Registration { default: 0, sweep: 0 };
    for verb in [Verb::Write, Verb::Read, Verb::Send, Verb::Atomic] {
        for measure in [Measure::Bw, Measure::Lat] {
            let kind = TestKind { verb, measure };
            let bytes = |all| {
                let req = rules::RdmaRequest { all, ..Default::default() };
                rules::rdma(kind, &req).map_or(0, |s| s.buffer_bytes())
            };
            reg.default = reg.default.max(bytes(false));
            reg.sweep = reg.sweep.max(bytes(true));
        }
    }
    reg
}

/// The terminal table: one line per check, its fix under it when there is one, what
/// was checked (the host and device, one line) and a count.
pub fn render(report: &DoctorReport) -> String {
    let width = |f: &dyn Fn(&Check) -> usize| report.checks.iter().map(f).max().unwrap_or(0);
    let (wi, ws) = (width(&|c| c.id.len()).max(5), width(&|c| c.subject.len()).max(7));
    let mut out =
        format!("{:<6} {:<wi$} {:<ws$} OBSERVED  [EXPECTED]\n", "STATUS", "CHECK", "SUBJECT");
    for c in &report.checks {
        let expected = if c.status == Status::Pass || c.status == Status::Na {
            String::new()
        } else {
            format!("  [{}]", c.expected)
        };
        out.push_str(&format!(
            "{:<6} {:<wi$} {:<ws$} {}{expected}\n",
            c.status.label(),
            c.id,
            c.subject,
            c.observed
        ));
        if !c.fix.is_empty() {
            out.push_str(&format!("{:<6} {:<wi$} {:<ws$} fix: {}\n", "", "", "", c.fix));
        }
    }
    out.push_str(&format!("on {}\n", report.environment.summary()));
    out.push_str(&format!(
        "doctor: {} pass, {} warn, {} fail, {} n/a\n",
        report.count(Status::Pass),
        report.count(Status::Warn),
        report.count(Status::Fail),
        report.count(Status::Na)
    ));
    out
}
