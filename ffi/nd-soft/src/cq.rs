//! Completion queues: results in arrival order, and a notification request.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use rdmabench_ffi::nd::status::*;
use rdmabench_ffi::nd::sys::*;

use crate::lock;
use crate::object::{state, Soft};
use crate::overlapped::{overlapped, Pending};

#[derive(Clone, Copy)]
pub(crate) struct Done {
    pub(crate) status: HRESULT,
    pub(crate) bytes: u32,
    pub(crate) qp_context: usize,
    pub(crate) request_context: usize,
    pub(crate) kind: ND2_REQUEST_TYPE,
}

#[derive(Default)]
struct CqInner {
    results: VecDeque<Done>,
    notify: Option<Pending>,
}

pub(crate) struct CqShared {
    inner: Mutex<CqInner>,
}

impl CqShared {
    pub(crate) fn push(&self, d: Done) {
        let mut g = lock(&self.inner);
        // A full queue keeps the result: a test that overruns sees more than `depth`.
        g.results.push_back(d);
        if let Some(p) = g.notify.take() {
            p.complete(ND_SUCCESS);
        }
    }
}

pub(crate) struct CqState(pub(crate) Arc<CqShared>);

impl CqState {
    pub(crate) fn new() -> Self {
        CqState(Arc::new(CqShared { inner: Mutex::new(CqInner::default()) }))
    }
}

impl Soft for CqState {
    const IIDS: &'static [GUID] = &[IID_IND2CompletionQueue, IID_IND2Overlapped];
    fn cancel(&self) {
        if let Some(p) = lock(&self.0.inner).notify.take() {
            p.complete(ND_CANCELED);
        }
    }
}

unsafe extern "system" fn cq_affinity(
    _this: *mut IND2CompletionQueue,
    group: *mut u16,
    aff: *mut KAFFINITY,
) -> HRESULT {
    // SAFETY: valid out-pointers.
    unsafe {
        *group = 0;
        *aff = 1;
    }
    ND_SUCCESS
}

unsafe extern "system" fn cq_resize(_this: *mut IND2CompletionQueue, _depth: u32) -> HRESULT {
    ND_NOT_SUPPORTED
}

unsafe extern "system" fn cq_notify(
    this: *mut IND2CompletionQueue,
    kind: u32,
    ov: *mut OVERLAPPED,
) -> HRESULT {
    if kind > ND_CQ_NOTIFY_SOLICITED {
        return ND_INVALID_PARAMETER_1;
    }
    // SAFETY: a live CQ object.
    let cq = unsafe { state::<CqState, _>(this) };
    let mut g = lock(&cq.0.inner);
    if g.notify.is_some() {
        return ND_INVALID_DEVICE_STATE;
    }
    g.notify = Some(Pending::start(ov));
    ND_PENDING
}

unsafe extern "system" fn cq_get_results(
    this: *mut IND2CompletionQueue,
    out: *mut ND2_RESULT,
    n: u32,
) -> u32 {
    // SAFETY: a live CQ object.
    let cq = unsafe { state::<CqState, _>(this) };
    let mut g = lock(&cq.0.inner);
    let mut got = 0;
    while got < n {
        let Some(d) = g.results.pop_front() else { break };
        let r = ND2_RESULT {
            Status: d.status,
            BytesTransferred: d.bytes,
            QueuePairContext: d.qp_context as *mut c_void,
            RequestContext: d.request_context as *mut c_void,
            RequestType: d.kind,
        };
        // SAFETY: the caller's array has `n` entries.
        unsafe { out.add(got as usize).write(r) };
        got += 1;
    }
    got
}

pub(crate) static CQ_VTBL: IND2CompletionQueueVtbl = IND2CompletionQueueVtbl {
    base: overlapped::<CqState>(),
    GetNotifyAffinity: cq_affinity,
    Resize: cq_resize,
    Notify: cq_notify,
    GetResults: cq_get_results,
};
