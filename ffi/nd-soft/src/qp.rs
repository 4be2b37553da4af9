//! Queue pairs: sends land in the peer's oldest posted receive (or wait for one, as
//! RC's retries would); RDMA reads and writes copy at once.

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, Weak};

use rdmabench_ffi::nd::status::*;
use rdmabench_ffi::nd::sys::*;

use crate::adapter::adapter_info;
use crate::cq::{CqShared, CqState, Done};
use crate::lock;
use crate::mr::{covers, gather, read_sges, scatter, Sge, REGIONS};
use crate::object::{state, unknown, Soft};

struct Receive {
    context: usize,
    sges: Vec<Sge>,
}

/// A send that reached a peer with no receive posted yet.
struct InboundSend {
    data: Vec<u8>,
    initiator_cq: Arc<CqShared>,
    initiator_qp: usize,
    context: usize,
    silent: bool,
}

#[derive(Default)]
pub(crate) struct QpInner {
    receives: VecDeque<Receive>,
    inbound: VecDeque<InboundSend>,
    pub(crate) peer: Option<Weak<QpShared>>,
    pub(crate) connected: bool,
}

pub(crate) struct QpShared {
    context: usize,
    receive_cq: Arc<CqShared>,
    initiator_cq: Arc<CqShared>,
    receive_depth: u32,
    inline: u32,
    pub(crate) inner: Mutex<QpInner>,
}

impl QpShared {
    fn complete(
        &self,
        cq: &CqShared,
        status: HRESULT,
        bytes: usize,
        context: usize,
        kind: ND2_REQUEST_TYPE,
    ) {
        cq.push(Done {
            status,
            bytes: bytes as u32,
            qp_context: self.context,
            request_context: context,
            kind,
        });
    }

    fn peer(&self) -> Option<Arc<QpShared>> {
        let g = lock(&self.inner);
        if !g.connected {
            return None;
        }
        g.peer.as_ref().and_then(Weak::upgrade)
    }

    /// Delivers a send's bytes into this (receiving) queue pair.
    fn deliver(&self, send: InboundSend) {
        let mut g = lock(&self.inner);
        let Some(recv) = g.receives.pop_front() else {
            g.inbound.push_back(send);
            return;
        };
        drop(g);
        self.land(recv, send);
    }

    fn land(&self, recv: Receive, send: InboundSend) {
        let regions = lock(&REGIONS);
        let outcome = scatter(regions.as_ref().unwrap_or(&HashMap::new()), &recv.sges, &send.data);
        drop(regions);
        let (mine, theirs) = match outcome {
            Ok(()) => (ND_SUCCESS, ND_SUCCESS),
            Err(e) => (e, ND_REMOTE_ERROR),
        };
        self.complete(&self.receive_cq, mine, send.data.len(), recv.context, Nd2RequestTypeReceive);
        if !(send.silent && theirs == ND_SUCCESS) {
            send.initiator_cq.push(Done {
                status: theirs,
                bytes: send.data.len() as u32,
                qp_context: send.initiator_qp,
                request_context: send.context,
                kind: Nd2RequestTypeSend,
            });
        }
    }

    /// Flushes every posted receive with ND_CANCELED.
    pub(crate) fn flush(&self) {
        let drained: Vec<Receive> = lock(&self.inner).receives.drain(..).collect();
        for r in drained {
            self.complete(&self.receive_cq, ND_CANCELED, 0, r.context, Nd2RequestTypeReceive);
        }
    }
}

pub(crate) struct QpState(pub(crate) Arc<QpShared>);

impl QpState {
    pub(crate) fn new(
        context: usize,
        receive_cq: &CqState,
        initiator_cq: &CqState,
        receive_depth: u32,
        inline: u32,
    ) -> Self {
        QpState(Arc::new(QpShared {
            context,
            receive_cq: receive_cq.0.clone(),
            initiator_cq: initiator_cq.0.clone(),
            receive_depth,
            inline,
            inner: Mutex::new(QpInner::default()),
        }))
    }
}

impl Soft for QpState {
    const IIDS: &'static [GUID] = &[IID_IND2QueuePair];
}

impl Drop for QpState {
    fn drop(&mut self) {
        lock(&self.0.inner).connected = false;
    }
}

unsafe extern "system" fn qp_flush(this: *mut IND2QueuePair) -> HRESULT {
    // SAFETY: a live QP object.
    unsafe { state::<QpState, _>(this) }.0.flush();
    ND_SUCCESS
}

/// Common checks of an initiator request; `Err` is the call's return value.
fn initiator_checks(qp: &QpShared, sges: &[Sge], flags: u32) -> Result<(), HRESULT> {
    if sges.len() > adapter_info().MaxInitiatorSge as usize {
        return Err(ND_INVALID_PARAMETER_3);
    }
    let total: usize = sges.iter().map(|s| s.len).sum();
    if flags & ND_OP_FLAG_INLINE != 0 && total > qp.inline as usize {
        return Err(ND_INVALID_PARAMETER_MIX);
    }
    Ok(())
}

unsafe extern "system" fn qp_send(
    this: *mut IND2QueuePair,
    context: *mut c_void,
    sge: *const ND2_SGE,
    n: u32,
    flags: u32,
) -> HRESULT {
    // SAFETY: a live QP object; `sge` has `n` entries.
    let (qp, sges) = unsafe { (&state::<QpState, _>(this).0, read_sges(sge, n)) };
    if let Err(hr) = initiator_checks(qp, &sges, flags) {
        return hr;
    }
    let ctx = context as usize;
    let Some(peer) = qp.peer() else {
        qp.complete(&qp.initiator_cq, ND_CONNECTION_ABORTED, 0, ctx, Nd2RequestTypeSend);
        return ND_SUCCESS;
    };
    let data = gather(lock(&REGIONS).as_ref().unwrap_or(&HashMap::new()), &sges);
    let Some(data) = data else {
        qp.complete(&qp.initiator_cq, ND_ACCESS_VIOLATION, 0, ctx, Nd2RequestTypeSend);
        return ND_SUCCESS;
    };
    peer.deliver(InboundSend {
        data,
        initiator_cq: qp.initiator_cq.clone(),
        initiator_qp: qp.context,
        context: ctx,
        silent: flags & ND_OP_FLAG_SILENT_SUCCESS != 0,
    });
    ND_SUCCESS
}

unsafe extern "system" fn qp_receive(
    this: *mut IND2QueuePair,
    context: *mut c_void,
    sge: *const ND2_SGE,
    n: u32,
) -> HRESULT {
    // SAFETY: a live QP object; `sge` has `n` entries.
    let (qp, sges) = unsafe { (&state::<QpState, _>(this).0, read_sges(sge, n)) };
    if sges.len() > adapter_info().MaxReceiveSge as usize {
        return ND_INVALID_PARAMETER_3;
    }
    let recv = Receive { context: context as usize, sges };
    let mut g = lock(&qp.inner);
    match g.inbound.pop_front() {
        Some(send) => {
            drop(g);
            qp.land(recv, send);
        }
        None => {
            if g.receives.len() >= qp.receive_depth as usize {
                return ND_INSUFFICIENT_RESOURCES;
            }
            g.receives.push_back(recv);
        }
    }
    ND_SUCCESS
}

unsafe extern "system" fn qp_bind(
    _this: *mut IND2QueuePair,
    _context: *mut c_void,
    _mr: *mut IUnknown,
    _mw: *mut IUnknown,
    _buf: *const c_void,
    _len: usize,
    _flags: u32,
) -> HRESULT {
    ND_NOT_SUPPORTED
}

unsafe extern "system" fn qp_invalidate(
    _this: *mut IND2QueuePair,
    _context: *mut c_void,
    _mw: *mut IUnknown,
    _flags: u32,
) -> HRESULT {
    ND_NOT_SUPPORTED
}

/// RDMA read or write: the copy happens at once, under the token table's lock.
///
/// # Safety
/// `this` is a live QP object; `sge` has `n` entries.
unsafe fn one_sided(
    this: *mut IND2QueuePair,
    context: *mut c_void,
    sge: *const ND2_SGE,
    n: u32,
    (remote, token): (u64, u32),
    flags: u32,
    kind: ND2_REQUEST_TYPE,
) -> HRESULT {
    // SAFETY: caller's contract.
    let (qp, sges) = unsafe { (&state::<QpState, _>(this).0, read_sges(sge, n)) };
    if let Err(hr) = initiator_checks(qp, &sges, flags) {
        return hr;
    }
    let ctx = context as usize;
    if qp.peer().is_none() {
        qp.complete(&qp.initiator_cq, ND_CONNECTION_ABORTED, 0, ctx, kind);
        return ND_SUCCESS;
    }
    let total: usize = sges.iter().map(|s| s.len).sum();
    let guard = lock(&REGIONS);
    let empty = HashMap::new();
    let regions = guard.as_ref().unwrap_or(&empty);
    let remote = remote as usize;
    let status = if kind == Nd2RequestTypeWrite {
        let remote_ok = covers(
            regions,
            token,
            remote,
            total,
            ND_MR_FLAG_ALLOW_REMOTE_WRITE & !ND_MR_FLAG_ALLOW_LOCAL_WRITE,
        );
        match (remote_ok, gather(regions, &sges)) {
            (true, Some(data)) => {
                // SAFETY: inside a registered region that allows remote writes.
                unsafe { std::ptr::copy(data.as_ptr(), remote as *mut u8, data.len()) };
                ND_SUCCESS
            }
            _ => ND_ACCESS_VIOLATION,
        }
    } else if covers(regions, token, remote, total, ND_MR_FLAG_ALLOW_REMOTE_READ) {
        // SAFETY: inside a registered region that allows remote reads.
        let data = unsafe { std::slice::from_raw_parts(remote as *const u8, total) }.to_vec();
        match scatter(regions, &sges, &data) {
            Ok(()) => ND_SUCCESS,
            Err(e) => e,
        }
    } else {
        ND_ACCESS_VIOLATION
    };
    drop(guard);
    let bytes = if status == ND_SUCCESS { total } else { 0 };
    if !(status == ND_SUCCESS && flags & ND_OP_FLAG_SILENT_SUCCESS != 0) {
        qp.complete(&qp.initiator_cq, status, bytes, ctx, kind);
    }
    ND_SUCCESS
}

unsafe extern "system" fn qp_read(
    this: *mut IND2QueuePair,
    context: *mut c_void,
    sge: *const ND2_SGE,
    n: u32,
    remote: u64,
    token: u32,
    flags: u32,
) -> HRESULT {
    // SAFETY: forwarded contract.
    unsafe { one_sided(this, context, sge, n, (remote, token), flags, Nd2RequestTypeRead) }
}

unsafe extern "system" fn qp_write(
    this: *mut IND2QueuePair,
    context: *mut c_void,
    sge: *const ND2_SGE,
    n: u32,
    remote: u64,
    token: u32,
    flags: u32,
) -> HRESULT {
    // SAFETY: forwarded contract.
    unsafe { one_sided(this, context, sge, n, (remote, token), flags, Nd2RequestTypeWrite) }
}

pub(crate) static QP_VTBL: IND2QueuePairVtbl = IND2QueuePairVtbl {
    base: unknown::<QpState>(),
    Flush: qp_flush,
    Send: qp_send,
    Receive: qp_receive,
    Bind: qp_bind,
    Invalidate: qp_invalidate,
    Read: qp_read,
    Write: qp_write,
};
