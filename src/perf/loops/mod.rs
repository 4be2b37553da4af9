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
mod stall;

pub use bw::{
    bw_recv, bw_send, post_receives, send_end_markers, BwOutcome, NoRecv, RecvSide, Reposting,
    Windowed,
};
pub use intervals::IntervalMark;
pub use lat::{lat_round_trip, lat_send_pingpong, lat_write_pingpong, PingPong};
pub use pace::Pace;
pub use plan::{BwPlan, LatPlan, RecvPlan};
pub use sampler::{CountedSampler, Sampler, TimedSampler};
pub(crate) use stall::{poll_or_wait, Stall};

use std::time::{Duration, Instant};

use crate::error::RunLimit;
use crate::transport::{Op, Polled, Status, TransportError, WorkRequest};

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
    /// The peer's control connection closed while this side's loop ran (its
    /// [`Pulse`] found it so): a killed peer whose QPs went quiet instead of failing
    /// this side's work.
    PeerGone,
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
            LoopFailure::PeerGone => write!(f, "the peer closed the control connection mid-run"),
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
    /// The loop is alive at `now`. `false`: the peer it beats to is gone (its control
    /// connection closed), and the loop ends at once with [`LoopFailure::PeerGone`].
    fn alive(&mut self, now: Instant) -> bool;
    /// A bandwidth loop's `--interval` ended (told as the run goes: a printer of
    /// iperf3-style lines listens here). Nothing by default.
    fn interval(&mut self, _mark: IntervalMark) {}
}

/// The loops of a side whose peer is busy too: no beats.
pub struct NoPulse;

impl Pulse for NoPulse {
    const BEATS: bool = false;
    fn alive(&mut self, _: Instant) -> bool {
        true
    }
}

impl<P: Pulse + ?Sized> Pulse for &mut P {
    const BEATS: bool = P::BEATS;
    fn alive(&mut self, now: Instant) -> bool {
        (**self).alive(now)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::BwRecorder;

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
