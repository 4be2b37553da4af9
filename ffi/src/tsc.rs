//! The CPU's time-stamp counter, where it ticks at one rate on every core whatever the
//! power state (x86-64's invariant TSC): a clock read of a few instructions, as
//! perftest's `get_cycles`. Counts, not time: the caller calibrates them against the
//! monotonic clock.

/// Whether counts from [`read`] convert to time by one factor, on any core: on Linux,
/// when the kernel trusts the TSC as a clock source (it checked the counter's rate and
/// its agreement across cores at boot, or was told to, and has not since marked it
/// unstable, which takes it off `available_clocksource`), whether or not it is the
/// current one: a boot that picked another source (HPET under emulation, whose reads
/// are system calls) still has a steady counter; elsewhere, when the CPU says it is
/// [`invariant`]. Never off x86-64.
pub fn usable() -> bool {
    if cfg!(not(target_arch = "x86_64")) {
        return false;
    }
    if cfg!(target_os = "linux") {
        let dir = "/sys/devices/system/clocksource/clocksource0";
        let listed = |file: &str| {
            std::fs::read_to_string(format!("{dir}/{file}"))
                .is_ok_and(|s| s.split_whitespace().any(|c| c == "tsc"))
        };
        return listed("current_clocksource") || listed("available_clocksource");
    }
    invariant()
}

/// Whether this CPU's TSC is invariant (CPUID 0x8000_0007, EDX bit 8): the same rate
/// on every core and in every power state.
#[cfg(target_arch = "x86_64")]
pub fn invariant() -> bool {
    use std::arch::x86_64::__cpuid;
    // The highest extended leaf first: past it CPUID answers with another leaf's values.
    __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
}

/// Whether this CPU's TSC is invariant: never, off x86-64 (no counter read here).
#[cfg(not(target_arch = "x86_64"))]
pub fn invariant() -> bool {
    false
}

/// Reads the time-stamp counter. Meaningful as time only where [`usable`].
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn read() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU and reads a register; user-space
    // access is only disabled by CR4.TSD, which no mainstream kernel sets.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// Reads the time-stamp counter: 0 off x86-64, where [`usable`] is false.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub fn read() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    // The counter itself moves on any x86-64 (a VM's and wine's too), whether or not
    // the kernel trusts it as its clocksource (`usable`).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_counter_moves_forward() {
        let a = read();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = read();
        assert!(b > a, "{a} then {b}");
    }
}
