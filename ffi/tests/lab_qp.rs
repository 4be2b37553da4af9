//! Queue pairs against the real verbs stack: every operation, every QP type, event
//! mode, the error paths and clean teardown. Lab only (ci/lab-vm); each test fails when
//! the device is missing.
#![cfg(target_os = "linux")]

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use rdmabench_ffi::verbs::loopback::{Loopback, LoopbackConfig};
use rdmabench_ffi::verbs::{
    Access, CmListener, Completion, CompletionQueue, ExtendedQpError, ExtendedQueuePair,
    GenericQueuePair, QpCaps, QpState, QpType, QueuePair, RemoteBuffer, ResolvedRoute, RtsAttr,
    SendBatch, SendOp, SendRequest, UdDest, WcOpcode, WcStatus, DEFAULT_QKEY, GRH_LEN,
};

const WAIT: Duration = Duration::from_secs(20);

/// The address rdma_cm tests use: ci/lab-vm sets it (rdma_cm cannot route over lo).
fn cm_addr(port: u16) -> SocketAddr {
    let ip: Ipv4Addr = std::env::var("RDMABENCH_CM_ADDR")
        .expect("lab test: RDMABENCH_CM_ADDR unset; run inside ci/lab-vm")
        .parse()
        .expect("RDMABENCH_CM_ADDR is an IPv4 address");
    SocketAddr::from((ip, port))
}

fn lab(cfg: LoopbackConfig) -> Loopback {
    Loopback::new(&cfg).unwrap_or_else(|e| panic!("lab test: {e}; run inside ci/lab-vm"))
}

/// A loopback pair of extended QPs: soft-RoCE has the extended send API.
fn lab_ext(cfg: LoopbackConfig) -> Loopback<ExtendedQueuePair> {
    Loopback::new_extended(&cfg).unwrap_or_else(|e| panic!("lab test: {e}; run inside ci/lab-vm"))
}

fn rc(buf_len: usize) -> Loopback {
    lab(LoopbackConfig { buf_len, ..Default::default() })
}

/// Polls until one completion arrives; panics after WAIT instead of hanging.
fn next(cq: &CompletionQueue) -> Completion {
    let mut wc = [Completion::default()];
    let start = Instant::now();
    loop {
        if cq.poll(&mut wc).unwrap() == 1 {
            return wc[0].clone();
        }
        assert!(start.elapsed() < WAIT, "no completion within {WAIT:?}");
        std::hint::spin_loop();
    }
}

fn ok(cq: &CompletionQueue, wr_id: u64, opcode: WcOpcode) -> Completion {
    let c = next(cq);
    assert!(c.is_success(), "{c:?}: {}", c.status());
    assert_eq!(c.wr_id(), wr_id);
    assert_eq!(c.opcode(), opcode);
    c
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_write_then_read_back_up_to_8_mib() {
    const MIB8: usize = 8 << 20;
    let mut lb = rc(2 * MIB8);
    let remote = lb.b.mr.remote();
    for len in [1usize, 2, 4096, 65536, 1 << 20, MIB8] {
        let data = pattern(len, len as u8);
        lb.a.mr.as_mut_slice()[..len].copy_from_slice(&data);
        let src = [lb.a.mr.slice(0, len).unwrap()];
        let wr = SendRequest::new(1, SendOp::Write(remote.slice(0, len as u64).unwrap()), &src)
            .signaled();
        lb.a.qp.post_send(&wr).unwrap();
        ok(&lb.a.cq, 1, WcOpcode::RdmaWrite);
        assert!(lb.b.mr.as_slice()[..len] == data[..], "write of {len} bytes arrived intact");
        // Read it back into the second half of a's buffer.
        let dst = [lb.a.mr.slice(MIB8, len).unwrap()];
        let wr = SendRequest::new(2, SendOp::Read(remote.slice(0, len as u64).unwrap()), &dst)
            .signaled();
        lb.a.qp.post_send(&wr).unwrap();
        let c = ok(&lb.a.cq, 2, WcOpcode::RdmaRead);
        assert_eq!(c.byte_len() as usize, len);
        assert!(
            lb.a.mr.as_slice()[MIB8..MIB8 + len] == data[..],
            "read of {len} bytes came back intact"
        );
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_scatter_gather_write_and_read() {
    let mut lb = lab(LoopbackConfig {
        buf_len: 1 << 16,
        caps: QpCaps { max_send_sge: 4, ..QpCaps::default() },
        ..Default::default()
    });
    let data = pattern(1 << 16, 7);
    lb.a.mr.as_mut_slice().copy_from_slice(&data);
    // Three pieces of a, in reverse order, land contiguously in b.
    let sges = [
        lb.a.mr.slice(2000, 100).unwrap(),
        lb.a.mr.slice(1000, 50).unwrap(),
        lb.a.mr.slice(0, 7).unwrap(),
    ];
    let remote = lb.b.mr.remote().slice(500, 157).unwrap();
    lb.a.qp.post_send(&SendRequest::new(9, SendOp::Write(remote), &sges).signaled()).unwrap();
    ok(&lb.a.cq, 9, WcOpcode::RdmaWrite);
    let expect: Vec<u8> = [&data[2000..2100], &data[1000..1050], &data[0..7]].concat();
    assert_eq!(&lb.b.mr.as_slice()[500..657], &expect[..]);
    // Read those 157 bytes back, scattered over two places of a.
    let dst = [lb.a.mr.slice(40000, 57).unwrap(), lb.a.mr.slice(50000, 100).unwrap()];
    lb.a.qp.post_send(&SendRequest::new(10, SendOp::Read(remote), &dst).signaled()).unwrap();
    ok(&lb.a.cq, 10, WcOpcode::RdmaRead);
    assert_eq!(&lb.a.mr.as_slice()[40000..40057], &expect[..57]);
    assert_eq!(&lb.a.mr.as_slice()[50000..50100], &expect[57..]);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_send_recv_and_immediates() {
    let mut lb = rc(8192);
    let msg = b"hello from a";
    lb.a.mr.as_mut_slice()[..msg.len()].copy_from_slice(msg);
    // Plain send.
    lb.b.qp.post_recv(100, &[lb.b.mr.slice(0, 4096).unwrap()]).unwrap();
    let src = [lb.a.mr.slice(0, msg.len()).unwrap()];
    lb.a.qp.post_send(&SendRequest::new(1, SendOp::Send, &src).signaled()).unwrap();
    ok(&lb.a.cq, 1, WcOpcode::Send);
    let r = ok(&lb.b.cq, 100, WcOpcode::Recv);
    assert_eq!(r.byte_len() as usize, msg.len());
    assert_eq!(r.imm_data(), None);
    assert_eq!(r.qp_num(), lb.b.qp.qp_num());
    assert_eq!(&lb.b.mr.as_slice()[..msg.len()], msg);
    // Send with immediate.
    lb.b.qp.post_recv(101, &[lb.b.mr.slice(0, 4096).unwrap()]).unwrap();
    lb.a.qp.post_send(&SendRequest::new(2, SendOp::SendImm(0xdead_beef), &src).signaled()).unwrap();
    ok(&lb.a.cq, 2, WcOpcode::Send);
    let r = ok(&lb.b.cq, 101, WcOpcode::Recv);
    assert_eq!(r.imm_data(), Some(0xdead_beef));
    // Write with immediate: data lands by RDMA, the immediate consumes a receive.
    lb.b.qp.post_recv(102, &[]).unwrap();
    let remote = lb.b.mr.remote().slice(4096, msg.len() as u64).unwrap();
    lb.a.qp.post_send(&SendRequest::new(3, SendOp::WriteImm(remote, 42), &src).signaled()).unwrap();
    ok(&lb.a.cq, 3, WcOpcode::RdmaWrite);
    let r = ok(&lb.b.cq, 102, WcOpcode::RecvRdmaWithImm);
    assert_eq!(r.imm_data(), Some(42));
    assert_eq!(r.byte_len() as usize, msg.len());
    assert_eq!(&lb.b.mr.as_slice()[4096..4096 + msg.len()], msg);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_shared_receive_queue_feeds_two_qps_and_refuses_their_own_receives() {
    let mut lb = rc(8192);
    let srq = lb.pd.create_srq(8, 1).unwrap();
    assert!(srq.max_wr() >= 8, "SRQ of {} receives", srq.max_wr());
    let (port, gid) = (1, lb.a.endpoint.gid);
    let send_cq = lb.context.create_cq(16, None).unwrap();
    let recv_cq = lb.context.create_cq(16, None).unwrap();
    // Two senders, each connected to a receiver of its own; both receivers take their
    // receives from the one SRQ.
    let mut pairs = Vec::new();
    for k in 0..2u32 {
        let tx = lb.pd.create_qp(QpType::Rc, &send_cq, &send_cq).build().unwrap();
        let rx = lb.pd.create_qp(QpType::Rc, &recv_cq, &recv_cq).srq(&srq).build().unwrap();
        let ends = [(&tx, 0x100 + k), (&rx, 0x200 + k)].map(|(qp, psn)| {
            qp.to_init(&rdmabench_ffi::verbs::InitAttr::new(port)).unwrap();
            qp.endpoint(lb.a.endpoint.lid, gid, psn)
        });
        for (qp, me, peer) in [(&tx, &ends[0], &ends[1]), (&rx, &ends[1], &ends[0])] {
            let av = rdmabench_ffi::verbs::AddressVector::to_peer(peer, port, lb.gid_index);
            qp.to_rtr(Some(&rdmabench_ffi::verbs::RtrAttr::new(peer, av, lb.mtu))).unwrap();
            qp.to_rts(&RtsAttr { sq_psn: me.psn, ..RtsAttr::new(0) }).unwrap();
        }
        pairs.push((tx, rx));
    }
    // A QP over an SRQ says which, and has no receive queue of its own.
    assert!(pairs.iter().all(|(tx, rx)| tx.srq().is_none() && rx.srq().is_some()));
    let e = pairs[0].1.post_recv(9, &[lb.b.mr.slice(0, 64).unwrap()]).unwrap_err();
    assert!(e.to_string().contains("takes its receives from a shared receive queue"), "{e}");
    // Four receives in the pool, 64 bytes apart; each sender sends twice.
    for k in 0..4u64 {
        srq.post_recv(10 + k, &[lb.b.mr.slice(64 * k as usize, 64).unwrap()]).unwrap();
    }
    for k in 0..4usize {
        lb.a.mr.as_mut_slice()[16 * k..16 * k + 16].copy_from_slice(&pattern(16, k as u8));
        let src = [lb.a.mr.slice(16 * k, 16).unwrap()];
        let (tx, _) = &pairs[k % 2];
        tx.post_send(&SendRequest::new(k as u64, SendOp::Send, &src).signaled()).unwrap();
        ok(&send_cq, k as u64, WcOpcode::Send);
    }
    let mut per_qp = [0; 2];
    let mut wr_ids = Vec::new();
    for _ in 0..4 {
        let r = next(&recv_cq);
        assert!(r.is_success(), "{r:?}: {}", r.status());
        assert_eq!(r.opcode(), WcOpcode::Recv);
        assert_eq!(r.byte_len(), 16);
        wr_ids.push(r.wr_id());
        let q =
            pairs.iter().position(|(_, rx)| rx.qp_num() == r.qp_num()).expect("a receiver's QPN");
        per_qp[q] += 1;
    }
    assert_eq!(per_qp, [2, 2], "each receiver took two of the pool's receives");
    wr_ids.sort_unstable();
    assert_eq!(wr_ids, [10, 11, 12, 13], "the SRQ's receives are consumed in order");
    // Every message landed whole in one of the pool's buffers.
    let mut landed: Vec<Vec<u8>> =
        (0..4).map(|k| lb.b.mr.as_slice()[64 * k..64 * k + 16].to_vec()).collect();
    landed.sort();
    let mut sent: Vec<Vec<u8>> = (0..4).map(|k| pattern(16, k as u8)).collect();
    sent.sort();
    assert_eq!(landed, sent);
    // A receive prepared on a QP over the SRQ goes to the SRQ.
    let (tx, rx) = &pairs[1];
    let mut r = rx.prepare_recv(&lb.b.mr.slice(512, 64).unwrap()).unwrap();
    rx.post_prepared_recv(&mut r, &lb.b.mr, 40).unwrap();
    let src = [lb.a.mr.slice(0, 16).unwrap()];
    tx.post_send(&SendRequest::new(7, SendOp::Send, &src).signaled()).unwrap();
    ok(&send_cq, 7, WcOpcode::Send);
    let r = ok(&recv_cq, 40, WcOpcode::Recv);
    assert_eq!(r.qp_num(), rx.qp_num());
    assert_eq!(&lb.b.mr.as_slice()[512..528], &pattern(16, 0)[..]);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_inline_sends() {
    let mut lb = lab(LoopbackConfig {
        caps: QpCaps { max_inline_data: 64, ..QpCaps::default() },
        ..Default::default()
    });
    let inline_max = lb.a.qp.caps().max_inline_data as usize;
    assert!(inline_max >= 64, "provider gave {inline_max} inline bytes");
    lb.a.mr.as_mut_slice()[..64].copy_from_slice(&pattern(64, 3));
    lb.b.qp.post_recv(7, &[lb.b.mr.slice(0, 128).unwrap()]).unwrap();
    let src = [lb.a.mr.slice(0, 64).unwrap()];
    lb.a.qp.post_send(&SendRequest::new(1, SendOp::Send, &src).inline().signaled()).unwrap();
    // Inline copies at post time: changing the source now must not change what arrives.
    lb.a.mr.as_mut_slice()[..64].fill(0);
    ok(&lb.a.cq, 1, WcOpcode::Send);
    ok(&lb.b.cq, 7, WcOpcode::Recv);
    assert_eq!(&lb.b.mr.as_slice()[..64], &pattern(64, 3)[..]);
    // Inline write too.
    lb.a.mr.as_mut_slice()[..8].copy_from_slice(b"inline!!");
    let remote = lb.b.mr.remote().slice(1000, 8).unwrap();
    let src = [lb.a.mr.slice(0, 8).unwrap()];
    lb.a.qp
        .post_send(&SendRequest::new(2, SendOp::Write(remote), &src).inline().signaled())
        .unwrap();
    ok(&lb.a.cq, 2, WcOpcode::RdmaWrite);
    assert_eq!(&lb.b.mr.as_slice()[1000..1008], b"inline!!");
    // Over the limit: refused before posting.
    let big = [lb.a.mr.slice(0, inline_max + 1).unwrap()];
    let err = lb.a.qp.post_send(&SendRequest::new(3, SendOp::Send, &big).inline()).unwrap_err();
    assert!(err.is_invalid_request() && err.to_string().contains("inline"), "{err}");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_ten_thousand_fetch_adds_sum_exactly() {
    let lb = lab(LoopbackConfig { cq_entries: 1024, ..Default::default() });
    let counter = lb.b.mr.remote().slice(64, 8).unwrap();
    let old = [lb.a.mr.slice(0, 8).unwrap()];
    let mut expected: u64 = 0;
    let mut outstanding = 0usize;
    let mut done = 0usize;
    let mut wcs: Vec<Completion> = (0..64).map(|_| Completion::default()).collect();
    let start = Instant::now();
    for i in 0..10_000u64 {
        let add = i % 7 + 1;
        expected += add;
        while outstanding >= 16 {
            let n = lb.a.cq.poll(&mut wcs).unwrap();
            for c in &wcs[..n] {
                assert!(c.is_success(), "{c:?}");
                assert_eq!(c.opcode(), WcOpcode::FetchAdd);
            }
            outstanding -= n;
            done += n;
            assert!(start.elapsed() < 10 * WAIT, "fetch-adds stalled");
        }
        lb.a.qp
            .post_send(
                &SendRequest::new(i, SendOp::FetchAdd { remote: counter, add }, &old).signaled(),
            )
            .unwrap();
        outstanding += 1;
    }
    while done < 10_000 {
        let c = next(&lb.a.cq);
        assert!(c.is_success(), "{c:?}");
        done += 1;
    }
    let value = u64::from_ne_bytes(lb.b.mr.as_slice()[64..72].try_into().unwrap());
    assert_eq!(value, expected);
    assert_eq!(expected, (0..10_000u64).map(|i| i % 7 + 1).sum::<u64>());
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_compare_and_swap_succeeds_and_fails() {
    let mut lb = rc(4096);
    lb.b.mr.as_mut_slice()[8..16].copy_from_slice(&5u64.to_ne_bytes());
    let target = lb.b.mr.remote().slice(8, 8).unwrap();
    let old = [lb.a.mr.slice(0, 8).unwrap()];
    let read_old = |lb: &Loopback| u64::from_ne_bytes(lb.a.mr.as_slice()[..8].try_into().unwrap());
    let remote_value =
        |lb: &Loopback| u64::from_ne_bytes(lb.b.mr.as_slice()[8..16].try_into().unwrap());
    // Matches: swapped, old value returned.
    let cas = SendOp::CompareSwap { remote: target, compare: 5, swap: 9 };
    lb.a.qp.post_send(&SendRequest::new(1, cas, &old).signaled()).unwrap();
    ok(&lb.a.cq, 1, WcOpcode::CompSwap);
    assert_eq!(read_old(&lb), 5);
    assert_eq!(remote_value(&lb), 9);
    // Does not match: unchanged, current value returned.
    let cas = SendOp::CompareSwap { remote: target, compare: 5, swap: 1 };
    lb.a.qp.post_send(&SendRequest::new(2, cas, &old).signaled()).unwrap();
    ok(&lb.a.cq, 2, WcOpcode::CompSwap);
    assert_eq!(read_old(&lb), 9);
    assert_eq!(remote_value(&lb), 9);
    // Misaligned or wrongly sized atomics never reach the HCA.
    let misaligned = lb.b.mr.remote().slice(12, 8).unwrap();
    let err =
        lb.a.qp
            .post_send(&SendRequest::new(3, SendOp::FetchAdd { remote: misaligned, add: 1 }, &old))
            .unwrap_err();
    assert!(err.is_invalid_request() && err.to_string().contains("aligned"), "{err}");
    let wide = [lb.a.mr.slice(0, 16).unwrap()];
    let err =
        lb.a.qp
            .post_send(&SendRequest::new(4, SendOp::FetchAdd { remote: target, add: 1 }, &wide))
            .unwrap_err();
    assert!(err.to_string().contains("8-byte local SGE"), "{err}");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_thirty_two_requests_in_one_post() {
    let mut lb = lab(LoopbackConfig { buf_len: 32 * 256, ..Default::default() });
    let data = pattern(32 * 256, 11);
    lb.a.mr.as_mut_slice().copy_from_slice(&data);
    let remote = lb.b.mr.remote();
    let slices: Vec<_> = (0..32).map(|i| [lb.a.mr.slice(i * 256, 256).unwrap()]).collect();
    let mut batch = SendBatch::with_capacity(32);
    for (i, src) in slices.iter().enumerate() {
        let dst = remote.slice(i as u64 * 256, 256).unwrap();
        batch
            .push(&lb.a.qp, &SendRequest::new(i as u64, SendOp::Write(dst), src).signaled())
            .unwrap();
    }
    assert_eq!(batch.len(), 32);
    lb.a.qp.post_send_batch(&mut batch).unwrap();
    assert!(batch.is_empty(), "posting empties the batch for reuse");
    let mut ids: Vec<u64> = (0..32).map(|_| ok_any(&lb.a.cq)).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..32).collect::<Vec<u64>>());
    assert_eq!(lb.b.mr.as_slice(), &data[..]);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_forty_listed_requests_post_in_stack_lists() {
    // 40 requests: one list of MAX_POST_LIST (32) and one of 8, no allocation.
    let n = 40usize;
    let mut lb = lab(LoopbackConfig { buf_len: n * 128, ..Default::default() });
    let data = pattern(n * 128, 5);
    lb.a.mr.as_mut_slice().copy_from_slice(&data);
    let remote = lb.b.mr.remote();
    let slices: Vec<_> = (0..n).map(|i| [lb.a.mr.slice(i * 128, 128).unwrap()]).collect();
    let requests: Vec<SendRequest<'_>> = slices
        .iter()
        .enumerate()
        .map(|(i, src)| {
            let dst = remote.slice(i as u64 * 128, 128).unwrap();
            let r = SendRequest::new(i as u64, SendOp::Write(dst), src);
            // Every fourth and the last signaled: unsignaled ones complete silently.
            if i % 4 == 3 || i + 1 == n {
                r.signaled()
            } else {
                r
            }
        })
        .collect();
    assert!(n > rdmabench_ffi::verbs::MAX_POST_LIST);
    lb.a.qp.post_send_list(&requests).unwrap();
    let ids: Vec<u64> = (0..n / 4).map(|_| ok_any(&lb.a.cq)).collect();
    assert_eq!(ids, (0..n as u64).filter(|i| i % 4 == 3).collect::<Vec<_>>());
    assert_eq!(lb.b.mr.as_slice(), &data[..]);
    // A request the QP cannot take is refused before anything of its list is posted.
    let two = [lb.a.mr.slice(0, 8).unwrap(), lb.a.mr.slice(8, 8).unwrap()];
    let bad = [SendRequest::new(99, SendOp::Write(remote.slice(0, 16).unwrap()), &two)];
    let err = lb.a.qp.post_send_list(&bad).unwrap_err();
    assert!(err.to_string().contains("2 SGEs, the QP takes 1"), "{err}");
}

fn ok_any(cq: &CompletionQueue) -> u64 {
    let c = next(cq);
    assert!(c.is_success(), "{c:?}");
    c.wr_id()
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_uc_write_and_refused_read_on_both_kinds() {
    let cfg = LoopbackConfig { qp_type: QpType::Uc, ..Default::default() };
    uc_write_and_refused_read(lab(cfg.clone()));
    uc_write_and_refused_read(lab_ext(cfg));
}

fn uc_write_and_refused_read<Q: QueuePair>(mut lb: Loopback<Q>) {
    lb.a.mr.as_mut_slice()[..16].copy_from_slice(b"unreliable conn!");
    let src = [lb.a.mr.slice(0, 16).unwrap()];
    let remote = lb.b.mr.remote().slice(100, 16).unwrap();
    lb.a.qp.post_send(&SendRequest::new(1, SendOp::Write(remote), &src).signaled()).unwrap();
    ok(&lb.a.cq, 1, WcOpcode::RdmaWrite);
    // UC has no acknowledgements: the local completion may precede placement.
    let start = Instant::now();
    while &lb.b.mr.as_slice()[100..116] != b"unreliable conn!" {
        assert!(start.elapsed() < WAIT, "UC write never landed");
        std::thread::sleep(Duration::from_millis(1));
    }
    let err = lb.a.qp.post_send(&SendRequest::new(2, SendOp::Read(remote), &src)).unwrap_err();
    assert!(err.to_string().contains("UC QPs do not do RDMA read"), "{err}");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_ud_send_recv_through_an_address_handle_on_both_kinds() {
    let cfg = LoopbackConfig { qp_type: QpType::Ud, ..Default::default() };
    ud_send_recv_through_an_address_handle(lab(cfg.clone()));
    ud_send_recv_through_an_address_handle(lab_ext(cfg));
}

fn ud_send_recv_through_an_address_handle<Q: QueuePair>(mut lb: Loopback<Q>) {
    let ah = lb.ah.take().expect("UD loopback has an address handle");
    let msg = pattern(512, 5);
    lb.a.mr.as_mut_slice()[..512].copy_from_slice(&msg);
    lb.b.qp.post_recv(55, &[lb.b.mr.slice(0, GRH_LEN + 1024).unwrap()]).unwrap();
    let dest = UdDest { ah: &ah, remote_qpn: lb.b.qp.qp_num(), remote_qkey: DEFAULT_QKEY };
    let src = [lb.a.mr.slice(0, 512).unwrap()];
    lb.a.qp.post_send(&SendRequest::new(1, SendOp::SendImm(77), &src).to(dest).signaled()).unwrap();
    ok(&lb.a.cq, 1, WcOpcode::Send);
    let r = ok(&lb.b.cq, 55, WcOpcode::Recv);
    assert_eq!(r.byte_len() as usize, GRH_LEN + 512, "byte_len counts the 40-byte GRH");
    assert!(r.has_grh());
    assert_eq!(r.src_qp(), lb.a.qp.qp_num());
    assert_eq!(r.imm_data(), Some(77));
    assert_eq!(&lb.b.mr.as_slice()[GRH_LEN..GRH_LEN + 512], &msg[..]);
    // UD refuses what it cannot do, before posting.
    let err = lb.a.qp.post_send(&SendRequest::new(2, SendOp::Send, &src)).unwrap_err();
    assert!(err.to_string().contains("needs a destination"), "{err}");
    let remote = lb.b.mr.remote().slice(0, 8).unwrap();
    let err =
        lb.a.qp.post_send(&SendRequest::new(3, SendOp::Write(remote), &src).to(dest)).unwrap_err();
    assert!(err.to_string().contains("not possible on a UD QP"), "{err}");
    // A prepared UD send keeps its address handle: the caller's is dropped first, and
    // two posts under new ids, with and without a completion, still reach b.
    let mut p = lb.a.qp.prepare_send(&SendRequest::new(0, SendOp::SendImm(88), &src).to(dest));
    drop(ah);
    let p = p.as_mut().expect("a UD send can be prepared");
    lb.a.mr.as_mut_slice()[..512].copy_from_slice(&pattern(512, 9));
    for (wr_id, signaled) in [(61, false), (62, true)] {
        lb.b.qp.post_recv(wr_id + 100, &[lb.b.mr.slice(0, GRH_LEN + 1024).unwrap()]).unwrap();
        lb.a.qp.post_prepared(p, &lb.a.mr, wr_id, signaled).unwrap();
        let r = ok(&lb.b.cq, wr_id + 100, WcOpcode::Recv);
        assert_eq!(r.byte_len() as usize, GRH_LEN + 512);
        assert_eq!(r.imm_data(), Some(88));
        assert_eq!(&lb.b.mr.as_slice()[GRH_LEN..GRH_LEN + 512], &pattern(512, 9)[..]);
    }
    ok(&lb.a.cq, 62, WcOpcode::Send);
    assert!(lb.a.cq.poll(&mut [Completion::default()]).unwrap() == 0, "61 was unsignaled");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_event_mode_wakes_a_waiter_and_times_out() {
    let lb = lab(LoopbackConfig { event_mode: true, ..Default::default() });
    // Nothing pending: the wait times out, within reason.
    lb.b.cq.req_notify(false).unwrap();
    let start = Instant::now();
    assert!(!lb.b.cq.wait(Duration::from_millis(200)).unwrap(), "no event without a completion");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(190) && waited < Duration::from_secs(5), "{waited:?}");
    // A receive completion wakes a waiter in another thread.
    lb.b.qp.post_recv(5, &[lb.b.mr.slice(0, 64).unwrap()]).unwrap();
    let b_cq = lb.b.cq.clone();
    let waiter = std::thread::spawn(move || {
        let woke = b_cq.wait(WAIT).unwrap();
        let mut wc = [Completion::default()];
        let n = b_cq.poll(&mut wc).unwrap();
        (woke, n, wc[0].wr_id())
    });
    std::thread::sleep(Duration::from_millis(100));
    let src = [lb.a.mr.slice(0, 32).unwrap()];
    lb.a.qp.post_send(&SendRequest::new(1, SendOp::Send, &src).signaled()).unwrap();
    ok(&lb.a.cq, 1, WcOpcode::Send);
    let (woke, n, wr_id) = waiter.join().unwrap();
    assert!(woke, "the completion woke the waiter");
    assert_eq!((n, wr_id), (1, 5));
    // A CQ without a channel refuses to wait instead of blocking forever.
    let plain = lb.context.create_cq(4, None).unwrap();
    assert!(plain.wait(Duration::from_millis(1)).unwrap_err().is_invalid_request());
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_wrong_rkey_is_a_remote_access_error_and_the_qp_errs() {
    let lb = rc(4096);
    let bad = lb.b.mr.remote().with_rkey(lb.b.mr.rkey() ^ 0x5a5a_5a00);
    let src = [lb.a.mr.slice(0, 64).unwrap()];
    lb.a.qp
        .post_send(&SendRequest::new(1, SendOp::Write(bad.slice(0, 64).unwrap()), &src).signaled())
        .unwrap();
    let c = next(&lb.a.cq);
    assert_eq!(c.status(), WcStatus::RemAccessErr, "{c:?}");
    assert!(c.status().to_string().contains("remote access error"));
    assert_eq!(lb.a.qp.state().unwrap(), QpState::Error);
    // Anything posted after the error is flushed, not executed.
    lb.a.qp
        .post_send(
            &SendRequest::new(2, SendOp::Write(lb.b.mr.remote().slice(0, 8).unwrap()), &src)
                .signaled(),
        )
        .unwrap();
    assert_eq!(next(&lb.a.cq).status(), WcStatus::WrFlushErr);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_out_of_bounds_ranges_are_refused_before_posting() {
    let lb = rc(4096);
    let err = lb.a.mr.slice(4000, 100).err().expect("local range past the end");
    assert!(err.is_invalid_request());
    assert_eq!(err.to_string(), "local range refused: 4000+100 is outside the 4096-byte buffer");
    let err = lb.b.mr.remote().slice(4090, 7).unwrap_err();
    assert_eq!(err.to_string(), "remote range: 4090+7 is outside the 4096-byte buffer");
    // An SGE from a region of another PD is refused too.
    let other_pd = lb.context.alloc_pd().unwrap();
    let foreign = other_pd.reg_mr(64, Access::ALL).unwrap();
    let src = [foreign.slice(0, 8).unwrap()];
    let remote = lb.b.mr.remote().slice(0, 8).unwrap();
    let err = lb.a.qp.post_send(&SendRequest::new(1, SendOp::Write(remote), &src)).unwrap_err();
    assert!(err.to_string().contains("another protection domain"), "{err}");
    // Too many SGEs.
    let many: Vec<_> = (0..lb.a.qp.caps().max_send_sge as usize + 1)
        .map(|i| lb.a.mr.slice(i, 1).unwrap())
        .collect();
    let err = lb.a.qp.post_send(&SendRequest::new(2, SendOp::Write(remote), &many)).unwrap_err();
    assert!(err.to_string().contains("SGEs, the QP takes"), "{err}");
    // None of this reached the HCA: the QP still works.
    let ok_src = [lb.a.mr.slice(0, 8).unwrap()];
    lb.a.qp.post_send(&SendRequest::new(3, SendOp::Write(remote), &ok_src).signaled()).unwrap();
    ok(&lb.a.cq, 3, WcOpcode::RdmaWrite);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_destroyed_peer_fails_outstanding_work_with_a_named_status() {
    // Short transport timeout so retries run out in well under a second.
    let lb = lab(LoopbackConfig {
        rts: RtsAttr { timeout: 8, retry_cnt: 2, ..RtsAttr::new(0) },
        ..Default::default()
    });
    let Loopback { a, b, .. } = lb;
    let remote: RemoteBuffer = b.mr.remote();
    drop(b); // QP, CQ and memory of the peer are gone.
    let src = [a.mr.slice(0, 64).unwrap()];
    a.qp.post_send(
        &SendRequest::new(1, SendOp::Write(remote.slice(0, 64).unwrap()), &src).signaled(),
    )
    .unwrap();
    let start = Instant::now();
    let c = next(&a.cq);
    // The peer's QP no longer answers: the transport retries run out.
    assert_eq!(c.status(), WcStatus::RetryExcErr, "{c:?}");
    assert!(start.elapsed() < WAIT);
    assert_eq!(a.qp.state().unwrap(), QpState::Error);
    eprintln!("destroyed peer -> {} after {:?}", c.status(), start.elapsed());
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rdma_cm_connect_accept_moves_data() {
    let listener = CmListener::bind(cm_addr(0)).unwrap();
    let port = listener.port();
    assert_ne!(port, 0);
    let server = std::thread::spawn(move || {
        let req = listener.get_request(WAIT).unwrap();
        assert_eq!(&req.private_data()[..6], b"client");
        let ctx = rdmabench_ffi::verbs::DeviceList::new()
            .unwrap()
            .find(&req.device_name())
            .unwrap()
            .open()
            .unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16, None).unwrap();
        let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
        let mr = pd.reg_mr(4096, Access::ALL).unwrap();
        let remote = serde_json::to_vec(&mr.remote()).unwrap();
        let conn = req.accept(&qp, &remote, WAIT).unwrap();
        // A QP takes receives from INIT on; the client's send waits out RNR NAKs
        // until this one is posted.
        qp.post_recv(1, &[mr.slice(0, 4096).unwrap()]).unwrap();
        let c = next(&cq);
        assert!(c.is_success(), "{c:?}");
        let got = mr.as_slice()[..c.byte_len() as usize].to_vec();
        // Wait for the client's RDMA write into our buffer.
        let start = Instant::now();
        while &mr.as_slice()[1000..1005] != b"write" {
            assert!(start.elapsed() < WAIT, "RDMA write over rdma_cm never landed");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(conn);
        got
    });
    let route = ResolvedRoute::resolve(cm_addr(port), WAIT).unwrap();
    let ctx = rdmabench_ffi::verbs::DeviceList::new()
        .unwrap()
        .find(&route.device_name())
        .unwrap()
        .open()
        .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, None).unwrap();
    let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    let mut mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let conn = route.connect(&qp, b"client", WAIT).unwrap();
    assert_eq!(qp.state().unwrap(), QpState::ReadyToSend);
    let text = conn.peer_private_data();
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    let remote: RemoteBuffer = serde_json::from_slice(&text[..end]).unwrap();
    mr.as_mut_slice()[..9].copy_from_slice(b"over rdma");
    mr.as_mut_slice()[100..105].copy_from_slice(b"write");
    let src = [mr.slice(0, 9).unwrap()];
    qp.post_send(&SendRequest::new(1, SendOp::Send, &src).signaled()).unwrap();
    ok(&cq, 1, WcOpcode::Send);
    let src = [mr.slice(100, 5).unwrap()];
    qp.post_send(
        &SendRequest::new(2, SendOp::Write(remote.slice(1000, 5).unwrap()), &src).signaled(),
    )
    .unwrap();
    ok(&cq, 2, WcOpcode::RdmaWrite);
    assert_eq!(server.join().unwrap(), b"over rdma");
    drop(conn);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rdma_cm_to_a_closed_port_is_refused_not_hung() {
    let start = Instant::now();
    let result = ResolvedRoute::resolve(cm_addr(1), Duration::from_secs(5)).and_then(|route| {
        let ctx = rdmabench_ffi::verbs::DeviceList::new()
            .unwrap()
            .find(&route.device_name())
            .unwrap()
            .open()
            .unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(4, None).unwrap();
        let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
        route.connect(&qp, b"", Duration::from_secs(5)).map(|_| ())
    });
    let err = result.expect_err("nobody listens on port 1");
    assert!(err.to_string().contains("REJECTED") || err.is_timeout(), "{err}");
    assert!(start.elapsed() < Duration::from_secs(15));
}

fn rdma_show(kind: &str) -> String {
    let out = std::process::Command::new("rdma")
        .args(["resource", "show", kind])
        .output()
        .expect("rdma runs");
    assert!(
        out.status.success(),
        "rdma resource show {kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How many `rdma resource show KIND` lines belong to this process. The kernel
/// records the creating thread's id as `pid`, so any of our threads counts.
fn resources_of_this_process(kind: &str) -> usize {
    let ours: Vec<String> = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    rdma_show(kind)
        .lines()
        .filter(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.windows(2).any(|w| w[0] == "pid" && ours.iter().any(|t| t == w[1]))
        })
        .count()
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_teardown_leaves_no_qp_mr_cq_or_pd_behind() {
    let kinds = ["qp", "cq", "mr", "pd"];
    {
        let lb = lab(LoopbackConfig { event_mode: true, ..Default::default() });
        let _ud = lab(LoopbackConfig { qp_type: QpType::Ud, ..Default::default() });
        lb.b.qp.post_recv(1, &[lb.b.mr.slice(0, 64).unwrap()]).unwrap();
        for kind in kinds {
            let seen = resources_of_this_process(kind);
            assert!(
                seen > 0,
                "rdma resource show {kind} sees none of our live objects:\n{}",
                rdma_show(kind)
            );
        }
        // Dropped in declaration order: the QPs go before the CQs, PD and context they
        // hold, whatever order the fields have.
    }
    for kind in kinds {
        assert_eq!(resources_of_this_process(kind), 0, "{kind} left behind");
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rc_extended_send_api_does_every_operation() {
    let caps = QpCaps { max_inline_data: 64, ..Default::default() };
    let mut lb = lab_ext(LoopbackConfig { buf_len: 65536, caps, ..Default::default() });
    let data = pattern(8192, 3);
    lb.a.mr.as_mut_slice()[..8192].copy_from_slice(&data);
    let remote = lb.b.mr.remote();
    // Write, then read it back into another place.
    let src = [lb.a.mr.slice(0, 8192).unwrap()];
    let write = SendOp::Write(remote.slice(0, 8192).unwrap());
    lb.a.qp.post_send(&SendRequest::new(1, write, &src).signaled()).unwrap();
    ok(&lb.a.cq, 1, WcOpcode::RdmaWrite);
    assert_eq!(&lb.b.mr.as_slice()[..8192], &data[..]);
    let dst = [lb.a.mr.slice(16384, 8192).unwrap()];
    let read = SendOp::Read(remote.slice(0, 8192).unwrap());
    lb.a.qp.post_send(&SendRequest::new(2, read, &dst).signaled()).unwrap();
    ok(&lb.a.cq, 2, WcOpcode::RdmaRead);
    assert_eq!(&lb.a.mr.as_slice()[16384..24576], &data[..]);
    // Send with immediate, an inline send, a zero-length send.
    lb.b.qp.post_recv(10, &[lb.b.mr.slice(32768, 4096).unwrap()]).unwrap();
    let part = [lb.a.mr.slice(100, 128).unwrap()];
    lb.a.qp.post_send(&SendRequest::new(3, SendOp::SendImm(7), &part).signaled()).unwrap();
    ok(&lb.a.cq, 3, WcOpcode::Send);
    let r = ok(&lb.b.cq, 10, WcOpcode::Recv);
    assert_eq!((r.byte_len(), r.imm_data()), (128, Some(7)));
    assert_eq!(&lb.b.mr.as_slice()[32768..32896], &data[100..228]);
    lb.b.qp.post_recv(11, &[lb.b.mr.slice(40960, 64).unwrap()]).unwrap();
    let small = [lb.a.mr.slice(300, 48).unwrap()];
    lb.a.qp.post_send(&SendRequest::new(4, SendOp::Send, &small).signaled().inline()).unwrap();
    ok(&lb.a.cq, 4, WcOpcode::Send);
    assert_eq!(ok(&lb.b.cq, 11, WcOpcode::Recv).byte_len(), 48);
    assert_eq!(&lb.b.mr.as_slice()[40960..41008], &data[300..348]);
    lb.b.qp.post_recv(12, &[lb.b.mr.slice(40960, 64).unwrap()]).unwrap();
    lb.a.qp.post_send(&SendRequest::new(5, SendOp::SendImm(9), &[]).signaled()).unwrap();
    ok(&lb.a.cq, 5, WcOpcode::Send);
    let r = ok(&lb.b.cq, 12, WcOpcode::Recv);
    assert_eq!((r.byte_len(), r.imm_data()), (0, Some(9)));
    // Atomics.
    let counter = remote.slice(49152, 8).unwrap();
    let old = [lb.a.mr.slice(57344, 8).unwrap()];
    for (i, add) in [5u64, 6, 7].into_iter().enumerate() {
        let id = 6 + i as u64;
        let fa = SendOp::FetchAdd { remote: counter, add };
        lb.a.qp.post_send(&SendRequest::new(id, fa, &old).signaled()).unwrap();
        ok(&lb.a.cq, id, WcOpcode::FetchAdd);
    }
    let cas = SendOp::CompareSwap { remote: counter, compare: 18, swap: 1000 };
    lb.a.qp.post_send(&SendRequest::new(9, cas, &old).signaled()).unwrap();
    ok(&lb.a.cq, 9, WcOpcode::CompSwap);
    let value = u64::from_ne_bytes(lb.b.mr.as_slice()[49152..49160].try_into().unwrap());
    assert_eq!(value, 1000);
    // A list of 40 in one wr_start … wr_complete.
    let slices: Vec<_> = (0..40).map(|i| [lb.a.mr.slice(i * 64, 64).unwrap()]).collect();
    let list: Vec<_> = slices
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let op = SendOp::Write(remote.slice(i as u64 * 64, 64).unwrap());
            SendRequest::new(100 + i as u64, op, s).signaled()
        })
        .collect();
    lb.a.qp.post_send_list(&list).unwrap();
    let ids: Vec<u64> = (0..40).map(|_| ok_any(&lb.a.cq)).collect();
    assert_eq!(ids, (100..140).collect::<Vec<u64>>());
    // An extended QP takes one SGE per request (a SendBatch it does not even have:
    // SendBatch's compile_fail doctest).
    let two = [lb.a.mr.slice(0, 8).unwrap(), lb.a.mr.slice(8, 8).unwrap()];
    let err = lb.a.qp.post_send(&SendRequest::new(1, SendOp::Send, &two)).unwrap_err();
    assert!(err.to_string().contains("2 SGEs, the QP takes 1"), "{err}");
    assert_eq!(lb.a.qp.caps().max_send_sge, 1);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_builder_makes_the_kind_asked_for_and_refuses_extended_with_several_sges() {
    let lb = rc(4096);
    let one = lb.pd.create_qp(QpType::Rc, &lb.a.cq, &lb.a.cq);
    let two = one.caps(QpCaps { max_send_sge: 2, ..Default::default() });
    // Queues of several SGEs are basic: soft-RoCE's extended SGE lists fail.
    match two.build_extended() {
        Err(ExtendedQpError::SeveralSges { max_send_sge: 2 }) => {}
        Err(e) => panic!("wrong refusal: {e}"),
        Ok(_) => panic!("an extended QP of two SGEs was built"),
    }
    let err = two.build_extended().err().unwrap();
    assert!(err.to_string().contains("one SGE per send, not 2"), "{err}");
    let err = Loopback::new_extended(&LoopbackConfig {
        caps: QpCaps { max_send_sge: 2, ..Default::default() },
        ..Default::default()
    })
    .err()
    .expect("refused");
    assert!(err.is_invalid_request() && err.to_string().contains("one SGE per send"), "{err}");
    // Whichever the device makes: extended for one SGE (soft-RoCE has it), basic for two.
    let generic = one.build_extended_or_basic().unwrap();
    assert!(generic.is_extended());
    assert!(matches!(two.build_extended_or_basic().unwrap(), GenericQueuePair::Basic(_)));
    // Every kind is a QP in its own right.
    let basic = one.build().unwrap();
    let extended = one.build_extended().unwrap();
    for qp in [&basic as &dyn QueuePair, &extended, &generic] {
        assert_eq!(qp.state().unwrap(), QpState::Reset);
        assert_eq!(qp.qp_type(), QpType::Rc);
    }
    assert_eq!(basic.caps().max_send_sge, 1);
    assert_eq!(extended.caps().max_send_sge, 1);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_prepared_requests_repost_with_new_ids_on_both_kinds() {
    let cfg = LoopbackConfig {
        buf_len: 8192,
        caps: QpCaps { max_inline_data: 64, ..Default::default() },
        ..Default::default()
    };
    prepared_requests_repost(lab(cfg.clone()), "basic");
    prepared_requests_repost(lab_ext(cfg), "extended");
    // Two SGEs cannot be prepared.
    let many = lab(LoopbackConfig {
        caps: QpCaps { max_send_sge: 2, ..Default::default() },
        ..Default::default()
    });
    let two = [many.a.mr.slice(0, 8).unwrap(), many.a.mr.slice(8, 8).unwrap()];
    let r = SendRequest::new(1, SendOp::Write(many.b.mr.remote().slice(0, 16).unwrap()), &two);
    let err = many.a.qp.prepare_send(&r).err().unwrap();
    assert!(err.to_string().contains("at most one SGE"), "{err}");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_bound_requests_post_without_checks_on_both_kinds() {
    let cfg = LoopbackConfig { buf_len: 8192, ..Default::default() };
    bound_requests_post(lab(cfg.clone()), "basic");
    bound_requests_post(lab_ext(cfg), "extended");
}

fn bound_requests_post<Q: QueuePair>(mut lb: Loopback<Q>, kind: &str) {
    let remote = lb.b.mr.remote();
    // A read bound once, posted three times: each brings b's current bytes.
    let dst = [lb.a.mr.slice(4096, 16).unwrap()];
    let read = SendRequest::new(0, SendOp::Read(remote.slice(0, 16).unwrap()), &dst).signaled();
    let mut bound = lb.a.qp.bind_send(lb.a.qp.prepare_send(&read).unwrap(), &lb.a.mr).unwrap();
    for id in [11u64, 12, 13] {
        lb.b.mr.as_mut_slice()[..16].copy_from_slice(&pattern(16, id as u8));
        bound.post(id).unwrap();
        assert_eq!(ok(&lb.a.cq, id, WcOpcode::RdmaRead).byte_len(), 16, "{kind}");
        assert_eq!(&lb.a.mr.as_slice()[4096..4112], &pattern(16, id as u8)[..], "{kind}");
    }
    // Its flags are the request's: a write bound unsignaled, then one bound signaled;
    // only the signaled one completes, and both wrote.
    let src = [lb.a.mr.slice(0, 8).unwrap(), lb.a.mr.slice(8, 8).unwrap()];
    let write = |i: usize| {
        SendRequest::new(
            0,
            SendOp::Write(remote.slice(100 + 8 * i as u64, 8).unwrap()),
            &src[i..=i],
        )
    };
    let mut quiet = lb.a.qp.bind_send(lb.a.qp.prepare_send(&write(0)).unwrap(), &lb.a.mr).unwrap();
    let mut loud =
        lb.a.qp.bind_send(lb.a.qp.prepare_send(&write(1).signaled()).unwrap(), &lb.a.mr).unwrap();
    quiet.post(20).unwrap();
    loud.post(21).unwrap();
    ok(&lb.a.cq, 21, WcOpcode::RdmaWrite);
    assert_eq!(
        lb.a.cq.poll(&mut [Completion::default()]).unwrap(),
        0,
        "{kind}: the quiet write completed"
    );
    assert_eq!(&lb.b.mr.as_slice()[100..116], &lb.a.mr.as_slice()[..16], "{kind}");
    // Unbound, it posts through the checked call as before.
    let mut p = quiet.into_prepared();
    lb.a.qp.post_prepared(&mut p, &lb.a.mr, 22, true).unwrap();
    ok(&lb.a.cq, 22, WcOpcode::RdmaWrite);
    // Binding it to another QP, or over another region, is refused.
    let err = lb.b.qp.bind_send(p, &lb.a.mr).err().unwrap();
    assert!(err.to_string().contains("another QP or region"), "{kind}: {err}");
    let p = lb.a.qp.prepare_send(&write(0)).unwrap();
    let err = lb.a.qp.bind_send(p, &lb.b.mr).err().unwrap();
    assert!(err.to_string().contains("another QP or region"), "{kind}: {err}");
}

fn prepared_requests_repost<Q: QueuePair>(mut lb: Loopback<Q>, kind: &str) {
    let remote = lb.b.mr.remote();
    // A read prepared once, posted three times: each brings b's current bytes.
    let dst = [lb.a.mr.slice(4096, 16).unwrap()];
    let read = SendRequest::new(0, SendOp::Read(remote.slice(0, 16).unwrap()), &dst).signaled();
    let mut p = lb.a.qp.prepare_send(&read).unwrap();
    for id in [11u64, 12, 13] {
        lb.b.mr.as_mut_slice()[..16].copy_from_slice(&pattern(16, id as u8));
        lb.a.qp.post_prepared(&mut p, &lb.a.mr, id, true).unwrap();
        let c = ok(&lb.a.cq, id, WcOpcode::RdmaRead);
        assert_eq!(c.byte_len(), 16);
        assert_eq!(&lb.a.mr.as_slice()[4096..4112], &pattern(16, id as u8)[..], "{kind}");
    }
    // An inline write, unsignaled then signaled: only the signaled one completes.
    lb.a.mr.as_mut_slice()[..8].copy_from_slice(b"prepared");
    let src = [lb.a.mr.slice(0, 8).unwrap()];
    let write = SendRequest::new(0, SendOp::Write(remote.slice(100, 8).unwrap()), &src).inline();
    let mut w = lb.a.qp.prepare_send(&write).unwrap();
    lb.a.qp.post_prepared(&mut w, &lb.a.mr, 20, false).unwrap();
    lb.a.qp.post_prepared(&mut w, &lb.a.mr, 21, true).unwrap();
    ok(&lb.a.cq, 21, WcOpcode::RdmaWrite);
    assert_eq!(&lb.b.mr.as_slice()[100..108], b"prepared");
    // Every operand reaches the adapter: a fetch-add's addend and a compare-and-swap's
    // pair, each prepared once and posted twice, and a send's immediate without data.
    let counter = remote.slice(256, 8).unwrap();
    lb.b.mr.as_mut_slice()[256..264].copy_from_slice(&5u64.to_ne_bytes());
    let old = [lb.a.mr.slice(512, 8).unwrap()];
    let add = SendRequest::new(0, SendOp::FetchAdd { remote: counter, add: 7 }, &old);
    let mut add = lb.a.qp.prepare_send(&add).unwrap();
    let swap = SendOp::CompareSwap { remote: counter, compare: 19, swap: 100 };
    let mut swap = lb.a.qp.prepare_send(&SendRequest::new(0, swap, &old)).unwrap();
    let value =
        |lb: &Loopback<Q>| u64::from_ne_bytes(lb.a.mr.as_slice()[512..520].try_into().unwrap());
    for (id, was) in [(23u64, 5u64), (24, 12)] {
        lb.a.qp.post_prepared(&mut add, &lb.a.mr, id, true).unwrap();
        ok(&lb.a.cq, id, WcOpcode::FetchAdd);
        assert_eq!(value(&lb), was, "{kind}: fetch-add {id}");
    }
    for (id, was) in [(25u64, 19u64), (26, 100)] {
        lb.a.qp.post_prepared(&mut swap, &lb.a.mr, id, true).unwrap();
        ok(&lb.a.cq, id, WcOpcode::CompSwap);
        assert_eq!(value(&lb), was, "{kind}: compare-and-swap {id}");
    }
    assert_eq!(lb.b.mr.as_slice()[256..264], 100u64.to_ne_bytes(), "{kind}");
    lb.b.qp.post_recv(27, &[lb.b.mr.slice(3000, 64).unwrap()]).unwrap();
    let imm = SendRequest::new(0, SendOp::SendImm(0xfeed_f00d), &[]);
    let mut imm = lb.a.qp.prepare_send(&imm).unwrap();
    lb.a.qp.post_prepared(&mut imm, &lb.a.mr, 28, true).unwrap();
    ok(&lb.a.cq, 28, WcOpcode::Send);
    let r = ok(&lb.b.cq, 27, WcOpcode::Recv);
    assert_eq!((r.imm_data(), r.byte_len()), (Some(0xfeed_f00d), 0), "{kind}");
    // Posting it on another QP, or naming another region, is refused.
    let err = lb.b.qp.post_prepared(&mut w, &lb.a.mr, 22, true).unwrap_err();
    assert!(err.to_string().contains("another QP or region"), "{err}");
    let err = lb.a.qp.post_prepared(&mut w, &lb.b.mr, 22, true).unwrap_err();
    assert!(err.to_string().contains("another QP or region"), "{err}");
    // A receive prepared once on b, put up three times: each message lands in its
    // buffer and completes under the id of its post.
    let mut r = lb.b.qp.prepare_recv(&lb.b.mr.slice(2048, 64).unwrap()).unwrap();
    for id in [31u64, 32, 33] {
        lb.b.qp.post_prepared_recv(&mut r, &lb.b.mr, id).unwrap();
        lb.a.mr.as_mut_slice()[..16].copy_from_slice(&pattern(16, id as u8));
        let src = [lb.a.mr.slice(0, 16).unwrap()];
        lb.a.qp.post_send(&SendRequest::new(id, SendOp::Send, &src).signaled()).unwrap();
        ok(&lb.a.cq, id, WcOpcode::Send);
        assert_eq!(ok(&lb.b.cq, id, WcOpcode::Recv).byte_len(), 16, "{kind}");
        assert_eq!(&lb.b.mr.as_slice()[2048..2064], &pattern(16, id as u8)[..], "{kind}");
    }
    let err = lb.a.qp.post_prepared_recv(&mut r, &lb.b.mr, 34).unwrap_err();
    assert!(err.to_string().contains("another QP or region"), "{err}");
    let err = lb.b.qp.post_prepared_recv(&mut r, &lb.a.mr, 34).unwrap_err();
    assert!(err.to_string().contains("another QP or region"), "{err}");
    // Only memory of the QP's own protection domain is taken.
    let other_pd = lb.context.alloc_pd().unwrap();
    let stranger = other_pd.reg_mr(64, rdmabench_ffi::verbs::Access::LOCAL_WRITE).unwrap();
    let err = lb.b.qp.prepare_recv(&stranger.slice(0, 64).unwrap()).err().unwrap();
    assert!(err.to_string().contains("another protection domain"), "{err}");
}
