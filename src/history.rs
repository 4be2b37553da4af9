//! `rdmabench history` (the stored runs, filtered) and `rdmabench diff A B` (two stored
//! qualifications compared as `qualify --baseline` compares them: B against A).
//! docs/history.md.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use crate::error::Error;
use crate::qualify::baseline::Baseline;
use crate::qualify::{self, comparison, report};
use crate::store::query::{Filter, RunRow};
use crate::store::Store;

/// What `history` lists.
#[derive(Debug)]
pub struct HistoryOptions {
    /// The store.
    pub store: PathBuf,
    /// Which runs.
    pub filter: Filter,
    /// JSON instead of a table.
    pub json: bool,
}

/// What `diff` compares.
#[derive(Debug)]
pub struct DiffOptions {
    /// The store.
    pub store: PathBuf,
    /// The baseline run.
    pub a: i64,
    /// The run judged against it.
    pub b: i64,
}

/// Lists the runs; 0.
///
/// # Errors
/// The store cannot be opened or read.
pub fn history(o: &HistoryOptions, out: &mut dyn Write) -> Result<u8, Error> {
    let store = Store::open_read(&o.store)?;
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

/// Compares stored run `b` with stored run `a` as `qualify --baseline` would have:
/// the same verdicts, printed as the comparison block and what changed between the two
/// environments. Returns 1 when a point is `worse`.
///
/// # Errors
/// The store, or either run, cannot be read; a run is not a qualification; the two are
/// different profiles.
pub fn diff(o: &DiffOptions, out: &mut dyn Write) -> Result<u8, Error> {
    let store = Store::open_read(&o.store)?;
    let now = Baseline::stored(&store, o.b)?;
    let was = Baseline::stored(&store, o.a)?;
    if was.report.profile.name != now.report.profile.name {
        return Err(Error::usage(format!(
            "diff {} {}: run {} is profile '{}', run {} is '{}': only runs of one profile compare",
            o.a, o.b, o.a, was.report.profile.name, o.b, now.report.profile.name
        )));
    }
    let mut report = now.report;
    let tolerance = qualify::threshold::Percent(report.profile.tolerance_percent);
    qualify::finish(&mut report, tolerance, Some(&was));
    let mut text = format!(
        "diff: run {} ({}, {}) against run {} ({}, {}), profile {}, tolerance {}%\n",
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
    let worse = report.points.iter().filter(|p| !p.regressions.is_empty()).count();
    let _ = writeln!(
        text,
        "diff: {} ({worse} of {} points worse)",
        if worse == 0 { "no point worse" } else { "WORSE" },
        report.points.len()
    );
    for p in report.points.iter().flat_map(|p| &p.regressions) {
        let _ = writeln!(text, "  {p}");
    }
    out.write_all(text.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    Ok(if worse == 0 { 0 } else { crate::error::EXIT_VERDICT })
}

fn firmware(r: &report::QualifyReport) -> String {
    let fw =
        r.environment.as_ref().and_then(|s| s.local.device.as_ref()).map(|d| d.firmware.clone());
    format!("firmware {}", fw.unwrap_or_else(|| "-".into()))
}
