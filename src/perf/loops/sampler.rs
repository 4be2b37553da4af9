//! Where a latency loop's clock reads go: stored (`-n` runs, intervals taken after
//! the run) or judged against the measured window (`-D` runs).

use super::plan::LatPlan;
use super::Clock;
use crate::measure::{counter_usable, LatencyRecorder};

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

/// Stamps a counted run keeps at once (64 KiB of them): a shorter run converts them all
/// after the run, a longer one each time they fill (off the timed intervals, below), so
/// its memory stays the same whatever `-n` is.
const STAMPS: usize = 1 << 13;

/// An iteration run (`-n`): a tick only stores a stamp of the run's [`Clock`] (a cycle
/// counter read where it keeps time, as perftest's `get_cycles`), as perftest stores its
/// cycle counts; the intervals are taken when the stamps fill or after the run, so no
/// clock arithmetic and no histogram update sits in a timed interval.
pub struct CountedSampler {
    /// A counter run's stamps since the last conversion ([`Clock::counter_stamp`]),
    /// allocated at the first tick (a responder never ticks, and allocates nothing). A
    /// tick is then an index check, a counter read and a store. A run without the
    /// counter leaves it empty: its every tick takes [`spill`](Self::spill)'s path, so
    /// the fast path never asks which clock it has.
    stamps: Box<[u64]>,
    /// A run without the counter: its stamps ([`Clock::stamp`]) since the last
    /// conversion.
    slow: Box<[u64]>,
    /// Stamps stored, in whichever of the two the run uses.
    filled: usize,
    /// The stamps' room: the run's ticks, at most [`STAMPS`].
    room: usize,
    clock: Clock,
    iters: u64,
    factor: u64,
    rec: LatencyRecorder,
}

impl CountedSampler {
    /// For `plan`'s iterations.
    pub fn new(plan: &LatPlan) -> Self {
        let needed = plan.iters.saturating_add(1);
        Self::with_room(plan, needed.min(STAMPS as u64) as usize, counter_usable())
    }

    /// With room for `room` stamps (at least 2), on the counter when `counter`.
    fn with_room(plan: &LatPlan, room: usize, counter: bool) -> Self {
        let mut rec = LatencyRecorder::default();
        if plan.keep_samples {
            // Every sample, as asked (-H, -U): the one record that grows with -n.
            rec.keep_samples(plan.iters.min(STAMPS as u64) as usize);
        }
        CountedSampler {
            stamps: Box::default(),
            slow: Box::default(),
            filled: 0,
            room: room.max(2),
            clock: Clock::on(counter),
            iters: plan.iters,
            factor: u64::from(plan.rtt_factor.max(1)),
            rec,
        }
    }

    /// The intervals between the stamps stored, into the histogram, by the clock's rate
    /// refined over the run so far.
    fn convert(&mut self) {
        self.clock.refine();
        let (clock, factor) = (self.clock, self.factor);
        let stamps = if clock.counter() { &self.stamps } else { &self.slow };
        for w in stamps[..self.filled].windows(2) {
            self.rec.record(clock.to_ns(w[1].wrapping_sub(w[0])) / factor);
        }
    }

    /// A tick off the fast path: the first one makes the room; a tick without the
    /// counter stores its stamp; a tick that finds the room full closes its interval,
    /// converts the stamps, and stamps again after the work, so the conversion falls in
    /// neither the interval it closes nor the next one.
    #[inline(never)]
    fn spill(&mut self) {
        let counter = self.clock.counter();
        let held = if counter { &mut self.stamps } else { &mut self.slow };
        if held.is_empty() {
            *held = vec![0; self.room].into_boxed_slice();
            // The first iteration starts after the allocation, not before it.
            self.clock = Clock::on(counter);
            held[0] = self.clock.stamp();
            self.filled = 1;
            return;
        }
        if let Some(slot) = held.get_mut(self.filled) {
            *slot = self.clock.stamp();
            self.filled += 1;
            return;
        }
        let closing = self.clock.stamp();
        let last = held[self.filled - 1];
        self.convert();
        self.rec.record(self.clock.to_ns(closing.wrapping_sub(last)) / self.factor);
        let held = if counter { &mut self.stamps } else { &mut self.slow };
        held[0] = self.clock.stamp();
        self.filled = 1;
    }
}

impl Sampler for CountedSampler {
    #[inline]
    fn tick(&mut self, i: u64) -> bool {
        match self.stamps.get_mut(self.filled) {
            Some(slot) => {
                *slot = Clock::counter_stamp();
                self.filled += 1;
            }
            None => self.spill(),
        }
        i < self.iters
    }

    fn finish(mut self) -> LatencyRecorder {
        if self.filled > 1 {
            self.convert();
        }
        self.rec
    }
}

/// Ticks of a duration run between two refinements of its clock's rate (one monotonic
/// read each).
const REFINE_EVERY: u64 = 4096;

/// Ticks of a duration run between two looks at whether the run was asked to stop.
const STOP_EVERY: u64 = 256;

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
        if i % REFINE_EVERY == REFINE_EVERY - 1 {
            self.clock.refine();
        }
        let t = self.clock.ns();
        if let Some(p) = self.prev {
            if self.plan.keep(p) {
                self.rec.record(t.saturating_sub(p) / u64::from(self.plan.rtt_factor));
            }
        }
        self.prev = Some(t);
        // Asked to stop: the run ends at this tick, as at its time's end, with the
        // window's samples until now.
        let stopped = i % STOP_EVERY == 0 && super::stop_requested();
        !(stopped || self.plan.over(i, t))
    }

    fn finish(self) -> LatencyRecorder {
        self.rec
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

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
        // Each sample at least its own pause: of the orders of 30, 5 and 15 ms only the
        // run's passes these floors, and a loaded machine (a 5 ms sleep that took 28 ms,
        // CI of 50f9372) only lengthens samples, which no floor can fail on.
        let ms: Vec<u64> = samples.iter().map(|ns| ns / 1_000_000).collect();
        assert!(ms[0] >= 30 && ms[1] >= 5 && ms[2] >= 15, "{ms:?}: in run order");
        assert_eq!(rec.stats().t_max_us, *samples.iter().max().unwrap() as f64 / 1000.0);
        let mut plain = CountedSampler::new(&plan(1, None, 1));
        plain.tick(0);
        plain.tick(1);
        assert!(plain.finish().take_samples().is_none(), "kept only when asked");
    }

    #[test]
    fn a_counted_run_yields_one_sample_per_iteration_past_its_room() {
        // Fewer stamps than ticks, down to the least room: the intervals past the room,
        // and the ones bridging two conversions, still count. Both clocks.
        for (room, counter) in [(1000, true), (2, true), (3, false)] {
            let n = 1005;
            let mut s = CountedSampler::with_room(&plan(n, None, 2), room, counter);
            let mut i = 0;
            while s.tick(i) {
                i += 1;
            }
            assert_eq!(i, n, "the tick after the last iteration ends the run");
            // Without the counter every tick takes the slow path: the fast one's box
            // stays empty.
            assert_eq!(s.stamps.is_empty(), !counter, "room {room}, counter {counter}");
            assert_eq!(s.finish().count(), n, "room {room}: n + 1 ticks are n intervals");
        }
        let long = CountedSampler::new(&plan(u64::MAX / 2, None, 1));
        assert_eq!(long.room, STAMPS, "the room is the same whatever -n is");
        assert!(long.stamps.is_empty(), "nothing is allocated before the first tick");
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
        let mut s = CountedSampler::with_room(&p, 7, counter_usable());
        assert_eq!(s.clock.counter(), counter_usable());
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
        // Long enough that a 2 ms sleep of 15 ms (Windows' timer, under wine on a busy
        // host: 0 of 6 kept with 60 ms) still leaves ticks inside the window.
        let total = Duration::from_millis(300);
        let margin = Duration::from_millis(100);
        let start = Instant::now();
        let mut s = TimedSampler::new(&plan(u64::MAX, Some((total, margin)), 1));
        let mut i = 0;
        while s.tick(i) {
            std::thread::sleep(Duration::from_millis(2));
            i += 1;
        }
        assert!(start.elapsed() >= total);
        let rec = s.finish();
        // About 100 ms of 2 ms intervals kept out of about 150 taken.
        assert!(rec.count() > 0 && rec.count() < i, "{} of {i}", rec.count());
    }
}
