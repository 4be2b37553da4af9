//! `IND2CompletionQueue`: results by polling (`GetResults`), and completion events by
//! an overlapped `Notify`.

use std::sync::Arc;
use std::time::Duration;

use super::adapter::{create, Adapter, AdapterShared};
use super::com::ComPtr;
use super::overlapped::Overlapped;
use super::status::{check, NdError, ND_PENDING};
use super::sys::{self, ND2_RESULT};

/// A completion queue.
pub struct CompletionQueue {
    pub(crate) ptr: ComPtr<sys::IND2CompletionQueue>,
    notify: Overlapped,
    armed: bool,
    fired: bool,
    depth: u32,
    _adapter: Arc<AdapterShared>,
}

impl Adapter {
    /// Creates a completion queue of `depth` entries (no affinity).
    ///
    /// # Errors
    /// `CreateCompletionQueue` failing (depth over `MaxCompletionQueueDepth`).
    pub fn create_cq(&self, depth: u32) -> Result<CompletionQueue, NdError> {
        let a = &self.shared;
        let ptr = create("IND2Adapter::CreateCompletionQueue", |out| {
            // SAFETY: live adapter and its overlapped file; out-pointer valid.
            unsafe {
                (a.ptr.vtbl().CreateCompletionQueue)(
                    a.ptr.as_raw(),
                    &sys::IID_IND2CompletionQueue,
                    a.file,
                    depth,
                    0,
                    0,
                    out,
                )
            }
        })?;
        Ok(CompletionQueue {
            ptr,
            notify: Overlapped::new()?,
            armed: false,
            fired: false,
            depth,
            _adapter: self.shared.clone(),
        })
    }
}

impl CompletionQueue {
    /// Its depth.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Moves up to `out.len()` results into `out`; returns how many.
    #[inline]
    pub fn poll(&mut self, out: &mut [NdCompletion]) -> usize {
        let n = u32::try_from(out.len()).unwrap_or(u32::MAX);
        // SAFETY: live CQ; `out` has room for `n` results, and NdCompletion is a
        // transparent ND2_RESULT.
        let got =
            unsafe { (self.ptr.vtbl().GetResults)(self.ptr.as_raw(), out.as_mut_ptr().cast(), n) };
        (got as usize).min(out.len())
    }

    /// Asks for an event on the next completion (`Notify(ND_CQ_NOTIFY_ANY)`). Poll
    /// once more after arming: results that arrived before do not fire it.
    ///
    /// # Errors
    /// `Notify` failing.
    pub fn arm(&mut self) -> Result<(), NdError> {
        if self.armed || self.fired {
            return Ok(());
        }
        let ov = self.notify.start();
        // SAFETY: live CQ; the OVERLAPPED stays put (boxed) until the request ends.
        let hr = unsafe { (self.ptr.vtbl().Notify)(self.ptr.as_raw(), sys::ND_CQ_NOTIFY_ANY, ov) };
        check("IND2CompletionQueue::Notify", hr)?;
        if hr == ND_PENDING {
            self.armed = true;
        } else {
            self.fired = true;
        }
        Ok(())
    }

    /// Waits up to `timeout` for the armed event: `true` when it fired (or nothing
    /// was armed), `false` on timeout, the event staying armed.
    ///
    /// # Errors
    /// The notification failing (the CQ overran or the adapter went away).
    pub fn wait(&mut self, timeout: Duration) -> Result<bool, NdError> {
        if std::mem::take(&mut self.fired) || !self.armed {
            return Ok(true);
        }
        match self.notify.wait(&self.ptr, Some(timeout))? {
            Some(hr) => {
                self.armed = false;
                check("IND2CompletionQueue::Notify", hr)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        if self.armed {
            // The provider must not complete into a freed OVERLAPPED.
            self.notify.cancel(&self.ptr);
        }
    }
}

/// What completed (`ND2_REQUEST_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// A receive.
    Receive,
    /// A send.
    Send,
    /// A memory window bind.
    Bind,
    /// A memory window invalidation.
    Invalidate,
    /// An RDMA read.
    Read,
    /// An RDMA write.
    Write,
    /// A value the header does not define.
    Other(i32),
}

/// One result of `GetResults` (`ND2_RESULT`), with the contexts read back as the
/// 64-bit ids they were posted with.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NdCompletion(pub ND2_RESULT);

// SAFETY: the two context pointers are ids we posted, never dereferenced.
unsafe impl Send for NdCompletion {}

impl NdCompletion {
    /// The request's context (the id it was posted with).
    #[inline]
    pub fn context(&self) -> u64 {
        self.0.RequestContext as usize as u64
    }

    /// The queue pair's context.
    #[inline]
    pub fn qp_context(&self) -> u64 {
        self.0.QueuePairContext as usize as u64
    }

    /// Its status.
    #[inline]
    pub fn status(&self) -> sys::HRESULT {
        self.0.Status
    }

    /// Bytes received or read.
    #[inline]
    pub fn bytes(&self) -> u32 {
        self.0.BytesTransferred
    }

    /// What completed.
    #[inline]
    pub fn kind(&self) -> RequestKind {
        match self.0.RequestType {
            sys::Nd2RequestTypeReceive => RequestKind::Receive,
            sys::Nd2RequestTypeSend => RequestKind::Send,
            sys::Nd2RequestTypeBind => RequestKind::Bind,
            sys::Nd2RequestTypeInvalidate => RequestKind::Invalidate,
            sys::Nd2RequestTypeRead => RequestKind::Read,
            sys::Nd2RequestTypeWrite => RequestKind::Write,
            other => RequestKind::Other(other),
        }
    }
}
