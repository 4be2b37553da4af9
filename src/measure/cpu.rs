//! CPU cost of a measured window, on the side that measures it: the whole machine's
//! busy time split as /proc/stat splits it, the process's own CPU time and context
//! switches (getrusage), interrupts and context switches system-wide, and the derived
//! cost per byte. A snapshot is taken at each end of the window; [`cost`] is pure.
//! docs/metrics.md defines each figure.

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The machine-wide counters of /proc/stat, in USER_HZ ticks (the unit cancels out:
/// only ratios of differences are reported).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    /// user + nice.
    pub user: u64,
    /// system.
    pub system: u64,
    /// idle + iowait.
    pub idle: u64,
    /// hardware interrupts.
    pub irq: u64,
    /// software interrupts.
    pub softirq: u64,
    /// stolen by a hypervisor (counted in the total, not as busy).
    pub steal: u64,
    /// Context switches since boot.
    pub context_switches: u64,
    /// Interrupts since boot.
    pub interrupts: u64,
    /// CPUs listed (`cpuN` lines).
    pub cores: u32,
}

impl ProcStat {
    /// Parses the text of /proc/stat; `None` if the aggregate `cpu` line is missing.
    pub fn parse(text: &str) -> Option<ProcStat> {
        let mut s = ProcStat::default();
        let mut seen = false;
        for line in text.lines() {
            let mut f = line.split_ascii_whitespace();
            let Some(key) = f.next() else { continue };
            let nums: Vec<u64> = f.take(8).map(|v| v.parse().unwrap_or(0)).collect();
            let at = |i: usize| nums.get(i).copied().unwrap_or(0);
            match key {
                "cpu" => {
                    seen = true;
                    s.user = at(0) + at(1);
                    s.system = at(2);
                    s.idle = at(3) + at(4);
                    s.irq = at(5);
                    s.softirq = at(6);
                    s.steal = at(7);
                }
                k if k.starts_with("cpu") => s.cores += 1,
                "ctxt" => s.context_switches = at(0),
                "intr" => s.interrupts = at(0),
                _ => {}
            }
        }
        seen.then_some(s)
    }

    fn busy(&self) -> u64 {
        self.user + self.system + self.irq + self.softirq
    }

    fn total(&self) -> u64 {
        self.busy() + self.idle + self.steal
    }
}

/// Counters at one end of a window.
#[derive(Clone, Copy, Debug)]
pub struct CpuSnapshot {
    at: Instant,
    stat: Option<ProcStat>,
    process: Option<ffi::os::ProcessUsage>,
}

impl CpuSnapshot {
    /// Reads the counters now. What cannot be read (no /proc, no getrusage) is left
    /// out of the figures rather than guessed.
    pub fn now() -> CpuSnapshot {
        CpuSnapshot {
            at: Instant::now(),
            stat: std::fs::read_to_string("/proc/stat").ok().as_deref().and_then(ProcStat::parse),
            process: ffi::os::process_usage().ok(),
        }
    }

    /// Seconds from `before` to this snapshot.
    pub fn secs_since(&self, before: &CpuSnapshot) -> f64 {
        self.at.saturating_duration_since(before.at).as_secs_f64()
    }
}

/// The CPU cost of one side over one measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuCost {
    /// Length of the window, seconds.
    pub window_s: f64,
    /// CPUs of the machine.
    pub cores: u32,
    /// Whole machine busy, percent of one CPU (0 … 100 × cores), as `top` counts.
    pub busy_percent: f64,
    /// Of which user (and nice).
    pub user_percent: f64,
    /// Of which system.
    pub system_percent: f64,
    /// Of which hardware interrupts.
    pub irq_percent: f64,
    /// Of which software interrupts (the TCP stack's receive path runs here).
    pub softirq_percent: f64,
    /// This process's CPU time over the window, percent of one CPU.
    pub process_percent: f64,
    /// This process's user time, seconds.
    pub process_user_s: f64,
    /// This process's system time, seconds.
    pub process_system_s: f64,
    /// This process's voluntary context switches (it blocked).
    pub voluntary_switches: u64,
    /// This process's involuntary context switches (it was preempted).
    pub involuntary_switches: u64,
    /// Context switches on the whole machine.
    pub system_switches: u64,
    /// Interrupts on the whole machine.
    pub interrupts: u64,
    /// Process CPU seconds per 10^9 bytes moved (null when nothing was moved).
    pub cpu_s_per_gb: Option<f64>,
    /// Process CPU cycles per byte moved, at `cpu_mhz` (null when unknown).
    pub cycles_per_byte: Option<f64>,
    /// Process CPU microseconds per message.
    pub cpu_us_per_message: Option<f64>,
    /// The clock used for cycles, MHz (/proc/cpuinfo).
    pub cpu_mhz: Option<f64>,
}

/// What a window cost, given the bytes and messages it moved on this side.
pub fn cost(
    before: &CpuSnapshot,
    after: &CpuSnapshot,
    bytes: u64,
    messages: u64,
    cpu_mhz: Option<f64>,
) -> CpuCost {
    let window_s = after.secs_since(before);
    let mut c = CpuCost { window_s, cpu_mhz, ..Default::default() };
    if let (Some(a), Some(b)) = (before.stat, after.stat) {
        let total = b.total().saturating_sub(a.total());
        c.cores = b.cores.max(1);
        let pct = |x: u64, y: u64| {
            if total == 0 {
                0.0
            } else {
                y.saturating_sub(x) as f64 / total as f64 * 100.0 * f64::from(c.cores)
            }
        };
        c.busy_percent = pct(a.busy(), b.busy());
        c.user_percent = pct(a.user, b.user);
        c.system_percent = pct(a.system, b.system);
        c.irq_percent = pct(a.irq, b.irq);
        c.softirq_percent = pct(a.softirq, b.softirq);
        c.system_switches = b.context_switches.saturating_sub(a.context_switches);
        c.interrupts = b.interrupts.saturating_sub(a.interrupts);
    }
    if let (Some(a), Some(b)) = (before.process, after.process) {
        c.process_user_s = b.user.saturating_sub(a.user).as_secs_f64();
        c.process_system_s = b.system.saturating_sub(a.system).as_secs_f64();
        c.voluntary_switches = b.voluntary_switches.saturating_sub(a.voluntary_switches);
        c.involuntary_switches = b.involuntary_switches.saturating_sub(a.involuntary_switches);
        let cpu_s = c.process_user_s + c.process_system_s;
        if window_s > 0.0 {
            c.process_percent = cpu_s / window_s * 100.0;
        }
        if bytes > 0 {
            c.cpu_s_per_gb = Some(cpu_s / (bytes as f64 / 1e9));
            c.cycles_per_byte = cpu_mhz.map(|mhz| cpu_s * mhz * 1e6 / bytes as f64);
        }
        if messages > 0 {
            c.cpu_us_per_message = Some(cpu_s * 1e6 / messages as f64);
        }
    }
    c
}

/// The CPU clock from /proc/cpuinfo (the first `cpu MHz`), if the kernel reports one.
pub fn cpu_mhz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    parse_cpu_mhz(&text)
}

fn parse_cpu_mhz(text: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&mhz: &f64| mhz > 0.0)
}

/// The client's and the server's cost of the same window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSides {
    /// Measured by the client.
    pub client: Option<CpuCost>,
    /// Measured by the server and sent back.
    pub server: Option<CpuCost>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const STAT_A: &str = "cpu  100 10 50 1000 40 5 15 0 0 0\ncpu0 50 5 25 500 20 3 7 0 0 0\ncpu1 50 5 25 500 20 2 8 0 0 0\nintr 5000 1 2 3\nctxt 7000\nbtime 1\n";
    const STAT_B: &str = "cpu  200 10 150 1100 40 15 25 0 0 0\ncpu0 100 5 75 550 20 8 12 0 0 0\ncpu1 100 5 75 550 20 7 13 0 0 0\nintr 5600 1 2 3\nctxt 7300\n";

    fn snap(at: Instant, stat: &str, user_ms: u64, sys_ms: u64, vol: u64) -> CpuSnapshot {
        CpuSnapshot {
            at,
            stat: ProcStat::parse(stat),
            process: Some(ffi::os::ProcessUsage {
                user: Duration::from_millis(user_ms),
                system: Duration::from_millis(sys_ms),
                voluntary_switches: vol,
                involuntary_switches: 1,
            }),
        }
    }

    #[test]
    fn proc_stat_lines_are_read_by_name() {
        let s = ProcStat::parse(STAT_A).unwrap();
        assert_eq!((s.user, s.system, s.idle, s.irq, s.softirq), (110, 50, 1040, 5, 15));
        assert_eq!((s.cores, s.interrupts, s.context_switches), (2, 5000, 7000));
        assert!(ProcStat::parse("intr 1\n").is_none());
    }

    #[test]
    fn window_cost_splits_busy_time_and_derives_cost_per_byte() {
        let t0 = Instant::now();
        let a = snap(t0, STAT_A, 1000, 500, 10);
        let b = snap(t0 + Duration::from_secs(2), STAT_B, 2000, 1500, 40);
        let c = cost(&a, &b, 4_000_000_000, 1000, Some(2000.0));
        // Deltas: user 100, system 100, idle 100, irq 10, softirq 10 → total 320 ticks
        // over 2 CPUs; busy 220/320 of 200 %.
        assert_eq!(c.cores, 2);
        assert!((c.busy_percent - 137.5).abs() < 1e-9, "{}", c.busy_percent);
        assert!((c.user_percent - 62.5).abs() < 1e-9);
        assert!((c.irq_percent - 6.25).abs() < 1e-9);
        assert!(
            (c.user_percent + c.system_percent + c.irq_percent + c.softirq_percent
                - c.busy_percent)
                .abs()
                < 1e-9
        );
        assert_eq!((c.interrupts, c.system_switches, c.voluntary_switches), (600, 300, 30));
        // 2 s of process CPU in a 2 s window: one full CPU; 2 s for 4 GB.
        assert!((c.process_percent - 100.0).abs() < 1e-9);
        assert_eq!(c.cpu_s_per_gb, Some(0.5));
        assert_eq!(c.cycles_per_byte, Some(1.0)); // 2 s × 2 GHz / 4e9 B
        assert_eq!(c.cpu_us_per_message, Some(2000.0));
        let idle = cost(&a, &b, 0, 0, None);
        assert_eq!(
            (idle.cpu_s_per_gb, idle.cycles_per_byte, idle.cpu_us_per_message),
            (None, None, None)
        );
    }

    #[test]
    fn a_real_window_reads_this_machine() {
        let a = CpuSnapshot::now();
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(60) {
            std::hint::black_box(start.elapsed());
        }
        let b = CpuSnapshot::now();
        let c = cost(&a, &b, 1 << 20, 1, cpu_mhz());
        assert!(c.cores >= 1);
        assert!(c.busy_percent >= 0.0 && c.busy_percent <= 100.0 * f64::from(c.cores) + 1e-6);
        assert!(c.process_percent > 10.0, "a spinning thread used {} %", c.process_percent);
        assert!(parse_cpu_mhz("cpu MHz\t\t: 2596.128\n") == Some(2596.128));
    }
}
