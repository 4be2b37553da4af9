//! `--interval`: a bandwidth run's progress in fixed intervals, iperf3's `-i` lines. The
//! sender's loop looks at its clock (a counter read, no system call) every [`MARK_EVERY`]
//! passes, where it also refines the clock's rate; an interval that has ended is closed
//! there and told to the loop's [`Pulse`](super::Pulse) as the run goes.

use std::time::Duration;

/// Passes of a bandwidth loop between two looks at the clock for an interval's end.
pub(super) const MARK_EVERY: u32 = 64;

/// One interval of a bandwidth run, all QPs of the loop together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntervalMark {
    /// From, ns since the loop's start.
    pub start_ns: u64,
    /// To: the look at the clock that closed it (within [`MARK_EVERY`] passes of the
    /// nominal end; the next interval starts there, so none is lost or counted twice).
    pub end_ns: u64,
    /// Messages completed in it.
    pub messages: u64,
}

/// The marks of one loop: when the next interval ends, and those closed so far.
pub(super) struct Intervals {
    every_ns: u64,
    next_ns: u64,
    start_ns: u64,
    /// Messages completed when the open interval started.
    base: u64,
    /// Closed, in order: room for a duration run's made before the loop.
    pub(super) marks: Vec<IntervalMark>,
}

impl Intervals {
    /// Marks every `every_ns` (0: none) of a run of `total` (room for its marks).
    pub(super) fn new(every_ns: u64, total: Option<Duration>) -> Self {
        let room = match total {
            Some(t) if every_ns > 0 => (t.as_nanos() as u64 / every_ns + 2) as usize,
            _ if every_ns > 0 => 64,
            _ => 0,
        };
        Intervals { every_ns, next_ns: every_ns, start_ns: 0, base: 0, marks: touched(room) }
    }

    /// Whether the open interval has ended at `now_ns`.
    #[inline(always)]
    pub(super) fn due(&self, now_ns: u64) -> bool {
        self.every_ns > 0 && now_ns >= self.next_ns
    }

    /// Closes the open interval at `now_ns`, `done` messages completed in all.
    #[cold]
    pub(super) fn close(&mut self, now_ns: u64, done: u64) -> IntervalMark {
        // Never before its start: the clock's rate, refined between two looks, may put
        // a look a little earlier than the last.
        let now_ns = now_ns.max(self.start_ns);
        let mark = IntervalMark {
            start_ns: self.start_ns,
            end_ns: now_ns,
            messages: done.saturating_sub(self.base),
        };
        self.marks.push(mark);
        (self.start_ns, self.base) = (now_ns, done);
        // The next end on the schedule; one missed entirely (a stalled loop) is skipped.
        while self.next_ns <= now_ns {
            self.next_ns += self.every_ns;
        }
        mark
    }

    /// The run ended at `now_ns`: the last, partial interval, when it holds messages.
    pub(super) fn finish(&mut self, now_ns: u64, done: u64) -> Option<IntervalMark> {
        (self.every_ns > 0 && done > self.base).then(|| self.close(now_ns, done))
    }
}

/// An empty list with room for `room` marks, every page of it written once now: an
/// hour's marks first touched as the intervals fill them would show as a resident set
/// that grows all run (ci/soak's memory figure), and as page faults in the loop.
fn touched(room: usize) -> Vec<IntervalMark> {
    // Not zeros, which an allocator may hand out as untouched zero pages.
    let mut marks = vec![IntervalMark { start_ns: u64::MAX, end_ns: 0, messages: 0 }; room];
    marks.clear();
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_follow_the_schedule_and_add_up_to_the_run() {
        let mut iv = Intervals::new(1_000, Some(Duration::from_nanos(3_500)));
        assert!(iv.marks.capacity() >= 5, "room for the run's marks before it starts");
        assert!(!iv.due(999));
        assert!(iv.due(1_010));
        let first = iv.close(1_010, 40);
        assert_eq!(first, IntervalMark { start_ns: 0, end_ns: 1_010, messages: 40 });
        assert!(!iv.due(1_999), "the next end is on the schedule, not 1000 after the look");
        // A stalled loop looks late: the interval it closes spans the gap, once.
        let late = iv.close(3_200, 100);
        assert_eq!(late, IntervalMark { start_ns: 1_010, end_ns: 3_200, messages: 60 });
        assert!(!iv.due(3_900) && iv.due(4_000));
        let last = iv.finish(3_500, 130).unwrap();
        assert_eq!(last.messages, 30);
        assert_eq!(iv.marks.iter().map(|m| m.messages).sum::<u64>(), 130, "every message once");
        assert!(iv.finish(3_600, 130).is_none(), "no empty last interval");
        // A look that a refined clock rate puts before the interval's start closes it
        // empty at its start, never backwards.
        let mut early = Intervals::new(1_000, None);
        early.close(2_000, 10);
        let back = early.close(1_990, 10);
        assert_eq!((back.start_ns, back.end_ns, back.messages), (2_000, 2_000, 0));
        let mut off = Intervals::new(0, None);
        assert!(!off.due(u64::MAX) && off.finish(10, 5).is_none() && off.marks.capacity() == 0);
    }
}
