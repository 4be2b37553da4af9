//! `ibv_create_ah(3)`: address handles, the destination of UD sends.

use std::ptr::NonNull;
use std::sync::Arc;

use super::{sys, AddressVector, Error, ProtectionDomain};

/// A path to a remote port for UD sends. Keeps its protection domain alive. Clones
/// share the handle (a prepared UD request keeps one, so the handle outlives it).
#[derive(Clone)]
pub struct AddressHandle {
    inner: Arc<AhInner>,
}

struct AhInner {
    raw: NonNull<sys::ibv_ah>,
    _pd: ProtectionDomain,
}

// SAFETY: address handles are immutable after creation and used by thread-safe verbs.
unsafe impl Send for AhInner {}
// SAFETY: as above.
unsafe impl Sync for AhInner {}

impl Drop for AhInner {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_ah, destroyed once (the last clone), before its PD.
        let rc = unsafe { sys::ibv_destroy_ah(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_ah failed");
    }
}

impl ProtectionDomain {
    /// Creates an address handle for `av`.
    ///
    /// # Errors
    /// `ibv_create_ah` with its errno (EINVAL for a GID index the port lacks).
    pub fn create_ah(&self, av: &AddressVector) -> Result<AddressHandle, Error> {
        let mut attr = av.raw();
        // SAFETY: live PD; `attr` is a valid address vector.
        let raw = unsafe { sys::ibv_create_ah(self.as_ptr(), &mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last_os("ibv_create_ah"))?;
        Ok(AddressHandle { inner: Arc::new(AhInner { raw, _pd: self.clone() }) })
    }
}

impl AddressHandle {
    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_ah {
        self.inner.raw.as_ptr()
    }
}
