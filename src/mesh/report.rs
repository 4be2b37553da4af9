//! A mesh's report at rank 0: the matrices as text, JSON (docs/json.md#mesh), CSV (one
//! row per directed link) and an HTML page with SVG heatmaps.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::analysis::{self, Analysis, LinkResult, RankInfo, Thresholds};
use super::schedule::Pair;
use super::MeshSpec;
use crate::report::svg::{escape, size_label};
use crate::results::Verdict;
use crate::spec::{RunLength, TestSpec};

/// Everything a mesh measured and found.
#[derive(Clone, Debug, Serialize)]
pub struct MeshReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// `mesh`.
    pub kind: &'static str,
    /// `rdmabench 0.1.0 (commit)`.
    pub tool: String,
    /// Every round ran (false in the file written after each round, and after an error).
    pub complete: bool,
    /// The bandwidth test, in words.
    pub bw_test: String,
    /// The latency test, in words.
    pub lat_test: String,
    /// `--pairs`.
    pub pairs: String,
    /// The seed `random:K` used.
    pub seed: u64,
    /// Rounds in the schedule.
    pub rounds: usize,
    /// Rounds that ended.
    pub rounds_done: usize,
    /// What links are judged by.
    pub thresholds: Thresholds,
    /// The ranks, in order.
    pub ranks: Vec<RankInfo>,
    /// Every directed link measured, in round order.
    pub links: Vec<LinkResult>,
    /// Matrices, summaries, findings.
    pub analysis: Analysis,
    /// Pass, or the findings in a line each.
    pub verdict: Verdict,
    /// What stopped the mesh, if something did.
    pub error: Option<String>,
}

/// `write_bw 64K, 1000 iterations`.
pub fn describe(spec: &TestSpec) -> String {
    let size = spec.sizes.first().map_or_else(String::new, |&s| format!(" {}", size_label(s)));
    let run = match spec.run {
        RunLength::Iterations(n) => format!("{n} iterations"),
        RunLength::Duration { secs, .. } => format!("{secs} s"),
    };
    format!("{}{size}, {run}", spec.id())
}

impl MeshReport {
    /// An empty report for `ranks`.
    pub fn new(mesh: &MeshSpec, ranks: &[RankInfo], seed: u64, rounds: usize) -> MeshReport {
        MeshReport {
            schema_version: crate::report::SCHEMA_VERSION,
            kind: "mesh",
            tool: crate::engine::tool(),
            complete: false,
            bw_test: describe(&mesh.bw),
            lat_test: describe(&mesh.lat),
            pairs: mesh.pairs.to_string(),
            seed,
            rounds,
            rounds_done: 0,
            thresholds: mesh.thresholds,
            ranks: ranks.to_vec(),
            links: Vec::new(),
            analysis: analysis::analyse(ranks, &[], mesh.thresholds),
            verdict: Verdict { pass: true, failures: Vec::new() },
            error: None,
        }
    }

    /// The lines printed before the first round.
    pub fn header(&self) -> String {
        let hosts: std::collections::BTreeSet<&str> =
            self.ranks.iter().map(|r| r.host.as_str()).collect();
        let seed = if self.pairs.starts_with("random") {
            format!(" (--seed {})", self.seed)
        } else {
            String::new()
        };
        format!(
            " rdmabench mesh: {} ranks on {} host(s), pairs {}{seed}: {} round(s)\n bandwidth: {}; latency: {}",
            self.ranks.len(),
            hosts.len(),
            self.pairs,
            self.rounds,
            self.bw_test,
            self.lat_test
        )
    }

    /// A round's links are in: the analysis is redone over all so far.
    pub fn add_round(&mut self, links: Vec<LinkResult>, t: Thresholds) {
        self.links.extend(links);
        self.links.sort_by_key(|l| (l.round, l.from, l.to));
        self.rounds_done += 1;
        self.analysis = analysis::analyse(&self.ranks, &self.links, t);
        self.verdict = verdict(&self.analysis);
    }

    /// ` round 2/3: 0<->2 1<->3 (4.1 s)`.
    pub fn round_line(&self, k: usize, round: &[Pair], took: Duration) -> String {
        let pairs: Vec<String> = round.iter().map(|p| format!("{}<->{}", p.0, p.1)).collect();
        let failed = self.links.iter().filter(|l| l.round == k && l.error.is_some()).count();
        let failed = if failed > 0 { format!(", {failed} link(s) failed") } else { String::new() };
        format!(
            " round {}/{}: {} ({:.1} s{failed})",
            k + 1,
            self.rounds,
            pairs.join(" "),
            took.as_secs_f64()
        )
    }

    /// Every round ran.
    pub fn finish(&mut self) {
        self.complete = self.rounds_done == self.rounds;
    }

    /// What stopped the mesh.
    pub fn stopped(&mut self, error: &str) {
        self.complete = false;
        self.error = Some(error.to_string());
        self.verdict.pass = false;
    }

    /// 0: every link passed; 1: a link failed a threshold; 2: a test failed or the mesh
    /// stopped.
    pub fn exit_code(&self) -> u8 {
        if self.error.is_some() || self.analysis.has_errors() || !self.complete {
            2
        } else if !self.analysis.findings.is_empty() {
            1
        } else {
            0
        }
    }

    /// The matrices, the per-node summary and the findings.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let a = &self.analysis;
        matrix(
            &mut o,
            &format!("BW average [MB/sec] ({}), row: from (client), column: to", self.bw_test),
            &a.bw,
        );
        matrix(
            &mut o,
            &format!("t_typical [usec] ({}), row: client, column: server", self.lat_test),
            &a.lat,
        );
        let _ = writeln!(
            o,
            "\n {:<5} {:<16} {:<8} {:>28} {:>28}",
            "rank", "host", "device", "BW out min/median/max", "BW in min/median/max"
        );
        let s3 = |s: Option<analysis::Spread>| {
            s.map_or_else(|| "-".into(), |s| format!("{:.2}/{:.2}/{:.2}", s.min, s.median, s.max))
        };
        for nd in &a.nodes {
            let _ = writeln!(
                o,
                " {:<5} {:<16} {:<8} {:>28} {:>28}",
                nd.rank,
                nd.host,
                nd.device,
                s3(nd.bw_out),
                s3(nd.bw_in)
            );
        }
        let _ = writeln!(
            o,
            "\n {} of {} directed links measured",
            a.measured_links,
            self.ranks.len() * self.ranks.len().saturating_sub(1)
        );
        if let (Some(b), Some(l)) = (a.bw_spread, a.lat_spread) {
            let _ = writeln!(o, " median link: {:.2} MB/sec, {:.2} usec", b.median, l.median);
        }
        for f in &a.findings {
            let _ = writeln!(o, " FAIL {}", f.message);
        }
        if let Some(e) = &self.error {
            let _ = writeln!(o, " ERROR {e}");
        }
        o
    }

    /// One row per directed link.
    ///
    /// # Errors
    /// Never in practice (the csv writer writes to memory).
    pub fn csv(&self) -> Result<String, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "from_rank",
            "from_host",
            "from_device",
            "to_rank",
            "to_host",
            "to_device",
            "round",
            "bw_mb_per_sec",
            "t_typical_usec",
            "status",
            "reason",
        ])?;
        let num = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
        for l in &self.links {
            let (from, to) = (&self.ranks[l.from], &self.ranks[l.to]);
            let found: Vec<&str> = self
                .analysis
                .findings
                .iter()
                .filter(|f| f.from == l.from && f.to == l.to)
                .map(|f| f.message.as_str())
                .collect();
            w.write_record([
                l.from.to_string(),
                from.host.clone(),
                from.device.clone(),
                l.to.to_string(),
                to.host.clone(),
                to.device.clone(),
                l.round.to_string(),
                num(l.bw_mb_per_sec),
                num(l.t_typical_usec),
                if found.is_empty() { "pass".into() } else { "fail".into() },
                found.join("; "),
            ])?;
        }
        let bytes = w.into_inner().map_err(|e| csv::Error::from(e.into_error()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A page with the verdict, the two heatmaps and the findings.
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
<h1>rdmabench mesh</h1>\n<p id=\"verdict\" class=\"verdict\">{verdict}</p>\n<pre>{}</pre>\n",
            escape(&self.header())
        );
        let _ = writeln!(
            o,
            "<h2>Bandwidth [MB/sec], row: client (writer), column: server</h2>\n{}",
            heatmap("heatmap-bw", &self.ranks, &a.bw, Scale::bw(a, self.thresholds))
        );
        let _ = writeln!(
            o,
            "<h2>t_typical [usec], row: client, column: server</h2>\n{}",
            heatmap("heatmap-lat", &self.ranks, &a.lat, Scale::lat(a, self.thresholds))
        );
        let _ = writeln!(o, "<h2>Findings</h2>\n<ul id=\"findings\">");
        for f in &a.findings {
            let _ = writeln!(o, "<li>{}</li>", escape(&f.message));
        }
        if let Some(e) = &self.error {
            let _ = writeln!(o, "<li>{}</li>", escape(e));
        }
        let _ = writeln!(o, "</ul>\n<p>{}</p>\n</body></html>", escape(&self.tool));
        o
    }
}

fn verdict(a: &Analysis) -> Verdict {
    Verdict {
        pass: a.findings.is_empty(),
        failures: a.findings.iter().map(|f| f.message.clone()).collect(),
    }
}

fn matrix(o: &mut String, title: &str, m: &[Vec<Option<f64>>]) {
    let _ = writeln!(o, "\n {title}");
    let _ = write!(o, " {:>6}", "");
    for j in 0..m.len() {
        let _ = write!(o, " {j:>10}");
    }
    let _ = writeln!(o);
    for (i, row) in m.iter().enumerate() {
        let _ = write!(o, " {i:>6}");
        for v in row {
            match v {
                Some(v) => {
                    let _ = write!(o, " {v:>10.2}");
                }
                None => {
                    let _ = write!(o, " {:>10}", "-");
                }
            }
        }
        let _ = writeln!(o);
    }
}

/// How a heatmap colours a figure: green at the median link or better, red at the
/// outlier threshold (`--outlier` from the median) or worse, yellow between.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    median: Option<f64>,
    /// The threshold's distance from the median, as a fraction of it.
    outlier: f64,
    lower_is_better: bool,
}

impl Scale {
    fn bw(a: &Analysis, t: Thresholds) -> Scale {
        Scale {
            median: a.bw_spread.map(|s| s.median),
            outlier: t.outlier_pct / 100.0,
            lower_is_better: false,
        }
    }

    fn lat(a: &Analysis, t: Thresholds) -> Scale {
        Scale {
            median: a.lat_spread.map(|s| s.median),
            outlier: t.outlier_pct / 100.0,
            lower_is_better: true,
        }
    }

    /// 1: at the median or better; 0: at the threshold or worse (how much slower than
    /// the median link, as analysis judges it).
    fn goodness(self, v: f64) -> f64 {
        let Some(m) = self.median.filter(|m| *m > 0.0) else { return 1.0 };
        if v <= 0.0 {
            return if self.lower_is_better { 1.0 } else { 0.0 };
        }
        let slower = if self.lower_is_better { v / m - 1.0 } else { m / v - 1.0 };
        (1.0 - slower / self.outlier).clamp(0.0, 1.0)
    }
}

/// An SVG heatmap: a cell per directed link, coloured by `scale`; empty cells grey.
pub fn heatmap(id: &str, ranks: &[RankInfo], m: &[Vec<Option<f64>>], scale: Scale) -> String {
    const CELL: usize = 56;
    const LEFT: usize = 150;
    const TOP: usize = 30;
    let n = m.len();
    let (w, h) = (LEFT + n * CELL + 10, TOP + n * CELL + 10);
    let mut o = format!(
        "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"11\">\n"
    );
    for (j, r) in ranks.iter().enumerate().take(n) {
        let x = LEFT + j * CELL + CELL / 2;
        let _ = writeln!(
            o,
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            TOP - 8,
            r.rank
        );
    }
    for (i, row) in m.iter().enumerate() {
        let y = TOP + i * CELL;
        let label = ranks
            .get(i)
            .map_or_else(|| i.to_string(), |r| format!("{} {} {}", r.rank, r.host, r.device));
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
                Some(v) => (colour(scale.goodness(*v)), format!("{v:.1}")),
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
    use super::*;

    fn report(slow: bool) -> MeshReport {
        let ranks: Vec<RankInfo> = (0..3)
            .map(|rank| RankInfo {
                rank,
                host: format!("h{rank}"),
                address: "127.0.0.1".into(),
                port: 1,
                device: "rxe0".into(),
            })
            .collect();
        let spec = crate::spec::rules::tcp(crate::spec::Measure::Bw, &Default::default()).unwrap();
        let lat = crate::spec::rules::tcp(crate::spec::Measure::Lat, &Default::default()).unwrap();
        let mesh = MeshSpec {
            bw: spec,
            lat,
            pairs: super::super::Pairs::All,
            seed: None,
            round_timeout: Duration::from_secs(9),
            thresholds: Thresholds { min_bw: None, outlier_pct: 25.0 },
        };
        let mut r = MeshReport::new(&mesh, &ranks, 7, 3);
        let mut links = Vec::new();
        for from in 0..3 {
            for to in (0..3).filter(|&t| t != from) {
                let bw = if slow && from == 2 && to == 0 { 10.0 } else { 100.0 };
                links.push(LinkResult {
                    from,
                    to,
                    round: 0,
                    bw_mb_per_sec: Some(bw),
                    t_typical_usec: Some(5.0),
                    error: None,
                });
            }
        }
        r.add_round(links, mesh.thresholds);
        r.rounds_done = 3;
        r.finish();
        r
    }

    #[test]
    fn exit_codes_follow_the_findings_and_errors() {
        assert_eq!(report(false).exit_code(), 0);
        assert_eq!(report(true).exit_code(), 1);
        let mut r = report(false);
        r.stopped("round 2/3 did not end");
        assert_eq!(r.exit_code(), 2);
        assert!(r.text().contains("ERROR round 2/3 did not end"));
    }

    #[test]
    fn text_csv_and_html_show_every_link() {
        let r = report(true);
        let text = r.text();
        assert!(text.contains("BW average [MB/sec]"), "{text}");
        assert!(text.contains("6 of 6 directed links measured"), "{text}");
        assert!(
            text.contains("FAIL rank 2 (h2 rxe0) -> rank 0 (h0 rxe0): BW 10.00 MB/s"),
            "{text}"
        );
        let csv = r.csv().unwrap();
        let mut rows = csv::Reader::from_reader(csv.as_bytes());
        let rows: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 6);
        let failed: Vec<_> = rows.iter().filter(|r| &r[9] == "fail").collect();
        assert_eq!(failed.len(), 1);
        assert_eq!((&failed[0][0], &failed[0][3], &failed[0][7]), ("2", "0", "10.000"));
        let html = r.html();
        assert!(html.contains("id=\"heatmap-bw\"") && html.contains("id=\"heatmap-lat\""));
        assert_eq!(html.matches("class=\"cell\"").count(), 18, "3×3 cells per heatmap");
        assert!(html.contains(">FAIL<"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["kind"], "mesh");
        assert_eq!(json["analysis"]["bw"][2][0], 10.0);
        assert_eq!(json["analysis"]["bw"][0][0], serde_json::Value::Null);
    }

    #[test]
    fn heatmap_colours_run_from_red_at_the_threshold_to_green_at_the_median() {
        assert_eq!(colour(0.0), "#d6272c");
        assert_eq!(colour(1.0), "#2ca02c");
        let bw = Scale { median: Some(100.0), outlier: 0.25, lower_is_better: false };
        assert_eq!(
            (bw.goodness(120.0), bw.goodness(100.0), bw.goodness(800.0 / 9.0)),
            (1.0, 1.0, 0.5)
        );
        assert_eq!((bw.goodness(80.0), bw.goodness(10.0)), (0.0, 0.0));
        let lat = Scale { median: Some(10.0), outlier: 0.5, lower_is_better: true };
        assert_eq!((lat.goodness(5.0), lat.goodness(12.5), lat.goodness(15.0)), (1.0, 0.5, 0.0));
        let none = Scale { median: None, outlier: 0.25, lower_is_better: false };
        assert_eq!(none.goodness(1.0), 1.0);
    }
}
