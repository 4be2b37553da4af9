//! CPU cost of a measured window, on the side that measures it: the whole machine's
//! busy time split user / system / interrupt / soft-interrupt (Linux: /proc/stat;
//! Windows: user / privileged / interrupt / DPC from `GetSystemTimes` and
//! `NtQuerySystemInformation`), the process's own CPU time, context switches and
//! resident memory, interrupts and context switches system-wide, and the derived
//! cost per byte. A snapshot is taken at each end of the window; [`cost`] is pure.
//! docs/metrics.md defines each figure and what differs on Windows.

use std::time::{Duration, Instant};

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
}

/// The machine's counters at one end of a window, as the platform keeps them.
#[derive(Clone, Copy, Debug)]
enum Machine {
    /// /proc/stat.
    Linux(ProcStat),
    /// Windows' own (ffi::os::machine_counters).
    Windows(ffi::os::MachineCounters),
}

/// What the machine did between two snapshots: busy time split four ways, in one
/// unit (ticks or nanoseconds: only ratios are reported), and the event counts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct MachineDelta {
    user: u64,
    system: u64,
    irq: u64,
    softirq: u64,
    idle: u64,
    steal: u64,
    cores: u32,
    switches: Option<u64>,
    interrupts: Option<u64>,
    dpcs: Option<u64>,
    nonpaged_pool_bytes: Option<u64>,
}

impl MachineDelta {
    fn between(a: &Machine, b: &Machine) -> Option<MachineDelta> {
        match (a, b) {
            (Machine::Linux(a), Machine::Linux(b)) => Some(MachineDelta {
                user: b.user.saturating_sub(a.user),
                system: b.system.saturating_sub(a.system),
                irq: b.irq.saturating_sub(a.irq),
                softirq: b.softirq.saturating_sub(a.softirq),
                idle: b.idle.saturating_sub(a.idle),
                steal: b.steal.saturating_sub(a.steal),
                cores: b.cores,
                switches: Some(b.context_switches.saturating_sub(a.context_switches)),
                interrupts: Some(b.interrupts.saturating_sub(a.interrupts)),
                dpcs: None,
                nonpaged_pool_bytes: None,
            }),
            (Machine::Windows(a), Machine::Windows(b)) => Some(windows_delta(a, b)),
            _ => None,
        }
    }

    fn busy(&self) -> u64 {
        self.user + self.system + self.irq + self.softirq
    }

    fn total(&self) -> u64 {
        self.busy() + self.idle + self.steal
    }
}

fn windows_delta(a: &ffi::os::MachineCounters, b: &ffi::os::MachineCounters) -> MachineDelta {
    let ns = |x: Duration, y: Duration| {
        u64::try_from(y.saturating_sub(x).as_nanos()).unwrap_or(u64::MAX)
    };
    let (idle, dpc, interrupt) =
        (ns(a.idle, b.idle), ns(a.dpc, b.dpc), ns(a.interrupt, b.interrupt));
    // Windows' kernel time includes idle, DPC and interrupt time: what is left is
    // privileged time proper (perfmon's "% Privileged Time" keeps DPC and interrupt
    // time in; here they are figures of their own, as on Linux).
    let privileged = ns(a.kernel, b.kernel).saturating_sub(idle + dpc + interrupt);
    // Windows' event counters are 32-bit: the difference is right across one wrap.
    let count = |x: u32, y: u32| u64::from(y.wrapping_sub(x));
    MachineDelta {
        user: ns(a.user, b.user),
        system: privileged,
        irq: interrupt,
        softirq: dpc,
        idle,
        steal: 0,
        cores: b.processors,
        switches: a.context_switches.zip(b.context_switches).map(|(x, y)| count(x, y)),
        interrupts: a.interrupts.zip(b.interrupts).map(|(x, y)| count(x, y)),
        dpcs: a.dpcs.zip(b.dpcs).map(|(x, y)| count(x, y)),
        nonpaged_pool_bytes: b.nonpaged_pool_bytes,
    }
}

/// Where a side's CPU figures came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterSource {
    /// /proc/stat, getrusage and /proc/self/statm.
    Linux,
    /// GetSystemTimes, NtQuerySystemInformation, GetPerformanceInfo, GetProcessTimes
    /// and GetProcessMemoryInfo.
    Windows,
}

/// Counters at one end of a window.
#[derive(Clone, Copy, Debug)]
pub struct CpuSnapshot {
    at: Instant,
    machine: Option<Machine>,
    process: Option<ffi::os::ProcessUsage>,
}

impl CpuSnapshot {
    /// Reads the counters now. What cannot be read is left out of the figures rather
    /// than guessed. The Windows build never reads /proc: under wine that would be the
    /// Linux host's.
    pub fn now() -> CpuSnapshot {
        let machine = if cfg!(windows) {
            ffi::os::machine_counters().ok().map(Machine::Windows)
        } else {
            let text = crate::facts::system::proc_stat();
            text.as_deref().and_then(ProcStat::parse).map(Machine::Linux)
        };
        CpuSnapshot { at: Instant::now(), machine, process: ffi::os::process_usage().ok() }
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
    /// Of which system (Windows: privileged, less interrupt and DPC time).
    pub system_percent: f64,
    /// Of which hardware interrupts (Windows: interrupt time).
    pub irq_percent: f64,
    /// Of which software interrupts, where the TCP stack's receive path runs
    /// (Windows: DPC time, its deferred half of interrupt handling).
    pub softirq_percent: f64,
    /// This process's CPU time over the window, percent of one CPU.
    pub process_percent: f64,
    /// This process's user time, seconds.
    pub process_user_s: f64,
    /// This process's system (Windows: privileged) time, seconds.
    pub process_system_s: f64,
    /// This process's voluntary context switches (it blocked); Linux only.
    pub voluntary_switches: Option<u64>,
    /// This process's involuntary context switches (it was preempted); Linux only.
    pub involuntary_switches: Option<u64>,
    /// Context switches on the whole machine.
    pub system_switches: Option<u64>,
    /// Interrupts on the whole machine (null where the platform gives none: wine).
    #[serde(default)]
    pub interrupts: Option<u64>,
    /// DPCs queued on the whole machine (Windows only).
    #[serde(default)]
    pub dpcs: Option<u64>,
    /// Process CPU seconds per 10^9 bytes moved (null when nothing was moved).
    pub cpu_s_per_gb: Option<f64>,
    /// Process CPU cycles per byte moved, at `cpu_mhz` (null when unknown).
    pub cycles_per_byte: Option<f64>,
    /// Process CPU microseconds per message.
    pub cpu_us_per_message: Option<f64>,
    /// The clock used for cycles, MHz (Linux: /proc/cpuinfo; Windows: the registry's
    /// `~MHz`).
    pub cpu_mhz: Option<f64>,
    /// This process's resident memory at the window's end, bytes (Linux: RSS;
    /// Windows: working set).
    #[serde(default)]
    pub resident_bytes: Option<u64>,
    /// The most it had resident at once so far (Linux: peak RSS; Windows: peak
    /// working set).
    #[serde(default)]
    pub peak_resident_bytes: Option<u64>,
    /// Non-paged pool in use on the machine at the window's end, bytes (Windows only).
    #[serde(default)]
    pub nonpaged_pool_bytes: Option<u64>,
    /// Where these figures came from (null: none could be read).
    #[serde(default)]
    pub source: Option<CounterSource>,
    /// The window held fewer than [`RELIABLE_TICKS`] ticks of the clock the counters
    /// advance by: each percentage may be off by a percent or more (noise, not cost).
    #[serde(default)]
    pub unreliable: bool,
}

/// The fewest clock ticks a window must hold for its percentages to be within 1 %.
pub const RELIABLE_TICKS: f64 = 100.0;

impl CounterSource {
    /// The step the counters advance by, seconds: Linux's USER_HZ (100 Hz; the
    /// process times too), Windows' default timer (64 Hz).
    pub fn tick_s(self) -> f64 {
        match self {
            CounterSource::Linux => 0.01,
            CounterSource::Windows => 0.015_625,
        }
    }
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
    let machine = before.machine.zip(after.machine);
    if let Some(d) = machine.and_then(|(a, b)| MachineDelta::between(&a, &b)) {
        let total = d.total();
        c.cores = d.cores.max(1);
        let pct = |x: u64| {
            if total == 0 {
                0.0
            } else {
                x as f64 / total as f64 * 100.0 * f64::from(c.cores)
            }
        };
        c.busy_percent = pct(d.busy());
        c.user_percent = pct(d.user);
        c.system_percent = pct(d.system);
        c.irq_percent = pct(d.irq);
        c.softirq_percent = pct(d.softirq);
        c.system_switches = d.switches;
        c.interrupts = d.interrupts;
        c.dpcs = d.dpcs;
        c.nonpaged_pool_bytes = d.nonpaged_pool_bytes;
    }
    c.source = match after.machine {
        Some(Machine::Windows(_)) => Some(CounterSource::Windows),
        Some(Machine::Linux(_)) => Some(CounterSource::Linux),
        None => None,
    };
    c.unreliable = c.source.is_some_and(|s| window_s < RELIABLE_TICKS * s.tick_s());
    if let (Some(a), Some(b)) = (before.process, after.process) {
        c.process_user_s = b.user.saturating_sub(a.user).as_secs_f64();
        c.process_system_s = b.system.saturating_sub(a.system).as_secs_f64();
        let delta = |x: Option<u64>, y: Option<u64>| x.zip(y).map(|(x, y)| y.saturating_sub(x));
        c.voluntary_switches = delta(a.voluntary_switches, b.voluntary_switches);
        c.involuntary_switches = delta(a.involuntary_switches, b.involuntary_switches);
        c.resident_bytes = b.resident_bytes;
        c.peak_resident_bytes = b.peak_resident_bytes;
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

/// The CPU clock: on Linux /proc/cpuinfo's first `cpu MHz`, if the kernel reports one;
/// on Windows the registry's `~MHz` of the first processor.
pub fn cpu_mhz() -> Option<f64> {
    if cfg!(windows) {
        return ffi::os::cpu_mhz();
    }
    parse_cpu_mhz(&crate::facts::system::cpuinfo()?)
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

impl CpuSides {
    /// The client's (`client`) or the server's.
    pub fn side(&self, client: bool) -> Option<CpuCost> {
        if client {
            self.client
        } else {
            self.server
        }
    }

    /// The client's (`client`) or the server's, to fill.
    pub fn side_mut(&mut self, client: bool) -> &mut Option<CpuCost> {
        if client {
            &mut self.client
        } else {
            &mut self.server
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  100 10 50 1000 40 5 15 0 0 0\ncpu0 50 5 25 500 20 3 7 0 0 0\ncpu1 50 5 25 500 20 2 8 0 0 0\nintr 5000 1 2 3\nctxt 7000\nbtime 1\n";
    const STAT_B: &str = "cpu  200 10 150 1100 40 15 25 0 0 0\ncpu0 100 5 75 550 20 8 12 0 0 0\ncpu1 100 5 75 550 20 7 13 0 0 0\nintr 5600 1 2 3\nctxt 7300\n";

    fn snap(at: Instant, stat: &str, user_ms: u64, sys_ms: u64, vol: u64) -> CpuSnapshot {
        CpuSnapshot {
            at,
            machine: ProcStat::parse(stat).map(Machine::Linux),
            process: Some(ffi::os::ProcessUsage {
                user: Duration::from_millis(user_ms),
                system: Duration::from_millis(sys_ms),
                voluntary_switches: Some(vol),
                involuntary_switches: Some(1),
                resident_bytes: Some(3 << 20),
                peak_resident_bytes: Some(5 << 20),
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
        assert_eq!(
            (c.interrupts, c.system_switches, c.voluntary_switches),
            (Some(600), Some(300), Some(30))
        );
        assert_eq!((c.resident_bytes, c.peak_resident_bytes), (Some(3 << 20), Some(5 << 20)));
        assert_eq!(
            (c.source, c.dpcs, c.nonpaged_pool_bytes),
            (Some(CounterSource::Linux), None, None)
        );
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

    fn windows(at: Instant, ms: [u64; 5], counts: [u32; 3]) -> CpuSnapshot {
        let [idle, kernel, user, dpc, interrupt] = ms.map(Duration::from_millis);
        let [interrupts, dpcs, switches] = counts;
        CpuSnapshot {
            at,
            machine: Some(Machine::Windows(ffi::os::MachineCounters {
                idle,
                kernel,
                user,
                dpc,
                interrupt,
                interrupts: Some(interrupts),
                dpcs: Some(dpcs),
                context_switches: Some(switches),
                nonpaged_pool_bytes: Some(200 << 20),
                processors: 4,
            })),
            process: Some(ffi::os::ProcessUsage {
                user: Duration::from_millis(300),
                system: Duration::from_millis(100),
                resident_bytes: Some(9 << 20),
                peak_resident_bytes: Some(12 << 20),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn windows_kernel_time_is_split_into_privileged_interrupt_and_dpc() {
        let t0 = Instant::now();
        // Over 1 s of 4 processors (4000 ms): idle 2000, user 1000, kernel 3000 of
        // which idle 2000, DPC 300 and interrupt 100, so privileged 600.
        let a =
            windows(t0, [10_000, 20_000, 5_000, 1_000, 500], [u32::MAX - 99, 50, 4_000_000_000]);
        let b = windows(
            t0 + Duration::from_secs(1),
            [12_000, 23_000, 6_000, 1_300, 600],
            [400, 1_050, 4_000_012_345],
        );
        let c = cost(&a, &b, 1_000_000_000, 0, Some(3000.0));
        assert_eq!(c.cores, 4);
        let near = |x: f64, y: f64| (x - y).abs() < 1e-9;
        assert!(near(c.busy_percent, 200.0), "{c:?}");
        assert!(near(c.user_percent, 100.0) && near(c.system_percent, 60.0), "{c:?}");
        assert!(near(c.irq_percent, 10.0) && near(c.softirq_percent, 30.0), "{c:?}");
        // The interrupt counter wrapped: 100 before the wrap, 400 after.
        assert_eq!(
            (c.interrupts, c.dpcs, c.system_switches),
            (Some(500), Some(1000), Some(12_345))
        );
        assert_eq!((c.voluntary_switches, c.involuntary_switches), (None, None));
        assert_eq!(c.source, Some(CounterSource::Windows));
        assert_eq!(c.nonpaged_pool_bytes, Some(200 << 20));
        assert_eq!(c.peak_resident_bytes, Some(12 << 20));
        // A snapshot of each platform's counters measures nothing of the machine.
        let linux = snap(t0, STAT_A, 0, 0, 0);
        assert_eq!(cost(&linux, &b, 0, 0, None).cores, 0);
    }

    #[test]
    fn a_real_window_reads_this_machine() {
        // Spin until the process's own counters show 30 ms of CPU, not for a wall-clock
        // span: ci/test runs the Windows tests at nice 10 beside the lab's busy guests,
        // where 60 ms of wall time once held under 10 % of a CPU. Counters that
        // never move fail at the deadline.
        let used = || ffi::os::process_usage().map(|u| u.user + u.system).unwrap_or_default();
        let a = CpuSnapshot::now();
        let (start, from) = (Instant::now(), used());
        while used().saturating_sub(from) < Duration::from_millis(30)
            && start.elapsed() < Duration::from_secs(60)
        {
            std::hint::black_box(start.elapsed());
        }
        let b = CpuSnapshot::now();
        let c = cost(&a, &b, 1 << 20, 1, cpu_mhz());
        assert!(c.cores >= 1);
        assert!(c.busy_percent >= 0.0 && c.busy_percent <= 100.0 * f64::from(c.cores) + 1e-6);
        let cpu_s = c.process_user_s + c.process_system_s;
        assert!(cpu_s >= 0.030, "a spinning thread's process used {cpu_s} s of CPU: {c:?}");
        assert!((c.process_percent - cpu_s / c.window_s * 100.0).abs() < 1e-6, "{c:?}");
        assert_eq!(c.cpu_s_per_gb, Some(cpu_s / ((1 << 20) as f64 / 1e9)));
        // Each platform's own counters: the Windows build (run under wine in ci/test)
        // must not read the Linux host's /proc.
        let own = if cfg!(windows) { CounterSource::Windows } else { CounterSource::Linux };
        assert_eq!(c.source, Some(own));
        assert!(c.peak_resident_bytes.unwrap() >= c.resident_bytes.unwrap(), "{c:?}");
        assert!(parse_cpu_mhz("cpu MHz\t\t: 2596.128\n") == Some(2596.128));
    }
}
