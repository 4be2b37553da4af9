//! The mesh's HTML page: the verdict, the date, a legend, each host's environment, the
//! rank and host heatmaps (SVG), the traffic patterns' aggregates and the findings.

use std::fmt::Write as _;

use super::findings::{same_host, Band};
use super::report::MeshReport;
use crate::report::svg::escape;

impl MeshReport {
    /// A page with the verdict, the heatmaps and the findings.
    pub fn html(&self) -> String {
        let a = &self.analysis;
        let (verdict, colour) = match self.exit_code() {
            0 => ("PASS", "#2ca02c"),
            1 => ("FAIL", "#d62728"),
            _ => ("ERROR", "#d62728"),
        };
        let mut o = String::new();
        let _ = write!(
            o,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rdmabench mesh</title>\
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px}}\
.verdict{{color:#fff;background:{colour};display:inline-block;padding:4px 12px;font-weight:bold}}</style></head><body>\n\
<h1>rdmabench mesh</h1>\n<p id=\"verdict\" class=\"verdict\">{verdict}</p>\n<p id=\"date\">{}</p>\n<pre>{}</pre>\n",
            escape(&self.date),
            escape(&self.header())
        );
        o.push_str(&legend());
        o.push_str(&self.environments_table());
        let names: Vec<String> =
            self.ranks.iter().map(|r| format!("{} {} {}", r.rank, r.host, r.device)).collect();
        let b = &a.bands;
        let ranks = &self.ranks;
        let rank_scale = |bw: bool| {
            move |i: usize, j: usize, v: f64| goodness(b.between(bw, same_host(ranks, i, j)), v)
        };
        let _ = writeln!(
            o,
            "<h2>Bandwidth [MB/sec], row: client (writer), column: server</h2>\n{}",
            heatmap("heatmap-bw", &names, &a.bw, &rank_scale(true))
        );
        let _ = writeln!(
            o,
            "<h2>t_typical [usec], row: client, column: server</h2>\n{}",
            heatmap("heatmap-lat", &names, &a.lat, &rank_scale(false))
        );
        if a.hosts.len() > 1 {
            let hosts: Vec<String> =
                a.hosts.iter().map(|h| format!("{} {}", h.host, h.device)).collect();
            let host_scale =
                |bw: bool| move |i: usize, j: usize, v: f64| goodness(b.between(bw, i == j), v);
            let _ = writeln!(
                o,
                "<h2>Host to host: median bandwidth [MB/sec]</h2>\n{}",
                heatmap("heatmap-host-bw", &hosts, &a.host_bw, &host_scale(true))
            );
            let _ = writeln!(
                o,
                "<h2>Host to host: median t_typical [usec]</h2>\n{}",
                heatmap("heatmap-host-lat", &hosts, &a.host_lat, &host_scale(false))
            );
        }
        o.push_str(&self.patterns.chart());
        let _ = writeln!(o, "<h2>Findings</h2>\n<ul id=\"findings\">");
        for f in &self.findings {
            let word = if f.confirmed { "FAIL" } else { "not confirmed" };
            let _ = writeln!(o, "<li>{word}: {}</li>", escape(&f.message));
        }
        for line in self.patterns.failures() {
            let _ = writeln!(o, "<li>FAIL: {}</li>", escape(&line));
        }
        if let Some(e) = &self.error {
            let _ = writeln!(o, "<li>{}</li>", escape(e));
        }
        let _ = writeln!(o, "</ul>\n<p>{}</p>\n</body></html>", escape(&self.tool));
        o
    }

    /// A row per host: its ranks and what its tests ran on (host, then device).
    fn environments_table(&self) -> String {
        let mut o = String::from(
            "<h2>Hosts</h2>\n<table id=\"environments\"><tr><th>host</th><th>ranks</th><th>host environment</th><th>device environment</th></tr>\n",
        );
        for h in &self.analysis.hosts {
            let env =
                h.ranks.iter().find_map(|&r| self.environments.get(r).and_then(Option::as_ref));
            let (host, device) = env.map_or_else(
                || ("(not described)".to_string(), String::new()),
                |e| {
                    let dev = e
                        .device
                        .as_ref()
                        .map(|d| d.summary())
                        .or_else(|| e.interface.as_ref().map(|i| i.summary()))
                        .unwrap_or_default();
                    let host = crate::environment::Environment {
                        device: None,
                        interface: None,
                        ..e.clone()
                    };
                    (host.summary(), dev)
                },
            );
            let ranks: Vec<String> = h.ranks.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                o,
                "<tr><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&h.host),
                escape(&h.device),
                ranks.join(", "),
                escape(&host),
                escape(&device)
            );
        }
        o.push_str("</table>\n");
        o
    }
}

/// What the colours say.
fn legend() -> String {
    let mut o = String::from(
        "<svg id=\"legend\" xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"44\" font-family=\"sans-serif\" font-size=\"12\">\n",
    );
    for k in 0..=10 {
        let good = 1.0 - f64::from(k) / 10.0;
        let _ = writeln!(
            o,
            "<rect x=\"{}\" y=\"4\" width=\"20\" height=\"16\" fill=\"{}\"/>",
            10 + k * 20,
            colour(good)
        );
    }
    o.push_str(
        "<text x=\"10\" y=\"36\">typical of its peers or better</text>\
<text x=\"230\" y=\"36\" text-anchor=\"end\">suspect or worse</text>\
<rect x=\"260\" y=\"4\" width=\"20\" height=\"16\" fill=\"#dddddd\"/>\
<text x=\"286\" y=\"16\">not measured</text>\
<text x=\"390\" y=\"16\">a link against its band: links between hosts, or within one</text></svg>\n",
    );
    o
}

/// 1: at the band's centre or better; 0: at its limit or worse.
fn goodness(band: Option<Band>, v: f64) -> f64 {
    let Some(b) = band else { return 1.0 };
    let span = (b.limit - b.centre).abs();
    if span <= 0.0 {
        return 1.0;
    }
    let worse = if b.metric == "lat" { v - b.centre } else { b.centre - v };
    (1.0 - worse / span).clamp(0.0, 1.0)
}

/// An SVG heatmap: a cell per directed link, coloured by `scale(row, column, figure)`;
/// empty cells grey.
pub fn heatmap(
    id: &str,
    labels: &[String],
    m: &[Vec<Option<f64>>],
    scale: &dyn Fn(usize, usize, f64) -> f64,
) -> String {
    const CELL: usize = 56;
    const LEFT: usize = 170;
    const TOP: usize = 30;
    let n = m.len();
    let (w, h) = (LEFT + n * CELL + 10, TOP + n * CELL + 10);
    let mut o = format!(
        "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"11\">\n"
    );
    for j in 0..n {
        let x = LEFT + j * CELL + CELL / 2;
        let _ = writeln!(o, "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{j}</text>", TOP - 8);
    }
    for (i, row) in m.iter().enumerate() {
        let y = TOP + i * CELL;
        let label = labels.get(i).map_or_else(|| i.to_string(), Clone::clone);
        let _ = writeln!(
            o,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            LEFT - 6,
            y + CELL / 2 + 4,
            escape(&label)
        );
        for (j, v) in row.iter().enumerate() {
            let x = LEFT + j * CELL;
            let (fill, text) = match v {
                Some(v) => (colour(scale(i, j, *v)), format!("{v:.1}")),
                None => ("#dddddd".to_string(), String::new()),
            };
            let _ = writeln!(
                o,
                "<rect class=\"cell\" x=\"{x}\" y=\"{y}\" width=\"{CELL}\" height=\"{CELL}\" fill=\"{fill}\" stroke=\"#fff\"><title>{i} -&gt; {j}: {text}</title></rect>\
<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{text}</text>",
                x + CELL / 2,
                y + CELL / 2 + 4
            );
        }
    }
    o.push_str("</svg>");
    o
}

/// Red (0) through yellow to green (1).
fn colour(good: f64) -> String {
    let g = good.clamp(0.0, 1.0);
    let (r, gr) = if g < 0.5 {
        (214.0, 39.0 + (g * 2.0) * (200.0 - 39.0))
    } else {
        (214.0 - (g - 0.5) * 2.0 * (214.0 - 44.0), 200.0 - (g - 0.5) * 2.0 * (200.0 - 160.0))
    };
    format!("#{:02x}{:02x}{:02x}", r as u8, gr as u8, 44)
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::report;
    use super::*;

    #[test]
    fn the_page_has_the_verdict_date_legend_hosts_heatmaps_and_findings() {
        let html = report(true, Some(12.0)).html();
        assert!(html.contains("id=\"heatmap-bw\"") && html.contains("id=\"heatmap-lat\""));
        assert!(html.contains("id=\"heatmap-host-bw\"") && html.contains("id=\"legend\""));
        assert_eq!(html.matches("class=\"cell\"").count(), 36, "3×3 cells, four heatmaps");
        assert!(html.contains(">FAIL<"));
        assert!(html.contains("<p id=\"date\">20"), "the date");
        assert_eq!(html.matches("<li>").count(), 1, "one line per finding");
        assert!(html.contains("<li>FAIL: rank 2 (h2 rxe0) → rank 0"));
        assert_eq!(html.matches("<tr><td>").count(), 3, "a row per host");
        let html = report(true, Some(95.0)).html();
        assert!(html.contains(">PASS<") && html.contains("<li>not confirmed: rank 2"));
    }

    #[test]
    fn heatmap_colours_run_from_red_at_the_limit_to_green_at_the_centre() {
        assert_eq!(colour(0.0), "#d6272c");
        assert_eq!(colour(1.0), "#2ca02c");
        let bw =
            Band { metric: "bw", peers: "inter", links: 9, centre: 100.0, mad: 1.0, limit: 80.0 };
        assert_eq!(
            (goodness(Some(bw), 120.0), goodness(Some(bw), 100.0), goodness(Some(bw), 90.0)),
            (1.0, 1.0, 0.5)
        );
        assert_eq!((goodness(Some(bw), 80.0), goodness(Some(bw), 10.0)), (0.0, 0.0));
        let lat = Band { metric: "lat", limit: 60.0, centre: 10.0, ..bw };
        assert_eq!(
            (goodness(Some(lat), 5.0), goodness(Some(lat), 35.0), goodness(Some(lat), 90.0)),
            (1.0, 0.5, 0.0)
        );
        assert_eq!(goodness(None, 1.0), 1.0);
    }
}
