//! Page-aligned, zeroed memory that a registered region owns (verbs and NetworkDirect
//! alike): adapters pin whole pages, and a page-aligned buffer pins no stranger's bytes.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// The page size (4 KiB where the OS does not say).
fn page_size() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(page).unwrap_or(4096).max(4096)
    }
    #[cfg(not(unix))]
    {
        4096
    }
}

/// `len` zeroed bytes at a page boundary, freed on drop.
pub(crate) struct PageBuffer {
    pub(crate) ptr: NonNull<u8>,
    backing: Backing,
}

/// Where a buffer's pages come from.
enum Backing {
    /// The allocator, with this layout.
    Heap(Layout),
    /// An anonymous mapping of huge pages, this long.
    #[cfg(target_os = "linux")]
    Huge(usize),
}

impl PageBuffer {
    /// Allocates; `None` when the allocator refuses.
    pub(crate) fn new(len: usize) -> Option<Self> {
        let layout = Layout::from_size_align(len.max(1), page_size()).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })?;
        Some(PageBuffer { ptr, backing: Backing::Heap(layout) })
    }

    /// Maps `len` bytes, rounded up to whole huge pages of `huge_page` bytes, from
    /// the kernel's reserved huge pages (`MAP_HUGETLB`; zeroed, as every anonymous
    /// mapping). Returns the errno: ENOMEM when too few are free (`vm.nr_hugepages`).
    #[cfg(target_os = "linux")]
    pub(crate) fn huge(len: usize, huge_page: usize) -> Result<Self, i32> {
        let len = len.max(1).div_ceil(huge_page.max(1)).saturating_mul(huge_page.max(1));
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: an anonymous private mapping at an address the kernel picks: it
        // touches no existing memory; the result is checked before use.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(libc::ENOMEM)?;
        Ok(PageBuffer { ptr, backing: Backing::Huge(len) })
    }
}

impl Drop for PageBuffer {
    fn drop(&mut self) {
        match self.backing {
            // SAFETY: allocated in `new` with this layout, freed once.
            Backing::Heap(layout) => unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) },
            #[cfg(target_os = "linux")]
            Backing::Huge(len) => {
                // SAFETY: mapped in `huge` with this length, unmapped once.
                let rc = unsafe { libc::munmap(self.ptr.as_ptr().cast(), len) };
                debug_assert_eq!(rc, 0, "munmap failed");
            }
        }
    }
}

/// Reads `*byte` without caching until it is `expect`, at most `reads` times: the reads
/// left when one saw it, counting that one (`reads` when the first did), or 0 when none
/// did. What a region's `wait_u8` spins on, for verbs and NetworkDirect alike: a
/// countdown, five instructions a pass (not `1..=reads`: an inclusive range's iterator
/// costs a pass six more).
///
/// # Safety
/// `byte` must be valid for reads for the whole call.
#[inline(always)]
pub(crate) unsafe fn wait_byte(byte: *const u8, expect: u8, reads: u32) -> u32 {
    let mut left = reads;
    while left > 0 {
        // SAFETY: valid for reads (the caller's promise); a volatile read makes every
        // pass observe writes made by the device.
        if unsafe { std::ptr::read_volatile(byte) } == expect {
            return left;
        }
        left -= 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_buffers_are_aligned_and_zeroed() {
        let b = PageBuffer::new(10_000).unwrap();
        assert_eq!(b.ptr.as_ptr() as usize % 4096, 0);
        // SAFETY: 10_000 bytes were allocated.
        let bytes = unsafe { std::slice::from_raw_parts(b.ptr.as_ptr(), 10_000) };
        assert!(bytes.iter().all(|&x| x == 0));
    }

    #[test]
    fn a_wait_on_a_byte_says_the_reads_left_when_it_saw_it() {
        let b = [7u8];
        // SAFETY: `b` lives for the calls.
        let (seen, unseen, none) = unsafe {
            (wait_byte(b.as_ptr(), 7, 5), wait_byte(b.as_ptr(), 8, 5), wait_byte(b.as_ptr(), 7, 0))
        };
        assert_eq!((seen, unseen, none), (5, 0, 0));
    }
}
