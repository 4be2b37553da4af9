//! The test loops, written once against [`Connection`] and generic over it. The
//! operation is fixed before a loop starts; nothing in a loop re-reads configuration.
//! Every loop gives up with [`LoopFailure::Stalled`] when nothing progresses for the
//! configured timeout, so a vanished peer ends a run instead of hanging it.
//!
//! - [`bw`]: the bandwidth sender and receiver, with their plans;
//! - [`lat`]: the latency ping-pongs and round trips;
//! - [`sampler`]: where a latency loop's clock reads go, chosen once per run;
//! - [`pace`]: `--rate_limit`'s schedule; [`intervals`]: `--interval`'s marks.

mod bw;
mod intervals;
mod lat;
mod pace;
mod plan;
mod sampler;

pub use bw::{
    bw_recv, bw_send, post_receives, send_end_markers, BwOutcome, NoRecv, RecvSide, Reposting,
    Windowed,
};
pub use intervals::IntervalMark;
pub use lat::{lat_round_trip, lat_send_pingpong, lat_write_pingpong, PingPong};
pub use pace::Pace;
pub use plan::{BwPlan, LatPlan, RecvPlan};
pub use sampler::{CountedSampler, Sampler, TimedSampler};

use std::time::{Duration, Instant};

use crate::error::RunLimit;
use crate::transport::{Connection, Op, Polled, Status, TransportError, WorkRequest};

pub use crate::transport::{DATA_IMM, END_IMM};

/// The zero-byte send carrying [`END_IMM`].
pub(crate) const END_MARKER: WorkRequest = WorkRequest {
    wr_id: u64::MAX,
    op: Op::SendImm(END_IMM),
    local_offset: 0,
    len: 0,
    remote_offset: 0,
    signaled: true,
    inline: false,
};

/// Why a loop stopped early: a [`LoopFailure`], boxed. The loops return it from every
/// post and poll, and a pointer travels in a register where the enum would travel in
/// memory, its tag stored and tested again on every operation's way back.
#[derive(Debug)]
pub struct LoopError(Box<Failed>);

/// What a [`LoopError`] holds.
struct Failed {
    failure: LoopFailure,
    /// A duration run's measure until the failure: its window cut at the last
    /// completion ([`bw_send`]: a peer gone mid-run loses nothing it had measured).
    measured: Option<BwOutcome>,
}

impl std::fmt::Debug for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let measured = self.measured.as_ref().map(|_| "kept");
        f.debug_struct("Failed")
            .field("failure", &self.failure)
            .field("measured", &measured)
            .finish()
    }
}

/// What stopped a loop.
#[derive(Debug)]
pub enum LoopFailure {
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
    /// The test ran past the end set for this thread's tests ([`end_tests_by`]).
    Overtime {
        /// The limit, from when it was set.
        limit: RunLimit,
    },
}

impl LoopError {
    /// What stopped the loop.
    pub fn failure(&self) -> &LoopFailure {
        &self.0.failure
    }

    /// What stopped the loop, unboxed.
    pub fn into_failure(self) -> LoopFailure {
        self.0.failure
    }

    /// What the loop had measured when it failed (a duration run's sender), taken out.
    pub fn take_measured(&mut self) -> Option<BwOutcome> {
        self.0.measured.take()
    }

    /// This error, carrying what was measured until it.
    #[cold]
    pub fn with_measured(mut self, outcome: BwOutcome) -> Self {
        self.0.measured = Some(outcome);
        self
    }
}

impl std::fmt::Display for LoopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.failure().fmt(f)
    }
}

impl std::fmt::Display for LoopFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoopFailure::Transport(e) => write!(f, "{e}"),
            LoopFailure::Completion { qp, name, meaning } => {
                write!(f, "work on QP {qp} failed: {name} ({meaning})")
            }
            LoopFailure::Stalled { waiting_for, after } => {
                write!(
                    f,
                    "no progress for {} s waiting for {waiting_for}: is the peer still there?",
                    after.as_secs()
                )
            }
            LoopFailure::Overtime { limit } => write!(f, "{} {limit}", crate::error::OVERTIME),
        }
    }
}

impl From<LoopFailure> for LoopError {
    #[cold]
    fn from(failure: LoopFailure) -> Self {
        LoopError(Box::new(Failed { failure, measured: None }))
    }
}

impl From<TransportError> for LoopError {
    #[cold]
    fn from(e: TransportError) -> Self {
        match e {
            // A stream's end is the thread's end for its tests: told as the loops tell it.
            TransportError::Overtime { limit } => LoopFailure::Overtime { limit }.into(),
            e => LoopFailure::Transport(e).into(),
        }
    }
}

#[inline(always)]
pub(crate) fn check(qp: usize, c: &impl Polled) -> Result<(), LoopError> {
    match c.status() {
        Status::Success => Ok(()),
        Status::Failed(f) => {
            Err(LoopFailure::Completion { qp, name: f.name(), meaning: f.meaning() }.into())
        }
    }
}

/// The loops' clock: ns since the loop's start, read from the cycle counter where it
/// keeps time (no system call per read), its rate refined as the run goes.
pub use crate::measure::CycleClock as Clock;

/// Keeps a peer that only waits on the control channel told that this side is alive
/// while a loop works alone ([`Role::heartbeat`](crate::spec::role::Role::heartbeat)).
/// The loop calls it from its stall checks, at its first poll, then every few ms, and
/// between event waits; it sends at most once a second. No thread does this: a second
/// thread in the process makes glibc wrap every system call in cancellation
/// bookkeeping, soft-RoCE's doorbell among them.
pub trait Pulse {
    /// Whether the loop beats at all: [`NoPulse`]'s loops count nothing for it.
    const BEATS: bool = true;
    /// The loop is alive at `now`.
    fn alive(&mut self, now: Instant);
    /// A bandwidth loop's `--interval` ended (told as the run goes: a printer of
    /// iperf3-style lines listens here). Nothing by default.
    fn interval(&mut self, _mark: IntervalMark) {}
}

/// The loops of a side whose peer is busy too: no beats.
pub struct NoPulse;

impl Pulse for NoPulse {
    const BEATS: bool = false;
    fn alive(&mut self, _: Instant) {}
}

impl<P: Pulse + ?Sized> Pulse for &mut P {
    const BEATS: bool = P::BEATS;
    fn alive(&mut self, now: Instant) {
        (**self).alive(now);
    }
    fn interval(&mut self, mark: IntervalMark) {
        (**self).interval(mark);
    }
}

thread_local! {
    /// When every loop on this thread must stop, and the limit it came from.
    static TESTS_END: std::cell::Cell<Option<(Instant, RunLimit)>> =
        const { std::cell::Cell::new(None) };
}

/// Ends every loop this thread runs, `limit` from now, with [`LoopFailure::Overtime`]:
/// `serve --max-time` reaching into a test's loops (a client that declared 4 s and keeps
/// sending, or asked for a hundred million round trips). Checked by each [`Stall`] at
/// its laps' ends, when it reads the clock anyway.
pub fn end_tests_by(limit: RunLimit) {
    set_tests_end(Some((Instant::now() + limit.after, limit)));
}

/// Ends every loop this thread runs at `limit` (None: at no time) until the guard is
/// dropped, which gives the thread back the end it had: compare, qualify and mesh run
/// many tests, each with its own limit, on one thread.
pub fn limit_tests(limit: Option<RunLimit>) -> TestsLimited {
    let before = tests_end();
    set_tests_end(limit.map(|l| (Instant::now() + l.after, l)));
    TestsLimited(before)
}

/// The end a thread's loops had before [`limit_tests`], given back on drop.
#[must_use = "the limit is lifted when this is dropped"]
pub struct TestsLimited(Option<(Instant, RunLimit)>);

impl Drop for TestsLimited {
    fn drop(&mut self) {
        set_tests_end(self.0);
    }
}

/// This thread's end for its loops, for a thread it starts to carry on.
pub fn tests_end() -> Option<(Instant, RunLimit)> {
    TESTS_END.with(std::cell::Cell::get)
}

/// Sets this thread's end for its loops (a stream's thread: its parent's).
pub fn set_tests_end(end: Option<(Instant, RunLimit)>) {
    TESTS_END.with(|e| e.set(end));
}

/// Whether this process was asked to stop (SIGINT, SIGTERM, SIGHUP, once a test's
/// command line watches for them): a duration run's loops then end their window where
/// it stands, as if its time were up. One atomic load, read where a loop reads its
/// clock for other reasons, never per operation.
#[inline]
pub fn stop_requested() -> bool {
    ffi::os::termination_signal().is_some()
}

/// Most polls between two clock reads of a [`Stall`]: at ~100 ns a poll, one read in
/// half a millisecond costs a poll nothing.
const MAX_LAP: u32 = 4096;

/// How often [`Stall::spin`] asks whether to stop, in laps: every 65,536 idle reads at
/// the longest lap (a stop check may be a few system calls: a control channel's peek).
const STOP_EVERY_LAPS: u32 = 16;

/// How far apart a [`Stall`]'s clock reads aim to be. A lap is counted in polls, and
/// their length varies a thousandfold (soft-RoCE under emulation spends milliseconds
/// in a post's doorbell): the count adapts, so a slow loop still beats in time.
const LAP_AIM: (Duration, Duration) = (Duration::from_millis(5), Duration::from_millis(20));

/// Watches for a loop that stops progressing, and beats its [`Pulse`]. Reads the clock
/// once a lap of up to [`MAX_LAP`] idle polls (and, when it beats, progressing ones
/// too, and a bandwidth loop's posts: a soft-RoCE doorbell can take a message's time): the
/// hot path pays a countdown and a flag.
pub(crate) struct Stall<P: Pulse = NoPulse> {
    /// The last lap that saw progress.
    last: Instant,
    timeout: Duration,
    /// Polls left in this lap, of `lap` in all.
    left: u32,
    lap: u32,
    lap_start: Instant,
    progress: bool,
    pulse: P,
    /// [`end_tests_by`]'s end, read once as the loop starts.
    end: Option<(Instant, RunLimit)>,
}

impl Stall {
    fn new(timeout: Duration) -> Self {
        Stall::beating(timeout, NoPulse)
    }
}

impl<P: Pulse> Stall<P> {
    /// The first lap is one poll long: a loop beats as it starts.
    fn beating(timeout: Duration, pulse: P) -> Self {
        let now = Instant::now();
        let end = tests_end();
        Stall { last: now, timeout, left: 1, lap: 1, lap_start: now, progress: false, pulse, end }
    }
    #[inline]
    fn progressed(&mut self) -> Result<(), LoopError> {
        self.progressed_with(self.left)
    }
    /// [`Stall::progressed`] with `left` polls left in the lap (the spin's count, kept
    /// in a register: stored once, here).
    #[inline(always)]
    fn progressed_with(&mut self, left: u32) -> Result<(), LoopError> {
        self.progress = true;
        // A loop whose every poll finds work still beats, and still ends in time: the
        // poll then counts in the lap. (A lap always has a poll left: `left` >= 1.)
        if P::BEATS || self.end.is_some() {
            self.left = left - 1;
            if self.left == 0 {
                self.lap()?;
            }
        } else {
            self.left = left;
        }
        Ok(())
    }
    /// Call when nothing happened.
    #[inline]
    fn idle(&mut self, waiting_for: &'static str) -> Result<(), LoopError> {
        if self.counted() && self.lap()? {
            return Err(LoopFailure::Stalled { waiting_for, after: self.timeout }.into());
        }
        Ok(())
    }
    /// Spins `read` (which reads at most the reads it is given and says how many were
    /// left when one saw what it waits for, counting that one, or 0) until it sees it
    /// (`true`: progress, as [`Stall::progressed`] counts it), or until `stop`, asked
    /// every [`STOP_EVERY_LAPS`] laps, says to end the wait (`false`). Each read that saw
    /// nothing is an idle poll, as [`Stall::idle`] counts them, but counted a lap at a
    /// time: a pass of the spin pays no countdown of its own.
    #[inline(always)]
    fn spin(
        &mut self,
        waiting_for: &'static str,
        mut read: impl FnMut(u32) -> u32,
        mut stop: impl FnMut() -> bool,
    ) -> Result<bool, LoopError> {
        let mut laps = 0u32;
        loop {
            // The read that saw it is no idle poll: the lap keeps it.
            let left = read(self.left);
            if left > 0 {
                self.progressed_with(left)?;
                return Ok(true);
            }
            // The lap's last idle poll, counted as `idle` counts it: the lap ends.
            self.left = 1;
            self.idle(waiting_for)?;
            laps = laps.wrapping_add(1);
            if laps % STOP_EVERY_LAPS == 0 && stop() {
                return Ok(false);
            }
        }
    }
    /// Counts a poll; `true` when it ends the lap.
    #[inline(always)]
    fn counted(&mut self) -> bool {
        self.left -= 1;
        self.left == 0
    }
    /// A lap's end: beats, sizes the next lap, and tells whether nothing progressed
    /// for the timeout.
    ///
    /// # Errors
    /// Past the end set by [`end_tests_by`].
    #[cold]
    fn lap(&mut self) -> Result<bool, LoopError> {
        let now = Instant::now();
        if let Some((_, limit)) = self.end.filter(|&(end, _)| now >= end) {
            return Err(LoopFailure::Overtime { limit }.into());
        }
        self.pulse.alive(now);
        let took = now.duration_since(self.lap_start);
        self.lap = if took < LAP_AIM.0 {
            (self.lap * 2).min(MAX_LAP)
        } else if took > LAP_AIM.1 {
            (self.lap / 2).max(1)
        } else {
            self.lap
        };
        (self.left, self.lap_start) = (self.lap, now);
        if std::mem::take(&mut self.progress) {
            self.last = now;
        }
        Ok(now.duration_since(self.last) > self.timeout)
    }
    /// Sleeps on `conn`'s completion channel for up to the timeout, beating about
    /// every second; `false` when nothing came.
    fn wait<C: Connection>(&mut self, conn: &mut C) -> Result<bool, LoopError> {
        if !P::BEATS {
            return Ok(conn.wait(self.timeout)?);
        }
        let end = Instant::now() + self.timeout;
        loop {
            let now = Instant::now();
            self.pulse.alive(now);
            let left = end.saturating_duration_since(now);
            if left.is_zero() {
                return Ok(false);
            }
            if conn.wait(left.min(Duration::from_secs(1)))? {
                return Ok(true);
            }
        }
    }
}

/// Polls `conn`; when nothing is there, spins (checking for a stall) or, in event
/// mode, arms, polls again and sleeps until the completion event.
#[inline(always)]
pub(crate) fn poll_or_wait<C: Connection, P: Pulse>(
    conn: &mut C,
    wcs: &mut [C::Completion],
    events: bool,
    stall: &mut Stall<P>,
    waiting_for: &'static str,
) -> Result<usize, LoopError> {
    let got = conn.poll(wcs)?;
    if got > 0 {
        stall.progressed()?;
        return Ok(got);
    }
    if !events {
        stall.idle(waiting_for)?;
        return Ok(0);
    }
    conn.arm()?;
    let got = conn.poll(wcs)?;
    if got > 0 {
        stall.progressed()?;
        return Ok(got);
    }
    if !stall.wait(conn)? {
        return Err(LoopFailure::Stalled { waiting_for, after: stall.timeout }.into());
    }
    let got = conn.poll(wcs)?;
    stall.progressed()?;
    if P::BEATS {
        stall.pulse.alive(Instant::now());
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::BwRecorder;

    /// Counts its beats.
    struct Beats(u32);

    impl Pulse for Beats {
        fn alive(&mut self, _: Instant) {
            self.0 += 1;
        }
    }

    #[test]
    fn a_stall_watch_beats_at_once_then_every_few_ms_however_slow_its_polls() {
        let mut stall = Stall::beating(Duration::from_secs(60), Beats(0));
        // Fast polls: laps double to MAX_LAP polls, a clock read in thousands of polls.
        let polls = 40 * MAX_LAP;
        let start = Instant::now();
        for _ in 0..polls {
            stall.idle("x").unwrap();
        }
        let fast = start.elapsed();
        let laps = stall.pulse.0;
        assert!(laps >= 1, "the first poll beats");
        if fast < LAP_AIM.0 * 40 {
            assert!(laps <= 13 + 40, "{laps} clock reads in {polls} quick polls");
        }
        // Polls of 25 ms each (a slow doorbell): every one ends a lap.
        let mut stall = Stall::beating(Duration::from_secs(60), Beats(0));
        for _ in 0..4 {
            std::thread::sleep(LAP_AIM.1 + Duration::from_millis(5));
            stall.idle("x").unwrap();
        }
        assert_eq!(stall.pulse.0, 4);
        // A loop whose every poll finds work (it never idles) beats all the same.
        let mut stall = Stall::beating(Duration::from_secs(60), Beats(0));
        for _ in 0..3 {
            std::thread::sleep(LAP_AIM.1 + Duration::from_millis(5));
            stall.progressed().unwrap();
        }
        assert_eq!(stall.pulse.0, 3);
        // Beating is not progress: a loop that beats and idles past its timeout stalls.
        let mut stall = Stall::beating(Duration::from_millis(1), Beats(0));
        std::thread::sleep(Duration::from_millis(5));
        let e = (0..=MAX_LAP).try_for_each(|_| stall.idle("the peer's answer")).unwrap_err();
        assert!(
            matches!(e.failure(), LoopFailure::Stalled { waiting_for: "the peer's answer", .. }),
            "{e}"
        );
    }

    #[test]
    fn a_spin_counts_its_idle_reads_as_idle_polls_and_asks_to_stop_every_16_laps() {
        // A byte seen at the 100,000th read: the reads before it are idle polls, each lap
        // they end beats (the first at once), and the spin says it saw it.
        const SEEN_AT: u32 = 100_000;
        let (mut reads, mut asked) = (0u32, 0u32);
        let mut stall = Stall::beating(Duration::from_secs(60), Beats(0));
        let seen = stall.spin(
            "x",
            |n| {
                let took = n.min(SEEN_AT - reads);
                reads += took;
                if reads == SEEN_AT {
                    n - took + 1
                } else {
                    0
                }
            },
            || {
                asked += 1;
                false
            },
        );
        assert!(seen.unwrap());
        assert_eq!(reads, SEEN_AT);
        let laps = stall.pulse.0;
        assert_eq!(asked, laps / STOP_EVERY_LAPS, "asked to stop every 16 of {laps} laps");
        // Quick reads double the laps, 1, 2, 4, … polls, up to MAX_LAP: then 35 laps
        // (12 up to 4,095 polls, 23 of 4,096), and the last lap has the polls its
        // reads did not use left, less the read that saw it (progress, which a beating
        // loop counts).
        let (mut idle, mut lap, mut quick) = (SEEN_AT - 1, 1, 0);
        while idle >= lap {
            (idle, quick, lap) = (idle - lap, quick + 1, (lap * 2).min(MAX_LAP));
        }
        if laps == quick {
            assert_eq!((laps, stall.left), (35, lap - idle - 1));
        }
        assert!(stall.progress, "the read that saw it is progress");
        // A spin told to stop at its 16th lap ends without seeing the byte, and one that
        // never sees it stalls past its timeout.
        let mut stall = Stall::new(Duration::from_secs(60));
        assert!(!stall.spin("x", |_| 0, || true).unwrap());
        let mut stall = Stall::new(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        let e = stall.spin("the peer's write", |_| 0, || false).unwrap_err();
        assert!(
            matches!(e.failure(), LoopFailure::Stalled { waiting_for: "the peer's write", .. }),
            "{e}"
        );
    }

    #[test]
    fn a_loop_that_always_progresses_still_ends_at_the_threads_end_for_tests() {
        // On a thread of its own: the end is the thread's.
        std::thread::spawn(|| {
            end_tests_by(RunLimit { after: Duration::from_millis(50), serve: true });
            let mut stall = Stall::new(Duration::from_secs(60));
            let start = Instant::now();
            let e = loop {
                if let Err(e) = stall.progressed() {
                    break e;
                }
                assert!(start.elapsed() < Duration::from_secs(2), "never ended");
            };
            let took = start.elapsed();
            assert!(matches!(e.failure(), LoopFailure::Overtime { .. }), "{e}");
            assert!(
                took >= Duration::from_millis(45) && took < Duration::from_millis(500),
                "{took:?}"
            );
            assert!(e.to_string().contains("(serve --max-time)"), "{e}");
        })
        .join()
        .unwrap();
        // Other threads' ends are not touched.
        assert!(tests_end().is_none());
    }

    #[test]
    fn a_tests_limit_is_lifted_when_its_guard_goes_and_the_threads_own_comes_back() {
        std::thread::spawn(|| {
            let serve = RunLimit { after: Duration::from_secs(60), serve: true };
            end_tests_by(serve);
            let own = RunLimit { after: Duration::from_millis(20), serve: false };
            {
                let _limited = limit_tests(Some(own));
                assert_eq!(tests_end().map(|(_, l)| l), Some(own));
                let mut stall = Stall::new(Duration::from_secs(60));
                let e = loop {
                    if let Err(e) = stall.progressed() {
                        break e;
                    }
                };
                let says = "the test ran past this side's limit of 0.02 s (--max-time)";
                assert_eq!(e.to_string(), says);
            }
            assert_eq!(tests_end().map(|(_, l)| l), Some(serve), "the one before, back");
            let _none = limit_tests(None);
            assert!(tests_end().is_none(), "no limit: a --run_infinitely run");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn bandwidth_stamps_on_the_counter_agree_with_the_monotonic_clock() {
        // Stamps are the clock's counts (the counter's where it keeps time), rescaled
        // after the run: each must be the monotonic time since the run's start. Each
        // stamp is bracketed by two monotonic reads, so a preempted test cannot fail it.
        let mut clock = Clock::start();
        let start = Instant::now();
        let mut rec = BwRecorder::new(4, 4, true);
        let bracketed = || {
            let before = start.elapsed().as_nanos() as u64;
            let t = clock.counts();
            (before, t, start.elapsed().as_nanos() as u64)
        };
        let mut brackets = Vec::new();
        for (k, ms) in [2u64, 9, 4].iter().enumerate() {
            std::thread::sleep(Duration::from_millis(*ms));
            let (before, t, after) = bracketed();
            rec.posted(t);
            brackets.push((before, after));
            let (before, t, after) = bracketed();
            rec.completed(t, k as u64 + 1);
            brackets.push((before, after));
        }
        clock.refine();
        rec.rescale(clock.ns_per_count());
        let within = |got: u64, (before, after): (u64, u64)| {
            let (lo, hi) = (before as f64 * 0.98 - 50_000.0, after as f64 * 1.02 + 50_000.0);
            assert!((lo..=hi).contains(&(got as f64)), "{got} ns, monotonic {before}..{after}");
        };
        let (last, done) = rec.last_completion().unwrap();
        assert_eq!(done, 3);
        within(last, brackets[5]);
        within(rec.first_post().unwrap(), brackets[0]);
    }
}
