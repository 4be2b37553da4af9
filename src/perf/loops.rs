//! The test loops, written once against [`Connection`] and generic over it. The
//! operation is fixed before a loop starts; nothing in a loop re-reads configuration.
//! Every loop gives up with [`LoopError::Stalled`] when nothing progresses for the
//! configured timeout, so a vanished peer ends a run instead of hanging it.

use std::time::{Duration, Instant};

use crate::measure::{BwRecorder, LatencyRecorder};
use crate::transport::{
    Completion, CompletionKind, Connection, Op, Status, TransportError, WorkRequest,
};

/// Immediate value that tells a receiver the sender is finished (duration runs).
pub const END_IMM: u32 = 0xFFFF_FFFF;

/// The zero-byte send carrying [`END_IMM`].
const END_MARKER: WorkRequest = WorkRequest {
    wr_id: u64::MAX,
    op: Op::SendImm(END_IMM),
    local_offset: 0,
    len: 0,
    remote_offset: 0,
    signaled: true,
    inline: false,
};

/// Why a loop stopped early.
#[derive(Debug)]
pub enum LoopError {
    /// Posting or polling failed.
    Transport(TransportError),
    /// Work completed with an error status.
    Completion {
        /// QP index.
        qp: usize,
        /// Status name.
        name: &'static str,
        /// What it means.
        meaning: &'static str,
    },
    /// Nothing progressed for this long.
    Stalled {
        /// What the loop waited for.
        waiting_for: &'static str,
        /// How long.
        after: Duration,
    },
}

impl std::fmt::Display for LoopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoopError::Transport(e) => write!(f, "{e}"),
            LoopError::Completion { qp, name, meaning } => {
                write!(f, "work on QP {qp} failed: {name} ({meaning})")
            }
            LoopError::Stalled { waiting_for, after } => {
                write!(
                    f,
                    "no progress for {} s waiting for {waiting_for}: is the peer still there?",
                    after.as_secs()
                )
            }
        }
    }
}

impl From<TransportError> for LoopError {
    fn from(e: TransportError) -> Self {
        LoopError::Transport(e)
    }
}

fn check(qp: usize, c: &Completion) -> Result<(), LoopError> {
    match c.status {
        Status::Success => Ok(()),
        Status::Failed { name, meaning, .. } => Err(LoopError::Completion { qp, name, meaning }),
    }
}

/// A monotonic clock in ns since the loop's start.
#[derive(Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    /// Starts now.
    pub fn start() -> Self {
        Clock(Instant::now())
    }
    /// ns since start.
    #[inline]
    pub fn ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// Watches for a loop that stops progressing. Reads the clock only every 4096 idle
/// calls, never on progress: the hot path pays a counter and a flag.
struct Stall {
    last: Instant,
    timeout: Duration,
    spins: u32,
    progress: bool,
}

impl Stall {
    fn new(timeout: Duration) -> Self {
        Stall { last: Instant::now(), timeout, spins: 0, progress: false }
    }
    #[inline]
    fn progressed(&mut self) {
        self.progress = true;
    }
    /// Call when nothing happened.
    #[inline]
    fn idle(&mut self, waiting_for: &'static str) -> Result<(), LoopError> {
        self.spins = self.spins.wrapping_add(1);
        if self.spins % 4096 == 0 {
            if self.progress {
                self.progress = false;
                self.last = Instant::now();
            } else if self.last.elapsed() > self.timeout {
                return Err(LoopError::Stalled { waiting_for, after: self.timeout });
            }
        }
        Ok(())
    }
}

/// Polls `conn`; when nothing is there, spins (checking for a stall) or, in event
/// mode, arms, polls again and sleeps until the completion event.
#[inline]
fn poll_or_wait<C: Connection>(
    conn: &mut C,
    wcs: &mut [Completion],
    events: bool,
    stall: &mut Stall,
    waiting_for: &'static str,
) -> Result<usize, LoopError> {
    let got = conn.poll(wcs)?;
    if got > 0 {
        stall.progressed();
        return Ok(got);
    }
    if !events {
        stall.idle(waiting_for)?;
        return Ok(0);
    }
    conn.arm()?;
    let got = conn.poll(wcs)?;
    if got > 0 {
        stall.progressed();
        return Ok(got);
    }
    if !conn.wait(stall.timeout)? {
        return Err(LoopError::Stalled { waiting_for, after: stall.timeout });
    }
    let got = conn.poll(wcs)?;
    stall.progressed();
    Ok(got)
}

/// How a bandwidth sender runs one size.
#[derive(Clone, Copy, Debug)]
pub struct BwPlan {
    /// The operation.
    pub op: Op,
    /// Message size.
    pub size: u32,
    /// Messages per QP (`u64::MAX` in a duration run).
    pub iters: u64,
    /// Duration run: (total, margin).
    pub duration: Option<(Duration, Duration)>,
    /// Outstanding work per QP.
    pub tx_depth: u32,
    /// Signal one in this many.
    pub cq_mod: u32,
    /// Requests per post.
    pub post_list: u32,
    /// Inline the payload.
    pub inline: bool,
    /// Buffer slots messages rotate through.
    pub slots: u32,
    /// Record post stamps for the peak figure.
    pub peak: bool,
    /// Give up after this long without progress.
    pub timeout: Duration,
    /// Sleep on completion events instead of spinning.
    pub events: bool,
}

/// What a sender measured on each QP.
pub struct BwOutcome {
    /// Iteration runs: the recorder of each QP.
    pub recorders: Vec<BwRecorder>,
    /// Duration runs: per QP, messages completed inside the window, and per-interval counts.
    pub windowed: Vec<Windowed>,
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
}

/// Posts `plan.op` on every connection, keeping `tx_depth` in flight, until each has
/// done `iters` messages (or the duration ends). `wr_id` of a signaled request is the
/// number of messages posted on its QP so far, so a completion says how many are done.
pub fn bw_send<C: Connection, R: RecvSide>(
    conns: &mut [C],
    plan: &BwPlan,
    clock: Clock,
    recv: &mut R,
) -> Result<BwOutcome, LoopError> {
    let n = conns.len();
    let signals = if plan.duration.is_some() {
        1
    } else {
        (plan.iters / u64::from(plan.cq_mod)) as usize + 2
    };
    let mut recorders: Vec<BwRecorder> = (0..n)
        .map(|_| {
            BwRecorder::new(if plan.peak { plan.iters as usize } else { 1 }, signals, plan.peak)
        })
        .collect();
    let window = plan.duration.map(|(total, margin)| {
        let w = total.saturating_sub(margin * 2);
        let interval = crate::measure::min_interval(w.as_nanos() as u64);
        (
            margin.as_nanos() as u64,
            (total - margin).as_nanos() as u64,
            total.as_nanos() as u64,
            interval,
        )
    });
    let mut windowed: Vec<Windowed> = match window {
        Some((start, end, _, interval)) => (0..n)
            .map(|_| Windowed {
                messages: 0,
                buckets: vec![0; ((end - start) / interval) as usize],
                interval_ns: interval,
                window_ns: end - start,
            })
            .collect(),
        None => Vec::new(),
    };
    let mut at_window_start = vec![None::<u64>; n];
    let mut posted = vec![0u64; n];
    let mut done = vec![0u64; n];
    // The last signaled request: in a duration run the trailing unsignaled ones are
    // never confirmed, and need not be (they fall after the window).
    let mut signaled_upto = vec![0u64; n];
    let mut wcs = [Completion::default(); 16];
    let mut stall = Stall::new(plan.timeout);
    let size = u64::from(plan.size);
    let mut stop_posting = false;
    // The requests of one post (-l), allocated once.
    let mut list: Vec<WorkRequest> = Vec::with_capacity(plan.post_list as usize);
    loop {
        if let Some((_, _, total, _)) = window {
            stop_posting = clock.ns() >= total;
        }
        let mut all_done = true;
        for (q, conn) in conns.iter_mut().enumerate() {
            // Post while there is room.
            while !stop_posting
                && posted[q] < plan.iters
                && posted[q] - done[q] + u64::from(plan.post_list) <= u64::from(plan.tx_depth)
            {
                list.clear();
                for _ in 0..plan.post_list {
                    let i = posted[q];
                    let slot = i % u64::from(plan.slots);
                    let last = i + 1 == plan.iters;
                    let signaled = (i + 1) % u64::from(plan.cq_mod) == 0 || last;
                    let wr = WorkRequest {
                        wr_id: i + 1,
                        op: plan.op,
                        local_offset: (slot * size) as usize,
                        len: plan.size,
                        remote_offset: if matches!(
                            plan.op,
                            Op::FetchAdd(_) | Op::CompareSwap { .. }
                        ) {
                            0
                        } else {
                            slot * size
                        },
                        signaled,
                        inline: plan.inline,
                    };
                    // Post stamps feed the peak; without it only the first is kept.
                    if plan.peak || i == 0 {
                        recorders[q].posted(clock.ns());
                    }
                    list.push(wr);
                    posted[q] += 1;
                    if signaled {
                        signaled_upto[q] = posted[q];
                    }
                    if !signaled && posted[q] - done[q] >= u64::from(plan.tx_depth) {
                        break;
                    }
                }
                // One request, or perftest's -l list in one post.
                conn.post_list(&list)?;
            }
            // Reap; in event mode sleep only on a QP that has work in flight.
            let got = if signaled_upto[q] > done[q] {
                poll_or_wait(conn, &mut wcs, plan.events, &mut stall, "completions")?
            } else {
                conn.poll(&mut wcs)?
            };
            if got > 0 {
                stall.progressed();
                let t = clock.ns();
                for c in &wcs[..got] {
                    check(q, c)?;
                    if matches!(c.kind, CompletionKind::Recv | CompletionKind::RecvWriteImm) {
                        recv.on_recv(q, conn, c)?;
                        continue;
                    }
                    done[q] = done[q].max(c.wr_id);
                }
                recorders[q].completed(t, done[q]);
                if let Some((ws, we, _, interval)) = window {
                    if t < ws {
                        at_window_start[q] = Some(done[q]);
                    } else if t < we {
                        let base = at_window_start[q].unwrap_or(0);
                        let w = &mut windowed[q];
                        w.messages = done[q] - base;
                        let b = ((t - ws) / interval) as usize;
                        if b < w.buckets.len() {
                            for slot in &mut w.buckets[b..] {
                                *slot = w.messages;
                            }
                        }
                    }
                }
            }
            let target = if plan.duration.is_some() { signaled_upto[q] } else { plan.iters };
            if done[q] < target || (plan.duration.is_some() && !stop_posting) {
                all_done = false;
            }
        }
        if all_done {
            if recv.done() {
                break;
            }
            stall.idle("messages from the peer")?;
        }
    }
    Ok(BwOutcome { recorders, windowed })
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
        c: &Completion,
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
        _: &Completion,
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
        _: &Completion,
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

/// How a receiver runs one size.
#[derive(Clone, Copy, Debug)]
pub struct RecvPlan {
    /// Message size.
    pub size: u32,
    /// Messages per QP (`u64::MAX` in a duration run).
    pub iters: u64,
    /// Receives [`post_receives`] put up on each QP before the loop.
    pub posted: u64,
    /// Buffer slots messages rotate through.
    pub slots: u32,
    /// Give up after this long without progress.
    pub timeout: Duration,
    /// Sleep on completion events instead of spinning.
    pub events: bool,
}

/// The receiving side of send_bw (and TCP), after [`post_receives`]: reposts and counts
/// arrivals until `iters` per QP arrived, the sender's end marker came, or `stop` says
/// so (checked every few ms).
pub fn bw_recv<C: Connection>(
    conns: &mut [C],
    plan: &RecvPlan,
    mut stop: impl FnMut() -> bool,
) -> Result<Vec<u64>, LoopError> {
    let RecvPlan { size, iters, posted, slots, timeout, events } = *plan;
    let n = conns.len();
    let mut recv = Reposting::new(n, iters, posted, size, slots);
    let mut ended = vec![false; n];
    let mut wcs = [Completion::default(); 16];
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
                stall.progressed();
            }
            for c in &wcs[..got] {
                check(q, c)?;
                if c.kind != CompletionKind::Recv {
                    continue;
                }
                if c.imm == Some(END_IMM) {
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
        if spins % 65536 == 0 && stop() {
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
        let mut wc = [Completion::default()];
        let mut stall = Stall::new(timeout);
        while conn.poll(&mut wc)? == 0 {
            stall.idle("the end marker's completion")?;
        }
        check(q, &wc[0])?;
    }
    Ok(())
}

/// How a latency test runs one size.
#[derive(Clone, Copy, Debug)]
pub struct LatPlan {
    /// Message size.
    pub size: u32,
    /// Samples (`u64::MAX` in a duration run).
    pub iters: u64,
    /// Duration run: (total, margin); only samples inside the window are kept.
    pub duration: Option<(Duration, Duration)>,
    /// Inline the payload.
    pub inline: bool,
    /// Divide each round trip by this (2: one-way).
    pub rtt_factor: u32,
    /// Give up after this long without progress.
    pub timeout: Duration,
    /// Sleep on completion events.
    pub events: bool,
    /// Receives posted before the loop (send latency): the loop reposts only while
    /// more messages are due, so none is left behind for the next size of a sweep.
    pub recv_posted: u64,
}

// Both take a time already read: a loop reads the clock once per iteration (under
// emulation a clock read costs as much as a small message).
impl LatPlan {
    /// Whether a sample that started at `t` falls inside a duration run's window.
    fn keep(&self, t: u64) -> bool {
        match self.duration {
            None => true,
            Some((total, margin)) => {
                t >= margin.as_nanos() as u64 && t < (total - margin).as_nanos() as u64
            }
        }
    }
    /// Whether the run is over at iteration `i`, time `now`.
    fn over(&self, i: u64, now: u64) -> bool {
        match self.duration {
            None => i >= self.iters,
            Some((total, _)) => now >= total.as_nanos() as u64,
        }
    }
}

/// Where a latency loop's clock reads go. The initiator calls [`tick`](Self::tick)
/// once per iteration, before its post: the time between two ticks is one round trip
/// (perftest's way). The two kinds are chosen once per run, so the loops never test
/// the run's mode.
pub trait Sampler {
    /// Marks the start of iteration `i`; `false` when the run is over (that tick only
    /// closes the last sample).
    fn tick(&mut self, i: u64) -> bool;
    /// The samples.
    fn finish(self) -> LatencyRecorder;
}

/// Most stamps a counted run keeps (128 MiB of `Instant`s); a longer run records each
/// interval as it comes.
const MAX_STAMPS: u64 = 1 << 23;

/// An iteration run (`-n`): a tick only stores an `Instant`, as perftest stores its
/// cycle counts; the intervals are taken after the run, so no clock arithmetic and no
/// histogram update is timed.
pub struct CountedSampler {
    /// The start of each iteration; room for the whole run is reserved at the first
    /// tick (a responder never ticks, and allocates nothing).
    stamps: Vec<Instant>,
    /// Stamps the run needs: `iters + 1`, or 0 for runs over [`MAX_STAMPS`].
    room: usize,
    /// The previous tick, once ticks no longer go into `stamps`.
    last: Option<Instant>,
    iters: u64,
    factor: u64,
    rec: LatencyRecorder,
}

impl CountedSampler {
    /// For `plan`'s iterations.
    pub fn new(plan: &LatPlan) -> Self {
        let needed = plan.iters.saturating_add(1);
        Self::with_room(plan, if needed <= MAX_STAMPS { needed as usize } else { 0 })
    }

    fn with_room(plan: &LatPlan, room: usize) -> Self {
        CountedSampler {
            stamps: Vec::new(),
            room,
            last: None,
            iters: plan.iters,
            factor: u64::from(plan.rtt_factor.max(1)),
            rec: LatencyRecorder::default(),
        }
    }

    fn record(&mut self, from: Instant, to: Instant) {
        self.rec.record((to - from).as_nanos() as u64 / self.factor);
    }

    /// A tick with no reserved room left: the first one reserves it; past it, the
    /// interval since the previous tick is recorded at once.
    fn spill(&mut self, now: Instant) {
        if self.stamps.is_empty() && self.room > 0 {
            self.stamps.reserve_exact(self.room);
            // The first iteration starts after the allocation, not before it.
            self.stamps.push(Instant::now());
            return;
        }
        if let Some(prev) = self.last.or_else(|| self.stamps.last().copied()) {
            self.record(prev, now);
        }
        self.last = Some(now);
    }
}

impl Sampler for CountedSampler {
    #[inline]
    fn tick(&mut self, i: u64) -> bool {
        let now = Instant::now();
        if self.stamps.len() < self.stamps.capacity() {
            self.stamps.push(now);
        } else {
            self.spill(now);
        }
        i < self.iters
    }

    fn finish(mut self) -> LatencyRecorder {
        let stamps = std::mem::take(&mut self.stamps);
        for w in stamps.windows(2) {
            self.record(w[0], w[1]);
        }
        self.rec
    }
}

/// A duration run (`-D`): each tick is read as ns since the start, to keep only the
/// samples inside the measured window and to stop at the end.
pub struct TimedSampler {
    clock: Clock,
    plan: LatPlan,
    prev: Option<u64>,
    rec: LatencyRecorder,
}

impl TimedSampler {
    /// For `plan`'s duration.
    pub fn new(plan: &LatPlan) -> Self {
        TimedSampler {
            clock: Clock::start(),
            plan: *plan,
            prev: None,
            rec: LatencyRecorder::default(),
        }
    }
}

impl Sampler for TimedSampler {
    #[inline]
    fn tick(&mut self, i: u64) -> bool {
        let t = self.clock.ns();
        if let Some(p) = self.prev {
            if self.plan.keep(p) {
                self.rec.record(t.saturating_sub(p) / u64::from(self.plan.rtt_factor));
            }
        }
        self.prev = Some(t);
        !self.plan.over(i, t)
    }

    fn finish(self) -> LatencyRecorder {
        self.rec
    }
}

fn wait_one<C: Connection>(
    conn: &mut C,
    plan: &LatPlan,
    stall: &mut Stall,
    waiting_for: &'static str,
) -> Result<Completion, LoopError> {
    let mut wc = [Completion::default()];
    loop {
        if poll_or_wait(conn, &mut wc, plan.events, stall, waiting_for)? == 1 {
            check(0, &wc[0])?;
            return Ok(wc[0]);
        }
    }
}

/// read_lat / atomic_lat: post one, wait for its completion, repeat. Each sample is a
/// full round trip: as perftest, the time from one post to the next (one clock read
/// per operation).
pub fn lat_round_trip<C: Connection, S: Sampler>(
    conn: &mut C,
    op: Op,
    plan: &LatPlan,
    mut samples: S,
) -> Result<LatencyRecorder, LoopError> {
    let mut stall = Stall::new(plan.timeout);
    let mut i = 0u64;
    while samples.tick(i) {
        let wr = WorkRequest {
            wr_id: i,
            op,
            local_offset: 0,
            len: plan.size,
            remote_offset: 0,
            signaled: true,
            inline: plan.inline,
        };
        conn.post_repeat(&wr)?;
        wait_one(conn, plan, &mut stall, "the round trip's completion")?;
        i += 1;
    }
    Ok(samples.finish())
}

/// write_lat: each side RDMA-writes a message whose last byte is a counter into the
/// peer's first slot, and spins on the last byte of its own first slot. It sends from
/// its second slot, so its own counter never looks like the peer's answer. The client
/// (`initiator`) writes first; each of its samples is the time between two of its
/// posts, halved. The responder records nothing.
pub fn lat_write_pingpong<C: Connection, S: Sampler>(
    conn: &mut C,
    initiator: bool,
    plan: &LatPlan,
    mut samples: S,
    mut stop: impl FnMut() -> bool,
) -> Result<LatencyRecorder, LoopError> {
    // As perftest: the spin loop reads memory only; one write in SIGNAL_EVERY is
    // signaled, and completions are reaped only when the send queue needs room.
    const SIGNAL_EVERY: u64 = 8;
    let last = plan.size as usize - 1;
    let mut wcs = [Completion::default(); 8];
    let (mut signaled, mut reaped) = (0u64, 0u64);
    let mut i = 0u64;
    let mut stall = Stall::new(plan.timeout);
    // Reaps until at most `keep` signaled writes are unconfirmed.
    let mut reap =
        |conn: &mut C, signaled: u64, reaped: &mut u64, keep: u64| -> Result<(), LoopError> {
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
        // Counter values 1..=255, never 0: a zeroed buffer is "nothing yet".
        let value = (i % 255 + 1) as u8;
        if !initiator || i > 0 {
            // Wait for the peer's write of `value` (responder) or its answer to ours.
            let expect = if initiator { ((i - 1) % 255 + 1) as u8 } else { value };
            let mut spins = 0u32;
            while conn.load_u8(last) != expect {
                spins = spins.wrapping_add(1);
                if !initiator && spins % 65536 == 0 && stop() {
                    reap(conn, signaled, &mut reaped, 0)?;
                    return Ok(samples.finish());
                }
                stall.idle("the peer's write")?;
            }
            stall.progressed();
        }
        // The only clock read of an iteration; the responder measures nothing.
        let finished =
            if initiator { !samples.tick(i) } else { plan.duration.is_none() && i >= plan.iters };
        if finished {
            reap(conn, signaled, &mut reaped, 0)?;
            return Ok(samples.finish());
        }
        conn.local_mut()[plan.size as usize + last] = value;
        // Room in the send queue: at most two signaling rounds unconfirmed.
        reap(conn, signaled, &mut reaped, 1)?;
        let signal = i % SIGNAL_EVERY == SIGNAL_EVERY - 1;
        conn.post_repeat(&WorkRequest {
            wr_id: i,
            op: Op::Write,
            local_offset: plan.size as usize,
            len: plan.size,
            remote_offset: 0,
            signaled: signal,
            inline: plan.inline,
        })?;
        signaled += u64::from(signal);
        i += 1;
        if !initiator && plan.iters != u64::MAX && i >= plan.iters {
            reap(conn, signaled, &mut reaped, 0)?;
            return Ok(samples.finish());
        }
    }
}

/// send_lat: ping-pong of sends. The initiator sends and waits for the answer; the
/// responder answers each message. Receives, put up by [`post_receives`] before the
/// run, are reposted as they are used.
pub fn lat_send_pingpong<C: Connection, S: Sampler>(
    conn: &mut C,
    initiator: bool,
    plan: &LatPlan,
    mut samples: S,
    mut stop: impl FnMut() -> bool,
) -> Result<LatencyRecorder, LoopError> {
    // One send in eight is signaled (their completions come back on the same CQ as
    // the receives and are skipped); the queue holds 16, so it never fills.
    let send = |conn: &mut C, i: u64| {
        conn.post_repeat(&WorkRequest {
            wr_id: i,
            op: Op::Send,
            local_offset: 0,
            len: plan.size,
            remote_offset: 0,
            signaled: i % 8 == 7 || i + 1 == plan.iters,
            inline: plan.inline,
        })
    };
    let mut wcs = [Completion::default(); 8];
    let mut i = 0u64;
    let mut stall = Stall::new(plan.timeout);
    let mut recv_posted = plan.recv_posted;
    loop {
        if initiator {
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
        // Wait for the peer's message, reaping send completions on the way.
        let mut spins = 0u32;
        'wait: loop {
            let got = poll_or_wait(conn, &mut wcs, plan.events, &mut stall, "the peer's message")?;
            for c in &wcs[..got] {
                check(0, c)?;
                if c.kind == CompletionKind::Recv {
                    if recv_posted < plan.iters {
                        conn.post_recv(c.wr_id, 0, plan.size)?;
                        recv_posted += 1;
                    }
                    if c.imm == Some(END_IMM) {
                        return Ok(samples.finish());
                    }
                    break 'wait;
                }
            }
            spins = spins.wrapping_add(1);
            if !initiator && spins % 65536 == 0 && stop() {
                return Ok(samples.finish());
            }
        }
        stall.progressed();
        if !initiator {
            send(conn, i)?;
        }
        i += 1;
        if !initiator && plan.duration.is_none() && i >= plan.iters {
            // Reap our last send before returning.
            let mut stall = Stall::new(plan.timeout);
            loop {
                let got = conn.poll(&mut wcs)?;
                if wcs[..got].iter().any(|c| c.kind == CompletionKind::Send) {
                    break;
                }
                stall.idle("the last answer's completion")?;
            }
            return Ok(samples.finish());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(iters: u64, duration: Option<(Duration, Duration)>, rtt_factor: u32) -> LatPlan {
        LatPlan {
            size: 2,
            iters,
            duration,
            inline: false,
            rtt_factor,
            timeout: Duration::from_secs(1),
            events: false,
            recv_posted: 0,
        }
    }

    #[test]
    fn a_counted_run_yields_one_sample_per_iteration_past_its_room() {
        // Fewer stamps reserved than ticks, and none at all (a run over MAX_STAMPS):
        // the intervals past the room, and the one bridging into them, still count.
        for room in [1000, 0] {
            let n = 1005;
            let mut s = CountedSampler::with_room(&plan(n, None, 2), room);
            let mut i = 0;
            while s.tick(i) {
                i += 1;
            }
            assert_eq!(i, n, "the tick after the last iteration ends the run");
            assert_eq!(s.finish().count(), n, "room {room}: n + 1 ticks are n intervals");
        }
        let whole = CountedSampler::new(&plan(MAX_STAMPS + 1, None, 1));
        assert_eq!(whole.room, 0, "runs longer than MAX_STAMPS record as they go");
        assert!(whole.stamps.capacity() == 0, "nothing is allocated before the first tick");
    }

    #[test]
    fn a_counted_run_halves_one_way_samples() {
        let mut s = CountedSampler::new(&plan(2, None, 2));
        assert!(s.tick(0));
        std::thread::sleep(Duration::from_millis(20));
        assert!(s.tick(1));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!s.tick(2));
        let st = s.finish().stats();
        assert_eq!(st.samples, 2);
        // Each interval is ≥ 20 ms, halved: ≥ 10 ms one-way.
        assert!(st.t_min_us >= 10_000.0 && st.t_min_us < 20_000.0, "{st:?}");
    }

    #[test]
    fn a_timed_run_keeps_only_the_window_and_stops_at_the_end() {
        let total = Duration::from_millis(60);
        let margin = Duration::from_millis(20);
        let start = Instant::now();
        let mut s = TimedSampler::new(&plan(u64::MAX, Some((total, margin)), 1));
        let mut i = 0;
        while s.tick(i) {
            std::thread::sleep(Duration::from_millis(2));
            i += 1;
        }
        assert!(start.elapsed() >= total);
        let rec = s.finish();
        // About 20 ms of 2 ms intervals kept out of about 30 taken.
        assert!(rec.count() > 0 && rec.count() < i, "{} of {i}", rec.count());
    }
}
