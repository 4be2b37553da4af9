use super::super::recheck::{rechecks, Recheck};
use super::super::schedule::Pair;
use super::*;

/// Ranks `0..n`, one per host `node1…` (or `per_host` per host).
fn ranks(n: usize, per_host: usize) -> Vec<RankInfo> {
    (0..n)
        .map(|rank| RankInfo {
            rank,
            host: format!("node{}", rank / per_host + 1),
            address: "198.18.1.1".into(),
            port: 1,
            device: "rxe0".into(),
        })
        .collect()
}

/// Every directed link of `n` ranks, figures from `f(from, to)`.
fn mesh(n: usize, f: impl Fn(usize, usize) -> (f64, f64)) -> Vec<LinkResult> {
    let mut links = Vec::new();
    for from in 0..n {
        for to in (0..n).filter(|&t| t != from) {
            let (bw, lat) = f(from, to);
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

/// A deterministic jitter in [-1, 1) per link.
fn jitter(from: usize, to: usize, salt: u64) -> f64 {
    let mut s = (from as u64) << 32 | (to as u64) << 8 | salt;
    let z = super::super::schedule::splitmix64(&mut s);
    (z % 2000) as f64 / 1000.0 - 1.0
}

fn judged(ranks: &[RankInfo], links: &[LinkResult], t: Thresholds) -> Vec<Finding> {
    suspects(ranks, links, &Bands::of(ranks, links, t), t)
}

fn ends(found: &[Finding]) -> Vec<(usize, usize, &'static str)> {
    found.iter().map(|f| (f.from, f.to, f.check)).collect()
}

#[test]
fn pure_noise_gives_no_suspect() {
    let t = Thresholds::default();
    for n in [3, 4, 8, 16] {
        let r = ranks(n, 1);
        // ±10 % bandwidth, latency from 10 to 40 µs.
        let links =
            mesh(n, |a, b| (3000.0 * (1.0 + 0.1 * jitter(a, b, 1)), 25.0 + 15.0 * jitter(a, b, 2)));
        assert_eq!(ends(&judged(&r, &links, t)), [], "{n} ranks");
    }
    // Four ranks on two busy cores: some latencies a scheduler tick long. They are
    // suspects (measured again alone), not findings yet.
    let r = ranks(4, 4);
    let links = mesh(4, |a, b| (900.0, if (a + b) % 3 == 0 { 8011.0 } else { 23.7 }));
    let found = judged(&r, &links, t);
    assert!(!found.is_empty() && found.iter().all(|f| !f.confirmed), "{found:?}");
    assert!(found[0].message.contains("not measured again alone"), "{}", found[0].message);
}

#[test]
fn one_bad_link_is_the_only_suspect() {
    let t = Thresholds::default();
    let r = ranks(8, 1);
    let links = mesh(8, |a, b| {
        let noise = (3000.0 * (1.0 + 0.1 * jitter(a, b, 3)), 20.0 + 5.0 * jitter(a, b, 4));
        match (a, b) {
            (0, 3) => (noise.0, 8000.0),
            (5, 2) => (1200.0, noise.1),
            _ => noise,
        }
    });
    let found = judged(&r, &links, t);
    assert_eq!(ends(&found), [(0, 3, "latency_outlier"), (5, 2, "bw_outlier")]);
    let m = &found[0].message;
    assert!(
        m.starts_with("rank 0 (node1 rxe0) → rank 3 (node4 rxe0): t_typical 8.0 ms vs "),
        "{m}"
    );
    let b = found[0].band.unwrap();
    assert!(b.centre < 20.0 && b.limit >= 3.0 * b.centre && b.limit >= b.centre + 50.0, "{b:?}");
    // --judge lat leaves bandwidth alone.
    let lat_only = Thresholds { judge: Judge::Lat, ..t };
    assert_eq!(ends(&judged(&r, &links, lat_only)), [(0, 3, "latency_outlier")]);
}

#[test]
fn one_bad_host_of_three_is_in_every_suspect_though_its_links_are_the_majority() {
    let t = Thresholds::default();
    let r = ranks(3, 1);
    // node3 (rank 2) adds 2.5 ms each way and halves bandwidth: four links of six.
    let links = mesh(3, |a, b| {
        if a == 2 || b == 2 {
            (400.0, 2600.0 + 50.0 * jitter(a, b, 5))
        } else {
            (1000.0 + 20.0 * jitter(a, b, 6), 100.0 + 10.0 * jitter(a, b, 7))
        }
    });
    let found = judged(&r, &links, t);
    assert_eq!(found.len(), 8, "{found:#?}");
    assert!(found.iter().all(|f| f.from == 2 || f.to == 2), "{found:#?}");
    // Sixteen ranks, one bad: its row and its column, nothing else.
    let r = ranks(16, 1);
    let links = mesh(16, |a, b| {
        let bad = a == 9 || b == 9;
        (if bad { 500.0 } else { 3000.0 * (1.0 + 0.1 * jitter(a, b, 8)) }, 20.0)
    });
    let found = judged(&r, &links, t);
    assert_eq!(found.len(), 30);
    assert!(found.iter().all(|f| f.check == "bw_outlier" && (f.from == 9 || f.to == 9)));
}

#[test]
fn links_within_a_host_are_judged_among_themselves() {
    let t = Thresholds::default();
    // Two ranks on each of two hosts: loopback is 5× the wire, and not an outlier.
    let r = ranks(4, 2);
    let links = mesh(4, |a, b| if a / 2 == b / 2 { (5000.0, 8.0) } else { (1000.0, 90.0) });
    assert_eq!(ends(&judged(&r, &links, t)), []);
    let bands = Bands::of(&r, &links, t);
    assert_eq!(bands.bw_intra.unwrap().centre, 5000.0);
    assert_eq!(bands.lat_inter.unwrap().centre, 90.0);
}

#[test]
fn a_suspect_is_confirmed_only_when_slow_again_alone() {
    let t = Thresholds { min_bw: Some(100.0), ..Thresholds::default() };
    let r = ranks(4, 1);
    let links = mesh(4, |a, b| match (a, b) {
        (0, 1) => (1000.0, 9000.0),
        (2, 3) => (50.0, 20.0),
        (3, 1) => (200.0, 20.0),
        _ => (1000.0, 20.0),
    });
    let mut found = judged(&r, &links, t);
    assert_eq!(
        ends(&found),
        [(0, 1, "latency_outlier"), (2, 3, "min_bw"), (2, 3, "bw_outlier"), (3, 1, "bw_outlier")]
    );
    let plan = rechecks(&found, t);
    assert_eq!(
        plan,
        [
            Recheck { pair: Pair(2, 3), bw: true, lat: false },
            Recheck { pair: Pair(0, 1), bw: false, lat: true },
            Recheck { pair: Pair(1, 3), bw: true, lat: false },
        ],
        "the worst first, one per pair"
    );
    assert_eq!(rechecks(&found, Thresholds { recheck_max: 1, ..t }).len(), 1);
    let rerun = |from, to, bw, lat| LinkResult {
        from,
        to,
        round: 9,
        bw_mb_per_sec: bw,
        t_typical_usec: lat,
        error: None,
        span: None,
    };
    // 0→1 fine alone at its best (a scheduler tick); 2→3 slow at its best; 3→1 not
    // measured again.
    let reruns = [
        rerun(0, 1, None, Some(4000.0)),
        rerun(0, 1, None, Some(21.0)),
        rerun(2, 3, Some(60.0), None),
        rerun(2, 3, Some(55.0), None),
    ];
    confirm(&r, &mut found, &reruns, t);
    let outcome: Vec<_> = found.iter().map(|f| (f.rerun, f.confirmed)).collect();
    assert_eq!(
        outcome,
        [(Some(21.0), false), (Some(60.0), true), (Some(60.0), true), (None, false)]
    );
    assert_eq!(
        found[0].message,
        "rank 0 (node1 rxe0) → rank 1 (node2 rxe0): t_typical 9.0 ms vs 20.0 µs for its peers, 450× slower; not confirmed: 21.0 µs alone"
    );
    assert!(
        found[1]
            .message
            .ends_with("BW 50 MB/s is below --min-bw 100 MB/s; confirmed alone: 60 MB/s"),
        "{}",
        found[1].message
    );
    assert!(
        found[2].message.contains(
            "BW 50 MB/s vs 1000 MB/s for its peers, 20× slower; confirmed alone: 60 MB/s"
        ),
        "{}",
        found[2].message
    );
}

#[test]
fn a_failed_test_is_a_confirmed_finding() {
    let r = ranks(3, 1);
    let mut links = mesh(3, |_, _| (1000.0, 20.0));
    links[0].bw_mb_per_sec = None;
    links[0].error = Some("write_bw: the peer closed the control connection".into());
    let found = judged(&r, &links, Thresholds::default());
    assert_eq!(ends(&found), [(0, 1, "error")]);
    assert!(found[0].confirmed);
    assert!(rechecks(&found, Thresholds::default()).is_empty());
}

#[test]
fn bands_take_the_better_half() {
    let t = Thresholds::default();
    let b = band("lat", "inter", vec![10.0, 12.0, 11.0, 5000.0, 6000.0, 7000.0], t).unwrap();
    assert_eq!((b.centre, b.links), (11.0, 6));
    assert_eq!(b.limit, 61.0, "the floor: 50 µs above the centre");
    let b = band("bw", "inter", vec![100.0, 1000.0, 990.0, 1010.0], t).unwrap();
    assert_eq!(b.centre, 1005.0);
    assert!(b.outside(700.0) && !b.outside(900.0));
    assert!(band("bw", "inter", vec![f64::NAN], t).is_none());
    assert_eq!(median(&[3.0, 1.0, 2.0, 4.0]), 2.5);
}

#[test]
fn a_host_slow_with_every_partner_is_rechecked_before_worse_single_links() {
    // Host 7 at 0.7× with all its partners; two pauses elsewhere slower still.
    let t = Thresholds { recheck_max: 2, judge: Judge::Bw, ..Thresholds::default() };
    let r = ranks(8, 1);
    let links = mesh(8, |a, b| match (a, b) {
        (_, 7) | (7, _) => (700.0, 20.0),
        (0, 1) => (300.0, 20.0),
        (2, 3) => (350.0, 20.0),
        _ => (1000.0, 20.0),
    });
    let found = judged(&r, &links, t);
    assert_eq!(found.iter().filter(|f| f.from == 7 || f.to == 7).count(), 14, "{:?}", ends(&found));
    let plan: Vec<Pair> = rechecks(&found, t).iter().map(|c| c.pair).collect();
    // The host's worst pairs made the cut (the worst links alone were two pauses).
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert!(plan.iter().all(|p| p.partner(7).is_some()), "{plan:?}");
    // Without the cap's pressure every suspect pair is planned, worst first.
    let all = rechecks(&found, Thresholds { recheck_max: 32, ..t });
    assert_eq!(all.len(), 9, "two pauses and host 7's seven pairs");
    assert_eq!(all[..2].iter().map(|c| c.pair).collect::<Vec<_>>(), [Pair(0, 1), Pair(2, 3)]);
}

#[test]
fn three_hosts_judge_a_slow_host_by_bandwidth_where_the_link_band_is_too_wide() {
    // The three guests of docs/mesh.md#in-the-lab: healthy links 3.6 and 5.9 MB/s, node
    // 3's links 1.3-1.8 with its delay. The link band reaches below zero; the host band
    // (node 3's median 1.55 against the others' 2.65) names node 3's four links.
    let t = Thresholds { judge: Judge::Bw, ..Thresholds::default() };
    let r = ranks(3, 1);
    let links = mesh(3, |a, b| match (a, b) {
        (0, 1) => (3.6, 20.0),
        (1, 0) => (5.9, 20.0),
        (0, 2) => (1.3, 20.0),
        (2, 0) => (1.8, 20.0),
        (1, 2) => (1.5, 20.0),
        _ => (1.6, 20.0),
    });
    assert!(
        Bands::of(&r, &links, t).bw_inter.unwrap().limit <= 0.0,
        "the link band judges nothing"
    );
    let mut found = judged(&r, &links, t);
    let mut ends: Vec<(usize, usize)> = found.iter().map(|f| (f.from, f.to)).collect();
    ends.sort_unstable();
    assert_eq!(ends, [(0, 2), (1, 2), (2, 0), (2, 1)], "{found:?}");
    let band = found[0].band.unwrap();
    assert_eq!((band.peers, band.links), ("host", 4));
    assert!((band.centre - 2.65).abs() < 1e-9 && (band.limit - 2.65 / 1.25).abs() < 1e-9);
    // Alone, node 3's links stay slow and are confirmed; a healthy figure alone is not.
    let rerun = |from, to, bw| LinkResult {
        from,
        to,
        round: 9,
        bw_mb_per_sec: Some(bw),
        t_typical_usec: None,
        error: None,
        span: None,
    };
    let reruns = [rerun(0, 2, 1.4), rerun(2, 0, 1.7), rerun(1, 2, 3.9), rerun(2, 1, 1.5)];
    confirm(&r, &mut found, &reruns, t);
    let confirmed: Vec<(usize, usize)> =
        found.iter().filter(|f| f.confirmed).map(|f| (f.from, f.to)).collect();
    assert_eq!(confirmed.len(), 3, "{found:?}");
    assert!(!confirmed.contains(&(1, 2)), "3.9 alone is above the limit");
}

#[test]
fn the_host_band_needs_three_hosts_and_leaves_a_healthy_spread_alone() {
    let t = Thresholds { judge: Judge::Bw, ..Thresholds::default() };
    // Two hosts: nothing to judge a host against.
    let two = mesh(2, |a, _| (if a == 0 { 1.0 } else { 5.0 }, 20.0));
    assert!(host_suspects(&ranks(2, 1), &two, t, true).is_empty());
    // Four hosts at ±20 %: no host's median is 25 % below the others'.
    let links = mesh(4, |a, b| (3000.0 * (1.0 + 0.2 * jitter(a, b, 3)), 20.0));
    assert!(host_suspects(&ranks(4, 1), &links, t, true).is_empty());
    let lat = mesh(4, |a, b| (3000.0, 20.0 * (1.0 + 0.2 * jitter(a, b, 5))));
    assert!(host_suspects(&ranks(4, 1), &lat, t, false).is_empty());
}

#[test]
fn a_slow_host_of_three_is_suspect_by_latency_where_the_link_band_holds_it() {
    // The three-guest lab with node 3 delayed by 50 ms (2026-12-05): TCG's bimodal
    // latencies (1.9 and 7.2 ms between the healthy guests) widened the better-half band
    // to 38.6 ms, above node 3's 28-30 ms.
    let lat = |a: usize, b: usize| match (a, b) {
        (0, 1) => 7168.0,
        (1, 0) => 1860.6,
        (0, 2) => 27738.1,
        (1, 2) => 28327.9,
        (2, 0) => 27902.0,
        _ => 29884.4,
    };
    let links = mesh(3, |a, b| (10.0, lat(a, b)));
    let r = ranks(3, 1);
    let t = Thresholds::default();
    let band = Bands::of(&r, &links, t).lat_inter.unwrap();
    assert!(links.iter().all(|l| !band.outside(l.t_typical_usec.unwrap())), "{band:?}");
    let found = judged(&r, &links, t);
    let mut slow: Vec<(usize, usize, &str)> = ends(&found);
    slow.sort_unstable();
    assert_eq!(
        slow,
        [
            (0, 2, "latency_outlier"),
            (1, 2, "latency_outlier"),
            (2, 0, "latency_outlier"),
            (2, 1, "latency_outlier")
        ],
        "node 3's four links, by its host band: 28.1 ms against the others' 17.6"
    );
    let b = found[0].band.unwrap();
    assert_eq!((b.peers, b.metric, b.links), ("host", "lat", 4));
    assert!((b.limit - 17_600.5 * 1.25).abs() < 1e-6, "{b:?}");
}

#[test]
fn a_short_run_widens_the_bands_floors_so_its_noise_is_no_suspect() {
    let full = Thresholds::default();
    let short = Thresholds { iterations: Some(100), ..full };
    assert_eq!(full.widening(), 1.0);
    assert_eq!(Thresholds { iterations: Some(5000), ..full }.widening(), 1.0, "past FULL_RUN");
    assert!((short.widening() - 10f64.sqrt()).abs() < 1e-12, "√(1000/100)");
    assert!((Thresholds { iterations: Some(20), ..full }.widening() - 50f64.sqrt()).abs() < 1e-12);
    // Eight hosts, every link 3000 MB/s and 20 µs but 0 -> 1: 0.6× (a byte takes 1.67×
    // as long) and 150 µs.
    let r = ranks(8, 1);
    let links = mesh(8, |a, b| if (a, b) == (0, 1) { (1800.0, 150.0) } else { (3000.0, 20.0) });
    assert_eq!(
        ends(&judged(&r, &links, full)),
        [(0, 1, "bw_outlier"), (0, 1, "latency_outlier")],
        "a full run: past --outlier 25 % and --lat-floor 50 µs"
    );
    // At -n 100 the floors are 79 % and 158 µs: neither figure is past them.
    assert_eq!(ends(&judged(&r, &links, short)), [], "a short run's noise");
    let b = Bands::of(&r, &links, short).bw_inter.unwrap();
    assert!((b.limit - 3000.0 / (1.0 + 0.25 * 10f64.sqrt())).abs() < 1e-9, "{b:?}");
    // Twice as slow and 300 µs still are.
    let links = mesh(8, |a, b| if (a, b) == (0, 1) { (1500.0, 300.0) } else { (3000.0, 20.0) });
    assert_eq!(ends(&judged(&r, &links, short)), [(0, 1, "bw_outlier"), (0, 1, "latency_outlier")]);
}

#[test]
fn a_short_run_leaves_the_host_band_as_given() {
    // Three hosts; node3's links at 0.5×: the others' medians are 2250 (half their
    // links are node3's), the limit 2250 / 1.25 = 1800, at -n 100 too.
    let r = ranks(3, 1);
    let links = mesh(3, |a, b| (if a == 2 || b == 2 { 1500.0 } else { 3000.0 }, 20.0));
    let full = Thresholds { judge: Judge::Bw, ..Thresholds::default() };
    assert_eq!(host_suspects(&r, &links, full, true).len(), 4, "node3's four links");
    let short = Thresholds { iterations: Some(100), ..full };
    assert_eq!(host_suspects(&r, &links, short, true).len(), 4, "a median of links: as given");
}

#[test]
fn a_slow_links_bandwidth_reads_as_a_figure_not_zero() {
    // Three lab guests with node 3 delayed: 0.26 MB/s against 1.12, once printed "0 MB/s vs
    // 1 MB/s".
    assert_eq!(figure(0.26, true), "0.26 MB/s");
    assert_eq!(figure(9.994, true), "9.99 MB/s");
    assert_eq!(figure(10.0, true), "10 MB/s");
    assert_eq!(figure(3170.4, true), "3170 MB/s");
    assert_eq!(figure(7900.0, false), "7.9 ms");
}
