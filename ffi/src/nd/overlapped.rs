//! Asynchronous requests: an `OVERLAPPED` at a fixed address, and the two paths every
//! caller must handle — a request that finished at once, and one that returned
//! `ND_PENDING` and completes later (NetworkDirect SPI, "Asynchronous operations").

use std::time::Duration;
#[cfg(not(windows))]
use std::time::Instant;

use super::com::{ComPtr, Interface};
use super::status::{self, check, NdError, ND_PENDING};
use super::sys::{self, OVERLAPPED};

/// Objects that derive from `IND2Overlapped` (their vtables start with its slots).
///
/// # Safety
/// The interface's vtable must begin with `IND2OverlappedVtbl`.
pub unsafe trait Overlappable: Interface {}

// SAFETY: each of these vtables starts with `base: IND2OverlappedVtbl` (sys.rs).
unsafe impl Overlappable for sys::IND2CompletionQueue {}
// SAFETY: as above.
unsafe impl Overlappable for sys::IND2MemoryRegion {}
// SAFETY: as above.
unsafe impl Overlappable for sys::IND2Connector {}
// SAFETY: as above.
unsafe impl Overlappable for sys::IND2Listener {}
// SAFETY: as above.
unsafe impl Overlappable for sys::IND2SharedReceiveQueue {}
// SAFETY: it is the base itself.
unsafe impl Overlappable for sys::IND2Overlapped {}

fn base<T: Overlappable>(obj: &ComPtr<T>) -> (&sys::IND2OverlappedVtbl, *mut sys::IND2Overlapped) {
    // SAFETY: `Overlappable` guarantees the vtable starts with IND2Overlapped's slots;
    // the object is live while `obj` holds its reference.
    let vtbl = unsafe { &**obj.as_raw().cast::<*const sys::IND2OverlappedVtbl>() };
    (vtbl, obj.as_raw().cast())
}

/// An `OVERLAPPED` that does not move while a request uses it, with the event a
/// Windows caller waits on.
pub struct Overlapped {
    ov: Box<OVERLAPPED>,
    #[cfg(windows)]
    event: super::win::Event,
}

// SAFETY: the OVERLAPPED is plain data owned here; the event handle is a kernel
// object usable from any thread.
unsafe impl Send for Overlapped {}

impl Overlapped {
    /// A fresh one.
    ///
    /// # Errors
    /// Windows could not create its event.
    pub fn new() -> Result<Self, NdError> {
        #[cfg(windows)]
        {
            let event = super::win::Event::new()?;
            let mut ov = Box::<OVERLAPPED>::default();
            ov.hEvent = event.handle();
            Ok(Overlapped { ov, event })
        }
        #[cfg(not(windows))]
        Ok(Overlapped { ov: Box::default() })
    }

    /// Readies it for a new request and returns the pointer to pass.
    pub fn start(&mut self) -> *mut OVERLAPPED {
        self.ov.Internal = 0;
        self.ov.InternalHigh = 0;
        #[cfg(windows)]
        self.event.reset();
        &mut *self.ov
    }

    fn ptr(&mut self) -> *mut OVERLAPPED {
        &mut *self.ov
    }

    /// Waits up to `timeout` (forever with None) for the pending request on `obj`:
    /// `Some(status)` once it completed, `None` while it is still pending.
    ///
    /// # Errors
    /// The wait itself failing (Windows).
    pub fn wait<T: Overlappable>(
        &mut self,
        obj: &ComPtr<T>,
        timeout: Option<Duration>,
    ) -> Result<Option<sys::HRESULT>, NdError> {
        let (vtbl, this) = base(obj);
        let result = |ov: *mut OVERLAPPED, wait: bool| {
            // SAFETY: live object; `ov` is the OVERLAPPED of its pending request.
            unsafe { (vtbl.GetOverlappedResult)(this, ov, i32::from(wait)) }
        };
        let Some(timeout) = timeout else {
            return Ok(Some(result(self.ptr(), true)));
        };
        #[cfg(windows)]
        {
            if !self.event.wait(timeout)? {
                return Ok(None);
            }
            let hr = result(self.ptr(), false);
            Ok((hr != ND_PENDING).then_some(hr))
        }
        #[cfg(not(windows))]
        {
            // Without Windows events (the in-process test provider): poll, backing off.
            let deadline = Instant::now() + timeout;
            let mut nap = Duration::from_micros(20);
            loop {
                let hr = result(self.ptr(), false);
                if hr != ND_PENDING {
                    return Ok(Some(hr));
                }
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(nap.min(deadline - now));
                nap = (nap * 2).min(Duration::from_millis(1));
            }
        }
    }

    /// Finishes a request `call` that returned `hr` on `obj`: at once when it did not
    /// pend, else waiting up to `timeout`. A request still pending then is canceled
    /// (and its completion collected, so the OVERLAPPED is free again).
    ///
    /// # Errors
    /// The request's failure status, or `ND_IO_TIMEOUT` when the wait ran out.
    pub fn finish<T: Overlappable>(
        &mut self,
        obj: &ComPtr<T>,
        call: &'static str,
        hr: sys::HRESULT,
        timeout: Option<Duration>,
    ) -> Result<(), NdError> {
        if hr != ND_PENDING {
            return check(call, hr).map(drop);
        }
        match self.wait(obj, timeout)? {
            Some(hr) => check(call, hr).map(drop),
            None => {
                self.cancel(obj);
                Err(NdError::new(call, status::ND_IO_TIMEOUT))
            }
        }
    }

    /// Cancels every pending request on `obj` and collects this one's completion.
    pub fn cancel<T: Overlappable>(&mut self, obj: &ComPtr<T>) {
        let (vtbl, this) = base(obj);
        // SAFETY: live object.
        unsafe { (vtbl.CancelOverlappedRequests)(this) };
        // SAFETY: as in `wait`; after the cancel the request completes (ND_CANCELED).
        unsafe { (vtbl.GetOverlappedResult)(this, self.ptr(), 1) };
    }
}
