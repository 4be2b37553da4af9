//! `--rate_limit`'s software pacing (perftest's): bursts of messages on a schedule,
//! shared out between the queue pairs of a bandwidth run.

/// Bursts of messages on a schedule, all QPs together (perftest's software rate
/// limiter). Each of `n` QPs takes every n-th burst, in turn: each one's own figure
/// spans the whole run, and their sum is the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    /// Messages per burst.
    pub burst: u32,
    /// From one burst's start to the next, ns.
    pub gap_ns: u64,
}

/// A run's place in its [`Pace`]: what is left of the burst, and when the next starts.
pub(super) struct Pacer {
    pace: Pace,
    left: u64,
    next: u64,
}

impl Pacer {
    /// QP `k` of `n`'s share of `pace`: a burst every n gaps, from the k-th.
    pub(super) fn share(pace: Pace, n: usize, k: usize) -> Self {
        let gap_ns = pace.gap_ns.saturating_mul(n as u64);
        Pacer { pace: Pace { gap_ns, ..pace }, left: 0, next: pace.gap_ns.saturating_mul(k as u64) }
    }

    /// Messages that may be posted at `now`: the rest of this burst, or a new one when
    /// its time has come. Bursts keep to their schedule; one that starts more than a
    /// gap late restarts it from now (no catching up with a volley).
    pub(super) fn allowance(&mut self, now: u64) -> u64 {
        if self.left == 0 && now >= self.next {
            self.left = u64::from(self.pace.burst);
            let gap = self.pace.gap_ns;
            let on_schedule = now <= self.next.saturating_add(gap);
            self.next = if on_schedule { self.next } else { now }.saturating_add(gap);
        }
        self.left
    }

    pub(super) fn posted(&mut self, n: u64) {
        self.left = self.left.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pacer_allows_a_burst_per_gap_and_never_catches_up_with_a_volley() {
        let mut p = Pacer::share(Pace { burst: 4, gap_ns: 1_000 }, 1, 0);
        assert_eq!(p.allowance(0), 4);
        p.posted(3);
        assert_eq!(p.allowance(10), 1, "the rest of the burst");
        p.posted(1);
        assert_eq!(p.allowance(999), 0, "the next burst waits for its time");
        assert_eq!(p.allowance(1_000), 4);
        p.posted(4);
        // On schedule: the third burst is due at 2000 even though this one began late.
        assert_eq!(p.allowance(1_500), 0);
        assert_eq!(p.allowance(2_000), 4);
        p.posted(4);
        // Far behind (a stall): one burst now, the next a whole gap later.
        assert_eq!(p.allowance(10_000), 4);
        p.posted(4);
        assert_eq!(p.allowance(10_999), 0);
        assert_eq!(p.allowance(11_000), 4);
    }

    #[test]
    fn queue_pairs_take_the_bursts_in_turn() {
        let pace = Pace { burst: 2, gap_ns: 100 };
        let mut qps: Vec<Pacer> = (0..3).map(|k| Pacer::share(pace, 3, k)).collect();
        // Who may post at each gap: QP 0, 1, 2, then 0 again.
        let mut turns = Vec::new();
        for t in (0..600).step_by(100) {
            for (k, p) in qps.iter_mut().enumerate() {
                if p.allowance(t) > 0 {
                    p.posted(2);
                    turns.push(k);
                }
            }
        }
        assert_eq!(turns, [0, 1, 2, 0, 1, 2]);
    }
}
