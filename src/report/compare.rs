//! `rdmabench compare`'s report: the model (results.json), the side-by-side table,
//! results.csv, the three charts and report.html. Pure functions of the model.

use std::fmt::Write;

use serde::Serialize;

use super::svg::{self, escape, size_label, Chart, Line, Scale};
use crate::error::Error;
use crate::measure::stability::{Stability, StabilityUnit};
use crate::measure::MIB;
use crate::results::SizeResult;
use crate::spec::{Measure, TestKind};

/// One series of the comparison: a test over one transport.
#[derive(Clone, Debug)]
pub struct Series {
    /// `rdma_write_bw`, `tcp_bw_4`, …
    pub id: String,
    /// `RDMA write`, `TCP 4 streams`, …
    pub label: String,
    /// The test run for it (TCP series: `send` over TCP).
    pub kind: TestKind,
    /// Over TCP streams rather than RDMA queue pairs.
    pub tcp: bool,
    /// Connections (TCP streams; 1 for RDMA).
    pub streams: u32,
}

impl Series {
    /// `rdma` or `tcp`.
    pub fn transport(&self) -> &'static str {
        if self.tcp {
            "tcp"
        } else {
            "rdma"
        }
    }

    /// The test's id: `write_bw`, …, `tcp_bw`, `tcp_lat`.
    pub fn test_id(&self) -> &'static str {
        match (self.tcp, self.kind.measure) {
            (true, Measure::Bw) => "tcp_bw",
            (true, Measure::Lat) => "tcp_lat",
            (false, _) => self.kind.id(),
        }
    }
}

/// In results.json: `id`, `label`, `transport`, `test` (`write_bw`, …), `measure`, `streams`.
impl Serialize for Series {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = ser.serialize_struct("Series", 6)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("label", &self.label)?;
        st.serialize_field("transport", self.transport())?;
        st.serialize_field("test", self.test_id())?;
        st.serialize_field("measure", &self.kind.measure)?;
        st.serialize_field("streams", &self.streams)?;
        st.end()
    }
}

/// One point: a series at one size.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The series' `id`.
    pub series: String,
    /// Message size, bytes.
    pub size: u64,
    /// What the test reported (the same object as `results[]` of a perf run).
    pub result: Option<SizeResult>,
    /// Why there is no result: kind and message.
    pub error: Option<Error>,
}

impl Row {
    /// The error's message, or nothing.
    pub fn error_message(&self) -> &str {
        self.error.as_ref().map_or("", |e| e.message.as_str())
    }
}

/// results.json.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// Always `compare`.
    pub kind: &'static str,
    /// `rdmabench 0.1.0`.
    pub tool: String,
    /// The `serve` host.
    pub server: String,
    /// When the sweep started, UTC.
    pub started: String,
    /// This host and the server's, from the first point that reached it.
    pub environment: Option<crate::results::EnvironmentReport>,
    /// Sizes swept.
    pub sizes: Vec<u64>,
    /// The series, in table order.
    pub series: Vec<Series>,
    /// Every point, series by series.
    pub rows: Vec<Row>,
}

impl CompareReport {
    fn point(&self, series: &str, size: u64) -> Option<&Row> {
        self.rows.iter().find(|r| r.series == series && r.size == size)
    }

    fn of(&self, m: Measure) -> impl Iterator<Item = &Series> {
        self.series.iter().filter(move |s| s.kind.measure == m)
    }

    /// Points that failed.
    pub fn failures(&self) -> usize {
        self.rows.iter().filter(|r| r.error.is_some()).count()
    }
}

fn bw_mib(r: &Row) -> Option<f64> {
    r.result.as_ref()?.bw.as_ref().map(|b| b.avg_bytes_per_sec / MIB)
}

fn lat_us(r: &Row) -> Option<f64> {
    r.result.as_ref()?.lat.as_ref().map(|l| l.t_typical_us)
}

/// Client + server CPU seconds per GB moved.
fn cpu_per_gb(r: &Row) -> Option<f64> {
    let cpu = &r.result.as_ref()?.cpu;
    match (cpu.client.and_then(|c| c.cpu_s_per_gb), cpu.server.and_then(|c| c.cpu_s_per_gb)) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    }
}

/// One figure of a point.
type Value = fn(&Row) -> Option<f64>;

fn cell(v: Option<f64>, failed: bool) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
        None if failed => "FAIL".into(),
        None => "-".into(),
    }
}

fn block(
    report: &CompareReport,
    m: Measure,
    title: &str,
    value: fn(&Row) -> Option<f64>,
) -> String {
    let series: Vec<&Series> = report.of(m).collect();
    let mut o = String::new();
    let _ = writeln!(o, " {title}");
    let _ = write!(o, " {:>8}", "#bytes");
    for s in &series {
        let _ = write!(o, " {:>14}", s.label);
    }
    o.push('\n');
    for &size in &report.sizes {
        let _ = write!(o, " {:>8}", size_label(size));
        for s in &series {
            let row = report.point(&s.id, size);
            let v = row.and_then(value);
            let _ = write!(o, " {:>14}", cell(v, row.is_some_and(|r| r.error.is_some())));
        }
        o.push('\n');
    }
    o
}

/// The side-by-side table: bandwidth, latency, CPU cost.
pub fn table(report: &CompareReport) -> String {
    let line = crate::report::RESULT_LINE;
    let mut head =
        format!(" RDMA vs TCP, server {} ({} sizes)\n", report.server, report.sizes.len());
    if let Some(env) = &report.environment {
        let _ = writeln!(head, " this host: {}", env.local.summary());
        if let Some(peer) = &env.peer {
            let _ = writeln!(head, " server   : {}", peer.summary());
        }
    }
    let mut o = format!("{line}\n{head}{line}\n");
    o.push_str(&block(report, Measure::Bw, "BW average [MiB/sec]", bw_mib));
    o.push_str(&format!("{line}\n"));
    o.push_str(&block(
        report,
        Measure::Lat,
        "t_typical [usec] (write, send, TCP: half round trip; read: round trip)",
        lat_us,
    ));
    o.push_str(&format!("{line}\n"));
    o.push_str(&block(
        report,
        Measure::Bw,
        "CPU cost [CPU-s/GB, client + server processes]",
        cpu_per_gb,
    ));
    o.push_str(&format!("{line}\n"));
    let failed = report.failures();
    if failed > 0 {
        let _ = writeln!(o, " {failed} of {} points failed:", report.rows.len());
        failure_lines(report, &mut o);
    }
    o
}

/// The failures, one per message in order of its first point: points that failed the
/// same way (every RDMA point on a host without RDMA) share theirs. Each: `rdma_write_bw
/// 2 B and 11 more points` and the message.
fn failures(report: &CompareReport) -> Vec<(String, &str)> {
    let mut messages: Vec<(&str, Vec<&Row>)> = Vec::new();
    for r in report.rows.iter().filter(|r| r.error.is_some()) {
        match messages.iter_mut().find(|(m, _)| *m == r.error_message()) {
            Some((_, rows)) => rows.push(r),
            None => messages.push((r.error_message(), vec![r])),
        }
    }
    let points = |rows: &[&Row]| {
        let first = format!("{} {} B", rows[0].series, rows[0].size);
        match rows.len() {
            1 => first,
            2 => format!("{first} and 1 more point"),
            n => format!("{first} and {} more points", n - 1),
        }
    };
    messages.into_iter().map(|(message, rows)| (points(&rows), message)).collect()
}

/// One line per failure message ([`failures`]).
fn failure_lines(report: &CompareReport, o: &mut String) {
    for (points, message) in failures(report) {
        let _ = writeln!(o, "   {points}: {message}");
    }
}

/// A stability figure in the CSV's units: MiB/s for bandwidth, µs for latency.
fn in_csv_unit(s: &Stability, v: f64) -> f64 {
    match s.unit {
        StabilityUnit::BytesPerSec => v / MIB,
        StabilityUnit::Us => v,
    }
}

/// results.csv: a header, then one record per point. Through the `csv` crate, so any
/// value (an error with commas, quotes or newlines) reads back as written.
pub fn csv(report: &CompareReport) -> String {
    const HEADER: [&str; 25] = [
        "series",
        "transport",
        "test",
        "streams",
        "size",
        "iterations",
        "bw_avg_mib_s",
        "bw_avg_gbit_s",
        "msg_rate_mpps",
        "t_min_us",
        "t_typical_us",
        "t_avg_us",
        "t_p99_us",
        "client_process_pct",
        "client_cpu_s_per_gb",
        "server_process_pct",
        "server_cpu_s_per_gb",
        "received_bytes",
        "error",
        "stability_cv",
        "stability_spike",
        "stability_lowest",
        "stability_median",
        "stability_highest",
        "stability_warm_up_dropped",
    ];
    let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    let mut w = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    // Writing into a Vec cannot fail.
    let _ = w.write_record(HEADER);
    for r in &report.rows {
        let Some(s) = report.series.iter().find(|s| s.id == r.series) else { continue };
        let res = r.result.as_ref();
        let bw = res.and_then(|x| x.bw.as_ref());
        let lat = res.and_then(|x| x.lat.as_ref());
        let client = res.and_then(|x| x.cpu.client);
        let server = res.and_then(|x| x.cpu.server);
        let st = res.and_then(|x| x.stability.as_ref());
        let _ = w.write_record([
            s.id.clone(),
            s.transport().to_string(),
            s.test_id().to_string(),
            s.streams.to_string(),
            r.size.to_string(),
            res.map_or(String::new(), |x| x.iterations.to_string()),
            f(bw.map(|b| b.avg_bytes_per_sec / MIB)),
            f(bw.map(|b| b.avg_bytes_per_sec * 8.0 / 1e9)),
            f(bw.map(|b| b.msg_rate / 1e6)),
            f(lat.map(|l| l.t_min_us)),
            f(lat.map(|l| l.t_typical_us)),
            f(lat.map(|l| l.t_avg_us)),
            f(lat.map(|l| l.p99_us)),
            f(client.map(|c| c.process_percent)),
            f(client.and_then(|c| c.cpu_s_per_gb)),
            f(server.map(|c| c.process_percent)),
            f(server.and_then(|c| c.cpu_s_per_gb)),
            res.and_then(|x| x.received_bytes).map_or(String::new(), |b| b.to_string()),
            r.error_message().to_string(),
            f(st.map(|s| s.cv)),
            f(st.map(|s| s.spike)),
            f(st.map(|s| in_csv_unit(s, s.lowest))),
            f(st.map(|s| in_csv_unit(s, s.median))),
            f(st.map(|s| in_csv_unit(s, s.highest))),
            st.and_then(|s| s.warm_up_dropped).map_or(String::new(), |n| n.to_string()),
        ]);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

fn lines(report: &CompareReport, m: Measure, value: Value) -> Vec<Line> {
    report
        .of(m)
        .map(|s| Line {
            label: s.label.clone(),
            points: report
                .sizes
                .iter()
                .filter_map(|&size| report.point(&s.id, size).and_then(value).map(|v| (size, v)))
                .collect(),
        })
        .collect()
}

/// The charts as (file name, SVG): bandwidth, latency and CPU cost against size.
pub fn charts(report: &CompareReport) -> Vec<(&'static str, String)> {
    let bw = lines(report, Measure::Bw, bw_mib);
    let lat = lines(report, Measure::Lat, lat_us);
    let cpu = lines(report, Measure::Bw, cpu_per_gb);
    vec![
        (
            "bandwidth.svg",
            svg::render(&Chart {
                id: "chart-bandwidth",
                title: "Bandwidth vs message size",
                y_label: "BW average [MiB/s]",
                scale: Scale::Linear,
                lines: &bw,
            }),
        ),
        (
            "latency.svg",
            svg::render(&Chart {
                id: "chart-latency",
                title: "Latency vs message size",
                y_label: "t_typical [usec, log scale]",
                scale: Scale::Log,
                lines: &lat,
            }),
        ),
        (
            "cpu.svg",
            svg::render(&Chart {
                id: "chart-cpu",
                title: "CPU cost per GB moved (client + server)",
                y_label: "CPU-seconds per GB [log scale]",
                scale: Scale::Log,
                lines: &cpu,
            }),
        ),
    ]
}

/// report.html: the charts inline and the table, one self-contained file.
pub fn html(report: &CompareReport, charts: &[(&str, String)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>rdmabench compare: {}</title>",
        escape(&report.server)
    );
    o.push_str(
        "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}\
         figure{margin:1em 0}.fail{color:#b00}",
    );
    o.push_str(super::environment::STYLE);
    o.push_str("</style>\n</head>\n<body>\n");
    // `--tcp-only`: no RDMA series.
    let title = if report.series.iter().any(|s| !s.tcp) { "RDMA vs TCP" } else { "TCP" };
    let _ = writeln!(
        o,
        "<h1>{title}</h1>\n<p>Server <b>{}</b>, started {}, {} ({} points, {} failed). Data: \
         <a href=\"results.json\">results.json</a>, <a href=\"results.csv\">results.csv</a>.</p>",
        escape(&report.server),
        escape(&report.started),
        escape(&report.tool),
        report.rows.len(),
        report.failures()
    );
    let env = report.environment.as_ref();
    let sides =
        [("this host", env.map(|e| &e.local)), ("server", env.and_then(|e| e.peer.as_ref()))];
    o.push_str("<h2>What was tested</h2>\n");
    o.push_str(&super::environment_table("environment", &sides));
    for (file, svg) in charts {
        let _ = writeln!(o, "<figure data-file=\"{file}\">\n{svg}</figure>");
    }
    let tables: [(Measure, &str, Value); 3] = [
        (Measure::Bw, "BW average [MiB/s]", bw_mib),
        (Measure::Lat, "t_typical [usec]", lat_us),
        (Measure::Bw, "CPU cost [CPU-s/GB, client + server]", cpu_per_gb),
    ];
    for (m, title, value) in tables {
        let _ = writeln!(o, "<h2>{}</h2>\n<table>\n<tr><th>bytes</th>", escape(title));
        for s in report.of(m) {
            let _ = write!(o, "<th>{}</th>", escape(&s.label));
        }
        o.push_str("</tr>\n");
        for &size in &report.sizes {
            let _ = write!(o, "<tr><td>{}</td>", size_label(size));
            for s in report.of(m) {
                let row = report.point(&s.id, size);
                match row {
                    Some(r) if r.error.is_some() => {
                        let _ = write!(
                            o,
                            "<td class=\"fail\" title=\"{}\">FAIL</td>",
                            escape(r.error_message())
                        );
                    }
                    _ => {
                        let _ = write!(o, "<td>{}</td>", cell(row.and_then(value), false));
                    }
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
    }
    // Each failure's reason in the page, not only in its cell's tooltip.
    let failed = failures(report);
    if !failed.is_empty() {
        o.push_str("<h2>Failures</h2>\n<ul class=\"fail\">\n");
        for (points, message) in failed {
            let _ = writeln!(o, "<li><b>{}</b>: {}</li>", escape(&points), escape(message));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</body>\n</html>\n");
    o
}

#[cfg(test)]
mod tests;
