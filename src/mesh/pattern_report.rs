//! What the traffic patterns measured: each round's links at once against the same
//! links alone (the pairs' matrix), summed over the round and per host, as a ratio; the
//! lines and the chart that show them.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::analysis::Analysis;
use super::pattern::{Flow, Pattern, PatternRound, PatternSpec};
use super::ranks::{host_of, LinkResult, RankInfo};
use super::window::{self, NoWindow, SharedWindow};
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
    /// Every flow's bytes between the last flow's start and the first flow's stop
    /// ([`super::window`]); null when the round has none (see `no_window`).
    pub window: Option<SharedWindow>,
    /// Why there is no shared window: a flow reported no progress, or the flows never
    /// all ran at once (null with a window).
    pub no_window: Option<String>,
    /// The latency test run beside the flows, on the round's first flow's link.
    pub probe: Option<Probe>,
    /// Per host (as the mesh groups ranks: host name and device): what it sent and
    /// received.
    pub hosts: Vec<HostSum>,
    /// Its ratio is not below `--min-pattern-ratio` (true without one).
    pub pass: bool,
}

/// The latency under load: the mesh's latency test on one flow's link, run beside the
/// round's flows for as long, against the same link's t_typical alone.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    /// The pinger (the flow's sender).
    pub from: usize,
    /// The flow's receiver.
    pub to: usize,
    /// t_typical under load, µs (null: the probe failed; its error is the flow's).
    pub t_typical_usec: Option<f64>,
    /// The link's t_typical alone (the pairs' matrix), µs.
    pub alone_usec: Option<f64>,
    /// Under load ÷ alone.
    pub ratio: Option<f64>,
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
    /// Its bytes inside the round's shared window (null without one).
    pub window_bytes: Option<f64>,
    /// Those bytes over the window's length, MB/s.
    pub window_mb_per_sec: Option<f64>,
    /// Its part of all the flows' bytes inside the window (0 to 1).
    pub share: Option<f64>,
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
        let mut links: Vec<PatternLink> = planned
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
                    window_bytes: None,
                    window_mb_per_sec: None,
                    share: None,
                    error: match got {
                        Some(l) => l.error.clone(),
                        None => Some("no figure reported".into()),
                    },
                }
            })
            .collect();
        let spans: Vec<_> =
            planned.flows.iter().map(|f| reported.get(&(f.from, f.to))?.span.as_ref()).collect();
        let solo: Vec<Option<f64>> = links.iter().map(|l| l.alone_mb_per_sec).collect();
        let (window, no_window) = match window::shared(&spans, &solo) {
            Ok((w, each)) => {
                for (l, e) in links.iter_mut().zip(each) {
                    l.window_bytes = Some(e.bytes);
                    l.window_mb_per_sec = Some(e.mb_per_sec);
                    l.share = Some(e.share);
                }
                (Some(w), None)
            }
            Err(NoWindow::Unreported) => (None, Some("a flow reported no progress".to_string())),
            Err(NoWindow::NoOverlap) => (
                None,
                Some(
                    "the flows never all ran at once (a longer --pattern-secs overlaps them)"
                        .into(),
                ),
            ),
        };
        let probe = planned.probe().map(|Flow { from, to }| {
            let under = reported.get(&(from, to)).and_then(|l| l.t_typical_usec);
            let solo = alone.lat.get(from).and_then(|row| row.get(to)).copied().flatten();
            Probe {
                from,
                to,
                t_typical_usec: under,
                alone_usec: solo,
                ratio: under.zip(solo).filter(|(_, a)| *a > 0.0).map(|(u, a)| u / a),
            }
        });
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
        // At once means inside the shared window, where there is one.
        let judged = window.as_ref().map_or(total.ratio, |w| w.ratio);
        let pass = match (self.min_ratio, judged) {
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
            window,
            no_window,
            probe,
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
    /// ratio, then its rate and share in the round's shared window, the window's length
    /// and fairness, at the end; the probe's flow has its latency under load as its
    /// t_typical; status `fail` for every flow of a round below
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
                    num(r
                        .probe
                        .as_ref()
                        .filter(|p| (p.from, p.to) == (l.from, l.to))
                        .and_then(|p| p.t_typical_usec)),
                    String::new(),
                    String::new(),
                    status.into(),
                    reason,
                    r.pattern.to_string(),
                    num(l.alone_mb_per_sec),
                    num(l.ratio),
                    num(l.window_mb_per_sec),
                    num(l.share),
                    num(r.window.as_ref().map(|w| w.length_ms)),
                    num(r.window.as_ref().and_then(|w| w.fairness)),
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
            "\n patterns, {} per flow (aggregate = each flow's average, summed; alone = the same links in the pairs' rounds; shared window = every flow's bytes between the last flow's start and the first one's stop):",
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

    /// The aggregate against the alone sum, a pair of bars per round (inline SVG), the
    /// aggregate over the round's shared window where it has one; its length, fairness
    /// and the latency under load beside; empty without patterns.
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
            .map(|r| r.at_once().max(r.total.alone_sum_mb_per_sec))
            .fold(0.0_f64, f64::max)
            .max(f64::MIN_POSITIVE);
        let h = 30 + self.results.len() * ROW;
        let mut o = format!(
            "<h2>Traffic patterns: aggregate at once against the same links alone [MB/sec]</h2>\n\
<svg id=\"patterns\" xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
<rect x=\"{LEFT}\" y=\"4\" width=\"12\" height=\"10\" fill=\"#1f77b4\"/><text x=\"{}\" y=\"13\">aggregate (at once)</text>\
<rect x=\"{}\" y=\"4\" width=\"12\" height=\"10\" fill=\"#bbbbbb\"/><text x=\"{}\" y=\"13\">sum alone</text>\n",
            LEFT + 16,
            LEFT + 150,
            LEFT + 166
        );
        for (i, r) in self.results.iter().enumerate() {
            let y = 24 + i * ROW;
            let bar = |v: f64| (v / top * WIDTH).max(0.0);
            let judged = r.window.as_ref().map_or(r.total.ratio, |w| w.ratio);
            let ratio = judged.map_or_else(|| "-".into(), |x| format!("{x:.2}"));
            let window = r.window.as_ref().map_or_else(
                || " (no shared window)".into(),
                |w| {
                    let fair =
                        w.fairness.map_or_else(String::new, |f| format!(", fairness {f:.2}"));
                    format!(" in a {:.1} ms window{fair}", w.length_ms)
                },
            );
            let probe = r.probe_words();
            let _ = writeln!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
<rect class=\"aggregate\" x=\"{LEFT}\" y=\"{y}\" width=\"{:.1}\" height=\"12\" fill=\"#1f77b4\"><title>{:.1}</title></rect>\
<rect class=\"alone\" x=\"{LEFT}\" y=\"{}\" width=\"{:.1}\" height=\"12\" fill=\"#bbbbbb\"><title>{:.1}</title></rect>\
<text x=\"{:.1}\" y=\"{}\">{:.1} / {:.1} = {ratio}{}{}</text>",
                LEFT - 6,
                y + 14,
                escape(&format!("{}. {}", r.round, r.name)),
                bar(r.at_once()),
                r.at_once(),
                y + 13,
                bar(r.total.alone_sum_mb_per_sec),
                r.total.alone_sum_mb_per_sec,
                LEFT as f64 + bar(r.at_once().max(r.total.alone_sum_mb_per_sec)) + 6.0,
                y + 14,
                r.at_once(),
                r.total.alone_sum_mb_per_sec,
                escape(&window),
                escape(&probe)
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

impl PatternResult {
    /// The round's flows at once, MB/s: over its shared window where it has one, else
    /// the sum of each flow's own average.
    pub fn at_once(&self) -> f64 {
        self.window.as_ref().map_or(self.total.aggregate_mb_per_sec, |w| w.aggregate_mb_per_sec)
    }

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
            "{}: {} link(s){failed}, aggregate {:.1} MB/s, alone {:.1} MB/s ({} link(s)): {ratio}; {}{}",
            self.name,
            t.links,
            t.aggregate_mb_per_sec,
            t.alone_sum_mb_per_sec,
            t.links_alone,
            self.window_words(),
            self.probe_words()
        )
    }

    /// `; latency under load 3.10 us (2 -> 0; alone 2.00 us: 1.55x)`, or nothing
    /// without a probe's figure.
    pub fn probe_words(&self) -> String {
        let Some(p) = self.probe.as_ref().filter(|p| p.t_typical_usec.is_some()) else {
            return String::new();
        };
        let alone = match (p.alone_usec, p.ratio) {
            (Some(a), Some(r)) => format!("; alone {a:.2} us: {r:.2}x"),
            _ => String::new(),
        };
        format!(
            "; latency under load {:.2} us ({} -> {}{alone})",
            p.t_typical_usec.unwrap_or_default(),
            p.from,
            p.to
        )
    }

    /// `shared window 41.2 ms: 2310.5 MB/s, 0.32 of alone, fairness 0.98`, or why
    /// there is none.
    pub fn window_words(&self) -> String {
        let Some(w) = &self.window else {
            return format!("no shared window: {}", self.no_window.as_deref().unwrap_or("-"));
        };
        let of_alone = w.ratio.map_or_else(String::new, |r| format!(", {r:.2} of alone"));
        let fair = w.fairness.map_or_else(String::new, |f| format!(", fairness {f:.2}"));
        format!(
            "shared window {:.1} ms: {:.1} MB/s{of_alone}{fair}",
            w.length_ms, w.aggregate_mb_per_sec
        )
    }
}

/// A figure in the mesh's CSV (the pairs' rows and the patterns'): three decimals,
/// empty when there is none.
pub(super) fn csv_number(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests;
