//! qualify's report: the model (qualify.json), the verdict table, JUnit XML and the HTML
//! page. Pure functions of the model.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::verdict::{Judgement, Median, Run};
use crate::doctor::{DoctorReport, Status};
use crate::environment::Environment;
use crate::measure::MIB;
use crate::report::svg::{escape, size_label};

/// qualify.json (docs/json.md#qualify).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QualifyReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// Always `qualify`.
    pub kind: String,
    /// `rdmabench 0.1.0`.
    pub tool: String,
    /// The profile's name, where it came from, repeats, tolerance and waivers.
    pub profile: ProfileSummary,
    /// The server.
    pub server: String,
    /// When the qualification started, UTC.
    pub started: String,
    /// The verdict.
    pub verdict: QualifyVerdict,
    /// doctor on this host, run first.
    pub doctor: DoctorReport,
    /// Doctor checks (`id subject`) that failed but were waived by the profile.
    pub waived: Vec<String>,
    /// Every test point: its runs, medians and judgements.
    pub points: Vec<Point>,
    /// This host and the server, from the first run that reached the server.
    pub environment: Option<Sides>,
    /// The baseline compared with, if any.
    pub baseline: Option<BaselineSummary>,
    /// The run's id in the results store, once recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// Earlier runs' medians of the same profile on this host (report.html's trends).
    #[serde(skip)]
    pub trend: Vec<crate::store::query::TrendRow>,
}

/// The profile, as the report records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProfileSummary {
    /// Name.
    pub name: String,
    /// `built-in quick` or a path.
    pub source: String,
    /// Runs per point.
    pub repeats: u32,
    /// Regression tolerance, percent.
    pub tolerance_percent: f64,
    /// Waived doctor checks.
    pub waive: Vec<String>,
}

/// Pass or fail, and why.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QualifyVerdict {
    /// Everything passed and nothing regressed.
    pub pass: bool,
    /// Doctor checks that failed and were not waived.
    pub doctor_failures: Vec<String>,
    /// Test points that failed a threshold or a run.
    pub failed_points: Vec<String>,
    /// Every regression against the baseline.
    pub regressions: Vec<String>,
}

/// Both ends' environments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sides {
    /// This host.
    pub local: Environment,
    /// The server.
    pub peer: Option<Environment>,
}

/// One test at one size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// `write_bw 64K`: the profile test's name and the size.
    pub id: String,
    /// The profile test's name.
    pub test: String,
    /// The test run (`write_bw`, `tcp_lat`).
    pub kind: String,
    /// Message size, bytes.
    pub size: u64,
    /// Every run.
    pub runs: Vec<Run>,
    /// Medians of the runs.
    pub median: Median,
    /// The thresholds judged.
    pub judgements: Vec<Judgement>,
    /// Regressions against the baseline.
    pub regressions: Vec<String>,
    /// The runs against the baseline's (crate::stats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<super::verdict::PointComparison>,
}

impl Point {
    /// `write_bw 64K`.
    pub fn id_for(test: &str, size: u64) -> String {
        format!("{test} {}", size_label(size))
    }

    /// Every threshold held and nothing regressed.
    pub fn pass(&self) -> bool {
        self.judgements.iter().all(|j| j.pass) && self.regressions.is_empty()
    }
}

/// The baseline, as the report records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BaselineSummary {
    /// The file.
    pub file: String,
    /// When the baseline ran.
    pub started: String,
    /// Its environments.
    pub environment: Option<Sides>,
    /// What differs between the two environments: `local firmware: 2.9.8350 → 2.10.720`.
    pub differences: Vec<String>,
}

/// What changed between two environments, one line each.
pub fn differences(was: Option<&Sides>, now: Option<&Sides>) -> Vec<String> {
    let (Some(was), Some(now)) = (was, now) else { return Vec::new() };
    let mut out = Vec::new();
    let mut side = |label: &str, a: Option<&Environment>, b: Option<&Environment>| {
        let (Some(a), Some(b)) = (a, b) else { return };
        let dev = |e: &Environment,
                   f: &dyn Fn(&crate::environment::DeviceEnvironment) -> String| {
            e.device.as_ref().map_or_else(|| "-".to_string(), f)
        };
        let fields: [(&str, String, String); 9] = [
            ("hostname", a.hostname.clone(), b.hostname.clone()),
            ("kernel", a.kernel.clone(), b.kernel.clone()),
            ("os", a.os.clone(), b.os.clone()),
            ("rdmabench", a.rdmabench.clone(), b.rdmabench.clone()),
            (
                "governor",
                a.governor.clone().unwrap_or_default(),
                b.governor.clone().unwrap_or_default(),
            ),
            (
                "device",
                dev(a, &|d| format!("{} {}", d.name, d.model.clone().unwrap_or_default())),
                dev(b, &|d| format!("{} {}", d.name, d.model.clone().unwrap_or_default())),
            ),
            ("firmware", dev(a, &|d| d.firmware.clone()), dev(b, &|d| d.firmware.clone())),
            (
                "driver",
                dev(a, &|d| d.driver.clone().unwrap_or_default()),
                dev(b, &|d| d.driver.clone().unwrap_or_default()),
            ),
            (
                "rdma-core",
                dev(a, &|d| d.rdma_core.clone().unwrap_or_default()),
                dev(b, &|d| d.rdma_core.clone().unwrap_or_default()),
            ),
        ];
        for (name, x, y) in fields {
            if x != y {
                out.push(format!("{label} {name}: {x} → {y}"));
            }
        }
    };
    side("local", Some(&was.local), Some(&now.local));
    side("server", was.peer.as_ref(), now.peer.as_ref());
    out
}

fn median_text(p: &Point) -> String {
    let m = &p.median;
    match (m.bw_bytes_per_sec, m.lat_typical_us) {
        (Some(b), _) => format!("{:.2} MiB/s", b / MIB),
        (None, Some(l)) => format!("{l:.2} us typ, {:.2} us p99", m.lat_p99_us.unwrap_or(f64::NAN)),
        _ => "-".into(),
    }
}

/// Why a point failed, one line.
pub fn reasons(p: &Point) -> String {
    let mut why: Vec<String> = p
        .judgements
        .iter()
        .filter(|j| !j.pass)
        .map(|j| format!("{}: {} (limit {})", j.threshold, j.observed, j.limit))
        .collect();
    why.extend(p.regressions.iter().cloned());
    why.join("; ")
}

/// The terminal table: doctor's failures, one line per point, the baseline's
/// differences and the verdict.
pub fn table(r: &QualifyReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "qualify {} ({}) against {}: {} runs per point",
        r.profile.name, r.profile.source, r.server, r.profile.repeats
    );
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
    let _ = writeln!(o, " {:<6} {:<w$} {:<32} WHY", "RESULT", "POINT", "MEDIAN");
    for p in &r.points {
        let verdict = if p.pass() { "PASS" } else { "FAIL" };
        let _ = writeln!(o, " {verdict:<6} {:<w$} {:<32} {}", p.id, median_text(p), reasons(p));
    }
    o.push_str(&super::comparison::table(r));
    if let Some(b) = &r.baseline {
        let _ = writeln!(o, " baseline {} ({}):", b.file, b.started);
        for d in &b.differences {
            let _ = writeln!(o, "  {d}");
        }
        if b.differences.is_empty() {
            let _ = writeln!(o, "  same environment");
        }
    }
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

/// One JUnit testcase: name, classname, what it printed, and its outcome.
struct Case {
    name: String,
    class: String,
    out: String,
    outcome: Outcome,
}

/// A testcase's outcome: passed, skipped (with why) or failed (with the reason).
enum Outcome {
    Passed,
    Skipped(String),
    Failed(String),
}

/// JUnit XML as Jenkins and GitLab read it: a `doctor` testsuite (one testcase per
/// check; N/A skipped, WARN and a waived FAIL pass with their text) and a
/// `qualify.NAME` testsuite (one testcase per point, a failure carrying the reason).
/// Written with `quick-xml`, which escapes every name, message and text.
pub fn junit(r: &QualifyReport) -> String {
    let doctor: Vec<Case> = r
        .doctor
        .checks
        .iter()
        .map(|c| Case {
            name: c.name(),
            class: format!("doctor.{}", c.id),
            out: format!("{}: {}", c.status.label(), c.observed),
            outcome: match c.status {
                Status::Fail if !r.waived.contains(&c.name()) => Outcome::Failed(format!(
                    "{} (expected {}); fix: {}",
                    c.observed, c.expected, c.fix
                )),
                Status::Na => Outcome::Skipped(c.observed.clone()),
                _ => Outcome::Passed,
            },
        })
        .collect();
    let points: Vec<Case> = r
        .points
        .iter()
        .map(|p| Case {
            name: p.id.clone(),
            class: format!("qualify.{}.{}", r.profile.name, p.test),
            out: format!("median {}", median_text(p)),
            outcome: if p.pass() { Outcome::Passed } else { Outcome::Failed(reasons(p)) },
        })
        .collect();
    let suites = [("doctor".to_string(), doctor), (format!("qualify.{}", r.profile.name), points)];
    let mut w = quick_xml::Writer::new_with_indent(Vec::new(), b' ', 2);
    let written = write_suites(&mut w, &format!("rdmabench qualify {}", r.profile.name), &suites);
    match written {
        Ok(()) => {
            let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
            xml.push_str(&String::from_utf8_lossy(&w.into_inner()));
            xml.push('\n');
            xml
        }
        Err(e) => format!("<!-- JUnit XML could not be written: {e} -->\n"),
    }
}

/// `(tests, failures, skipped)` of some cases.
fn counts<'a>(cases: impl IntoIterator<Item = &'a Case>) -> [(&'static str, usize); 3] {
    let (mut tests, mut failures, mut skipped) = (0, 0, 0);
    for c in cases {
        tests += 1;
        match c.outcome {
            Outcome::Failed(_) => failures += 1,
            Outcome::Skipped(_) => skipped += 1,
            Outcome::Passed => {}
        }
    }
    [("tests", tests), ("failures", failures), ("skipped", skipped)]
}

fn write_suites(
    w: &mut quick_xml::Writer<Vec<u8>>,
    name: &str,
    suites: &[(String, Vec<Case>)],
) -> std::io::Result<()> {
    use quick_xml::events::BytesText;
    let numbers = |c: [(&'static str, usize); 3]| c.map(|(k, v)| (k, v.to_string()));
    let all = numbers(counts(suites.iter().flat_map(|(_, c)| c)));
    let mut root = w.create_element("testsuites").with_attribute(("name", name));
    for (k, v) in &all {
        root = root.with_attribute((*k, v.as_str()));
    }
    root.write_inner_content(|w| {
        for (suite, cases) in suites {
            let mut e = w.create_element("testsuite").with_attribute(("name", suite.as_str()));
            for (k, v) in &numbers(counts(cases)) {
                e = e.with_attribute((*k, v.as_str()));
            }
            e.write_inner_content(|w| {
                for c in cases {
                    let case = w
                        .create_element("testcase")
                        .with_attribute(("name", c.name.as_str()))
                        .with_attribute(("classname", c.class.as_str()));
                    case.write_inner_content(|w| {
                        match &c.outcome {
                            Outcome::Failed(m) => {
                                let f = w
                                    .create_element("failure")
                                    .with_attribute(("message", m.as_str()));
                                f.with_attribute(("type", "failure")).write_empty()?;
                            }
                            Outcome::Skipped(m) => {
                                w.create_element("skipped")
                                    .with_attribute(("message", m.as_str()))
                                    .write_empty()?;
                            }
                            Outcome::Passed => {}
                        }
                        w.create_element("system-out")
                            .write_text_content(BytesText::new(&c.out))?;
                        Ok(())
                    })?;
                }
                Ok(())
            })?;
        }
        Ok(())
    })?;
    Ok(())
}

/// report.html: the verdict, doctor's checks and every point, one self-contained page.
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
         .pass{color:#1a7f37}.fail{color:#b00}.warn{color:#9a6700}.na{color:#777}</style>\n</head>\n<body>\n",
    );
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
    o.push_str("<h2>Tests</h2>\n<table id=\"points\">\n<tr><th>result</th><th>point</th><th>median</th><th>runs</th><th>why</th></tr>\n");
    for p in &r.points {
        let (class, word) = if p.pass() { ("pass", "PASS") } else { ("fail", "FAIL") };
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
    o.push_str("</table>\n<h2>Doctor</h2>\n<table id=\"doctor\">\n<tr><th>status</th><th>check</th><th>observed</th><th>expected</th><th>fix</th></tr>\n");
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
    if let Some(b) = &r.baseline {
        let _ = writeln!(
            o,
            "<h2>Baseline</h2>\n<p>{} ({})</p>\n<ul id=\"differences\">",
            escape(&b.file),
            escape(&b.started)
        );
        for d in &b.differences {
            let _ = writeln!(o, "<li>{}</li>", escape(d));
        }
        o.push_str("</ul>\n");
    }
    o.push_str(&super::comparison::html(r));
    o.push_str("</body>\n</html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Check;
    use crate::qualify::verdict::Judgement;

    fn report() -> QualifyReport {
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

    #[test]
    fn junit_has_a_case_per_check_and_point_with_reasons() {
        let xml = junit(&report());
        let head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                    <testsuites name=\"rdmabench qualify lab\" tests=\"5\" failures=\"1\" skipped=\"1\">";
        assert!(xml.starts_with(head), "{xml}");
        // The waived FAIL passes, N/A is skipped.
        let doctor = "<testsuite name=\"doctor\" tests=\"3\" failures=\"0\" skipped=\"1\">";
        assert!(xml.contains(doctor), "{xml}");
        assert!(xml.contains("<skipped message=\"seen &lt;here&gt;\"/>"), "{xml}");
        let points = "<testsuite name=\"qualify.lab\" tests=\"2\" failures=\"1\" skipped=\"0\">";
        assert!(xml.contains(points), "{xml}");
        assert_eq!(xml.matches("<testcase ").count(), 5);
        assert!(xml.contains("message=\"min_bw: 50.00 MiB/s (limit 100.00 MiB/s)\""), "{xml}");
        assert!(xml.contains("seen &lt;here&gt;"), "escaped: {xml}");
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
        assert_eq!(differences(Some(&was), Some(&now)), ["local kernel: 6.1.0 → 6.12.0"]);
        assert!(differences(Some(&was), Some(&was)).is_empty());
        assert!(differences(None, Some(&now)).is_empty());
    }
}
