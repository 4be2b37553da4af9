//! The end of a test on this side: the table of every size that completed, the
//! `--json` document (written whether the run passed, failed its verdict or stopped
//! early, so no older file is left to read as a pass), and the outcome as an exit
//! status or an error.

use std::io::Write;

use crate::engine::Outcome;
use crate::error::{Error, ErrorKind};
use crate::spec::{Output, RunLength, TestSpec};

use super::report::{self, RunReport};

/// Prints the table, writes `--json`, judges the thresholds; returns 0, or the error
/// that ended the run (a failed verdict is kind `threshold` or `validation`).
///
/// # Errors
/// The run's own error, a failed verdict, or the JSON file that cannot be written.
pub fn finish(
    spec: &TestSpec,
    outcome: Outcome,
    output: &Output,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let Outcome { mut report, error } = outcome;
    report.verdict = report::verdict(output, &report.results);
    let error = error.or_else(|| verdict_error(&report));
    report.error = error.clone();
    if report.params.is_some() {
        print_table(spec, &report, output.report_gbits, out)?;
    }
    if let Some(path) = &output.json {
        std::fs::write(path, crate::report::to_json(&report))
            .map_err(|e| Error::io(format!("cannot write {}: {e}", path.display())))?;
    }
    match error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// A failed verdict as an error: `validation` when bytes were corrupted, else
/// `threshold`.
fn verdict_error(report: &RunReport) -> Option<Error> {
    if report.verdict.pass {
        return None;
    }
    let corrupted =
        report.results.iter().any(|r| r.validation.is_some_and(|v| v.corrupted_bytes > 0));
    let kind = if corrupted { ErrorKind::Validation } else { ErrorKind::Threshold };
    Some(Error::new(kind, format!("FAIL: {}", report.verdict.failures.join("; "))))
}

fn print_table(
    spec: &TestSpec,
    report: &RunReport,
    gbits: bool,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let duration = matches!(spec.run, RunLength::Duration { .. });
    let mut text = report::table_header(spec.kind, gbits, duration);
    for r in &report.results {
        text.push_str(&report::table_row(r, gbits, duration));
        text.push_str(&report::details(r, gbits));
    }
    text.push_str(report::RESULT_LINE);
    text.push('\n');
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::io(format!("writing output: {e}")))
        }
        _ => Ok(()),
    }
}
