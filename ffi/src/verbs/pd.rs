//! `ibv_alloc_pd(3)`: the protection domain that ties memory regions, queue pairs and
//! address handles together.

use std::ptr::NonNull;
use std::sync::Arc;

use super::{sys, Context, Error};

/// A protection domain. Cheap to clone (shared); it is released when the last clone
/// and every object created in it (memory regions, queue pairs, address handles) are
/// gone, and it keeps its [`Context`] open until then.
#[derive(Clone)]
pub struct ProtectionDomain {
    inner: Arc<PdInner>,
}

struct PdInner {
    raw: NonNull<sys::ibv_pd>,
    context: Context,
}

// SAFETY: verbs objects may be used from any thread (libibverbs is thread-safe).
unsafe impl Send for PdInner {}
// SAFETY: as above; `&self` methods only issue thread-safe verbs.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd, released once; every child holds a clone
        // of the Arc, so none is left.
        let rc = unsafe { sys::ibv_dealloc_pd(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_dealloc_pd failed");
    }
}

impl Context {
    /// Allocates a protection domain (`ibv_alloc_pd(3)`).
    ///
    /// # Errors
    /// `ibv_alloc_pd` with its errno (ENOMEM when the device is out of PDs).
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, Error> {
        // SAFETY: live context.
        let raw = unsafe { sys::ibv_alloc_pd(self.as_ptr()) };
        let raw =
            NonNull::new(raw).ok_or_else(|| Error::last_os("ibv_alloc_pd").on(self.name()))?;
        Ok(ProtectionDomain { inner: Arc::new(PdInner { raw, context: self.clone() }) })
    }
}

impl ProtectionDomain {
    /// The device context the domain belongs to.
    pub fn context(&self) -> &Context {
        &self.inner.context
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_pd {
        self.inner.raw.as_ptr()
    }
}
