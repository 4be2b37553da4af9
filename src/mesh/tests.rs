use super::bootstrap::threads;
use super::*;
use crate::spec::rules::{self, TcpRequest};
use crate::spec::{Measure, RunLength};
use pattern::Pattern;

fn mesh(round_timeout: u64) -> MeshSpec {
    let r = TcpRequest { size: Some(4096), iters: Some(50), ..TcpRequest::default() };
    MeshSpec {
        bw: rules::tcp(Measure::Bw, &r).unwrap(),
        lat: rules::tcp(Measure::Lat, &r).unwrap(),
        pairs: Pairs::All,
        seed: None,
        round_timeout: Duration::from_secs(round_timeout),
        // Links of threads sharing two cores with the other unit tests: one may be
        // many times slower than the others, and these tests are not about outliers.
        thresholds: Thresholds {
            min_bw: Some(0.001),
            outlier_pct: 1e9,
            lat_ratio: 1e9,
            ..Thresholds::default()
        },
        patterns: PatternSpec::default(),
    }
}

/// `timeout`: each pair test's wait for its peer.
fn local(timeout: u64) -> Local {
    let timeout = Duration::from_secs(timeout);
    Local { port: 0, timeout, connect_window: timeout, quiet: true, ..Local::default() }
}

fn endpoint() -> Endpoint {
    Endpoint { address: "127.0.0.1".parse().unwrap(), device: "tcp".into() }
}

/// Runs a mesh of `n` thread ranks; `stall` (a rank) never reports its first round.
fn run_threads(
    n: usize,
    spec: MeshSpec,
    stall: Option<usize>,
) -> Vec<Result<Option<MeshReport>, Error>> {
    let handles: Vec<_> = threads::ranks(n)
        .into_iter()
        .map(|boot| {
            let spec = spec.clone();
            std::thread::spawn(move || {
                if stall == Some(boot.rank()) {
                    // Takes part in the exchange with a listener that never
                    // accepts, then is never heard of again.
                    let listener = ControlListener::bind(Some(endpoint().address), 0).unwrap();
                    let info = RankInfo {
                        rank: boot.rank(),
                        host: boot.host(),
                        address: endpoint().address.to_string(),
                        port: listener.local_addr().unwrap().port(),
                        device: "tcp".into(),
                    };
                    let params = serde_json::to_string(&spec).unwrap();
                    let _ = boot.all_gather(
                        &serde_json::to_vec(&Hello {
                            info,
                            params,
                            seed: 0,
                            flow_ports: Vec::new(),
                        })
                        .unwrap(),
                    );
                    std::thread::sleep(Duration::from_secs(4));
                    return Err(Error::usage("stalled on purpose"));
                }
                let status = Status::default();
                let mut progress = |_: &MeshReport| {};
                run(
                    &boot,
                    &spec,
                    // A stalled peer costs its partner this much per test.
                    &local(if stall.is_some() { 1 } else { 10 }),
                    &endpoint(),
                    &status,
                    &mut progress,
                    &mut std::io::sink(),
                )
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn three_ranks_measure_six_links_and_rank_0_alone_reports() {
    let results = run_threads(3, mesh(60), None);
    let report = results[0].as_ref().unwrap().as_ref().expect("rank 0 reports");
    assert!(results[1..].iter().all(|r| matches!(r, Ok(None))), "{results:?}");
    assert_eq!(report.rounds, 3, "odd N: N rounds, one rank idle in each");
    assert_eq!(report.rounds_done, 3);
    assert_eq!(report.analysis.measured_links, 6, "{}", report.text());
    assert!(report
        .links
        .iter()
        .all(|l| l.bw_mb_per_sec.unwrap() > 0.0 && l.t_typical_usec.unwrap() > 0.0));
    let pairs: std::collections::BTreeSet<_> =
        report.links.iter().map(|l| (l.from, l.to)).collect();
    assert_eq!(pairs.len(), 6, "every directed link once");
    assert_eq!(report.exit_code(), 0, "{}", report.text());
    assert!(report.complete);
}

#[test]
fn suspects_are_measured_again_alone_and_confirmed_when_slow_again() {
    // Every link below an impossible --min-bw: every pair a suspect, each measured
    // again alone in recheck rounds of its own, and slow every time.
    let mut spec = mesh(60);
    spec.thresholds.min_bw = Some(1e12);
    let results = run_threads(3, spec, None);
    let report = results[0].as_ref().unwrap().as_ref().expect("rank 0 reports");
    assert!(results[1..].iter().all(|r| matches!(r, Ok(None))), "{results:?}");
    assert_eq!(report.rechecks.len(), 3, "{}", report.text());
    assert_eq!(report.rechecks_done, 3);
    assert!(report.rechecks.iter().all(|c| c.bw && !c.lat), "{:?}", report.rechecks);
    // Slow each time: three tries of each pair, both directions.
    assert_eq!(report.reruns.len(), 18, "{}", report.text());
    assert!(report.reruns.iter().all(|l| l.round >= 3 && l.t_typical_usec.is_none()));
    assert_eq!(report.findings.len(), 6);
    assert!(report.findings.iter().all(|f| f.confirmed && f.rerun.is_some()));
    assert!(report.complete);
    assert_eq!(report.exit_code(), 1, "{}", report.text());
    assert!(report.environments.iter().all(Option::is_some), "each rank described");
}

#[test]
fn a_rank_that_never_reports_is_named_by_rank_0() {
    let results = run_threads(3, mesh(1), Some(2));
    let e = results[0].as_ref().unwrap_err();
    assert_eq!(e.kind, ErrorKind::PeerSilent);
    assert!(e.message.contains("round 1/3 did not end within 1 s (--round-timeout)"), "{e}");
    // Rank 1 was paired with it: still waiting for its answer when rank 0 gave up.
    assert!(e.message.contains("no report from rank 1 (thread1 tcp) [paired with rank 2 (thread2 tcp)], rank 2 (thread2 tcp) [paired with rank 1"), "{e}");
    let e1 = results[1].as_ref().unwrap_err();
    assert!(e1.message.contains("rank 0 (thread0 tcp) did not end round 1"), "{e1}");
}

#[test]
fn ranks_with_other_parameters_are_refused_by_name() {
    let raw: Vec<Vec<u8>> = (0..3)
        .map(|rank| {
            let params = if rank == 1 { "other" } else { "same" };
            let info = RankInfo {
                rank,
                host: "h".into(),
                address: "a".into(),
                port: 1,
                device: "d".into(),
            };
            serde_json::to_vec(&Hello {
                info,
                params: params.into(),
                seed: 1,
                flow_ports: Vec::new(),
            })
            .unwrap()
        })
        .collect();
    let e = read_hellos(&raw, 3, false).err().unwrap();
    assert_eq!(e.kind, ErrorKind::Mismatch);
    assert!(e.message.contains("the parameters of rank 1 (h d) differ from rank 0's"), "{e}");
    let e = read_hellos(&[b"{".to_vec(), b"x".to_vec()], 2, false).err().unwrap();
    assert!(e.message.contains("rank 0's endpoint record is unreadable"), "{e}");
}

#[test]
fn rank_0_refuses_a_link_a_rank_was_not_in() {
    let mut boots = threads::ranks(2);
    let (one, zero) = (boots.pop().unwrap(), boots.pop().unwrap());
    let info = |rank| RankInfo {
        rank,
        host: "h".into(),
        address: "a".into(),
        port: 1,
        device: "d".into(),
    };
    let mesh = mesh(5);
    let status = Status::default();
    let rank0 = Rank { boot: &zero, mesh: &mesh, ranks: vec![info(0), info(1)], status: &status };
    let pairs = [Pair(0, 1)];
    let round = Round {
        k: 0,
        label: 1,
        of: 1,
        pairs: &pairs,
        started: Instant::now(),
        alone: None,
        pattern: None,
    };
    let bogus = LinkResult {
        from: 1,
        to: 7,
        round: 0,
        bw_mb_per_sec: Some(1.0),
        t_typical_usec: None,
        error: None,
        span: None,
    };
    let done = Done { round: 0, links: vec![bogus], environment: None };
    one.send_done(&serde_json::to_vec(&done).unwrap());
    let mut report = MeshReport::new(&mesh, &rank0.ranks, 0, 1);
    let e = rank0.collect(&round, &mut report).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused);
    assert!(e.message.contains("rank 1 reported a link 1 -> 7 of round 1 it was not in"), "{e}");
}

#[test]
fn one_rank_is_not_a_mesh() {
    let boot = threads::ranks(1).pop().unwrap();
    let e = run(
        &boot,
        &mesh(5),
        &local(10),
        &endpoint(),
        &Status::default(),
        &mut |_| {},
        &mut std::io::sink(),
    )
    .err()
    .unwrap();
    assert!(e.message.contains("at least 2 ranks"), "{e}");
}

#[test]
fn patterns_run_each_flow_at_once_and_sum_them_against_the_links_alone() {
    // Three ranks (odd: bisection leaves one out), every pattern, a floor no round can
    // miss: the flows add up and the run passes.
    let mut spec = mesh(60);
    spec.seed = Some(5);
    spec.patterns = PatternSpec {
        patterns: vec![Pattern::Incast, Pattern::AllToAll, Pattern::Bisection],
        incast_root: None,
        bisection_rounds: 2,
        min_ratio: Some(1e-9),
        secs: 1,
    };
    let results = run_threads(3, spec, None);
    let report = results[0].as_ref().unwrap().as_ref().expect("rank 0 reports");
    assert!(results[1..].iter().all(|r| matches!(r, Ok(None))), "{results:?}");
    let p = &report.patterns;
    assert_eq!((p.rounds, p.results.len()), (3 + 1 + 2, 6), "{}", report.text());
    assert_eq!(p.seed, 5);
    for r in &p.results {
        let want = match r.pattern {
            Pattern::Incast => 2,
            Pattern::AllToAll => 6,
            _ => 1,
        };
        assert_eq!(r.links.len(), want, "{r:?}");
        assert!(r.links.iter().all(|l| l.error.is_none() && l.bw_mb_per_sec.unwrap() > 0.0));
        let sum: f64 = r.links.iter().filter_map(|l| l.bw_mb_per_sec).sum();
        assert!((r.total.aggregate_mb_per_sec - sum).abs() < 1e-6);
        // --pairs all measured every link alone: every flow has its figure alone.
        assert_eq!(r.total.links_alone, want);
        let alone: f64 = r.links.iter().filter_map(|l| l.alone_mb_per_sec).sum();
        assert!((r.total.alone_sum_mb_per_sec - alone).abs() < 1e-6);
        assert!(r.total.ratio.unwrap() > 0.0 && r.pass);
        let sent: usize = r.hosts.iter().map(|h| h.sent.links).sum();
        assert_eq!(sent, want, "each flow counted once per host side");
        // 1 s flows started together: a shared window, every flow's bytes inside it.
        let w = r.window.as_ref().unwrap_or_else(|| panic!("{r:?}"));
        assert_eq!(w.flows, want);
        assert!(w.length_ms > 0.0 && w.length_ms <= 500.0 + 50.0, "{w:?}");
        let inside: f64 = r.links.iter().map(|l| l.window_bytes.unwrap()).sum();
        assert!(inside > 0.0 && (inside - w.bytes).abs() < 1e-6 * inside, "{r:?}");
        // The probe: the latency test beside the flows, on the first flow's link.
        let probe = r.probe.as_ref().unwrap();
        assert_eq!((probe.from, probe.to), (r.links[0].from, r.links[0].to));
        assert!(
            probe.t_typical_usec.unwrap() > 0.0 && probe.alone_usec.unwrap() > 0.0,
            "{probe:?}"
        );
    }
    let incast_roots: Vec<_> = p.results.iter().filter_map(|r| r.root).collect();
    assert_eq!(incast_roots, [0, 1, 2], "every rank in turn");
    assert!(p.results.iter().filter(|r| r.pattern == Pattern::Bisection).all(|r| r.idle.is_some()));
    assert!(report.complete, "{}", report.text());
    assert_eq!(report.exit_code(), 0, "{}", report.text());
    assert!(report.text().contains("per flow (aggregate"), "{}", report.text());
    assert!(report.html().contains("id=\"patterns\""));
}

#[test]
fn a_pattern_below_its_floor_fails_the_run_and_a_root_past_the_end_is_refused() {
    let mut spec = mesh(60);
    spec.patterns = PatternSpec {
        patterns: vec![Pattern::Incast],
        incast_root: Some(1),
        min_ratio: Some(1e9),
        ..PatternSpec::default()
    };
    let results = run_threads(2, spec.clone(), None);
    let report = results[0].as_ref().unwrap().as_ref().expect("rank 0 reports");
    assert_eq!(report.patterns.results.len(), 1, "N = 2: one incast, into rank 1");
    let r = &report.patterns.results[0];
    assert_eq!((r.links.len(), r.links[0].from, r.links[0].to), (1, 0, 1));
    assert!(!r.pass);
    assert_eq!(report.exit_code(), 1, "{}", report.text());
    assert!(report.verdict.failures.iter().any(|f| f.contains("below --min-pattern-ratio")));
    spec.patterns.incast_root = Some(2);
    let results = run_threads(2, spec, None);
    let e = results[1].as_ref().expect_err("refused on every rank");
    assert!(e.message.contains("--incast-root 2: the mesh has 2 ranks (0 to 1)"), "{e}");
}

#[test]
fn hellos_without_a_listener_per_sender_are_refused_with_patterns() {
    let hello = |rank, flow_ports: Vec<u16>| {
        let info =
            RankInfo { rank, host: "h".into(), address: "a".into(), port: 1, device: "d".into() };
        serde_json::to_vec(&Hello { info, params: "p".into(), seed: 1, flow_ports }).unwrap()
    };
    assert!(read_hellos(&[hello(0, vec![6, 7]), hello(1, vec![8, 9])], 2, true).is_ok());
    for bad in [vec![6], vec![6, 7, 9], vec![0, 7], vec![6, 0]] {
        let e = read_hellos(&[hello(0, bad.clone()), hello(1, vec![8, 9])], 2, true).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Refused);
        assert!(e.message.contains("rank 0 (h d) sent"), "{bad:?}: {e}");
    }
    let e = read_hellos(&[hello(0, vec![6, 7]), hello(1, vec![8, 9])], 2, false).err().unwrap();
    assert!(e.message.contains("pattern listener port(s) for 2 ranks (want none)"), "{e}");
}

#[test]
fn a_pattern_round_refuses_flows_it_did_not_plan_and_a_flow_reported_twice() {
    let planned = &pattern::incast(3, Some(0))[0];
    let round = Round {
        k: 4,
        label: 1,
        of: 1,
        pairs: &[],
        started: Instant::now(),
        alone: None,
        pattern: Some(planned),
    };
    let link = |from, to, round| LinkResult {
        from,
        to,
        round,
        bw_mb_per_sec: Some(1.0),
        t_typical_usec: None,
        error: None,
        span: None,
    };
    assert!(round.stranger(1, &[link(1, 0, 4)]).is_none());
    assert!(round.stranger(1, &[]).is_none(), "a missing flow is rank 0's to mark");
    for bad in [
        vec![link(1, 2, 4)],
        vec![link(2, 0, 4)],
        vec![link(1, 0, 3)],
        vec![link(1, 0, 4), link(1, 0, 4)],
        vec![link(1, 99, 4)],
    ] {
        assert!(round.stranger(1, &bad).is_some(), "{bad:?}");
    }
}

#[test]
fn a_recheck_runs_at_least_as_many_iterations_as_the_first_measurement() {
    let spec = mesh(60).bw;
    let with = |run| TestSpec { run, ..spec.clone() };
    let it = RunLength::Iterations;
    assert_eq!(recheck_test(&with(it(20)), 1).run, it(100));
    assert_eq!(recheck_test(&with(it(5000)), 1).run, it(5000));
    assert_eq!(recheck_test(&with(it(5000)), 4).run, it(20_000), "--recheck-length 4");
    assert_eq!(recheck_test(&with(it(20)), 4).run, it(100), "still at least 100");
    let d = RunLength::Duration { secs: 3, margin_ms: 750 };
    assert_eq!(recheck_test(&with(d), 1).run, d, "as long");
    assert_eq!(
        recheck_test(&with(d), 4).run,
        RunLength::Duration { secs: 12, margin_ms: 750 },
        "four times as long, the same margins"
    );
}
