//! qualify's JUnit XML: doctor's testsuite ([`crate::doctor::junit`]) and a
//! `qualify.NAME` testsuite (one testcase per point, its wall time, a failure carrying
//! the reason), each with the environment tested as `<properties>`; and the document a
//! qualification that could not start writes, its reason as the failure.

use super::report::{median_text, reasons, QualifyReport};
use crate::doctor::DoctorReport;
use crate::report::junit::{self, environment_properties, Case, Outcome, Suite};

/// The JUnit document of a finished (or stopped) qualification.
pub fn document(r: &QualifyReport) -> String {
    let doctor = crate::doctor::junit::suite(&r.doctor, &r.waived, &r.started, 0.0);
    let cases = r
        .points
        .iter()
        .map(|p| Case {
            name: p.id.clone(),
            class: format!("qualify.{}.{}", r.profile.name, p.test),
            time: p.seconds,
            out: format!("{} run(s), median {}; {}", p.runs.len(), median_text(p), reasons(p)),
            outcome: if p.pass() { Outcome::Passed } else { Outcome::Failed(reasons(p)) },
        })
        .collect();
    let mut properties = vec![
        ("profile".to_string(), format!("{} ({})", r.profile.name, r.profile.source)),
        ("server".to_string(), r.server.clone()),
        ("tool".to_string(), r.tool.clone()),
    ];
    if let Some(sides) = &r.environment {
        properties.extend(environment_properties("local", &sides.local));
        if let Some(peer) = &sides.peer {
            properties.extend(environment_properties("server", peer));
        }
    }
    if let Some(b) = &r.baseline {
        properties.push(("baseline".into(), format!("{} ({})", b.file, b.started)));
        properties.push(("baseline.changes".into(), b.differences.join("; ")));
    }
    let points = Suite {
        name: format!("qualify.{}", r.profile.name),
        timestamp: r.started.clone(),
        hostname: doctor.hostname.clone(),
        time: r.points.iter().map(|p| p.seconds).sum(),
        properties,
        cases,
    };
    junit::document(&format!("rdmabench qualify {}", r.profile.name), &[doctor, points])
}

/// The JUnit document of a qualification that could not start (a bad profile or
/// baseline, no server, no device): doctor's suite when doctor ran (the profile's
/// waivers skipped, as in a finished run's), and one failed `qualify.NAME` testcase
/// whose message is `reason`, so CI shows why. `profile` is the loaded profile's name and
/// waivers, else as given (a built-in's name or a path: its stem).
pub fn not_started(
    profile: Result<(&str, &[String]), &str>,
    reason: &str,
    doctor: Option<&DoctorReport>,
    started: &str,
) -> String {
    let (profile, waive) = match profile {
        Ok((name, waive)) => (name.to_string(), waive),
        Err(given) => (super::profile::default_name(given), &[][..]),
    };
    let profile = &profile;
    let env = doctor.map_or_else(crate::environment::Environment::host, |d| d.environment.clone());
    let waived = |d: &DoctorReport| -> Vec<String> {
        let failed = d.checks.iter().filter(|c| c.status == crate::doctor::Status::Fail);
        failed
            .filter(|c| waive.iter().any(|w| *w == c.id || *w == c.name()))
            .map(|c| c.name())
            .collect()
    };
    let mut suites: Vec<Suite> = doctor
        .map(|d| crate::doctor::junit::suite(d, &waived(d), started, 0.0))
        .into_iter()
        .collect();
    suites.push(Suite {
        name: format!("qualify.{profile}"),
        timestamp: started.to_string(),
        hostname: env.hostname.clone(),
        time: 0.0,
        properties: environment_properties("local", &env),
        cases: vec![Case {
            name: "start".into(),
            class: format!("qualify.{profile}"),
            time: 0.0,
            out: format!("the qualification could not start: {reason}"),
            outcome: Outcome::Failed(reason.to_string()),
        }],
    });
    junit::document(&format!("rdmabench qualify {profile}"), &suites)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qualify::report::tests::{against_baseline, report};

    #[test]
    fn a_case_per_check_and_point_with_times_reasons_and_properties() {
        let xml = document(&report());
        let head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                    <testsuites name=\"rdmabench qualify lab\" tests=\"5\" failures=\"1\" errors=\"0\" time=\"2.500\">";
        assert!(xml.starts_with(head), "{xml}");
        // The waived FAIL and N/A are skipped, the waiver said so.
        let doctor = "<testsuite name=\"doctor\" tests=\"3\" failures=\"0\" errors=\"0\" skipped=\"2\" time=\"0.000\" timestamp=\"2026-12-01T00:00:00\" hostname=\"";
        assert!(xml.contains(doctor), "{xml}");
        assert!(xml.contains("<skipped message=\"seen &lt;here&gt;\"/>"), "{xml}");
        assert_eq!(xml.matches("<skipped message=\"waived: ").count(), 1, "{xml}");
        let points = "<testsuite name=\"qualify.lab\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"2.500\" timestamp=\"2026-12-01T00:00:00\"";
        assert!(xml.contains(points), "{xml}");
        assert_eq!(xml.matches("<testcase ").count(), 5);
        assert_eq!(xml.matches("<testcase ").count(), xml.matches("\" time=\"").count() - 3);
        assert_eq!(xml.matches("time=\"1.250\"").count(), 2, "{xml}");
        assert!(xml.contains("message=\"min_bw: 50.00 MiB/s (limit 100.00 MiB/s)\""), "{xml}");
        assert!(xml.contains("<property name=\"profile\" value=\"lab (lab.toml)\"/>"), "{xml}");
    }

    #[test]
    fn the_environment_and_its_changes_are_properties() {
        let xml = document(&against_baseline());
        for p in [
            "<property name=\"local.firmware\" value=\"2.42.5000\"/>",
            "<property name=\"server.model\" value=\"Soft-RoCE (rxe)\"/>",
            "<property name=\"local.kernel\" value=\"6.12.0\"/>",
            "<property name=\"baseline.changes\" value=\"local firmware 2.40.7000 → 2.42.5000; server firmware 2.40.7000 → 2.42.5000\"/>",
        ] {
            assert!(xml.contains(p), "{p}: {xml}");
        }
    }

    #[test]
    fn a_qualification_that_could_not_start_says_why() {
        let xml = not_started(
            Err("quick"),
            "cannot reach 10.0.0.2:18515: refused",
            None,
            "2026-12-04T07:00:00Z",
        );
        assert!(
            xml.contains("<testsuites name=\"rdmabench qualify quick\" tests=\"1\" failures=\"1\""),
            "{xml}"
        );
        assert!(
            xml.contains("<testcase name=\"start\" classname=\"qualify.quick\" time=\"0.000\">"),
            "{xml}"
        );
        assert!(
            xml.contains(
                "<failure message=\"cannot reach 10.0.0.2:18515: refused\" type=\"failure\"/>"
            ),
            "{xml}"
        );
        let r = report();
        let with_doctor =
            not_started(Err("quick"), "no server", Some(&r.doctor), "2026-12-04T07:00:00Z");
        assert!(with_doctor.contains("<testsuite name=\"doctor\" tests=\"3\""), "{with_doctor}");
        // A profile file that loaded: its own name, not the file's, and its waivers
        // skipped (doctor's failing firmware check, waived by id).
        let waive = ["firmware".to_string()];
        let xml = not_started(
            Ok(("tcp-only", &waive[..])),
            "no server",
            Some(&r.doctor),
            "2026-12-04T07:00:00Z",
        );
        assert!(xml.contains("<testsuite name=\"qualify.tcp-only\""), "{xml}");
        assert!(xml.contains("classname=\"qualify.tcp-only\""), "{xml}");
        assert!(xml.contains("<skipped message=\"waived: "), "{xml}");
        assert!(
            xml.contains(
                "<testsuites name=\"rdmabench qualify tcp-only\" tests=\"4\" failures=\"1\""
            ),
            "only the start fails: {xml}"
        );
    }
}
