//! The Windows side of [`super`]: the counters NTttcp and a Windows administrator read
//! (machine busy time split user / privileged / interrupt / DPC, interrupts, DPCs and
//! context switches system-wide, non-paged pool; the process's CPU time and working
//! set), the CPU clock, and pinning a thread across processor groups.
//!
//! Where the structures are not in the Win32 headers proper, their layout is
//! mingw-w64's `winternl.h` (64-bit Windows; the tests below check the sizes against
//! what mingw's compiler gives for its own declarations).

use std::ffi::c_void;
use std::io;
use std::time::Duration;

use super::{MachineCounters, ProcessUsage};

type Handle = *mut c_void;
type Bool = i32;

/// `FILETIME`: 100-ns units in two halves.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FileTime {
    low: u32,
    high: u32,
}

impl FileTime {
    fn ticks(self) -> u64 {
        (u64::from(self.high) << 32) | u64::from(self.low)
    }
}

/// `PROCESS_MEMORY_COUNTERS` (psapi.h).
#[repr(C)]
#[derive(Default)]
pub(crate) struct ProcessMemoryCounters {
    pub(crate) cb: u32,
    pub(crate) page_fault_count: u32,
    pub(crate) peak_working_set_size: usize,
    pub(crate) working_set_size: usize,
    pub(crate) quota_peak_paged_pool_usage: usize,
    pub(crate) quota_paged_pool_usage: usize,
    pub(crate) quota_peak_non_paged_pool_usage: usize,
    pub(crate) quota_non_paged_pool_usage: usize,
    pub(crate) pagefile_usage: usize,
    pub(crate) peak_pagefile_usage: usize,
}

/// `PERFORMANCE_INFORMATION` (psapi.h); the sizes are in pages.
#[repr(C)]
#[derive(Default)]
pub(crate) struct PerformanceInformation {
    pub(crate) cb: u32,
    pub(crate) commit_total: usize,
    pub(crate) commit_limit: usize,
    pub(crate) commit_peak: usize,
    pub(crate) physical_total: usize,
    pub(crate) physical_available: usize,
    pub(crate) system_cache: usize,
    pub(crate) kernel_total: usize,
    pub(crate) kernel_paged: usize,
    pub(crate) kernel_nonpaged: usize,
    pub(crate) page_size: usize,
    pub(crate) handle_count: u32,
    pub(crate) process_count: u32,
    pub(crate) thread_count: u32,
}

/// `SYSTEM_PROCESSOR_PERFORMANCE_INFORMATION`, one per processor: times in 100 ns
/// (`KernelTime` includes idle, DPC and interrupt time), then the interrupt count
/// (mingw's `Reserved1[2]` and `Reserved2`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ProcessorPerformance {
    pub(crate) idle_time: i64,
    pub(crate) kernel_time: i64,
    pub(crate) user_time: i64,
    pub(crate) dpc_time: i64,
    pub(crate) interrupt_time: i64,
    pub(crate) interrupt_count: u32,
}

/// `SYSTEM_INTERRUPT_INFORMATION`, one per processor (mingw's `Reserved1[24]`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ProcessorInterrupts {
    pub(crate) context_switches: u32,
    pub(crate) dpc_count: u32,
    pub(crate) dpc_rate: u32,
    pub(crate) time_increment: u32,
    pub(crate) dpc_bypass_count: u32,
    pub(crate) apc_bypass_count: u32,
}

/// `GROUP_AFFINITY`.
#[repr(C)]
struct GroupAffinity {
    mask: usize,
    group: u16,
    reserved: [u16; 3],
}

const SYSTEM_PERFORMANCE_INFORMATION: u32 = 2;
const SYSTEM_PROCESSOR_PERFORMANCE_INFORMATION: u32 = 8;
const SYSTEM_INTERRUPT_INFORMATION: u32 = 23;
/// `SYSTEM_PERFORMANCE_INFORMATION.ContextSwitches`: a ULONG at this offset
/// (mingw-w64's winternl.h, the same since Windows 2000; the structure has grown
/// since, so the buffer passed is larger than the 312 bytes mingw knows).
pub(crate) const CONTEXT_SWITCHES_OFFSET: usize = 296;
/// The processors one call reports: those of the calling thread's processor group.
const GROUP_PROCESSORS: usize = 64;
const HKEY_LOCAL_MACHINE: isize = 0x8000_0002_u32 as i32 as isize;
const RRF_RT_REG_SZ: u32 = 0x2;
const RRF_RT_REG_DWORD: u32 = 0x10;

#[link(name = "kernel32")]
extern "system" {
    fn GetSystemTimes(idle: *mut FileTime, kernel: *mut FileTime, user: *mut FileTime) -> Bool;
    fn GetCurrentProcess() -> Handle;
    fn GetCurrentThread() -> Handle;
    fn GetProcessTimes(
        process: Handle,
        creation: *mut FileTime,
        exit: *mut FileTime,
        kernel: *mut FileTime,
        user: *mut FileTime,
    ) -> Bool;
    fn K32GetProcessMemoryInfo(
        process: Handle,
        counters: *mut ProcessMemoryCounters,
        cb: u32,
    ) -> Bool;
    fn K32GetPerformanceInfo(info: *mut PerformanceInformation, cb: u32) -> Bool;
    fn GetModuleHandleW(name: *const u16) -> Handle;
    fn GetProcAddress(module: Handle, name: *const u8) -> *mut c_void;
    fn GetActiveProcessorGroupCount() -> u16;
    fn GetActiveProcessorCount(group: u16) -> u32;
    fn SetThreadAffinityMask(thread: Handle, mask: usize) -> usize;
    fn SetThreadGroupAffinity(
        thread: Handle,
        affinity: *const GroupAffinity,
        previous: *mut GroupAffinity,
    ) -> Bool;
    fn SetConsoleCtrlHandler(handler: Option<ConsoleHandler>, add: Bool) -> Bool;
}

/// `PHANDLER_ROUTINE`: called on a thread of its own with the event's kind; TRUE: handled.
type ConsoleHandler = extern "system" fn(kind: u32) -> Bool;

/// `CTRL_C_EVENT`, `CTRL_BREAK_EVENT`, `CTRL_CLOSE_EVENT`, `CTRL_LOGOFF_EVENT`,
/// `CTRL_SHUTDOWN_EVENT` (wincon.h).
const CTRL_C: u32 = 0;
const CTRL_BREAK: u32 = 1;
const CTRL_CLOSE: u32 = 2;
const CTRL_LOGOFF: u32 = 5;
const CTRL_SHUTDOWN: u32 = 6;

/// What the console handler does: 0 nothing registered, 1 note every event, 2 note the
/// first and let a second end the process.
static CONSOLE_WATCH: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Registers [`on_console_event`] (once per process; `once` as
/// [`super::watch_termination_once`]).
pub(super) fn watch_console(once: bool) -> io::Result<()> {
    use std::sync::atomic::Ordering::SeqCst;
    let before = CONSOLE_WATCH.swap(if once { 2 } else { 1 }, SeqCst);
    if before == 0 {
        // SAFETY: the handler is a plain function that lives as long as the process and
        // only touches atomics; adding a handler has no other precondition.
        if unsafe { SetConsoleCtrlHandler(Some(on_console_event), 1) } == 0 {
            CONSOLE_WATCH.store(0, SeqCst);
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether the console handler is registered.
pub(super) fn watching_console() -> bool {
    CONSOLE_WATCH.load(std::sync::atomic::Ordering::SeqCst) != 0
}

/// The console handler: [`note_console_event`]; for a closing console (logoff,
/// shutdown), which Windows ends the process for as soon as this returns, it then waits
/// up to 4 s (within the 5 s Windows allows) for the program to write its results and
/// exit by itself.
extern "system" fn on_console_event(kind: u32) -> Bool {
    let handled = note_console_event(kind);
    if handled != 0 && matches!(kind, CTRL_CLOSE | CTRL_LOGOFF | CTRL_SHUTDOWN) {
        std::thread::sleep(Duration::from_secs(4));
    }
    handled
}

/// The event noted as its Unix signal (the first one only). With `once`, a later event
/// is not handled (FALSE), so Windows' own handler ends the process.
fn note_console_event(kind: u32) -> Bool {
    use std::sync::atomic::Ordering::SeqCst;
    let signal = match kind {
        CTRL_C => 2,
        CTRL_BREAK => 15,
        CTRL_CLOSE | CTRL_LOGOFF | CTRL_SHUTDOWN => 1,
        _ => return 0,
    };
    let first = super::TERMINATION.compare_exchange(0, signal, SeqCst, SeqCst).is_ok();
    Bool::from(first || CONSOLE_WATCH.load(SeqCst) != 2)
}

/// `OSVERSIONINFOW`.
#[repr(C)]
struct OsVersionInfo {
    size: u32,
    major: u32,
    minor: u32,
    build: u32,
    platform: u32,
    service_pack: [u16; 128],
}

#[link(name = "ntdll")]
extern "system" {
    fn RtlGetVersion(info: *mut OsVersionInfo) -> i32;
    fn NtQuerySystemInformation(
        class: u32,
        info: *mut c_void,
        length: u32,
        returned: *mut u32,
    ) -> i32;
}

#[link(name = "advapi32")]
extern "system" {
    fn RegGetValueW(
        key: isize,
        subkey: *const u16,
        value: *const u16,
        flags: u32,
        kind: *mut u32,
        data: *mut c_void,
        length: *mut u32,
    ) -> i32;
}

fn check(ok: Bool) -> io::Result<()> {
    if ok == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn ticks(t: u64) -> Duration {
    Duration::from_nanos(t.saturating_mul(100))
}

/// `NtQuerySystemInformation(class)` into `out`: how many whole `T`s it filled.
fn query_system<T: Copy>(class: u32, out: &mut [T]) -> io::Result<usize> {
    let bytes = std::mem::size_of_val(out);
    let length = u32::try_from(bytes).unwrap_or(u32::MAX);
    let mut returned = 0u32;
    // SAFETY: `out` is writable for `length` bytes (plain `repr(C)` data, any bits
    // valid); `returned` is a writable u32.
    let status =
        unsafe { NtQuerySystemInformation(class, out.as_mut_ptr().cast(), length, &mut returned) };
    if status < 0 {
        return Err(io::Error::other(format!(
            "NtQuerySystemInformation({class}) failed: NTSTATUS {:#010x}",
            status as u32
        )));
    }
    Ok((returned as usize).min(bytes) / std::mem::size_of::<T>())
}

/// Windows' version, as the kernel reports it (not as the manifest-less
/// `GetVersionEx` would): `10.0.19045`.
pub(super) fn windows_version() -> Option<String> {
    let mut info = OsVersionInfo {
        size: std::mem::size_of::<OsVersionInfo>() as u32,
        major: 0,
        minor: 0,
        build: 0,
        platform: 0,
        service_pack: [0; 128],
    };
    // SAFETY: a writable OSVERSIONINFOW whose size field is set, as RtlGetVersion asks.
    let status = unsafe { RtlGetVersion(&mut info) };
    (status >= 0).then(|| format!("{}.{}.{}", info.major, info.minor, info.build))
}

/// Wine's version when this process runs under wine (its ntdll exports
/// `wine_get_version`; Windows' does not).
pub(super) fn wine_version() -> Option<String> {
    let ntdll: Vec<u16> = "ntdll.dll".encode_utf16().chain([0]).collect();
    // SAFETY: a NUL-terminated UTF-16 name; ntdll is loaded in every process.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    if module.is_null() {
        return None;
    }
    // SAFETY: a live module handle and a NUL-terminated name.
    let f = unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) };
    if f.is_null() {
        return None;
    }
    // SAFETY: wine declares it `const char * CDECL wine_get_version(void)`; the pointer
    // came from GetProcAddress for that name, and a function pointer has its size.
    let get: unsafe extern "C" fn() -> *const std::ffi::c_char = unsafe { std::mem::transmute(f) };
    // SAFETY: wine returns a static NUL-terminated string (or null).
    let text = unsafe { get() };
    if text.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated, static.
    Some(unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy().into_owned())
}

/// The whole machine's counters now.
pub(super) fn machine_counters() -> io::Result<MachineCounters> {
    let (mut idle, mut kernel, mut user) = Default::default();
    // SAFETY: three writable FILETIMEs.
    check(unsafe { GetSystemTimes(&mut idle, &mut kernel, &mut user) })?;
    let mut c = MachineCounters {
        idle: ticks(FileTime::ticks(idle)),
        kernel: ticks(FileTime::ticks(kernel)),
        user: ticks(FileTime::ticks(user)),
        ..Default::default()
    };
    let mut per_cpu = [ProcessorPerformance::default(); GROUP_PROCESSORS];
    let cpus = query_system(SYSTEM_PROCESSOR_PERFORMANCE_INFORMATION, &mut per_cpu)?;
    c.processors = cpus as u32;
    let mut interrupt_count = 0u32;
    for p in &per_cpu[..cpus] {
        c.dpc += ticks(p.dpc_time.max(0) as u64);
        c.interrupt += ticks(p.interrupt_time.max(0) as u64);
        interrupt_count = interrupt_count.wrapping_add(p.interrupt_count);
    }
    // Wine leaves the interrupt count and the context switches at 0: unknown, not none.
    let wine = wine_version().is_some();
    c.interrupts = (!wine).then_some(interrupt_count);
    // Wine fills SystemInterruptInformation with random bytes (Windows' own RNG draws
    // entropy from it): a DPC count from wine would be noise.
    let mut interrupts = [ProcessorInterrupts::default(); GROUP_PROCESSORS];
    match query_system(SYSTEM_INTERRUPT_INFORMATION, &mut interrupts) {
        Ok(n) if !wine => {
            c.dpcs = Some(interrupts[..n].iter().fold(0u32, |s, p| s.wrapping_add(p.dpc_count)));
        }
        _ => {}
    }
    // Larger than any Windows' SYSTEM_PERFORMANCE_INFORMATION (312 bytes in mingw's
    // header, more since), in u64s for its alignment.
    let mut perf = [0u64; 128];
    if let Ok(n) = query_system(SYSTEM_PERFORMANCE_INFORMATION, &mut perf) {
        if n * 8 >= CONTEXT_SWITCHES_OFFSET + 4 && !wine {
            let word = perf[CONTEXT_SWITCHES_OFFSET / 8].to_le_bytes();
            let at = CONTEXT_SWITCHES_OFFSET % 8;
            c.context_switches =
                Some(u32::from_le_bytes([word[at], word[at + 1], word[at + 2], word[at + 3]]));
        }
    }
    let mut info = PerformanceInformation {
        cb: std::mem::size_of::<PerformanceInformation>() as u32,
        ..Default::default()
    };
    // SAFETY: a writable PERFORMANCE_INFORMATION of the size given in `cb`.
    if unsafe { K32GetPerformanceInfo(&mut info, info.cb) } != 0 {
        c.nonpaged_pool_bytes = Some(info.kernel_nonpaged as u64 * info.page_size as u64);
    }
    Ok(c)
}

/// The process's CPU time and working set so far.
pub(super) fn process_usage() -> io::Result<ProcessUsage> {
    let (mut creation, mut exit, mut kernel, mut user) = Default::default();
    // SAFETY: the pseudo-handle of this process and four writable FILETIMEs.
    check(unsafe {
        GetProcessTimes(GetCurrentProcess(), &mut creation, &mut exit, &mut kernel, &mut user)
    })?;
    let mut memory = ProcessMemoryCounters {
        cb: std::mem::size_of::<ProcessMemoryCounters>() as u32,
        ..Default::default()
    };
    // SAFETY: this process's pseudo-handle and a writable structure of the size given.
    let memory_ok = unsafe { K32GetProcessMemoryInfo(GetCurrentProcess(), &mut memory, memory.cb) };
    Ok(ProcessUsage {
        user: ticks(user.ticks()),
        system: ticks(kernel.ticks()),
        // Windows counts switches per thread, not per process, and does not split them.
        voluntary_switches: None,
        involuntary_switches: None,
        resident_bytes: (memory_ok != 0).then_some(memory.working_set_size as u64),
        peak_resident_bytes: (memory_ok != 0).then_some(memory.peak_working_set_size as u64),
    })
}

/// Pins the calling thread to CPU `cpu`, counting across processor groups in order
/// (group 0's processors first), as Task Manager numbers them.
pub(super) fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: no arguments; a count.
    let groups = unsafe { GetActiveProcessorGroupCount() };
    let mut index = cpu;
    let mut total = 0usize;
    for group in 0..groups {
        // SAFETY: a group number below the count.
        let in_group = unsafe { GetActiveProcessorCount(group) } as usize;
        total += in_group;
        if index >= in_group {
            index -= in_group;
            continue;
        }
        let mask = 1usize << index; // index < in_group ≤ 64
        let ok = if groups == 1 {
            // SAFETY: the calling thread's pseudo-handle and a mask of one processor.
            Bool::from(unsafe { SetThreadAffinityMask(GetCurrentThread(), mask) } != 0)
        } else {
            let affinity = GroupAffinity { mask, group, reserved: [0; 3] };
            // SAFETY: the calling thread's pseudo-handle; a GROUP_AFFINITY read during
            // the call; no previous affinity asked for.
            unsafe { SetThreadGroupAffinity(GetCurrentThread(), &affinity, std::ptr::null_mut()) }
        };
        return check(ok);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("CPU {cpu} is out of range: this machine has {total} active processors"),
    ))
}

/// The registry key where Windows describes the first processor.
const FIRST_PROCESSOR: &str = r"HARDWARE\DESCRIPTION\System\CentralProcessor\0";

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain([0]).collect()
}

/// The first processor's clock in MHz, as Windows records it in the registry
/// (`HKLM\HARDWARE\DESCRIPTION\System\CentralProcessor\0`, `~MHz`).
pub(super) fn cpu_mhz() -> Option<f64> {
    let (key, value) = (wide(FIRST_PROCESSOR), wide("~MHz"));
    let mut mhz = 0u32;
    let mut length = 4u32;
    // SAFETY: NUL-terminated UTF-16 names; a writable DWORD and its size; RRF_RT_REG_DWORD
    // refuses any other type, so no more than 4 bytes are written.
    let rc = unsafe {
        RegGetValueW(
            HKEY_LOCAL_MACHINE,
            key.as_ptr(),
            value.as_ptr(),
            RRF_RT_REG_DWORD,
            std::ptr::null_mut(),
            std::ptr::addr_of_mut!(mhz).cast(),
            &mut length,
        )
    };
    (rc == 0 && mhz > 0).then_some(f64::from(mhz))
}

/// The first processor's model, as Windows records it (`ProcessorNameString`).
pub(super) fn cpu_model() -> Option<String> {
    let (key, value) = (wide(FIRST_PROCESSOR), wide("ProcessorNameString"));
    let mut text = [0u16; 256];
    let mut length = std::mem::size_of_val(&text) as u32;
    // SAFETY: NUL-terminated UTF-16 names; a writable buffer and its size in bytes;
    // RRF_RT_REG_SZ refuses any other type and Windows writes at most `length` bytes,
    // NUL-terminated.
    let rc = unsafe {
        RegGetValueW(
            HKEY_LOCAL_MACHINE,
            key.as_ptr(),
            value.as_ptr(),
            RRF_RT_REG_SZ,
            std::ptr::null_mut(),
            text.as_mut_ptr().cast(),
            &mut length,
        )
    };
    if rc != 0 {
        return None;
    }
    let end = text.iter().position(|&u| u == 0).unwrap_or(text.len());
    let model = String::from_utf16_lossy(&text[..end]).trim().to_string();
    (!model.is_empty()).then_some(model)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_console_event_is_noted_as_its_signal_and_a_second_ends_the_process() {
        use std::sync::atomic::Ordering::SeqCst;
        super::super::watch_termination_once().unwrap();
        assert!(super::watching_console());
        assert_eq!(super::super::termination_signal(), None);
        // Not an event of ours: left to the next handler.
        assert_eq!(note_console_event(3), 0);
        assert_eq!(note_console_event(CTRL_C), 1, "the first Ctrl-C is handled");
        assert_eq!(super::super::termination_signal(), Some(2));
        assert_eq!(note_console_event(CTRL_BREAK), 0, "a second event ends the process");
        assert_eq!(super::super::termination_signal(), Some(2), "the first is the one noted");
        // Watching every event (mesh's launcher, --run_infinitely): each is handled.
        super::super::watch_termination().unwrap();
        assert_eq!(note_console_event(CTRL_CLOSE), 1);
        assert_eq!(super::super::wait_termination(), Some(2));
        super::super::TERMINATION.store(0, SeqCst);
        assert_eq!(note_console_event(CTRL_SHUTDOWN), 1);
        assert_eq!(super::super::termination_signal(), Some(1), "a closing is a hangup");
        super::super::TERMINATION.store(0, SeqCst);
    }

    use super::*;
    use std::time::Instant;

    fn spin(d: Duration) {
        let start = Instant::now();
        while start.elapsed() < d {
            std::hint::black_box(start.elapsed());
        }
    }

    #[test]
    fn structures_have_the_sizes_of_the_windows_headers() {
        use std::mem::size_of;
        // sizeof in x86_64-w64-mingw32-gcc 12 over mingw-w64 10's headers.
        assert_eq!(size_of::<ProcessMemoryCounters>(), 72);
        assert_eq!(size_of::<PerformanceInformation>(), 104);
        assert_eq!(std::mem::offset_of!(PerformanceInformation, kernel_nonpaged), 72);
        assert_eq!(size_of::<ProcessorPerformance>(), 48);
        assert_eq!(size_of::<ProcessorInterrupts>(), 24);
        assert_eq!(size_of::<GroupAffinity>(), 16);
        assert_eq!(size_of::<OsVersionInfo>(), 276);
        assert_eq!(CONTEXT_SWITCHES_OFFSET, 296); // offsetof(SYSTEM_PERFORMANCE_INFORMATION, ContextSwitches)
    }

    #[test]
    fn machine_counters_move_with_time_and_work() {
        let a = machine_counters().unwrap();
        spin(Duration::from_millis(100));
        let b = machine_counters().unwrap();
        assert!(a.processors >= 1 && a.processors as usize <= GROUP_PROCESSORS, "{a:?}");
        // All processors' time went on: busy (user + kernel − idle) or idle.
        let total = |c: &MachineCounters| c.user + c.kernel;
        assert!(total(&b) > total(&a), "{a:?} {b:?}");
        assert!(b.kernel >= b.idle, "kernel time includes idle time: {b:?}");
        assert!(b.user + b.kernel - b.idle > a.user + a.kernel - a.idle, "a spin is busy time");
    }

    #[test]
    fn process_times_and_working_set_grow_with_work() {
        let before = super::process_usage().unwrap();
        spin(Duration::from_millis(60));
        let touched = std::hint::black_box(vec![1u8; 64 << 20]);
        let after = super::process_usage().unwrap();
        drop(touched);
        let cpu = (after.user + after.system) - (before.user + before.system);
        assert!(cpu >= Duration::from_millis(20), "60 ms of spinning counted as {cpu:?}");
        let (ws, peak) = (after.resident_bytes.unwrap(), after.peak_resident_bytes.unwrap());
        assert!(ws >= 48 << 20 && peak >= ws, "{after:?}");
        assert_eq!((after.voluntary_switches, after.involuntary_switches), (None, None));
    }

    #[test]
    fn the_version_is_the_kernels_and_wine_is_named_under_wine() {
        let v = super::super::windows_version().unwrap();
        let (major, rest) = v.split_once('.').unwrap();
        assert!(major.parse::<u32>().unwrap() >= 6, "{v}");
        assert!(rest.split(['.', ' ']).nth(1).unwrap().parse::<u32>().is_ok(), "{v}");
        // ci/test runs this under wine: it must say so there (and only there).
        assert_eq!(v.contains(" under wine "), wine_version().is_some(), "{v}");
        if wine_version().is_some() {
            assert_eq!(machine_counters().unwrap().dpcs, None, "wine's DPC counts are noise");
        }
    }

    #[test]
    fn pinning_counts_processors_across_groups_and_refuses_a_missing_one() {
        pin_current_thread(0).unwrap();
        let err = pin_current_thread(4096).unwrap_err();
        assert!(
            err.to_string().starts_with("CPU 4096 is out of range: this machine has "),
            "{err}"
        );
    }
}
