//! The perftest session's own rules: the region a sender may touch, the report's units,
//! which GIDs connect.

use super::*;

#[test]
fn a_sender_stays_inside_the_region_perftest_exposes() {
    let l = SlotLayout::cycle(4096);
    for size in [1u64, 2, 64, 1000, 2048, 2049, 4096, 65536, 1 << 23] {
        let slots = u64::from(l.slots(size));
        assert!(slots >= 1);
        assert!(slots * size <= l.region(size), "{size} B x {slots}");
    }
    assert_eq!(l.slots(2048), 2);
    assert_eq!(l.slots(65536), 1);
    assert_eq!(l.region(2), 4096);
    // The buffer: the largest size's region, and as much again for the ping-pong.
    let mut spec = crate::spec::rules::rdma(
        crate::spec::TestKind { verb: Verb::Write, measure: Measure::Lat },
        &crate::spec::rules::RdmaRequest::default(),
    )
    .unwrap();
    spec.sizes = vec![2, 65536];
    let plan = SidePlan::new(&spec, true).with_cycle(&spec, 4096);
    assert_eq!((plan.buffer_len, plan.slots.slots(2)), (2 * 65536, 64));
}

#[test]
fn reports_carry_perftests_units_both_ways() {
    let spec = crate::spec::rules::rdma(
        crate::spec::TestKind { verb: Verb::Write, measure: Measure::Bw },
        &crate::spec::rules::RdmaRequest::default(),
    )
    .unwrap();
    let r = BwReport { size: 65536, iters: 5000, peak: 0.0, avg: 100.0, msg_rate: 0.0016 };
    let got = result_of(&r, &spec, false);
    let bw = got.bw.unwrap();
    assert_eq!(bw.avg_bytes_per_sec, 100.0 * 1_048_576.0);
    assert_eq!(bw.peak_bytes_per_sec, None, "0 is perftest's 'not computed'");
    assert_eq!(got.iterations, 5000);
    let back = report_of(65536, &bw, false);
    assert_eq!((back.avg, back.iters), (100.0, 5000));
    assert!((report_of(65536, &bw, true).avg - 100.0 * 1_048_576.0 * 8.0 / 1e9).abs() < 1e-9);
}

#[test]
fn only_gids_of_one_kind_connect() {
    let mut v4 = [0u8; 16];
    v4[10..].copy_from_slice(&[0xff, 0xff, 198, 18, 0, 1]);
    let mut v6 = [0u8; 16];
    v6[0] = 0xfe;
    v6[1] = 0x80;
    let k = |gid| Key { lid: 0, out_reads: 1, qpn: 1, psn: 1, rkey: 1, vaddr: 0, gid, srqn: 0 };
    assert!(check_gids(&k(Some(v4)), &k(Some(v4))).is_ok());
    let e = check_gids(&k(Some(v4)), &k(Some(v6))).unwrap_err();
    assert!(e.message.contains("-x of the same kind"), "{e}");
    assert!(check_gids(&k(None), &k(None)).is_ok());
}
