//! The end of a test on this side: the table of every size that completed, the
//! `--json` document (written whether the run passed, failed its verdict or stopped
//! early, so no older file is left to read as a pass), and the outcome as an exit
//! status or an error.

use std::io::Write;

use crate::error::{Error, ErrorKind};
use crate::results::{Outcome, Stopped};
use crate::spec::{Figure, Output, SampleOrder, TestSpec};

use super::header;
use crate::results::RunReport;
use crate::store::Store;

/// Judges the thresholds, records the run in `store` (`--store`: opened and checked
/// before the run), prints the table, writes `--json`; returns 0, or the error that
/// ended the run (a failed verdict is kind `threshold` or `validation`).
///
/// # Errors
/// The run's own error, a failed verdict, the store refusing the run, or the JSON file
/// that cannot be written.
pub fn finish(
    spec: &TestSpec,
    outcome: Outcome,
    output: &Output,
    store: Option<Store>,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let Outcome { mut report, error } = outcome;
    report.verdict = header::verdict(output, &report.results);
    let mut error = error.or_else(|| verdict_error(&report));
    fail(&mut report, error.as_ref(), "the run ended in an error");
    report.error = error.clone();
    // Recorded before --json is written, so the document and the exit status agree
    // when the store refuses the run after all (a full disk).
    if let Some(mut store) = store {
        if let Err(e) = super::stored::record(&mut store, &report) {
            fail(&mut report, Some(&e), "the run was not recorded");
            report.error = report.error.take().or_else(|| Some(e.clone()));
            error = error.or(Some(e));
        }
    }
    if report.params.is_some() {
        match output.only {
            Some(figure) => print_figures(figure, &report, output.report_gbits, out)?,
            None => {
                if let Some(order) = output.samples {
                    print_samples(order, &report, out)?;
                }
                print_table(spec, &report, output, out)?;
            }
        }
    } else if let Some(stopped) = report.stopped.filter(|s| s.by_signal()) {
        // Stopped before a test began (a one-shot server waiting for its client).
        write_text(out, &format!(" stopped: {}\n", stopped_line(stopped)))?;
    }
    if let Some(path) = &output.json {
        crate::report::write_json(path, &crate::report::to_json(&report))?;
    }
    match error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// A run that ended in `error` did not pass, whatever its completed sizes held.
fn fail(report: &mut RunReport, error: Option<&Error>, why: &str) {
    if let Some(e) = error {
        if report.verdict.pass {
            report.verdict.pass = false;
            report.verdict.failures.push(format!("{why}: {e}"));
        }
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

/// `--output`: the one figure of each size, a line each, as perftest's `%lf`.
fn print_figures(
    figure: Figure,
    report: &RunReport,
    gbits: bool,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let mut text = String::new();
    for r in &report.results {
        let value = match (figure, &r.bw, &r.lat) {
            (Figure::Bandwidth, Some(bw), _) => {
                crate::measure::bw_in_unit(bw.avg_bytes_per_sec, gbits)
            }
            (Figure::MessageRate, Some(bw), _) => bw.msg_rate / 1e6,
            (Figure::Latency, _, Some(lat)) => lat.t_avg_us,
            // A side that measured nothing this size (a server the client did not tell).
            _ => continue,
        };
        text.push_str(&format!("{value:.6}\n"));
    }
    write_text(out, &text)
}

/// `-H`/`-U`: each size's samples as perftest lists them (`#, usec`, then `N, value`
/// a line), sorted or in run order. perftest leaves its two largest out of `-H`'s
/// list; every sample is listed here.
fn print_samples(order: SampleOrder, report: &RunReport, out: &mut dyn Write) -> Result<(), Error> {
    let mut text = String::new();
    for r in &report.results {
        let Some(samples) = &r.samples_ns else { continue };
        let mut listed = samples.clone();
        if order == SampleOrder::Sorted {
            listed.sort_unstable();
        }
        text.push_str("#, usec\n");
        for (i, ns) in listed.iter().enumerate() {
            text.push_str(&format!("{}, {}\n", i + 1, shortest(*ns as f64 / 1000.0)));
        }
    }
    write_text(out, &text)
}

/// C's `%g`: six significant digits, no trailing zeros.
fn shortest(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = 5 - v.abs().log10().floor() as i32;
    let s = format!("{v:.*}", digits.clamp(0, 17) as usize);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn print_table(
    spec: &TestSpec,
    report: &RunReport,
    output: &Output,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let layout = super::table::Layout::of(spec, output);
    let mut text = super::table::table_header(spec.kind, layout);
    for r in &report.results {
        text.push_str(&super::table::table_row(spec.kind, r, layout));
        text.push_str(&super::table::details(r, layout));
    }
    if let Some(stopped) = report.stopped {
        text.push_str(&format!(" stopped: {}\n", stopped_line(stopped)));
    }
    text.push_str(crate::report::RESULT_LINE);
    text.push('\n');
    write_text(out, &text)
}

/// Why the table holds less than was asked for.
fn stopped_line(stopped: Stopped) -> &'static str {
    match stopped {
        Stopped::Interrupted => "interrupted (SIGINT); the sizes and time measured until then",
        Stopped::Terminated => "terminated (SIGTERM); the sizes and time measured until then",
        Stopped::Hangup => "hung up (SIGHUP); the sizes and time measured until then",
        Stopped::PeerGone => {
            "the peer went away; the sizes that completed before (a -D run: until its last completion)"
        }
        Stopped::MaxTime => {
            "the server's --max-time; the sizes that completed before (a -D run: until its last completion)"
        }
        Stopped::Unfinished => "unfinished",
    }
}

fn write_text(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::io(format!("writing output: {e}")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{BwStats, LatStats};
    use crate::results::SizeResult;

    fn figures(figure: Figure, results: Vec<SizeResult>, gbits: bool) -> String {
        let mut report = RunReport::new("write_bw", "client", "test".into());
        report.results = results;
        let mut out = Vec::new();
        print_figures(figure, &report, gbits, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn samples_list_as_perftests_report_histogram() {
        let mut report = RunReport::new("write_lat", "client", "test".into());
        let samples = Some(vec![3_500, 1_250, 12_345_678]);
        report.results = vec![SizeResult { size: 2, samples_ns: samples, ..Default::default() }];
        let list = |order| {
            let mut out = Vec::new();
            print_samples(order, &report, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(list(SampleOrder::Unsorted), "#, usec\n1, 3.5\n2, 1.25\n3, 12345.7\n");
        assert_eq!(list(SampleOrder::Sorted), "#, usec\n1, 1.25\n2, 3.5\n3, 12345.7\n");
        assert_eq!((shortest(0.123456789), shortest(100.0)), ("0.123457".into(), "100".into()));
    }

    #[test]
    fn output_prints_one_figure_per_size_as_perftests_lf() {
        let bw = |avg: f64, rate: f64| SizeResult {
            bw: Some(BwStats { avg_bytes_per_sec: avg, msg_rate: rate, ..Default::default() }),
            ..Default::default()
        };
        let two = vec![bw(100.0 * 1_048_576.0, 1600.0), bw(50.5 * 1_048_576.0, 808.0)];
        assert_eq!(figures(Figure::Bandwidth, two.clone(), false), "100.000000\n50.500000\n");
        assert_eq!(figures(Figure::MessageRate, two, false), "0.001600\n0.000808\n");
        assert_eq!(figures(Figure::Bandwidth, vec![bw(1.25e8, 1.0)], true), "1.000000\n", "Gb/s");
        let lat = SizeResult {
            lat: Some(LatStats { t_avg_us: 1.234_567_8, t_typical_us: 1.0, ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(
            figures(Figure::Latency, vec![lat], false),
            "1.234568\n",
            "the average, as perftest"
        );
        assert_eq!(figures(Figure::Latency, vec![SizeResult::default()], false), "");
    }
}
