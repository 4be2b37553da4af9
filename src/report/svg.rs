//! Line charts as standalone SVG: message size on a log₂ axis, one line per series.
//! Hand-written so the report needs no JavaScript and no plotting library.

use std::fmt::Write;

/// One line of a chart.
pub struct Line {
    /// Legend text.
    pub label: String,
    /// Points (size in bytes, value); missing sizes are simply absent.
    pub points: Vec<(u64, f64)>,
}

/// How the value axis is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// From zero.
    Linear,
    /// Powers of ten (latency spans decades).
    Log,
}

/// A chart.
pub struct Chart<'a> {
    /// `id` of the `<svg>` element, so a page and a test can find it.
    pub id: &'a str,
    /// Title above the plot.
    pub title: &'a str,
    /// Value axis label, with its unit.
    pub y_label: &'a str,
    /// Value axis.
    pub scale: Scale,
    /// The lines.
    pub lines: &'a [Line],
}

const W: f64 = 760.0;
const H: f64 = 420.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// `65536` → `64K`.
pub fn size_label(size: u64) -> String {
    match size {
        s if s >= 1 << 30 && s % (1 << 30) == 0 => format!("{}G", s >> 30),
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}M", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{}K", s >> 10),
        s => s.to_string(),
    }
}

/// Escapes text for XML and HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" step for about `n` ticks over `0..max`.
fn nice_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Renders `chart` as an SVG document.
pub fn render(chart: &Chart) -> String {
    let f = Frame::of(chart);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="{}" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#,
        escape(chart.id)
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        LEFT,
        escape(chart.title)
    );
    axes(&mut o, chart, &f);
    for (k, line) in chart.lines.iter().enumerate() {
        series(&mut o, chart, &f, k, line);
    }
    o.push_str("</svg>\n");
    o
}

/// Where values and sizes land: the axes' ranges and the y ticks.
struct Frame {
    sizes: Vec<u64>,
    x_lo: f64,
    x_hi: f64,
    y_lo: f64,
    y_hi: f64,
    ticks: Vec<f64>,
    scale: Scale,
}

const PLOT_W: f64 = W - LEFT - RIGHT;
const PLOT_H: f64 = H - TOP - BOTTOM;

impl Frame {
    fn of(chart: &Chart) -> Frame {
        let mut sizes: Vec<u64> =
            chart.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let values: Vec<f64> = chart
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|v| shown(chart.scale, *v))
            .collect();
        let (x_lo, x_hi) = match (sizes.first(), sizes.last()) {
            (Some(&a), Some(&b)) if b > a => ((a as f64).log2(), (b as f64).log2()),
            (Some(&a), _) => ((a as f64).log2() - 1.0, (a as f64).log2() + 1.0),
            _ => (0.0, 1.0),
        };
        let vmax = values.iter().copied().fold(0.0f64, f64::max);
        let vmin = values.iter().copied().fold(f64::INFINITY, f64::min);
        let (y_lo, y_hi, ticks): (f64, f64, Vec<f64>) = match chart.scale {
            Scale::Linear => {
                let step = nice_step(if vmax > 0.0 { vmax } else { 1.0 }, 5.0);
                let top = ((vmax / step).ceil().max(1.0)) * step;
                let ticks =
                    (0..=((top / step).round() as usize)).map(|i| i as f64 * step).collect();
                (0.0, top, ticks)
            }
            Scale::Log => {
                let lo = if vmin.is_finite() { vmin.log10().floor() } else { 0.0 };
                let hi = if vmax > 0.0 { vmax.log10().ceil().max(lo + 1.0) } else { lo + 1.0 };
                let ticks = (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect();
                (lo, hi, ticks)
            }
        };
        Frame { sizes, x_lo, x_hi, y_lo, y_hi, ticks, scale: chart.scale }
    }

    fn x(&self, size: u64) -> f64 {
        LEFT + ((size as f64).log2() - self.x_lo) / (self.x_hi - self.x_lo) * PLOT_W
    }

    fn y(&self, v: f64) -> f64 {
        let t = match self.scale {
            Scale::Linear => v,
            Scale::Log => v.max(f64::MIN_POSITIVE).log10(),
        };
        TOP + PLOT_H - (t - self.y_lo) / (self.y_hi - self.y_lo) * PLOT_H
    }
}

/// Whether a value can be drawn on this scale (a log scale has no place for 0).
fn shown(scale: Scale, v: f64) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// Grid lines, tick labels, the frame and the axis titles.
fn axes(o: &mut String, chart: &Chart, f: &Frame) {
    for &t in &f.ticks {
        let y = f.y(t);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + PLOT_W,
            LEFT - 6.0,
            y + 4.0,
            fmt_value(t)
        );
    }
    for &s in &f.sizes {
        let x = f.x(s);
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + PLOT_H,
            TOP + PLOT_H + 16.0,
            size_label(s)
        );
    }
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#444"/>"##
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">message size [bytes, log scale]</text>"#,
        LEFT + PLOT_W / 2.0,
        H - 16.0
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + PLOT_H / 2.0,
        escape(chart.y_label)
    );
}

/// Line `k`: its polyline, its points and its legend entry.
fn series(o: &mut String, chart: &Chart, f: &Frame, k: usize, line: &Line) {
    let color = COLORS[k % COLORS.len()];
    let pts: Vec<(f64, f64)> = line
        .points
        .iter()
        .filter(|(_, v)| shown(chart.scale, *v))
        .map(|&(s, v)| (f.x(s), f.y(v)))
        .collect();
    if pts.len() > 1 {
        let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            o,
            r#"<polyline class="series" fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
    }
    for (x, y) in &pts {
        let _ = writeln!(o, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{color}"/>"#);
    }
    let ly = TOP + 10.0 + k as f64 * 20.0;
    let lx = LEFT + PLOT_W + 14.0;
    let _ = writeln!(
        o,
        r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
        lx + 22.0,
        lx + 28.0,
        ly + 4.0,
        escape(&line.label)
    );
}

/// A time series chart: each line's points are (seconds, value), on linear axes from 0.
pub struct TimeChart<'a> {
    /// `id` of the `<svg>` element.
    pub id: &'a str,
    /// Title above the plot.
    pub title: &'a str,
    /// Value axis label, with its unit.
    pub y_label: &'a str,
    /// The lines: legend text and points.
    pub lines: &'a [(String, Vec<(f64, f64)>)],
}

/// Renders `chart` as an SVG document (a soak's intervals over its run).
pub fn render_time(chart: &TimeChart) -> String {
    let all = || {
        chart
            .lines
            .iter()
            .flat_map(|(_, p)| p.iter())
            .filter(|(t, v)| t.is_finite() && v.is_finite())
    };
    let t_max = all().map(|p| p.0).fold(0.0f64, f64::max).max(1.0);
    let v_max = all().map(|p| p.1).fold(0.0f64, f64::max);
    let (t_step, v_step) =
        (nice_step(t_max, 8.0), nice_step(if v_max > 0.0 { v_max } else { 1.0 }, 5.0));
    let v_top = (v_max / v_step).ceil().max(1.0) * v_step;
    let x = |t: f64| LEFT + t / t_max * PLOT_W;
    let y = |v: f64| TOP + PLOT_H - v / v_top * PLOT_H;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="{}" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#,
        escape(chart.id)
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(chart.title)
    );
    for k in 0..=((v_top / v_step).round() as usize) {
        let (v, yv) = (k as f64 * v_step, y(k as f64 * v_step));
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{yv:.1}" x2="{:.1}" y2="{yv:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + PLOT_W,
            LEFT - 6.0,
            yv + 4.0,
            fmt_value(v)
        );
    }
    for k in 0..=((t_max / t_step).floor() as usize) {
        let xt = x(k as f64 * t_step);
        let _ = writeln!(
            o,
            r#"<text x="{xt:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + PLOT_H + 16.0,
            fmt_value(k as f64 * t_step)
        );
    }
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#444"/><text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the run's loop started</text><text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
        LEFT + PLOT_W / 2.0,
        H - 16.0,
        TOP + PLOT_H / 2.0,
        escape(chart.y_label)
    );
    for (k, (label, points)) in chart.lines.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let path: Vec<String> = points
            .iter()
            .filter(|(t, v)| t.is_finite() && v.is_finite())
            .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
            .collect();
        let _ = writeln!(
            o,
            r#"<polyline class="series" fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        let (lx, ly) = (LEFT + PLOT_W + 14.0, TOP + 10.0 + k as f64 * 20.0);
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            lx + 22.0,
            lx + 28.0,
            ly + 4.0,
            escape(label)
        );
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_steps_read_as_people_write_them() {
        assert_eq!(size_label(2), "2");
        assert_eq!(size_label(65536), "64K");
        assert_eq!(size_label(8 << 20), "8M");
        assert_eq!(size_label(1000), "1000");
        assert_eq!(nice_step(612.0, 5.0), 200.0);
        assert_eq!(nice_step(0.9, 5.0), 0.2);
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn a_chart_has_one_polyline_per_series_inside_the_plot() {
        let lines = [
            Line { label: "RDMA write".into(), points: vec![(2, 1.0), (64, 20.0), (65536, 600.0)] },
            Line { label: "TCP <1>".into(), points: vec![(2, 0.5), (65536, 300.0)] },
            Line { label: "none".into(), points: vec![] },
        ];
        let svg = render(&Chart {
            id: "bw",
            title: "Bandwidth",
            y_label: "MiB/s",
            scale: Scale::Linear,
            lines: &lines,
        });
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.contains("TCP &lt;1&gt;") && svg.contains(">64K<"));
        // Every point lies inside the plot area.
        for c in svg.split("<circle ").skip(1) {
            let num = |k: &str| -> f64 {
                let v = c.split(&format!("{k}=\"")).nth(1).unwrap();
                v[..v.find('"').unwrap()].parse().unwrap()
            };
            let (x, y) = (num("cx"), num("cy"));
            assert!((LEFT..=W - RIGHT).contains(&x) && (TOP..=H - BOTTOM).contains(&y), "{x},{y}");
        }
        let log = render(&Chart {
            id: "lat",
            title: "Latency",
            y_label: "usec",
            scale: Scale::Log,
            lines: &lines,
        });
        assert!(log.contains(">1000<") || log.contains(">100<"), "decade ticks");
    }

    #[test]
    fn a_time_chart_draws_each_run_over_its_seconds() {
        let lines = [
            ("run 1".to_string(), vec![(1.0, 100.0), (2.0, 50.0), (4.0, 100.0)]),
            ("run <2>".to_string(), vec![(1.0, 90.0), (4.0, 95.0)]),
        ];
        let svg =
            render_time(&TimeChart { id: "soak-1", title: "t", y_label: "MiB/s", lines: &lines });
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        // 4 s across the plot's width, 100 at the top of a 0–100 axis.
        let right = LEFT + PLOT_W;
        assert!(
            svg.contains(&format!(r#"points="{:.1},{:.1} "#, LEFT + PLOT_W / 4.0, TOP)),
            "{svg}"
        );
        assert!(svg.contains(&format!("{right:.1},{TOP:.1}\"")), "{svg}");
        assert!(svg.contains(&format!(",{:.1} ", TOP + PLOT_H / 2.0)), "the dip to 50: {svg}");
        assert!(svg.contains("run &lt;2&gt;") && svg.contains(r#"id="soak-1""#), "{svg}");
    }
}
