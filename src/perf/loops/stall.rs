//! The stall watch: every loop's waits counted in laps of polls, the clock read once a
//! lap, a [`Pulse`] beaten, the thread's end for tests kept, and a loop that stops
//! progressing for its timeout given up with [`LoopFailure::Stalled`].

use std::time::{Duration, Instant};

use super::{tests_end, LoopError, LoopFailure, NoPulse, Pulse};
use crate::error::RunLimit;
use crate::transport::Connection;

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
    pub(super) pulse: P,
    /// [`end_tests_by`]'s end, read once as the loop starts.
    end: Option<(Instant, RunLimit)>,
}

impl Stall {
    pub(super) fn new(timeout: Duration) -> Self {
        Stall::beating(timeout, NoPulse)
    }
}

impl<P: Pulse> Stall<P> {
    /// The first lap is one poll long: a loop beats as it starts.
    pub(super) fn beating(timeout: Duration, pulse: P) -> Self {
        let now = Instant::now();
        let end = tests_end();
        Stall { last: now, timeout, left: 1, lap: 1, lap_start: now, progress: false, pulse, end }
    }
    #[inline]
    pub(super) fn progressed(&mut self) -> Result<(), LoopError> {
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
    pub(super) fn idle(&mut self, waiting_for: &'static str) -> Result<(), LoopError> {
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
    pub(super) fn spin(
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
    /// Polls `conn` into `wcs` until something completes (how many: progress, as
    /// [`Stall::progressed`] counts it), or until `stop` says to end the wait (0). Polling,
    /// `stop` is asked every [`STOP_EVERY_LAPS`] laps, and a poll that found nothing pays
    /// the lap's countdown only; in event mode, after each wake-up that brought nothing.
    #[inline(always)]
    pub(super) fn poll<C: Connection>(
        &mut self,
        conn: &mut C,
        wcs: &mut [C::Completion],
        events: bool,
        waiting_for: &'static str,
        mut stop: impl FnMut() -> bool,
    ) -> Result<usize, LoopError> {
        if events {
            loop {
                let got = poll_or_wait(conn, wcs, true, self, waiting_for)?;
                if got > 0 || stop() {
                    return Ok(got);
                }
            }
        }
        // The lap's countdown stays in a register, as the spin's does: an empty poll
        // pays a decrement and a test.
        let (mut left, mut laps) = (self.left, 0u32);
        loop {
            let got = conn.poll(wcs)?;
            if got > 0 {
                self.progressed_with(left)?;
                return Ok(got);
            }
            left -= 1;
            if left == 0 {
                // The lap's last idle poll, counted as `idle` counts it: the lap ends.
                self.left = 1;
                self.idle(waiting_for)?;
                left = self.left;
                laps = laps.wrapping_add(1);
                if laps % STOP_EVERY_LAPS == 0 && stop() {
                    return Ok(0);
                }
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
        self.beat(now)?;
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
    /// Beats the pulse; the loop ends when it says the peer is gone.
    fn beat(&mut self, now: Instant) -> Result<(), LoopError> {
        if self.pulse.alive(now) {
            Ok(())
        } else {
            Err(LoopFailure::PeerGone.into())
        }
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
            self.beat(now)?;
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
        stall.beat(Instant::now())?;
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::super::{end_tests_by, limit_tests};
    use super::*;
    use crate::transport::tcp::tests::pair;
    use crate::transport::{Completion, Op, Polled, WorkRequest};

    /// Counts its beats.
    struct Beats(u32);

    impl Pulse for Beats {
        fn alive(&mut self, _: Instant) -> bool {
            self.0 += 1;
            true
        }
    }

    /// Says the peer is gone from its `after`th beat on.
    struct GoneAfter(u32);

    impl Pulse for GoneAfter {
        fn alive(&mut self, _: Instant) -> bool {
            self.0 = self.0.saturating_sub(1);
            self.0 > 0
        }
    }

    #[test]
    fn a_pulse_that_finds_the_peer_gone_ends_the_loop_at_that_lap() {
        // Idle polls: the lap that beats the news ends the loop, long before its timeout.
        let mut stall = Stall::beating(Duration::from_secs(60), GoneAfter(2));
        stall.idle("x").unwrap(); // (the first lap, one poll: beats, the peer is there)
        let e = (0..=MAX_LAP).try_for_each(|_| stall.idle("x")).unwrap_err();
        assert!(matches!(e.failure(), LoopFailure::PeerGone), "{e}");
        assert_eq!(e.to_string(), "the peer closed the control connection mid-run");
        // A loop that progresses at every poll ends the same way.
        let mut stall = Stall::beating(Duration::from_secs(60), GoneAfter(1));
        let e = stall.progressed().unwrap_err();
        assert!(matches!(e.failure(), LoopFailure::PeerGone), "{e}");
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
    fn a_completion_poll_counts_empty_polls_as_idle_and_asks_to_stop_every_16_laps() {
        let (mut c, mut s) = pair(1);
        let (c, s) = (&mut c[0], &mut s[0]);
        let mut wcs = [Completion::default(); 8];
        // Nothing posted: every poll finds nothing. Told to stop at the 32nd lap, it
        // ends with nothing (0), having asked twice, and beat at every lap.
        let mut asked = 0u32;
        let mut stall = Stall::beating(Duration::from_secs(60), Beats(0));
        let got = stall.poll(c, &mut wcs, false, "x", || {
            asked += 1;
            asked == 2
        });
        assert_eq!((got.unwrap(), asked, stall.pulse.0), (0, 2, 2 * STOP_EVERY_LAPS));
        // A message that came: its receive's completion, counted as progress.
        s.post_recv(7, 0, 4).unwrap();
        c.local_mut()[..4].copy_from_slice(b"ping");
        c.post(&WorkRequest {
            wr_id: 1,
            op: Op::Send,
            local_offset: 0,
            len: 4,
            remote_offset: 0,
            signaled: false,
            inline: false,
        })
        .unwrap();
        let mut stall = Stall::new(Duration::from_secs(60));
        let got = stall.poll(s, &mut wcs, false, "the peer's message", || true).unwrap();
        assert_eq!((got, wcs[0].wr_id(), wcs[0].is_receive()), (1, 7, true));
        assert_eq!(&s.local()[..4], b"ping");
        assert!(stall.progress, "a completion is progress");
        // Nothing ever comes and nothing says stop: it stalls past its timeout, by name.
        let mut stall = Stall::new(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        let e = stall.poll(c, &mut wcs, false, "the peer's message", || false).unwrap_err();
        assert!(
            matches!(e.failure(), LoopFailure::Stalled { waiting_for: "the peer's message", .. }),
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
}
