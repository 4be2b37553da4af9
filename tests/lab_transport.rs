//! The backend-neutral interface, driven generically: the same checks will run over
//! NetworkDirect's test provider and TCP. Lab only for verbs (ci/lab-vm).
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use ffi::verbs::QueuePair;
use rdmabench::spec::plan::SidePlan;
use rdmabench::spec::rules::{self, RdmaRequest};
use rdmabench::spec::{Measure, TestKind, Verb};
use rdmabench::transport::verbs::{VerbsOptions, VerbsTransport};
use rdmabench::transport::{
    Backend, Completion, CompletionKind, Connection, ConnectionConfig, Op, Polled, Service, Status,
    Transport, WorkRequest,
};

const WAIT: Duration = Duration::from_secs(20);

fn verbs() -> VerbsTransport {
    let opts = VerbsOptions {
        device: std::env::var("RDMABENCH_DEVICE").ok(),
        port: 1,
        ..Default::default()
    };
    VerbsTransport::open(&opts).unwrap_or_else(|e| panic!("lab test: {e}; run inside ci/lab-vm"))
}

/// Two connected connections, their endpoint records passed through JSON as the
/// control channel will carry them.
fn pair<T: Transport>(t: &T, cfg: &ConnectionConfig) -> (T::Connection, T::Connection) {
    let (pa, ea) = t.prepare(cfg).unwrap();
    let (pb, eb) = t.prepare(cfg).unwrap();
    let ea: T::Endpoint = serde_json::from_str(&serde_json::to_string(&ea).unwrap()).unwrap();
    let eb: T::Endpoint = serde_json::from_str(&serde_json::to_string(&eb).unwrap()).unwrap();
    (t.connect(pa, &eb).unwrap(), t.connect(pb, &ea).unwrap())
}

/// The next completion, backend-neutral (every field decoded from what the poll left).
fn next<C: Connection>(c: &mut C) -> Completion {
    let mut out = [C::Completion::default()];
    let start = Instant::now();
    while c.poll(&mut out).unwrap() == 0 {
        assert!(start.elapsed() < WAIT, "no completion within {WAIT:?}");
    }
    out[0].completion()
}

fn wr(wr_id: u64, op: Op, local_offset: usize, len: u32, remote_offset: u64) -> WorkRequest {
    WorkRequest { wr_id, op, local_offset, len, remote_offset, signaled: true, inline: false }
}

/// Write, read back, send, send with immediate, atomics — checked byte for byte.
fn exercise_connected<C: Connection>(a: &mut C, b: &mut C) {
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    a.local_mut()[..4096].copy_from_slice(&data);
    a.post(&wr(1, Op::Write, 0, 4096, 8192)).unwrap();
    let c = next(a);
    assert_eq!((c.wr_id, c.status, c.kind), (1, Status::Success, CompletionKind::Write));
    assert_eq!(&b.local()[8192..8192 + 4096], &data[..]);

    a.post(&wr(2, Op::Read, 16384, 4096, 8192)).unwrap();
    let c = next(a);
    assert_eq!((c.kind, c.byte_len), (CompletionKind::Read, 4096));
    assert_eq!(&a.local()[16384..16384 + 4096], &data[..]);

    b.post_recv(10, 0, 4096).unwrap();
    a.post(&wr(3, Op::SendImm(99), 0, 100, 0)).unwrap();
    assert_eq!(next(a).kind, CompletionKind::Send);
    let r = next(b);
    assert_eq!((r.wr_id, r.kind, r.byte_len, r.imm), (10, CompletionKind::Recv, 100, Some(99)));
    assert_eq!(&b.local()[..100], &data[..100]);

    b.local_mut()[32768..32776].copy_from_slice(&10u64.to_ne_bytes());
    a.post(&wr(4, Op::FetchAdd(5), 40000, 8, 32768)).unwrap();
    assert_eq!(next(a).kind, CompletionKind::Atomic);
    assert_eq!(u64::from_ne_bytes(a.local()[40000..40008].try_into().unwrap()), 10);
    a.post(&wr(5, Op::CompareSwap { compare: 15, swap: 1 }, 40000, 8, 32768)).unwrap();
    next(a);
    assert_eq!(u64::from_ne_bytes(b.local()[32768..32776].try_into().unwrap()), 1);
    a.check_state().unwrap();
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_verbs_transport_rc_moves_exact_bytes() {
    let t = verbs();
    assert!(t.capabilities().atomics && t.capabilities().rdma_read);
    let (mut a, mut b) = pair(&t, &ConnectionConfig::default());
    exercise_connected(&mut a, &mut b);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_a_plans_queue_pair_has_the_depth_it_reports() {
    // What the report says (the plan's send queue, params.tx_depth) is what the QP was
    // created with: ibv_query_qp reads it back, after the provider's rounding (rxe:
    // 2^k - 1), which -t's 4 would have kept under 16 (the depth once reported).
    let t = verbs();
    let t4 = RdmaRequest { tx_depth: Some(4), backend: Some(Backend::Verbs), ..Default::default() };
    for verb in [Verb::Write, Verb::Read] {
        let spec = rules::rdma(TestKind { verb, measure: Measure::Lat }, &t4).unwrap();
        let plan = SidePlan::new(&spec, true);
        assert_eq!(plan.send_queue, 16, "{verb:?}");
        let (a, _b) = pair(&t, &plan.connection());
        // rxe writes back the 16 asked for and reports 31 when queried.
        assert!(a.qp().caps().max_send_wr >= 16, "{verb:?}: {:?}", a.qp().caps());
        let queried = a.qp().queried_caps().unwrap();
        assert!((16..32).contains(&queried.max_send_wr), "{verb:?}: {queried:?}");
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_verbs_transport_ud_sends_and_refuses_one_sided_ops() {
    let t = verbs();
    let cfg = ConnectionConfig { service: Service::Ud, ..Default::default() };
    let (mut a, mut b) = pair(&t, &cfg);
    let caps = a.capabilities().clone();
    assert_eq!(caps.recv_overhead, 40);
    let err = caps.check(&Op::Write, 64, false).unwrap_err();
    assert_eq!(err.to_string(), "RDMA write is not supported by verbs");
    a.local_mut()[..256].fill(0xab);
    b.post_recv(1, 0, 1024).unwrap();
    a.post(&wr(2, Op::Send, 0, 256, 0)).unwrap();
    assert_eq!(next(&mut a).kind, CompletionKind::Send);
    let r = next(&mut b);
    assert_eq!(r.byte_len, 40 + 256, "the GRH is counted in byte_len");
    // local() starts after the GRH, so the payload is at offset 0.
    assert!(b.local()[..256].iter().all(|&x| x == 0xab));
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_verbs_transport_failures_are_typed() {
    let t = verbs();
    let (mut a, _b) = pair(&t, &ConnectionConfig::default());
    // Out of the peer's buffer: refused before posting.
    let err = a.post(&wr(1, Op::Write, 0, 16, 65536 - 8)).unwrap_err();
    assert_eq!(err.to_string(), "remote range: 65528+16 is outside the 65536-byte buffer");
    // A send larger than the peer's receive breaks both QPs: the receiver sees a local
    // length error (or, on rxe, a local QP operation error), the sender a remote error (REM_INV_REQ on most HCAs, REM_OP on rxe).
    let (mut c, mut d) = pair(&t, &ConnectionConfig::default());
    d.post_recv(1, 0, 8).unwrap();
    c.post(&wr(2, Op::Send, 0, 64, 0)).unwrap();
    let failed = next(&mut c);
    match failed.status {
        Status::Failed(f) => {
            assert!(
                ["IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_OP_ERR"].contains(&f.name()),
                "{failed:?}"
            )
        }
        Status::Success => panic!("a 64-byte send into an 8-byte receive succeeded"),
    }
    let receiver = next(&mut d);
    // LOC_LEN_ERR on HCAs; rxe reports LOC_QP_OP_ERR.
    assert!(
        matches!(
            receiver.status,
            Status::Failed(f) if ["IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR"].contains(&f.name())
        ),
        "{receiver:?}"
    );
    assert_eq!(receiver.wr_id, 1);
    let err = c.check_state().unwrap_err();
    assert!(err.to_string().contains("is in state Error"), "{err}");
    // A service mismatch is refused at connect, naming both sides.
    let (p_rc, _) = t.prepare(&ConnectionConfig::default()).unwrap();
    let (_, e_uc) =
        t.prepare(&ConnectionConfig { service: Service::Uc, ..Default::default() }).unwrap();
    let err = t.connect(p_rc, &e_uc).err().expect("RC to UC is refused");
    assert_eq!(err.to_string(), "connection type mismatch: this side uses Rc, the peer Uc");
}
