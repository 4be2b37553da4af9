//! Bandwidth: the sender keeps `tx_depth` requests in flight on every queue pair and
//! records when each completed; the receiver (send tests) keeps receives posted and
//! counts what arrived.

use std::time::Duration;

use super::intervals::{IntervalMark, Intervals, MARK_EVERY};
use super::pace::Pacer;
use super::plan::{BwPlan, RecvPlan};
use super::{check, poll_or_wait, Clock, LoopError, Pulse, Stall, END_IMM, END_MARKER};
use crate::measure::BwRecorder;
use crate::transport::{Connection, Op, Polled, WorkRequest};

/// Passes of the sender's loop between two refinements of its clock's rate (one
/// monotonic read each).
const REFINE_EVERY: u32 = 4096;
/// The most time between two looks at the clock while completions come (see the loop).
const LOOK_NS: u64 = 50_000_000;

/// What a sender measured on each QP.
pub struct BwOutcome {
    /// Iteration runs: the recorder of each QP.
    pub recorders: Vec<BwRecorder>,
    /// Duration runs: per QP, messages completed inside the window, and per-interval counts.
    pub windowed: Vec<Windowed>,
    /// `--interval`'s marks, in order (all QPs of the loop together).
    pub intervals: Vec<IntervalMark>,
    /// The loop's clock's start: what the recorders' stamps count from.
    pub started: std::time::Instant,
}

/// Completions counted inside a duration run's window.
#[derive(Clone, Debug, Default)]
pub struct Windowed {
    /// Messages completed inside the window.
    pub messages: u64,
    /// Cumulative messages at the end of each interval.
    pub buckets: Vec<u64>,
    /// Interval length, ns.
    pub interval_ns: u64,
    /// Window length, ns.
    pub window_ns: u64,
    /// The first bucket no completion has reached: those from it on are written when
    /// one does, or when the run ends ([`Windowed::settle`]), never ahead of time.
    reached: usize,
}

impl Windowed {
    /// Buckets up to `to` that no completion reached end at the count of the last one
    /// reached (a completion in the window's tail, past its whole intervals, is in none).
    fn fill_unreached(&mut self, to: usize) {
        let from = self.reached.min(to);
        let last = from.checked_sub(1).map_or(0, |i| self.buckets[i]);
        self.buckets[from..to].fill(last);
    }

    /// Every bucket written: the run (or its cut window) has ended.
    fn settle(&mut self) {
        self.fill_unreached(self.buckets.len());
        self.reached = self.buckets.len();
    }
}

/// A duration run's window on the loop's clock, ns.
#[derive(Clone, Copy)]
struct Window {
    start: u64,
    end: u64,
    total: u64,
    interval: u64,
}

impl Window {
    fn of(plan: &BwPlan) -> Option<Window> {
        let (total, margin) = plan.duration?;
        let w = total.saturating_sub(margin * 2);
        Some(Window {
            start: margin.as_nanos() as u64,
            end: total.saturating_sub(margin).as_nanos() as u64,
            total: total.as_nanos() as u64,
            interval: crate::measure::min_interval(w.as_nanos() as u64),
        })
    }

    /// The window of a run stopped at `now`: no more posts, and no count past `now`.
    fn cut(self, now: u64) -> Window {
        Window { end: self.end.min(now).max(self.start), total: now, ..self }
    }

    /// `counter` as this (cut) window has it: its length, and its whole intervals only.
    fn trim(&self, counter: &mut Windowed) {
        counter.window_ns = self.end - self.start;
        counter.buckets.truncate((counter.window_ns / self.interval) as usize);
        counter.settle();
    }

    fn counter(&self) -> Windowed {
        let len = self.end - self.start;
        Windowed {
            messages: 0,
            buckets: vec![0; (len / self.interval) as usize],
            interval_ns: self.interval,
            window_ns: len,
            reached: 0,
        }
    }
}

/// One queue pair's progress in a bandwidth run.
#[derive(Clone, Copy, Default)]
struct Lane {
    posted: u64,
    done: u64,
    /// The last signaled request: in a duration run the trailing unsignaled ones are
    /// never confirmed, and need not be (they fall after the window).
    signaled_upto: u64,
    at_window_start: Option<u64>,
    /// The buffer slot of the next message (`posted % slots`, kept as a counter: a
    /// division per message costs more than the rest of the bookkeeping).
    slot: u64,
    /// The message count at which the next signaled one is posted (a multiple of
    /// `cq_mod`, kept likewise).
    next_signal: u64,
}

impl Lane {
    fn new(plan: &BwPlan) -> Self {
        Lane { next_signal: u64::from(plan.cq_mod), ..Lane::default() }
    }
}

/// Posts `plan.op` on every connection, keeping `tx_depth` in flight, until each has
/// done `iters` messages (or the duration ends). `wr_id` of a signaled request is the
/// number of messages posted on its QP so far, so a completion says how many are done.
/// A peer that only waits hears from `pulse`. (Never inlined: one function per run,
/// which ci/bench-instructions finds by name; inlining a loop this size gains nothing.)
#[inline(never)]
pub fn bw_send<C: Connection, R: RecvSide>(
    conns: &mut [C],
    plan: &BwPlan,
    mut clock: Clock,
    recv: &mut R,
    pulse: impl Pulse,
) -> Result<BwOutcome, LoopError> {
    let n = conns.len();
    let signals = if plan.duration.is_some() {
        1
    } else {
        (plan.iters / u64::from(plan.cq_mod)) as usize + 2
    };
    let post_stamps = if plan.peak { plan.iters as usize } else { 1 };
    let mut recorders: Vec<BwRecorder> =
        (0..n).map(|_| BwRecorder::new(post_stamps, signals, plan.peak)).collect();
    let mut window = Window::of(plan);
    let mut windowed: Vec<Windowed> =
        window.map_or_else(Vec::new, |w| (0..n).map(|_| w.counter()).collect());
    let mut lanes = vec![Lane::new(plan); n];
    let mut wcs: [C::Completion; 16] = std::array::from_fn(|_| Default::default());
    let mut stall = Stall::beating(plan.timeout, pulse);
    // One request a buffer slot, checked and encoded once, when a post is one request;
    // the requests of one post (-l) otherwise, allocated once.
    let mut prepared: Vec<Vec<C::Prepared>> = if plan.post_list == 1 {
        let slot_requests = |c: &mut C| -> Result<Vec<C::Prepared>, LoopError> {
            let slots = 0..u64::from(plan.slots);
            Ok(slots.map(|s| c.prepare(&slot_request(plan, s))).collect::<Result<_, _>>()?)
        };
        conns.iter_mut().map(slot_requests).collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let mut list: Vec<WorkRequest> = Vec::with_capacity(plan.post_list as usize);
    let mut pacers: Vec<Pacer> =
        plan.pace.map_or_else(Vec::new, |p| (0..n).map(|k| Pacer::share(p, n, k)).collect());
    // Stamps are the clock's counts, made ns after the run; a duration run's window and
    // a pacer's schedule read ns as they go (a counter read and a multiplication). The
    // clock's rate is refined every REFINE_EVERY passes, off the hot path.
    let mut passes = 0u32;
    let mut intervals = Intervals::new(plan.interval_ns, plan.duration.map(|(total, _)| total));
    // With intervals, a loop whose passes are slow (an emulated host's yields, a few big
    // messages) looks at the clock by time too: when completions came and LOOK_NS has
    // passed since the last look, the clock's rate is refined (a monotonic read) and a
    // due interval closed there. Counted in passes only, a soak's first "1 s" interval
    // ended 2-8 s in under TCG, its times from a rate that was 3x off (2026-12-05).
    // `latest`: the counts at the last completions; `look_at`: the next look by time.
    let (mut latest, mut look_at) = (0u64, 0u64);
    // A failure ends the loop with its error (`'run`'s value), so that a duration run
    // keeps what it measured until then (below).
    macro_rules! or_end {
        ($run:lifetime, $result:expr) => {
            match $result {
                Ok(v) => v,
                Err(e) => break $run Err(LoopError::from(e)),
            }
        };
    }
    let ended: Result<(), LoopError> = 'run: loop {
        passes = passes.wrapping_add(1);
        let timely = plan.interval_ns > 0 && latest >= look_at;
        if passes % MARK_EVERY == 0 || timely {
            if timely || passes % REFINE_EVERY == 0 {
                clock.refine();
            }
            let now = clock.ns();
            if intervals.due(now) {
                let mark = intervals.close(now, lanes.iter().map(|l| l.done).sum());
                stall.pulse.interval(mark);
            }
            if let Some(w) = window.filter(|w| w.total > now && super::stop_requested()) {
                // Stopped: the window ends here, its measured part kept.
                let cut = w.cut(now);
                window = Some(cut);
                windowed.iter_mut().for_each(|c| cut.trim(c));
            }
            if timely {
                look_at = clock.counts() + clock.to_counts(LOOK_NS);
            }
        }
        let stop_posting = window.is_some_and(|w| clock.ns() >= w.total);
        let mut all_done = true;
        for (q, conn) in conns.iter_mut().enumerate() {
            let lane = &mut lanes[q];
            let allowed = pacers.get_mut(q).map_or(u64::MAX, |p| p.allowance(clock.ns()));
            if !stop_posting && allowed > 0 {
                let posted = or_end!('run, post_while_room(
                    conn,
                    plan,
                    lane,
                    &mut recorders[q],
                    Posting {
                        prepared: prepared.get_mut(q).map_or(&mut [], Vec::as_mut_slice),
                        list: &mut list,
                        stall: &mut stall,
                    },
                    clock,
                    allowed,
                ));
                if let Some(p) = pacers.get_mut(q) {
                    p.posted(posted);
                }
            }
            // Reap; in event mode sleep only on a QP that has work in flight.
            let got = if lane.signaled_upto > lane.done {
                or_end!('run, poll_or_wait(conn, &mut wcs, plan.events, &mut stall, "completions"))
            } else {
                or_end!('run, conn.poll(&mut wcs))
            };
            if got > 0 {
                or_end!('run, stall.progressed());
                let t = clock.counts();
                for c in &wcs[..got] {
                    or_end!('run, check(q, c));
                    if c.is_receive() {
                        or_end!('run, recv.on_recv(q, conn, c));
                        continue;
                    }
                    lane.done = lane.done.max(c.wr_id());
                }
                recorders[q].completed(t, lane.done);
                latest = t;
                if let Some(w) = window {
                    count_in_window(&w, clock.to_ns(t), lane, &mut windowed[q]);
                }
            }
            let target = if plan.duration.is_some() { lane.signaled_upto } else { plan.iters };
            if lane.done < target || (plan.duration.is_some() && !stop_posting) {
                all_done = false;
            }
        }
        if all_done {
            if recv.done() {
                break 'run Ok(());
            }
            or_end!('run, stall.idle("messages from the peer"));
        }
    };
    clock.refine();
    let mut ends_at = clock.ns();
    let failure = match ended {
        Ok(()) => None,
        Err(e) => {
            // A duration run that failed (its peer gone, a stall) keeps the part of its
            // window before its last completion, cut there as a signal cuts it; the
            // error goes on with it. An iteration run, or a window not begun, has
            // nothing whole to keep.
            ends_at = clock.to_ns(latest);
            // At least one whole interval (none when it ended before the window began):
            // a window of a few completions would turn a completion batch posted before
            // it into a figure of microseconds.
            let cut = window.map(|w| w.cut(ends_at));
            let Some(cut) = cut.filter(|c| c.end - c.start >= c.interval) else {
                return Err(e);
            };
            windowed.iter_mut().for_each(|c| cut.trim(c));
            Some(e)
        }
    };
    if let Some(mark) = intervals.finish(ends_at, lanes.iter().map(|l| l.done).sum()) {
        stall.pulse.interval(mark);
    }
    windowed.iter_mut().for_each(Windowed::settle);
    let scale = clock.ns_per_count();
    recorders.iter_mut().for_each(|r| r.rescale(scale));
    let outcome =
        BwOutcome { recorders, windowed, intervals: intervals.marks, started: clock.origin() };
    match failure {
        None => Ok(outcome),
        Some(e) => Err(e.with_measured(outcome)),
    }
}

/// What posting on a QP uses: its requests (one prepared per buffer slot when each
/// post is one request, else the list of one post (`-l`), reused), and the stall watch,
/// counted a poll per post. On soft-RoCE a post's doorbell can carry its whole message
/// before it returns: 128 posts of 8 MiB at the lab's 34 MB/s are 30 s in which a
/// waiting server must still hear the heartbeat.
struct Posting<'a, R, P: Pulse> {
    prepared: &'a mut [R],
    list: &'a mut Vec<WorkRequest>,
    stall: &'a mut Stall<P>,
}

/// Posts on one QP while its send queue has room, up to `allowed` messages: one
/// request, or perftest's `-l` list in one post. Returns how many it posted.
#[inline]
fn post_while_room<C: Connection, P: Pulse>(
    conn: &mut C,
    plan: &BwPlan,
    lane: &mut Lane,
    recorder: &mut BwRecorder,
    posting: Posting<'_, C::Prepared, P>,
    clock: Clock,
    allowed: u64,
) -> Result<u64, LoopError> {
    let Posting { prepared, list, stall } = posting;
    let first = lane.posted;
    while lane.posted < plan.iters
        && lane.posted - lane.done + u64::from(plan.post_list) <= u64::from(plan.tx_depth)
        && lane.posted - first < allowed
    {
        list.clear();
        for _ in 0..plan.post_list {
            let (i, slot) = (lane.posted, lane.slot);
            let moderated = i + 1 == lane.next_signal;
            if moderated {
                lane.next_signal += u64::from(plan.cq_mod);
            }
            let signaled = moderated || i + 1 == plan.iters;
            lane.slot = if slot + 1 == u64::from(plan.slots) { 0 } else { slot + 1 };
            // Post stamps feed the peak; without it only the first is kept.
            if plan.peak || i == 0 {
                recorder.posted(clock.counts());
            }
            match prepared.get_mut(slot as usize) {
                Some(req) => conn.post_prepared(req, i + 1, signaled)?,
                None => {
                    list.push(WorkRequest { wr_id: i + 1, signaled, ..slot_request(plan, slot) })
                }
            }
            lane.posted += 1;
            if signaled {
                lane.signaled_upto = lane.posted;
            }
            if !signaled && lane.posted - lane.done >= u64::from(plan.tx_depth) {
                break;
            }
        }
        if !list.is_empty() {
            conn.post_list(list)?;
        }
        stall.progressed()?;
    }
    Ok(lane.posted - first)
}

/// The request of a message in buffer slot `slot` (its `wr_id` and `signaled` are
/// the poster's to set).
fn slot_request(plan: &BwPlan, slot: u64) -> WorkRequest {
    let size = u64::from(plan.size);
    let atomic = matches!(plan.op, Op::FetchAdd(_) | Op::CompareSwap { .. });
    WorkRequest {
        wr_id: 0,
        op: plan.op,
        local_offset: (slot * size) as usize,
        len: plan.size,
        remote_offset: if atomic { 0 } else { slot * size },
        signaled: false,
        inline: plan.inline,
    }
}

/// A duration run: completions before the window set its base; inside it, they
/// count and fill the interval buckets up to their own (an hour's soak has 3,600
/// buckets: filling them all ahead at each completion cost the loop its rate).
#[inline]
fn count_in_window(w: &Window, t: u64, lane: &mut Lane, counter: &mut Windowed) {
    if t < w.start {
        lane.at_window_start = Some(lane.done);
    } else if t < w.end {
        counter.messages = lane.done - lane.at_window_start.unwrap_or(0);
        let b = ((t - w.start) / w.interval) as usize;
        if b < counter.buckets.len() {
            // A stamp a refined clock puts a bucket back rewrites those reached since.
            if b >= counter.reached {
                counter.fill_unreached(b);
                counter.buckets[b] = counter.messages;
            } else {
                let reached = counter.reached;
                counter.buckets[b..reached].fill(counter.messages);
            }
            counter.reached = counter.reached.max(b + 1);
        }
    }
}

/// Posts the `k`-th receive of a run: `size` bytes into slot `k % slots`.
#[inline]
fn post_slot<C: Connection>(conn: &mut C, k: u64, size: u32, slots: u32) -> Result<(), LoopError> {
    conn.post_recv(k, ((k % u64::from(slots)) * u64::from(size)) as usize, size)?;
    Ok(())
}

/// Posts `count` receives of `size` bytes on each connection, rotating through
/// `slots` buffer slots. Receives must be up before the sender starts.
pub fn post_receives<C: Connection>(
    conns: &mut [C],
    size: u32,
    count: u64,
    slots: u32,
) -> Result<(), LoopError> {
    for conn in conns.iter_mut() {
        for k in 0..count {
            post_slot(conn, k, size, slots)?;
        }
    }
    Ok(())
}

/// What a sender does with receive completions on its queue pairs: nothing (one-way
/// tests), or repost and count them (send_bw -b). Generic, so the one-way loop carries
/// no receive logic at all.
pub trait RecvSide {
    /// Handles one receive completion on QP `q`.
    ///
    /// # Errors
    /// Reposting failing.
    fn on_recv<C: Connection>(
        &mut self,
        q: usize,
        conn: &mut C,
        c: &C::Completion,
    ) -> Result<(), LoopError>;
    /// Whether every expected message arrived.
    fn done(&self) -> bool;
}

/// One-way tests: no receives.
pub struct NoRecv;

impl RecvSide for NoRecv {
    #[inline]
    fn on_recv<C: Connection>(
        &mut self,
        _: usize,
        _: &mut C,
        _: &C::Completion,
    ) -> Result<(), LoopError> {
        Ok(())
    }
    #[inline]
    fn done(&self) -> bool {
        true
    }
}

/// send_bw -b: counts arrivals per QP and keeps receives posted until `iters` came.
pub struct Reposting {
    /// Messages received per QP.
    pub received: Vec<u64>,
    reposted: Vec<u64>,
    iters: u64,
    size: u32,
    slots: u32,
}

impl Reposting {
    /// For `qps` QPs on which [`post_receives`] put `posted` receives up.
    pub fn new(qps: usize, iters: u64, posted: u64, size: u32, slots: u32) -> Self {
        Reposting { received: vec![0; qps], reposted: vec![posted; qps], iters, size, slots }
    }
}

impl RecvSide for Reposting {
    fn on_recv<C: Connection>(
        &mut self,
        q: usize,
        conn: &mut C,
        _: &C::Completion,
    ) -> Result<(), LoopError> {
        self.received[q] += 1;
        if self.reposted[q] < self.iters {
            post_slot(conn, self.reposted[q], self.size, self.slots)?;
            self.reposted[q] += 1;
        }
        Ok(())
    }
    fn done(&self) -> bool {
        self.received.iter().all(|&r| r >= self.iters)
    }
}

/// The receiving side of send_bw (and TCP), after [`post_receives`]: reposts and counts
/// arrivals until `iters` per QP arrived, the sender's end marker came, or `stop` says
/// so (checked every few ms; after each message where a poll blocks).
pub fn bw_recv<C: Connection>(
    conns: &mut [C],
    plan: &RecvPlan,
    mut stop: impl FnMut() -> bool,
) -> Result<Vec<u64>, LoopError> {
    let RecvPlan { size, iters, posted, slots, timeout, events } = *plan;
    let n = conns.len();
    let mut recv = Reposting::new(n, iters, posted, size, slots);
    let mut ended = vec![false; n];
    let mut wcs: [C::Completion; 16] = std::array::from_fn(|_| Default::default());
    let mut stall = Stall::new(timeout);
    let mut spins = 0u32;
    loop {
        let mut all = true;
        for (q, conn) in conns.iter_mut().enumerate() {
            // In event mode sleep only on a QP that still expects messages.
            let expecting = recv.received[q] < iters && !ended[q];
            let got = if events && expecting {
                poll_or_wait(conn, &mut wcs, true, &mut stall, "messages from the sender")?
            } else {
                conn.poll(&mut wcs)?
            };
            if got > 0 {
                stall.progressed()?;
            }
            for c in &wcs[..got] {
                check(q, c)?;
                if !c.is_receive() {
                    continue;
                }
                if c.imm() == Some(END_IMM) {
                    ended[q] = true;
                    continue;
                }
                recv.on_recv(q, conn, c)?;
            }
            if recv.received[q] < iters && !ended[q] {
                all = false;
            }
        }
        if all {
            return Ok(recv.received);
        }
        spins = spins.wrapping_add(1);
        // A blocking poll (TCP's) waited for a message already: `stop` every time.
        if (C::BLOCKING_POLL || spins % 65536 == 0) && stop() {
            return Ok(recv.received);
        }
        stall.idle("messages from the sender")?;
    }
}

/// Tells each receiver the sender is finished: one send with [`END_IMM`].
pub fn send_end_markers<C: Connection>(
    conns: &mut [C],
    timeout: Duration,
) -> Result<(), LoopError> {
    for (q, conn) in conns.iter_mut().enumerate() {
        conn.post(&END_MARKER)?;
        let mut wc = [C::Completion::default()];
        let mut stall = Stall::new(timeout);
        while conn.poll(&mut wc)? == 0 {
            stall.idle("the end marker's completion")?;
        }
        check(q, &wc[0])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_window_ends_where_it_stood_with_its_whole_intervals() {
        let w = Window { start: 5_000, end: 15_000, total: 20_000, interval: 1_000 };
        let mut counter = w.counter();
        assert_eq!((counter.window_ns, counter.buckets.len()), (10_000, 10));
        let cut = w.cut(7_500);
        assert_eq!((cut.start, cut.end, cut.total), (5_000, 7_500, 7_500));
        cut.trim(&mut counter);
        assert_eq!((counter.window_ns, counter.buckets.len()), (2_500, 2));
        // Stopped in the leading margin: an empty window.
        let early = w.cut(3_000);
        let mut counter = w.counter();
        early.trim(&mut counter);
        assert_eq!((early.end, counter.window_ns, counter.buckets.len()), (5_000, 0, 0));
    }

    #[test]
    fn buckets_hold_the_count_at_each_intervals_end_written_only_as_far_as_reached() {
        let w = Window { start: 1_000, end: 11_000, total: 12_000, interval: 1_000 };
        let mut counter = w.counter();
        let mut lane = Lane { done: 5, ..Lane::default() };
        count_in_window(&w, 500, &mut lane, &mut counter);
        lane.done = 8;
        count_in_window(&w, 1_500, &mut lane, &mut counter);
        lane.done = 10;
        count_in_window(&w, 4_200, &mut lane, &mut counter);
        assert_eq!(counter.buckets[..5], [3, 3, 3, 5, 0], "no bucket past the one reached");
        // A refined clock's stamp a bucket back: the buckets it reached since follow.
        lane.done = 11;
        count_in_window(&w, 3_900, &mut lane, &mut counter);
        counter.settle();
        assert_eq!(counter.buckets, [3, 3, 6, 6, 6, 6, 6, 6, 6, 6]);
        assert_eq!(counter.messages, 6, "counted from the window's start");
        // Cut at 7,500: its whole intervals, settled.
        let mut cut_counter = w.counter();
        count_in_window(&w, 1_200, &mut Lane { done: 4, ..Lane::default() }, &mut cut_counter);
        w.cut(7_500).trim(&mut cut_counter);
        assert_eq!(cut_counter.buckets, [4, 4, 4, 4, 4, 4]);
        // A completion in the tail past the last whole interval counts in the window's
        // messages, in no bucket.
        let tailed = Window { end: 11_500, ..w };
        let mut counter = tailed.counter();
        let mut lane = Lane { done: 2, at_window_start: Some(0), ..Lane::default() };
        count_in_window(&tailed, 1_500, &mut lane, &mut counter);
        lane.done = 5;
        count_in_window(&tailed, 11_200, &mut lane, &mut counter);
        counter.settle();
        assert_eq!((counter.messages, counter.buckets), (5, vec![2; 10]));
    }
}
