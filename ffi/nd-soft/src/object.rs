//! COM objects made here: a vtable pointer, a reference count and the state, with
//! `IUnknown` (QueryInterface, AddRef, Release) written once for every kind, and the
//! count of live objects tests check.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use rdmabench_ffi::nd::status::ND_SUCCESS;
use rdmabench_ffi::nd::sys::{IID_IUnknown, IUnknown, IUnknownVtbl, GUID, HRESULT};

const E_NOINTERFACE: HRESULT = 0x8000_4002_u32 as HRESULT;

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Objects created and not yet released (all kinds, all adapters).
pub fn live_objects() -> usize {
    LIVE.load(Ordering::SeqCst)
}

#[repr(C)]
struct Object<S> {
    vtbl: *const c_void,
    refs: AtomicU32,
    state: S,
}

pub(crate) trait Soft: Sized + Send + 'static {
    /// Interfaces besides IUnknown that QueryInterface answers.
    const IIDS: &'static [GUID];
    /// Cancels pending overlapped requests (objects deriving from IND2Overlapped).
    fn cancel(&self) {}
}

pub(crate) fn new_object<V, S: Soft>(vtbl: &'static V, state: S) -> *mut c_void {
    LIVE.fetch_add(1, Ordering::SeqCst);
    let o = Box::new(Object {
        vtbl: (vtbl as *const V).cast::<c_void>(),
        refs: AtomicU32::new(1),
        state,
    });
    Box::into_raw(o).cast()
}

/// # Safety
/// `this` is an `Object<S>` with at least one reference held by the caller.
pub(crate) unsafe fn state<'a, S, T>(this: *mut T) -> &'a S {
    // SAFETY: caller's contract.
    unsafe { &(*this.cast::<Object<S>>()).state }
}

/// The state of `p` if it is one of ours of kind `S` (its vtable is `vtbl`).
///
/// # Safety
/// `p` is null or a live COM object.
pub(crate) unsafe fn ours<'a, S, V>(p: *mut IUnknown, vtbl: &'static V) -> Option<&'a S> {
    if p.is_null() {
        return None;
    }
    // SAFETY: every COM object starts with its vtable pointer.
    let v = unsafe { *p.cast::<*const c_void>() };
    // SAFETY: same vtable, so it is an Object<S> (each vtable belongs to one S).
    (v == (vtbl as *const V).cast()).then(|| unsafe { state::<S, _>(p) })
}

/// The common end of every `Create…`/`Open…`: the interface asked for must be the
/// object's own (`S::IIDS[0]`); the object is made with one reference for the caller.
///
/// # Safety
/// `iid` and `out` are valid pointers (the COM contract of those calls).
pub(crate) unsafe fn make<V, S: Soft>(
    iid: *const GUID,
    vtbl: &'static V,
    state: impl FnOnce() -> S,
    out: *mut *mut c_void,
) -> HRESULT {
    // SAFETY: caller's contract.
    if unsafe { *iid } != S::IIDS[0] {
        return E_NOINTERFACE;
    }
    // SAFETY: caller's contract.
    unsafe { *out = new_object(vtbl, state()) };
    ND_SUCCESS
}

unsafe extern "system" fn query_interface<S: Soft>(
    this: *mut IUnknown,
    riid: *const GUID,
    ppv: *mut *mut c_void,
) -> HRESULT {
    // SAFETY: COM contract: valid IID and out-pointer.
    let iid = unsafe { *riid };
    if iid == IID_IUnknown || S::IIDS.contains(&iid) {
        // SAFETY: live object.
        unsafe { add_ref::<S>(this) };
        // SAFETY: valid out-pointer.
        unsafe { *ppv = this.cast() };
        ND_SUCCESS
    } else {
        // SAFETY: valid out-pointer.
        unsafe { *ppv = std::ptr::null_mut() };
        E_NOINTERFACE
    }
}

unsafe extern "system" fn add_ref<S: Soft>(this: *mut IUnknown) -> u32 {
    // SAFETY: a live Object<S>.
    unsafe { (*this.cast::<Object<S>>()).refs.fetch_add(1, Ordering::SeqCst) + 1 }
}

unsafe extern "system" fn release<S: Soft>(this: *mut IUnknown) -> u32 {
    let o = this.cast::<Object<S>>();
    // SAFETY: a live Object<S>; the caller gives up one reference.
    let left = unsafe { (*o).refs.fetch_sub(1, Ordering::SeqCst) } - 1;
    if left == 0 {
        // SAFETY: the last reference: made by `new_object` as a Box, freed once.
        drop(unsafe { Box::from_raw(o) });
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
    left
}

pub(crate) const fn unknown<S: Soft>() -> IUnknownVtbl {
    IUnknownVtbl {
        QueryInterface: query_interface::<S>,
        AddRef: add_ref::<S>,
        Release: release::<S>,
    }
}
