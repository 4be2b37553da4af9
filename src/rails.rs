//! Multi-rail bandwidth (`-d rxe0,rxe1`): the same test over several devices at once,
//! one engine session, QP group and thread per rail, pinned near the rail's NUMA node.
//! Each rail first runs alone, then all run together; the report shows each rail both
//! ways, the aggregate, and its ratio to the sum of the single-rail runs (1.0: the rails
//! add up; less: they share a bottleneck, the PCIe slot, the CPU, the memory).
//!
//! Rail i's control connection is on port `-p` + i, to HOST i (one HOST for all rails,
//! or one per rail: on RoCE each rail's address picks its GID). Both sides are given
//! the same rails; the server runs the same phases.

use std::io::Write;

use serde::Serialize;

use crate::engine::{self, Side};
use crate::error::{Error, ErrorKind};
use crate::inventory::{self, DeviceInfo};
use crate::measure::bw_in_unit;
use crate::results::RunReport;
use crate::spec::TestOptions;
use crate::spec::{Local, Measure};

/// One rail: a device, the host its control connection reaches, its port, its CPUs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rail {
    /// Device name.
    pub device: String,
    /// The server's address for this rail (None on the server).
    pub host: Option<String>,
    /// Control port.
    pub port: u16,
    /// CPUs the rail's thread is pinned to (empty: not pinned).
    pub cpus: Vec<usize>,
}

/// The rails `-d` names, if it names more than one.
///
/// # Errors
/// A latency test, a HOST list that does not match, a port past 65535 (kind `usage`).
pub fn plan(t: &TestOptions) -> Result<Option<Vec<Rail>>, Error> {
    let Some(devices) = t.local.device.as_deref().filter(|_| t.local.rails()) else {
        return Ok(None);
    };
    let devices: Vec<&str> = devices.split(',').map(str::trim).collect();
    if devices.iter().any(|d| d.is_empty()) {
        return Err(Error::usage(format!("-d {}: an empty device name", devices.join(","))));
    }
    if t.spec.kind.measure != Measure::Bw {
        return Err(Error::usage("-d with several devices (multi-rail) is for bandwidth tests"));
    }
    let hosts: Vec<Option<String>> = match t.host.as_deref() {
        None => vec![None; devices.len()],
        Some(h) => {
            let list: Vec<String> = h.split(',').map(|s| s.trim().to_string()).collect();
            match list.len() {
                1 => vec![Some(list[0].clone()); devices.len()],
                n if n == devices.len() => list.into_iter().map(Some).collect(),
                n => {
                    return Err(Error::usage(format!(
                        "{n} hosts for {} rails: give one HOST, or one per device",
                        devices.len()
                    )))
                }
            }
        }
    };
    let mut rails = Vec::with_capacity(devices.len());
    for (i, (device, host)) in devices.iter().zip(hosts).enumerate() {
        let port = u16::try_from(usize::from(t.local.port) + i).map_err(|_| {
            Error::usage(format!("-p {}: rail {i}'s port is past 65535", t.local.port))
        })?;
        rails.push(Rail { device: (*device).to_string(), host, port, cpus: t.local.pin.clone() });
    }
    Ok(Some(rails))
}

/// What one rail measured alone and together with the others.
#[derive(Debug, Serialize)]
pub struct RailResult {
    /// The rail.
    pub rail: Rail,
    /// Alone.
    pub alone: RunReport,
    /// With every rail running.
    pub together: RunReport,
}

/// One size over all rails.
#[derive(Debug, Serialize)]
pub struct Aggregate {
    /// Message size.
    pub size: u64,
    /// The single-rail runs' BW averages summed, bytes/s.
    pub sum_alone: f64,
    /// The rails' BW averages while all ran, summed, bytes/s.
    pub together: f64,
    /// together ÷ sum_alone.
    pub ratio: f64,
}

/// The multi-rail report (`--json`).
#[derive(Debug, Serialize)]
pub struct MultiRailReport {
    /// `multirail`.
    pub kind: &'static str,
    /// The test.
    pub test: &'static str,
    /// Each rail.
    pub rails: Vec<RailResult>,
    /// Per size.
    pub aggregate: Vec<Aggregate>,
    /// Where the rails differ (the multichannel homogeneity rule).
    pub warnings: Vec<String>,
    /// What stopped a rail, if something did.
    pub error: Option<Error>,
}

/// Runs `t` over `rails`: each alone, then all together; prints the table.
///
/// # Errors
/// A `--json` path that cannot be written. A rail's failure is in the report (exit 2).
pub fn run(t: &TestOptions, mut rails: Vec<Rail>, out: &mut dyn Write) -> Result<u8, Error> {
    if let Some(path) = &t.output.json {
        // Checked (and emptied) before the run, as a single rail's: a bad path fails now.
        crate::report::prepare_json(path)?;
    }
    let backend = t.spec.rdma().map_or_else(crate::transport::Backend::native, |r| r.backend);
    let infos: Vec<Option<DeviceInfo>> = rails
        .iter()
        .map(|r| {
            inventory::collect(Some(&r.device), backend)
                .ok()
                .and_then(|i| i.devices.into_iter().next())
        })
        .collect();
    let warnings = homogeneity(&rails, &infos, t.local.ib_port);
    for (rail, info) in rails.iter_mut().zip(&infos) {
        if rail.cpus.is_empty() {
            rail.cpus = (info.as_ref().and_then(|i| i.numa_node))
                .map(crate::engine::numa_node_cpus)
                .unwrap_or_default();
        }
    }
    let _ = writeln!(out, " Multi-rail {} over {} rails:", t.spec.id(), rails.len());
    for r in &rails {
        let pin = if r.cpus.is_empty() {
            "not pinned (no NUMA node known)".into()
        } else {
            format!("pinned to CPUs {:?}", r.cpus)
        };
        let host = r.host.as_deref().map_or_else(String::new, |h| format!(" to {h}"));
        let _ = writeln!(
            out,
            "  rail {}: {}{host}, port {}, {pin}",
            r.port - rails[0].port,
            r.device,
            r.port
        );
    }
    for w in &warnings {
        let _ = writeln!(out, " Warning: {w}");
    }
    let _ = out.flush();
    let alone: Vec<engine::Outcome> = rails.iter().map(|r| run_rail(t, r)).collect();
    let together: Vec<engine::Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = rails.iter().map(|r| s.spawn(|| run_rail(t, r))).collect();
        handles.into_iter().map(|h| h.join().expect("a rail's thread")).collect()
    });
    let error = alone.iter().chain(&together).find_map(|o| o.error.clone());
    let results: Vec<RailResult> = rails
        .into_iter()
        .zip(alone.into_iter().zip(together))
        .map(|(rail, (a, b))| RailResult { rail, alone: a.report, together: b.report })
        .collect();
    let aggregate = aggregate(&t.spec.sizes, &results);
    let report = MultiRailReport {
        kind: "multirail",
        test: t.spec.id(),
        rails: results,
        aggregate,
        warnings,
        error,
    };
    let _ = write!(out, "{}", table(&report, t.output.report_gbits));
    if let Some(path) = &t.output.json {
        crate::report::write_json(path, &crate::report::to_json(&report))?;
    }
    if let Some(e) = &report.error {
        return Err(e.clone());
    }
    let below = t.output.min_bw.filter(|&min| {
        report.aggregate.iter().any(|a| bw_in_unit(a.together, t.output.report_gbits) < min)
    });
    if let Some(min) = below {
        return Err(Error::new(
            ErrorKind::Threshold,
            format!("the aggregate bandwidth fell below --min-bw {min}"),
        ));
    }
    Ok(0)
}

/// One rail's test, on this side.
fn run_rail(t: &TestOptions, r: &Rail) -> engine::Outcome {
    let local = Local {
        device: Some(r.device.clone()),
        port: r.port,
        pin: r.cpus.clone(),
        // The rail's CPUs stand for --numa_node where they were found.
        numa_node: t.local.numa_node.filter(|_| r.cpus.is_empty()),
        quiet: true,
        ..t.local.clone()
    };
    let side = match &r.host {
        Some(host) => Side::Client { host: host.clone() },
        None => Side::Server,
    };
    engine::run(&t.spec, &side, &local, t.output.report_gbits, &mut std::io::sink())
}

/// A run's BW average at `size`, bytes/s, if it measured that size.
fn avg_bw(r: &RunReport, size: u64) -> Option<f64> {
    r.results
        .iter()
        .find(|x| x.size == size && !x.partial)
        .and_then(|x| x.bw.as_ref())
        .map(|b| b.avg_bytes_per_sec)
}

/// The rails' figures per size: each rail's BW average alone and together, summed.
fn aggregate(sizes: &[u64], rails: &[RailResult]) -> Vec<Aggregate> {
    let bw = |r: &RunReport, size: u64| avg_bw(r, size).unwrap_or(0.0);
    sizes
        .iter()
        .map(|&size| {
            let sum_alone: f64 = rails.iter().map(|r| bw(&r.alone, size)).sum();
            let together: f64 = rails.iter().map(|r| bw(&r.together, size)).sum();
            let ratio = if sum_alone > 0.0 { together / sum_alone } else { 0.0 };
            Aggregate { size, sum_alone, together, ratio }
        })
        .collect()
}

/// Where the rails differ in what multichannel needs the same: link layer, rate, MTU,
/// firmware.
pub fn homogeneity(rails: &[Rail], infos: &[Option<DeviceInfo>], port: u8) -> Vec<String> {
    let mut warnings = Vec::new();
    let facts: Vec<Option<(String, String, String, String)>> = infos
        .iter()
        .map(|i| {
            let i = i.as_ref()?;
            let p = i.ports.iter().find(|p| p.port == port)?;
            Some((
                p.link_layer.clone(),
                p.rate_gbps.map_or("?".into(), |r| format!("{r} Gb/s")),
                p.active_mtu.map_or("?".into(), |m| m.to_string()),
                i.fw_ver.clone(),
            ))
        })
        .collect();
    for (k, name) in ["link layer", "rate", "active MTU", "firmware"].iter().enumerate() {
        let values: Vec<String> = facts
            .iter()
            .zip(rails)
            .filter_map(|(f, r)| {
                let f = f.as_ref()?;
                let v = [&f.0, &f.1, &f.2, &f.3][k];
                Some(format!("{} {v}", r.device))
            })
            .collect();
        let distinct: std::collections::BTreeSet<&str> =
            values.iter().filter_map(|v| v.split_once(' ').map(|x| x.1)).collect();
        if distinct.len() > 1 {
            warnings.push(format!(
                "the rails differ in {name} ({}): the slower rail sets the pace, and the aggregate says less",
                values.join(", ")
            ));
        }
    }
    for (f, r) in facts.iter().zip(rails) {
        if f.is_none() {
            warnings.push(format!(
                "{}: port {port} not found in the inventory, not compared",
                r.device
            ));
        }
    }
    warnings
}

/// The per-rail and aggregate table.
pub fn table(report: &MultiRailReport, gbits: bool) -> String {
    use std::fmt::Write as _;
    let unit = if gbits { "Gb/sec" } else { "MB/sec" };
    let mut o = String::new();
    let _ = writeln!(
        o,
        " {:<10} {:<6} {:<10} {:>20} {:>22}",
        "#bytes",
        "rail",
        "device",
        format!("BW alone[{unit}]"),
        format!("BW together[{unit}]")
    );
    let bw = |r: &RunReport, size: u64| avg_bw(r, size).map(|b| bw_in_unit(b, gbits));
    let cell = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    for a in &report.aggregate {
        for (i, r) in report.rails.iter().enumerate() {
            let _ = writeln!(
                o,
                " {:<10} {:<6} {:<10} {:>20} {:>22}",
                a.size,
                i,
                r.rail.device,
                cell(bw(&r.alone, a.size)),
                cell(bw(&r.together, a.size))
            );
        }
        let _ = writeln!(
            o,
            " {:<10} {:<6} {:<10} {:>20} {:>22}   aggregate / sum of single rails: {:.2}",
            a.size,
            "all",
            "",
            format!("{:.2} (sum)", bw_in_unit(a.sum_alone, gbits)),
            format!("{:.2} (aggregate)", bw_in_unit(a.together, gbits)),
            a.ratio
        );
    }
    if let Some(e) = &report.error {
        let _ = writeln!(o, " ERROR {e}");
    }
    o
}
