//! How a loop runs one size: the plans the engine and perftest's driver build once per
//! size, from the side's plan, and hand to the loops as plain values.

use std::time::Duration;

use super::pace::Pace;
use crate::transport::Op;

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
    /// Software pacing (`--rate_limit`): None posts as fast as the queues allow.
    pub pace: Option<Pace>,
    /// `--interval`: a mark every this many ns, told to the loop's [`Pulse`] as the run
    /// goes (0: none).
    pub interval_ns: u64,
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
    /// Keep every sample, in order, besides the histogram (`-H`, `-U`; `-n` runs).
    pub keep_samples: bool,
}

// Both take a time already read: a loop reads the clock once per iteration (under
// emulation a clock read costs as much as a small message).
impl LatPlan {
    /// Whether a sample that started at `t` falls inside a duration run's window.
    pub(crate) fn keep(&self, t: u64) -> bool {
        match self.duration {
            None => true,
            Some((total, margin)) => {
                t >= margin.as_nanos() as u64 && t < total.saturating_sub(margin).as_nanos() as u64
            }
        }
    }
    /// Whether the run is over at iteration `i`, time `now`.
    pub(crate) fn over(&self, i: u64, now: u64) -> bool {
        match self.duration {
            None => i >= self.iters,
            Some((total, _)) => now >= total.as_nanos() as u64,
        }
    }
}
