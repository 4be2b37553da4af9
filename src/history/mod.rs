//! `rdmabench history` (the stored runs, filtered; `--show ID`, one run again) and
//! `rdmabench diff A B` (two stored runs or JSON files: test runs by parameters,
//! environment and figures, qualifications as `qualify --baseline` compares them: B
//! against A). docs/history.md.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::qualify::baseline::Baseline;
use crate::qualify::{self, comparison, report};
use crate::store::query::{Filter, RunRow};
use crate::store::{Choice, Store};

pub mod test_run;

use test_run::TestRun;

/// What `history` lists.
#[derive(Debug)]
pub struct HistoryOptions {
    /// The store.
    pub store: PathBuf,
    /// Which runs.
    pub filter: Filter,
    /// JSON instead of a table.
    pub json: bool,
    /// `--show ID`: this one run, as it printed (with `json`: its stored document).
    pub show: Option<i64>,
}

/// What `diff` compares.
#[derive(Debug)]
pub struct DiffOptions {
    /// `--store` (`None`: the default store, opened only when a run is named by id).
    pub store: Option<PathBuf>,
    /// The baseline: a stored run's id, or a JSON file (a test's `--json`, qualify's).
    pub a: String,
    /// The run judged against it.
    pub b: String,
    /// JSON on stdout instead of the text.
    pub json: bool,
}

/// Lists the runs; 0.
///
/// # Errors
/// The store cannot be opened or read.
pub fn history(o: &HistoryOptions, out: &mut dyn Write) -> Result<u8, Error> {
    let store = Store::open_read(&o.store)?;
    if let Some(id) = o.show {
        return show(&store, id, o.json, out);
    }
    let runs = store.list(&o.filter)?;
    let text = if o.json { crate::report::to_json(&runs) } else { table(&runs) };
    out.write_all(text.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    Ok(0)
}

fn table(runs: &[RunRow]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>5}  {:<20}  {:<8}  {:<12}  {:<16}  {:<10}  {:<12}  {:<6}  POINTS",
        "ID", "STARTED", "KIND", "PROFILE", "HOST", "DEVICE", "FIRMWARE", "RESULT"
    );
    for r in runs {
        let _ = writeln!(
            o,
            "{:>5}  {:<20}  {:<8}  {:<12}  {:<16}  {:<10}  {:<12}  {:<6}  {}",
            r.id,
            r.started,
            r.kind,
            // Cleaned as they were read (store::query).
            r.profile,
            r.host,
            r.device.as_deref().unwrap_or("-"),
            r.firmware.as_deref().unwrap_or("-"),
            if r.pass { "PASS" } else { "FAIL" },
            r.points
        );
    }
    if runs.is_empty() {
        o.push_str("(no stored run matches)\n");
    }
    o
}

/// One side of a diff, read and told apart by its `kind`.
enum Document {
    Qualify(Box<Baseline>),
    Test(Box<TestRun>),
}

/// A document and what names it: `run 3 (2026-12-05T13:20:02Z)`, or its file.
struct Named {
    label: String,
    document: Document,
}

/// The store `diff` reads runs from, opened at its first use: two files need none.
struct LazyStore<'a> {
    flag: &'a Option<PathBuf>,
    store: Option<Store>,
}

impl LazyStore<'_> {
    fn get(&mut self) -> Result<&Store, Error> {
        if self.store.is_none() {
            let path = match Choice::from_flags(self.flag.clone(), false)? {
                Choice::At(p) => p,
                Choice::Nowhere => unreachable!("not --no-store"),
            };
            self.store = Some(Store::open_read(&path)?);
        }
        Ok(self.store.as_ref().expect("opened above"))
    }
}

/// `ARG`: a file when one of that name exists, else a number is a stored run's id.
fn load(arg: &str, store: &mut LazyStore<'_>) -> Result<Named, Error> {
    let stored = arg.parse::<i64>().ok().filter(|_| !Path::new(arg).exists());
    let (label, source, text) = match stored {
        Some(id) => {
            let store = store.get()?;
            let (row, text) = store.run(id)?;
            let source = format!("run {id} in {}", store.path().display());
            (format!("run {id} ({})", row.started), source, text)
        }
        None => {
            let path = Path::new(arg);
            let text = crate::files::read_text(path, crate::files::BASELINE_LIMIT)
                .map_err(|e| Error::usage(format!("diff: {e}")))?;
            let name = crate::text::clean(&path.display().to_string());
            (name.clone(), name, text)
        }
    };
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: String,
    }
    let kind = serde_json::from_str::<Kind>(&text)
        .map_err(|e| {
            test_run::refused(&source, &format!("not a JSON document rdmabench wrote ({e})"))
        })?
        .kind;
    let document = match kind.as_str() {
        "qualify" => Document::Qualify(Box::new(Baseline::parsed(source, &text)?)),
        "perf" => Document::Test(Box::new(
            TestRun::parse(&text).map_err(|why| test_run::refused(&source, &why))?,
        )),
        "" => {
            let why = "no \"kind\": not a test's or qualify's JSON document";
            return Err(test_run::refused(&source, why));
        }
        other => {
            return Err(test_run::refused(
                &source,
                &format!(
                    "a '{}' document: diff compares test runs (a test's --json) or qualifications",
                    crate::text::clean(other)
                ),
            ))
        }
    };
    Ok(Named { label, document })
}

/// Compares run B with run A, each a stored run's id or a JSON file: two test runs by
/// parameters, environment and each size's figures (exit 0); two qualifications as
/// `qualify --baseline` would have judged them (exit 1 when a point is `worse`).
///
/// # Errors
/// The store, or either run, cannot be read; the two are not the same kind, test or
/// profile.
pub fn diff(o: &DiffOptions, out: &mut dyn Write) -> Result<u8, Error> {
    let mut store = LazyStore { flag: &o.store, store: None };
    // B first, as `qualify --baseline` reads its own run before the baseline.
    let now = load(&o.b, &mut store)?;
    let was = load(&o.a, &mut store)?;
    let (text, status) = match (was.document, now.document) {
        (Document::Test(a), Document::Test(b)) => {
            let d = test_run::diff(&a, &b)
                .map_err(|why| Error::usage(format!("diff {} {}: {why}", o.a, o.b)))?;
            let title = format!("diff: B {} against A {}, test {}", now.label, was.label, d.test);
            let text = if o.json { json(&was.label, &now.label, "test", &d) } else { test_run::text(&d, &title) };
            (text, 0)
        }
        (Document::Qualify(a), Document::Qualify(b)) => qualify_diff(o, *a, *b)?,
        _ => {
            return Err(Error::usage(format!(
                "diff {} {}: one is a test run, the other a qualification: only runs of one kind compare",
                o.a, o.b
            )))
        }
    };
    out.write_all(text.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    Ok(status)
}

/// `diff --json`: both runs named, what compared, and the comparison (docs/json.md).
fn json(a: &str, b: &str, compared: &str, body: &impl serde::Serialize) -> String {
    #[derive(serde::Serialize)]
    struct DiffDocument<'a, T> {
        schema_version: u32,
        kind: &'static str,
        compared: &'a str,
        a: &'a str,
        b: &'a str,
        #[serde(flatten)]
        body: &'a T,
    }
    let schema_version = crate::stamp::SCHEMA_VERSION;
    crate::report::to_json(&DiffDocument { schema_version, kind: "diff", compared, a, b, body })
}

/// Qualification B judged against A; the text (or JSON) and its exit status.
fn qualify_diff(o: &DiffOptions, was: Baseline, now: Baseline) -> Result<(String, u8), Error> {
    if was.report.profile.name != now.report.profile.name {
        return Err(Error::usage(format!(
            "diff {} {}: A is profile '{}', B is '{}': only runs of one profile compare",
            o.a, o.b, was.report.profile.name, now.report.profile.name
        )));
    }
    let mut report = now.report;
    let tolerance = qualify::threshold::Percent(report.profile.tolerance_percent);
    qualify::finish(&mut report, tolerance, Some(&was));
    let worse = report.points.iter().filter(|p| !p.regressions.is_empty()).count();
    let status = if worse == 0 { 0 } else { crate::error::EXIT_VERDICT };
    if o.json {
        let body = QualifyDiff {
            profile: &report.profile.name,
            tolerance_percent: report.profile.tolerance_percent,
            environment: report.baseline.as_ref().map_or(&[][..], |b| &b.differences),
            points: report
                .points
                .iter()
                .map(|p| (p.id.as_str(), p.comparison.as_ref(), &p.regressions[..]))
                .map(|(id, comparison, regressions)| QualifyPoint { id, comparison, regressions })
                .collect(),
            worse,
        };
        return Ok((json(&o.a, &o.b, "qualify", &body), status));
    }
    let mut text = format!(
        "diff: B {} ({}, {}) against A {} ({}, {}), profile {}, tolerance {}%\n",
        o.b,
        report.started,
        firmware(&report),
        o.a,
        was.report.started,
        firmware(&was.report),
        report.profile.name,
        report.profile.tolerance_percent
    );
    text.push_str(&comparison::table(&report));
    if let Some(b) = &report.baseline {
        for d in &b.differences {
            let _ = writeln!(text, "  {d}");
        }
    }
    let _ = writeln!(
        text,
        "diff: {} ({worse} of {} points worse)",
        if worse == 0 { "no point worse" } else { "WORSE" },
        report.points.len()
    );
    for p in report.points.iter().flat_map(|p| &p.regressions) {
        let _ = writeln!(text, "  {p}");
    }
    Ok((text, status))
}

/// `diff --json` of two qualifications.
#[derive(serde::Serialize)]
struct QualifyDiff<'a> {
    profile: &'a str,
    tolerance_percent: f64,
    environment: &'a [String],
    points: Vec<QualifyPoint<'a>>,
    worse: usize,
}

/// One point of [`QualifyDiff`].
#[derive(serde::Serialize)]
struct QualifyPoint<'a> {
    id: &'a str,
    comparison: Option<&'a qualify::verdict::PointComparison>,
    regressions: &'a [String],
}

fn firmware(r: &report::QualifyReport) -> String {
    let fw =
        r.environment.as_ref().and_then(|s| s.local.device.as_ref()).map(|d| d.firmware.clone());
    format!("firmware {}", fw.unwrap_or_else(|| "-".into()))
}

/// `history --show ID`: the run as it printed (a test's table, a qualification's
/// terminal table), or with `json` its stored document, every string in it made inert.
fn show(store: &Store, id: i64, json: bool, out: &mut dyn Write) -> Result<u8, Error> {
    let (row, text) = store.run(id)?;
    let source = format!("run {id} in {}", store.path().display());
    let shown = if json {
        let mut doc: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| test_run::refused(&source, &format!("not a JSON document ({e})")))?;
        inert(&mut doc);
        crate::report::to_json(&doc)
    } else if row.kind == "qualify" {
        report::table(&Baseline::parsed(source, &text)?.report)
    } else if row.kind == "health" {
        let doc: crate::health::HealthReport = serde_json::from_str(&text).map_err(|e| {
            test_run::refused(&source, &format!("not a health JSON document ({e})"))
        })?;
        format!(
            "run {id}: health, started {}\n{}",
            row.started,
            crate::health::output::render(&doc)
        )
    } else {
        let run = TestRun::parse(&text).map_err(|why| test_run::refused(&source, &why))?;
        let mut o = format!(
            "run {id}: {} ({}), started {}, host {}, peer {}, {}\n",
            run.test,
            run.role,
            row.started,
            row.host,
            row.server.as_deref().unwrap_or("-"),
            run.tool
        );
        o.push_str(&run.table());
        if let Some(line) = test_run::error_line(&run) {
            o.push_str(&line);
            o.push('\n');
        }
        o
    };
    out.write_all(shown.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    Ok(0)
}

/// Every string in `v` (keys too) through [`crate::text::one_line`]: a stored document
/// is shown as a peer's words are.
fn inert(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => *s = crate::text::one_line(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(inert),
        serde_json::Value::Object(map) => {
            let fields = std::mem::take(map);
            for (k, mut value) in fields {
                inert(&mut value);
                map.insert(crate::text::one_line(&k), value);
            }
        }
        _ => {}
    }
}
