//! `health`'s other outputs, each from the finished report: JUnit (a testcase per
//! host), CSV (a row per finding, or per healthy host), the hostlist of the unhealthy
//! hosts, Slurm's drain lines for them (printed, never run), and a Prometheus text-format
//! file per host for node_exporter's textfile collector (docs/health.md#outputs).

use std::fmt::Write as _;

use super::{HealthReport, HostHealth};
use crate::report::junit::{self, Case, Outcome, Suite};

/// The JUnit document: one `health` testsuite, a testcase per host (failed with its
/// findings, one a line).
pub fn junit(report: &HealthReport, seconds: f64) -> String {
    let cases = report
        .hosts
        .iter()
        .map(|h| {
            let found: Vec<String> = h.findings.iter().map(ToString::to_string).collect();
            let outcome =
                if h.healthy { Outcome::Passed } else { Outcome::Failed(found.join("\n")) };
            Case {
                name: h.host.clone(),
                class: "health".into(),
                time: h.phases.facts_before
                    + h.phases.loopback
                    + h.phases.facts_after
                    + h.phases.ring,
                out: super::output::host_line(h),
                outcome,
            }
        })
        .collect();
    let suite = Suite {
        name: "health".into(),
        timestamp: report.started.clone(),
        hostname: report.hosts.first().map(|h| h.host.clone()).unwrap_or_default(),
        time: seconds,
        properties: Vec::new(),
        cases,
    };
    junit::document("rdmabench health", &[suite])
}

/// A CSV field, quoted when it must be.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// `host,healthy,code,subject,detail`: a row per finding, one `Healthy` row per healthy host.
pub fn csv(report: &HealthReport) -> String {
    let mut out = String::from("host,healthy,code,subject,detail\n");
    for h in &report.hosts {
        if h.findings.is_empty() {
            let _ = writeln!(out, "{},true,,,", field(&h.host));
        }
        for f in &h.findings {
            let _ = writeln!(
                out,
                "{},false,{},{},{}",
                field(&h.host),
                f.code,
                field(&f.subject),
                field(&f.detail)
            );
        }
    }
    out
}

/// The unhealthy hosts, a name a line (what `scontrol`, `pdsh -w ^FILE` and
/// `sbatch --exclude` read).
pub fn hostlist(report: &HealthReport) -> String {
    report.hosts.iter().filter(|h| !h.healthy).map(|h| format!("{}\n", h.host)).collect()
}

/// Slurm's lines to drain the unhealthy hosts, each with its first finding as the
/// reason: printed for an admin to run, never run here.
pub fn drain(report: &HealthReport) -> String {
    report
        .hosts
        .iter()
        .filter(|h| !h.healthy)
        .map(|h| {
            let first = h.findings.first().map_or_else(String::new, ToString::to_string);
            let more = h.findings.len().saturating_sub(1);
            let more = if more > 0 { format!(" (+{more} more)") } else { String::new() };
            // Slurm takes the reason as one argument: quoted, its own quotes made single.
            let reason = format!("rdmabench health: {first}{more}").replace('"', "'");
            format!("scontrol update NodeName={} State=DRAIN Reason=\"{reason}\"\n", h.host)
        })
        .collect()
}

/// A Prometheus label value, escaped.
fn label(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One host's metrics in Prometheus' text format: whether it is healthy, each code's
/// count, and each port's figures, labelled by device and port.
pub fn prometheus(h: &HostHealth) -> String {
    let mut o = String::new();
    let host = label(&h.host);
    let _ =
        writeln!(o, "# HELP rdmabench_health_healthy 1 when rdmabench health found nothing wrong.");
    let _ = writeln!(o, "# TYPE rdmabench_health_healthy gauge");
    let _ = writeln!(o, "rdmabench_health_healthy{{host=\"{host}\"}} {}", u8::from(h.healthy));
    let _ = writeln!(
        o,
        "# HELP rdmabench_health_findings Findings of each fault code (docs/health.md)."
    );
    let _ = writeln!(o, "# TYPE rdmabench_health_findings gauge");
    for code in super::Code::ALL {
        let n = h.findings.iter().filter(|f| f.code == code).count();
        let _ = writeln!(o, "rdmabench_health_findings{{host=\"{host}\",code=\"{code}\"}} {n}");
    }
    type Figure = fn(&super::PortHealth) -> Option<f64>;
    let gauges: [(&str, &str, Figure); 4] = [
        ("loopback_write_bw_gbps", "Loopback write bandwidth, 64 KiB, Gb/s.", |p| {
            p.loopback.bw_gbps
        }),
        ("loopback_write_lat_us", "Loopback write latency, 2 bytes, typical µs.", |p| {
            p.loopback.lat_us
        }),
        ("port_rate_gbps", "The port's link rate, Gb/s.", |p| p.before.rate_gbps),
        ("port_active", "1 when the port was ACTIVE before and after the test.", |p| {
            Some(f64::from(u8::from(p.before.state == "ACTIVE" && p.after.state == "ACTIVE")))
        }),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(o, "# HELP rdmabench_health_{name} {help}");
        let _ = writeln!(o, "# TYPE rdmabench_health_{name} gauge");
        for p in &h.ports {
            let Some(v) = value(p) else { continue };
            let (device, port) = p.subject.split_once('/').unwrap_or((&p.subject, ""));
            let _ = writeln!(
                o,
                "rdmabench_health_{name}{{host=\"{host}\",device=\"{}\",port=\"{}\"}} {v}",
                label(device),
                label(port)
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{Code, Finding, Floors, LinkFacts, Loopback, Phases, PortHealth};

    fn report() -> HealthReport {
        let host = |name: &str, findings: Vec<Finding>| HostHealth {
            host: name.into(),
            kernel: "6.1.0".into(),
            healthy: findings.is_empty(),
            findings,
            ports: vec![PortHealth {
                subject: "mlx5_0/1".into(),
                model: None,
                numa_node: None,
                address: None,
                before: LinkFacts {
                    state: "ACTIVE".into(),
                    rate_gbps: Some(200.0),
                    ..LinkFacts::default()
                },
                after: LinkFacts { state: "ACTIVE".into(), ..LinkFacts::default() },
                loopback: Loopback { bw_gbps: Some(191.5), ..Loopback::default() },
                counters: None,
            }],
            floors: Floors { min_bw: None, max_lat: None, source: "defaults".into() },
            phases: Phases::default(),
        };
        HealthReport {
            schema_version: 2,
            kind: "health".into(),
            started: "2026-12-05T17:00:00Z".into(),
            hosts: vec![
                host("node1", Vec::new()),
                host(
                    "node2",
                    vec![
                        Finding::new(
                            Code::PortDown,
                            "mlx5_0/2",
                            "DOWN / Polling [ACTIVE / LinkUp]",
                        ),
                        Finding::new(Code::NotRun, "mlx5_0/1", "loopback: \"refused\", twice"),
                    ],
                ),
            ],
            ring: Vec::new(),
        }
    }

    #[test]
    fn csv_has_a_row_per_finding_and_per_healthy_host_quoted() {
        assert_eq!(
            csv(&report()),
            "host,healthy,code,subject,detail\n\
             node1,true,,,\n\
             node2,false,PORT_DOWN,mlx5_0/2,DOWN / Polling [ACTIVE / LinkUp]\n\
             node2,false,NOT_RUN,mlx5_0/1,\"loopback: \"\"refused\"\", twice\"\n"
        );
    }

    #[test]
    fn hostlist_and_drain_name_the_unhealthy_hosts_only() {
        let r = report();
        assert_eq!(hostlist(&r), "node2\n");
        assert_eq!(
            drain(&r),
            "scontrol update NodeName=node2 State=DRAIN Reason=\"rdmabench health: PORT_DOWN mlx5_0/2: DOWN / Polling [ACTIVE / LinkUp] (+1 more)\"\n"
        );
    }

    #[test]
    fn junit_has_a_testcase_per_host() {
        let xml = junit(&report(), 1.5);
        assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
        assert!(xml.contains("name=\"node1\"") && xml.contains("name=\"node2\""), "{xml}");
        assert!(xml.contains("PORT_DOWN mlx5_0/2"), "{xml}");
    }

    #[test]
    fn prometheus_has_a_gauge_per_figure_and_per_code() {
        let r = report();
        let text = prometheus(&r.hosts[1]);
        assert!(text.contains("rdmabench_health_healthy{host=\"node2\"} 0\n"), "{text}");
        assert!(text.contains("rdmabench_health_findings{host=\"node2\",code=\"PORT_DOWN\"} 1\n"));
        assert!(text.contains("rdmabench_health_findings{host=\"node2\",code=\"RATE_LOW\"} 0\n"));
        assert!(text.contains(
            "rdmabench_health_loopback_write_bw_gbps{host=\"node2\",device=\"mlx5_0\",port=\"1\"} 191.5\n"
        ));
        assert!(text.contains(
            "rdmabench_health_port_active{host=\"node2\",device=\"mlx5_0\",port=\"1\"} 1\n"
        ));
        // Every sample line is `name{labels} value`; the rest are HELP and TYPE.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
