//! A pattern round's shared window: every flow's bytes counted between one start and
//! one stop that all its flows straddle, not the sum of each flow's own average (flows
//! that hardly overlap would add up to more than the links give at once).
//!
//! Each rank stamps its flows' progress on its own monotonic clock, counted from when it
//! started the round (rank 0's go, which every rank polls for every 5 ms): the ranks'
//! clocks never meet, only their offsets from that go do, so the window's edges are good
//! to the go's skew (milliseconds) whatever the hosts' wall clocks say.
//!
//! - start: the last flow's first post; stop: the first flow's last completion;
//! - a flow's bytes inside: its progress stamps, linear between two of them;
//! - its share: its bytes over all the flows' bytes inside; the fairness: Jain's index
//!   over those bytes, (Σx)² ÷ (n·Σx²), 1 when all are equal and 1/n when one flow has
//!   them all.

use serde::{Deserialize, Serialize};

use crate::measure::MIB;
use crate::results::Progress;

/// One flow's bytes as it ran: (µs since its rank started the round, bytes done by
/// then), in order, at most [`FlowSpan::POINTS`]; the first its first post (0 bytes),
/// the last its last completion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSpan(pub Vec<(u64, u64)>);

impl FlowSpan {
    /// Most points a rank may report for a flow.
    pub const POINTS: usize = Progress::POINTS;

    /// A sender's progress, its clock's start `offset_us` after its rank started the
    /// round.
    pub fn of(progress: &Progress, offset_us: u64) -> FlowSpan {
        let us = |ns: u64| offset_us.saturating_add(ns / 1_000);
        FlowSpan(progress.stamps.iter().map(|&(t, b)| (us(t), b)).collect())
    }

    /// From a peer: at most [`Self::POINTS`] points, two at least, neither time nor
    /// bytes going back.
    ///
    /// # Errors
    /// Names what is wrong with it.
    pub fn check(&self) -> Result<(), String> {
        let n = self.0.len();
        if !(2..=Self::POINTS).contains(&n) {
            return Err(format!("{n} progress points (2 to {} allowed)", Self::POINTS));
        }
        if self.0.windows(2).any(|w| w[1].0 < w[0].0 || w[1].1 < w[0].1) {
            return Err("progress points that go back in time or bytes".into());
        }
        Ok(())
    }

    /// First post, µs.
    pub fn start(&self) -> Option<u64> {
        self.0.first().map(|p| p.0)
    }

    /// Last completion, µs.
    pub fn end(&self) -> Option<u64> {
        self.0.last().map(|p| p.0)
    }

    /// Bytes done at `t` µs: linear between the points around it, 0 before the first,
    /// all after the last.
    pub fn bytes_at(&self, t: u64) -> f64 {
        let p = &self.0;
        let i = p.partition_point(|&(at, _)| at <= t);
        match (i.checked_sub(1).and_then(|k| p.get(k)), p.get(i)) {
            (None, _) => 0.0,
            (Some(&(_, b)), None) => b as f64,
            (Some(&(t0, b0)), Some(&(t1, b1))) => {
                let f = (t - t0) as f64 / (t1 - t0).max(1) as f64;
                b0 as f64 + f * (b1 as f64 - b0 as f64)
            }
        }
    }

    /// Bytes done between `from` and `to` µs.
    pub fn bytes_between(&self, from: u64, to: u64) -> f64 {
        (self.bytes_at(to) - self.bytes_at(from)).max(0.0)
    }
}

/// A round's shared window and what its flows did inside it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SharedWindow {
    /// From, ms after the ranks started the round: the last flow's first post.
    pub start_ms: f64,
    /// To, ms: the first flow's last completion.
    pub stop_ms: f64,
    /// `stop_ms − start_ms`.
    pub length_ms: f64,
    /// Flows counted (every flow of the round that reported its progress).
    pub flows: usize,
    /// Their bytes inside the window, summed.
    pub bytes: f64,
    /// Those bytes over the window's length, MB/s.
    pub aggregate_mb_per_sec: f64,
    /// The same flows alone (the pairs' matrix), summed, MB/s (null: one was not
    /// measured alone).
    pub alone_sum_mb_per_sec: Option<f64>,
    /// aggregate ÷ alone sum.
    pub ratio: Option<f64>,
    /// Jain's fairness index over the flows' bytes inside: 1 all equal, 1/n one has all.
    pub fairness: Option<f64>,
}

/// What each flow did in a window (in the order given): its bytes, MB/s and share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InWindow {
    /// Bytes inside the window.
    pub bytes: f64,
    /// Those over the window's length, MB/s.
    pub mb_per_sec: f64,
    /// Its part of all the flows' bytes inside (0 to 1).
    pub share: f64,
}

/// Why a round has no shared window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoWindow {
    /// A flow of the round reported no progress (it failed, or ran over TCP threads).
    Unreported,
    /// A flow ended before another started: they never all ran at once.
    NoOverlap,
}

/// The window all of `spans` straddle, and each span's part of it; `alone` is each
/// flow's figure alone, MB/s.
///
/// # Errors
/// No span at all, a flow without one, or flows that never all ran at once.
pub fn shared(
    spans: &[Option<&FlowSpan>],
    alone: &[Option<f64>],
) -> Result<(SharedWindow, Vec<InWindow>), NoWindow> {
    let spans: Vec<&FlowSpan> =
        spans.iter().copied().collect::<Option<_>>().ok_or(NoWindow::Unreported)?;
    let starts = spans.iter().map(|s| s.start());
    let start = starts.collect::<Option<Vec<_>>>().and_then(|v| v.into_iter().max());
    let stop =
        spans.iter().map(|s| s.end()).collect::<Option<Vec<_>>>().and_then(|v| v.into_iter().min());
    let (Some(start), Some(stop)) = (start, stop) else { return Err(NoWindow::Unreported) };
    if stop <= start {
        return Err(NoWindow::NoOverlap);
    }
    let secs = (stop - start) as f64 / 1e6;
    let bytes: Vec<f64> = spans.iter().map(|s| s.bytes_between(start, stop)).collect();
    let total: f64 = bytes.iter().sum();
    let each = bytes
        .iter()
        .map(|&b| InWindow {
            bytes: b,
            mb_per_sec: b / secs / MIB,
            share: if total > 0.0 { b / total } else { 0.0 },
        })
        .collect();
    let aggregate = total / secs / MIB;
    let alone_sum: Option<f64> = alone.iter().copied().sum();
    let window = SharedWindow {
        start_ms: start as f64 / 1e3,
        stop_ms: stop as f64 / 1e3,
        length_ms: (stop - start) as f64 / 1e3,
        flows: spans.len(),
        bytes: total,
        aggregate_mb_per_sec: aggregate,
        alone_sum_mb_per_sec: alone_sum,
        ratio: alone_sum.filter(|&a| a > 0.0).map(|a| aggregate / a),
        fairness: jain(&bytes),
    };
    Ok((window, each))
}

/// Jain's fairness index of `x`: (Σx)² ÷ (n·Σx²); None for no values or all zero.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn a_flow_is_counted_only_between_the_last_start_and_the_first_stop() {
        // A: 0..1000 µs at 1 byte/µs. B: 400..2400 µs at 2 bytes/µs. C: 200..800 µs
        // with a stall: nothing until 500, then 3 bytes/µs.
        let a = FlowSpan(vec![(0, 0), (1000, 1000)]);
        let b = FlowSpan(vec![(400, 0), (1400, 2000), (2400, 4000)]);
        let c = FlowSpan(vec![(200, 0), (500, 0), (800, 900)]);
        let (w, each) =
            shared(&[Some(&a), Some(&b), Some(&c)], &[Some(10.0), Some(20.0), Some(30.0)]).unwrap();
        // The window: B's first post (400) to C's last completion (800).
        assert_eq!((w.start_ms, w.stop_ms, w.length_ms), (0.4, 0.8, 0.4));
        assert_eq!(w.flows, 3);
        // Inside: A 400 bytes, B 800, C 900 (all of its 500..800).
        let bytes: Vec<f64> = each.iter().map(|e| e.bytes).collect();
        assert_eq!(bytes, [400.0, 800.0, 900.0]);
        assert!(close(w.bytes, 2100.0));
        // Not the sum of each flow's own average: A's 1, B's 2, C's 1.5 bytes/µs make
        // 4.5 bytes/µs; over the window they made 2100 / 400 = 5.25.
        let bytes_per_sec = 2100.0 / 400e-6;
        assert!(close(w.aggregate_mb_per_sec, bytes_per_sec / MIB), "{w:?}");
        assert!(close(each[1].mb_per_sec, 800.0 / 400e-6 / MIB));
        assert!(close(each.iter().map(|e| e.share).sum(), 1.0));
        assert!(close(each[2].share, 900.0 / 2100.0));
        assert_eq!(w.alone_sum_mb_per_sec, Some(60.0));
        assert!(close(w.ratio.unwrap(), w.aggregate_mb_per_sec / 60.0));
        // Jain's: 2100² / (3 · (400² + 800² + 900²)) = 4 410 000 / 4 830 000.
        assert!(close(w.fairness.unwrap(), 4_410_000.0 / 4_830_000.0), "{w:?}");
    }

    #[test]
    fn flows_that_never_all_ran_at_once_or_did_not_report_have_no_window() {
        let a = FlowSpan(vec![(0, 0), (300, 300)]);
        let b = FlowSpan(vec![(300, 0), (600, 300)]);
        assert_eq!(shared(&[Some(&a), Some(&b)], &[None, None]), Err(NoWindow::NoOverlap));
        assert_eq!(shared(&[Some(&a), None], &[None, None]), Err(NoWindow::Unreported));
        assert_eq!(shared(&[], &[]), Err(NoWindow::Unreported));
        // One flow not measured alone: the window stands, its ratio does not.
        let c = FlowSpan(vec![(100, 0), (500, 800)]);
        let (w, _) = shared(&[Some(&a), Some(&c)], &[Some(1.0), None]).unwrap();
        assert_eq!((w.alone_sum_mb_per_sec, w.ratio), (None, None));
        assert_eq!((w.start_ms, w.stop_ms), (0.1, 0.3));
    }

    #[test]
    fn jains_index_is_one_for_equal_flows_and_one_over_n_for_one_flow_taking_all() {
        assert!(close(jain(&[5.0, 5.0, 5.0, 5.0]).unwrap(), 1.0));
        assert!(close(jain(&[9.0, 0.0, 0.0]).unwrap(), 1.0 / 3.0));
        assert!(close(jain(&[1.0, 3.0]).unwrap(), 16.0 / 20.0));
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }

    #[test]
    fn a_peers_span_is_refused_when_too_long_or_going_back() {
        assert!(FlowSpan(vec![(0, 0), (5, 10)]).check().is_ok());
        let long = FlowSpan((0..=FlowSpan::POINTS as u64).map(|t| (t, t)).collect());
        assert_eq!(long.check().unwrap_err(), "65 progress points (2 to 64 allowed)");
        assert!(FlowSpan(vec![(0, 0)]).check().is_err());
        assert!(FlowSpan(vec![(5, 0), (4, 10)]).check().is_err());
        assert!(FlowSpan(vec![(0, 10), (4, 9)]).check().is_err());
        // Between its points, linear; before, nothing; after, all.
        let s = FlowSpan(vec![(10, 0), (20, 100), (40, 100)]);
        assert_eq!(
            [s.bytes_at(5), s.bytes_at(15), s.bytes_at(30), s.bytes_at(99)],
            [0.0, 50.0, 100.0, 100.0]
        );
        assert_eq!(s.bytes_between(15, 99), 50.0);
    }

    #[test]
    fn progress_merges_qps_and_keeps_at_most_its_points() {
        let t0 = std::time::Instant::now();
        // Two QPs of 10-byte messages: one posts at 5, the other at 7.
        let q0 = [(10, 2), (30, 4)];
        let q1 = [(20, 1), (25, 3)];
        let p = Progress::of(t0, 10, &[(Some(5), &q0[..]), (Some(7), &q1[..])]).unwrap();
        assert_eq!(p.stamps, [(5, 0), (10, 20), (20, 30), (25, 50), (30, 70)]);
        assert!(Progress::of(t0, 10, &[(Some(5), &[][..])]).is_none());
        let many: Vec<(u64, u64)> = (1..=1000).map(|i| (i * 10, i)).collect();
        let p = Progress::of(t0, 1, &[(Some(0), &many[..])]).unwrap();
        assert_eq!(p.stamps.len(), Progress::POINTS);
        assert_eq!((p.stamps[0], *p.stamps.last().unwrap()), ((0, 0), (10_000, 1000)));
        let span = FlowSpan::of(&p, 2_000);
        assert_eq!((span.start(), span.end()), (Some(2_000), Some(2_010)));
        assert!(span.check().is_ok());
    }
}
