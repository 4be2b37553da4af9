use std::time::Duration;

use super::rules::{self, RdmaRequest, TcpRequest};
use super::*;

const WRITE_BW: TestKind = TestKind { verb: Verb::Write, measure: Measure::Bw };
const SEND_BW: TestKind = TestKind { verb: Verb::Send, measure: Measure::Bw };
const READ_LAT: TestKind = TestKind { verb: Verb::Read, measure: Measure::Lat };
const WRITE_LAT: TestKind = TestKind { verb: Verb::Write, measure: Measure::Lat };
const SEND_LAT: TestKind = TestKind { verb: Verb::Send, measure: Measure::Lat };
const ATOMIC_BW: TestKind = TestKind { verb: Verb::Atomic, measure: Measure::Bw };

/// The verbs rules unless a test names its backend: they are the ones under test, and
/// the platform's default is NetworkDirect on Windows (where these tests run too).
fn spec(kind: TestKind, r: RdmaRequest) -> TestSpec {
    rules::rdma(kind, &verbs_unless_named(r)).unwrap()
}

fn verbs_unless_named(r: RdmaRequest) -> RdmaRequest {
    RdmaRequest { backend: r.backend.or(Some(Backend::Verbs)), ..r }
}

fn rdma(s: &TestSpec) -> &RdmaSpec {
    s.rdma().unwrap()
}

#[test]
fn perftest_defaults_per_test() {
    let c = spec(WRITE_BW, RdmaRequest::default());
    assert_eq!(c.sizes, [65536]);
    assert_eq!(c.run, RunLength::Iterations(5000));
    let r = rdma(&c);
    assert_eq!((r.tx_depth, r.rx_depth, r.inline_size, r.qps), (128, 1, 0, 1));
    // 64 KiB > 8 KiB: signaled one by one, as perftest does.
    assert_eq!(r.cq_mod, 1);
    let c = spec(SEND_BW, RdmaRequest::default());
    assert_eq!((c.run, rdma(&c).rx_depth), (RunLength::Iterations(1000), 512));
    // perftest's 512 for send latency too, clamped to the iterations as it does.
    assert_eq!(rdma(&spec(SEND_LAT, RdmaRequest::default())).rx_depth, 512);
    let few = RdmaRequest { iters: Some(100), ..Default::default() };
    assert_eq!(rdma(&spec(SEND_LAT, few)).rx_depth, 100);
    let c = spec(READ_LAT, RdmaRequest::default());
    assert_eq!((c.sizes.clone(), rdma(&c).tx_depth, rdma(&c).inline_size), (vec![2], 1, 0));
    assert_eq!(rdma(&spec(WRITE_LAT, RdmaRequest::default())).inline_size, 220);
    assert_eq!(rdma(&spec(SEND_LAT, RdmaRequest::default())).inline_size, 236);
    let ud = RdmaRequest { service: Some(Service::Ud), ..Default::default() };
    assert_eq!(rdma(&spec(SEND_LAT, ud)).inline_size, 188);
    let small = RdmaRequest { size: Some(4096), ..Default::default() };
    assert_eq!(rdma(&spec(WRITE_BW, small)).cq_mod, 100);
    assert_eq!(spec(ATOMIC_BW, RdmaRequest::default()).sizes, [8]);
    assert_eq!(spec(WRITE_BW, RdmaRequest::default()).id(), "write_bw");
    // RC's ACK timeout and retries: perftest's 14 (67 ms) and 7, or as asked.
    assert_eq!((r.qp_timeout, r.retry_count), (14, 7));
    let fast_fail =
        RdmaRequest { qp_timeout: Some(10), retry_count: Some(2), ..Default::default() };
    let c = spec(WRITE_BW, fast_fail);
    assert_eq!((rdma(&c).qp_timeout, rdma(&c).retry_count), (10, 2));
    // perftest's rate limiter: Gb/s and a burst of the send queue unless asked.
    let paced = spec(WRITE_BW, RdmaRequest { rate_limit: Some(10.0), ..Default::default() });
    let l = rdma(&paced).rate_limit.unwrap();
    assert_eq!((l.units, l.burst), (RateUnits::GbitPerSec, 128));
    // 10 Gb/s of 64 KiB: 19073.5 messages/s, a burst of 128 every 6.71 ms.
    assert!((l.messages_per_sec(65536) - 1e10 / 8.0 / 65536.0).abs() < 1e-6);
    assert_eq!(l.gap_ns(65536), 6_710_886);
    let m = crate::spec::RateLimit { rate: 4.0, units: RateUnits::MibPerSec, burst: 4 };
    assert_eq!(m.gap_ns(65536), 62_500_000);
    let p = crate::spec::RateLimit { rate: 1000.0, units: RateUnits::MsgPerSec, burst: 5 };
    assert_eq!((p.gap_ns(2), p.gap_ns(1 << 20)), (5_000_000, 5_000_000));
}

#[test]
fn sweeps_and_clamps() {
    let c = spec(WRITE_BW, RdmaRequest { all: true, ..Default::default() });
    assert_eq!(c.sizes.len(), 23);
    assert_eq!((c.sizes[0], *c.sizes.last().unwrap()), (2, 1 << 23));
    let ud = RdmaRequest {
        all: true,
        service: Some(Service::Ud),
        mtu: Some(1024),
        ..Default::default()
    };
    assert_eq!(*spec(SEND_BW, ud).sizes.last().unwrap(), 1024);
    let c = spec(WRITE_BW, RdmaRequest { iters: Some(10), ..Default::default() });
    assert_eq!((rdma(&c).tx_depth, rdma(&c).cq_mod), (10, 1));
    let c = spec(WRITE_BW, RdmaRequest { duration: Some(8), ..Default::default() });
    assert_eq!(c.run, RunLength::Duration { secs: 8, margin_ms: 2000 });
    assert_eq!(c.run.window(), Some(Duration::from_secs(4)));
}

#[test]
fn tcp_specs_take_iperf3s_defaults_and_derive_their_queues() {
    let c =
        rules::tcp(Measure::Bw, &TcpRequest { streams: Some(4), ..Default::default() }).unwrap();
    assert_eq!((c.id(), c.connections(), c.sizes.clone()), ("tcp_bw", 4, vec![65536]));
    assert_eq!(c.title(), "TCP BW Test");
    let q = c.queues();
    assert_eq!((q.tx_depth, q.cq_mod), (1, 1), "every write is stamped when it returns");
    let lat = TcpRequest { all: true, iters: Some(15), ..Default::default() };
    let c = rules::tcp(Measure::Lat, &lat).unwrap();
    // The receive depth follows the spec's own iterations: both sides compute the same.
    assert_eq!(c.queues().rx_depth, 15);
    assert!(matches!(c.link, Link::Tcp(TcpSpec { nodelay: true, .. })), "tcp_lat sets TCP_NODELAY");
    let err = rules::tcp(Measure::Lat, &TcpRequest { streams: Some(2), ..Default::default() });
    assert!(err.unwrap_err().message.contains("one ping-pong stream"));
    let err = rules::tcp(Measure::Bw, &TcpRequest { window: Some(1 << 40), ..Default::default() });
    assert!(err.unwrap_err().message.contains("between 4 KiB and 1 GiB"));
}

#[test]
fn a_spec_survives_the_hello_whole() {
    // serve runs the client's spec as it arrives: -a -b keeps its moderation on both sides.
    let c = spec(
        WRITE_BW,
        RdmaRequest { all: true, bidirectional: true, iters: Some(5), ..Default::default() },
    );
    let wire = serde_json::to_string(&c).unwrap();
    let back: TestSpec = serde_json::from_str(&wire).unwrap();
    assert_eq!(back, c);
    back.validate().unwrap();
    assert_eq!(back.queues(), c.queues());
}

#[test]
fn a_peers_spec_is_bounded_before_use() {
    let mut c = spec(WRITE_BW, RdmaRequest::default());
    c.sizes = vec![1 << 62];
    assert!(c.validate().unwrap_err().message.contains("the largest message"));
    c.sizes = vec![8; 100];
    assert!(c.validate().unwrap_err().message.contains("1 to 64 sizes"));
    let mut c = spec(WRITE_BW, RdmaRequest::default());
    if let Link::Rdma(r) = &mut c.link {
        r.qps = 1 << 20;
    }
    assert!(c.validate().unwrap_err().message.contains("between 1 and 1024 QPs"));
    let mut c = rules::tcp(Measure::Bw, &TcpRequest::default()).unwrap();
    c.run = RunLength::Duration { secs: 20_000_000_000, margin_ms: 5000 };
    assert!(c.validate().unwrap_err().message.contains("at most 86400 seconds"));
}

#[test]
fn buffers_are_bounded_on_each_side() {
    let tcp = |size, streams| TcpRequest {
        size: Some(size),
        streams: Some(streams),
        ..Default::default()
    };
    // Found by tests/fuzz_protocol.rs: 15 QPs of 1.3 GB messages (41 GB of buffers), or
    // a hello for 128 streams of 2 GiB - 1 (256 GiB, each zeroed before the run).
    let big = RdmaRequest { size: Some(1_386_287_474), qps: Some(15), ..Default::default() };
    let e = rules::rdma(SEND_BW, &verbs_unless_named(big)).unwrap_err();
    assert_eq!(
        e.message,
        "-s 1386287474 -q 15: 41588624220 bytes of buffers, over the 4 GiB one side may hold"
    );
    let e = rules::tcp(Measure::Bw, &tcp(rules::MAX_MESSAGE, 128)).unwrap_err();
    assert!(e.message.starts_with("-s 2147483647 -P 128: "), "{e}");
    // The largest message on one QP or two streams, and a sweep on 256 QPs, still run.
    let largest = RdmaRequest { size: Some(rules::MAX_MESSAGE), ..Default::default() };
    assert_eq!(spec(WRITE_BW, largest).buffer_bytes(), 2 * rules::MAX_MESSAGE);
    assert!(rules::tcp(Measure::Bw, &tcp(rules::MAX_MESSAGE, 2)).is_ok());
    let sweep = RdmaRequest { all: true, qps: Some(256), ..Default::default() };
    assert_eq!(spec(WRITE_BW, sweep).buffer_bytes(), rules::MAX_BUFFERS);
    let sweep = RdmaRequest { all: true, qps: Some(257), ..Default::default() };
    assert!(rules::rdma(WRITE_BW, &verbs_unless_named(sweep)).is_err());
}

#[test]
fn sizes_parse_like_perftest() {
    assert_eq!(parse_size("65536"), Ok(65536));
    assert_eq!(parse_size("64K"), Ok(65536));
    assert_eq!(parse_size("8m"), Ok(8 << 20));
    assert!(parse_size("0").is_err());
    assert!(parse_size("12Q").unwrap_err().contains("not a size"));
    assert!(parse_size("99999999999999999G").unwrap_err().contains("out of range"));
    assert_eq!(parse_cpu_list("0,2-3").unwrap(), [0, 2, 3]);
    assert!(parse_cpu_list("3-1").is_err());
    // Many ranges: bounded all together (a 48 KB list aborted the process before).
    assert!(parse_cpu_list(&vec!["0-4095"; 4000].join(",")).is_err());
    assert_eq!(parse_cpu_list(&vec!["1"; 8192].join(",")).map(|c| c.len()).ok(), Some(8192));
    let e = parse_cpu_list(&vec!["1"; 8193].join(",")).unwrap_err().to_string();
    assert!(e.ends_with(": more than 8192 CPUs listed in all"), "{e}");
    let e = parse_cpu_list("0-65535").unwrap_err().to_string();
    assert_eq!(e, "--cpus '0-65535': CPU 65535: CPUs are numbered below 8192");
    assert!(parse_cpu_list("").is_err());
    // One budget across lists: a tree's NUMA nodes all together.
    let mut left = crate::spec::rules::MAX_CPUS;
    let within = crate::spec::rules::cpu_list_within;
    assert_eq!(within("0-4095\n", &mut left).map(|c| c.len()), Ok(4096));
    assert_eq!(within("", &mut left), Ok(vec![]));
    assert_eq!(within("4096-8191", &mut left).map(|c| c.len()), Ok(4096));
    assert_eq!(left, 0);
    assert_eq!(within("0", &mut left), Err("more than 8192 CPUs listed in all".into()));
}

#[test]
fn invalid_combinations_are_one_clear_line() {
    let d = RdmaRequest::default;
    let cases: Vec<(TestKind, RdmaRequest, &str)> = vec![
        (READ_LAT, RdmaRequest { service: Some(Service::Uc), ..d() }, "RC only"),
        (WRITE_BW, RdmaRequest { service: Some(Service::Ud), ..d() }, "RC or UC only"),
        (ATOMIC_BW, RdmaRequest { size: Some(16), ..d() }, "always 8 bytes"),
        (ATOMIC_BW, RdmaRequest { all: true, ..d() }, "nothing to sweep"),
        (
            WRITE_BW,
            RdmaRequest { duration: Some(10), all: true, ..d() },
            "-D cannot be combined with -a",
        ),
        (WRITE_BW, RdmaRequest { duration: Some(4), margin: Some(2), ..d() }, "twice the margin"),
        (WRITE_BW, RdmaRequest { iters: Some(3), ..d() }, "at least 5 iterations"),
        (READ_LAT, RdmaRequest { qps: Some(2), ..d() }, "one QP"),
        (READ_LAT, RdmaRequest { bidirectional: true, ..d() }, "bidirectional"),
        (WRITE_BW, RdmaRequest { mtu: Some(1500), ..d() }, "256, 512, 1024, 2048, 4096"),
        (WRITE_BW, RdmaRequest { rx_depth: Some(64), ..d() }, "posts no receives"),
        (READ_LAT, RdmaRequest { inline_size: Some(64), ..d() }, "no payload to inline"),
        (
            WRITE_BW,
            RdmaRequest { post_list: Some(3), iters: Some(1000), ..d() },
            "multiple of the post list",
        ),
        (WRITE_LAT, RdmaRequest { events: true, ..d() }, "polls memory"),
        (
            SEND_BW,
            RdmaRequest { service: Some(Service::Ud), size: Some(8192), mtu: Some(4096), ..d() },
            "must fit the MTU",
        ),
        (WRITE_BW, RdmaRequest { margin: Some(1), ..d() }, "needs -D"),
        (
            WRITE_BW,
            RdmaRequest { all: true, size: Some(64), ..d() },
            "-a -s 64: a sweep runs every size",
        ),
        (
            WRITE_BW,
            RdmaRequest { atomic_type: Some(AtomicType::CmpAndSwap), ..d() },
            "only the atomic tests",
        ),
        (WRITE_BW, RdmaRequest { tx_depth: Some(0), ..d() }, "-t 0"),
        (WRITE_BW, RdmaRequest { qp_timeout: Some(32), ..d() }, "-u 32: between 0 and 31"),
        (SEND_BW, RdmaRequest { retry_count: Some(8), ..d() }, "--retry_count 8: between 0 and 7"),
        (WRITE_BW, RdmaRequest { sl: Some(16), ..d() }, "-S 16: a service level is 0 to 15"),
        (WRITE_BW, RdmaRequest { flow_label: Some(1 << 20), ..d() }, "a flow label is 20 bits"),
        (WRITE_BW, RdmaRequest { sl: Some(1), rdma_cm: true, ..d() }, "not with -R yet"),
        (
            WRITE_BW,
            RdmaRequest { traffic_class: Some(8), backend: Some(Backend::Nd), ..d() },
            "NetworkDirect does not set a path's class",
        ),
        (WRITE_BW, RdmaRequest { shared_receives: true, ..d() }, "write_bw posts no receives"),
        (
            SEND_BW,
            RdmaRequest { shared_receives: true, qps: Some(8), rx_depth: Some(4), ..d() },
            "-r 4 is less than -q 8",
        ),
        (
            SEND_BW,
            RdmaRequest { shared_receives: true, validate: true, ..d() },
            "whichever QP's receive came first",
        ),
        (
            SEND_BW,
            RdmaRequest { shared_receives: true, backend: Some(Backend::Nd), ..d() },
            "--use-srq: not implemented for NetworkDirect",
        ),
        (READ_LAT, RdmaRequest { write_with_imm: true, ..d() }, "not read_lat"),
        (WRITE_BW, RdmaRequest { send_with_imm: true, ..d() }, "send_bw and send_lat send"),
        (
            WRITE_BW,
            RdmaRequest { write_with_imm: true, bidirectional: true, duration: Some(4), ..d() },
            "-b with write_bw --write_with_imm needs -n",
        ),
        (
            WRITE_BW,
            RdmaRequest { write_with_imm: true, warm_up: true, ..d() },
            "without immediate data",
        ),
        (
            WRITE_BW,
            RdmaRequest { write_with_imm: true, backend: Some(Backend::Nd), ..d() },
            "immediate data is not supported by NetworkDirect",
        ),
        (WRITE_LAT, RdmaRequest { reversed: true, ..d() }, "write_lat's traffic goes both ways"),
        (
            SEND_BW,
            RdmaRequest { reversed: true, bidirectional: true, ..d() },
            "-b already sends both ways",
        ),
        (WRITE_BW, RdmaRequest { rate_limit: Some(0.0), ..d() }, "--rate_limit 0: a rate above 0"),
        (WRITE_BW, RdmaRequest { rate_limit: Some(f64::NAN), ..d() }, "a rate above 0"),
        (WRITE_LAT, RdmaRequest { rate_limit: Some(1.0), ..d() }, "paces a bandwidth test"),
        (
            WRITE_BW,
            RdmaRequest { burst_size: Some(8), ..d() },
            "--burst_size: only with --rate_limit",
        ),
        (
            WRITE_BW,
            RdmaRequest { rate_units: Some(RateUnits::MsgPerSec), ..d() },
            "--rate_units: only",
        ),
        (
            WRITE_BW,
            RdmaRequest { rate_limit: Some(1.0), burst_size: Some(0), ..d() },
            "--burst_size 0: between 1 and 1048576",
        ),
        (
            SEND_BW,
            RdmaRequest { warm_up: true, ..d() },
            "--perform_warm_up: write, read and atomic",
        ),
        (WRITE_LAT, RdmaRequest { warm_up: true, ..d() }, "--perform_warm_up"),
        (
            ATOMIC_BW,
            RdmaRequest { warm_up: true, validate: true, ..d() },
            "would join the checked sum",
        ),
        (
            ATOMIC_BW,
            RdmaRequest { backend: Some(Backend::Nd), ..d() },
            "not supported by NetworkDirect",
        ),
    ];
    for (kind, req, needle) in cases {
        let err = rules::rdma(kind, &verbs_unless_named(req.clone())).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Usage);
        assert!(
            err.message.contains(needle),
            "{}: {req:?} gave {err:?}, wanted {needle:?}",
            kind.id()
        );
    }
}

#[test]
fn a_shared_receive_queue_splits_its_depth_among_the_qps() {
    let r = RdmaRequest {
        shared_receives: true,
        qps: Some(4),
        iters: Some(1000),
        ..RdmaRequest::default()
    };
    let q = spec(SEND_BW, r).queues();
    assert!(q.shared_receives);
    assert_eq!(q.rx_depth, 512);
    assert_eq!(q.receives_per_connection(4, 1000), 128, "512 shared by 4 QPs");
    assert_eq!(q.receives_per_connection(4, 100), 100, "never more than a size's messages");
    let own = spec(SEND_BW, RdmaRequest { qps: Some(4), ..RdmaRequest::default() }).queues();
    assert!(!own.shared_receives);
    assert_eq!(own.receives_per_connection(4, 1000), 512, "a receive queue each");
    let lat = spec(SEND_LAT, RdmaRequest { shared_receives: true, ..RdmaRequest::default() });
    assert_eq!(lat.queues().receives_per_connection(1, 1000), 512);
}

#[test]
fn writes_with_immediate_data_receive_as_sends_do() {
    let d = RdmaRequest::default;
    let w = spec(WRITE_BW, RdmaRequest { write_with_imm: true, ..d() });
    assert!(w.receives() && rdma(&w).immediate);
    assert_eq!(w.title(), "RDMA_Write_imm BW Test");
    assert_eq!(rdma(&w).rx_depth, 512, "a receive queue as send_bw's");
    let plain = spec(WRITE_BW, d());
    assert!(!plain.receives());
    assert_eq!((plain.title().as_str(), rdma(&plain).rx_depth), ("RDMA_Write BW Test", 1));
    let s = spec(SEND_LAT, RdmaRequest { send_with_imm: true, ..d() });
    assert_eq!(s.title(), "Send_imm Latency Test");
    // write_lat with immediates completes at the receiver, so -e has something to wait on.
    let e = spec(WRITE_LAT, RdmaRequest { write_with_imm: true, events: true, ..d() });
    assert!(e.receives() && rdma(&e).events);
}

#[test]
fn margins_are_a_quarter_of_the_duration_to_the_millisecond() {
    let run = |secs, margin| {
        let r = TcpRequest { duration: Some(secs), margin, ..Default::default() };
        rules::tcp(Measure::Bw, &r).unwrap().run
    };
    for (secs, margin_ms, window_ms) in [(2, 500, 1000), (3, 750, 1500), (10, 2500, 5000)] {
        let r = run(secs, None);
        assert_eq!(r, RunLength::Duration { secs, margin_ms }, "-D {secs}");
        assert_eq!(r.window(), Some(Duration::from_millis(window_ms)), "-D {secs}");
        assert_eq!(r.duration().unwrap().1, Duration::from_millis(margin_ms));
    }
    // -f stays whole seconds.
    assert_eq!(run(10, Some(1)), RunLength::Duration { secs: 10, margin_ms: 1000 });
    // In JSON, seconds: whole as before, else a fraction; both read back.
    let json = |r: RunLength| serde_json::to_string(&r).unwrap();
    assert_eq!(json(run(3, None)), r#"{"duration":{"secs":3,"margin":0.75}}"#);
    assert_eq!(json(run(8, None)), r#"{"duration":{"secs":8,"margin":2}}"#);
    let back: RunLength = serde_json::from_str(r#"{"duration":{"secs":3,"margin":0.75}}"#).unwrap();
    assert_eq!(back, run(3, None));
    let bad = serde_json::from_str::<RunLength>(r#"{"duration":{"secs":3,"margin":-1}}"#);
    assert!(bad.is_err());
}
