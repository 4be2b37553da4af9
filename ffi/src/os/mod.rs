//! The few operating-system calls rdmabench needs beyond `std`: the process's own CPU
//! time, context switches and resident memory (`getrusage`; on Windows
//! `GetProcessTimes` and `GetProcessMemoryInfo`), the machine's counters on Windows
//! (`GetSystemTimes`, `NtQuerySystemInformation`: Linux reads /proc/stat), pinning a
//! thread to a CPU (`sched_setaffinity`, `SetThreadGroupAffinity`), the addresses of
//! the network interfaces (`getifaddrs`), noting termination signals (`sigaction`)
//! instead of dying of them, and fixing glibc's allocation thresholds (`mallopt`).
//! On platforms without them each function says so instead of guessing.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

#[cfg(windows)]
mod windows;

/// The process's own use of the machine so far, all threads together: on Linux what
/// `getrusage(RUSAGE_SELF)` and `/proc/self/statm` report, on Windows
/// `GetProcessTimes` and `GetProcessMemoryInfo`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessUsage {
    /// CPU time in user mode.
    pub user: Duration,
    /// CPU time in the kernel on the process's behalf (Windows: privileged time).
    pub system: Duration,
    /// Context switches the process asked for (it blocked); Linux only.
    pub voluntary_switches: Option<u64>,
    /// Context switches forced on it (preempted); Linux only.
    pub involuntary_switches: Option<u64>,
    /// Resident memory now, bytes (Linux: RSS; Windows: working set).
    pub resident_bytes: Option<u64>,
    /// The most it was resident at once, bytes (Linux: peak RSS; Windows: peak working set).
    pub peak_resident_bytes: Option<u64>,
}

/// The whole machine's counters at one instant, as Windows keeps them (NTttcp's and
/// perfmon's sources): times in all processors together; the event counts are
/// Windows' 32-bit counters, summed with wrap-around so that the difference of two
/// readings (`wrapping_sub`) is right across a wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineCounters {
    /// Idle time (`GetSystemTimes`).
    pub idle: Duration,
    /// Kernel time, idle, DPC and interrupt time included (`GetSystemTimes`).
    pub kernel: Duration,
    /// User time (`GetSystemTimes`).
    pub user: Duration,
    /// Time in deferred procedure calls (per processor, `NtQuerySystemInformation`).
    pub dpc: Duration,
    /// Time in interrupt service routines (the same).
    pub interrupt: Duration,
    /// Interrupts serviced (the same), if Windows answered (wine gives none).
    pub interrupts: Option<u32>,
    /// DPCs queued (`SystemInterruptInformation`), if Windows answered.
    pub dpcs: Option<u32>,
    /// Context switches (`SystemPerformanceInformation`), if Windows answered.
    pub context_switches: Option<u32>,
    /// Non-paged pool in use, bytes (`GetPerformanceInfo`), if Windows answered.
    pub nonpaged_pool_bytes: Option<u64>,
    /// Processors the per-processor figures cover (one processor group's).
    pub processors: u32,
}

/// The machine's counters now (Windows).
///
/// # Errors
/// `GetSystemTimes` or `NtQuerySystemInformation` failing; elsewhere always (Linux
/// reads /proc/stat instead).
pub fn machine_counters() -> io::Result<MachineCounters> {
    #[cfg(windows)]
    return windows::machine_counters();
    #[cfg(not(windows))]
    Err(io::Error::new(io::ErrorKind::Unsupported, "Windows' counters are Windows'"))
}

/// On Windows, its version (`10.0.19045`), and wine's when under wine
/// (`10.0.19043 under wine 8.0`); `None` elsewhere.
pub fn windows_version() -> Option<String> {
    #[cfg(windows)]
    return windows::windows_version().map(|v| match windows::wine_version() {
        Some(wine) => format!("{v} under wine {wine}"),
        None => v,
    });
    #[cfg(not(windows))]
    None
}

/// The processor model Windows records (`Intel(R) Xeon(R) CPU E5-2680 …`); `None`
/// elsewhere (Linux: /proc/cpuinfo).
pub fn cpu_model() -> Option<String> {
    #[cfg(windows)]
    return windows::cpu_model();
    #[cfg(not(windows))]
    None
}

/// The processor clock Windows records, MHz; `None` elsewhere (Linux: /proc/cpuinfo).
pub fn cpu_mhz() -> Option<f64> {
    #[cfg(windows)]
    return windows::cpu_mhz();
    #[cfg(not(windows))]
    None
}

/// The process's usage so far.
///
/// # Errors
/// `getrusage` or `GetProcessTimes` failing, or no such call on this platform.
#[cfg(unix)]
pub fn process_usage() -> io::Result<ProcessUsage> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a writable rusage; getrusage fills it and touches nothing else.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getrusage returned 0, so it initialised the struct (and zeroed() already had).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    // Linux reports the peak in KiB; it was read before the RSS, which may have grown since.
    let resident = resident_bytes();
    let peak = (ru.ru_maxrss.max(0) as u64 * 1024).max(resident.unwrap_or(0));
    Ok(ProcessUsage {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
        voluntary_switches: Some(ru.ru_nvcsw.max(0) as u64),
        involuntary_switches: Some(ru.ru_nivcsw.max(0) as u64),
        resident_bytes: resident,
        peak_resident_bytes: Some(peak),
    })
}

/// RSS from /proc/self/statm (its second field, in pages).
#[cfg(unix)]
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size()?)
}

/// The memory page size, bytes (`sysconf(_SC_PAGESIZE)`; None where it says nothing).
#[cfg(unix)]
pub fn page_size() -> Option<u64> {
    // SAFETY: sysconf reads a configuration value and has no other effect.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().filter(|&p| p > 0)
}

/// Clears `O_NONBLOCK` on `fd` (a file opened without waiting for a FIFO's reader,
/// then written as any file is).
///
/// # Errors
/// `fcntl` failing.
#[cfg(unix)]
pub fn set_blocking(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl with F_GETFL/F_SETFL reads and sets one open file's status flags;
    // the descriptor is borrowed, so it stays open for the call.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The process's usage so far.
///
/// # Errors
/// `GetProcessTimes` failing.
#[cfg(windows)]
pub fn process_usage() -> io::Result<ProcessUsage> {
    windows::process_usage()
}

/// The process's usage so far.
///
/// # Errors
/// Always: no such call on this platform.
#[cfg(not(any(unix, windows)))]
pub fn process_usage() -> io::Result<ProcessUsage> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no process usage on this platform"))
}

/// Fixes glibc's thresholds for serving a large allocation from its own mapping (128
/// KiB) and for giving the heap's free top back (128 KiB), as `mallopt(3)` does when
/// either is set. Left alone, both move up when a large block is freed: after a
/// library's one-off buffer goes (libibverbs' device scan opens a directory whose
/// buffer is sized by the file system, 508 KiB on the lab's root), every later block up
/// to that size comes from the heap, whose pages stay resident after the block is
/// freed; a block of its own mapping is unmapped when freed. Call it first in `main`,
/// before any thread. Elsewhere (musl, other systems) it does nothing.
pub fn fix_malloc_thresholds() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const LARGE: libc::c_int = 128 * 1024;
        // SAFETY: mallopt takes plain integers; called before any other thread exists
        // (the caller's promise, and harmless if not: glibc locks its arena).
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE);
            libc::mallopt(libc::M_TRIM_THRESHOLD, LARGE);
        }
    }
}

/// Pins the calling thread to CPU `cpu`.
///
/// # Errors
/// The CPU does not exist or is not allowed (`EINVAL`), or no such call here.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    set_current_thread_cpus(&[cpu])
}

/// Lets the calling thread run on the CPUs in `cpus` only.
///
/// # Errors
/// A CPU past `CPU_SETSIZE`, none of them allowed (`EINVAL`), or an empty list.
#[cfg(target_os = "linux")]
pub fn set_current_thread_cpus(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() || cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no CPU, or one out of range"));
    }
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `cpu` is below CPU_SETSIZE (checked above), so CPU_SET stays inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the calling thread may run on, as the kernel keeps them.
///
/// # Errors
/// `sched_getaffinity` failing.
#[cfg(target_os = "linux")]
pub fn current_thread_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is writable and of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: every index is below CPU_SETSIZE, inside `set`.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Lets the calling thread run on the CPUs in `cpus` only: here one CPU (a set needs
/// group-aware masks not written yet).
///
/// # Errors
/// Several CPUs, or as [`pin_current_thread`].
#[cfg(not(target_os = "linux"))]
pub fn set_current_thread_cpus(cpus: &[usize]) -> io::Result<()> {
    match cpus {
        [cpu] => pin_current_thread(*cpu),
        _ => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a set of CPUs on this platform (one CPU can be given)",
        )),
    }
}

/// Not known on this platform.
///
/// # Errors
/// Always.
#[cfg(not(target_os = "linux"))]
pub fn current_thread_cpus() -> io::Result<Vec<usize>> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no affinity query on this platform"))
}

/// Pins the calling thread to CPU `cpu` (numbered across processor groups, group 0's
/// first: `SetThreadAffinityMask` on one group, `SetThreadGroupAffinity` on several).
///
/// # Errors
/// No such processor, or Windows refusing.
#[cfg(windows)]
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    windows::pin_current_thread(cpu)
}

/// Pins the calling thread to CPU `cpu`.
///
/// # Errors
/// Always: no affinity call on this platform yet.
#[cfg(not(any(target_os = "linux", windows)))]
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("cannot pin to CPU {cpu} on this platform"),
    ))
}

/// One IP address of a network interface, as `getifaddrs` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceAddress {
    /// The interface's name (`lo`, `eth0`).
    pub interface: String,
    /// The address (IPv6 link-local addresses without their scope).
    pub addr: IpAddr,
}

/// The IPv4 and IPv6 addresses of every network interface, in the kernel's order.
///
/// # Errors
/// `getifaddrs` failing, or no such call on this platform.
#[cfg(unix)]
pub fn interface_addresses() -> io::Result<Vec<InterfaceAddress>> {
    /// The list `getifaddrs` allocated, freed once when dropped.
    struct List(*mut libc::ifaddrs);
    impl Drop for List {
        fn drop(&mut self) {
            // SAFETY: the head of a list a successful getifaddrs returned, freed only
            // here; nothing borrowed from it outlives this guard.
            unsafe { libc::freeifaddrs(self.0) };
        }
    }
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes the head of a list it allocates into `head`.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let list = List(head);
    let mut out = Vec::new();
    let mut node = list.0;
    while !node.is_null() {
        // SAFETY: a non-null node of the list, alive until `list` is dropped below.
        let ifa = unsafe { &*node };
        let addr = if ifa.ifa_name.is_null() { None } else { sockaddr_ip(ifa.ifa_addr) };
        if let Some(addr) = addr {
            // SAFETY: a non-null ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            out.push(InterfaceAddress { interface: name.to_string_lossy().into_owned(), addr });
        }
        node = ifa.ifa_next;
    }
    drop(list);
    Ok(out)
}

/// The IP address in a `sockaddr` of `getifaddrs`'s list; `None` for null or other
/// families (packet, link).
#[cfg(unix)]
fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: a non-null sockaddr from getifaddrs; every sockaddr starts with its family.
    let family = i32::from(unsafe { std::ptr::read_unaligned(sa) }.sa_family);
    match family {
        libc::AF_INET => {
            // SAFETY: family AF_INET: the kernel filled a whole sockaddr_in there.
            let sin = unsafe { std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in>()) };
            // s_addr holds the address in network order: its bytes in memory are the octets.
            Some(IpAddr::from(sin.sin_addr.s_addr.to_ne_bytes()))
        }
        libc::AF_INET6 => {
            // SAFETY: family AF_INET6: the kernel filled a whole sockaddr_in6 there.
            let sin6 = unsafe { std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in6>()) };
            Some(IpAddr::from(sin6.sin6_addr.s6_addr))
        }
        _ => None,
    }
}

/// The IPv4 and IPv6 addresses of every network interface.
///
/// # Errors
/// Always: this platform has no `getifaddrs` binding here yet.
#[cfg(not(unix))]
pub fn interface_addresses() -> io::Result<Vec<InterfaceAddress>> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "getifaddrs is not available on this platform"))
}

/// One IP address of a network adapter, with the adapter's name, MTU and link speed,
/// as `GetAdaptersAddresses` lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterAddress {
    /// The address.
    pub addr: IpAddr,
    /// The adapter's friendly name (`Ethernet 2`), as `Get-NetAdapter` shows it.
    pub adapter: String,
    /// Its MTU, bytes (`None` when Windows reports none).
    pub mtu: Option<u32>,
    /// Its transmit link speed, bits/s (`None` when Windows does not know it).
    pub speed_bps: Option<u64>,
}

/// Each IP address of each network adapter, from `GetAdaptersAddresses`.
///
/// # Errors
/// `GetAdaptersAddresses` failing.
#[cfg(windows)]
pub fn adapter_addresses() -> io::Result<Vec<AdapterAddress>> {
    use std::ffi::c_void;

    /// The head of `IP_ADAPTER_ADDRESSES_LH` (iptypes.h), up to the link speeds; Windows
    /// owns the rest of each entry, which is never read here.
    #[repr(C)]
    struct AdapterAddresses {
        length: u32,
        if_index: u32,
        next: *const AdapterAddresses,
        adapter_name: *const u8,
        first_unicast: *const UnicastAddress,
        first_anycast: *const c_void,
        first_multicast: *const c_void,
        first_dns_server: *const c_void,
        dns_suffix: *const u16,
        description: *const u16,
        friendly_name: *const u16,
        physical_address: [u8; 8],
        physical_address_length: u32,
        flags: u32,
        mtu: u32,
        if_type: u32,
        oper_status: i32,
        ipv6_if_index: u32,
        zone_indices: [u32; 16],
        first_prefix: *const c_void,
        transmit_link_speed: u64,
        receive_link_speed: u64,
    }
    /// The head of `IP_ADAPTER_UNICAST_ADDRESS_LH`: its `SOCKET_ADDRESS`.
    #[repr(C)]
    struct UnicastAddress {
        length: u32,
        flags: u32,
        next: *const UnicastAddress,
        sockaddr: *const u8,
        sockaddr_length: i32,
    }
    #[link(name = "iphlpapi")]
    extern "system" {
        fn GetAdaptersAddresses(
            family: u32,
            flags: u32,
            reserved: *mut c_void,
            addresses: *mut AdapterAddresses,
            size: *mut u32,
        ) -> u32;
    }
    const AF_UNSPEC: u32 = 0;
    const GAA_FLAG_SKIP_ANYCAST: u32 = 0x2;
    const GAA_FLAG_SKIP_MULTICAST: u32 = 0x4;
    const GAA_FLAG_SKIP_DNS_SERVER: u32 = 0x8;
    const ERROR_BUFFER_OVERFLOW: u32 = 111;
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 23;

    let flags = GAA_FLAG_SKIP_ANYCAST | GAA_FLAG_SKIP_MULTICAST | GAA_FLAG_SKIP_DNS_SERVER;
    let mut size: u32 = 16 * 1024;
    // u64s: the entries hold pointers and u64s, so the buffer is 8-aligned.
    let mut buf: Vec<u64>;
    let mut tries = 0;
    loop {
        buf = vec![0u64; (size as usize).div_ceil(8)];
        // SAFETY: `buf` has room for `size` bytes, 8-aligned; Windows writes at most
        // `size` bytes and sets `size` to what it needs when that is not enough.
        let rc = unsafe {
            GetAdaptersAddresses(
                AF_UNSPEC,
                flags,
                std::ptr::null_mut(),
                buf.as_mut_ptr().cast(),
                &mut size,
            )
        };
        match rc {
            0 => break,
            ERROR_BUFFER_OVERFLOW if tries < 3 => tries += 1,
            _ => return Err(io::Error::from_raw_os_error(rc as i32)),
        }
    }
    let mut out = Vec::new();
    let mut adapter = buf.as_ptr().cast::<AdapterAddresses>();
    while !adapter.is_null() {
        // SAFETY: the first entry is at the start of `buf` and each `next` points into
        // it (or is null); `buf` outlives this loop.
        let a = unsafe { &*adapter };
        let speed = (a.transmit_link_speed != u64::MAX && a.transmit_link_speed != 0)
            .then_some(a.transmit_link_speed);
        let mtu = (a.mtu != 0 && a.mtu != u32::MAX).then_some(a.mtu);
        let mut name = Vec::new();
        if !a.friendly_name.is_null() {
            while name.len() < 256 {
                // SAFETY: a NUL-terminated UTF-16 string Windows built inside `buf`, read
                // up to its NUL and no further than 256 units (names are far shorter).
                let unit = unsafe { std::ptr::read_unaligned(a.friendly_name.add(name.len())) };
                if unit == 0 {
                    break;
                }
                name.push(unit);
            }
        }
        let adapter_name = String::from_utf16_lossy(&name);
        let mut unicast = a.first_unicast;
        while !unicast.is_null() {
            // SAFETY: a non-null unicast entry of the list Windows built inside `buf`.
            let u = unsafe { &*unicast };
            if !u.sockaddr.is_null() && u.sockaddr_length >= 8 {
                // SAFETY: a SOCKADDR of `sockaddr_length` bytes; its family is its first
                // u16, an IPv4 address at offset 4 (16 bytes long), an IPv6 address at
                // offset 8 (28 bytes long); lengths are checked before each read.
                let family = unsafe { std::ptr::read_unaligned(u.sockaddr.cast::<u16>()) };
                let len = u.sockaddr_length as usize;
                let ip = match family {
                    AF_INET if len >= 8 => {
                        // SAFETY: an AF_INET SOCKADDR of at least 8 bytes: the
                        // address is bytes 4..8.
                        let b = unsafe {
                            std::ptr::read_unaligned(u.sockaddr.add(4).cast::<[u8; 4]>())
                        };
                        Some(IpAddr::from(b))
                    }
                    AF_INET6 if len >= 24 => {
                        // SAFETY: an AF_INET6 SOCKADDR of at least 24 bytes: the
                        // address is bytes 8..24.
                        let b = unsafe {
                            std::ptr::read_unaligned(u.sockaddr.add(8).cast::<[u8; 16]>())
                        };
                        Some(IpAddr::from(b))
                    }
                    _ => None,
                };
                if let Some(addr) = ip {
                    out.push(AdapterAddress {
                        addr,
                        adapter: adapter_name.clone(),
                        mtu,
                        speed_bps: speed,
                    });
                }
            }
            unicast = u.next;
        }
        adapter = a.next;
    }
    Ok(out)
}

/// Each IP address of each network adapter (Windows).
///
/// # Errors
/// Always: elsewhere than Windows, [`interface_addresses`] and sysfs tell the same.
#[cfg(not(windows))]
pub fn adapter_addresses() -> io::Result<Vec<AdapterAddress>> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "GetAdaptersAddresses is Windows'"))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn process_usage_grows_with_work() {
        // Spins until the counters show 20 ms of work: on a loaded machine a fixed
        // wall-clock spin may get a fraction of a CPU, so the wall clock only bounds a
        // counter that never grows (30 s of spinning with under 20 ms counted).
        let before = process_usage().unwrap();
        let spent = |u: &ProcessUsage| (u.user + u.system) - (before.user + before.system);
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let after = loop {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let now = process_usage().unwrap();
            if spent(&now) >= Duration::from_millis(20) || start.elapsed() > Duration::from_secs(30)
            {
                break now;
            }
        };
        let (cpu, wall) = (spent(&after), start.elapsed());
        assert!(cpu >= Duration::from_millis(20), "{wall:?} of spinning counted as {cpu:?}");
        assert!(after.voluntary_switches.is_some() && after.involuntary_switches.is_some());
    }

    #[test]
    fn resident_memory_grows_with_touched_pages_and_the_peak_covers_it() {
        let before = process_usage().unwrap();
        let touched = std::hint::black_box(vec![1u8; 64 << 20]);
        let during = process_usage().unwrap();
        drop(touched);
        let (rss, peak) = (during.resident_bytes.unwrap(), during.peak_resident_bytes.unwrap());
        assert!(rss >= before.resident_bytes.unwrap() + (48 << 20), "{before:?} {during:?}");
        assert!(peak >= rss, "{during:?}");
    }

    #[test]
    fn pinning_to_a_missing_cpu_is_refused() {
        assert!(pin_current_thread(libc::CPU_SETSIZE as usize + 1).is_err());
        let err = pin_current_thread(libc::CPU_SETSIZE as usize - 1).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn interface_addresses_include_loopback() {
        let all = interface_addresses().unwrap();
        let lo = IpAddr::from([127, 0, 0, 1]);
        assert!(all.iter().any(|a| a.interface == "lo" && a.addr == lo), "{all:?}");
    }
}

/// The number of the first termination signal (`SIGTERM`, `SIGINT`, `SIGHUP`) this
/// process received since [`watch_termination`]; 0 while none.
static TERMINATION: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// The pipe the handler wakes [`wait_termination`] through: write end, read end (-1: none).
#[cfg(unix)]
static WAKE_WRITE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
#[cfg(unix)]
static WAKE_READ: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

#[cfg(unix)]
extern "C" fn note_termination(signal: libc::c_int) {
    use std::sync::atomic::Ordering::SeqCst;
    // An atomic store and a write(2): async-signal-safe, as a handler must be.
    let _ = TERMINATION.compare_exchange(0, signal, SeqCst, SeqCst);
    let fd = WAKE_WRITE.load(SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: `fd` is the pipe's write end, open for the life of the process; one
        // byte from a live local. A full pipe (signals already noted) just fails.
        let _ = unsafe { libc::write(fd, std::ptr::addr_of!(byte).cast(), 1) };
    }
}

/// From now on `SIGTERM`, `SIGINT` and `SIGHUP` no longer end the process: each is noted
/// for [`termination_signal`] and wakes [`wait_termination`], so a program can say what
/// it was doing when a launcher (mpirun, srun) or a user stopped it, and then exit
/// itself. (A launcher's SIGKILL may follow within milliseconds: a thread waiting in
/// [`wait_termination`] is the quickest to act.)
///
/// # Errors
/// `pipe2` or `sigaction` failing, or no such calls on this platform.
#[cfg(unix)]
pub fn watch_termination() -> io::Result<()> {
    watch_termination_with(libc::SA_RESTART)
}

/// As [`watch_termination`], for the first signal only: it is noted (a test's loops
/// stop and its results are written), and the signal's default action is back at once,
/// so a second one ends the process as it always did (a run stuck in a wait is never
/// out of reach).
///
/// # Errors
/// `pipe2` or `sigaction` failing, or no such calls on this platform.
#[cfg(unix)]
pub fn watch_termination_once() -> io::Result<()> {
    watch_termination_with(libc::SA_RESTART | libc::SA_RESETHAND)
}

#[cfg(unix)]
fn watch_termination_with(flags: libc::c_int) -> io::Result<()> {
    use std::sync::atomic::Ordering::SeqCst;
    if WAKE_READ.load(SeqCst) < 0 {
        let mut fds = [-1 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        WAKE_READ.store(fds[0], SeqCst);
        WAKE_WRITE.store(fds[1], SeqCst);
    }
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        if flags & libc::SA_RESETHAND != 0 && ignored(signal)? {
            // Ignored by whoever started this process (a script's background job, nohup):
            // it stays ignored, as a shell's own programs keep it.
            continue;
        }
        // SAFETY: sigaction is plain data; all-zero is an empty mask and no flags.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = note_termination as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // Interrupted system calls restart: the program is told through the pipe.
        action.sa_flags = flags;
        // SAFETY: `action` is a valid sigaction whose handler is async-signal-safe (an
        // atomic store and a write); the old action is not asked for (null).
        let rc = unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether `signal` is ignored (`SIG_IGN`) now.
#[cfg(unix)]
fn ignored(signal: libc::c_int) -> io::Result<bool> {
    // SAFETY: sigaction is plain data; all-zero is a valid value for the kernel to fill.
    let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `now`, a live local.
    if unsafe { libc::sigaction(signal, std::ptr::null(), &mut now) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(now.sa_sigaction == libc::SIG_IGN)
}

/// Windows: from now on Ctrl-C, Ctrl-Break and the console's closing (logoff,
/// shutdown) no longer end the process: each is noted for [`termination_signal`] as the
/// signal a Unix program would get (Ctrl-C `SIGINT`, Ctrl-Break `SIGTERM`, a closing
/// `SIGHUP`). Windows ends a process whose console closes once its handler returns, so a
/// closing is noted but cannot wait for the results.
///
/// # Errors
/// `SetConsoleCtrlHandler` failing.
#[cfg(windows)]
pub fn watch_termination() -> io::Result<()> {
    windows::watch_console(false)
}

/// As [`watch_termination`] (Windows), for the first event only: a second one ends the
/// process as it always did.
///
/// # Errors
/// `SetConsoleCtrlHandler` failing.
#[cfg(windows)]
pub fn watch_termination_once() -> io::Result<()> {
    windows::watch_console(true)
}

/// Not available on this platform.
///
/// # Errors
/// Always.
#[cfg(not(any(unix, windows)))]
pub fn watch_termination() -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no termination signals on this platform"))
}

/// Not available on this platform.
///
/// # Errors
/// Always.
#[cfg(not(any(unix, windows)))]
pub fn watch_termination_once() -> io::Result<()> {
    watch_termination()
}

/// The termination signal received since [`watch_termination`] (its number, e.g. 15 for
/// `SIGTERM`), if any.
pub fn termination_signal() -> Option<i32> {
    match TERMINATION.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Blocks until a termination signal arrives (after [`watch_termination`]) and returns
/// its number. Returns None at once if nothing is being watched.
#[cfg(unix)]
pub fn wait_termination() -> Option<i32> {
    let fd = WAKE_READ.load(std::sync::atomic::Ordering::SeqCst);
    if fd < 0 {
        return None;
    }
    loop {
        if let Some(s) = termination_signal() {
            return Some(s);
        }
        let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; `fd` is the pipe's read end, open for the process's
        // life. -1: wait without a limit (EINTR just loops).
        let _ = unsafe { libc::poll(&mut poll, 1, -1) };
    }
}

/// Windows: blocks until a console event is noted (after [`watch_termination`]),
/// looking every 20 ms (a handler there runs on a thread of its own, with nothing to
/// wake). Returns None at once if nothing is being watched.
#[cfg(windows)]
pub fn wait_termination() -> Option<i32> {
    if !windows::watching_console() {
        return None;
    }
    loop {
        if let Some(s) = termination_signal() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Not available on this platform.
#[cfg(not(any(unix, windows)))]
pub fn wait_termination() -> Option<i32> {
    None
}
