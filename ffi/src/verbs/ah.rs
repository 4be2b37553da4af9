//! `ibv_create_ah(3)`: address handles, the destination of UD sends.

use std::ptr::NonNull;

use super::{sys, AddressVector, Error, ProtectionDomain};

/// A path to a remote port for UD sends. Keeps its protection domain alive.
pub struct AddressHandle {
    raw: NonNull<sys::ibv_ah>,
    _pd: ProtectionDomain,
}

// SAFETY: address handles are immutable after creation and used by thread-safe verbs.
unsafe impl Send for AddressHandle {}
// SAFETY: as above.
unsafe impl Sync for AddressHandle {}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_ah, destroyed once, before its PD.
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
        Ok(AddressHandle { raw, _pd: self.clone() })
    }
}

impl AddressHandle {
    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_ah {
        self.raw.as_ptr()
    }
}
