//! What the traffic patterns measured: each round's links at once against the same
//! links alone (the pairs' matrix), summed over the round and per host, as a ratio; the
//! lines and the chart that show them.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::analysis::{host_of, Analysis, LinkResult, RankInfo};
use super::pattern::{Flow, Pattern, PatternRound, PatternSpec};
use crate::report::svg::escape;

/// The patterns' part of a mesh report.
#[derive(Clone, Debug, Serialize)]
pub struct PatternsReport {
    /// The patterns run after the pairs, in order (empty: pairs only).
    pub list: Vec<Pattern>,
    /// Each flow's test: the pairs' bandwidth test (`write_bw 64K, 5000 iterations`).
    pub bw_test: String,
    /// Incast into this rank only (null: every rank in turn).
    pub incast_root: Option<usize>,
    /// Bisection's random cuts.
    pub bisection_rounds: usize,
    /// The seed bisection's halves are drawn from (the mesh's: `--seed` replays them).
    pub seed: u64,
    /// A round's ratio below it fails the run (`--min-pattern-ratio`; null: none does).
    pub min_ratio: Option<f64>,
    /// The pattern rounds planned.
    pub rounds: usize,
    /// Each round that ended.
    pub results: Vec<PatternResult>,
}

/// One pattern round: its links at once, and their sums.
#[derive(Clone, Debug, Serialize)]
pub struct PatternResult {
    /// Which pattern.
    pub pattern: Pattern,
    /// Its number among the pattern rounds, from 1.
    pub round: usize,
    /// `incast into 2`, `bisection 0,3 -> 1,2`.
    pub name: String,
    /// Incast: the receiver.
    pub root: Option<usize>,
    /// Bisection: the sending half.
    pub senders: Vec<usize>,
    /// Bisection: the receiving half.
    pub receivers: Vec<usize>,
    /// Bisection, odd N: the rank that sat the round out.
    pub idle: Option<usize>,
    /// Every flow of the round.
    pub links: Vec<PatternLink>,
    /// The round's sums.
    pub total: Sum,
    /// Per host (as the mesh groups ranks: host name and device): what it sent and
    /// received.
    pub hosts: Vec<HostSum>,
    /// Its ratio is not below `--min-pattern-ratio` (true without one).
    pub pass: bool,
}

/// One flow of a pattern round.
#[derive(Clone, Debug, Serialize)]
pub struct PatternLink {
    /// The sender (client).
    pub from: usize,
    /// The receiver.
    pub to: usize,
    /// The sender's host.
    pub from_host: String,
    /// The receiver's host.
    pub to_host: String,
    /// BW average with the round's other flows, MB/s.
    pub bw_mb_per_sec: Option<f64>,
    /// The same link alone (the pairs' matrix), MB/s.
    pub alone_mb_per_sec: Option<f64>,
    /// bw ÷ alone.
    pub ratio: Option<f64>,
    /// Why the flow failed, if it did.
    pub error: Option<String>,
}

/// Links' figures summed: at once (the aggregate) and alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Sum {
    /// Flows counted.
    pub links: usize,
    /// Their BW averages at once, summed, MB/s.
    pub aggregate_mb_per_sec: f64,
    /// The flows that have a figure alone too (every one with `--pairs all`).
    pub links_alone: usize,
    /// Those flows' figures alone, summed, MB/s.
    pub alone_sum_mb_per_sec: f64,
    /// Those flows' aggregate ÷ their alone sum (null: no flow measured both ways).
    pub ratio: Option<f64>,
}

/// One host's flows in a pattern round.
#[derive(Clone, Debug, Serialize)]
pub struct HostSum {
    /// Host name.
    pub host: String,
    /// Device.
    pub device: String,
    /// Its ranks' flows out.
    pub sent: Sum,
    /// Its ranks' flows in.
    pub received: Sum,
}

/// A sum being counted, flow by flow.
#[derive(Clone, Copy, Default)]
struct Tally {
    sum: Sum,
    /// The aggregate of the flows that have a figure alone too.
    together_alone: f64,
}

impl Tally {
    fn add(&mut self, l: &PatternLink) {
        let s = &mut self.sum;
        s.links += 1;
        s.aggregate_mb_per_sec += l.bw_mb_per_sec.unwrap_or(0.0);
        if let (Some(bw), Some(alone)) = (l.bw_mb_per_sec, l.alone_mb_per_sec) {
            s.links_alone += 1;
            s.alone_sum_mb_per_sec += alone;
            self.together_alone += bw;
        }
    }

    fn done(self) -> Sum {
        let s = self.sum;
        let ratio =
            (s.alone_sum_mb_per_sec > 0.0).then(|| self.together_alone / s.alone_sum_mb_per_sec);
        Sum { ratio, ..s }
    }
}

impl PatternsReport {
    /// Nothing measured yet: `rounds` planned from `spec` and `seed`.
    pub fn new(spec: &PatternSpec, bw_test: String, seed: u64, rounds: usize) -> PatternsReport {
        PatternsReport {
            list: spec.patterns.clone(),
            bw_test,
            incast_root: spec.incast_root,
            bisection_rounds: spec.bisection_rounds,
            seed,
            min_ratio: spec.min_ratio,
            rounds,
            results: Vec::new(),
        }
    }

    /// A round's links are in (`links`: what the ranks reported, only the round's own:
    /// rank 0 checked); each planned flow gets its figure, or an error when none came.
    /// Returns the round's line.
    pub fn add(
        &mut self,
        planned: &PatternRound,
        ranks: &[RankInfo],
        alone: &Analysis,
        links: &[LinkResult],
    ) -> String {
        let host = |r: usize| ranks.get(r).map_or_else(String::new, |i| i.host.clone());
        // An all-to-all of N ranks has N·(N−1) flows: looked up, not searched.
        let reported: HashMap<(usize, usize), &LinkResult> =
            links.iter().map(|l| ((l.from, l.to), l)).collect();
        let links: Vec<PatternLink> = planned
            .flows
            .iter()
            .map(|&Flow { from, to }| {
                let got = reported.get(&(from, to));
                let bw = got.and_then(|l| l.bw_mb_per_sec);
                let solo = alone.bw.get(from).and_then(|row| row.get(to)).copied().flatten();
                PatternLink {
                    from,
                    to,
                    from_host: host(from),
                    to_host: host(to),
                    bw_mb_per_sec: bw,
                    alone_mb_per_sec: solo,
                    ratio: bw.zip(solo).filter(|(_, a)| *a > 0.0).map(|(b, a)| b / a),
                    error: match got {
                        Some(l) => l.error.clone(),
                        None => Some("no figure reported".into()),
                    },
                }
            })
            .collect();
        let (keys, host_index) = host_of(ranks);
        let (mut total, mut sent, mut received) = (
            Tally::default(),
            vec![Tally::default(); keys.len()],
            vec![Tally::default(); keys.len()],
        );
        for l in &links {
            total.add(l);
            if let Some(t) = host_index.get(l.from).and_then(|&h| sent.get_mut(h)) {
                t.add(l);
            }
            if let Some(t) = host_index.get(l.to).and_then(|&h| received.get_mut(h)) {
                t.add(l);
            }
        }
        let hosts = keys
            .into_iter()
            .zip(sent.into_iter().zip(received))
            .map(|((host, device), (sent, received))| HostSum {
                host,
                device,
                sent: sent.done(),
                received: received.done(),
            })
            .collect();
        let total = total.done();
        let pass = match (self.min_ratio, total.ratio) {
            (Some(min), Some(ratio)) => ratio >= min,
            _ => true,
        };
        let result = PatternResult {
            pattern: planned.pattern,
            round: self.results.len() + 1,
            name: planned.describe(),
            root: planned.root,
            senders: planned.senders.clone(),
            receivers: planned.receivers.clone(),
            idle: planned.idle,
            links,
            total,
            hosts,
            pass,
        };
        let line = result.line();
        self.results.push(result);
        line
    }

    /// Every planned round ended.
    pub fn done(&self) -> bool {
        self.results.len() == self.rounds
    }

    /// A flow of a pattern round failed.
    pub fn failed_flows(&self) -> bool {
        self.results.iter().any(|r| r.links.iter().any(|l| l.error.is_some()))
    }

    /// A line per round below `--min-pattern-ratio`, and per flow that failed.
    pub fn failures(&self) -> Vec<String> {
        let min = self.min_ratio.unwrap_or(0.0);
        let mut lines = Vec::new();
        for r in &self.results {
            if !r.pass {
                lines.push(r.below_floor(min));
            }
            for l in r.links.iter().filter(|l| l.error.is_some()) {
                let e = l.error.as_deref().unwrap_or_default();
                lines.push(format!("{}: rank {} -> rank {}: {e}", r.name, l.from, l.to));
            }
        }
        lines
    }

    /// A CSV row per flow of each round, in the columns of the pairs' rows
    /// ([`super::report::MeshReport::csv`]): no latency or rerun, its figure alone and
    /// ratio at the end; status `fail` for every flow of a round below
    /// `--min-pattern-ratio`, `error` for a flow that failed.
    ///
    /// # Errors
    /// Never in practice (the csv writer writes to memory).
    pub fn csv_rows(
        &self,
        ranks: &[RankInfo],
        w: &mut csv::Writer<Vec<u8>>,
    ) -> Result<(), csv::Error> {
        let num = csv_number;
        let device = |rank: usize| ranks.get(rank).map(|r| r.device.clone()).unwrap_or_default();
        for r in &self.results {
            // A round below the floor fails each of its flows, for the same reason.
            let low = (!r.pass).then(|| r.below_floor(self.min_ratio.unwrap_or(0.0)));
            for l in &r.links {
                let (status, reason) = match (&l.error, &low) {
                    (Some(e), _) => ("error", e.clone()),
                    (None, Some(why)) => ("fail", why.clone()),
                    (None, None) => ("pass", String::new()),
                };
                w.write_record([
                    l.from.to_string(),
                    l.from_host.clone(),
                    device(l.from),
                    l.to.to_string(),
                    l.to_host.clone(),
                    device(l.to),
                    r.round.to_string(),
                    num(l.bw_mb_per_sec),
                    String::new(),
                    String::new(),
                    String::new(),
                    status.into(),
                    reason,
                    r.pattern.to_string(),
                    num(l.alone_mb_per_sec),
                    num(l.ratio),
                ])?;
            }
        }
        Ok(())
    }

    /// The lines of the terminal summary: a line per round.
    pub fn text(&self) -> String {
        let mut o = String::new();
        if self.list.is_empty() {
            return o;
        }
        let _ = writeln!(
            o,
            "\n patterns, {} per flow (aggregate = the round's flows at once, summed; alone = the same links in the pairs' rounds):",
            self.bw_test
        );
        for r in &self.results {
            let word = if r.pass { "" } else { "FAIL " };
            let _ = writeln!(o, " {word}{}", r.line());
            if let Some(low) = r.lowest_host() {
                let _ = writeln!(o, "   {low}");
            }
        }
        for r in &self.results {
            for l in r.links.iter().filter(|l| l.error.is_some()) {
                let e = l.error.as_deref().unwrap_or_default();
                let _ = writeln!(o, " ERROR {}: rank {} -> rank {}: {e}", r.name, l.from, l.to);
            }
        }
        if self.results.len() < self.rounds {
            let _ = writeln!(o, " {} of {} pattern rounds ended", self.results.len(), self.rounds);
        }
        o
    }

    /// The aggregate against the alone sum, a pair of bars per round (inline SVG); empty
    /// without patterns.
    pub fn chart(&self) -> String {
        if self.results.is_empty() {
            return String::new();
        }
        const ROW: usize = 34;
        const LEFT: usize = 260;
        const WIDTH: f64 = 440.0;
        let top = self
            .results
            .iter()
            .map(|r| r.total.aggregate_mb_per_sec.max(r.total.alone_sum_mb_per_sec))
            .fold(0.0_f64, f64::max)
            .max(f64::MIN_POSITIVE);
        let h = 30 + self.results.len() * ROW;
        let mut o = format!(
            "<h2>Traffic patterns: aggregate at once against the same links alone [MB/sec]</h2>\n\
<svg id=\"patterns\" xmlns=\"http://www.w3.org/2000/svg\" width=\"820\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
<rect x=\"{LEFT}\" y=\"4\" width=\"12\" height=\"10\" fill=\"#1f77b4\"/><text x=\"{}\" y=\"13\">aggregate (at once)</text>\
<rect x=\"{}\" y=\"4\" width=\"12\" height=\"10\" fill=\"#bbbbbb\"/><text x=\"{}\" y=\"13\">sum alone</text>\n",
            LEFT + 16,
            LEFT + 150,
            LEFT + 166
        );
        for (i, r) in self.results.iter().enumerate() {
            let y = 24 + i * ROW;
            let bar = |v: f64| (v / top * WIDTH).max(0.0);
            let ratio = r.total.ratio.map_or_else(|| "-".into(), |x| format!("{x:.2}"));
            let _ = writeln!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
<rect class=\"aggregate\" x=\"{LEFT}\" y=\"{y}\" width=\"{:.1}\" height=\"12\" fill=\"#1f77b4\"><title>{:.1}</title></rect>\
<rect class=\"alone\" x=\"{LEFT}\" y=\"{}\" width=\"{:.1}\" height=\"12\" fill=\"#bbbbbb\"><title>{:.1}</title></rect>\
<text x=\"{:.1}\" y=\"{}\">{:.1} / {:.1} = {ratio}</text>",
                LEFT - 6,
                y + 14,
                escape(&format!("{}. {}", r.round, r.name)),
                bar(r.total.aggregate_mb_per_sec),
                r.total.aggregate_mb_per_sec,
                y + 13,
                bar(r.total.alone_sum_mb_per_sec),
                r.total.alone_sum_mb_per_sec,
                LEFT as f64 + bar(r.total.aggregate_mb_per_sec.max(r.total.alone_sum_mb_per_sec))
                    + 6.0,
                y + 14,
                r.total.aggregate_mb_per_sec,
                r.total.alone_sum_mb_per_sec
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

impl PatternResult {
    /// With several hosts: the host whose flows out or in kept the least of their rate
    /// alone (`lowest host: node3 rxe0 received 0.21 of alone`).
    pub fn lowest_host(&self) -> Option<String> {
        if self.hosts.len() < 2 {
            return None;
        }
        let sums =
            self.hosts.iter().flat_map(|h| [(h, "sent", h.sent), (h, "received", h.received)]);
        let (h, way, ratio) = sums
            .filter_map(|(h, way, s)| s.ratio.map(|r| (h, way, r)))
            .min_by(|a, b| a.2.total_cmp(&b.2))?;
        Some(format!("lowest host: {} {} {way} {ratio:.2} of alone", h.host, h.device))
    }

    /// Why the round fails `--min-pattern-ratio min`.
    fn below_floor(&self, min: f64) -> String {
        format!("{}, below --min-pattern-ratio {min}", self.line())
    }

    /// `incast into 2: 3 links, aggregate 2450.1 MB/s, alone 7300.2 MB/s (3 links): 0.34`.
    pub fn line(&self) -> String {
        let t = &self.total;
        let failed = self.links.iter().filter(|l| l.error.is_some()).count();
        let failed = if failed > 0 { format!(", {failed} failed") } else { String::new() };
        let ratio = match t.ratio {
            None => "no link measured alone".into(),
            // More than the links give alone: the flows did not all run at once.
            Some(r) if r > 1.1 => {
                format!("{r:.2} (above 1: the flows did not all overlap; -D makes them)")
            }
            Some(r) => format!("{r:.2}"),
        };
        format!(
            "{}: {} link(s){failed}, aggregate {:.1} MB/s, alone {:.1} MB/s ({} link(s)): {ratio}",
            self.name, t.links, t.aggregate_mb_per_sec, t.alone_sum_mb_per_sec, t.links_alone
        )
    }
}

/// A figure in the mesh's CSV (the pairs' rows and the patterns'): three decimals,
/// empty when there is none.
pub(super) fn csv_number(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::super::analysis::analyse;
    use super::super::findings::Thresholds;
    use super::super::pattern::{incast, PatternSpec};
    use super::*;

    fn ranks() -> Vec<RankInfo> {
        (0..4)
            .map(|rank| RankInfo {
                rank,
                host: format!("h{}", rank / 2),
                address: "a".into(),
                port: 1,
                device: "rxe0".into(),
            })
            .collect()
    }

    fn link(from: usize, to: usize, bw: f64) -> LinkResult {
        LinkResult {
            from,
            to,
            round: 0,
            bw_mb_per_sec: Some(bw),
            t_typical_usec: None,
            error: None,
        }
    }

    /// Four ranks whose every link ran 100 MB/s alone (but `missing`, never measured),
    /// and a report of `rounds` incast rounds that fails below half of alone.
    fn incast_at_most_half(
        rounds: usize,
        missing: Option<(usize, usize)>,
    ) -> (Vec<RankInfo>, Analysis, PatternsReport) {
        let ranks = ranks();
        let alone: Vec<LinkResult> = (0..4)
            .flat_map(|f| (0..4).filter(move |&t| t != f).map(move |t| link(f, t, 100.0)))
            .filter(|l| Some((l.from, l.to)) != missing)
            .collect();
        let analysis = analyse(&ranks, &alone, Thresholds::default());
        let spec = PatternSpec {
            patterns: vec![Pattern::Incast],
            min_ratio: Some(0.5),
            ..PatternSpec::default()
        };
        let p = PatternsReport::new(&spec, "tcp_bw".into(), 9, rounds);
        (ranks, analysis, p)
    }

    #[test]
    fn a_round_sums_its_links_against_the_same_links_alone_per_round_and_host() {
        // Alone: every link 100 MB/s, but 3 -> 0 (not measured: --pairs ring, say).
        let (ranks, analysis, mut p) = incast_at_most_half(1, Some((3, 0)));
        let round = &incast(4, Some(0))[0];
        // Into rank 0 at once: 1 -> 0 and 2 -> 0 at 40 each, 3 -> 0 at 20.
        let line = p.add(
            round,
            &ranks,
            &analysis,
            &[link(1, 0, 40.0), link(2, 0, 40.0), link(3, 0, 20.0)],
        );
        let r = &p.results[0];
        assert_eq!(r.total.links, 3);
        assert!((r.total.aggregate_mb_per_sec - 100.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.total.links_alone, 2, "3 -> 0 was not measured alone");
        assert!((r.total.alone_sum_mb_per_sec - 200.0).abs() < 1e-9);
        assert!((r.total.ratio.unwrap() - 0.4).abs() < 1e-9, "80 of 200");
        assert!(!r.pass, "0.4 is below --min-pattern-ratio 0.5");
        assert_eq!(r.links[0].ratio, Some(0.4));
        assert_eq!(r.links[2].ratio, None);
        // Hosts: h0 (ranks 0, 1) received all three, sent 1 -> 0; h1 sent two.
        assert_eq!((r.hosts[0].received.links, r.hosts[0].sent.links), (3, 1));
        assert_eq!((r.hosts[1].received.links, r.hosts[1].sent.links), (0, 2));
        assert!((r.hosts[1].sent.aggregate_mb_per_sec - 60.0).abs() < 1e-9);
        assert_eq!(r.hosts[1].received.ratio, None);
        assert_eq!(
            line,
            "incast into 0: 3 link(s), aggregate 100.0 MB/s, alone 200.0 MB/s (2 link(s)): 0.40"
        );
        assert_eq!(p.failures().len(), 1);
        assert!(p.failures()[0].ends_with("below --min-pattern-ratio 0.5"), "{:?}", p.failures());
        assert!(p.done() && !p.failed_flows());
        assert!(p.text().contains(" FAIL incast into 0: 3 link(s)"), "{}", p.text());
        // h0 sent 40 of 100, received 80 of 200, h1 sent 40 of 100 (3 -> 0 was never
        // alone): a tie, the first in host order.
        assert_eq!(r.lowest_host().as_deref(), Some("lowest host: h0 rxe0 sent 0.40 of alone"));
        assert!(
            p.text().contains("\n   lowest host: h0 rxe0 sent 0.40 of alone\n"),
            "{}",
            p.text()
        );
        let chart = p.chart();
        assert_eq!(chart.matches("class=\"aggregate\"").count(), 1);
        assert!(chart.contains("100.0 / 200.0 = 0.40"), "{chart}");
        // Faster at once than alone: the flows cannot all have run at the same time.
        let fast = [link(0, 1, 300.0), link(2, 1, 300.0), link(3, 1, 300.0)];
        let line = p.add(&incast(4, Some(1))[0], &ranks, &analysis, &fast);
        assert!(
            line.ends_with(": 3.00 (above 1: the flows did not all overlap; -D makes them)"),
            "{line}"
        );
    }

    #[test]
    fn csv_has_a_row_per_flow_with_its_figure_alone_and_its_rounds_verdict() {
        let (ranks, analysis, mut p) = incast_at_most_half(2, None);
        // Into 0: 30 + 30 + 30 of 300 (0.30, below the floor); into 1: 90 each (0.90).
        p.add(
            &incast(4, Some(0))[0],
            &ranks,
            &analysis,
            &[link(1, 0, 30.0), link(2, 0, 30.0), link(3, 0, 30.0)],
        );
        p.add(
            &incast(4, Some(1))[0],
            &ranks,
            &analysis,
            &[link(0, 1, 90.0), link(2, 1, 90.0), link(3, 1, 90.0)],
        );
        let mut w = csv::Writer::from_writer(Vec::new());
        p.csv_rows(&ranks, &mut w).unwrap();
        let bytes = w.into_inner().unwrap();
        let rows: Vec<csv::StringRecord> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(bytes.as_slice())
            .records()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows.len(), 6, "three flows a round");
        let cols = |r: &csv::StringRecord| {
            [0, 2, 3, 6, 7, 11, 13, 14, 15].map(|i| r[i].to_string()).join(" ")
        };
        assert_eq!(cols(&rows[0]), "1 rxe0 0 1 30.000 fail incast 100.000 0.300");
        assert!(rows[0][12].ends_with("below --min-pattern-ratio 0.5"), "{:?}", rows[0]);
        assert_eq!(cols(&rows[5]), "3 rxe0 1 2 90.000 pass incast 100.000 0.900");
        assert_eq!(&rows[5][12], "", "a passing flow has no reason");
        assert_eq!(rows.iter().filter(|r| &r[11] == "fail").count(), 3, "the low round's flows");
    }

    #[test]
    fn a_flow_nobody_reported_is_an_error_and_no_floor_passes_every_round() {
        let ranks = ranks();
        let analysis = analyse(&ranks, &[], Thresholds::default());
        let mut p = PatternsReport::new(&PatternSpec::default(), String::new(), 1, 2);
        p.add(&incast(4, Some(1))[0], &ranks, &analysis, &[link(0, 1, 5.0)]);
        let r = &p.results[0];
        assert!(r.pass && r.total.ratio.is_none(), "nothing alone: nothing judged");
        assert_eq!(r.links.iter().filter(|l| l.error.is_some()).count(), 2);
        assert!(p.failed_flows() && !p.done());
        assert!(r.line().contains("3 link(s), 2 failed"), "{}", r.line());
        assert_eq!(
            p.failures(),
            [
                "incast into 1: rank 2 -> rank 1: no figure reported",
                "incast into 1: rank 3 -> rank 1: no figure reported"
            ]
        );
        let text = PatternsReport { list: vec![Pattern::Incast], ..p }.text();
        assert!(
            text.contains(" ERROR incast into 1: rank 3 -> rank 1: no figure reported\n"),
            "{text}"
        );
        assert!(text.contains(" 1 of 2 pattern rounds ended"), "{text}");
    }
}
