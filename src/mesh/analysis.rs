//! What a mesh found: each directed link's figures in N×N matrices, a summary per node,
//! and the links that fail a threshold — below `--min-bw`, or slower than the median
//! link by more than `--outlier` percent: a byte (bandwidth) or a message (latency)
//! takes more than 1 + PCT/100 times as long as on the median link.

use serde::{Deserialize, Serialize};

/// One rank as the others reach it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankInfo {
    /// MPI rank.
    pub rank: usize,
    /// Host name (MPI's processor name).
    pub host: String,
    /// Where its control listener is.
    pub address: String,
    /// Its control listener's port.
    pub port: u16,
    /// The device its tests use (`tcp` for `--tcp`).
    pub device: String,
}

impl RankInfo {
    /// `rank 2 (node2 rxe0)`.
    pub fn name(&self) -> String {
        format!("rank {} ({} {})", self.rank, self.host, self.device)
    }
}

/// One directed link's figures: `from` was the client (the writer, the pinger).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkResult {
    /// The client's rank.
    pub from: usize,
    /// The server's rank.
    pub to: usize,
    /// The round it was measured in (0-based).
    pub round: usize,
    /// Bandwidth test: BW average, MB/s (2^20 bytes, perftest's MB).
    pub bw_mb_per_sec: Option<f64>,
    /// Latency test: t_typical (the median), µs.
    pub t_typical_usec: Option<f64>,
    /// Why a test of this link failed, if one did.
    pub error: Option<String>,
}

/// The thresholds a link is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// `--min-bw`, MB/s.
    pub min_bw: Option<f64>,
    /// `--outlier`: percent slower than the median link (time per byte or per message).
    pub outlier_pct: f64,
}

/// A link that fails a threshold or whose test failed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Client rank.
    pub from: usize,
    /// Server rank.
    pub to: usize,
    /// `min_bw`, `bw_outlier`, `latency_outlier` or `error`.
    pub check: &'static str,
    /// One line naming both ends and the figure.
    pub message: String,
}

/// Figures over a set of links.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Lowest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// Highest.
    pub max: f64,
}

/// One node (rank): its links out (as client) and in (as server).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeSummary {
    /// The rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// Its device.
    pub device: String,
    /// BW of the links it wrote on, MB/s.
    pub bw_out: Option<Spread>,
    /// BW of the links written to it, MB/s.
    pub bw_in: Option<Spread>,
    /// t_typical of the links it pinged on, µs.
    pub lat_out: Option<Spread>,
    /// Findings on links it is an end of.
    pub findings: usize,
}

/// The analysis of a mesh.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analysis {
    /// `bw[from][to]`, MB/s (None: not measured, or failed).
    pub bw: Vec<Vec<Option<f64>>>,
    /// `lat[from][to]`, t_typical µs.
    pub lat: Vec<Vec<Option<f64>>>,
    /// Directed links with a figure.
    pub measured_links: usize,
    /// BW over every link.
    pub bw_spread: Option<Spread>,
    /// t_typical over every link.
    pub lat_spread: Option<Spread>,
    /// Per node.
    pub nodes: Vec<NodeSummary>,
    /// Links that fail a threshold, and links whose test failed.
    pub findings: Vec<Finding>,
}

impl Analysis {
    /// Some link's test failed.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.check == "error")
    }
}

/// Builds the matrices, summaries and findings for `ranks` from `links`.
pub fn analyse(ranks: &[RankInfo], links: &[LinkResult], t: Thresholds) -> Analysis {
    let n = ranks.len();
    let mut bw = vec![vec![None; n]; n];
    let mut lat = vec![vec![None; n]; n];
    for l in links.iter().filter(|l| l.from < n && l.to < n) {
        bw[l.from][l.to] = l.bw_mb_per_sec;
        lat[l.from][l.to] = l.t_typical_usec;
    }
    let measured_links = links.iter().filter(|l| l.bw_mb_per_sec.is_some()).count();
    let all_bw: Vec<f64> = links.iter().filter_map(|l| l.bw_mb_per_sec).collect();
    let all_lat: Vec<f64> = links.iter().filter_map(|l| l.t_typical_usec).collect();
    let bw_spread = spread(all_bw);
    let lat_spread = spread(all_lat);
    let findings = judge(ranks, links, t, bw_spread, lat_spread);
    let nodes = ranks
        .iter()
        .map(|r| NodeSummary {
            rank: r.rank,
            host: r.host.clone(),
            device: r.device.clone(),
            bw_out: spread(
                links.iter().filter(|l| l.from == r.rank).filter_map(|l| l.bw_mb_per_sec).collect(),
            ),
            bw_in: spread(
                links.iter().filter(|l| l.to == r.rank).filter_map(|l| l.bw_mb_per_sec).collect(),
            ),
            lat_out: spread(
                links
                    .iter()
                    .filter(|l| l.from == r.rank)
                    .filter_map(|l| l.t_typical_usec)
                    .collect(),
            ),
            findings: findings.iter().filter(|f| f.from == r.rank || f.to == r.rank).count(),
        })
        .collect();
    Analysis { bw, lat, measured_links, bw_spread, lat_spread, nodes, findings }
}

fn judge(
    ranks: &[RankInfo],
    links: &[LinkResult],
    t: Thresholds,
    bw: Option<Spread>,
    lat: Option<Spread>,
) -> Vec<Finding> {
    let name = |rank: usize| ranks.get(rank).map_or_else(|| format!("rank {rank}"), RankInfo::name);
    let mut findings = Vec::new();
    for l in links {
        let link = format!("{} -> {}", name(l.from), name(l.to));
        let mut find = |check, message: String| {
            findings.push(Finding { from: l.from, to: l.to, check, message });
        };
        if let Some(e) = &l.error {
            find("error", format!("{link}: {e}"));
        }
        if let (Some(v), Some(min)) = (l.bw_mb_per_sec, t.min_bw) {
            if v < min {
                find("min_bw", format!("{link}: BW {v:.2} MB/s is below --min-bw {min:.2}"));
            }
        }
        // Slower by PCT %: a byte (bandwidth) or a message (latency) takes more than
        // 1 + PCT/100 times as long as on the median link.
        let slower = 1.0 + t.outlier_pct / 100.0;
        if let (Some(v), Some(s)) = (l.bw_mb_per_sec, bw) {
            if v * slower < s.median {
                let by = 100.0 * (s.median / v - 1.0);
                find(
                    "bw_outlier",
                    format!(
                        "{link}: BW {v:.2} MB/s is {by:.0} % slower than the median link's {:.2} (--outlier {})",
                        s.median, t.outlier_pct
                    ),
                );
            }
        }
        if let (Some(v), Some(s)) = (l.t_typical_usec, lat) {
            if v > s.median * slower {
                let by = 100.0 * (v / s.median - 1.0);
                find(
                    "latency_outlier",
                    format!(
                        "{link}: t_typical {v:.2} usec is {by:.0} % slower than the median link's {:.2} (--outlier {})",
                        s.median, t.outlier_pct
                    ),
                );
            }
        }
    }
    findings
}

/// Min, median (the mean of the middle two for an even count) and max; None when empty.
pub fn spread(mut values: Vec<f64>) -> Option<Spread> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
    Some(Spread { min: values[0], median, max: values[n - 1] })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranks(n: usize) -> Vec<RankInfo> {
        (0..n)
            .map(|rank| RankInfo {
                rank,
                host: format!("node{}", rank / 2 + 1),
                address: "127.0.0.1".into(),
                port: 1000 + rank as u16,
                device: "rxe0".into(),
            })
            .collect()
    }

    fn link(from: usize, to: usize, bw: f64, lat: f64) -> LinkResult {
        LinkResult {
            from,
            to,
            round: 0,
            bw_mb_per_sec: Some(bw),
            t_typical_usec: Some(lat),
            error: None,
        }
    }

    /// Every directed link of 4 ranks at 100 MB/s and 10 µs, but 1 -> 2 as given.
    fn mesh(slow_bw: f64, slow_lat: f64) -> Vec<LinkResult> {
        let mut links = Vec::new();
        for from in 0..4 {
            for to in (0..4).filter(|&t| t != from) {
                let (bw, lat) =
                    if (from, to) == (1, 2) { (slow_bw, slow_lat) } else { (100.0, 10.0) };
                links.push(link(from, to, bw, lat));
            }
        }
        links
    }

    const T: Thresholds = Thresholds { min_bw: None, outlier_pct: 25.0 };

    #[test]
    fn matrices_hold_each_directed_link_and_the_diagonal_stays_empty() {
        let a = analyse(&ranks(4), &mesh(50.0, 10.0), T);
        assert_eq!(a.measured_links, 12);
        assert_eq!(a.bw[1][2], Some(50.0));
        assert_eq!(a.bw[2][1], Some(100.0));
        assert!((0..4).all(|i| a.bw[i][i].is_none() && a.lat[i][i].is_none()));
        let s = a.bw_spread.unwrap();
        assert_eq!((s.min, s.median, s.max), (50.0, 100.0, 100.0));
        assert_eq!(a.nodes[1].bw_out.unwrap().min, 50.0);
        assert_eq!(a.nodes[2].bw_in.unwrap().min, 50.0);
        assert_eq!(a.nodes[0].findings, 0);
        assert_eq!(a.nodes[1].findings, 1);
    }

    #[test]
    fn a_slow_link_is_named_with_both_ends_and_a_fast_mesh_has_no_finding() {
        assert!(analyse(&ranks(4), &mesh(100.0, 10.0), T).findings.is_empty());
        assert!(analyse(&ranks(4), &mesh(80.5, 12.4), T).findings.is_empty(), "within 25 %");
        let a = analyse(&ranks(4), &mesh(50.0, 10.0), T);
        assert_eq!(a.findings.len(), 1);
        let f = &a.findings[0];
        assert_eq!((f.from, f.to, f.check), (1, 2, "bw_outlier"));
        assert!(f.message.contains("rank 1 (node1 rxe0) -> rank 2 (node2 rxe0)"), "{}", f.message);
        assert!(
            f.message.contains("BW 50.00 MB/s is 100 % slower than the median link's 100.00"),
            "{}",
            f.message
        );
        let a = analyse(&ranks(4), &mesh(100.0, 30.0), T);
        assert_eq!(a.findings[0].check, "latency_outlier");
        assert!(a.findings[0].message.contains("t_typical 30.00 usec is 200 % slower"));
        // Past a hundred percent: a link ten times slower, against --outlier 500.
        let t = Thresholds { min_bw: None, outlier_pct: 500.0 };
        let a = analyse(&ranks(4), &mesh(10.0, 100.0), t);
        let checks: Vec<_> = a.findings.iter().map(|f| f.check).collect();
        assert_eq!(checks, ["bw_outlier", "latency_outlier"]);
        assert!(
            analyse(&ranks(4), &mesh(20.0, 50.0), t).findings.is_empty(),
            "five times is within 500 %"
        );
    }

    #[test]
    fn min_bw_and_failed_tests_are_findings() {
        let t = Thresholds { min_bw: Some(120.0), outlier_pct: 25.0 };
        let a = analyse(&ranks(4), &mesh(100.0, 10.0), t);
        assert_eq!(a.findings.len(), 12);
        assert!(a
            .findings
            .iter()
            .all(|f| f.check == "min_bw" && f.message.contains("below --min-bw 120.00")));
        assert!(!a.has_errors());
        let mut links = mesh(100.0, 10.0);
        links[0] = LinkResult {
            bw_mb_per_sec: None,
            t_typical_usec: None,
            error: Some("the peer closed the control connection".into()),
            ..links[0].clone()
        };
        let a = analyse(&ranks(4), &links, T);
        assert!(a.has_errors());
        assert_eq!(a.measured_links, 11);
        assert!(a.findings[0].message.ends_with("the peer closed the control connection"));
    }

    #[test]
    fn spread_takes_the_middle() {
        assert_eq!(spread(vec![]), None);
        assert_eq!(spread(vec![3.0, 1.0, 2.0]).unwrap().median, 2.0);
        assert_eq!(spread(vec![4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(spread(vec![f64::NAN, 1.0]).unwrap().max, 1.0);
    }
}
