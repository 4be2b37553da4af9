//! The patterns' report: sums, CSV, failures, the shared window.

use super::super::analysis::analyse;
use super::super::findings::Thresholds;
use super::super::pattern::{incast, PatternSpec};
use super::super::window::FlowSpan;
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
        span: None,
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
    let line =
        p.add(round, &ranks, &analysis, &[link(1, 0, 40.0), link(2, 0, 40.0), link(3, 0, 20.0)]);
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
        "incast into 0: 3 link(s), aggregate 100.0 MB/s, alone 200.0 MB/s (2 link(s)): 0.40; \
         no shared window: a flow reported no progress"
    );
    assert_eq!(p.failures().len(), 1);
    assert!(p.failures()[0].ends_with("below --min-pattern-ratio 0.5"), "{:?}", p.failures());
    assert!(p.done() && !p.failed_flows());
    assert!(p.text().contains(" FAIL incast into 0: 3 link(s)"), "{}", p.text());
    // h0 sent 40 of 100, received 80 of 200, h1 sent 40 of 100 (3 -> 0 was never
    // alone): a tie, the first in host order.
    assert_eq!(r.lowest_host().as_deref(), Some("lowest host: h0 rxe0 sent 0.40 of alone"));
    assert!(p.text().contains("\n   lowest host: h0 rxe0 sent 0.40 of alone\n"), "{}", p.text());
    let chart = p.chart();
    assert_eq!(chart.matches("class=\"aggregate\"").count(), 1);
    assert!(chart.contains("100.0 / 200.0 = 0.40"), "{chart}");
    // Faster at once than alone: the flows cannot all have run at the same time.
    let fast = [link(0, 1, 300.0), link(2, 1, 300.0), link(3, 1, 300.0)];
    let line = p.add(&incast(4, Some(1))[0], &ranks, &analysis, &fast);
    assert!(
        line.contains(": 3.00 (above 1: the flows did not all overlap; -D makes them);"),
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
    let cols =
        |r: &csv::StringRecord| [0, 2, 3, 6, 7, 11, 13, 14, 15].map(|i| r[i].to_string()).join(" ");
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

/// Rank `from`'s flow into `to` that posted first at `start` µs (after its rank started
/// the round) and moved `bytes_per_us` until `stop`.
fn flow(from: usize, to: usize, start: u64, stop: u64, bytes_per_us: u64, bw: f64) -> LinkResult {
    let points = vec![(start, 0), (stop, (stop - start) * bytes_per_us)];
    LinkResult { span: Some(FlowSpan(points)), ..link(from, to, bw) }
}

#[test]
fn a_round_with_progress_is_judged_over_the_window_its_flows_share() {
    let (ranks, analysis, mut p) = incast_at_most_half(1, None);
    // Into 0: 1 -> 0 runs 0..10 ms, 2 -> 0 1..5 ms, 3 -> 0 2..20 ms, each 10 bytes/µs
    // (its own average ~9.5 MB/s: summed ~28.6, 0.095 of alone, below the 0.5 floor).
    // The shared window is 2..5 ms: 30 000 bytes each, 3 ms, 3 × 9.54 MB/s.
    let links = [
        flow(1, 0, 0, 10_000, 10, 9.5),
        flow(2, 0, 1_000, 5_000, 10, 9.5),
        flow(3, 0, 2_000, 20_000, 10, 9.5),
    ];
    let line = p.add(&incast(4, Some(0))[0], &ranks, &analysis, &links);
    let r = &p.results[0];
    let w = r.window.as_ref().unwrap();
    assert_eq!((w.start_ms, w.stop_ms, w.length_ms, w.flows), (2.0, 5.0, 3.0, 3));
    assert!((w.bytes - 90_000.0).abs() < 1e-6, "{w:?}");
    let each = 30_000.0 / 3e-3 / crate::measure::MIB;
    assert!((w.aggregate_mb_per_sec - 3.0 * each).abs() < 1e-9, "{w:?}");
    assert_eq!(w.alone_sum_mb_per_sec, Some(300.0));
    assert!((w.ratio.unwrap() - 3.0 * each / 300.0).abs() < 1e-12);
    assert!((w.fairness.unwrap() - 1.0).abs() < 1e-12, "equal bytes: fair");
    for l in &r.links {
        assert!((l.window_bytes.unwrap() - 30_000.0).abs() < 1e-6, "{l:?}");
        assert!((l.share.unwrap() - 1.0 / 3.0).abs() < 1e-12, "{l:?}");
        assert!((l.window_mb_per_sec.unwrap() - each).abs() < 1e-9, "{l:?}");
    }
    assert!(!r.pass, "0.095 of alone in the window too, below 0.5");
    assert!(
        line.ends_with(&format!(
            "shared window 3.0 ms: {:.1} MB/s, 0.10 of alone, fairness 1.00",
            3.0 * each
        )),
        "{line}"
    );
    // The CSV: the flow's rate and share inside, the window's length and fairness.
    let mut wr = csv::Writer::from_writer(Vec::new());
    p.csv_rows(&ranks, &mut wr).unwrap();
    let text = String::from_utf8(wr.into_inner().unwrap()).unwrap();
    let row = text.lines().next().unwrap();
    assert!(row.ends_with(&format!(",{each:.3},0.333,3.000,1.000")), "{row}");
}

#[test]
fn flows_that_never_ran_at_once_have_no_window_and_are_judged_on_their_averages() {
    let (ranks, analysis, mut p) = incast_at_most_half(1, None);
    // 1 -> 0 ends before 3 -> 0 starts.
    let links = [
        flow(1, 0, 0, 1_000, 10, 90.0),
        flow(2, 0, 0, 5_000, 10, 90.0),
        flow(3, 0, 2_000, 3_000, 10, 90.0),
    ];
    let line = p.add(&incast(4, Some(0))[0], &ranks, &analysis, &links);
    let r = &p.results[0];
    assert!(r.window.is_none() && r.links.iter().all(|l| l.share.is_none()), "{r:?}");
    assert!(r.pass, "0.90 of alone by the averages");
    assert!(
        line.ends_with(
            "no shared window: the flows never all ran at once (a longer --pattern-secs overlaps them)"
        ),
        "{line}"
    );
}
