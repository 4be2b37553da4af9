//! Latency: write and send ping-pongs (half a round trip per sample) and read or
//! atomic round trips, one operation in flight, one clock read per iteration. Each
//! loop is one function, never inlined: ci/bench-instructions finds it by name.

use super::plan::LatPlan;
use super::sampler::Sampler;
use super::{check, poll_or_wait, LoopError, Pulse, Stall, END_IMM, END_MARKER};
use crate::measure::LatencyRecorder;
use crate::transport::{Connection, Op, Polled, WorkRequest};

/// A latency loop's one request: `op` of `plan.size` bytes from `local_offset` into the
/// start of the peer's buffer; each post sets its `wr_id` and whether it is signaled.
fn the_request(op: Op, local_offset: usize, plan: &LatPlan) -> WorkRequest {
    WorkRequest {
        wr_id: 0,
        op,
        local_offset,
        len: plan.size,
        remote_offset: 0,
        signaled: false,
        inline: plan.inline,
    }
}

/// Waits for the one completion in flight, into `wc` (the caller's, made once).
#[inline(always)]
fn wait_one<C: Connection, P: Pulse>(
    conn: &mut C,
    wc: &mut [C::Completion; 1],
    plan: &LatPlan,
    stall: &mut Stall<P>,
    waiting_for: &'static str,
) -> Result<(), LoopError> {
    while poll_or_wait(conn, wc, plan.events, stall, waiting_for)? == 0 {}
    check(0, &wc[0])
}

/// read_lat / atomic_lat: post one, wait for its completion, repeat. Each sample is a
/// full round trip: as perftest, the time from one post to the next (one clock read
/// per operation). The target only waits: `pulse` tells it this side is alive.
#[inline(never)]
pub fn lat_round_trip<C: Connection, S: Sampler>(
    conn: &mut C,
    op: Op,
    plan: &LatPlan,
    mut samples: S,
    pulse: impl Pulse,
) -> Result<LatencyRecorder, LoopError> {
    let mut stall = Stall::beating(plan.timeout, pulse);
    let mut req = conn.prepare(&the_request(op, 0, plan))?;
    let mut wc = [C::Completion::default()];
    let mut i = 0u64;
    while samples.tick(i) {
        conn.post_prepared(&mut req, i, true)?;
        wait_one(conn, &mut wc, plan, &mut stall, "the round trip's completion")?;
        i += 1;
    }
    Ok(samples.finish())
}

/// A side's part in the write ping-pong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PingPong {
    /// Writes the first message (rdmabench's client; perftest's server).
    pub writes_first: bool,
    /// Records a sample per round trip (rdmabench's client; both sides of perftest).
    pub measures: bool,
    /// Where in the local buffer this side's messages start: clear of the slot the
    /// peer writes into (rdmabench's second slot; against perftest, above the largest
    /// size of a sweep, as nothing clears the buffer between its sizes).
    pub source: usize,
}

/// write_lat: each side RDMA-writes a message whose last byte is a counter into the
/// peer's first slot, and spins on the last byte of its own first slot. It sends from
/// elsewhere (`source`), so its own counter never looks like the peer's answer. The counter
/// is perftest's (1, 2, … 255, 0, 1, …): the byte a side waits for always differs from
/// the one it holds, and perftest can be the peer. Each sample is the time between two
/// posts of the measuring side, halved.
#[inline(never)]
pub fn lat_write_pingpong<C: Connection, S: Sampler>(
    conn: &mut C,
    part: PingPong,
    plan: &LatPlan,
    samples: S,
    stop: impl FnMut() -> bool,
) -> Result<LatencyRecorder, LoopError> {
    // The side's part is decided once, here: each side's loop is compiled for it and
    // tests no flag of it per iteration (which side waits first, what it waits for,
    // whether it may be stopped: 14 instructions an iteration when they were tested).
    // Both are inlined into this one function, which the bench finds by name.
    if part.writes_first {
        write_pingpong::<C, S, true>(conn, part, plan, samples, stop)
    } else {
        write_pingpong::<C, S, false>(conn, part, plan, samples, stop)
    }
}

/// [`lat_write_pingpong`] for the side that writes first (`FIRST`) or waits first.
#[inline(always)]
fn write_pingpong<C: Connection, S: Sampler, const FIRST: bool>(
    conn: &mut C,
    part: PingPong,
    plan: &LatPlan,
    mut samples: S,
    mut stop: impl FnMut() -> bool,
) -> Result<LatencyRecorder, LoopError> {
    let PingPong { writes_first: _, measures, source } = part;
    // As perftest: the spin loop reads memory only; one write in SIGNAL_EVERY is
    // signaled, and completions are reaped only when the send queue needs room.
    const SIGNAL_EVERY: u64 = 8;
    let last = plan.size as usize - 1;
    let mut wcs: [C::Completion; 8] = std::array::from_fn(|_| Default::default());
    let (mut signaled, mut reaped) = (0u64, 0u64);
    let mut i = 0u64;
    let mut stall = Stall::new(plan.timeout);
    let mut req = conn.prepare(&the_request(Op::Write, source, plan))?;
    // Reaps until at most `keep` signaled writes are unconfirmed. (Its stall watch reads
    // the clock as it starts: made only when there is something to wait for.)
    let mut reap =
        |conn: &mut C, signaled: u64, reaped: &mut u64, keep: u64| -> Result<(), LoopError> {
            if signaled - *reaped <= keep {
                return Ok(());
            }
            let mut stall = Stall::new(plan.timeout);
            while signaled - *reaped > keep {
                let got = conn.poll(&mut wcs)?;
                for c in &wcs[..got] {
                    check(0, c)?;
                }
                *reaped += got as u64;
                if got == 0 {
                    stall.idle("write completions")?;
                }
            }
            Ok(())
        };
    loop {
        let value = (i + 1) as u8;
        if !FIRST || i > 0 {
            // Wait for the peer's write of `value`, or its answer to ours.
            let expect = if FIRST { i as u8 } else { value };
            let seen = stall.spin(
                "the peer's write",
                |reads| conn.wait_u8(last, expect, reads),
                || !FIRST && stop(),
            )?;
            if !seen {
                reap(conn, signaled, &mut reaped, 0)?;
                return Ok(samples.finish());
            }
        }
        // The only clock read of an iteration. A side that waits first ends after its
        // last post, below: its ticks never end the run.
        let finished =
            if measures { !samples.tick(i) } else { plan.duration.is_none() && i >= plan.iters };
        if finished {
            reap(conn, signaled, &mut reaped, 0)?;
            return Ok(samples.finish());
        }
        conn.store_u8(source + last, value);
        // Room in the send queue: at most two signaling rounds unconfirmed (the test
        // first: most iterations have nothing to reap).
        if signaled - reaped > 1 {
            reap(conn, signaled, &mut reaped, 1)?;
        }
        let signal = i % SIGNAL_EVERY == SIGNAL_EVERY - 1;
        conn.post_prepared(&mut req, i, signal)?;
        signaled += u64::from(signal);
        i += 1;
        if !FIRST && plan.iters != u64::MAX && i >= plan.iters {
            reap(conn, signaled, &mut reaped, 0)?;
            return Ok(samples.finish());
        }
    }
}

/// send_lat: ping-pong of `op`, a message that consumes a receive (a send, or a write
/// with immediate data). The initiator sends and waits for the answer; the responder
/// answers each message. Receives, put up by [`post_receives`] before the run, are
/// reposted as they are used.
#[inline(never)]
pub fn lat_send_pingpong<C: Connection, S: Sampler>(
    conn: &mut C,
    initiator: bool,
    op: Op,
    plan: &LatPlan,
    samples: S,
    stop: impl FnMut() -> bool,
) -> Result<LatencyRecorder, LoopError> {
    // The side is decided once, here, as in the write ping-pong: each side's loop tests
    // no flag of it per iteration, and a poll that found nothing goes straight back.
    if initiator {
        send_pingpong::<C, S, true>(conn, op, plan, samples, stop)
    } else {
        send_pingpong::<C, S, false>(conn, op, plan, samples, stop)
    }
}

/// [`lat_send_pingpong`] for the side that sends first (`INITIATOR`) or answers.
#[inline(always)]
fn send_pingpong<C: Connection, S: Sampler, const INITIATOR: bool>(
    conn: &mut C,
    op: Op,
    plan: &LatPlan,
    mut samples: S,
    mut stop: impl FnMut() -> bool,
) -> Result<LatencyRecorder, LoopError> {
    // One send in eight is signaled (their completions come back on the same CQ as
    // the receives and are skipped); the queue holds 16, so it never fills.
    let mut req = conn.prepare(&the_request(op, 0, plan))?;
    let mut send =
        |conn: &mut C, i: u64| conn.post_prepared(&mut req, i, i % 8 == 7 || i + 1 == plan.iters);
    // The receive each message consumes, put up again as it was.
    let mut recv = conn.prepare_recv(0, plan.size)?;
    let mut wcs: [C::Completion; 8] = std::array::from_fn(|_| Default::default());
    let mut i = 0u64;
    let mut stall = Stall::new(plan.timeout);
    let mut recv_posted = plan.recv_posted;
    loop {
        if INITIATOR {
            // One clock read per message: the time between two sends is one round
            // trip, and the answer to the last message closes the last sample.
            if !samples.tick(i) {
                // Tell the responder we are done (duration runs).
                if plan.duration.is_some() {
                    conn.post(&END_MARKER)?;
                }
                return Ok(samples.finish());
            }
            send(conn, i)?;
        }
        // Wait for the peer's message, reaping send completions on the way. Only the
        // responder may be told to stop waiting (its initiator is gone).
        'wait: loop {
            let got = stall
                .poll(conn, &mut wcs, plan.events, "the peer's message", || !INITIATOR && stop())?;
            if got == 0 {
                return Ok(samples.finish());
            }
            for c in &wcs[..got] {
                check(0, c)?;
                if c.is_receive() {
                    if recv_posted < plan.iters {
                        conn.post_prepared_recv(&mut recv, c.wr_id())?;
                        recv_posted += 1;
                    }
                    if c.imm() == Some(END_IMM) {
                        return Ok(samples.finish());
                    }
                    break 'wait;
                }
            }
        }
        if !INITIATOR {
            send(conn, i)?;
        }
        i += 1;
        if !INITIATOR && plan.duration.is_none() && i >= plan.iters {
            // Reap our last send before returning.
            let mut stall = Stall::new(plan.timeout);
            loop {
                let got = conn.poll(&mut wcs)?;
                // (A send's, or a write's with immediate data: whatever is not a receive.)
                if wcs[..got].iter().any(|c| !c.is_receive()) {
                    break;
                }
                stall.idle("the last answer's completion")?;
            }
            return Ok(samples.finish());
        }
    }
}
