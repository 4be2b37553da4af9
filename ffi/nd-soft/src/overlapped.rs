//! Overlapped requests: completed by writing the status into the caller's OVERLAPPED
//! under one lock, and waited for on one condition variable.

use std::sync::{Condvar, Mutex};

use rdmabench_ffi::nd::status::{ND_PENDING, ND_SUCCESS};
use rdmabench_ffi::nd::sys::{IND2Overlapped, IND2OverlappedVtbl, BOOL, HRESULT, OVERLAPPED};

use crate::lock;
use crate::object::{state, unknown, Soft};

#[cfg(windows)]
#[link(name = "kernel32")]
extern "system" {
    fn SetEvent(event: rdmabench_ffi::nd::sys::HANDLE) -> BOOL;
}

static OV_LOCK: Mutex<()> = Mutex::new(());
static OV_DONE: Condvar = Condvar::new();

/// A request that returned ND_PENDING: where its status goes.
pub(crate) struct Pending(*mut OVERLAPPED);
// SAFETY: the caller keeps the OVERLAPPED alive and in place until the request
// completes; it is written only under OV_LOCK.
unsafe impl Send for Pending {}

impl Pending {
    /// Marks `ov` pending (as the I/O manager sets STATUS_PENDING).
    pub(crate) fn start(ov: *mut OVERLAPPED) -> Pending {
        let _g = lock(&OV_LOCK);
        // SAFETY: the caller's OVERLAPPED, valid until completion.
        unsafe { (*ov).Internal = ND_PENDING as u32 as usize };
        Pending(ov)
    }

    pub(crate) fn complete(self, status: HRESULT) {
        let _g = lock(&OV_LOCK);
        // SAFETY: still pending, so still valid (see `Pending`).
        unsafe { (*self.0).Internal = status as u32 as usize };
        // On Windows a caller waits on the OVERLAPPED's event, which the I/O manager
        // sets when a real provider's request completes: so must this one.
        #[cfg(windows)]
        {
            // SAFETY: as above; the handle is the caller's, open until it collects the result.
            let event = unsafe { (*self.0).hEvent };
            if !event.is_null() {
                // SAFETY: an event handle the caller created for this request.
                unsafe { SetEvent(event) };
            }
        }
        OV_DONE.notify_all();
    }
}

unsafe extern "system" fn cancel_requests<S: Soft>(this: *mut IND2Overlapped) -> HRESULT {
    // SAFETY: a live Object<S>.
    unsafe { state::<S, _>(this) }.cancel();
    ND_SUCCESS
}

unsafe extern "system" fn get_overlapped_result(
    _this: *mut IND2Overlapped,
    ov: *mut OVERLAPPED,
    wait: BOOL,
) -> HRESULT {
    let mut g = lock(&OV_LOCK);
    loop {
        // SAFETY: the caller's OVERLAPPED of a request on this object.
        let status = unsafe { (*ov).Internal } as u32 as HRESULT;
        if status != ND_PENDING || wait == 0 {
            return status;
        }
        g = OV_DONE.wait(g).unwrap_or_else(|e| e.into_inner());
    }
}

pub(crate) const fn overlapped<S: Soft>() -> IND2OverlappedVtbl {
    IND2OverlappedVtbl {
        base: unknown::<S>(),
        CancelOverlappedRequests: cancel_requests::<S>,
        GetOverlappedResult: get_overlapped_result,
    }
}
