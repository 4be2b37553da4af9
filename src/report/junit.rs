//! JUnit XML as Jenkins and GitLab read it, valid against the common schema (Jenkins'
//! junit-10.xsd): `<testsuites>` of `<testsuite name tests failures errors skipped time
//! timestamp hostname>`, each with its `<properties>` (what was tested), `<testcase
//! name classname time>` holding a `<failure>` or `<skipped>` and its `<system-out>`.
//! Written with `quick-xml`, which escapes every name, message and text. doctor and
//! qualify build their suites; this writes them.

use quick_xml::events::BytesText;
use quick_xml::Writer;

use crate::environment::{Environment, ABSENT};

/// One testsuite.
#[derive(Clone, Debug, Default)]
pub struct Suite {
    /// `doctor`, `qualify.quick`.
    pub name: String,
    /// When it started, UTC (RFC 3339; written without the zone, as the schema wants).
    pub timestamp: String,
    /// The host it ran on.
    pub hostname: String,
    /// How long it took, seconds.
    pub time: f64,
    /// Name and value pairs: the environment tested, counts worth a glance.
    pub properties: Vec<(String, String)>,
    /// The testcases.
    pub cases: Vec<Case>,
}

/// One testcase.
#[derive(Clone, Debug)]
pub struct Case {
    /// `write_bw 64K`, `memlock host`.
    pub name: String,
    /// `qualify.quick.write_bw`, `doctor.memlock`.
    pub class: String,
    /// How long it took, seconds.
    pub time: f64,
    /// What it printed: the median, a check's observation, a warning and its fix.
    pub out: String,
    /// Passed, skipped or failed.
    pub outcome: Outcome,
}

/// A testcase's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Passed.
    Passed,
    /// Not judged here (N/A), with why.
    Skipped(String),
    /// Failed, with the reason.
    Failed(String),
}

impl Suite {
    /// `(tests, failures, skipped)`.
    fn counts(&self) -> (usize, usize, usize) {
        let count = |f: fn(&Outcome) -> bool| self.cases.iter().filter(|c| f(&c.outcome)).count();
        (
            self.cases.len(),
            count(|o| matches!(o, Outcome::Failed(_))),
            count(|o| matches!(o, Outcome::Skipped(_))),
        )
    }
}

/// `label.field` properties of an environment's known values (`local.firmware`).
pub fn environment_properties(label: &str, env: &Environment) -> Vec<(String, String)> {
    env.fields()
        .into_iter()
        .filter(|(_, v)| v != ABSENT)
        .map(|(name, v)| (format!("{label}.{}", name.replace(' ', "_")), v))
        .collect()
}

/// Seconds as JUnit writes them: `1.250`.
fn seconds(s: f64) -> String {
    format!("{:.3}", if s.is_finite() && s > 0.0 { s } else { 0.0 })
}

/// The document: `<testsuites name="NAME">` over `suites`, with the XML declaration.
pub fn document(name: &str, suites: &[Suite]) -> String {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    match write_suites(&mut w, name, suites) {
        Ok(()) => {
            let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
            // Escaped as it was written; what XML 1.0 cannot hold at all (C0 controls but
            // tab and newlines, U+FFFE, U+FFFF) becomes a space, so the document parses.
            let body = String::from_utf8_lossy(&w.into_inner())
                .chars()
                .map(|c| if xml_char(c) { c } else { ' ' })
                .collect::<String>();
            xml.push_str(&body);
            xml.push('\n');
            xml
        }
        Err(e) => format!("<!-- JUnit XML could not be written: {e} -->\n"),
    }
}

/// Whether XML 1.0 allows `c` in a document (its `Char` production).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

fn write_suites(w: &mut Writer<Vec<u8>>, name: &str, suites: &[Suite]) -> std::io::Result<()> {
    let (mut tests, mut failures) = (0, 0);
    for s in suites {
        let (t, f, _) = s.counts();
        tests += t;
        failures += f;
    }
    let time: f64 = suites.iter().map(|s| s.time).sum();
    let root = w
        .create_element("testsuites")
        .with_attribute(("name", name))
        .with_attribute(("tests", tests.to_string().as_str()))
        .with_attribute(("failures", failures.to_string().as_str()))
        .with_attribute(("errors", "0"))
        .with_attribute(("time", seconds(time).as_str()));
    root.write_inner_content(|w| {
        for (id, s) in suites.iter().enumerate() {
            write_suite(w, id, s)?;
        }
        Ok(())
    })?;
    Ok(())
}

fn write_suite(w: &mut Writer<Vec<u8>>, id: usize, s: &Suite) -> std::io::Result<()> {
    let (tests, failures, skipped) = s.counts();
    let timestamp = s.timestamp.trim_end_matches('Z');
    let e = w
        .create_element("testsuite")
        .with_attribute(("name", s.name.as_str()))
        .with_attribute(("tests", tests.to_string().as_str()))
        .with_attribute(("failures", failures.to_string().as_str()))
        .with_attribute(("errors", "0"))
        .with_attribute(("skipped", skipped.to_string().as_str()))
        .with_attribute(("time", seconds(s.time).as_str()))
        .with_attribute(("timestamp", timestamp))
        .with_attribute(("hostname", s.hostname.as_str()))
        .with_attribute(("id", id.to_string().as_str()))
        .with_attribute(("package", s.name.as_str()));
    e.write_inner_content(|w| {
        w.create_element("properties").write_inner_content(|w| {
            for (name, value) in &s.properties {
                w.create_element("property")
                    .with_attribute(("name", name.as_str()))
                    .with_attribute(("value", value.as_str()))
                    .write_empty()?;
            }
            Ok(())
        })?;
        for c in &s.cases {
            write_case(w, c)?;
        }
        Ok(())
    })?;
    Ok(())
}

fn write_case(w: &mut Writer<Vec<u8>>, c: &Case) -> std::io::Result<()> {
    let case = w
        .create_element("testcase")
        .with_attribute(("name", c.name.as_str()))
        .with_attribute(("classname", c.class.as_str()))
        .with_attribute(("time", seconds(c.time).as_str()));
    case.write_inner_content(|w| {
        match &c.outcome {
            Outcome::Failed(m) => {
                let f = w.create_element("failure").with_attribute(("message", m.as_str()));
                f.with_attribute(("type", "failure")).write_empty()?;
            }
            Outcome::Skipped(m) => {
                w.create_element("skipped")
                    .with_attribute(("message", m.as_str()))
                    .write_empty()?;
            }
            Outcome::Passed => {}
        }
        w.create_element("system-out").write_text_content(BytesText::new(&c.out))?;
        Ok(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, outcome: Outcome) -> Case {
        Case { name: name.into(), class: "c".into(), time: 1.5, out: "o <&>".into(), outcome }
    }

    #[test]
    fn suites_carry_counts_times_host_and_properties() {
        let suite = Suite {
            name: "doctor".into(),
            timestamp: "2026-12-04T07:00:00Z".into(),
            hostname: "lab\"1".into(),
            time: 0.25,
            properties: vec![("local.firmware".into(), "2.42.5000".into())],
            cases: vec![
                case("a", Outcome::Passed),
                case("b", Outcome::Failed("why <x>".into())),
                case("c", Outcome::Skipped("n/a".into())),
            ],
        };
        let xml = document("rdmabench doctor", &[suite]);
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"rdmabench doctor\" tests=\"3\" failures=\"1\" errors=\"0\" time=\"0.250\">"), "{xml}");
        assert!(xml.contains("<testsuite name=\"doctor\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"0.250\" timestamp=\"2026-12-04T07:00:00\" hostname=\"lab&quot;1\" id=\"0\" package=\"doctor\">"), "{xml}");
        assert!(xml.contains("<property name=\"local.firmware\" value=\"2.42.5000\"/>"), "{xml}");
        assert_eq!(xml.matches("time=\"1.500\"").count(), 3, "{xml}");
        assert!(xml.contains("<failure message=\"why &lt;x&gt;\" type=\"failure\"/>"), "{xml}");
        assert!(xml.contains("<skipped message=\"n/a\"/>"), "{xml}");
        assert!(xml.contains("<system-out>o &lt;&amp;&gt;</system-out>"), "{xml}");
        // properties come before the testcases, as the schema orders them.
        assert!(xml.find("<properties>").unwrap() < xml.find("<testcase ").unwrap());
    }

    #[test]
    fn what_xml_cannot_hold_becomes_a_space() {
        let mut c = case("a\u{1b}[31mb\u{0}", Outcome::Failed("m\u{7}".into()));
        c.out = "o\u{1b}\u{ffff}".into();
        let suite = Suite {
            name: "s\u{8}".into(),
            hostname: "h".into(),
            timestamp: "2026-01-01T00:00:00Z".into(),
            time: 1.0,
            properties: vec![],
            cases: vec![c],
        };
        let xml = document("q\u{1}", &[suite]);
        assert!(!xml.chars().any(|c| !xml_char(c)), "{xml:?}");
        assert!(xml.contains("name=\"a [31mb \""), "{xml}");
        assert!(xml.contains("<system-out>o  </system-out>"), "{xml}");
    }

    #[test]
    fn environment_properties_skip_what_is_unknown() {
        let mut env = Environment::host_at(std::path::Path::new("/nonexistent"));
        env.hostname = "node1".into();
        let p = environment_properties("local", &env);
        assert!(p.contains(&("local.host".into(), "node1".into())), "{p:?}");
        assert!(p.iter().all(|(n, v)| !n.contains(' ') && v != ABSENT), "{p:?}");
        assert!(!p.iter().any(|(n, _)| n == "local.firmware"), "no device: {p:?}");
    }
}
