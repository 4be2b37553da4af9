//! The progress bar of runs made of many points (`compare`, `qualify`) or sizes (a test's
//! `-a` sweep, a `-D` run): the point running, how many are done, the rate and the time
//! left. Drawn on stderr only when it is a terminal and `--quiet` is not given, so logs
//! and pipes see none of it.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `total` points; cleared when dropped, whatever ended the run.
pub struct Progress {
    /// None when hidden: a hidden indicatif bar still parses its default template
    /// (~25 KB of code run once, resident in every test client's memory).
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar of `total` points, hidden with `quiet` or when stderr is not a terminal.
    pub fn new(total: usize, quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Self { bar: None };
        }
        let bar = ProgressBar::new(total as u64);
        // The point's name last, cut to the terminal's width.
        let style =
            ProgressStyle::with_template("[{bar:20}] {pos}/{len} {rate} ~{eta} left  {wide_msg}")
                .map(|s| s.progress_chars("#>.").with_key("rate", rate))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        // Points take seconds: redraw on a clock so the rate and time left move.
        bar.enable_steady_tick(Duration::from_millis(500));
        Self { bar: Some(bar) }
    }

    /// A bar over a run planned to last `planned` (a `-D` run: its sizes × seconds): the
    /// bar and the seconds gone and left move with the clock, not with the sizes done.
    /// Hidden as [`Progress::new`]'s.
    pub fn timed(planned: Duration, quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Self { bar: None };
        }
        let bar = ProgressBar::new(1);
        let clock = move |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&clock_text(state.elapsed(), planned));
        };
        let style = ProgressStyle::with_template("{clock}  {wide_msg}")
            .map(|s| s.with_key("clock", clock))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(500));
        Self { bar: Some(bar) }
    }

    /// The point now running, e.g. `rdma_write_bw 64K`.
    pub fn running(&self, point: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(point.to_string());
        }
    }

    /// One more point done.
    pub fn done_one(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    /// Whether the bar is drawn (for tests and for callers that print beside it).
    pub fn is_drawn(&self) -> bool {
        self.bar.as_ref().is_some_and(|bar| !bar.is_hidden())
    }
}

/// Points take from milliseconds to minutes: a rate per second, or seconds per point.
fn rate(state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write) {
    let _ = w.write_str(&rate_text(state.pos(), state.per_sec()));
}

fn rate_text(done: u64, per_sec: f64) -> String {
    match per_sec {
        _ if done == 0 || !per_sec.is_finite() || per_sec <= 0.0 => "-".into(),
        r if r >= 1.0 => format!("{r:.1}/s"),
        r => format!("{:.1} s each", 1.0 / r),
    }
}

/// A timed run's bar and times: `[#####>..............] 5 s of 20 s, ~15 s left`; past
/// its plan (the results' exchange, a slow peer), `ending`.
fn clock_text(elapsed: Duration, planned: Duration) -> String {
    const WIDTH: usize = 20;
    let planned_s = planned.as_secs_f64().max(1e-9);
    let share = (elapsed.as_secs_f64() / planned_s).min(1.0);
    let filled = (share * WIDTH as f64) as usize;
    let bar: String = (0..WIDTH)
        .map(|i| match i.cmp(&filled) {
            std::cmp::Ordering::Less => '#',
            std::cmp::Ordering::Equal => '>',
            std::cmp::Ordering::Greater => '.',
        })
        .collect();
    let (gone, all) = (elapsed.as_secs(), planned.as_secs());
    let left = planned.saturating_sub(elapsed);
    let tail = if left.is_zero() {
        "ending".to_string()
    } else {
        format!("~{} left", humantime_secs(left.as_secs_f64().ceil() as u64))
    };
    format!("[{bar}] {} of {}, {tail}", humantime_secs(gone), humantime_secs(all))
}

/// Seconds as `42 s`, `3 min 20 s`, `2 h 5 min`: a soak's hours read as hours.
fn humantime_secs(s: u64) -> String {
    match s {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_reads_per_second_or_seconds_per_point() {
        assert_eq!(rate_text(0, 5.0), "-");
        assert_eq!(rate_text(3, 185.337), "185.3/s");
        assert_eq!(rate_text(3, 0.25), "4.0 s each");
        assert_eq!(rate_text(3, f64::INFINITY), "-");
    }

    #[test]
    fn a_timed_run_shows_its_seconds_gone_and_left() {
        let secs = Duration::from_secs;
        assert_eq!(clock_text(secs(0), secs(20)), "[>...................] 0 s of 20 s, ~20 s left");
        assert_eq!(clock_text(secs(5), secs(20)), "[#####>..............] 5 s of 20 s, ~15 s left");
        assert_eq!(
            clock_text(Duration::from_millis(19_400), secs(20)),
            "[###################>] 19 s of 20 s, ~1 s left"
        );
        assert_eq!(clock_text(secs(21), secs(20)), "[####################] 21 s of 20 s, ending");
        assert_eq!(
            clock_text(secs(200), secs(7_500)),
            "[>...................] 3 min 20 s of 2 h 5 min, ~2 h 1 min left"
        );
        assert!(!Progress::timed(secs(20), true).is_drawn());
    }

    #[test]
    fn quiet_or_no_terminal_draws_nothing() {
        let p = Progress::new(10, true);
        assert!(!p.is_drawn());
        p.running("x");
        p.done_one();
        // cargo test's stderr is captured (a pipe), never a terminal.
        if !std::io::stderr().is_terminal() {
            assert!(!Progress::new(10, false).is_drawn());
        }
    }
}
