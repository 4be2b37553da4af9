//! A job's hosts judged against each other (under mpirun or srun): pure functions of
//! the hosts' records and the ring's links, so jobs of 2, 3 or 1,000 modelled hosts are
//! judged exactly as real ones.
//!
//! - **Homogeneity** (`CONFIG_UNLIKE`): per adapter model, each host's firmware, driver
//!   (kernel module and rdma-core), link layer, link rate and active MTU, and every host's kernel, against the value a
//!   strict majority of the hosts hold; where no value has a majority, every host is
//!   named (the job is not alike, and nothing says which is right).
//! - **Peer-relative floors** (`BELOW_MEDIAN`): a port's loopback bandwidth below
//!   `fraction` of the median of the other ports of the same model and rate (and, from
//!   [`HOST_BAND_MAD_HOSTS`] others on, below their median by more than [`MADS`]
//!   MADs too, as mesh's host band): never with fewer than [`HOST_BAND_MIN_HOSTS`] ports.
//! - **Neighbours** (`NEIGHBOUR_LOW`): each host meets the next in a ring, both ways; a
//!   pair's figure is its slower direction. A host whose two ring pairs are both below
//!   `fraction` of the median of the other pairs (bandwidth), or past `--lat-ratio` times
//!   it *and* more than `--lat-floor` µs above it (latency, the mesh's two), is named: a slow
//!   cable or NIC shows as the two slow pairs that share its host. The floor is there
//!   because a job of 3 has one other pair, whose latency is the whole centre: emulated
//!   hosts' timer-tick latencies (112 µs and 4–5 ms in one healthy lab run) are farther
//!   apart than any ratio can allow, and only an absolute gap tells them from a delay.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::codes::{Code, Finding};
use super::HostHealth;
use crate::mesh::findings::{median, HOST_BAND_MAD_HOSTS, HOST_BAND_MIN_HOSTS, MADS};

/// One ring pair's result: host `a` and the next host `b`, each direction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RingPair {
    /// The host that led the pair (index into the job's hosts).
    pub a: usize,
    /// The next host in the ring.
    pub b: usize,
    /// write_bw a→b and b→a, Gb/s.
    pub bw_gbps: [Option<f64>; 2],
    /// write_lat a→b and b→a, typical µs.
    pub lat_us: [Option<f64>; 2],
    /// Why the pair did not run or finish.
    pub error: Option<String>,
}

impl RingPair {
    /// The slower direction's bandwidth.
    fn bw(&self) -> Option<f64> {
        let [x, y] = self.bw_gbps;
        Some(x?.min(y?))
    }

    /// The slower direction's latency.
    fn lat(&self) -> Option<f64> {
        let [x, y] = self.lat_us;
        Some(x?.max(y?))
    }

    /// What the pair, run without error, still did not measure (`None`: everything).
    fn unmeasured(&self, names: &[String]) -> Option<String> {
        let name = |i: usize| names.get(i).map_or("?", String::as_str);
        let (a, b) = (name(self.a), name(self.b));
        let mut missing: Vec<String> = [(a, b), (b, a)]
            .iter()
            .zip(self.bw_gbps)
            .filter(|(_, bw)| bw.is_none())
            .map(|((from, to), _)| format!("write_bw {from} to {to} moved no byte"))
            .collect();
        if self.lat().is_none() {
            missing.push("write_lat measured nothing".into());
        }
        (!missing.is_empty()).then(|| missing.join("; "))
    }
}

/// The pairs of a ring of `n` hosts (each host and the next), in rounds of disjoint
/// pairs: 2 rounds for an even `n`, 3 for an odd one, whatever `n` — and 1 for 2 hosts
/// (one pair), none for 1.
pub fn ring_rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    match n {
        0 | 1 => Vec::new(),
        2 => vec![vec![(0, 1)]],
        _ => {
            let edge = |i: usize| (i, (i + 1) % n);
            let even: Vec<_> = (0..n - n % 2).step_by(2).map(edge).collect();
            let odd: Vec<_> = (1..n - n % 2).step_by(2).map(edge).collect();
            let mut rounds = vec![even, odd];
            if n % 2 == 1 {
                rounds.push(vec![edge(n - 1)]);
            }
            rounds
        }
    }
}

/// How far from its peers a figure must be to be named.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeerRule {
    /// `--peer-fraction`: below this share of the peers' median bandwidth.
    pub fraction: f64,
    /// `--lat-ratio`: a ring pair's latency is slow past this many times the median…
    pub lat_ratio: f64,
    /// `--lat-floor`: …and this many µs above it.
    pub lat_floor_us: f64,
}

/// Every job-level finding, each with the host it belongs to (index into `hosts`).
pub fn judge(hosts: &[HostHealth], ring: &[RingPair], rule: PeerRule) -> Vec<(usize, Finding)> {
    let mut found = homogeneity(hosts);
    found.extend(below_median(hosts, rule.fraction));
    let names: Vec<String> = hosts.iter().map(|h| h.host.clone()).collect();
    found.extend(neighbours(&names, ring, rule));
    // A ring pair that could not run, or a direction of it that measured nothing (no
    // message completed in its window: the neighbour rule would skip the pair, and the
    // host go unjudged without a word): both ends named (which one failed, it cannot tell).
    for p in ring {
        let Some(why) = p.error.clone().or_else(|| p.unmeasured(&names)) else { continue };
        for (me, other) in [(p.a, p.b), (p.b, p.a)] {
            let with = names.get(other).map_or("?", String::as_str);
            let f = Finding::new(Code::NotRun, "host", format!("ring test with {with}: {why}"));
            found.push((me, f));
        }
    }
    found
}

/// `CONFIG_UNLIKE`: what a host holds unlike the strict majority of the job.
pub fn homogeneity(hosts: &[HostHealth]) -> Vec<(usize, Finding)> {
    // (what, model) → each host's value.
    let mut seen: BTreeMap<(String, String), Vec<(usize, String)>> = BTreeMap::new();
    for (i, h) in hosts.iter().enumerate() {
        seen.entry(("kernel".into(), String::new())).or_default().push((i, h.kernel.clone()));
        let mut per: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for p in &h.ports {
            let model = p.model.clone().unwrap_or_else(|| "unknown model".into());
            let b = &p.before;
            let show = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
            for (what, value) in [
                ("firmware", show(b.firmware.clone())),
                ("driver", show(b.driver.clone())),
                ("link layer", b.link_layer.clone()),
                ("link rate", show(b.rate_gbps.map(|r| format!("{r} Gb/s")))),
                ("active MTU", show(b.active_mtu.map(|m| m.to_string()))),
            ] {
                per.entry((what.into(), model.clone())).or_default().push(value);
            }
        }
        for (key, mut values) in per {
            values.sort();
            values.dedup();
            seen.entry(key).or_default().push((i, values.join(", ")));
        }
    }
    let mut found = Vec::new();
    for ((what, model), values) in seen {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, v) in &values {
            *count.entry(v).or_default() += 1;
        }
        if count.len() < 2 {
            continue;
        }
        let n = values.len();
        let (top, most) =
            count.iter().max_by_key(|(_, c)| **c).map(|(v, c)| (*v, *c)).unwrap_or(("", 0));
        let of = if model.is_empty() { String::new() } else { format!("{model} ") };
        for (i, v) in &values {
            let detail = if most * 2 > n {
                if v == top {
                    continue;
                }
                format!("{of}{what} {v} [{top} on {most} of {n} hosts]")
            } else {
                let all: Vec<String> = count.iter().map(|(v, c)| format!("{v} on {c}")).collect();
                format!("{of}{what} {v} [no majority: {}]", all.join(", "))
            };
            found.push((*i, Finding::new(Code::ConfigUnlike, "host", detail)));
        }
    }
    found
}

/// The band below which a figure is low: `fraction` of the others' median, and with
/// enough others, their MADs too.
fn low_limit(others: &[f64], fraction: f64) -> (f64, f64) {
    let centre = median(others);
    let mad = if others.len() >= HOST_BAND_MAD_HOSTS {
        1.4826 * median(&others.iter().map(|v| (v - centre).abs()).collect::<Vec<_>>())
    } else {
        0.0
    };
    (centre, (centre * fraction).min(centre - MADS * mad))
}

/// `BELOW_MEDIAN`: ports whose loopback bandwidth is low among their model and rate.
pub fn below_median(hosts: &[HostHealth], fraction: f64) -> Vec<(usize, Finding)> {
    // (model, rate) → (host, port, loopback Gb/s) of each port.
    type Group<'a> = Vec<(usize, &'a str, f64)>;
    let mut groups: BTreeMap<(String, String), Group<'_>> = BTreeMap::new();
    for (i, h) in hosts.iter().enumerate() {
        for p in &h.ports {
            let Some(bw) = p.loopback.bw_gbps.filter(|b| b.is_finite()) else { continue };
            let key = (
                p.model.clone().unwrap_or_default(),
                p.before.rate_gbps.map_or_else(String::new, |r| r.to_string()),
            );
            groups.entry(key).or_default().push((i, &p.subject, bw));
        }
    }
    let mut found = Vec::new();
    for ((model, rate), ports) in groups {
        if ports.len() < HOST_BAND_MIN_HOSTS {
            continue;
        }
        let all: Vec<f64> = ports.iter().map(|p| p.2).collect();
        for (k, (i, subject, bw)) in ports.iter().enumerate() {
            let others: Vec<f64> =
                all.iter().enumerate().filter(|&(o, _)| o != k).map(|(_, v)| *v).collect();
            let (centre, limit) = low_limit(&others, fraction);
            if *bw < limit {
                let detail = format!(
                    "loopback write_bw {bw:.2} Gb/s < {limit:.2} Gb/s [{:.0}% of the median {centre:.2} Gb/s of {} other {model} {rate} Gb/s ports]",
                    fraction * 100.0,
                    others.len()
                );
                found.push((*i, Finding::new(Code::BelowMedian, subject, detail)));
            }
        }
    }
    found
}

/// `NEIGHBOUR_LOW`: hosts both of whose ring pairs are low (bandwidth) or slow (latency).
pub fn neighbours(names: &[String], ring: &[RingPair], rule: PeerRule) -> Vec<(usize, Finding)> {
    let fraction = rule.fraction;
    let n = names.len();
    let mut found = Vec::new();
    if n < HOST_BAND_MIN_HOSTS {
        return found;
    }
    for h in 0..n {
        let (mine, others): (Vec<&RingPair>, Vec<&RingPair>) =
            ring.iter().partition(|p| p.a == h || p.b == h);
        if mine.len() < 2 {
            continue;
        }
        let peer = |p: &RingPair| {
            let other = if p.a == h { p.b } else { p.a };
            names.get(other).map_or("?", String::as_str)
        };
        let bws: Vec<f64> = others.iter().filter_map(|p| p.bw()).collect();
        if !bws.is_empty() && mine.iter().all(|p| p.bw().is_some()) {
            let (centre, limit) = low_limit(&bws, fraction);
            if mine.iter().all(|p| p.bw().is_some_and(|b| b < limit)) {
                let figures: Vec<String> = mine
                    .iter()
                    .map(|p| format!("{:.3} Gb/s with {}", p.bw().unwrap_or(0.0), peer(p)))
                    .collect();
                let detail = format!(
                    "both ring pairs low: {} < {limit:.3} Gb/s [{:.0}% of the median {centre:.3} Gb/s of the {} other pairs]",
                    figures.join(", "),
                    fraction * 100.0,
                    bws.len()
                );
                found.push((h, Finding::new(Code::NeighbourLow, "host", detail)));
                continue;
            }
        }
        let lats: Vec<f64> = others.iter().filter_map(|p| p.lat()).collect();
        if !lats.is_empty() {
            let centre = median(&lats);
            let (ratio, gap) = (centre * rule.lat_ratio, centre + rule.lat_floor_us);
            let limit = ratio.max(gap);
            if mine.iter().all(|p| p.lat().is_some_and(|l| l > limit)) {
                let figures: Vec<String> = mine
                    .iter()
                    .map(|p| format!("{:.1} µs with {}", p.lat().unwrap_or(0.0), peer(p)))
                    .collect();
                let judged = if ratio >= gap {
                    format!("× --lat-ratio {}", rule.lat_ratio)
                } else {
                    format!("+ --lat-floor {} µs", rule.lat_floor_us)
                };
                let detail = format!(
                    "both ring pairs slow: {} > {limit:.1} µs [the median {centre:.1} µs of the {} other pairs {judged}]",
                    figures.join(", "),
                    lats.len()
                );
                found.push((h, Finding::new(Code::NeighbourLow, "host", detail)));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{
        Floors, LinkFacts, Loopback, Phases, PortHealth, DEFAULT_LAT_FLOOR_US, DEFAULT_LAT_RATIO,
    };

    /// The defaults: `--peer-fraction 0.8 --lat-ratio 3 --lat-floor 50`.
    const RULE: PeerRule = PeerRule {
        fraction: 0.8,
        lat_ratio: DEFAULT_LAT_RATIO,
        lat_floor_us: DEFAULT_LAT_FLOOR_US,
    };

    /// tests/lab_health_hosts.rs's flags: three TCG guests on two shared cores.
    const LAB: PeerRule = PeerRule { fraction: 0.2, lat_ratio: 1.5, lat_floor_us: 15_000.0 };

    /// A deterministic noise in ±`pct` % (a linear congruential generator).
    struct Noise(u64);

    impl Noise {
        fn next(&mut self, pct: f64) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let unit = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
            1.0 + pct / 100.0 * (2.0 * unit - 1.0)
        }
    }

    fn port(bw: f64, mtu: u32, fw: &str) -> PortHealth {
        let facts = LinkFacts {
            state: "ACTIVE".into(),
            phys_state: "LinkUp".into(),
            link_layer: "InfiniBand".into(),
            rate_gbps: Some(200.0),
            active_mtu: Some(mtu),
            firmware: Some(fw.into()),
            driver: Some("mlx5_core, rdma-core 44.0".into()),
            ..LinkFacts::default()
        };
        PortHealth {
            subject: "mlx5_0/1".into(),
            model: Some("ConnectX-6".into()),
            numa_node: Some(0),
            address: None,
            before: facts.clone(),
            after: facts,
            loopback: Loopback { bw_gbps: Some(bw), lat_us: Some(1.5), ..Loopback::default() },
            counters: None,
        }
    }

    fn host(i: usize, p: PortHealth) -> HostHealth {
        HostHealth {
            host: format!("node{i:04}"),
            kernel: "6.1.0".into(),
            healthy: true,
            findings: Vec::new(),
            ports: vec![p],
            floors: Floors { min_bw: None, max_lat: None, source: "defaults".into() },
            phases: Phases::default(),
        }
    }

    /// `n` hosts of 190 Gb/s loopbacks within ±`noise` %, host `bad` at `bad_bw`.
    fn job(n: usize, noise: f64, bad: Option<(usize, f64)>) -> Vec<HostHealth> {
        let mut r = Noise(58);
        (0..n)
            .map(|i| {
                let bw = match bad {
                    Some((b, bw)) if b == i => bw,
                    _ => 190.0 * r.next(noise),
                };
                host(i, port(bw, 4096, "20.31.1014"))
            })
            .collect()
    }

    fn named(found: &[(usize, Finding)], code: Code) -> Vec<usize> {
        found.iter().filter(|(_, f)| f.code == code).map(|(h, _)| *h).collect()
    }

    #[test]
    fn a_ring_takes_two_or_three_rounds_whatever_n() {
        assert!(ring_rounds(1).is_empty());
        assert_eq!(ring_rounds(2), [vec![(0, 1)]]);
        for n in [3, 4, 7, 1000, 1001] {
            let rounds = ring_rounds(n);
            assert_eq!(rounds.len(), if n % 2 == 0 { 2 } else { 3 }, "n = {n}");
            let mut edges: Vec<(usize, usize)> = rounds.iter().flatten().copied().collect();
            edges.sort_unstable();
            let want: Vec<(usize, usize)> = (0..n).map(|i| (i, (i + 1) % n)).collect();
            let mut want_sorted = want.clone();
            want_sorted.sort_unstable();
            assert_eq!(edges, want_sorted, "n = {n}: every host meets the next, once");
            for round in &rounds {
                let mut busy = vec![false; n];
                for &(a, b) in round {
                    assert!(!busy[a] && !busy[b], "n = {n}: a host twice in one round");
                    busy[a] = true;
                    busy[b] = true;
                }
            }
        }
    }

    #[test]
    fn the_host_configured_unlike_the_others_is_named() {
        let mut hosts = job(3, 0.0, None);
        hosts[1].ports[0].before.active_mtu = Some(1024);
        let found = homogeneity(&hosts);
        assert_eq!(named(&found, Code::ConfigUnlike), [1]);
        assert_eq!(found[0].1.detail, "ConnectX-6 active MTU 1024 [4096 on 2 of 3 hosts]");
        // The driver: the kernel module and the rdma-core beside it.
        let mut hosts = job(3, 0.0, None);
        hosts[2].ports[0].before.driver = Some("mlx5_core, rdma-core 39.0".into());
        let found = homogeneity(&hosts);
        assert_eq!(named(&found, Code::ConfigUnlike), [2]);
        assert_eq!(
            found[0].1.detail,
            "ConnectX-6 driver mlx5_core, rdma-core 39.0 [mlx5_core, rdma-core 44.0 on 2 of 3 hosts]"
        );
        // Two hosts unlike each other: both named, nothing says which is right.
        let mut two = job(2, 0.0, None);
        two[0].ports[0].before.firmware = Some("20.28.1002".into());
        let found = homogeneity(&two);
        assert_eq!(named(&found, Code::ConfigUnlike), [0, 1]);
        assert!(found[0].1.detail.contains("no majority"), "{}", found[0].1.detail);
        // A thousand, one on an older kernel.
        let mut many = job(1000, 5.0, None);
        many[123].kernel = "5.15.0".into();
        let found = homogeneity(&many);
        assert_eq!(named(&found, Code::ConfigUnlike), [123]);
        assert_eq!(found[0].1.detail, "kernel 5.15.0 [6.1.0 on 999 of 1000 hosts]");
        assert!(homogeneity(&job(1000, 5.0, None)).is_empty());
    }

    #[test]
    fn below_the_jobs_median_needs_three_ports_and_finds_only_the_bad_one() {
        // Two: one far below the other, but no median of peers to judge by.
        assert!(below_median(&job(2, 0.0, Some((1, 60.0))), 0.8).is_empty());
        let found = below_median(&job(3, 2.0, Some((2, 120.0))), 0.8);
        assert_eq!(named(&found, Code::BelowMedian), [2]);
        assert!(
            found[0].1.detail.starts_with("loopback write_bw 120.00 Gb/s < 15"),
            "{}",
            found[0].1.detail
        );
        // A thousand with ±8 % noise: the one at 140 Gb/s alone; none without it.
        let found = below_median(&job(1000, 8.0, Some((517, 140.0))), 0.8);
        assert_eq!(named(&found, Code::BelowMedian), [517]);
        assert!(below_median(&job(1000, 8.0, None), 0.8).is_empty());
        // A job of one is judged by its absolute floors alone.
        assert!(judge(&job(1, 0.0, None), &[], RULE).is_empty());
    }

    /// The ring's pairs of `n` hosts, `bad`'s both ways at `slow` of the rest.
    fn ring(n: usize, noise: f64, bad: Option<usize>, slow: f64) -> Vec<RingPair> {
        let mut r = Noise(7);
        ring_rounds(n)
            .into_iter()
            .flatten()
            .map(|(a, b)| {
                let k = if bad == Some(a) || bad == Some(b) { slow } else { 1.0 };
                RingPair {
                    a,
                    b,
                    bw_gbps: [Some(190.0 * k * r.next(noise)), Some(190.0 * k * r.next(noise))],
                    lat_us: [Some(2.0 / k * r.next(noise)), Some(2.0 / k * r.next(noise))],
                    error: None,
                }
            })
            .collect()
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node{i:04}")).collect()
    }

    #[test]
    fn a_host_both_of_whose_ring_pairs_are_slow_is_named_and_its_neighbours_are_not() {
        let found = neighbours(&names(3), &ring(3, 3.0, Some(2), 0.3), RULE);
        assert_eq!(named(&found, Code::NeighbourLow), [2]);
        let detail = &found[0].1.detail;
        assert!(
            detail.starts_with("both ring pairs low: ") && detail.contains("with node0001"),
            "{detail}"
        );
        assert!(neighbours(&names(3), &ring(3, 3.0, None, 1.0), RULE).is_empty());
        // Two hosts share their one pair: which end is slow cannot be told.
        assert!(neighbours(&names(2), &ring(2, 0.0, Some(1), 0.3), RULE).is_empty());
        // A thousand with ±8 % noise: the bad host, not the two beside it.
        let found = neighbours(&names(1000), &ring(1000, 8.0, Some(500), 0.5), RULE);
        assert_eq!(named(&found, Code::NeighbourLow), [500]);
        assert!(neighbours(&names(1000), &ring(1000, 8.0, None, 1.0), RULE).is_empty());
    }

    #[test]
    fn a_ring_direction_that_moved_nothing_is_not_run_for_both_ends() {
        let mut pairs = ring(3, 0.0, None, 1.0);
        let (a, b) = (pairs[0].a, pairs[0].b);
        pairs[0].bw_gbps[1] = None;
        let found = judge(&job(3, 0.0, None), &pairs, RULE);
        let mut ends: Vec<usize> =
            found.iter().filter(|(_, f)| f.code == Code::NotRun).map(|(h, _)| *h).collect();
        ends.sort_unstable();
        let mut want = vec![a, b];
        want.sort_unstable();
        assert_eq!(ends, want, "{found:?}");
        let detail = &found.iter().find(|(h, _)| *h == a).unwrap().1.detail;
        let moved = format!("write_bw node{b:04} to node{a:04} moved no byte");
        assert!(detail.ends_with(&moved), "{detail}");
        // Every direction measured: nothing to say.
        assert!(judge(&job(3, 0.0, None), &ring(3, 0.0, None, 1.0), RULE).is_empty());
    }

    #[test]
    fn slow_latency_alone_names_the_host_too() {
        let mut pairs = ring(3, 0.0, None, 1.0);
        for p in pairs.iter_mut().filter(|p| p.a == 1 || p.b == 1) {
            p.lat_us = [Some(52_000.0), Some(51_000.0)];
        }
        let found = neighbours(&names(3), &pairs, RULE);
        assert_eq!(named(&found, Code::NeighbourLow), [1]);
        assert!(
            found[0].1.detail.starts_with("both ring pairs slow: 52000.0 µs with"),
            "{}",
            found[0].1.detail
        );
    }

    /// A ring of three whose pairs' latencies are `lat` µs (node1–node2, node2–node3,
    /// node3–node1, as `names(3)`'s 0, 1, 2), bandwidths alike.
    fn three(lat: [f64; 3]) -> Vec<RingPair> {
        ring_rounds(3)
            .into_iter()
            .flatten()
            .map(|(a, b)| RingPair {
                a,
                b,
                bw_gbps: [Some(0.05), Some(0.05)],
                lat_us: [Some(lat[a]); 2],
                error: None,
            })
            .collect()
    }

    #[test]
    fn emulations_timer_tick_latencies_name_no_host_and_a_delay_still_does() {
        // ci10 (a healthy lab run): node2's pairs 4.0 and 5.4 ms, the one other 112 µs —
        // 36× apart, which the ratio alone had named; 15 ms above it names no one.
        assert!(neighbours(&names(3), &three([4_000.0, 5_400.0, 112.4]), LAB).is_empty());
        // The slowed lab run (node 3 at netem delay 50 ms): 31.0 and 32.1 ms against
        // the other pair's 4.3 ms, still named.
        let slowed = three([4_272.1, 30_965.8, 32_145.4]);
        let found = neighbours(&names(3), &slowed, LAB);
        assert_eq!(named(&found, Code::NeighbourLow), [2]);
        assert_eq!(
            found[0].1.detail,
            "both ring pairs slow: 30965.8 µs with node0001, 32145.4 µs with node0000 > \
             19272.1 µs [the median 4272.1 µs of the 1 other pairs + --lat-floor 15000 µs]"
        );
        // Under heavier load (a lab run at load ~16) the centre itself was slow, 8.1 ms:
        // a ratio to it (÷ 0.2: 40.6 ms) would hide the pair of 39.1 ms; the gap does not.
        let loaded = three([8_122.4, 55_935.0, 39_092.2]);
        let found = neighbours(&names(3), &loaded, LAB);
        assert_eq!(named(&found, Code::NeighbourLow), [2]);
        assert!(
            found[0].1.detail.contains("> 23122.4 µs [the median 8122.4 µs"),
            "{}",
            found[0].1.detail
        );
        // The defaults: the gap binds on µs latencies, the ratio on slow ones.
        let found = neighbours(&names(3), &three([2.0, 60.0, 70.0]), RULE);
        assert_eq!(named(&found, Code::NeighbourLow), [2]);
        assert!(
            found[0]
                .1
                .detail
                .ends_with("[the median 2.0 µs of the 1 other pairs + --lat-floor 50 µs]"),
            "{}",
            found[0].1.detail
        );
        assert!(neighbours(&names(3), &three([2.0, 40.0, 45.0]), RULE).is_empty());
        let found = neighbours(&names(3), &three([100.0, 400.0, 450.0]), RULE);
        assert!(
            found[0]
                .1
                .detail
                .ends_with("[the median 100.0 µs of the 1 other pairs × --lat-ratio 3]"),
            "{}",
            found[0].1.detail
        );
        assert!(neighbours(&names(3), &three([100.0, 250.0, 290.0]), RULE).is_empty());
    }
}
