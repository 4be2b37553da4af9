//! Measurement: pure arithmetic over timestamps and samples. Nothing here touches a
//! device or prints; docs/metrics.md defines every number.

pub mod clock;
pub mod cpu;
pub mod stability;

pub use clock::{counter_usable, CycleClock, Stopwatch};
pub use stability::Stability;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Most completion stamps a bandwidth recorder keeps per QP (1 MiB of them): past it,
/// every other one (the resolution of the minimum-bandwidth intervals halves).
pub const MAX_COMPLETION_STAMPS: usize = 1 << 16;

/// Bytes in a MiB: perftest's "MB/sec" was always this.
pub const MIB: f64 = 1_048_576.0;

/// Bandwidth in a report's unit: Gb/s (10^9 bits) with `gbits`, MiB/s otherwise.
pub fn bw_in_unit(bytes_per_sec: f64, gbits: bool) -> f64 {
    if gbits {
        bytes_per_sec * 8.0 / 1e9
    } else {
        bytes_per_sec / MIB
    }
}

/// What a bandwidth loop records on one QP: when each message was posted and, at
/// each signaled completion, how many messages were done. Preallocated; recording
/// never allocates.
#[derive(Clone, Debug)]
pub struct BwRecorder {
    posts: Vec<u64>,
    completions: Vec<(u64, u64)>,
    keep_posts: bool,
}

impl BwRecorder {
    /// Room for `messages` posts and `signals` completion stamps (at most
    /// [`MAX_COMPLETION_STAMPS`]: a longer run keeps every other stamp when full, so
    /// `-n` cannot size an allocation); post stamps are kept only when `peak` is wanted.
    pub fn new(messages: usize, signals: usize, peak: bool) -> Self {
        BwRecorder {
            posts: Vec::with_capacity(if peak { messages } else { 1 }),
            completions: Vec::with_capacity(signals.min(MAX_COMPLETION_STAMPS) + 1),
            keep_posts: peak,
        }
    }

    /// A message was posted at `t_ns`.
    #[inline]
    pub fn posted(&mut self, t_ns: u64) {
        if (self.keep_posts || self.posts.is_empty()) && self.posts.len() < self.posts.capacity() {
            self.posts.push(t_ns);
        }
    }

    /// At `t_ns`, `done` messages in total had completed.
    #[inline]
    pub fn completed(&mut self, t_ns: u64, done: u64) {
        if self.completions.len() == self.completions.capacity() {
            self.thin();
        }
        self.completions.push((t_ns, done));
    }

    /// Full: keeps every other completion stamp, the latest included, and frees half
    /// the room. Rare (each time the run doubles past the room), and allocates nothing.
    #[cold]
    fn thin(&mut self) {
        let n = self.completions.len();
        // Indices n-1, n-3, …: the latest stays, in order.
        let mut w = 0;
        for r in ((n + 1) % 2..n).step_by(2) {
            self.completions[w] = self.completions[r];
            w += 1;
        }
        self.completions.truncate(w);
    }

    /// Turns stamps taken in another unit into ns: each times `ns_per_unit`.
    pub fn rescale(&mut self, ns_per_unit: f64) {
        if ns_per_unit == 1.0 {
            return;
        }
        let ns = |t: u64| (t as f64 * ns_per_unit) as u64;
        self.posts.iter_mut().for_each(|t| *t = ns(*t));
        self.completions.iter_mut().for_each(|(t, _)| *t = ns(*t));
    }

    /// First post, ns.
    pub fn first_post(&self) -> Option<u64> {
        self.posts.first().copied()
    }

    /// Last completion stamp and count.
    pub fn last_completion(&self) -> Option<(u64, u64)> {
        self.completions.last().copied()
    }

    /// Every completion stamp kept, in order: (ns, messages done by then).
    pub fn completions(&self) -> &[(u64, u64)] {
        &self.completions
    }
}

/// Bandwidth results of one stream (a QP, or the aggregate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BwStats {
    /// Messages counted.
    pub messages: u64,
    /// Bytes counted.
    pub bytes: u64,
    /// Measured window, ns: first post to last completion (iterations), or the
    /// sampled window (duration).
    pub window_ns: u64,
    /// Average, bytes/s.
    pub avg_bytes_per_sec: f64,
    /// Peak as perftest defines it, bytes/s (None when not computed).
    pub peak_bytes_per_sec: Option<f64>,
    /// Lowest bandwidth over any of the fixed intervals, bytes/s.
    pub min_bytes_per_sec: Option<f64>,
    /// The interval length used for `min_bytes_per_sec`, ns.
    pub interval_ns: Option<u64>,
    /// Messages per second.
    pub msg_rate: f64,
}

/// The fixed interval for the minimum-bandwidth figure: a tenth of the window, at
/// least 1 ms and at most 1 s.
pub fn min_interval(window_ns: u64) -> u64 {
    (window_ns / 10).clamp(1_000_000, 1_000_000_000)
}

/// Bandwidth of one stream in iteration mode.
pub fn bw_stats(size: u64, rec: &BwRecorder) -> BwStats {
    let (Some(start), Some((end, done))) = (rec.first_post(), rec.last_completion()) else {
        return BwStats::default();
    };
    let window_ns = end.saturating_sub(start).max(1);
    let bytes = done * size;
    let secs = window_ns as f64 / 1e9;
    let peak =
        if rec.keep_posts { peak_bytes_per_sec(size, &rec.posts, &rec.completions) } else { None };
    let interval = min_interval(window_ns);
    BwStats {
        messages: done,
        bytes,
        window_ns,
        avg_bytes_per_sec: bytes as f64 / secs,
        peak_bytes_per_sec: peak,
        // Intervals start at the first completion: the pipeline fill before it is not
        // an unstable link.
        min_bytes_per_sec: rec.completions.first().and_then(|&(t0, d0)| {
            min_over_intervals(size, t0, &rebase(&rec.completions, d0), interval)
        }),
        interval_ns: Some(interval),
        msg_rate: done as f64 / secs,
    }
}

/// Bandwidth of each interval of an iteration run — the minimum's intervals, from the
/// first completion — and the interval's length, ns.
pub fn recorder_rates(size: u64, rec: &BwRecorder) -> (Vec<f64>, u64) {
    let (Some(start), Some((end, _))) = (rec.first_post(), rec.last_completion()) else {
        return (Vec::new(), 0);
    };
    let interval = min_interval(end.saturating_sub(start).max(1));
    let rates = rec.completions.first().map_or_else(Vec::new, |&(t0, d0)| {
        interval_rates(size, t0, &rebase(&rec.completions, d0), interval)
    });
    (rates, interval)
}

/// perftest's peak: the best per-message time over every sub-window that starts at a
/// post and ends at a signaled completion, `min over i ≤ j of
/// (tcompleted[j] − tposted[i]) / (j − i + 1)`.
pub fn peak_bytes_per_sec(size: u64, posts: &[u64], completions: &[(u64, u64)]) -> Option<f64> {
    let mut best: Option<f64> = None;
    for &(tc, done) in completions {
        // Messages 0..done are complete at tc; message `done - 1` is the last.
        let last = usize::try_from(done).ok()?.checked_sub(1)?;
        for (i, &tp) in posts.iter().enumerate().take(last + 1) {
            let per_msg = tc.saturating_sub(tp) as f64 / (last - i + 1) as f64;
            if per_msg > 0.0 && best.is_none_or(|b| per_msg < b) {
                best = Some(per_msg);
            }
        }
    }
    best.map(|ns| size as f64 / (ns / 1e9))
}

/// Lowest bandwidth over consecutive `interval`s from `start`, from completion stamps.
/// Only whole intervals count; `None` if the window holds none.
pub fn min_over_intervals(
    size: u64,
    start: u64,
    completions: &[(u64, u64)],
    interval: u64,
) -> Option<f64> {
    interval_rates(size, start, completions, interval).into_iter().reduce(f64::min)
}

/// Bandwidth of each whole `interval` from `start`, from completion stamps
/// `(time, messages done)` (counts from `start`).
pub fn interval_rates(
    size: u64,
    start: u64,
    completions: &[(u64, u64)],
    interval: u64,
) -> Vec<f64> {
    let Some(&(end, _)) = completions.last() else { return Vec::new() };
    let mut rates = Vec::new();
    let mut t0 = start;
    let mut done0 = 0u64;
    let mut idx = 0;
    while interval > 0 && t0 + interval <= end {
        let t1 = t0 + interval;
        // Messages done by t1: the count of the last stamp at or before t1.
        while idx < completions.len() && completions[idx].0 <= t1 {
            idx += 1;
        }
        let done1 = if idx == 0 { 0 } else { completions[idx - 1].1 };
        rates.push(done1.saturating_sub(done0) as f64 * size as f64 / (interval as f64 / 1e9));
        t0 = t1;
        done0 = done1;
    }
    rates
}

/// Bandwidth of each `interval_ns` interval of a duration run, every stream's together,
/// from each stream's cumulative counts at the intervals' ends (the intervals all
/// streams have).
pub fn windowed_rates(size: u64, interval_ns: u64, cumulative: &[&[u64]]) -> Vec<f64> {
    let n = cumulative.iter().map(|c| c.len()).min().unwrap_or(0);
    let secs = interval_ns.max(1) as f64 / 1e9;
    (0..n)
        .map(|i| {
            let done: u64 = cumulative
                .iter()
                .map(|c| c[i].saturating_sub(if i == 0 { 0 } else { c[i - 1] }))
                .sum();
            done as f64 * size as f64 / secs
        })
        .collect()
}

/// Bandwidth of one stream in a duration run: `messages` completed inside a window of
/// `window_ns`, and the cumulative count at the end of each `interval_ns` interval.
pub fn windowed_stats(
    size: u64,
    messages: u64,
    window_ns: u64,
    interval_ns: u64,
    cumulative: &[u64],
) -> BwStats {
    let secs = window_ns.max(1) as f64 / 1e9;
    let mut prev = 0;
    let mut min: Option<f64> = None;
    for &done in cumulative {
        let rate = (done - prev) as f64 * size as f64 / (interval_ns as f64 / 1e9);
        min = Some(min.map_or(rate, |m: f64| m.min(rate)));
        prev = done;
    }
    BwStats {
        messages,
        bytes: messages * size,
        window_ns,
        avg_bytes_per_sec: (messages * size) as f64 / secs,
        peak_bytes_per_sec: None,
        min_bytes_per_sec: min,
        interval_ns: Some(interval_ns),
        msg_rate: messages as f64 / secs,
    }
}

/// Completion stamps with the count at the first one subtracted.
fn rebase(completions: &[(u64, u64)], base: u64) -> Vec<(u64, u64)> {
    completions.iter().map(|&(t, d)| (t, d - base)).collect()
}

/// Sums streams measured over the same run (QPs, or the two directions of -b): bytes
/// and messages add; the window is the union of the windows.
pub fn aggregate(streams: &[(BwStats, u64)]) -> BwStats {
    // (stats, window start ns) pairs
    let start = streams.iter().map(|(_, s)| *s).min().unwrap_or(0);
    let end = streams.iter().map(|(b, s)| s + b.window_ns).max().unwrap_or(0);
    let window_ns = end.saturating_sub(start).max(1);
    let bytes: u64 = streams.iter().map(|(b, _)| b.bytes).sum();
    let messages: u64 = streams.iter().map(|(b, _)| b.messages).sum();
    let secs = window_ns as f64 / 1e9;
    let sum_opt = |f: fn(&BwStats) -> Option<f64>| -> Option<f64> {
        streams.iter().map(|(b, _)| f(b)).sum::<Option<f64>>()
    };
    BwStats {
        messages,
        bytes,
        window_ns,
        avg_bytes_per_sec: bytes as f64 / secs,
        peak_bytes_per_sec: sum_opt(|b| b.peak_bytes_per_sec),
        min_bytes_per_sec: sum_opt(|b| b.min_bytes_per_sec),
        interval_ns: streams.first().and_then(|(b, _)| b.interval_ns),
        msg_rate: messages as f64 / secs,
    }
}

/// Latency samples: every one in an HDR histogram (3 significant digits), plus exact
/// count, min, max, mean and standard deviation. (The latency loops of `-n` runs keep
/// timestamps while they run and record the intervals afterwards, so the histogram is
/// not updated inside the timed loop; see `perf::loops::CountedSampler`.)
#[derive(Clone, Debug)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    count: u64,
    sum: f64,
    sum_sq: f64,
    min: u64,
    max: u64,
    /// Every sample in the order it came (`-H`, `-U`; None: not kept).
    samples: Option<Vec<u64>>,
}

/// The longest latency the histogram tells apart (1 hour): a longer sample counts there,
/// never dropped.
const HIST_MAX_NS: u64 = 3_600_000_000_000;

/// The range the histogram starts with (1 ns .. 1 ms, 90 KB of counts). It grows, once
/// per doubling, when a longer sample comes: made for the full hour at once, its 270 KB
/// of counts were written through when made (a third of a latency client's heap).
const HIST_START_NS: u64 = 1_000_000;

impl Default for LatencyRecorder {
    fn default() -> Self {
        let mut hist =
            Histogram::new_with_bounds(1, HIST_START_NS, 3).expect("valid histogram bounds");
        hist.auto(true);
        LatencyRecorder {
            hist,
            count: 0,
            sum: 0.0,
            sum_sq: 0.0,
            min: u64::MAX,
            max: 0,
            samples: None,
        }
    }
}

/// Latency results, µs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatStats {
    /// Samples.
    pub samples: u64,
    /// Smallest.
    pub t_min_us: f64,
    /// Largest (every sample counts, none dropped).
    pub t_max_us: f64,
    /// Median (perftest's t_typical).
    pub t_typical_us: f64,
    /// Mean.
    pub t_avg_us: f64,
    /// Standard deviation, exact.
    pub t_stdev_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
    /// 99.99th percentile.
    pub p99_99_us: f64,
    /// Histogram: `[value_ns, count]` of every non-empty bucket.
    pub histogram: Vec<[u64; 2]>,
}

impl LatencyRecorder {
    /// Records one sample in ns.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let ns = ns.max(1);
        if self.hist.record(ns.min(HIST_MAX_NS)).is_err() {
            // Growing failed (only where usize cannot index it): count it at the top.
            self.hist.saturating_record(ns);
        }
        self.count += 1;
        let x = ns as f64;
        self.sum += x;
        self.sum_sq += x * x;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        if let Some(s) = &mut self.samples {
            s.push(ns);
        }
    }

    /// Keeps every sample from now on, in order, with room for `expected` (`-H`, `-U`).
    pub fn keep_samples(&mut self, expected: usize) {
        self.samples = Some(Vec::with_capacity(expected));
    }

    /// The samples kept, in order, ns (None unless [`keep_samples`](Self::keep_samples)).
    pub fn take_samples(&mut self) -> Option<Vec<u64>> {
        self.samples.take()
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The statistics.
    pub fn stats(&self) -> LatStats {
        if self.count == 0 {
            return LatStats::default();
        }
        let n = self.count as f64;
        let mean = self.sum / n;
        let var = (self.sum_sq / n - mean * mean).max(0.0);
        let us = |ns: f64| ns / 1000.0;
        let q = |p: f64| us(self.hist.value_at_quantile(p) as f64).min(us(self.max as f64));
        LatStats {
            samples: self.count,
            t_min_us: us(self.min as f64),
            t_max_us: us(self.max as f64),
            t_typical_us: q(0.5),
            t_avg_us: us(mean),
            t_stdev_us: us(var.sqrt()),
            p99_us: q(0.99),
            p99_9_us: q(0.999),
            p99_99_us: q(0.9999),
            histogram: self
                .hist
                .iter_recorded()
                .map(|v| [v.value_iterated_to(), v.count_at_value()])
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorder_past_its_room_thins_its_stamps_and_keeps_the_last() {
        let mut r = BwRecorder::new(1, 9, false);
        let room = r.completions.capacity();
        for i in 1..=1000u64 {
            r.completed(i * 10, i);
        }
        assert!(r.completions.len() <= room, "no allocation past the room");
        assert_eq!(r.last_completion(), Some((10_000, 1000)));
        assert!(r.completions.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        // A huge -n sizes nothing: the room is capped.
        let huge = BwRecorder::new(1, usize::MAX / 32, false);
        assert!(huge.completions.capacity() <= MAX_COMPLETION_STAMPS + 1);
    }

    #[test]
    fn average_is_bytes_over_first_post_to_last_completion() {
        let mut r = BwRecorder::new(4, 4, true);
        for (i, t) in [0u64, 10, 20, 30].iter().enumerate() {
            r.posted(*t);
            r.completed(1000 + 1000 * i as u64, i as u64 + 1);
        }
        let s = bw_stats(1000, &r);
        assert_eq!((s.messages, s.bytes, s.window_ns), (4, 4000, 4000));
        assert!((s.avg_bytes_per_sec - 1e9).abs() < 1e-3, "{}", s.avg_bytes_per_sec);
        assert!((s.msg_rate - 1e6).abs() < 1e-6);
    }

    #[test]
    fn peak_is_the_best_sub_window() {
        // Posts at 0, 10, 20, 30; completions of 1, 2, 3, 4 messages at 100, 110, 120, 130.
        let posts = [0, 10, 20, 30];
        let completions = [(100, 1), (110, 2), (120, 3), (130, 4)];
        // Best: from post 0 to completion of 4 messages: 130 ns / 4 = 32.5 ns per message;
        // from post 3 to the last completion: 100 ns for 1. Minimum per message: 32.5.
        let peak = peak_bytes_per_sec(65, &posts, &completions).unwrap();
        assert!((peak - 65.0 / 32.5e-9).abs() / peak < 1e-12, "{peak}");
    }

    #[test]
    fn minimum_interval_finds_the_stall() {
        // 1 message per ms for 5 ms, then nothing for 3 ms, then 2 more ms.
        let mut c = vec![];
        let mut done = 0;
        for ms in 1..=5u64 {
            done += 1;
            c.push((ms * 1_000_000, done));
        }
        for ms in 9..=10u64 {
            done += 1;
            c.push((ms * 1_000_000, done));
        }
        let min = min_over_intervals(1_000_000, 0, &c, 1_000_000).unwrap();
        assert_eq!(min, 0.0, "the stalled milliseconds show");
        let min2 = min_over_intervals(1_000_000, 0, &c[..5], 1_000_000).unwrap();
        assert!((min2 - 1e9).abs() < 1e-3, "steady 1 MB per ms: {min2}");
        assert_eq!(min_interval(100), 1_000_000);
        assert_eq!(min_interval(50_000_000_000), 1_000_000_000);
        assert_eq!(min_interval(50_000_000), 5_000_000);
    }

    #[test]
    fn duration_windows_use_their_interval_counts() {
        // 4 intervals of 100 ms: 10, 10, 0, 10 messages of 1000 bytes.
        let s = windowed_stats(1000, 30, 400_000_000, 100_000_000, &[10, 20, 20, 30]);
        assert_eq!((s.messages, s.bytes), (30, 30_000));
        assert!((s.avg_bytes_per_sec - 75_000.0).abs() < 1e-6);
        assert_eq!(s.min_bytes_per_sec, Some(0.0), "the silent interval shows");
        assert_eq!(s.peak_bytes_per_sec, None);
    }

    #[test]
    fn aggregate_sums_streams_over_their_union() {
        let a = BwStats { messages: 10, bytes: 1000, window_ns: 1000, ..Default::default() };
        let b = BwStats { messages: 10, bytes: 1000, window_ns: 1000, ..Default::default() };
        let s = aggregate(&[(a, 0), (b, 500)]);
        assert_eq!((s.messages, s.bytes, s.window_ns), (20, 2000, 1500));
    }

    #[test]
    fn latency_stats_are_exact_where_they_can_be() {
        let mut r = LatencyRecorder::default();
        for ns in [1000u64, 2000, 3000, 4000, 100_000] {
            r.record(ns);
        }
        let s = r.stats();
        assert_eq!(s.samples, 5);
        assert_eq!(
            (s.t_min_us, s.t_max_us),
            (1.0, 100.0),
            "every sample counts: max is the outlier"
        );
        assert!((s.t_avg_us - 22.0).abs() < 1e-9);
        // population stdev of 1,2,3,4,100 µs
        let mean = 22.0f64;
        let var =
            [1.0f64, 2.0, 3.0, 4.0, 100.0].iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 5.0;
        assert!((s.t_stdev_us - var.sqrt()).abs() < 1e-6, "{} vs {}", s.t_stdev_us, var.sqrt());
        assert!((s.t_typical_us - 3.0).abs() < 0.01, "{}", s.t_typical_us);
        assert!(s.p99_us <= s.t_max_us && s.p99_9_us <= s.t_max_us);
        assert_eq!(s.histogram.iter().map(|b| b[1]).sum::<u64>(), 5);
    }

    #[test]
    fn the_histogram_grows_past_its_first_range_and_stops_at_an_hour() {
        let mut r = LatencyRecorder::default();
        let small = r.hist.len();
        // A second, a minute: beyond the first millisecond, each in its own bucket.
        for ns in [2_000u64, 1_000_000_000, 60_000_000_000] {
            r.record(ns);
        }
        assert!(r.hist.len() > small, "grown: {} counts, from {small}", r.hist.len());
        assert_eq!(r.hist.count_between(900_000_000, 1_100_000_000), 1);
        assert_eq!(r.hist.count_between(59_000_000_000, 61_000_000_000), 1);
        // Two hours counts at the hour, kept and not dropped; max stays exact.
        r.record(2 * HIST_MAX_NS);
        let s = r.stats();
        assert_eq!(s.samples, 4);
        assert_eq!(s.t_max_us, 2.0 * HIST_MAX_NS as f64 / 1e3);
        assert_eq!(r.hist.count_between(HIST_MAX_NS / 2, u64::MAX), 1);
        assert_eq!(s.histogram.iter().map(|b| b[1]).sum::<u64>(), 4);
    }

    #[test]
    fn percentiles_separate_from_max_with_enough_samples() {
        let mut r = LatencyRecorder::default();
        for i in 0..100_000u64 {
            r.record(1000 + i % 1000);
        }
        r.record(1_000_000);
        let s = r.stats();
        assert!(s.p99_9_us < 3.0, "{}", s.p99_9_us);
        assert_eq!(s.t_max_us, 1000.0, "unlike perftest, 99.9 % is not max");
    }
}

#[cfg(test)]
mod steady_tests {
    use super::*;

    #[test]
    fn a_steady_stream_has_min_close_to_average() {
        let mut r = BwRecorder::new(200, 202, true);
        for i in 0..200u64 {
            r.posted(i * 10);
        }
        for i in 0..200u64 {
            r.completed(5_000_000 + i * 1_400_000, i + 1);
        }
        let s = bw_stats(65536, &r);
        let min = s.min_bytes_per_sec.expect("whole intervals exist");
        assert!(min > 0.8 * s.avg_bytes_per_sec, "min {min} avg {}", s.avg_bytes_per_sec);
    }
}
