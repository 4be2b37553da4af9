//! doctor's checks as a JUnit testsuite: one testcase per check; FAIL a failure (a FAIL
//! a qualification profile waived is skipped, `waived: …`), N/A skipped, WARN a pass whose `<system-out>`
//! says WARN with the fix, and every warning named in the suite's properties, so none
//! reads as a plain pass.

use super::{Check, DoctorReport, Status};
use crate::report::junit::{self, environment_properties, Case, Outcome, Suite};

/// The `doctor` testsuite of `report`, started at `timestamp` and taking `seconds`;
/// `waived` are the `id subject` names whose FAIL is skipped (`waived: …`).
pub fn suite(report: &DoctorReport, waived: &[String], timestamp: &str, seconds: f64) -> Suite {
    let named = |status: Status| {
        let names: Vec<String> =
            report.checks.iter().filter(|c| c.status == status).map(Check::name).collect();
        names.join(", ")
    };
    let mut properties = environment_properties("local", &report.environment);
    properties.push(("doctor.warnings".into(), named(Status::Warn)));
    properties.push(("doctor.waived".into(), waived.join(", ")));
    Suite {
        name: "doctor".into(),
        timestamp: timestamp.to_string(),
        hostname: report.environment.hostname.clone(),
        time: seconds,
        properties,
        cases: report.checks.iter().map(|c| case(c, waived)).collect(),
    }
}

fn case(c: &Check, waived: &[String]) -> Case {
    let judged = format!("{} (expected {}); fix: {}", c.observed, c.expected, c.fix);
    let is_waived = waived.contains(&c.name());
    let (out, outcome) = match c.status {
        Status::Fail if is_waived => {
            (format!("FAIL (waived): {judged}"), Outcome::Skipped(format!("waived: {judged}")))
        }
        Status::Fail => (format!("FAIL: {}", c.observed), Outcome::Failed(judged)),
        Status::Warn => (format!("WARN: {judged}"), Outcome::Passed),
        Status::Na => (format!("N/A: {}", c.observed), Outcome::Skipped(c.observed.clone())),
        Status::Pass => (format!("PASS: {}", c.observed), Outcome::Passed),
    };
    Case { name: c.name(), class: format!("doctor.{}", c.id), time: 0.0, out, outcome }
}

/// `doctor --junit`: the one testsuite as a document.
pub fn document(report: &DoctorReport, timestamp: &str, seconds: f64) -> String {
    junit::document("rdmabench doctor", &[suite(report, &[], timestamp, seconds)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::Environment;

    #[test]
    fn warnings_and_waivers_are_visible_and_na_is_skipped() {
        let check = |id: &str, status| Check::new(id, "host", status, "seen", "wanted", "do it");
        let report = DoctorReport {
            schema_version: 2,
            kind: "doctor".into(),
            checks: vec![
                check("memlock", Status::Pass),
                check("cpu.governor", Status::Warn),
                check("firmware", Status::Fail),
                check("rdma.device", Status::Fail),
                check("hugepages", Status::Na),
            ],
            environment: Environment::host(),
        };
        let s = suite(&report, &["firmware host".into()], "2026-12-04T07:00:00Z", 0.5);
        let outcomes: Vec<&Outcome> = s.cases.iter().map(|c| &c.outcome).collect();
        assert_eq!(
            outcomes,
            [
                &Outcome::Passed,
                &Outcome::Passed,
                &Outcome::Skipped("waived: seen (expected wanted); fix: do it".into()),
                &Outcome::Failed("seen (expected wanted); fix: do it".into()),
                &Outcome::Skipped("seen".into()),
            ]
        );
        assert_eq!(s.cases[1].out, "WARN: seen (expected wanted); fix: do it");
        assert!(s.cases[2].out.starts_with("FAIL (waived): "), "{}", s.cases[2].out);
        let prop = |n: &str| s.properties.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(prop("doctor.warnings"), Some("cpu.governor host"));
        assert_eq!(prop("doctor.waived"), Some("firmware host"));
        assert_eq!(prop("local.host"), Some(report.environment.hostname.as_str()));
        let xml = document(&report, "2026-12-04T07:00:00Z", 0.5);
        assert!(xml.contains("tests=\"5\" failures=\"2\""), "nothing waived in doctor: {xml}");
    }
}
