//! Where a latency loop's clock reads go: stored (`-n` runs, intervals taken after
//! the run) or judged against the measured window (`-D` runs).

use std::time::Instant;

use super::lat::LatPlan;
use super::Clock;
use crate::measure::LatencyRecorder;

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

/// Most stamps a counted run keeps (64 MiB of them); a longer run records each interval
/// as it comes.
const MAX_STAMPS: u64 = 1 << 23;

/// What a counted run's ticks read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StampClock {
    /// The CPU's time-stamp counter, where [`ffi::tsc::usable`]: a read is a few
    /// instructions, as perftest's `get_cycles`. Counts become ns after the run, by the
    /// ratio of the monotonic clock's time to the counter's counts over the run itself
    /// (docs/metrics.md).
    Tsc,
    /// ns of the monotonic clock since the run's first tick.
    Monotonic,
}

/// An iteration run (`-n`): a tick only stores a stamp, as perftest stores its cycle
/// counts; the intervals are taken after the run, so no clock arithmetic and no
/// histogram update is timed.
pub struct CountedSampler {
    /// Counter stamps by iteration, when the run is stamped with the counter: room for
    /// the whole run, allocated at the first tick (a responder never ticks, and
    /// allocates nothing). A tick is then an index check, a counter read and a store.
    counts: Box<[u64]>,
    /// The first and the last iteration stamped into `counts` (a caller may leave the
    /// first ticks out).
    first_count: usize,
    last_count: usize,
    /// Monotonic stamps (ns since the first tick) while there is room, otherwise.
    stamps: Vec<u64>,
    /// Stamps the run needs: `iters + 1`, or 0 for runs over [`MAX_STAMPS`].
    room: usize,
    clock: StampClock,
    /// The first tick, on both clocks: where the monotonic stamps count from, and one
    /// end of the counter's calibration.
    origin: (Instant, u64),
    /// The previous tick, once ticks no longer go into `stamps` (monotonic then).
    last: Option<u64>,
    iters: u64,
    factor: u64,
    rec: LatencyRecorder,
}

impl CountedSampler {
    /// For `plan`'s iterations.
    pub fn new(plan: &LatPlan) -> Self {
        let needed = plan.iters.saturating_add(1);
        let room = if needed <= MAX_STAMPS { needed as usize } else { 0 };
        Self::with_room(plan, room, ffi::tsc::usable())
    }

    /// Stamps with the counter only when `tsc` and every stamp of the run has room: a
    /// run that records as it goes needs ns at once.
    fn with_room(plan: &LatPlan, room: usize, tsc: bool) -> Self {
        let mut rec = LatencyRecorder::default();
        if plan.keep_samples {
            rec.keep_samples(room);
        }
        let whole = room as u64 > plan.iters;
        CountedSampler {
            counts: Box::default(),
            first_count: 0,
            last_count: 0,
            stamps: Vec::new(),
            room,
            clock: if tsc && whole { StampClock::Tsc } else { StampClock::Monotonic },
            origin: (Instant::now(), 0),
            last: None,
            iters: plan.iters,
            factor: u64::from(plan.rtt_factor.max(1)),
            rec,
        }
    }

    fn record(&mut self, ns: u64) {
        self.rec.record(ns / self.factor);
    }

    /// A tick off the counter's path: the first one of a counter run makes its room; a
    /// monotonic run stores its stamps while there is room, the first one reserving it,
    /// and past it records the interval since the previous tick at once.
    #[inline(never)]
    fn spill(&mut self, i: u64) {
        let first = self.counts.is_empty() && self.stamps.is_empty() && self.room > 0;
        if first {
            if self.clock == StampClock::Tsc {
                self.counts = vec![0; self.room].into_boxed_slice();
                self.first_count = i as usize;
            } else {
                self.stamps.reserve_exact(self.room);
            }
            // The first iteration starts after the allocation, not before it.
            self.origin = (Instant::now(), ffi::tsc::read());
        }
        if self.clock == StampClock::Tsc {
            // Counter runs have room for every tick (`with_room`).
            if let Some(slot) = self.counts.get_mut(i as usize) {
                *slot = ffi::tsc::read();
                self.last_count = i as usize;
            }
            return;
        }
        let now = self.origin.0.elapsed().as_nanos() as u64;
        if self.stamps.len() < self.room {
            self.stamps.push(now);
            return;
        }
        if let Some(prev) = self.last.or_else(|| self.stamps.last().copied()) {
            self.record(now.saturating_sub(prev));
        }
        self.last = Some(now);
    }

    /// ns per count of the counter: the monotonic clock's time over the counter's
    /// counts since the first tick.
    fn ns_per_count(&self) -> f64 {
        let (ns, counts) = (self.origin.0.elapsed(), ffi::tsc::read());
        ns.as_nanos() as f64 / counts.saturating_sub(self.origin.1).max(1) as f64
    }
}

impl Sampler for CountedSampler {
    #[inline]
    fn tick(&mut self, i: u64) -> bool {
        match self.counts.get_mut(i as usize) {
            Some(slot) => {
                *slot = ffi::tsc::read();
                self.last_count = i as usize;
            }
            None => self.spill(i),
        }
        i < self.iters
    }

    fn finish(mut self) -> LatencyRecorder {
        let (counts, stamps) = (std::mem::take(&mut self.counts), std::mem::take(&mut self.stamps));
        let (stamped, ns_per_unit) = match self.clock {
            StampClock::Tsc => (
                counts.get(self.first_count..=self.last_count).unwrap_or_default(),
                self.ns_per_count(),
            ),
            StampClock::Monotonic => (&stamps[..], 1.0),
        };
        for w in stamped.windows(2) {
            self.record((w[1].saturating_sub(w[0]) as f64 * ns_per_unit) as u64);
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
            keep_samples: false,
        }
    }

    #[test]
    fn kept_samples_come_in_run_order_and_match_the_histogram() {
        let p = LatPlan { keep_samples: true, ..plan(3, None, 1) };
        let mut s = CountedSampler::new(&p);
        for (i, pause) in [30u64, 5, 15].iter().enumerate() {
            assert!(s.tick(i as u64));
            std::thread::sleep(Duration::from_millis(*pause));
        }
        assert!(!s.tick(3));
        let mut rec = s.finish();
        let samples = rec.take_samples().unwrap();
        assert_eq!(samples.len(), 3);
        let ms: Vec<u64> = samples.iter().map(|ns| ns / 1_000_000).collect();
        assert!(ms[0] >= 30 && ms[1] >= 5 && ms[1] < 15 && ms[2] >= 15, "{ms:?}: in run order");
        assert_eq!(rec.stats().t_max_us, *samples.iter().max().unwrap() as f64 / 1000.0);
        let mut plain = CountedSampler::new(&plan(1, None, 1));
        plain.tick(0);
        plain.tick(1);
        assert!(plain.finish().take_samples().is_none(), "kept only when asked");
    }

    #[test]
    fn a_counted_run_yields_one_sample_per_iteration_past_its_room() {
        // Fewer stamps reserved than ticks, and none at all (a run over MAX_STAMPS):
        // the intervals past the room, and the one bridging into them, still count.
        for room in [1000, 0] {
            let n = 1005;
            let mut s = CountedSampler::with_room(&plan(n, None, 2), room, true);
            let mut i = 0;
            while s.tick(i) {
                i += 1;
            }
            assert_eq!(i, n, "the tick after the last iteration ends the run");
            assert_eq!(s.finish().count(), n, "room {room}: n + 1 ticks are n intervals");
        }
        let whole = CountedSampler::new(&plan(MAX_STAMPS + 1, None, 1));
        assert_eq!(whole.room, 0, "runs longer than MAX_STAMPS record as they go");
        assert!(
            whole.stamps.capacity() == 0 && whole.counts.is_empty(),
            "nothing is allocated before the first tick"
        );
    }

    #[test]
    fn a_run_that_stops_early_counts_only_the_intervals_it_ticked() {
        // A side that ends before its last tick (a responder's last post): the room
        // past its ticks is neither an interval nor zero-length samples. Both clocks.
        for tsc in [true, false] {
            let mut s = CountedSampler::with_room(&plan(10, None, 1), 11, tsc);
            for i in 0..5 {
                assert!(s.tick(i));
            }
            let st = s.finish().stats();
            assert_eq!(st.samples, 4, "tsc {tsc}: five ticks are four intervals");
            assert!(st.t_min_us >= 0.0 && st.t_max_us < 1_000_000.0, "tsc {tsc}: {st:?}");
        }
    }

    #[test]
    fn a_run_whose_first_tick_is_left_out_counts_from_its_second() {
        // perftest's write_lat server leaves out the tick before its first post (the
        // sample it would open is the set-up's): ticks 1..=n are n - 1 intervals.
        for tsc in [true, false] {
            let mut s = CountedSampler::with_room(&plan(6, None, 1), 7, tsc);
            for i in 1..6 {
                assert!(s.tick(i));
            }
            assert!(!s.tick(6));
            let st = s.finish().stats();
            assert_eq!(st.samples, 5, "tsc {tsc}");
            assert!(
                st.t_max_us < 1_000_000.0,
                "tsc {tsc}: no interval from before the run: {st:?}"
            );
        }
    }

    #[test]
    fn counter_stamps_agree_with_the_monotonic_clock() {
        // This host and the lab keep their clock on the TSC: the run is stamped with
        // the counter, and each interval must be what the monotonic clock saw.
        let p = LatPlan { keep_samples: true, ..plan(6, None, 1) };
        let mut s = CountedSampler::with_room(&p, 7, true);
        assert_eq!(s.clock == StampClock::Tsc, ffi::tsc::usable());
        // Each tick is bracketed by two monotonic reads: an interval lies between the
        // inner and the outer distance of two brackets, however the test is preempted.
        let mut marks = Vec::new();
        let mut tick = |s: &mut CountedSampler, i: u64| {
            let before = Instant::now();
            let more = s.tick(i);
            marks.push((before, Instant::now()));
            more
        };
        for (i, ms) in [3u64, 12, 1, 7, 20, 5].iter().enumerate() {
            assert!(tick(&mut s, i as u64));
            std::thread::sleep(Duration::from_millis(*ms));
        }
        assert!(!tick(&mut s, 6));
        let samples = s.finish().take_samples().unwrap();
        assert_eq!(samples.len(), 6);
        for (k, got) in samples.iter().enumerate() {
            let ((b0, a0), (b1, a1)) = (marks[k], marks[k + 1]);
            let (inner, outer) = ((b1 - a0).as_nanos() as f64, (a1 - b0).as_nanos() as f64);
            let got = *got as f64;
            assert!(
                got >= inner * 0.98 - 20_000.0 && got <= outer * 1.02 + 20_000.0,
                "interval {k}: {got} ns, monotonic {inner}..{outer} ns"
            );
        }
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
