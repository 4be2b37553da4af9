//! The first program to read: two RC queue pairs of one device, connected to each other
//! in one process, then an RDMA write, a read back, a send with immediate data, and
//! both atomics — each checked byte for byte.
//!
//! Run it in the soft-RoCE lab:
//!     cargo build --example loopback && ci/lab-vm target/debug/examples/loopback
//! or on real hardware: `loopback [DEVICE [GID_INDEX]]`. It exits 1 on any mismatch.

#[cfg(target_os = "linux")]
mod linux {
    use std::process::ExitCode;
    use std::time::{Duration, Instant};

    use ffi::verbs::{
        Access, AddressVector, BasicQueuePair, Completion, CompletionQueue, DeviceList, Error,
        InitAttr, MemoryRegion, Mtu, QpEndpoint, QpType, QueuePair, RtrAttr, RtsAttr, SendOp,
        SendRequest, WcOpcode,
    };

    pub fn main() -> ExitCode {
        match run() {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("loopback: {e}");
                ExitCode::from(2)
            }
        }
    }

    /// One end: a completion queue, a queue pair and 4 KiB of registered memory.
    struct End {
        cq: CompletionQueue,
        qp: BasicQueuePair,
        mr: MemoryRegion,
        me: QpEndpoint,
    }

    fn run() -> Result<bool, Error> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let devices = DeviceList::new()?;
        let device = match args.first() {
            Some(name) => devices.find(name),
            None => devices.get(0),
        };
        let Some(device) = device else {
            eprintln!(
                "loopback: no such RDMA device (have: {:?})",
                devices.iter().map(|d| d.name()).collect::<Vec<_>>()
            );
            return Ok(false);
        };
        let context = device.open()?;
        let port = 1;
        let port_attr = context.query_port(port)?;
        // RoCE needs a GID to route by; InfiniBand routes by LID.
        let gid_index = match args.get(1) {
            Some(i) => Some(i.parse().unwrap_or(0)),
            None => context.pick_gid_index(port, None)?,
        };
        let gid = match gid_index {
            Some(i) => context.query_gid(port, u32::from(i))?,
            None => Default::default(),
        };
        let mtu = Mtu::from_code(port_attr.active_mtu).unwrap_or(Mtu::Mtu1024);
        println!(
            "device {} port {port}, GID index {gid_index:?} ({gid}), MTU {}",
            context.name(),
            mtu.bytes()
        );

        // Both ends share one protection domain; each has its own CQ, QP and buffer.
        let pd = context.alloc_pd()?;
        let make_end = |psn: u32| -> Result<End, Error> {
            let cq = context.create_cq(16, None)?;
            // A basic QP posts through ibv_post_send; build_extended() makes one that
            // posts through ibv_wr_*. Both do what the QueuePair trait says.
            let qp = pd.create_qp(QpType::Rc, &cq, &cq).build()?;
            qp.to_init(&InitAttr::new(port))?;
            let mr = pd.reg_mr(4096, Access::ALL)?;
            let me = qp.endpoint(port_attr.lid, gid, psn);
            Ok(End { cq, qp, mr, me })
        };
        let mut a = make_end(100)?;
        let mut b = make_end(200)?;

        // The exchange two hosts would do over TCP: each learns the other's endpoint.
        for (end, peer) in [(&a, b.me), (&b, a.me)] {
            let path = AddressVector::to_peer(&peer, port, gid_index);
            end.qp.to_rtr(Some(&RtrAttr::new(&peer, path, mtu)))?;
            end.qp.to_rts(&RtsAttr::new(end.me.psn))?;
        }
        println!("connected QP {} <-> QP {}", a.qp.qp_num(), b.qp.qp_num());
        let b_buffer = b.mr.remote(); // what a peer would receive: addr, len, rkey
        let mut all_ok = true;
        let mut check = |what: &str, ok: bool| {
            println!("{} {what}", if ok { "ok  " } else { "FAIL" });
            all_ok &= ok;
        };

        // 1. RDMA write: a's bytes appear in b's memory; b's CPU does nothing.
        let message = b"written by RDMA, read back by RDMA";
        a.mr.as_mut_slice()[..message.len()].copy_from_slice(message);
        let src = [a.mr.slice(0, message.len())?];
        let dst = b_buffer.slice(0, message.len() as u64)?;
        a.qp.post_send(&SendRequest::new(1, SendOp::Write(dst), &src).signaled())?;
        let c = wait(&a.cq)?;
        check("RDMA write completed", c.is_success() && c.opcode() == WcOpcode::RdmaWrite);
        check(
            "written bytes are in the peer's buffer",
            &b.mr.as_slice()[..message.len()] == message,
        );

        // 2. RDMA read: fetch them back into another part of a's buffer.
        let back = [a.mr.slice(1024, message.len())?];
        a.qp.post_send(&SendRequest::new(2, SendOp::Read(dst), &back).signaled())?;
        let c = wait(&a.cq)?;
        check("RDMA read completed", c.is_success() && c.byte_len() as usize == message.len());
        check("read-back bytes match", &a.mr.as_slice()[1024..1024 + message.len()] == message);

        // 3. Send with immediate data: consumes a receive that b posted.
        b.qp.post_recv(30, &[b.mr.slice(2048, 1024)?])?;
        a.qp.post_send(&SendRequest::new(3, SendOp::SendImm(0xC0FFEE), &src).signaled())?;
        let sent = wait(&a.cq)?;
        let got = wait(&b.cq)?;
        check("send completed", sent.is_success() && sent.opcode() == WcOpcode::Send);
        check(
            "receive got the message and the immediate",
            got.is_success()
                && got.wr_id() == 30
                && got.imm_data() == Some(0xC0FFEE)
                && &b.mr.as_slice()[2048..2048 + message.len()] == message,
        );

        // 4. Atomics on 8 aligned bytes of b: fetch-and-add, then compare-and-swap.
        b.mr.as_mut_slice()[3072..3080].copy_from_slice(&40u64.to_ne_bytes());
        let counter = b_buffer.slice(3072, 8)?;
        let old = [a.mr.slice(3072, 8)?];
        a.qp.post_send(
            &SendRequest::new(4, SendOp::FetchAdd { remote: counter, add: 2 }, &old).signaled(),
        )?;
        let c = wait(&a.cq)?;
        check(
            "fetch-and-add returned the old value 40",
            c.is_success() && read_u64(&a.mr, 3072) == 40,
        );
        check("remote counter is now 42", read_u64(&b.mr, 3072) == 42);
        let swap = SendOp::CompareSwap { remote: counter, compare: 42, swap: 7 };
        a.qp.post_send(&SendRequest::new(5, swap, &old).signaled())?;
        let c = wait(&a.cq)?;
        check(
            "compare-and-swap matched 42 and swapped in 7",
            c.is_success() && read_u64(&b.mr, 3072) == 7,
        );
        let swap = SendOp::CompareSwap { remote: counter, compare: 42, swap: 99 };
        a.qp.post_send(&SendRequest::new(6, swap, &old).signaled())?;
        let c = wait(&a.cq)?;
        check(
            "compare-and-swap with a stale value left 7 in place",
            c.is_success() && read_u64(&a.mr, 3072) == 7 && read_u64(&b.mr, 3072) == 7,
        );

        println!("{}", if all_ok { "all checks passed" } else { "SOME CHECKS FAILED" });
        Ok(all_ok)
    }

    fn read_u64(mr: &MemoryRegion, offset: usize) -> u64 {
        u64::from_ne_bytes(mr.as_slice()[offset..offset + 8].try_into().expect("8 bytes"))
    }

    /// Busy-polls for one completion, giving up after 10 s instead of hanging.
    fn wait(cq: &CompletionQueue) -> Result<Completion, Error> {
        let mut wc = [Completion::default()];
        let start = Instant::now();
        while cq.poll(&mut wc)? == 0 {
            if start.elapsed() > Duration::from_secs(10) {
                eprintln!("loopback: no completion after 10 s");
                std::process::exit(1);
            }
        }
        if !wc[0].is_success() {
            eprintln!("loopback: work request {} failed: {}", wc[0].wr_id(), wc[0].status());
        }
        Ok(wc[0].clone())
    }
}

fn main() -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    return linux::main();
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("loopback: verbs exist on Linux only");
        std::process::ExitCode::from(2)
    }
}
