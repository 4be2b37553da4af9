//! The one reference-counted pointer every NetworkDirect object is held by:
//! `AddRef` on clone and `Release` on drop, written once.

use std::ffi::c_void;
use std::ptr::NonNull;

use super::status::{check, NdError};
use super::sys::{self, GUID};

/// A NetworkDirect interface: a `#[repr(C)]` struct whose only field is a pointer to
/// its vtable, which starts with `IUnknown`'s three slots.
///
/// # Safety
/// Implementors must be such a struct, `Vtbl` its vtable type (first field:
/// `IUnknownVtbl`, directly or through its base), and `IID` its interface id.
pub unsafe trait Interface {
    /// The vtable.
    type Vtbl;
    /// Interface id (`IID_IND2…`).
    const IID: GUID;
    /// Name for errors: `IND2Adapter`.
    const NAME: &'static str;
}

macro_rules! interfaces {
    ($($iface:ident / $vtbl:ident = $iid:ident;)*) => {$(
        // SAFETY: sys declares each interface as `{ lpVtbl: *const Vtbl }` with the
        // vtable starting with IUnknown's slots, in the header's order.
        unsafe impl Interface for sys::$iface {
            type Vtbl = sys::$vtbl;
            const IID: GUID = sys::$iid;
            const NAME: &'static str = stringify!($iface);
        }
    )*};
}

interfaces! {
    IUnknown / IUnknownVtbl = IID_IUnknown;
    IND2Overlapped / IND2OverlappedVtbl = IID_IND2Overlapped;
    IND2Provider / IND2ProviderVtbl = IID_IND2Provider;
    IND2Adapter / IND2AdapterVtbl = IID_IND2Adapter;
    IND2CompletionQueue / IND2CompletionQueueVtbl = IID_IND2CompletionQueue;
    IND2MemoryRegion / IND2MemoryRegionVtbl = IID_IND2MemoryRegion;
    IND2MemoryWindow / IND2MemoryWindowVtbl = IID_IND2MemoryWindow;
    IND2QueuePair / IND2QueuePairVtbl = IID_IND2QueuePair;
    IND2Connector / IND2ConnectorVtbl = IID_IND2Connector;
    IND2Listener / IND2ListenerVtbl = IID_IND2Listener;
    IND2SharedReceiveQueue / IND2SharedReceiveQueueVtbl = IID_IND2SharedReceiveQueue;
}

/// One counted reference to a NetworkDirect object.
pub struct ComPtr<T: Interface> {
    ptr: NonNull<T>,
}

// SAFETY: NetworkDirect objects are free-threaded (no COM apartments: providers are
// called directly, "not the COM runtime"), so a reference may move between threads.
unsafe impl<T: Interface> Send for ComPtr<T> {}

impl<T: Interface> ComPtr<T> {
    /// Takes over one reference (the one a `Create…`/`Open…` call returned).
    ///
    /// # Safety
    /// `ptr` is null or a live object implementing `T` whose reference the caller
    /// owns and gives up.
    pub unsafe fn from_raw(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| ComPtr { ptr })
    }

    /// The interface pointer, for calls; the reference stays here.
    pub fn as_raw(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// The same object as `IUnknown*` (what `CreateQueuePair` and `Connect` take).
    pub fn as_unknown(&self) -> *mut sys::IUnknown {
        self.ptr.as_ptr().cast()
    }

    /// The vtable.
    pub fn vtbl(&self) -> &T::Vtbl {
        // SAFETY: by `Interface`'s contract the object starts with a pointer to a vtable
        // of type `T::Vtbl`, valid while we hold a reference.
        unsafe { &**self.ptr.as_ptr().cast::<*const T::Vtbl>() }
    }

    fn unknown_vtbl(&self) -> &sys::IUnknownVtbl {
        // SAFETY: every vtable starts with IUnknown's slots (`Interface`'s contract).
        unsafe { &**self.ptr.as_ptr().cast::<*const sys::IUnknownVtbl>() }
    }

    /// Asks the object for another of its interfaces.
    ///
    /// # Errors
    /// The object does not implement `U` (`E_NOINTERFACE`).
    pub fn query<U: Interface>(&self) -> Result<ComPtr<U>, NdError> {
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: live object; IID and out-pointer are valid for the call.
        let hr =
            unsafe { (self.unknown_vtbl().QueryInterface)(self.as_unknown(), &U::IID, &mut out) };
        check("IUnknown::QueryInterface", hr)?;
        // SAFETY: on success QueryInterface returned a counted `U` reference.
        unsafe { ComPtr::from_raw(out.cast::<U>()) }
            .ok_or(NdError::new("IUnknown::QueryInterface", super::status::ND_INTERNAL_ERROR))
    }
}

impl<T: Interface> Clone for ComPtr<T> {
    fn clone(&self) -> Self {
        // SAFETY: live object; the new reference is owned by the clone.
        unsafe { (self.unknown_vtbl().AddRef)(self.as_unknown()) };
        ComPtr { ptr: self.ptr }
    }
}

impl<T: Interface> Drop for ComPtr<T> {
    fn drop(&mut self) {
        // SAFETY: we own one reference and give it back exactly once.
        unsafe { (self.unknown_vtbl().Release)(self.as_unknown()) };
    }
}

impl<T: Interface> std::fmt::Debug for ComPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{:p}", T::NAME, self.ptr)
    }
}
