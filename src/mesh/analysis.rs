//! What a mesh measured: each directed link's figures in N×N matrices, a summary per
//! rank and per host (a host name and device: one NIC, so a bad NIC is one row and one
//! column of the host matrices), and the bands links are judged in ([`super::findings`]).

use serde::Serialize;

use super::findings::{Bands, Finding, Thresholds};
use super::ranks::{host_of, LinkResult, RankInfo};

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
    /// Confirmed findings on links it is an end of.
    pub findings: usize,
}

/// One host (a host name and device: one NIC) and its ranks' links to other hosts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostSummary {
    /// Host name.
    pub host: String,
    /// Device.
    pub device: String,
    /// Its ranks.
    pub ranks: Vec<usize>,
    /// BW of the links its ranks wrote to other hosts on, MB/s.
    pub bw_out: Option<Spread>,
    /// BW of the links other hosts wrote to it on, MB/s.
    pub bw_in: Option<Spread>,
    /// t_typical of the links to and from other hosts, µs.
    pub lat: Option<Spread>,
    /// Confirmed findings on links it is an end of.
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
    /// Where each kind of link's figures are expected (src/mesh/findings.rs).
    pub bands: Bands,
    /// Per node (rank).
    pub nodes: Vec<NodeSummary>,
    /// Per host (name and device), in order of their first rank.
    pub hosts: Vec<HostSummary>,
    /// `host_bw[i][j]`: the median BW from host i's ranks to host j's, MB/s.
    pub host_bw: Vec<Vec<Option<f64>>>,
    /// `host_lat[i][j]`: the median t_typical, µs.
    pub host_lat: Vec<Vec<Option<f64>>>,
}

impl Analysis {
    /// Counts `findings` (the confirmed ones) against each node and host.
    pub fn count(&mut self, findings: &[Finding]) {
        let confirmed: Vec<&Finding> = findings.iter().filter(|f| f.confirmed).collect();
        for n in &mut self.nodes {
            n.findings = confirmed.iter().filter(|f| f.from == n.rank || f.to == n.rank).count();
        }
        for h in &mut self.hosts {
            h.findings = confirmed
                .iter()
                .filter(|f| h.ranks.contains(&f.from) || h.ranks.contains(&f.to))
                .count();
        }
    }
}

/// Builds the matrices, bands and summaries for `ranks` from `links`.
pub fn analyse(ranks: &[RankInfo], links: &[LinkResult], t: Thresholds) -> Analysis {
    let n = ranks.len();
    let links: Vec<&LinkResult> = links.iter().filter(|l| l.from < n && l.to < n).collect();
    let mut bw = vec![vec![None; n]; n];
    let mut lat = vec![vec![None; n]; n];
    for l in &links {
        bw[l.from][l.to] = l.bw_mb_per_sec;
        lat[l.from][l.to] = l.t_typical_usec;
    }
    let measured_links = links.iter().filter(|l| l.bw_mb_per_sec.is_some()).count();
    let figures = |keep: &dyn Fn(&LinkResult) -> bool, bw: bool| -> Vec<f64> {
        links
            .iter()
            .filter(|l| keep(l))
            .filter_map(|l| if bw { l.bw_mb_per_sec } else { l.t_typical_usec })
            .collect()
    };
    let owned: Vec<LinkResult> = links.iter().map(|l| (*l).clone()).collect();
    let nodes = ranks
        .iter()
        .map(|r| NodeSummary {
            rank: r.rank,
            host: r.host.clone(),
            device: r.device.clone(),
            bw_out: spread(figures(&|l| l.from == r.rank, true)),
            bw_in: spread(figures(&|l| l.to == r.rank, true)),
            lat_out: spread(figures(&|l| l.from == r.rank, false)),
            findings: 0,
        })
        .collect();
    let (names, index) = host_of(ranks);
    let h = names.len();
    let on = |host: usize, rank: usize| index.get(rank) == Some(&host);
    let hosts = names
        .iter()
        .enumerate()
        .map(|(i, (host, device))| HostSummary {
            host: host.clone(),
            device: device.clone(),
            ranks: (0..n).filter(|&r| index[r] == i).collect(),
            bw_out: spread(figures(&|l| on(i, l.from) && !on(i, l.to), true)),
            bw_in: spread(figures(&|l| on(i, l.to) && !on(i, l.from), true)),
            lat: spread(figures(&|l| on(i, l.from) != on(i, l.to), false)),
            findings: 0,
        })
        .collect();
    let host_matrix = |bw: bool| -> Vec<Vec<Option<f64>>> {
        (0..h)
            .map(|i| {
                (0..h)
                    .map(|j| {
                        spread(figures(&|l| on(i, l.from) && on(j, l.to), bw)).map(|s| s.median)
                    })
                    .collect()
            })
            .collect()
    };
    Analysis {
        bw,
        lat,
        measured_links,
        bw_spread: spread(figures(&|_| true, true)),
        lat_spread: spread(figures(&|_| true, false)),
        bands: Bands::of(ranks, &owned, t),
        nodes,
        hosts,
        host_bw: host_matrix(true),
        host_lat: host_matrix(false),
    }
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

    /// Every directed link of 4 ranks (two per host) at 100 MB/s and 10 µs, but 1 -> 2.
    fn mesh(slow_bw: f64, slow_lat: f64) -> Vec<LinkResult> {
        let mut links = Vec::new();
        for from in 0..4 {
            for to in (0..4).filter(|&t| t != from) {
                let (bw, lat) =
                    if (from, to) == (1, 2) { (slow_bw, slow_lat) } else { (100.0, 10.0) };
                links.push(LinkResult {
                    from,
                    to,
                    round: 0,
                    bw_mb_per_sec: Some(bw),
                    t_typical_usec: Some(lat),
                    error: None,
                    span: None,
                });
            }
        }
        links
    }

    #[test]
    fn matrices_hold_each_directed_link_and_the_diagonal_stays_empty() {
        let a = analyse(&ranks(4), &mesh(50.0, 10.0), Thresholds::default());
        assert_eq!(a.measured_links, 12);
        assert_eq!(a.bw[1][2], Some(50.0));
        assert_eq!(a.bw[2][1], Some(100.0));
        assert!((0..4).all(|i| a.bw[i][i].is_none() && a.lat[i][i].is_none()));
        let s = a.bw_spread.unwrap();
        assert_eq!((s.min, s.median, s.max), (50.0, 100.0, 100.0));
        assert_eq!(a.nodes[1].bw_out.unwrap().min, 50.0);
        assert_eq!(a.nodes[2].bw_in.unwrap().min, 50.0);
    }

    #[test]
    fn ranks_are_grouped_by_host_and_device() {
        let a = analyse(&ranks(4), &mesh(20.0, 10.0), Thresholds::default());
        let hosts: Vec<_> = a.hosts.iter().map(|h| (h.host.as_str(), h.ranks.clone())).collect();
        assert_eq!(hosts, [("node1", vec![0, 1]), ("node2", vec![2, 3])]);
        // node1 → node2: links 0→2, 0→3, 1→2 (20), 1→3; the median of the four.
        assert_eq!(a.host_bw[0][1], Some(100.0));
        assert_eq!(a.host_bw[0][0], Some(100.0), "within node1: 0→1 and 1→0");
        assert_eq!(a.hosts[0].bw_out.unwrap().min, 20.0, "only links to other hosts");
        assert_eq!(a.hosts[1].bw_in.unwrap().min, 20.0);
        let mut other = ranks(4);
        other[3].device = "rxe1".into();
        let (names, index) = host_of(&other);
        assert_eq!(names.len(), 3, "another device is another NIC");
        assert_eq!(index, [0, 0, 1, 2]);
    }

    #[test]
    fn spread_takes_the_middle() {
        assert_eq!(spread(vec![]), None);
        assert_eq!(spread(vec![3.0, 1.0, 2.0]).unwrap().median, 2.0);
        assert_eq!(spread(vec![4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(spread(vec![f64::NAN, 1.0]).unwrap().max, 1.0);
    }
}
