//! What the safe layer costs: an 8-byte RDMA write, posted and polled to completion on
//! a loopback RC pair, through `BasicQueuePair::post_send` + `CompletionQueue::poll` and
//! through direct rdma-sys calls on the same QP, side by side, inline and not.
//!
//! Three pairs: one-shot (the safe side checks and encodes each request, the raw side
//! fills a fresh `ibv_send_wr`), prepared (`prepare_send` once, `post_prepared` each
//! time, against a raw `ibv_send_wr` built once whose `wr_id` each post sets:
//! perftest's way) and bound (the prepared request bound to its QP and region once,
//! `bind_send`, so a post checks nothing; against the same raw side). A hot loop uses
//! the prepared or the bound calls.
//!
//! Lab: `ci/bench-verbs` (builds, boots the lab, runs this, prints the ratios).
//! Needs a device (RDMABENCH_DEVICE, default: the first); without one it says so and
//! exits 2.
//!
//! Criterion measures each variant in turn. Soft-RoCE under emulation drifts by more
//! than the 2 % we look for between those runs, so the `wrapper cost` figure comes
//! from an interleaved A/B afterwards: many short rounds alternating safe and raw, the
//! median of the per-round ratios.

#[cfg(target_os = "linux")]
mod linux {
    use std::hint::black_box;
    use std::mem::MaybeUninit;
    use std::path::PathBuf;
    use std::ptr;
    use std::time::Instant;

    use criterion::{BenchmarkId, Criterion};
    use rdmabench_ffi::verbs::loopback::{Loopback, LoopbackConfig};
    use rdmabench_ffi::verbs::{
        sys, BasicQueuePair, BoundSend, Completion, PreparedSend, QpCaps, QueuePair, RemoteSlice,
        SendOp, SendRequest,
    };

    fn loopback() -> Loopback {
        let cfg = LoopbackConfig {
            caps: QpCaps { max_inline_data: 64, ..QpCaps::default() },
            ..Default::default()
        };
        Loopback::new(&cfg).unwrap_or_else(|e| {
            eprintln!("bench verbs: {e}; it needs an RDMA device: run ci/bench-verbs (the lab)");
            std::process::exit(2)
        })
    }

    /// Polls `lb`'s CQ through the safe layer until the completion comes; returns the
    /// polls that found nothing.
    #[inline(always)]
    fn safe_wait(lb: &Loopback, wc: &mut [Completion; 1]) -> u64 {
        let mut empty = 0;
        while lb.a.cq.poll(wc).expect("poll") == 0 {
            empty += 1;
        }
        assert!(wc[0].is_success());
        empty
    }

    /// As [`safe_wait`], through rdma-sys.
    #[inline(always)]
    fn raw_wait(cq: *mut sys::ibv_cq, wc: &mut sys::ibv_wc) -> u64 {
        let mut empty = 0;
        // SAFETY: callers pass the loopback's CQ, live while the loopback is; one
        // ibv_wc of room.
        while unsafe { sys::ibv_poll_cq(cq, 1, wc) } == 0 {
            empty += 1;
        }
        assert_eq!(wc.status, sys::ibv_wc_status::IBV_WC_SUCCESS);
        empty
    }

    /// The raw sides' request: a signaled 8-byte write to `remote` from one SGE (its
    /// `wr_id` and `sg_list` are the poster's to set).
    #[inline(always)]
    fn raw_write(remote: RemoteSlice, inline: bool) -> sys::ibv_send_wr {
        // SAFETY: ibv_send_wr is plain data; all-zero is valid.
        let mut wr: sys::ibv_send_wr = unsafe { MaybeUninit::zeroed().assume_init() };
        wr.num_sge = 1;
        wr.opcode = sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
        wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0
            | if inline { sys::ibv_send_flags::IBV_SEND_INLINE.0 } else { 0 };
        wr.wr.rdma = sys::rdma_t { remote_addr: remote.addr(), rkey: remote.rkey() };
        wr
    }

    /// One write + poll through the safe layer; returns the polls that found nothing.
    fn safe_round_trip(
        lb: &Loopback,
        remote: RemoteSlice,
        inline: bool,
    ) -> impl FnMut(u64) -> u64 + '_ {
        let local = [lb.a.mr.slice(0, 8).expect("8 bytes fit")];
        let mut wc = [Completion::default()];
        #[inline(always)]
        move |id| {
            let mut wr = SendRequest::new(id, SendOp::Write(remote), &local).signaled();
            wr.flags.inline = inline;
            lb.a.qp.post_send(black_box(&wr)).expect("post");
            safe_wait(lb, &mut wc)
        }
    }

    /// The same through rdma-sys directly: what a C benchmark does, a fresh request
    /// each time.
    fn raw_round_trip(
        lb: &Loopback,
        remote: RemoteSlice,
        inline: bool,
    ) -> impl FnMut(u64) -> u64 + '_ {
        let qp = lb.a.qp.as_raw();
        let cq = lb.a.cq.as_raw();
        let mut sge = sys::ibv_sge { addr: lb.a.mr.addr(), length: 8, lkey: lb.a.mr.lkey() };
        // SAFETY: ibv_wc is plain data; all-zero is valid.
        let mut wc: sys::ibv_wc = unsafe { MaybeUninit::zeroed().assume_init() };
        #[inline(always)]
        move |id| {
            let mut wr = raw_write(remote, inline);
            wr.wr_id = id;
            wr.sg_list = &mut sge;
            let mut bad = ptr::null_mut();
            // SAFETY: `qp` is live (the loopback outlives the closure); `wr` points at
            // `sge`, which names 8 registered bytes of a live MR.
            assert_eq!(unsafe { sys::ibv_post_send(qp, black_box(&mut wr), &mut bad) }, 0);
            raw_wait(cq, &mut wc)
        }
    }

    /// The prepared pair's safe side: checked and encoded once, posted again and again.
    fn safe_prepared_round_trip(
        lb: &Loopback,
        remote: RemoteSlice,
        inline: bool,
    ) -> impl FnMut(u64) -> u64 + '_ {
        let mut prepared = prepared_write(lb, remote, inline);
        let mut wc = [Completion::default()];
        #[inline(always)]
        move |id| {
            lb.a.qp.post_prepared(black_box(&mut prepared), &lb.a.mr, id, true).expect("post");
            safe_wait(lb, &mut wc)
        }
    }

    /// The bound pair's safe side: a request prepared once and bound to its QP and
    /// region (`bind_send`), so a post checks nothing; against the prepared pair's raw
    /// side.
    fn safe_bound_round_trip<'a>(
        lb: &'a Loopback,
        mut bound: BoundSend<'a, BasicQueuePair>,
    ) -> impl FnMut(u64) -> u64 + 'a {
        let mut wc = [Completion::default()];
        #[inline(always)]
        move |id| {
            // Black-boxed as every side's request is (the raw side's `ibv_send_wr`).
            black_box(&mut bound).post(id).expect("post");
            safe_wait(lb, &mut wc)
        }
    }

    /// The request the prepared and bound pairs' safe sides post.
    fn prepared_write(lb: &Loopback, remote: RemoteSlice, inline: bool) -> PreparedSend {
        let local = [lb.a.mr.slice(0, 8).expect("8 bytes fit")];
        let mut wr = SendRequest::new(1, SendOp::Write(remote), &local).signaled();
        wr.flags.inline = inline;
        lb.a.qp.prepare_send(&wr).expect("prepare")
    }

    /// The same request, bound to the loopback's QP and region.
    fn bound_write(
        lb: &Loopback,
        remote: RemoteSlice,
        inline: bool,
    ) -> BoundSend<'_, BasicQueuePair> {
        lb.a.qp.bind_send(prepared_write(lb, remote, inline), &lb.a.mr).expect("bind")
    }

    /// Its raw side: one `ibv_send_wr`, built once; each post sets its `wr_id`.
    fn raw_prepared_round_trip(
        lb: &Loopback,
        remote: RemoteSlice,
        inline: bool,
    ) -> impl FnMut(u64) -> u64 + '_ {
        let qp = lb.a.qp.as_raw();
        let cq = lb.a.cq.as_raw();
        let mut sge = sys::ibv_sge { addr: lb.a.mr.addr(), length: 8, lkey: lb.a.mr.lkey() };
        let mut wr = raw_write(remote, inline);
        // SAFETY: ibv_wc is plain data; all-zero is valid.
        let mut wc: sys::ibv_wc = unsafe { MaybeUninit::zeroed().assume_init() };
        #[inline(always)]
        move |id| {
            wr.wr_id = id;
            // (Set on each call: the closure may have moved since it was made.)
            wr.sg_list = &mut sge;
            let mut bad = ptr::null_mut();
            // SAFETY: as in raw_round_trip.
            assert_eq!(unsafe { sys::ibv_post_send(qp, black_box(&mut wr), &mut bad) }, 0);
            raw_wait(cq, &mut wc)
        }
    }

    fn criterion_runs(c: &mut Criterion, lb: &Loopback, remote: RemoteSlice) {
        let mut group = c.benchmark_group("write_8B_post_poll");
        for inline in [false, true] {
            let mode = if inline { "inline" } else { "sge" };
            group.bench_function(BenchmarkId::new("safe", mode), |b| {
                b.iter(ids(safe_round_trip(lb, remote, inline)))
            });
            group.bench_function(BenchmarkId::new("raw", mode), |b| {
                b.iter(ids(raw_round_trip(lb, remote, inline)))
            });
            group.bench_function(BenchmarkId::new("safe_prepared", mode), |b| {
                b.iter(ids(safe_prepared_round_trip(lb, remote, inline)))
            });
            group.bench_function(BenchmarkId::new("raw_prepared", mode), |b| {
                b.iter(ids(raw_prepared_round_trip(lb, remote, inline)))
            });
            group.bench_function(BenchmarkId::new("safe_bound", mode), |b| {
                b.iter(ids(safe_bound_round_trip(lb, bound_write(lb, remote, inline))))
            });
        }
        group.finish();
    }

    /// `round_trip` under ids 1, 2, …, for criterion.
    fn ids(mut round_trip: impl FnMut(u64) -> u64) -> impl FnMut() -> u64 {
        let mut id = 0;
        move || {
            id += 1;
            round_trip(id)
        }
    }

    /// Interleaved A/B: median over rounds of (safe time / raw time).
    fn wrapper_cost(
        mut safe: impl FnMut(u64) -> u64,
        mut raw: impl FnMut(u64) -> u64,
        rounds: usize,
        per_round: usize,
    ) -> ([f64; 3], f64, f64) {
        let time = |f: &mut dyn FnMut(u64) -> u64| {
            let start = Instant::now();
            for id in 1..=per_round as u64 {
                black_box(f(id));
            }
            start.elapsed().as_secs_f64()
        };
        let mut ratios = Vec::with_capacity(rounds);
        let mut safe_total = 0.0;
        let mut raw_total = 0.0;
        for round in 0..rounds {
            // Alternate which goes first, so drift within a round cancels out.
            let (s, r) = if round % 2 == 0 {
                let s = time(&mut safe);
                (s, time(&mut raw))
            } else {
                let r = time(&mut raw);
                (time(&mut safe), r)
            };
            safe_total += s;
            raw_total += r;
            ratios.push(s / r);
        }
        ratios.sort_by(f64::total_cmp);
        let n = (rounds * per_round) as f64;
        let quartiles = [ratios[rounds / 4], ratios[rounds / 2], ratios[3 * rounds / 4]];
        (quartiles, safe_total / n * 1e9, raw_total / n * 1e9)
    }

    /// `n` round trips of `round_trip`, counting the polls that found nothing: under
    /// callgrind (`--instructions`), this function's inclusive cost is the figure. Every
    /// side's round trip is inlined into its rounds (`#[inline(always)]` on the
    /// closures), as a hot loop inlines its posts: a call only one side paid would count
    /// as the layer's cost.
    #[inline(never)]
    fn safe_rounds(round_trip: &mut impl FnMut(u64) -> u64, n: u64) -> u64 {
        let mut empty = 0;
        for i in 0..n {
            empty += round_trip(i + 1);
        }
        empty
    }

    /// As [`safe_rounds`], for the raw calls (a function of its own, to be told apart).
    #[inline(never)]
    fn raw_rounds(round_trip: &mut impl FnMut(u64) -> u64, n: u64) -> u64 {
        let mut empty = 0;
        for i in 0..n {
            empty += round_trip(i + 1);
        }
        empty
    }

    /// As [`safe_rounds`], for the prepared pair's safe side.
    #[inline(never)]
    fn safe_prepared_rounds(round_trip: &mut impl FnMut(u64) -> u64, n: u64) -> u64 {
        let mut empty = 0;
        for i in 0..n {
            empty += round_trip(i + 1);
        }
        empty
    }

    /// As [`safe_rounds`], for the bound pair's safe side.
    #[inline(never)]
    fn safe_bound_rounds(round_trip: &mut impl FnMut(u64) -> u64, n: u64) -> u64 {
        let mut empty = 0;
        for i in 0..n {
            empty += round_trip(i + 1);
        }
        empty
    }

    /// As [`safe_rounds`], for the prepared pair's raw side.
    #[inline(never)]
    fn raw_prepared_rounds(round_trip: &mut impl FnMut(u64) -> u64, n: u64) -> u64 {
        let mut empty = 0;
        for i in 0..n {
            empty += round_trip(i + 1);
        }
        empty
    }

    /// `n` polls of an empty CQ through the safe layer: what one pass of waiting costs.
    #[inline(never)]
    fn safe_empty_polls(lb: &Loopback, n: u64) {
        let mut wc = [Completion::default()];
        for _ in 0..n {
            assert_eq!(lb.a.cq.poll(black_box(&mut wc)).expect("poll"), 0);
        }
    }

    /// `n` polls of an empty CQ through rdma-sys.
    #[inline(never)]
    fn raw_empty_polls(lb: &Loopback, n: u64) {
        let cq = lb.a.cq.as_raw();
        // SAFETY: ibv_wc is plain data; all-zero is valid.
        let mut wc: sys::ibv_wc = unsafe { MaybeUninit::zeroed().assume_init() };
        for _ in 0..n {
            // SAFETY: `cq` is live (the loopback outlives the loop); one ibv_wc of room.
            assert_eq!(unsafe { sys::ibv_poll_cq(cq, 1, black_box(&mut wc)) }, 0);
        }
    }

    /// `--instructions N [inline]`: N round trips of each variant and N empty polls of
    /// each, in functions of their own, for ci/bench-verbs to count under callgrind;
    /// prints how many polls of the round trips found nothing (the waiting to take out).
    fn instructions(lb: &Loopback, remote: RemoteSlice, n: u64, inline: bool) {
        let empty_safe = safe_rounds(&mut safe_round_trip(lb, remote, inline), n);
        let empty_raw = raw_rounds(&mut raw_round_trip(lb, remote, inline), n);
        println!("empty polls: safe {empty_safe} raw {empty_raw} of {n} round trips");
        let safe = &mut safe_prepared_round_trip(lb, remote, inline);
        let raw = &mut raw_prepared_round_trip(lb, remote, inline);
        let (empty_safe, empty_raw) = (safe_prepared_rounds(safe, n), raw_prepared_rounds(raw, n));
        println!(
            "empty polls: safe_prepared {empty_safe} raw_prepared {empty_raw} of {n} round trips"
        );
        let bound = bound_write(lb, remote, inline);
        let empty_bound = safe_bound_rounds(&mut safe_bound_round_trip(lb, bound), n);
        // Against the prepared pair's raw rounds, counted once.
        println!(
            "empty polls: safe_bound {empty_bound} raw_prepared {empty_raw} of {n} round trips"
        );
        safe_empty_polls(lb, n);
        raw_empty_polls(lb, n);
    }

    pub fn main() {
        let lb = loopback();
        let remote = lb.b.mr.remote().slice(0, 8).expect("8 bytes fit");
        let args: Vec<String> = std::env::args().collect();
        if let Some(n) = args.iter().position(|a| a == "--instructions") {
            let count = args.get(n + 1).and_then(|v| v.parse().ok()).unwrap_or(2000);
            let inline = args.get(n + 2).is_some_and(|m| m == "inline");
            return instructions(&lb, remote, count, inline);
        }
        let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/criterion");
        let mut c = Criterion::default().output_directory(&out).configure_from_args();
        criterion_runs(&mut c, &lb, remote);
        c.final_summary();
        for inline in [false, true] {
            const ROUNDS: usize = 101;
            let mode = if inline { "inline" } else { "sge" };
            let one_shot = wrapper_cost(
                safe_round_trip(&lb, remote, inline),
                raw_round_trip(&lb, remote, inline),
                ROUNDS,
                200,
            );
            let prepared = wrapper_cost(
                safe_prepared_round_trip(&lb, remote, inline),
                raw_prepared_round_trip(&lb, remote, inline),
                ROUNDS,
                200,
            );
            let bound = wrapper_cost(
                safe_bound_round_trip(&lb, bound_write(&lb, remote, inline)),
                raw_prepared_round_trip(&lb, remote, inline),
                ROUNDS,
                200,
            );
            let pct = |r: f64| (r - 1.0) * 100.0;
            for (pair, ([q1, median, q3], safe_ns, raw_ns)) in
                [("", one_shot), (", prepared", prepared), (", bound", bound)]
            {
                println!(
                    "wrapper cost ({mode}{pair}): {:+.2} % median of {ROUNDS} interleaved rounds (quartiles {:+.2} % .. {:+.2} %); \
                     mean round trip safe {:.0} ns, raw {:.0} ns",
                    pct(median),
                    pct(q1),
                    pct(q3),
                    safe_ns,
                    raw_ns
                );
            }
        }
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("bench verbs: verbs exist on Linux only");
        std::process::exit(2);
    }
}
