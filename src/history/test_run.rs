//! A test run read back (a stored one, or a test's `--json` file): its document made
//! inert, its results table printed again, and two of them compared (`diff`): the
//! parameters and environments that differ and each size's figures, B against A, as a
//! ratio and a percent. docs/history.md.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::environment::Change;
use crate::environment::Environment;
use crate::error::Error;
use crate::measure::MIB;
use crate::perf::table::{table_header, table_row, Layout};
use crate::report::RESULT_LINE;
use crate::results::{EffectiveParams, SizeResult};
use crate::spec::{Measure, RunLength, TestKind, Verb};
use crate::text::{clean, one_line};

/// A test's JSON document (docs/json.md, "Test runs"), as read back.
#[derive(Clone, Debug, Deserialize)]
pub struct TestRun {
    /// `write_bw`, `tcp_lat`.
    pub test: String,
    /// `client` or `server`.
    pub role: String,
    /// `rdmabench 0.1.0 (…)`.
    #[serde(default)]
    pub tool: String,
    /// This side's environment, the peer's under `peer`.
    pub environment: Option<Sides>,
    /// The parameters in effect.
    pub params: Option<EffectiveParams>,
    /// The peer's control address.
    #[serde(default)]
    pub peer_address: Option<String>,
    /// Every size that completed.
    #[serde(default)]
    pub results: Vec<SizeResult>,
    /// Whether it passed.
    pub verdict: StoredVerdict,
    /// Why it stopped, if it did: its message.
    #[serde(default)]
    pub error: Option<StoredError>,
}

/// `environment` in a test's document: this side flattened, the peer under `peer`.
#[derive(Clone, Debug, Deserialize)]
pub struct Sides {
    /// This side.
    #[serde(flatten)]
    pub local: Environment,
    /// The peer.
    pub peer: Option<Environment>,
}

/// A test's verdict as its document holds it.
#[derive(Clone, Debug, Deserialize)]
pub struct StoredVerdict {
    /// Whether everything held.
    pub pass: bool,
    /// Why not.
    #[serde(default)]
    pub failures: Vec<String>,
}

/// A test's error as its document holds it.
#[derive(Clone, Debug, Deserialize)]
pub struct StoredError {
    /// The message.
    #[serde(default)]
    pub message: String,
}

/// One figure of one size in both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FigureChange {
    /// Message size, bytes.
    pub size: u64,
    /// `bw_average`, `t_typical`, …
    pub figure: &'static str,
    /// `MiB/s`, `Mpps`, `us`.
    pub unit: &'static str,
    /// In run A.
    pub was: f64,
    /// In run B.
    pub now: f64,
    /// `now / was` (null when A's is 0).
    pub ratio: Option<f64>,
    /// `(now / was − 1) × 100` (null when A's is 0).
    pub change_percent: Option<f64>,
}

/// What differs between two test runs, B against A.
#[derive(Clone, Debug, Serialize)]
pub struct TestDiff {
    /// The test both ran.
    pub test: String,
    /// Parameters in effect that differ (`run`, `tx_depth`, `tcp.streams`).
    pub parameters: Vec<Change>,
    /// Environment values that differ, `local …` then `peer …`.
    pub environment: Vec<Change>,
    /// Each figure of each size both measured.
    pub sizes: Vec<FigureChange>,
    /// Sizes only A measured.
    pub only_in_a: Vec<u64>,
    /// Sizes only B measured.
    pub only_in_b: Vec<u64>,
}

impl TestRun {
    /// A test's JSON document, its text made inert (a stored or given file is shown as
    /// a peer's words are).
    ///
    /// # Errors
    /// Not a test's document: the reason.
    pub fn parse(text: &str) -> Result<TestRun, String> {
        let mut run: TestRun =
            serde_json::from_str(text).map_err(|e| format!("not a test's JSON ({e})"))?;
        (run.test, run.role, run.tool) = (clean(&run.test), clean(&run.role), clean(&run.tool));
        run.peer_address = run.peer_address.map(|a| clean(&a));
        run.environment = run
            .environment
            .map(|s| Sides { local: s.local.cleaned(), peer: s.peer.map(Environment::cleaned) });
        run.verdict.failures = run.verdict.failures.iter().map(|f| one_line(f)).collect();
        if let Some(e) = &mut run.error {
            e.message = one_line(&e.message);
        }
        Ok(run)
    }

    /// The results table as the test printed it (perftest's columns), then the verdict.
    pub fn table(&self) -> String {
        let layout = self.layout();
        let kind = self.kind();
        let mut text = table_header(kind, layout);
        for r in &self.results {
            text.push_str(&table_row(kind, r, layout));
        }
        text.push_str(RESULT_LINE);
        text.push('\n');
        let _ = writeln!(text, "verdict: {}", if self.verdict.pass { "PASS" } else { "FAIL" });
        for f in &self.verdict.failures {
            let _ = writeln!(text, "  {f}");
        }
        text
    }

    /// The table's layout from the parameters the run recorded.
    fn layout(&self) -> Layout {
        let p = self.params.as_ref();
        Layout {
            gbits: p.is_some_and(|p| p.test.bw_unit == "Gb/s"),
            duration: p.is_some_and(|p| matches!(p.test.run, RunLength::Duration { .. })),
            streams: p.is_some_and(|p| p.tcp.is_some()),
            cpu: false,
            verbose: false,
            wide: self.results.iter().any(|r| r.size >= 1_000_000),
        }
    }

    /// The test's kind from its name: `_lat` measures latency; the verb only names it.
    fn kind(&self) -> TestKind {
        let measure = if self.test.ends_with("_lat") { Measure::Lat } else { Measure::Bw };
        TestKind { verb: Verb::Send, measure }
    }
}

/// Run `now` (B) against run `was` (A).
///
/// # Errors
/// The two are different tests.
pub fn diff(was: &TestRun, now: &TestRun) -> Result<TestDiff, String> {
    if was.test != now.test {
        return Err(format!("A is {}, B is {}: only runs of one test compare", was.test, now.test));
    }
    let mut parameters = Vec::new();
    if was.role != now.role {
        parameters.push(Change {
            field: "role".into(),
            was: was.role.clone(),
            now: now.role.clone(),
        });
    }
    parameters.extend(params_diff(was.params.as_ref(), now.params.as_ref()));
    let (a_sizes, b_sizes): (Vec<u64>, Vec<u64>) = (
        was.results.iter().map(|r| r.size).collect(),
        now.results.iter().map(|r| r.size).collect(),
    );
    let mut sizes = Vec::new();
    for a in &was.results {
        if let Some(b) = now.results.iter().find(|b| b.size == a.size) {
            sizes.extend(figure_changes(a, b));
        }
    }
    Ok(TestDiff {
        test: now.test.clone(),
        parameters,
        environment: environment_diff(was.environment.as_ref(), now.environment.as_ref()),
        sizes,
        only_in_a: a_sizes.iter().copied().filter(|s| !b_sizes.contains(s)).collect(),
        only_in_b: b_sizes.iter().copied().filter(|s| !a_sizes.contains(s)).collect(),
    })
}

/// Each parameter that differs, by its JSON key (`tcp.streams` inside an object).
fn params_diff(was: Option<&EffectiveParams>, now: Option<&EffectiveParams>) -> Vec<Change> {
    const NONE: &str = "none (stopped before set-up)";
    match (was, now) {
        (Some(_), Some(_)) | (None, None) => {}
        (a, b) => {
            let text = |p: Option<&EffectiveParams>| if p.is_some() { "recorded" } else { NONE };
            return vec![Change {
                field: "params".into(),
                was: text(a).into(),
                now: text(b).into(),
            }];
        }
    }
    let flat = |p: Option<&EffectiveParams>| {
        let mut out = Vec::new();
        if let Some(p) = p {
            flatten("", &serde_json::to_value(p).unwrap_or(Value::Null), &mut out);
        }
        out
    };
    let (a, b) = (flat(was), flat(now));
    let value = |list: &[(String, String)], key: &str| {
        list.iter().find(|(k, _)| k == key).map_or_else(|| "-".to_string(), |(_, v)| v.clone())
    };
    let mut keys: Vec<&String> = a.iter().map(|(k, _)| k).collect();
    keys.extend(b.iter().map(|(k, _)| k).filter(|k| !a.iter().any(|(ka, _)| ka == *k)));
    keys.into_iter()
        .map(|k| Change { field: k.clone(), was: value(&a, k), now: value(&b, k) })
        .filter(|c| c.was != c.now)
        .collect()
}

/// An object's leaves as `(key.path, value)`; arrays are one value (`sizes`).
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let key =
                    if prefix.is_empty() { clean(k) } else { format!("{prefix}.{}", clean(k)) };
                flatten(&key, v, out);
            }
        }
        Value::String(s) => out.push((prefix.to_string(), clean(s))),
        Value::Null => out.push((prefix.to_string(), "-".to_string())),
        other => out.push((prefix.to_string(), clean(&other.to_string()))),
    }
}

/// Environment values that differ, this side's first (`local firmware`), then the peer's.
fn environment_diff(was: Option<&Sides>, now: Option<&Sides>) -> Vec<Change> {
    let (Some(was), Some(now)) = (was, now) else { return Vec::new() };
    let side = |label: &str, a: Option<&Environment>, b: Option<&Environment>| {
        let (Some(a), Some(b)) = (a, b) else { return Vec::new() };
        crate::environment::diff(a, b)
            .into_iter()
            .map(|c| Change { field: format!("{label} {}", c.field), ..c })
            .collect::<Vec<_>>()
    };
    let mut out = side("local", Some(&was.local), Some(&now.local));
    out.extend(side("peer", was.peer.as_ref(), now.peer.as_ref()));
    out
}

/// The figures of one size in both runs: a bandwidth test's average, peak and message
/// rate; a latency test's minimum, typical, average, 99 % and 99.9 % and maximum.
fn figure_changes(a: &SizeResult, b: &SizeResult) -> Vec<FigureChange> {
    let mut pairs: Vec<(&'static str, &'static str, f64, f64)> = Vec::new();
    if let (Some(x), Some(y)) = (&a.bw, &b.bw) {
        pairs.push(("bw_average", "MiB/s", x.avg_bytes_per_sec / MIB, y.avg_bytes_per_sec / MIB));
        if let (Some(px), Some(py)) = (x.peak_bytes_per_sec, y.peak_bytes_per_sec) {
            pairs.push(("bw_peak", "MiB/s", px / MIB, py / MIB));
        }
        pairs.push(("msg_rate", "Mpps", x.msg_rate / 1e6, y.msg_rate / 1e6));
    }
    if let (Some(x), Some(y)) = (&a.lat, &b.lat) {
        pairs.extend([
            ("t_min", "us", x.t_min_us, y.t_min_us),
            ("t_typical", "us", x.t_typical_us, y.t_typical_us),
            ("t_avg", "us", x.t_avg_us, y.t_avg_us),
            ("t_p99", "us", x.p99_us, y.p99_us),
            ("t_p99_9", "us", x.p99_9_us, y.p99_9_us),
            ("t_max", "us", x.t_max_us, y.t_max_us),
        ]);
    }
    pairs
        .into_iter()
        .map(|(figure, unit, was, now)| {
            let ratio = (was != 0.0).then(|| now / was).filter(|r| r.is_finite());
            FigureChange {
                size: a.size,
                figure,
                unit,
                was,
                now,
                ratio,
                change_percent: ratio.map(|r| (r - 1.0) * 100.0),
            }
        })
        .collect()
}

/// The diff as the terminal shows it, under a first line naming both runs.
pub fn text(d: &TestDiff, title: &str) -> String {
    let mut o = format!("{title}\n");
    let list = |o: &mut String, what: &str, changes: &[Change]| {
        let _ = writeln!(o, " {what} (A → B):");
        for c in changes {
            let _ = writeln!(o, "  {c}");
        }
        if changes.is_empty() {
            o.push_str("  nothing differs\n");
        }
    };
    list(&mut o, "parameters", &d.parameters);
    list(&mut o, "environment", &d.environment);
    if d.sizes.is_empty() {
        o.push_str(" no size both measured\n");
    } else {
        let _ = writeln!(
            o,
            " {:>8}  {:<11} {:>7} {:>14} {:>14}  CHANGE (B against A)",
            "#bytes", "FIGURE", "UNIT", "A", "B"
        );
    }
    for f in &d.sizes {
        let change = match (f.ratio, f.change_percent) {
            (Some(r), Some(p)) => format!("{p:+.1} % ({r:.2}×)"),
            _ => "n/a (A is 0)".to_string(),
        };
        let _ = writeln!(
            o,
            " {:>8}  {:<11} {:>7} {:>14.2} {:>14.2}  {change}",
            f.size, f.figure, f.unit, f.was, f.now
        );
    }
    for (which, sizes) in [("A", &d.only_in_a), ("B", &d.only_in_b)] {
        if !sizes.is_empty() {
            let list: Vec<String> = sizes.iter().map(u64::to_string).collect();
            let _ = writeln!(o, " sizes only {which} measured: {}", list.join(", "));
        }
    }
    o
}

/// The run's error as `history --show` prints it under the table, if it stopped on one.
pub fn error_line(run: &TestRun) -> Option<String> {
    run.error.as_ref().map(|e| format!("error: {}", e.message))
}

/// A document `source` names that cannot be read as asked: one line naming it.
pub fn refused(source: &str, why: &str) -> Error {
    Error::usage(format!("{source}: {why}"))
}
