//! A mesh's report at rank 0: the matrices as text, JSON (docs/json.md#mesh), CSV (one
//! row per directed link) and an HTML page ([`super::html`]).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::analysis::{self, Analysis};
use super::findings::{self, Finding, Thresholds};
use super::pattern::{self, PatternRound};
use super::pattern_report::{csv_number, PatternsReport};
use super::ranks::{self, LinkResult, RankInfo};
use super::recheck::{self, Recheck};
use super::schedule::Pair;
use super::MeshSpec;
use crate::environment::Environment;
use crate::report::svg::size_label;
use crate::results::Verdict;
use crate::spec::{Link, Measure, RunLength, TestSpec};

/// Everything a mesh measured and found.
#[derive(Clone, Debug, Serialize)]
pub struct MeshReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// `mesh`.
    pub kind: &'static str,
    /// `rdmabench 0.1.0 (commit)`.
    pub tool: String,
    /// When rank 0 started the mesh, UTC.
    pub date: String,
    /// Every round ran, and every recheck (false in the file written after each round,
    /// and after an error).
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
    /// Each rank's host and device as its tests described them (null: none ran).
    pub environments: Vec<Option<Environment>>,
    /// Every directed link measured, in round order.
    pub links: Vec<LinkResult>,
    /// Matrices, bands, summaries per rank and per host.
    pub analysis: Analysis,
    /// The pairs measured again alone, worst first.
    pub rechecks: Vec<Recheck>,
    /// Rechecks that ended (a pair measured again up to three times is one).
    pub rechecks_done: usize,
    /// Their links, as measured alone (`round`: the recheck's, after the schedule's).
    pub reruns: Vec<LinkResult>,
    /// Suspects (confirmed or not) and failed tests.
    pub findings: Vec<Finding>,
    /// The traffic patterns (`--pattern`): each round at once against its links alone.
    pub patterns: PatternsReport,
    /// Pass, or the confirmed findings (and patterns below their floor) in a line each.
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
    // The bandwidth test's depth says how a link's round trip weighs on its figure.
    let depth = match &spec.link {
        Link::Rdma(r) if spec.kind.measure == Measure::Bw => format!(", tx depth {}", r.tx_depth),
        _ => String::new(),
    };
    format!("{}{size}, {run}{depth}", spec.id())
}

impl MeshReport {
    /// An empty report for `ranks`.
    pub fn new(mesh: &MeshSpec, ranks: &[RankInfo], seed: u64, rounds: usize) -> MeshReport {
        MeshReport {
            schema_version: crate::report::SCHEMA_VERSION,
            kind: "mesh",
            tool: crate::engine::tool(),
            date: crate::stamp::utc_now(),
            complete: false,
            bw_test: describe(&mesh.bw),
            lat_test: describe(&mesh.lat),
            pairs: mesh.pairs.describe(ranks.len()),
            seed,
            rounds,
            rounds_done: 0,
            thresholds: mesh.thresholds,
            ranks: ranks.to_vec(),
            environments: vec![None; ranks.len()],
            links: Vec::new(),
            analysis: analysis::analyse(ranks, &[], mesh.thresholds),
            rechecks: Vec::new(),
            rechecks_done: 0,
            reruns: Vec::new(),
            findings: Vec::new(),
            patterns: PatternsReport::new(
                &mesh.patterns,
                describe(&mesh.patterns.flow_test(&mesh.bw)),
                seed,
                pattern::plan(ranks.len(), &mesh.patterns, seed).len(),
            ),
            verdict: Verdict { pass: true, failures: Vec::new() },
            error: None,
        }
    }

    /// The lines printed before the first round.
    pub fn header(&self) -> String {
        let hosts = ranks::host_of(&self.ranks).0.len();
        let p = &self.patterns;
        let seed =
            if self.pairs.starts_with("random") || p.list.contains(&pattern::Pattern::Bisection) {
                format!(" (--seed {})", self.seed)
            } else {
                String::new()
            };
        let patterns = if p.list.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = p.list.iter().map(ToString::to_string).collect();
            format!(", then {}: {} pattern round(s)", list.join(", "), p.rounds)
        };
        let t = &self.thresholds;
        let w = t.widening();
        let times = recheck::times(t, self.ranks.len());
        let short = match t.iterations {
            Some(n) if w > 1.0 => format!(
                "\n a short run (-n {n}, under {}): the bands' floors widen {w:.1}x, to --outlier {:.0} % and --lat-floor {:.0} us; rechecks run {} iterations",
                findings::FULL_RUN,
                t.outlier_pct * w,
                t.lat_floor_usec * w,
                recheck::iterations(n, times)
            ),
            _ if times > 1 => format!(
                "\n rechecks alone run {times}x the first measurement's iterations (--recheck-length {times})"
            ),
            _ => String::new(),
        };
        format!(
            " rdmabench mesh: {} ranks on {hosts} host(s), pairs {}{seed}: {} round(s){patterns}\n bandwidth: {}; latency: {}{short}",
            self.ranks.len(),
            self.pairs,
            self.rounds,
            self.bw_test,
            self.lat_test
        )
    }

    /// A rank's environment, the first one heard of.
    pub fn add_environment(&mut self, rank: usize, env: Option<Environment>) {
        if let (Some(slot), Some(env)) = (self.environments.get_mut(rank), env) {
            slot.get_or_insert(env);
        }
    }

    /// A round's links are in: the analysis and the suspects are redone over all so far.
    pub fn add_round(&mut self, links: Vec<LinkResult>) {
        self.links.extend(links);
        self.links.sort_by_key(|l| (l.round, l.from, l.to));
        self.rounds_done += 1;
        self.analysis = analysis::analyse(&self.ranks, &self.links, self.thresholds);
        self.judge();
    }

    /// The pairs to measure again alone, after the last round.
    pub fn plan_rechecks(&mut self) -> Vec<Recheck> {
        self.rechecks = recheck::rechecks(&self.findings, self.thresholds);
        self.rechecks.clone()
    }

    /// A recheck's links (measured alone) are in.
    pub fn add_rerun(&mut self, links: Vec<LinkResult>) {
        self.reruns.extend(links);
        self.judge();
    }

    /// A pattern round's flows are in (its only: rank 0 checked); returns its line.
    pub fn add_pattern_round(&mut self, planned: &PatternRound, links: Vec<LinkResult>) -> String {
        let line = self.patterns.add(planned, &self.ranks, &self.analysis, &links);
        self.judge();
        line
    }

    /// Suspects from the analysis, confirmed by the reruns so far.
    fn judge(&mut self) {
        let t = self.thresholds;
        self.findings = findings::suspects(&self.ranks, &self.links, &self.analysis.bands, t);
        findings::confirm(&self.ranks, &mut self.findings, &self.reruns, t);
        self.analysis.count(&self.findings);
        let mut failures: Vec<String> =
            self.findings.iter().filter(|f| f.confirmed).map(|f| f.message.clone()).collect();
        failures.extend(self.patterns.failures());
        self.verdict = Verdict { pass: failures.is_empty() && self.error.is_none(), failures };
    }

    /// ` round 2/3: 0<->2 1<->3 (4.1 s)`; a recheck: ` recheck 1/2 (try 1): 0<->3 alone
    /// (1.2 s)`. `k`: the round's index among all.
    pub fn round_line(&self, name: &str, k: usize, round: &[Pair], took: Duration) -> String {
        let pairs: Vec<String> = round.iter().map(|p| format!("{}<->{}", p.0, p.1)).collect();
        let failed = self.links.iter().chain(&self.reruns);
        let failed = failed.filter(|l| l.round == k && l.error.is_some()).count();
        let failed = if failed > 0 { format!(", {failed} link(s) failed") } else { String::new() };
        let alone = if k < self.rounds { "" } else { " alone" };
        format!(" {name}: {}{alone} ({:.1} s{failed})", pairs.join(" "), took.as_secs_f64())
    }

    /// A finding on `pair` is confirmed so far: slow at its best alone.
    pub fn slow_alone(&self, pair: Pair) -> bool {
        recheck::slow_alone(&self.findings, pair)
    }

    /// Every round and recheck ran.
    pub fn finish(&mut self) {
        self.complete = self.rounds_done == self.rounds
            && self.rechecks_done == self.rechecks.len()
            && self.patterns.done();
    }

    /// What stopped the mesh.
    pub fn stopped(&mut self, error: &str) {
        self.complete = false;
        self.error = Some(error.to_string());
        self.verdict.pass = false;
    }

    /// 0: no confirmed finding; 1: a link confirmed slow; 2: a test failed or the mesh
    /// stopped.
    pub fn exit_code(&self) -> u8 {
        if self.error.is_some()
            || !self.complete
            || self.findings.iter().any(|f| f.check == "error")
            || self.patterns.failed_flows()
        {
            2
        } else if self.findings.iter().any(|f| f.confirmed) || !self.verdict.failures.is_empty() {
            1
        } else {
            0
        }
    }

    /// The matrices, the per-node and per-host summaries and the findings.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let a = &self.analysis;
        let ranks: Vec<String> = (0..self.ranks.len()).map(|r| r.to_string()).collect();
        matrix(
            &mut o,
            &format!("BW average [MB/sec] ({}), row: from (client), column: to", self.bw_test),
            &ranks,
            &a.bw,
        );
        matrix(
            &mut o,
            &format!("t_typical [usec] ({}), row: client, column: server", self.lat_test),
            &ranks,
            &a.lat,
        );
        let s3 = |s: Option<analysis::Spread>| {
            s.map_or_else(|| "-".into(), |s| format!("{:.2}/{:.2}/{:.2}", s.min, s.median, s.max))
        };
        let _ = writeln!(
            o,
            "\n {:<5} {:<16} {:<8} {:>28} {:>28}",
            "rank", "host", "device", "BW out min/median/max", "BW in min/median/max"
        );
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
        if a.hosts.len() > 1 {
            let names: Vec<String> = (0..a.hosts.len()).map(|h| format!("h{h}")).collect();
            let _ = writeln!(
                o,
                "\n {:<4} {:<16} {:<8} {:<10} {:>24} {:>24} {:>24} {:>8}",
                "",
                "host",
                "device",
                "ranks",
                "BW out (other hosts)",
                "BW in (other hosts)",
                "t_typical (usec)",
                "findings"
            );
            for (i, h) in a.hosts.iter().enumerate() {
                let ranks: Vec<String> = h.ranks.iter().map(ToString::to_string).collect();
                let _ = writeln!(
                    o,
                    " {:<4} {:<16} {:<8} {:<10} {:>24} {:>24} {:>24} {:>8}",
                    names[i],
                    h.host,
                    h.device,
                    ranks.join(","),
                    s3(h.bw_out),
                    s3(h.bw_in),
                    s3(h.lat),
                    h.findings
                );
            }
            matrix(&mut o, "host to host: median BW [MB/sec]", &names, &a.host_bw);
            matrix(&mut o, "host to host: median t_typical [usec]", &names, &a.host_lat);
        }
        let _ = writeln!(
            o,
            "\n {} of {} directed links measured",
            a.measured_links,
            self.ranks.len() * self.ranks.len().saturating_sub(1)
        );
        let b = &a.bands;
        for band in [b.bw_inter, b.bw_intra, b.lat_inter, b.lat_intra].into_iter().flatten() {
            let _ = writeln!(o, " {}", band_line(&band));
        }
        for f in &self.findings {
            let word = if f.confirmed { "FAIL" } else { "not confirmed" };
            let _ = writeln!(o, " {word} {}", f.message);
        }
        o.push_str(&self.patterns.text());
        if let Some(e) = &self.error {
            let _ = writeln!(o, " ERROR {e}");
        }
        o
    }

    /// One row per directed link of the schedule, then one per flow of each pattern
    /// round (`pattern` says which; rounds counted from 1 in each).
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
            "rerun_bw_mb_per_sec",
            "rerun_t_typical_usec",
            "status",
            "reason",
            "pattern",
            "alone_mb_per_sec",
            "ratio",
            "window_mb_per_sec",
            "share",
            "window_ms",
            "fairness",
        ])?;
        let num = csv_number;
        for l in &self.links {
            let (Some(from), Some(to)) = (self.ranks.get(l.from), self.ranks.get(l.to)) else {
                continue;
            };
            let found: Vec<&Finding> =
                self.findings.iter().filter(|f| f.from == l.from && f.to == l.to).collect();
            let rerun = self.reruns.iter().rev().find(|r| r.from == l.from && r.to == l.to);
            let status = if found.iter().any(|f| f.confirmed) {
                "fail"
            } else if found.is_empty() {
                "pass"
            } else {
                "not confirmed"
            };
            w.write_record([
                l.from.to_string(),
                from.host.clone(),
                from.device.clone(),
                l.to.to_string(),
                to.host.clone(),
                to.device.clone(),
                (l.round + 1).to_string(),
                num(l.bw_mb_per_sec),
                num(l.t_typical_usec),
                num(rerun.and_then(|r| r.bw_mb_per_sec)),
                num(rerun.and_then(|r| r.t_typical_usec)),
                status.into(),
                found.iter().map(|f| f.message.as_str()).collect::<Vec<_>>().join("; "),
                "pairs".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ])?;
        }
        self.patterns.csv_rows(&self.ranks, &mut w)?;
        let bytes = w.into_inner().map_err(|e| csv::Error::from(e.into_error()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

fn matrix(o: &mut String, title: &str, names: &[String], m: &[Vec<Option<f64>>]) {
    let _ = writeln!(o, "\n {title}");
    let _ = write!(o, " {:>6}", "");
    for name in names.iter().take(m.len()) {
        let _ = write!(o, " {name:>10}");
    }
    let _ = writeln!(o);
    for (row, name) in m.iter().zip(names) {
        let _ = write!(o, " {name:>6}");
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

/// Where a band puts its limit. A bandwidth band whose peers spread so widely that its
/// limit reaches zero judges no link: say so, rather than print a negative limit.
fn band_line(band: &findings::Band) -> String {
    let bw = band.metric == "bw";
    let head = format!(
        "{} links {} hosts ({}): typical {}",
        if bw { "BW of" } else { "t_typical of" },
        if band.peers == "inter" { "between" } else { "within" },
        band.links,
        findings::figure(band.centre, bw),
    );
    if band.limit > 0.0 {
        let side = if bw { "below" } else { "above" };
        format!("{head}, suspect {side} {}", findings::figure(band.limit, bw))
    } else {
        let spread = findings::figure(band.mad, bw);
        format!("{head}, too wide to judge (its peers spread {spread}; measure longer: -n, -D)")
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A mesh of three ranks on three hosts; with `slow`, 2 → 0 writes at a tenth and
    /// (with `rerun`) again alone at `rerun` MB/s.
    pub fn report(slow: bool, rerun: Option<f64>) -> MeshReport {
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
            thresholds: Thresholds::default(),
            patterns: super::super::pattern::PatternSpec::default(),
        };
        let mut r = MeshReport::new(&mesh, &ranks, 7, 3);
        let link = |from, to, round, bw| LinkResult {
            from,
            to,
            round,
            bw_mb_per_sec: Some(bw),
            t_typical_usec: Some(5.0),
            error: None,
            span: None,
        };
        let mut links = Vec::new();
        for from in 0..3 {
            for to in (0..3).filter(|&t| t != from) {
                links.push(link(
                    from,
                    to,
                    0,
                    if slow && from == 2 && to == 0 { 10.0 } else { 100.0 },
                ));
            }
        }
        r.add_round(links);
        r.rounds_done = 3;
        if rerun.is_none() {
            r.thresholds.recheck_max = 0;
        }
        let plan = r.plan_rechecks();
        if let Some(v) = rerun {
            assert_eq!(plan, [Recheck { pair: Pair(0, 2), bw: true, lat: false }]);
            r.add_rerun(vec![link(0, 2, 3, 100.0), link(2, 0, 3, v)]);
            r.rechecks_done += 1;
        }
        r.finish();
        r
    }

    #[test]
    fn exit_codes_follow_the_confirmed_findings_and_errors() {
        assert_eq!(report(false, None).exit_code(), 0);
        assert_eq!(report(true, None).exit_code(), 0, "a suspect not measured again (--recheck 0)");
        assert_eq!(report(true, Some(95.0)).exit_code(), 0, "fine alone");
        assert_eq!(report(true, Some(12.0)).exit_code(), 1, "slow again alone");
        let mut r = report(false, None);
        r.stopped("round 2/3 did not end");
        assert_eq!(r.exit_code(), 2);
        assert!(r.text().contains("ERROR round 2/3 did not end"));
    }

    #[test]
    fn a_band_too_wide_for_a_limit_says_so() {
        let (bw, lat) = (true, false);
        let links = [6.0, 3.0, 0.3, 0.2, 0.2, 0.1].to_vec();
        let wide = findings::band("bw", "inter", links, Thresholds::default()).unwrap();
        assert!(wide.limit <= 0.0, "{wide:?}");
        assert_eq!(
            band_line(&wide),
            format!(
                "BW of links between hosts (6): typical {}, too wide to judge (its peers spread {}; measure longer: -n, -D)",
                findings::figure(wide.centre, bw),
                findings::figure(wide.mad, bw)
            )
        );
        let tight =
            findings::band("bw", "intra", vec![100.0, 99.0, 101.0], Thresholds::default()).unwrap();
        assert!(band_line(&tight)
            .starts_with("BW of links within hosts (3): typical 100 MB/s, suspect below "));
        let l = findings::band("lat", "inter", vec![5.0, 5.2, 4.9], Thresholds::default()).unwrap();
        let limit = findings::figure(l.limit, lat);
        assert_eq!(
            band_line(&l),
            format!("t_typical of links between hosts (3): typical 5.0 µs, suspect above {limit}")
        );
    }

    #[test]
    fn text_and_csv_show_every_link_and_each_finding_with_its_rerun() {
        let r = report(true, Some(12.0));
        let text = r.text();
        assert!(text.contains("BW average [MB/sec]"), "{text}");
        assert!(text.contains("6 of 6 directed links measured"), "{text}");
        assert!(
            text.contains("FAIL rank 2 (h2 rxe0) → rank 0 (h0 rxe0): BW 10 MB/s vs 100 MB/s for its peers, 10× slower; confirmed alone: 12 MB/s"),
            "{text}"
        );
        assert!(text.contains(" h2   h2 "), "a row per host: {text}");
        let r = report(true, Some(95.0));
        assert!(r.text().contains("not confirmed rank 2 (h2 rxe0) → rank 0"), "{}", r.text());
        let csv = r.csv().unwrap();
        let mut rows = csv::Reader::from_reader(csv.as_bytes());
        let rows: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 6);
        assert!(rows.iter().all(|r| &r[6] == "1"), "rounds counted from 1");
        assert!(rows.iter().all(|r| &r[13] == "pairs" && r[14].is_empty()), "no patterns");
        let flagged: Vec<_> = rows.iter().filter(|r| &r[11] != "pass").collect();
        assert_eq!(flagged.len(), 1);
        assert_eq!(
            (&flagged[0][0], &flagged[0][3], &flagged[0][7], &flagged[0][9], &flagged[0][11]),
            ("2", "0", "10.000", "95.000", "not confirmed")
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["kind"], "mesh");
        assert_eq!(json["analysis"]["bw"][2][0], 10.0);
        assert_eq!(json["analysis"]["bw"][0][0], serde_json::Value::Null);
        let f = &json["findings"][0];
        assert_eq!((f["from"].as_u64(), f["from_host"].as_str()), (Some(2), Some("h2")));
        assert_eq!((f["to"].as_u64(), f["to_host"].as_str()), (Some(0), Some("h0")));
        assert_eq!((f["figure"].as_f64(), f["rerun"].as_f64()), (Some(10.0), Some(95.0)));
        assert_eq!(f["confirmed"], false);
        assert_eq!(f["band"]["centre"], 100.0);
        assert!(f["band"]["limit"].as_f64().unwrap() < 100.0);
        assert_eq!(json["analysis"]["hosts"].as_array().unwrap().len(), 3);
    }
}
