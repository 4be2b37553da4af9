//! qualify's report: the verdict table and the HTML page, pure functions of the model
//! (`model.rs`, re-exported here under its old paths).

use std::fmt::Write;

pub use super::model::{
    BaselineSummary, Point, ProfileSummary, QualifyReport, QualifyVerdict, Sides,
};
use crate::doctor::Status;
use crate::environment::Environment;
use crate::measure::MIB;
use crate::report::svg::{escape, render_time, TimeChart};

/// Each soak point's intervals over its runs, a chart each (`id="soak-N"`, N the
/// point's place in the table).
fn soak_html(o: &mut String, r: &QualifyReport) {
    let soaks =
        r.points.iter().enumerate().filter(|(_, p)| p.runs.iter().any(|r| !r.intervals.is_empty()));
    for (n, (k, p)) in soaks.enumerate() {
        if n == 0 {
            o.push_str("<h2>Soak</h2>\n");
        }
        let lines: Vec<(String, Vec<(f64, f64)>)> = p
            .runs
            .iter()
            .enumerate()
            .map(|(i, run)| {
                let points = run.intervals.iter().map(|[t, bps]| (*t, bps / MIB)).collect();
                (format!("run {}", i + 1), points)
            })
            .collect();
        let title = format!("{}: each second's bandwidth", p.id);
        let id = format!("soak-{k}");
        let chart = TimeChart { id: &id, title: &title, y_label: "MiB/s", lines: &lines };
        o.push_str(&render_time(&chart));
    }
}

/// What changed between two runs' environments, one line each, this host's first:
/// `local firmware 2.40.7000 → 2.42.5000`, `server kernel 6.1.0 → 6.12.0`
/// ([`crate::environment::diff`] on each side).
pub fn differences(was: Option<&Sides>, now: Option<&Sides>) -> Vec<String> {
    let (Some(was), Some(now)) = (was, now) else { return Vec::new() };
    let mut out = Vec::new();
    let mut side = |label: &str, a: Option<&Environment>, b: Option<&Environment>| {
        if let (Some(a), Some(b)) = (a, b) {
            out.extend(crate::environment::diff(a, b).iter().map(|c| format!("{label} {c}")));
        }
    };
    side("local", Some(&was.local), Some(&now.local));
    side("server", was.peer.as_ref(), now.peer.as_ref());
    out
}

/// The terminal's "what was tested" lines: each side's one-line summary.
fn tested(o: &mut String, sides: Option<&Sides>) {
    match sides {
        Some(s) => {
            let _ = writeln!(o, " this host: {}", s.local.summary());
            if let Some(peer) = &s.peer {
                let _ = writeln!(o, " server   : {}", peer.summary());
            }
        }
        None => {
            let _ = writeln!(o, " environment: not recorded (no run reached the server)");
        }
    }
}

/// A point's result word and its CSS class: PASS, FAIL, or PASS (n/a) when a
/// threshold did not apply.
fn point_word(p: &Point) -> (&'static str, &'static str) {
    match (p.pass(), p.judgements.iter().any(|j| j.not_applicable())) {
        (false, _) => ("fail", "FAIL"),
        (true, true) => ("pass", "PASS (n/a)"),
        (true, false) => ("pass", "PASS"),
    }
}

/// A point's median, as the table shows it.
pub fn median_text(p: &Point) -> String {
    let m = &p.median;
    match (m.bw_bytes_per_sec, m.lat_typical_us) {
        (Some(b), _) => format!("{:.2} MiB/s", b / MIB),
        (None, Some(l)) => format!("{l:.2} us typ, {:.2} us p99", m.lat_p99_us.unwrap_or(f64::NAN)),
        _ => "-".into(),
    }
}

/// Why a point failed, and which thresholds did not apply, one line.
pub fn reasons(p: &Point) -> String {
    let mut why: Vec<String> = p
        .judgements
        .iter()
        .filter(|j| !j.pass)
        .map(|j| format!("{}: {} (limit {})", j.threshold, j.observed, j.limit))
        .collect();
    why.extend(p.regressions.iter().cloned());
    why.extend(
        p.judgements
            .iter()
            .filter(|j| j.not_applicable())
            .map(|j| format!("{} {}", j.threshold, j.observed)),
    );
    why.join("; ")
}

/// The terminal table: doctor's failures, one line per point, the baseline's
/// differences and the verdict.
pub fn table(r: &QualifyReport) -> String {
    let mut o = String::new();
    let runs = if r.profile.sequential {
        format!("each point until its verdict is decided, {} runs at most", r.profile.repeats)
    } else {
        format!("{} runs per point", r.profile.repeats)
    };
    let _ = writeln!(
        o,
        "qualify {} ({}) against {}: {runs}",
        r.profile.name, r.profile.source, r.server
    );
    tested(&mut o, r.environment.as_ref());
    if let Some(b) = &r.baseline {
        let _ = writeln!(o, " changed since the baseline {} ({}):", b.file, b.started);
        for d in &b.differences {
            let _ = writeln!(o, "  {d}");
        }
        if b.differences.is_empty() {
            let _ = writeln!(o, "  nothing: the same environment");
        }
    }
    let _ = writeln!(
        o,
        " doctor: {} pass, {} warn, {} fail ({} waived), {} n/a",
        r.doctor.count(Status::Pass),
        r.doctor.count(Status::Warn),
        r.doctor.count(Status::Fail),
        r.waived.len(),
        r.doctor.count(Status::Na)
    );
    for c in r.doctor.checks.iter().filter(|c| c.status == Status::Fail) {
        let mark = if r.waived.contains(&c.name()) { "waived" } else { "FAIL" };
        let _ = writeln!(o, "  {mark:<6} {}: {} (fix: {})", c.name(), c.observed, c.fix);
    }
    let w = r.points.iter().map(|p| p.id.len()).max().unwrap_or(5).max(5);
    let _ = writeln!(o, " {:<6} {:<w$} {:<32} {:>4}  WHY", "RESULT", "POINT", "MEDIAN", "RUNS");
    for p in &r.points {
        let verdict = if p.pass() { "PASS" } else { "FAIL" };
        let (id, median, runs) = (&p.id, median_text(p), p.runs.len());
        let _ = writeln!(o, " {verdict:<6} {id:<w$} {median:<32} {runs:>4}  {}", reasons(p));
    }
    o.push_str(&super::comparison::table(r));
    let v = &r.verdict;
    let _ = writeln!(
        o,
        "qualify: {} ({} doctor failure(s), {} of {} points failed, {} regression(s))",
        if v.pass { "PASS" } else { "FAIL" },
        v.doctor_failures.len(),
        v.failed_points.len(),
        r.points.len(),
        v.regressions.len()
    );
    o
}

/// report.html's "what was tested": with a baseline, what changed first; then both
/// sides' environments (and the baseline's) in one table.
fn tested_html(o: &mut String, r: &QualifyReport) {
    use crate::report::{changes_list, environment_table};
    let now = r.environment.as_ref();
    let was = r.baseline.as_ref().and_then(|b| b.environment.as_ref());
    let mut columns =
        vec![("this host", now.map(|s| &s.local)), ("server", now.and_then(|s| s.peer.as_ref()))];
    if let Some(b) = &r.baseline {
        let _ = writeln!(
            o,
            "<h2>Changed since the baseline</h2>\n<p>Baseline {} ({}).</p>",
            escape(&b.file),
            escape(&b.started)
        );
        o.push_str(&changes_list("differences", &b.differences));
        columns.push(("baseline: this host", was.map(|s| &s.local)));
        columns.push(("baseline: server", was.and_then(|s| s.peer.as_ref())));
    }
    o.push_str("<h2>What was tested</h2>\n");
    o.push_str(&environment_table("environment", &columns));
}

/// report.html: the verdict, what was tested (and what changed against the baseline),
/// every point and doctor's checks, one self-contained page.
pub fn html(r: &QualifyReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>rdmabench qualify: {}</title>",
        escape(&r.profile.name)
    );
    o.push_str(
        "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f4f4f4}\
         .pass{color:#1a7f37}.fail{color:#b00}.warn{color:#9a6700}.na{color:#777}",
    );
    o.push_str(crate::report::environment::STYLE);
    o.push_str("</style>\n</head>\n<body>\n");
    let (class, word) = if r.verdict.pass { ("pass", "PASS") } else { ("fail", "FAIL") };
    let _ = writeln!(
        o,
        "<h1>Qualification <span id=\"verdict\" class=\"{class}\">{word}</span></h1>\n<p>Profile <b>{}</b> ({}), server <b>{}</b>, started {}, {}. Data: <a href=\"qualify.json\">qualify.json</a>, <a href=\"junit.xml\">junit.xml</a>.</p>",
        escape(&r.profile.name),
        escape(&r.profile.source),
        escape(&r.server),
        escape(&r.started),
        escape(&r.tool)
    );
    tested_html(&mut o, r);
    o.push_str("<h2>Tests</h2>\n<table id=\"points\">\n<tr><th>result</th><th>point</th><th>median</th><th>runs</th><th>why</th></tr>\n");
    for p in &r.points {
        let (class, word) = point_word(p);
        let _ = writeln!(
            o,
            "<tr data-point=\"{}\"><td class=\"{class}\">{word}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.id),
            escape(&p.id),
            escape(&median_text(p)),
            p.runs.len(),
            escape(&reasons(p))
        );
    }
    o.push_str("</table>\n");
    soak_html(&mut o, r);
    o.push_str("<h2>Doctor</h2>\n<table id=\"doctor\">\n<tr><th>status</th><th>check</th><th>observed</th><th>expected</th><th>fix</th></tr>\n");
    for c in &r.doctor.checks {
        let class = match c.status {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Na => "na",
        };
        let label = if c.status == Status::Fail && r.waived.contains(&c.name()) {
            "FAIL (waived)"
        } else {
            c.status.label()
        };
        let _ = writeln!(
            o,
            "<tr><td class=\"{class}\">{label}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.name()),
            escape(&c.observed),
            escape(&c.expected),
            escape(&c.fix)
        );
    }
    o.push_str("</table>\n");
    o.push_str(&super::comparison::html(r));
    o.push_str("</body>\n</html>\n");
    o
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::doctor::{Check, DoctorReport};
    use crate::qualify::verdict::{Judgement, Median, Run};

    pub(crate) fn report() -> QualifyReport {
        let check = |id: &str, status| {
            Check::new(id, "mlx4_0", status, "seen <here>", "wanted", "do \"this\"")
        };
        let judgement = |pass| Judgement {
            threshold: "min_bw".into(),
            limit: "100.00 MiB/s".into(),
            observed: "50.00 MiB/s".into(),
            pass,
        };
        let point = |id: &str, pass| Point {
            id: id.into(),
            test: "write_bw".into(),
            kind: "write_bw".into(),
            size: 65536,
            runs: Vec::new(),
            median: Median { bw_bytes_per_sec: Some(50.0 * MIB), ..Default::default() },
            judgements: vec![judgement(pass)],
            regressions: Vec::new(),
            seconds: 1.25,
            confirmation_runs: 0,
            comparison: None,
        };
        QualifyReport {
            schema_version: 1,
            kind: "qualify".into(),
            tool: "rdmabench test".into(),
            profile: ProfileSummary {
                name: "lab".into(),
                source: "lab.toml".into(),
                repeats: 3,
                sequential: false,
                tolerance_percent: 10.0,
                waive: vec!["firmware".into()],
            },
            server: "10.0.0.2".into(),
            started: "2026-12-01T00:00:00Z".into(),
            verdict: QualifyVerdict {
                pass: false,
                failed_points: vec!["write_bw 64K".into()],
                ..Default::default()
            },
            doctor: DoctorReport {
                schema_version: 1,
                kind: "doctor".into(),
                checks: vec![
                    check("port.state", Status::Pass),
                    check("firmware", Status::Fail),
                    check("pcie.link", Status::Na),
                ],
                environment: Environment::host(),
            },
            waived: vec!["firmware mlx4_0".into()],
            points: vec![point("write_bw 64K", false), point("write_bw 1M", true)],
            environment: None,
            baseline: None,
            run_id: None,
            trend: Vec::new(),
        }
    }

    pub(crate) fn rxe(firmware: &str) -> crate::environment::DeviceEnvironment {
        crate::environment::DeviceEnvironment {
            name: "rxe0".into(),
            model: Some("Soft-RoCE (rxe)".into()),
            firmware: firmware.into(),
            board_id: None,
            link_layer: "Ethernet".into(),
            rate_gbps: Some(2.5),
            active_mtu: Some(1024),
            pcie: None,
            numa_node: None,
            driver: Some("rdma_rxe".into()),
            rdma_core: Some("44.0".into()),
            port: 1,
        }
    }

    /// [`report`] run against a baseline on older firmware, its first point's floor
    /// not applicable.
    pub(crate) fn against_baseline() -> QualifyReport {
        let mut r = report();
        let mut local = Environment::host_at(std::path::Path::new("/nonexistent"));
        local.kernel = "6.12.0".into();
        local.device = Some(rxe("2.42.5000"));
        r.environment = Some(Sides { local: local.clone(), peer: Some(local.clone()) });
        local.device = Some(rxe("2.40.7000"));
        let was = Sides { local: local.clone(), peer: Some(local) };
        let differences = differences(Some(&was), r.environment.as_ref());
        r.baseline = Some(BaselineSummary {
            file: "before/qualify.json".into(),
            started: "2026-11-30T00:00:00Z".into(),
            environment: Some(was),
            differences,
        });
        r.points[1].judgements[0].observed =
            "n/a: rxe0/1: soft device: no physical link (measured 50.00 MiB/s)".into();
        r
    }

    #[test]
    fn what_was_tested_and_what_changed_come_first() {
        let r = against_baseline();
        let t = table(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].starts_with(" this host: ") && lines[1].contains("fw 2.42.5000"), "{t}");
        assert!(lines[2].starts_with(" server   : ") && lines[2].contains("rxe0 port 1"), "{t}");
        assert_eq!(
            lines[3],
            " changed since the baseline before/qualify.json (2026-11-30T00:00:00Z):"
        );
        assert_eq!(lines[4], "  local firmware 2.40.7000 → 2.42.5000");
        assert_eq!(lines[5], "  server firmware 2.40.7000 → 2.42.5000");
        assert!(lines[6].starts_with(" doctor: "), "{t}");
        let na = lines.iter().find(|l| l.contains("write_bw 1M")).unwrap();
        assert!(na.contains("PASS") && na.contains("min_bw n/a: rxe0/1: soft device"), "{na}");
        let page = html(&r);
        let changed = page.find("<ul id=\"differences\">").unwrap();
        assert!(changed < page.find("<table id=\"points\">").unwrap(), "changes first");
        assert!(page.contains("<li>local firmware 2.40.7000 → 2.42.5000</li>"), "{page}");
        for row in ["model", "firmware", "kernel", "link layer", "rate", "active MTU", "driver"] {
            assert!(page.contains(&format!("<tr data-field=\"{row}\">")), "{row}: {page}");
        }
        assert!(page.contains("<td>Soft-RoCE (rxe)</td>"), "{page}");
        assert!(page.contains("<th>baseline: server</th>"), "{page}");
        assert!(page.contains("PASS (n/a)"), "{page}");
    }

    #[test]
    fn the_table_and_page_name_every_point() {
        let r = report();
        let t = table(&r);
        assert!(t.contains("waived firmware mlx4_0"), "{t}");
        let fail = t.lines().find(|l| l.contains("write_bw 64K")).unwrap();
        assert!(fail.trim_start().starts_with("FAIL") && fail.contains("50.00 MiB/s"), "{fail}");
        assert!(
            t.lines().any(|l| l.trim_start().starts_with("PASS") && l.contains("write_bw 1M")),
            "{t}"
        );
        assert!(
            t.ends_with(
                "qualify: FAIL (0 doctor failure(s), 1 of 2 points failed, 0 regression(s))\n"
            ),
            "{t}"
        );
        let page = html(&r);
        assert_eq!(page.matches("<tr data-point=").count(), 2);
        assert!(page.contains("<span id=\"verdict\" class=\"fail\">FAIL</span>"));
        assert!(page.contains("FAIL (waived)") && page.contains("do &quot;this&quot;"));
    }

    #[test]
    fn environment_differences_name_each_change() {
        let mut was = Sides { local: Environment::host(), peer: None };
        was.local.kernel = "6.1.0".into();
        let mut now = was.clone();
        now.local.kernel = "6.12.0".into();
        assert_eq!(differences(Some(&was), Some(&now)), ["local kernel 6.1.0 → 6.12.0"]);
        let server = |fw: &str| {
            let mut e = Environment::host_at(std::path::Path::new("/nonexistent"));
            e.device = Some(rxe(fw));
            Some(e)
        };
        let was = Sides { peer: server("2.40.7000"), ..was };
        let now = Sides { peer: server("2.42.5000"), ..now };
        assert_eq!(
            differences(Some(&was), Some(&now)),
            ["local kernel 6.1.0 → 6.12.0", "server firmware 2.40.7000 → 2.42.5000"]
        );
        assert!(differences(Some(&was), Some(&was)).is_empty());
        assert!(differences(None, Some(&now)).is_empty());
    }

    #[test]
    fn a_soak_point_has_its_chart_and_no_other_point_does() {
        let mut r = report();
        assert!(!html(&r).contains("<h2>Soak</h2>"));
        let run = |intervals: Vec<[f64; 2]>| Run { result: None, error: None, intervals };
        r.points[1].runs = vec![
            run(vec![[1.0, 100.0 * MIB], [2.0, 50.0 * MIB], [3.0, 100.0 * MIB]]),
            run(vec![[1.0, 90.0 * MIB], [2.0, 95.0 * MIB]]),
        ];
        let page = html(&r);
        assert_eq!(page.matches("<h2>Soak</h2>").count(), 1, "{page}");
        let chart = &page[page
            .find(r#"<svg xmlns="http://www.w3.org/2000/svg" id="soak-1""#)
            .expect("the chart")..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        assert_eq!(chart.matches("<polyline").count(), 2, "a line per run: {chart}");
        assert!(chart.contains(">run 2</text>") && chart.contains("each second"), "{chart}");
        assert_eq!(page.matches("<svg").count(), 1, "{page}");
    }
}
