//! The test loops, written once against [`Connection`] and generic over it. The
//! operation is fixed before a loop starts; nothing in a loop re-reads configuration.
//! Every loop gives up with [`LoopError::Stalled`] when nothing progresses for the
//! configured timeout, so a vanished peer ends a run instead of hanging it.
//!
//! - [`bw`]: the bandwidth sender and receiver, with their plans;
//! - [`lat`]: the latency ping-pongs and round trips;
//! - [`sampler`]: where a latency loop's clock reads go, chosen once per run.

mod bw;
mod lat;
mod sampler;

pub use bw::{
    bw_recv, bw_send, post_receives, send_end_markers, BwOutcome, BwPlan, NoRecv, Pace, RecvPlan,
    RecvSide, Reposting, Windowed,
};
pub use lat::{lat_round_trip, lat_send_pingpong, lat_write_pingpong, LatPlan, PingPong};
pub use sampler::{CountedSampler, Sampler, TimedSampler};

use std::time::{Duration, Instant};

use crate::transport::{Completion, Connection, Op, Status, TransportError, WorkRequest};

/// Immediate value that tells a receiver the sender is finished (duration runs).
pub const END_IMM: u32 = 0xFFFF_FFFF;

/// Immediate value of every measured message with `--write_with_imm` or
/// `--send_with_imm` ("RDMB"): never [`END_IMM`].
pub const DATA_IMM: u32 = 0x5244_4D42;

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

pub(crate) fn check(qp: usize, c: &Completion) -> Result<(), LoopError> {
    match c.status {
        Status::Success => Ok(()),
        Status::Failed(f) => {
            Err(LoopError::Completion { qp, name: f.name(), meaning: f.meaning() })
        }
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

/// What a bandwidth run stamps its posts and completions with: in `-n` runs, TSC
/// counts where [`ffi::tsc::usable`] (a read is a few instructions, and the peak figure
/// takes one per message, as perftest's `get_cycles`); else the loop's clock, in ns.
/// Counts become ns after the run by [`Stamper::ns_per_unit`], the ratio of the
/// monotonic clock to the counter over the run itself (docs/metrics.md).
#[derive(Clone, Copy)]
pub(crate) struct Stamper {
    clock: Clock,
    /// The counter and the monotonic clock at the run's start, in TSC mode.
    tsc_origin: Option<(u64, Instant)>,
}

impl Stamper {
    /// Stamps on the counter when `tsc`, else on `clock`.
    pub(crate) fn new(clock: Clock, tsc: bool) -> Self {
        Stamper { clock, tsc_origin: tsc.then(|| (ffi::tsc::read(), Instant::now())) }
    }

    /// Now, in stamp units.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        match self.tsc_origin {
            Some((counts, _)) => ffi::tsc::read().saturating_sub(counts),
            None => self.clock.ns(),
        }
    }

    /// ns per stamp unit, over the run so far.
    pub(crate) fn ns_per_unit(&self) -> f64 {
        match self.tsc_origin {
            Some((counts, at)) => {
                at.elapsed().as_nanos() as f64
                    / ffi::tsc::read().saturating_sub(counts).max(1) as f64
            }
            None => 1.0,
        }
    }
}

/// Watches for a loop that stops progressing. Reads the clock only every 4096 idle
/// calls, never on progress: the hot path pays a counter and a flag.
pub(crate) struct Stall {
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
#[inline(always)]
pub(crate) fn poll_or_wait<C: Connection>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::BwRecorder;

    #[test]
    fn bandwidth_stamps_on_the_counter_agree_with_the_monotonic_clock() {
        // This host and the lab keep their clock on the TSC: the stamps are counts, and
        // once rescaled each must be the monotonic time since the run's start.
        let clock = Clock::start();
        let stamper = Stamper::new(clock, ffi::tsc::usable());
        assert_eq!(stamper.tsc_origin.is_some(), ffi::tsc::usable());
        let mut rec = BwRecorder::new(4, 4, true);
        let mut seen = Vec::new();
        for (k, ms) in [2u64, 9, 4].iter().enumerate() {
            std::thread::sleep(Duration::from_millis(*ms));
            rec.posted(stamper.now());
            rec.completed(stamper.now(), k as u64 + 1);
            seen.push(clock.ns());
        }
        rec.rescale(stamper.ns_per_unit());
        let (last, done) = rec.last_completion().unwrap();
        assert_eq!(done, 3);
        let want = seen[2] as f64;
        assert!(
            (last as f64 - want).abs() <= want * 0.02 + 50_000.0,
            "{last} ns, monotonic {want} ns"
        );
        let first = rec.first_post().unwrap() as f64;
        assert!(
            (first - seen[0] as f64).abs() <= seen[0] as f64 * 0.02 + 50_000.0,
            "{first} vs {}",
            seen[0]
        );
    }
}
