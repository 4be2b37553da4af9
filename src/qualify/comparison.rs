//! The comparison with the baseline, as the terminal and report.html show it: per point
//! both medians, Δ %, the interval and the verdict; and each point's trend across the
//! stored runs of the same profile on this host (a small inline SVG, firmware versions on
//! the axis). Pure functions of the report.

use std::fmt::Write;

use super::model::{Point, QualifyReport};
use super::verdict::PointComparison;
use crate::report::svg::escape;
use crate::store::query::TrendRow;

fn interval(c: &PointComparison) -> String {
    let s = &c.stats;
    format!("{} ({:.0} %)", s.interval_text(), s.confidence * 100.0)
}

/// `5 vs 3`, and how many of them confirmed a `worse` after every other point.
fn runs(p: &Point, c: &PointComparison) -> String {
    let later = match p.confirmation_runs {
        0 => String::new(),
        n => format!(" ({n} later)"),
    };
    format!("{} vs {}{later}", c.runs.len(), c.baseline_runs.len())
}

/// The terminal's comparison block: one line per point compared (empty without a
/// baseline).
pub fn table(r: &QualifyReport) -> String {
    let rows: Vec<(&Point, &PointComparison)> =
        r.points.iter().filter_map(|p| p.comparison.as_ref().map(|c| (p, c))).collect();
    if rows.is_empty() {
        return String::new();
    }
    let w = rows.iter().map(|(p, _)| p.id.len()).max().unwrap_or(5).max(5);
    let mut o = String::new();
    let _ = writeln!(
        o,
        " {:<12} {:<w$} {:>18} {:>18} {:>8} {:<28} RUNS",
        "VS BASELINE", "POINT", "BASELINE", "NOW", "DELTA", "INTERVAL (CONFIDENCE)"
    );
    for (p, c) in rows {
        let s = &c.stats;
        let _ = writeln!(
            o,
            " {:<12} {:<w$} {:>18} {:>18} {:>+7.1}% {:<28} {}",
            s.verdict.word(),
            p.id,
            format!("{:.2} {}", s.baseline_median, c.unit),
            format!("{:.2} {}", s.median, c.unit),
            s.delta_percent,
            interval(c),
            runs(p, c)
        );
    }
    o
}

/// report.html's comparison table (with a baseline) and trends (with stored runs).
pub fn html(r: &QualifyReport) -> String {
    let mut o = String::new();
    let compared: Vec<_> =
        r.points.iter().filter_map(|p| p.comparison.as_ref().map(|c| (p, c))).collect();
    if !compared.is_empty() {
        let _ = writeln!(
            o,
            "<h2>Against the baseline</h2>\n<p>Per point: the Hodges–Lehmann interval (Mann–Whitney) of the ratio now / baseline; <b>worse</b> only when all of it is beyond the tolerance ({}%).</p>\n<table id=\"comparison\">\n<tr><th>verdict</th><th>point</th><th>figure</th><th>baseline median</th><th>median</th><th>Δ</th><th>interval (confidence)</th><th>runs</th></tr>",
            r.profile.tolerance_percent
        );
        for (p, c) in compared {
            let s = &c.stats;
            let class = match s.verdict {
                crate::stats::Verdict::Worse => "fail",
                crate::stats::Verdict::Better | crate::stats::Verdict::Same => "pass",
                crate::stats::Verdict::Inconclusive => "warn",
            };
            let _ = writeln!(
                o,
                "<tr data-compared=\"{}\"><td class=\"{class}\">{}</td><td>{}</td><td>{}</td><td>{:.2} {u}</td><td>{:.2} {u}</td><td>{:+.1} %</td><td>{}</td><td>{}</td></tr>",
                escape(&p.id),
                s.verdict.word(),
                escape(&p.id),
                escape(&c.figure),
                s.baseline_median,
                s.median,
                s.delta_percent,
                escape(&interval(c)),
                escape(&runs(p, c)),
                u = escape(&c.unit),
            );
        }
        o.push_str("</table>\n");
    }
    let charts: Vec<String> = r
        .points
        .iter()
        .filter_map(|p| {
            let rows: Vec<&TrendRow> = r.trend.iter().filter(|t| t.point == p.id).collect();
            (rows.len() >= 2).then(|| trend_svg(&p.id, &rows))
        })
        .collect();
    if !charts.is_empty() {
        let _ = writeln!(
            o,
            "<h2>Trend</h2>\n<p>Each point's median in the last stored runs of profile <b>{}</b> on this host, oldest first (firmware under each run).</p>\n<div id=\"trends\">",
            escape(&r.profile.name)
        );
        for c in charts {
            o.push_str(&c);
        }
        o.push_str("</div>\n");
    }
    o
}

const TW: f64 = 300.0;
const TH: f64 = 130.0;
const PAD_L: f64 = 8.0;
/// Room right of the line for its scale: the top and bottom values.
const PAD_R: f64 = 60.0;
const PAD_T: f64 = 22.0;
const PAD_B: f64 = 34.0;

/// One point's medians across runs: a polyline over the runs, each labelled with its
/// firmware (and run id) below, the range of values at the top. The line spans the
/// height from the lowest median to the highest, not from 0: its scale, those two
/// values, stands beside it at the height each is drawn, on a dashed rule.
pub fn trend_svg(point: &str, rows: &[&TrendRow]) -> String {
    let values: Vec<f64> = rows.iter().map(|r| r.median).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
    let step = (TW - PAD_L - PAD_R) / (rows.len().max(2) - 1) as f64;
    let x = |i: usize| PAD_L + step * i as f64;
    let y = |v: f64| PAD_T + (TH - PAD_T - PAD_B) * (1.0 - (v - lo) / span);
    let unit = rows.first().map_or("", |r| r.unit.as_str());
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"trend\" data-point=\"{}\" width=\"{TW}\" height=\"{TH}\" viewBox=\"0 0 {TW} {TH}\" font-family=\"sans-serif\" font-size=\"10\">",
        escape(point)
    );
    let _ = writeln!(
        o,
        "<text x=\"{PAD_L}\" y=\"12\" font-weight=\"bold\">{} <tspan font-weight=\"normal\">{lo:.2} – {hi:.2} {}</tspan></text>",
        escape(point),
        escape(unit)
    );
    for v in if hi > lo { vec![hi, lo] } else { vec![hi] } {
        let _ = writeln!(
            o,
            "<line x1=\"{PAD_L}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ccc\" stroke-dasharray=\"3,3\"/><text class=\"scale\" x=\"{:.1}\" y=\"{:.1}\" fill=\"#777\">{v:.2}</text>",
            TW - PAD_R,
            y(v),
            y(v),
            TW - PAD_R + 4.0,
            y(v) + 3.5
        );
    }
    let line: Vec<String> =
        values.iter().enumerate().map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v))).collect();
    let _ = writeln!(
        o,
        "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"{}\"/>",
        line.join(" ")
    );
    for (i, r) in rows.iter().enumerate() {
        let firmware = r.firmware.as_deref().unwrap_or("-");
        let _ = writeln!(
            o,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#1f77b4\"><title>run {}: {:.2} {} ({})</title></circle>",
            x(i),
            y(r.median),
            r.id,
            r.median,
            escape(unit),
            escape(&r.started)
        );
        let anchor = if i == 0 {
            "start"
        } else if i + 1 == rows.len() {
            "end"
        } else {
            "middle"
        };
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"{anchor}\" class=\"firmware\">{}</text><text x=\"{:.1}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"#777\">#{}</text>",
            x(i),
            TH - PAD_B + 14.0,
            escape(firmware),
            x(i),
            TH - PAD_B + 26.0,
            r.id
        );
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trend_names_each_runs_firmware_escaped() {
        let row = |id, fw: &str, m| TrendRow {
            id,
            started: "2026-12-04T08:00:00Z".into(),
            firmware: Some(fw.into()),
            point: "tcp_bw 128K".into(),
            median: m,
            unit: "MiB/s".into(),
        };
        let rows = [row(1, "2.40.7000", 100.0), row(2, "2.42.5000", 120.0), row(3, "<x>", 90.0)];
        let refs: Vec<&TrendRow> = rows.iter().collect();
        let svg = trend_svg("tcp_bw 128K", &refs);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains(">2.40.7000</text>") && svg.contains(">2.42.5000</text>"), "{svg}");
        assert!(svg.contains("&lt;x&gt;") && !svg.contains("<x>"), "{svg}");
        assert!(svg.contains("90.00 – 120.00 MiB/s"), "{svg}");
        // The scale beside the line: the top value at the top, the bottom at the bottom.
        let scale = |v: &str| {
            let at = svg.find(&format!("fill=\"#777\">{v}</text>")).expect(&svg);
            let tag = &svg[svg[..at].rfind("<text class=\"scale\"").expect(&svg)..at];
            let y = tag.split("y=\"").nth(1).unwrap().split('"').next().unwrap();
            y.parse::<f64>().unwrap()
        };
        assert!(scale("120.00") < scale("90.00"), "{svg}");
        assert!((scale("120.00") - PAD_T - 3.5).abs() < 0.1, "{svg}");
        assert!((scale("90.00") - (TH - PAD_B) - 3.5).abs() < 0.1, "{svg}");
    }
}
