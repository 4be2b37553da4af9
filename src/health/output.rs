//! `health`'s outputs: a table of each host's ports, then one line per host, sorted —
//! `HOST | Healthy` or `HOST | CODE subject: the figure [what it was judged against]; …`
//! — and the JSON document (docs/json.md#health).

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use crate::error::Error;
use crate::files;

use super::{HealthReport, HostHealth, PortHealth};

/// One host's verdict line.
pub fn host_line(h: &HostHealth) -> String {
    if h.findings.is_empty() {
        return format!("{} | Healthy", h.host);
    }
    let found: Vec<String> = h.findings.iter().map(ToString::to_string).collect();
    format!("{} | {}", h.host, found.join("; "))
}

/// Every host's line, sorted by host.
pub fn verdict_lines(report: &HealthReport) -> String {
    let mut hosts: Vec<&HostHealth> = report.hosts.iter().collect();
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    hosts.iter().map(|h| host_line(h) + "\n").collect()
}

/// The ports' table of each host, then the verdict lines.
pub fn render(report: &HealthReport) -> String {
    let mut out = String::new();
    for h in &report.hosts {
        let _ = writeln!(
            out,
            "{:<10} {:<16} {:<16} {:>10} {:>5} {:<12} {:>12} {:>11}  COUNTERS",
            "PORT", "MODEL", "STATE", "RATE", "MTU", "PCIE", "WRITE_BW", "WRITE_LAT"
        );
        for p in &h.ports {
            out.push_str(&port_row(p));
        }
        let ph = &h.phases;
        let bw = h.floors.min_bw.map_or_else(|| "none".into(), |b| format!("write_bw ≥ {b}"));
        let lat =
            h.floors.max_lat.map_or_else(String::new, |l| format!(", write_lat ≤ {:.2} µs", l.0));
        let _ = writeln!(
            out,
            "{}: {} port(s) in {:.1} s (facts {:.1} s, loopback {:.1} s, after {:.1} s); floors ({}): {bw}{lat}",
            h.host,
            h.ports.len(),
            ph.facts_before + ph.loopback + ph.facts_after,
            ph.facts_before,
            ph.loopback,
            ph.facts_after,
            h.floors.source,
        );
    }
    out.push_str(&verdict_lines(report));
    out
}

fn port_row(p: &PortHealth) -> String {
    let b = &p.before;
    let dash = || "-".to_string();
    let rate = b.rate_gbps.map_or_else(dash, |r| format!("{r} Gb/s"));
    let mtu = b.active_mtu.map_or_else(dash, |m| m.to_string());
    let lb = &p.loopback;
    let (bw, lat) = match (&lb.skipped, &lb.error) {
        (Some(why), _) => (format!("skipped: {why}"), dash()),
        (_, Some(_)) if lb.bw_gbps.is_none() => ("failed".to_string(), dash()),
        _ => (
            lb.bw_gbps.map_or_else(dash, |g| format!("{g:.2} Gb/s")),
            lb.lat_us.map_or_else(|| "failed".into(), |l| format!("{l:.2} µs")),
        ),
    };
    let counters = p.counters.as_ref().map_or_else(
        || "none kept".to_string(),
        |c| {
            let trouble = c.troubles().count();
            format!("{} moved, {trouble} of trouble", c.changes.len())
        },
    );
    format!(
        "{:<10} {:<16} {:<16} {:>10} {:>5} {:<12} {:>12} {:>11}  {counters}\n",
        p.subject,
        p.model.as_deref().unwrap_or("-"),
        format!("{}/{}", b.state, b.phys_state),
        rate,
        mtu,
        b.pcie.clone().unwrap_or_else(dash),
        bw,
        lat,
    )
}

/// The text on `out` (on stderr when the JSON goes to stdout) and the JSON to `json`.
///
/// # Errors
/// An output that cannot be written.
pub fn write(report: &HealthReport, json: Option<&Path>, out: &mut dyn Write) -> Result<(), Error> {
    let text = render(report);
    let mut stderr = std::io::stderr();
    let to: &mut dyn Write = if json.is_some_and(files::is_stdout) { &mut stderr } else { out };
    match to.write_all(text.as_bytes()).and_then(|()| to.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(Error::io(format!("writing output: {e}")));
        }
        _ => {}
    }
    if let Some(path) = json {
        files::write_output("--json", path, &crate::report::to_json(report))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{Code, Finding, Floors, HostHealth, Phases};

    fn host(name: &str, findings: Vec<Finding>) -> HostHealth {
        HostHealth {
            host: name.into(),
            kernel: "6.1.0".into(),
            healthy: findings.is_empty(),
            findings,
            ports: Vec::new(),
            floors: Floors { min_bw: None, max_lat: None, source: "defaults".into() },
            phases: Phases::default(),
        }
    }

    #[test]
    fn one_line_per_host_sorted_healthy_or_each_finding() {
        let report = HealthReport {
            schema_version: 2,
            kind: "health".into(),
            started: String::new(),
            hosts: vec![
                host(
                    "node2",
                    vec![
                        Finding::new(
                            Code::PortDown,
                            "mlx4_0/2",
                            "DOWN / Polling [ACTIVE / LinkUp]",
                        ),
                        Finding::new(Code::NotRun, "mlx4_0/1", "loopback: refused"),
                    ],
                ),
                host("node1", Vec::new()),
            ],
            ring: Vec::new(),
        };
        assert_eq!(
            verdict_lines(&report),
            "node1 | Healthy\n\
             node2 | PORT_DOWN mlx4_0/2: DOWN / Polling [ACTIVE / LinkUp]; NOT_RUN mlx4_0/1: loopback: refused\n"
        );
        assert!(!report.healthy());
    }
}
