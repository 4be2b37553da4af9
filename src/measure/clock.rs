//! The loops' clock: the CPU's cycle counter where it keeps time ([`ffi::tsc::usable`]),
//! read in a few instructions and no system call, as perftest's `get_cycles`; the
//! monotonic clock elsewhere. Counts become ns by a rate measured once per process
//! against the monotonic clock and refined over each run ([`CycleClock::refine`], called
//! every few thousand operations, off the hot path): under emulation a monotonic read
//! may be a system call costing microseconds, and on hardware it is still ~20 ns a read.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How long the process's first calibration watches the counter: its two monotonic
/// reads cost at most a few µs, so the first rate is within ~0.1 %, until a run's own
/// span refines it.
const FIRST_CALIBRATION: Duration = Duration::from_millis(5);

/// Whether this process times with the counter: [`ffi::tsc::usable`], asked once (it
/// reads sysfs).
pub fn counter_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(ffi::tsc::usable)
}

/// ns per count of the counter, measured once per process over [`FIRST_CALIBRATION`].
fn first_rate() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let (t0, c0) = read_together();
        while t0.elapsed() < FIRST_CALIBRATION {
            std::hint::spin_loop();
        }
        let (t1, c1) = read_together();
        t1.duration_since(t0).as_nanos() as f64 / c1.saturating_sub(c0).max(1) as f64
    })
}

/// The monotonic clock and the counter at one moment: the monotonic read between two
/// counter reads, the narrowest pair of a few tries, and the counter's midpoint. Two
/// plain reads in a row are milliseconds apart when the thread is preempted between
/// them (a loaded host: cargo's test threads), which skewed the first rate by 10 % and
/// more over its 5 ms, and ended a timed run that much early.
fn read_together() -> (Instant, u64) {
    let mut best = (u64::MAX, Instant::now(), 0);
    for _ in 0..8 {
        let before = ffi::tsc::read();
        let t = Instant::now();
        let width = ffi::tsc::read().wrapping_sub(before);
        if width < best.0 {
            best = (width, t, before.wrapping_add(width / 2));
        }
    }
    (best.1, best.2)
}

/// A run's clock: ns since its start, read from the counter when it keeps time.
#[derive(Clone, Copy, Debug)]
pub struct CycleClock {
    /// The start, on the monotonic clock and on the counter.
    origin: (Instant, u64),
    /// ns per count (1.0 without the counter: counts are then ns).
    ns_per_count: f64,
    counter: bool,
}

impl CycleClock {
    /// Starts now, on the counter where it keeps time.
    pub fn start() -> Self {
        Self::on(counter_usable())
    }

    /// Starts now, on the counter when `counter` (tests choose).
    pub fn on(counter: bool) -> Self {
        let ns_per_count = if counter { first_rate() } else { 1.0 };
        CycleClock { origin: (Instant::now(), ffi::tsc::read()), ns_per_count, counter }
    }

    /// Whether it reads the counter.
    pub fn counter(&self) -> bool {
        self.counter
    }

    /// Counts since the start: counter counts, or ns without the counter. The read a
    /// loop makes when it needs time since the start (a window, a peak); a loop that
    /// only takes intervals stores [`stamp`](Self::stamp)s.
    #[inline(always)]
    pub fn counts(&self) -> u64 {
        if self.counter {
            ffi::tsc::read().wrapping_sub(self.origin.1)
        } else {
            self.origin.0.elapsed().as_nanos() as u64
        }
    }

    /// A reading for intervals only: the counter as read, without the start taken off,
    /// or ns since the start without the counter. The difference of two stamps is
    /// counts, as [`to_ns`](Self::to_ns) takes.
    #[inline(always)]
    pub fn stamp(&self) -> u64 {
        if self.counter {
            Self::counter_stamp()
        } else {
            self.origin.0.elapsed().as_nanos() as u64
        }
    }

    /// [`stamp`](Self::stamp) of a clock known to be on the counter: the counter as
    /// read, for a loop that stores a reading per operation and asked
    /// [`counter`](Self::counter) once, before its loop.
    #[inline(always)]
    pub fn counter_stamp() -> u64 {
        ffi::tsc::read()
    }

    /// ns since the start.
    #[inline(always)]
    pub fn ns(&self) -> u64 {
        self.to_ns(self.counts())
    }

    /// `counts` as ns.
    #[inline(always)]
    pub fn to_ns(&self, counts: u64) -> u64 {
        if self.counter {
            (counts as f64 * self.ns_per_count) as u64
        } else {
            counts
        }
    }

    /// `ns` as counts (a deadline the loop compares its counts with).
    pub fn to_counts(&self, ns: u64) -> u64 {
        if self.counter {
            (ns as f64 / self.ns_per_count) as u64
        } else {
            ns
        }
    }

    /// Its start on the monotonic clock: what its stamps count from.
    pub fn origin(&self) -> Instant {
        self.origin.0
    }

    /// ns per count.
    pub fn ns_per_count(&self) -> f64 {
        self.ns_per_count
    }

    /// Measures the rate again over the run so far (one monotonic read): called every
    /// few thousand operations and at the run's end. A span under a millisecond keeps
    /// the process's first rate.
    #[cold]
    pub fn refine(&mut self) {
        if !self.counter {
            return;
        }
        let (ns, counts) = (self.origin.0.elapsed(), ffi::tsc::read());
        if ns >= Duration::from_millis(1) {
            self.ns_per_count =
                ns.as_nanos() as f64 / counts.wrapping_sub(self.origin.1).max(1) as f64;
        }
    }
}

/// Pairs of back-to-back reads whose median difference is a read's cost.
const COST_PAIRS: usize = 2001;

/// A read costing more than this, ns, is a system call or a trap, not a vDSO read or
/// an instruction: each sample carries it.
pub const SLOW_READ_NS: f64 = 200.0;

/// Kernel clock sources whose `clock_gettime` the vDSO answers in user space; any
/// other (`hpet`, `acpi_pm`, `jiffies`) makes each read a system call.
const VDSO_CLOCKSOURCES: [&str; 4] =
    ["tsc", "kvm-clock", "hyperv_clocksource_tsc_page", "arch_sys_counter"];

/// The clock that timed a run's samples, as its header and JSON name it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    /// `tsc` (the cycle counter), `clock_gettime(CLOCK_MONOTONIC)` or
    /// `QueryPerformanceCounter`.
    pub source: String,
    /// What one read cost, ns: the median of back-to-back pairs measured at start.
    pub read_ns: f64,
    /// Linux: the kernel's current clock source (`tsc`, `kvm-clock`, `hpet`).
    pub kernel_clocksource: Option<String>,
    /// Whether a read is a system call (the monotonic clock on a clock source the vDSO
    /// cannot read).
    pub system_call: bool,
    /// Why the samples carry the clock's cost, when they do (a system call, or a read
    /// over [`SLOW_READ_NS`]).
    pub warning: Option<String>,
}

impl ClockInfo {
    /// This process's loops' clock, measured once (a few ms at most).
    pub fn measured() -> ClockInfo {
        static INFO: OnceLock<ClockInfo> = OnceLock::new();
        INFO.get_or_init(|| {
            let counter = counter_usable();
            let clocksource = crate::facts::system::clocksource();
            ClockInfo::judged(counter, clocksource, read_cost_ns(counter))
        })
        .clone()
    }

    /// The clock the loops read (`counter`: the cycle counter), named and judged from
    /// the kernel's clock source and a read's measured cost.
    pub fn judged(counter: bool, kernel_clocksource: Option<String>, read_ns: f64) -> ClockInfo {
        let source = if counter {
            "tsc"
        } else if cfg!(windows) {
            "QueryPerformanceCounter"
        } else {
            "clock_gettime(CLOCK_MONOTONIC)"
        };
        let system_call = !counter
            && kernel_clocksource.as_deref().is_some_and(|c| !VDSO_CLOCKSOURCES.contains(&c));
        let warning = if system_call {
            let c = kernel_clocksource.as_deref().unwrap_or("-");
            Some(format!(
                "each clock read is a system call (kernel clocksource {c}, {read_ns:.0} ns a read): every sample carries it"
            ))
        } else if read_ns > SLOW_READ_NS {
            Some(format!(
                "a clock read costs {read_ns:.0} ns (over {SLOW_READ_NS:.0}): every sample carries it"
            ))
        } else {
            None
        };
        let read_ns = (read_ns * 10.0).round() / 10.0;
        ClockInfo { source: source.into(), read_ns, kernel_clocksource, system_call, warning }
    }
}

/// What one read of the loops' clock costs, ns: the median difference of
/// [`COST_PAIRS`] back-to-back reads.
fn read_cost_ns(counter: bool) -> f64 {
    let mut ns: Vec<f64> = Vec::with_capacity(COST_PAIRS);
    if counter {
        let rate = first_rate();
        for _ in 0..COST_PAIRS {
            let (a, b) = (ffi::tsc::read(), ffi::tsc::read());
            ns.push(b.wrapping_sub(a) as f64 * rate);
        }
    } else {
        for _ in 0..COST_PAIRS {
            let (a, b) = (Instant::now(), Instant::now());
            ns.push(b.duration_since(a).as_nanos() as f64);
        }
    }
    crate::stats::median(&ns).unwrap_or(0.0)
}

/// Elapsed time of a rare check on a hot path (a socket write that came back short):
/// started on the counter where it keeps time, so starting costs no system call.
#[derive(Clone, Copy, Debug)]
pub enum Stopwatch {
    /// Started at this counter read.
    Counts(u64),
    /// Started at this monotonic read (no usable counter).
    Since(Instant),
}

impl Stopwatch {
    /// Starts now.
    #[inline(always)]
    pub fn start() -> Self {
        if counter_usable() {
            Stopwatch::Counts(ffi::tsc::read())
        } else {
            Stopwatch::Since(Instant::now())
        }
    }

    /// Time since the start (on the counter, by the process's rate).
    pub fn elapsed(&self) -> Duration {
        match *self {
            Stopwatch::Counts(c) => {
                let counts = ffi::tsc::read().wrapping_sub(c);
                Duration::from_nanos((counts as f64 * first_rate()) as u64)
            }
            Stopwatch::Since(t) => t.elapsed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_agrees_with_the_monotonic_clock_on_either_source() {
        // Each read is bracketed by two monotonic reads, so a preempted test cannot fail
        // it; the counter's first rate is within a percent, the refined one closer.
        for counter in [false, counter_usable()] {
            let mut clock = CycleClock::on(counter);
            let start = Instant::now();
            for ms in [3u64, 10, 20] {
                std::thread::sleep(Duration::from_millis(ms));
                clock.refine();
                let before = start.elapsed().as_nanos() as f64;
                let got = clock.ns() as f64;
                let after = start.elapsed().as_nanos() as f64;
                assert!(
                    got >= before * 0.98 - 50_000.0 && got <= after * 1.02 + 50_000.0,
                    "counter {counter}: {got} ns, monotonic {before}..{after}"
                );
                let back = clock.to_ns(clock.to_counts(1_000_000_000)) as f64;
                assert!((back - 1e9).abs() < 1e3, "{back}");
            }
        }
    }

    #[test]
    fn a_clock_read_that_is_a_system_call_or_slow_is_warned_of() {
        let vdso = ClockInfo::judged(false, Some("kvm-clock".into()), 25.0);
        assert_eq!((vdso.system_call, vdso.warning.as_deref()), (false, None));
        let hpet = ClockInfo::judged(false, Some("hpet".into()), 1850.0);
        assert!(hpet.system_call, "{hpet:?}");
        assert!(hpet
            .warning
            .as_deref()
            .unwrap()
            .contains("system call (kernel clocksource hpet, 1850 ns"));
        // The counter is read in user space whatever the kernel's clock source.
        let tsc = ClockInfo::judged(true, Some("hpet".into()), 12.0);
        assert_eq!((tsc.source.as_str(), tsc.system_call, tsc.warning), ("tsc", false, None));
        let trapped = ClockInfo::judged(true, Some("tsc".into()), 900.0);
        assert!(!trapped.system_call);
        assert!(trapped.warning.unwrap().contains("costs 900 ns (over 200)"));
    }

    #[test]
    fn the_measured_clock_names_its_source_and_cost() {
        let c = ClockInfo::measured();
        assert_eq!(c.source == "tsc", counter_usable(), "{c:?}");
        assert!(c.read_ns.is_finite() && c.read_ns >= 0.0 && c.read_ns < 1e6, "{c:?}");
    }

    #[test]
    fn a_stopwatch_times_a_sleep_where_the_counter_keeps_time() {
        let w = Stopwatch::start();
        std::thread::sleep(Duration::from_millis(20));
        let d = w.elapsed();
        assert!(d >= Duration::from_millis(19) && d < Duration::from_secs(5), "{d:?}");
    }
}
