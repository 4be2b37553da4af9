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
    layout: Layout,
}

impl PageBuffer {
    /// Allocates; `None` when the allocator refuses.
    pub(crate) fn new(len: usize) -> Option<Self> {
        let layout = Layout::from_size_align(len.max(1), page_size()).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })?;
        Some(PageBuffer { ptr, layout })
    }
}

impl Drop for PageBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
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
}
