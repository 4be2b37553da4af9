//! The few operating-system calls rdmabench needs beyond `std`: the process's own CPU
//! time and context switches (`getrusage`), pinning a thread to a CPU
//! (`sched_setaffinity`), socket buffer sizes (`SO_SNDBUF` / `SO_RCVBUF`) and the
//! addresses of the network interfaces (`getifaddrs`), and noting termination signals
//! (`sigaction`) instead of dying of them.
//! On platforms without them each function says so instead of guessing.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

/// What `getrusage(RUSAGE_SELF)` reports for the whole process, all threads together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessUsage {
    /// CPU time in user mode.
    pub user: Duration,
    /// CPU time in the kernel on the process's behalf.
    pub system: Duration,
    /// Context switches the process asked for (it blocked).
    pub voluntary_switches: u64,
    /// Context switches forced on it (preempted).
    pub involuntary_switches: u64,
}

/// The process's CPU usage so far.
///
/// # Errors
/// `getrusage` failing, or no such call on this platform.
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
    Ok(ProcessUsage {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
        voluntary_switches: ru.ru_nvcsw.max(0) as u64,
        involuntary_switches: ru.ru_nivcsw.max(0) as u64,
    })
}

/// The process's CPU usage so far.
///
/// # Errors
/// Always: this platform has no `getrusage` binding here yet.
#[cfg(not(unix))]
pub fn process_usage() -> io::Result<ProcessUsage> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "getrusage is not available on this platform"))
}

/// Pins the calling thread to CPU `cpu`.
///
/// # Errors
/// The CPU does not exist or is not allowed (`EINVAL`), or no such call here.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE (checked above), so CPU_SET stays inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling thread to CPU `cpu`.
///
/// # Errors
/// Always: no affinity call on this platform yet.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("cannot pin to CPU {cpu} on this platform"),
    ))
}

/// Which socket buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketBuffer {
    /// `SO_SNDBUF`.
    Send,
    /// `SO_RCVBUF`.
    Receive,
}

#[cfg(unix)]
fn sockopt_name(which: SocketBuffer) -> libc::c_int {
    match which {
        SocketBuffer::Send => libc::SO_SNDBUF,
        SocketBuffer::Receive => libc::SO_RCVBUF,
    }
}

/// Asks for a socket buffer of `bytes` (Linux doubles the value for its bookkeeping
/// and caps it at `net.core.{w,r}mem_max`; [`socket_buffer`] tells what was granted).
///
/// # Errors
/// `setsockopt` failing.
#[cfg(unix)]
pub fn set_socket_buffer(
    sock: &impl std::os::fd::AsRawFd,
    which: SocketBuffer,
    bytes: u32,
) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "socket buffer too large"))?;
    // SAFETY: a live socket descriptor (borrowed for the call), a c_int option value
    // and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            sockopt_name(which),
            std::ptr::addr_of!(value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The socket buffer size in effect, bytes.
///
/// # Errors
/// `getsockopt` failing.
#[cfg(unix)]
pub fn socket_buffer(sock: &impl std::os::fd::AsRawFd, which: SocketBuffer) -> io::Result<u32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a live socket descriptor, a writable c_int and its size, as getsockopt expects.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            sockopt_name(which),
            std::ptr::addr_of_mut!(value).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value.max(0) as u32)
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

/// Each IP address of each network adapter with the adapter's transmit link speed in
/// bits/s (`None` when Windows does not know it), from `GetAdaptersAddresses`.
///
/// # Errors
/// `GetAdaptersAddresses` failing.
#[cfg(windows)]
pub fn link_speeds() -> io::Result<Vec<(IpAddr, Option<u64>)>> {
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
                if let Some(ip) = ip {
                    out.push((ip, speed));
                }
            }
            unicast = u.next;
        }
        adapter = a.next;
    }
    Ok(out)
}

/// Each IP address with its adapter's link speed, bits/s.
///
/// # Errors
/// Always: elsewhere than Windows, read `/sys/class/net/IF/speed` instead.
#[cfg(not(windows))]
pub fn link_speeds() -> io::Result<Vec<(IpAddr, Option<u64>)>> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "GetAdaptersAddresses is Windows'"))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn process_usage_grows_with_work() {
        let before = process_usage().unwrap();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = process_usage().unwrap();
        let cpu = (after.user + after.system) - (before.user + before.system);
        assert!(cpu >= Duration::from_millis(20), "50 ms of spinning counted as {cpu:?}");
    }

    #[test]
    fn pinning_to_a_missing_cpu_is_refused() {
        assert!(pin_current_thread(libc::CPU_SETSIZE as usize + 1).is_err());
        let err = pin_current_thread(libc::CPU_SETSIZE as usize - 1).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn socket_buffers_are_set_and_read_back() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        set_socket_buffer(&l, SocketBuffer::Receive, 256 * 1024).unwrap();
        // Linux doubles the request (capped by rmem_max, at least 2 × 128 KiB here).
        assert!(socket_buffer(&l, SocketBuffer::Receive).unwrap() >= 256 * 1024);
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
        // SAFETY: sigaction is plain data; all-zero is an empty mask and no flags.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = note_termination as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // Interrupted system calls restart: the program is told through the pipe.
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action` is a valid sigaction whose handler is async-signal-safe (an
        // atomic store and a write); the old action is not asked for (null).
        let rc = unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Not available on this platform.
///
/// # Errors
/// Always.
#[cfg(not(unix))]
pub fn watch_termination() -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no termination signals on this platform"))
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

/// Not available on this platform.
#[cfg(not(unix))]
pub fn wait_termination() -> Option<i32> {
    None
}
