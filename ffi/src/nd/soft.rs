//! A NetworkDirect provider in software, for tests: it fills the same vtables a
//! vendor DLL does, over in-process memory, so the ND wrappers and the test loops run
//! over ND in Linux CI.
//!
//! One loopback adapter owns `127.0.0.1`. Registration hands out tokens from one
//! process-wide table; queue pairs copy at once on write and read, and a send lands in
//! the peer's oldest posted receive (or waits for one, as RC's retries would);
//! completions go to the queues given at creation, overlapped requests complete
//! through the `OVERLAPPED` the caller passed, and a listener's requests are matched
//! to connectors by port. Checks a real adapter makes are made here too: a wrong or
//! stale token, a range outside its region or missing rights complete with
//! `ND_ACCESS_VIOLATION`; a receive too small with `ND_DATA_OVERRUN`; work on a queue
//! pair that is not (or no longer) connected with `ND_CONNECTION_ABORTED`.
//! [`live_objects`] counts objects not yet released, so tests can check that every
//! reference was given back.
//!
//! Built only with the `soft-provider` feature, which only tests enable.

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};

use super::addr::{self, SockAddr};
use super::com::ComPtr;
use super::provider::{self, Provider};
use super::status::*;
use super::sys::*;

/// The address the soft adapter owns.
pub const ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Its adapter id.
pub const ADAPTER_ID: u64 = 0x50F7;
/// Largest inline payload it accepts.
pub const MAX_INLINE: u32 = 128;

const E_NOINTERFACE: HRESULT = 0x8000_4002_u32 as HRESULT;
const FAKE_FILE: usize = 0x50F7_F11E;

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Objects created and not yet released (all kinds, all adapters).
pub fn live_objects() -> usize {
    LIVE.load(Ordering::SeqCst)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The provider, as `DllGetClassObject` would return it.
pub fn provider() -> Provider {
    let raw = new_object(&PROVIDER_VTBL, ProviderState);
    // SAFETY: a fresh object with one reference, which the ComPtr takes.
    let ptr = unsafe { ComPtr::from_raw(raw.cast::<IND2Provider>()) }.expect("allocated above");
    Provider::new(ptr, "rdmabench software provider (in-process, tests only)")
}

/// Registers the provider with [`provider::discover`] once per process.
pub fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| provider::register(provider()));
}

// ---------------------------------------------------------------------------------
// Objects: a vtable pointer, a reference count, the state.

#[repr(C)]
struct Object<S> {
    vtbl: *const c_void,
    refs: AtomicU32,
    state: S,
}

trait Soft: Sized + Send + 'static {
    /// Interfaces besides IUnknown that QueryInterface answers.
    const IIDS: &'static [GUID];
    /// Cancels pending overlapped requests (objects deriving from IND2Overlapped).
    fn cancel(&self) {}
}

fn new_object<V, S: Soft>(vtbl: &'static V, state: S) -> *mut c_void {
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
unsafe fn state<'a, S, T>(this: *mut T) -> &'a S {
    // SAFETY: caller's contract.
    unsafe { &(*this.cast::<Object<S>>()).state }
}

/// The state of `p` if it is one of ours of kind `S` (its vtable is `vtbl`).
///
/// # Safety
/// `p` is null or a live COM object.
unsafe fn ours<'a, S, V>(p: *mut IUnknown, vtbl: &'static V) -> Option<&'a S> {
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
unsafe fn make<V, S: Soft>(
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

const fn unknown<S: Soft>() -> IUnknownVtbl {
    IUnknownVtbl {
        QueryInterface: query_interface::<S>,
        AddRef: add_ref::<S>,
        Release: release::<S>,
    }
}

// ---------------------------------------------------------------------------------
// Overlapped requests: completed by writing the status into the caller's OVERLAPPED
// under one lock, and waited for on one condition variable.

static OV_LOCK: Mutex<()> = Mutex::new(());
static OV_DONE: Condvar = Condvar::new();

/// A request that returned ND_PENDING: where its status goes.
struct Pending(*mut OVERLAPPED);
// SAFETY: the caller keeps the OVERLAPPED alive and in place until the request
// completes; it is written only under OV_LOCK.
unsafe impl Send for Pending {}

impl Pending {
    /// Marks `ov` pending (as the I/O manager sets STATUS_PENDING).
    fn start(ov: *mut OVERLAPPED) -> Pending {
        let _g = lock(&OV_LOCK);
        // SAFETY: the caller's OVERLAPPED, valid until completion.
        unsafe { (*ov).Internal = ND_PENDING as u32 as usize };
        Pending(ov)
    }

    fn complete(self, status: HRESULT) {
        let _g = lock(&OV_LOCK);
        // SAFETY: still pending, so still valid (see `Pending`).
        unsafe { (*self.0).Internal = status as u32 as usize };
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

const fn overlapped<S: Soft>() -> IND2OverlappedVtbl {
    IND2OverlappedVtbl {
        base: unknown::<S>(),
        CancelOverlappedRequests: cancel_requests::<S>,
        GetOverlappedResult: get_overlapped_result,
    }
}

// ---------------------------------------------------------------------------------
// Provider

struct ProviderState;
impl Soft for ProviderState {
    const IIDS: &'static [GUID] = &[IID_IND2Provider];
}

unsafe extern "system" fn query_address_list(
    list: *mut SOCKET_ADDRESS_LIST,
    len: *mut u32,
) -> HRESULT {
    let addrs = [SocketAddr::new(ADDRESS, 0)];
    // SAFETY: `len` is valid; `list` is null or has `*len` bytes (caller's contract).
    let room = unsafe { *len } as usize;
    // SAFETY: as above.
    let need = unsafe { addr::write_list(&addrs, list.cast(), room) };
    let fits = !list.is_null() && need <= room;
    // SAFETY: valid out-pointer.
    unsafe { *len = need as u32 };
    if fits {
        ND_SUCCESS
    } else {
        ND_BUFFER_OVERFLOW
    }
}

unsafe extern "system" fn provider_query_address_list(
    _this: *mut IND2Provider,
    list: *mut SOCKET_ADDRESS_LIST,
    len: *mut u32,
) -> HRESULT {
    // SAFETY: forwarded contract.
    unsafe { query_address_list(list, len) }
}

unsafe extern "system" fn provider_resolve_address(
    _this: *mut IND2Provider,
    address: *const SOCKADDR,
    len: u32,
    id: *mut u64,
) -> HRESULT {
    // SAFETY: the caller passes `len` readable bytes.
    match unsafe { addr::read(address, len as usize) } {
        Some(a) if a.ip() == ADDRESS => {
            // SAFETY: valid out-pointer.
            unsafe { *id = ADAPTER_ID };
            ND_SUCCESS
        }
        _ => ND_INVALID_ADDRESS,
    }
}

unsafe extern "system" fn provider_open_adapter(
    _this: *mut IND2Provider,
    iid: *const GUID,
    id: u64,
    out: *mut *mut c_void,
) -> HRESULT {
    if id != ADAPTER_ID {
        return ND_INVALID_PARAMETER_2;
    }
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &ADAPTER_VTBL, || AdapterState, out) }
}

static PROVIDER_VTBL: IND2ProviderVtbl = IND2ProviderVtbl {
    base: unknown::<ProviderState>(),
    QueryAddressList: provider_query_address_list,
    ResolveAddress: provider_resolve_address,
    OpenAdapter: provider_open_adapter,
};

// ---------------------------------------------------------------------------------
// Adapter

struct AdapterState;
impl Soft for AdapterState {
    const IIDS: &'static [GUID] = &[IID_IND2Adapter];
}

/// What the soft adapter reports.
pub fn adapter_info() -> ND2_ADAPTER_INFO {
    ND2_ADAPTER_INFO {
        InfoVersion: ND_VERSION_2,
        VendorId: 0,
        DeviceId: 0,
        AdapterId: ADAPTER_ID,
        MaxRegistrationSize: 1 << 32,
        MaxWindowSize: 1 << 32,
        MaxInitiatorSge: 4,
        MaxReceiveSge: 4,
        MaxReadSge: 4,
        MaxTransferLength: 1 << 30,
        MaxInlineDataSize: MAX_INLINE,
        MaxInboundReadLimit: 16,
        MaxOutboundReadLimit: 16,
        MaxReceiveQueueDepth: 16384,
        MaxInitiatorQueueDepth: 16384,
        MaxSharedReceiveQueueDepth: 0,
        MaxCompletionQueueDepth: 65536,
        InlineRequestThreshold: MAX_INLINE,
        LargeRequestThreshold: 1 << 20,
        MaxCallerData: 56,
        MaxCalleeData: 148,
        AdapterFlags: ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED
            | ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED,
    }
}

unsafe extern "system" fn adapter_create_overlapped_file(
    _this: *mut IND2Adapter,
    h: *mut HANDLE,
) -> HRESULT {
    // SAFETY: valid out-pointer. Not an OS handle: nothing here waits on it.
    unsafe { *h = FAKE_FILE as HANDLE };
    ND_SUCCESS
}

unsafe extern "system" fn adapter_query(
    _this: *mut IND2Adapter,
    info: *mut ND2_ADAPTER_INFO,
    len: *mut u32,
) -> HRESULT {
    let need = std::mem::size_of::<ND2_ADAPTER_INFO>() as u32;
    // SAFETY: valid length pointer; `info` is null or has `*len` bytes.
    unsafe {
        if info.is_null() || *len < need {
            *len = need;
            return ND_BUFFER_OVERFLOW;
        }
        if (*info).InfoVersion != ND_VERSION_2 {
            return ND_INVALID_PARAMETER;
        }
        *info = adapter_info();
        *len = need;
    }
    ND_SUCCESS
}

unsafe extern "system" fn adapter_query_address_list(
    _this: *mut IND2Adapter,
    list: *mut SOCKET_ADDRESS_LIST,
    len: *mut u32,
) -> HRESULT {
    // SAFETY: forwarded contract.
    unsafe { query_address_list(list, len) }
}

unsafe extern "system" fn adapter_create_cq(
    _this: *mut IND2Adapter,
    iid: *const GUID,
    _file: HANDLE,
    depth: u32,
    _group: u16,
    _affinity: KAFFINITY,
    out: *mut *mut c_void,
) -> HRESULT {
    if depth == 0 || depth > adapter_info().MaxCompletionQueueDepth {
        return ND_INVALID_PARAMETER_3;
    }
    let cq = || CqState(Arc::new(CqShared { inner: Mutex::new(CqInner::default()) }));
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &CQ_VTBL, cq, out) }
}

unsafe extern "system" fn adapter_create_mr(
    _this: *mut IND2Adapter,
    iid: *const GUID,
    _file: HANDLE,
    out: *mut *mut c_void,
) -> HRESULT {
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &MR_VTBL, || MrState(Mutex::new(None)), out) }
}

unsafe extern "system" fn adapter_create_mw(
    _this: *mut IND2Adapter,
    _iid: *const GUID,
    out: *mut *mut c_void,
) -> HRESULT {
    // SAFETY: valid out-pointer.
    unsafe { *out = std::ptr::null_mut() };
    ND_NOT_SUPPORTED
}

unsafe extern "system" fn adapter_create_srq(
    _this: *mut IND2Adapter,
    _iid: *const GUID,
    _file: HANDLE,
    _depth: u32,
    _sge: u32,
    _threshold: u32,
    _group: u16,
    _affinity: KAFFINITY,
    out: *mut *mut c_void,
) -> HRESULT {
    // SAFETY: valid out-pointer.
    unsafe { *out = std::ptr::null_mut() };
    ND_NOT_SUPPORTED
}

unsafe extern "system" fn adapter_create_qp(
    _this: *mut IND2Adapter,
    iid: *const GUID,
    receive_cq: *mut IUnknown,
    initiator_cq: *mut IUnknown,
    context: *mut c_void,
    receive_depth: u32,
    _initiator_depth: u32,
    receive_sge: u32,
    initiator_sge: u32,
    inline: u32,
    out: *mut *mut c_void,
) -> HRESULT {
    // SAFETY: the caller passes live COM objects (or null).
    let (Some(rcq), Some(icq)) = (unsafe { ours::<CqState, _>(receive_cq, &CQ_VTBL) }, unsafe {
        ours::<CqState, _>(initiator_cq, &CQ_VTBL)
    }) else {
        return ND_INVALID_PARAMETER_2;
    };
    let info = adapter_info();
    if receive_sge > info.MaxReceiveSge || initiator_sge > info.MaxInitiatorSge {
        return ND_INVALID_PARAMETER_MIX;
    }
    if inline > info.MaxInlineDataSize {
        return ND_INVALID_PARAMETER_9;
    }
    let qp = || {
        QpState(Arc::new(QpShared {
            context: context as usize,
            receive_cq: rcq.0.clone(),
            initiator_cq: icq.0.clone(),
            receive_depth,
            inline,
            inner: Mutex::new(QpInner::default()),
        }))
    };
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &QP_VTBL, qp, out) }
}

unsafe extern "system" fn adapter_create_qp_srq(
    _this: *mut IND2Adapter,
    _iid: *const GUID,
    _rcq: *mut IUnknown,
    _icq: *mut IUnknown,
    _srq: *mut IUnknown,
    _context: *mut c_void,
    _depth: u32,
    _sge: u32,
    _inline: u32,
    out: *mut *mut c_void,
) -> HRESULT {
    // SAFETY: valid out-pointer.
    unsafe { *out = std::ptr::null_mut() };
    ND_NOT_SUPPORTED
}

unsafe extern "system" fn adapter_create_connector(
    _this: *mut IND2Adapter,
    iid: *const GUID,
    _file: HANDLE,
    out: *mut *mut c_void,
) -> HRESULT {
    let c = || ConnState(Arc::new(ConnShared { inner: Mutex::new(ConnInner::default()) }));
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &CONNECTOR_VTBL, c, out) }
}

unsafe extern "system" fn adapter_create_listener(
    _this: *mut IND2Adapter,
    iid: *const GUID,
    _file: HANDLE,
    out: *mut *mut c_void,
) -> HRESULT {
    let l = || ListenerState(Arc::new(ListenShared { inner: Mutex::new(ListenInner::default()) }));
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &LISTENER_VTBL, l, out) }
}

static ADAPTER_VTBL: IND2AdapterVtbl = IND2AdapterVtbl {
    base: unknown::<AdapterState>(),
    CreateOverlappedFile: adapter_create_overlapped_file,
    Query: adapter_query,
    QueryAddressList: adapter_query_address_list,
    CreateCompletionQueue: adapter_create_cq,
    CreateMemoryRegion: adapter_create_mr,
    CreateMemoryWindow: adapter_create_mw,
    CreateSharedReceiveQueue: adapter_create_srq,
    CreateQueuePair: adapter_create_qp,
    CreateQueuePairWithSrq: adapter_create_qp_srq,
    CreateConnector: adapter_create_connector,
    CreateListener: adapter_create_listener,
};

// ---------------------------------------------------------------------------------
// Completion queue

#[derive(Clone, Copy)]
struct Done {
    status: HRESULT,
    bytes: u32,
    qp_context: usize,
    request_context: usize,
    kind: ND2_REQUEST_TYPE,
}

#[derive(Default)]
struct CqInner {
    results: VecDeque<Done>,
    notify: Option<Pending>,
}

struct CqShared {
    inner: Mutex<CqInner>,
}

impl CqShared {
    fn push(&self, d: Done) {
        let mut g = lock(&self.inner);
        // A full queue keeps the result: a test that overruns sees more than `depth`.
        g.results.push_back(d);
        if let Some(p) = g.notify.take() {
            p.complete(ND_SUCCESS);
        }
    }
}

struct CqState(Arc<CqShared>);
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

static CQ_VTBL: IND2CompletionQueueVtbl = IND2CompletionQueueVtbl {
    base: overlapped::<CqState>(),
    GetNotifyAffinity: cq_affinity,
    Resize: cq_resize,
    Notify: cq_notify,
    GetResults: cq_get_results,
};

// ---------------------------------------------------------------------------------
// Memory regions: one process-wide token table, locked while memory is copied, so
// a region deregistered is never touched again.

#[derive(Clone, Copy)]
struct Region {
    addr: usize,
    len: usize,
    flags: u32,
}

static REGIONS: Mutex<Option<HashMap<u32, Region>>> = Mutex::new(None);
static NEXT_TOKEN: AtomicU32 = AtomicU32::new(0x1000);

struct MrState(Mutex<Option<u32>>);
impl Soft for MrState {
    const IIDS: &'static [GUID] = &[IID_IND2MemoryRegion, IID_IND2Overlapped];
}

impl Drop for MrState {
    fn drop(&mut self) {
        if let Some(token) = lock(&self.0).take() {
            lock(&REGIONS).get_or_insert_with(HashMap::new).remove(&token);
        }
    }
}

unsafe extern "system" fn mr_register(
    this: *mut IND2MemoryRegion,
    buf: *const c_void,
    len: usize,
    flags: u32,
    ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live MR object.
    let mr = unsafe { state::<MrState, _>(this) };
    let mut token = lock(&mr.0);
    if token.is_some() {
        return ND_INVALID_DEVICE_STATE;
    }
    if buf.is_null() || len == 0 {
        return ND_INVALID_PARAMETER_1;
    }
    let t = NEXT_TOKEN.fetch_add(1, Ordering::SeqCst);
    lock(&REGIONS)
        .get_or_insert_with(HashMap::new)
        .insert(t, Region { addr: buf as usize, len, flags });
    *token = Some(t);
    // Registration "pends" and is already done: callers take the asynchronous path.
    Pending::start(ov).complete(ND_SUCCESS);
    ND_PENDING
}

unsafe extern "system" fn mr_deregister(
    this: *mut IND2MemoryRegion,
    _ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live MR object.
    let mr = unsafe { state::<MrState, _>(this) };
    match lock(&mr.0).take() {
        Some(t) => {
            lock(&REGIONS).get_or_insert_with(HashMap::new).remove(&t);
            ND_SUCCESS
        }
        None => ND_INVALID_DEVICE_STATE,
    }
}

unsafe extern "system" fn mr_token(this: *mut IND2MemoryRegion) -> u32 {
    // SAFETY: a live MR object.
    lock(&unsafe { state::<MrState, _>(this) }.0).unwrap_or(0)
}

static MR_VTBL: IND2MemoryRegionVtbl = IND2MemoryRegionVtbl {
    base: overlapped::<MrState>(),
    Register: mr_register,
    Deregister: mr_deregister,
    GetLocalToken: mr_token,
    GetRemoteToken: mr_token,
};

/// An SGE list checked against the token table.
#[derive(Clone, Copy)]
struct Sge {
    addr: usize,
    len: usize,
    token: u32,
}

/// Reads `n` SGEs of the caller.
///
/// # Safety
/// `sge` points to `n` entries (or `n` is 0).
unsafe fn read_sges(sge: *const ND2_SGE, n: u32) -> Vec<Sge> {
    (0..n as usize)
        .map(|i| {
            // SAFETY: caller's contract.
            let s = unsafe { *sge.add(i) };
            Sge {
                addr: s.Buffer as usize,
                len: s.BufferLength as usize,
                token: s.MemoryRegionToken,
            }
        })
        .collect()
}

fn covers(regions: &HashMap<u32, Region>, token: u32, addr: usize, len: usize, need: u32) -> bool {
    regions.get(&token).is_some_and(|r| {
        addr >= r.addr
            && addr.checked_add(len).is_some_and(|end| end <= r.addr + r.len)
            && r.flags & need == need
    })
}

/// Gathers the bytes the local SGEs name; `None` when one is not registered.
fn gather(regions: &HashMap<u32, Region>, sges: &[Sge]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(sges.iter().map(|s| s.len).sum());
    for s in sges {
        if !covers(regions, s.token, s.addr, s.len, 0) {
            return None;
        }
        // SAFETY: the range is inside a registered region (checked under REGIONS'
        // lock, which deregistration takes too).
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.len) });
    }
    Some(out)
}

/// Scatters `data` into local SGEs that must allow local writes.
fn scatter(regions: &HashMap<u32, Region>, sges: &[Sge], data: &[u8]) -> Result<(), HRESULT> {
    if sges.iter().any(|s| !covers(regions, s.token, s.addr, s.len, ND_MR_FLAG_ALLOW_LOCAL_WRITE)) {
        return Err(ND_ACCESS_VIOLATION);
    }
    if sges.iter().map(|s| s.len).sum::<usize>() < data.len() {
        return Err(ND_DATA_OVERRUN);
    }
    let mut rest = data;
    for s in sges {
        let n = s.len.min(rest.len());
        // SAFETY: inside a registered, locally writable region (checked above under
        // the lock); `rest` is our own buffer.
        unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), s.addr as *mut u8, n) };
        rest = &rest[n..];
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Queue pairs

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
struct QpInner {
    receives: VecDeque<Receive>,
    inbound: VecDeque<InboundSend>,
    peer: Option<Weak<QpShared>>,
    connected: bool,
}

struct QpShared {
    context: usize,
    receive_cq: Arc<CqShared>,
    initiator_cq: Arc<CqShared>,
    receive_depth: u32,
    inline: u32,
    inner: Mutex<QpInner>,
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
    fn flush(&self) {
        let drained: Vec<Receive> = lock(&self.inner).receives.drain(..).collect();
        for r in drained {
            self.complete(&self.receive_cq, ND_CANCELED, 0, r.context, Nd2RequestTypeReceive);
        }
    }
}

struct QpState(Arc<QpShared>);
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

static QP_VTBL: IND2QueuePairVtbl = IND2QueuePairVtbl {
    base: unknown::<QpState>(),
    Flush: qp_flush,
    Send: qp_send,
    Receive: qp_receive,
    Bind: qp_bind,
    Invalidate: qp_invalidate,
    Read: qp_read,
    Write: qp_write,
};

// ---------------------------------------------------------------------------------
// Connectors and listeners

static NEXT_PORT: AtomicU16 = AtomicU16::new(40000);
static LISTENERS: Mutex<Option<HashMap<u16, Weak<ListenShared>>>> = Mutex::new(None);

#[derive(Default)]
struct ConnInner {
    local: Option<SocketAddr>,
    peer_addr: Option<SocketAddr>,
    qp: Option<Arc<QpShared>>,
    private_in: Vec<u8>,
    private_out: Vec<u8>,
    read_limits: (u32, u32),
    /// Server side: the client connector whose request this one holds.
    request: Option<Arc<ConnShared>>,
    /// The connector at the other end once connected.
    peer: Option<Weak<ConnShared>>,
    connect: Option<Pending>,
    disconnect_wait: Option<Pending>,
    connected: bool,
    accepted: bool,
    rejected: bool,
    peer_gone: bool,
}

struct ConnShared {
    inner: Mutex<ConnInner>,
}

impl ConnShared {
    /// This side disconnects: both queue pairs stop, the peer hears of it.
    fn disconnect(self: &Arc<Self>) {
        let (qp, peer) = {
            let mut g = lock(&self.inner);
            if !std::mem::take(&mut g.connected) {
                return;
            }
            (g.qp.clone(), g.peer.as_ref().and_then(Weak::upgrade))
        };
        if let Some(qp) = qp {
            lock(&qp.inner).connected = false;
            qp.flush();
        }
        if let Some(peer) = peer {
            let (pqp, wait) = {
                let mut g = lock(&peer.inner);
                g.peer_gone = true;
                (g.qp.clone(), g.disconnect_wait.take())
            };
            if let Some(pqp) = pqp {
                lock(&pqp.inner).connected = false;
                pqp.flush();
            }
            if let Some(w) = wait {
                w.complete(ND_SUCCESS);
            }
        }
    }
}

struct ConnState(Arc<ConnShared>);
impl Soft for ConnState {
    const IIDS: &'static [GUID] = &[IID_IND2Connector, IID_IND2Overlapped];
    fn cancel(&self) {
        let mut g = lock(&self.0.inner);
        for p in [g.connect.take(), g.disconnect_wait.take()].into_iter().flatten() {
            p.complete(ND_CANCELED);
        }
    }
}

impl Drop for ConnState {
    fn drop(&mut self) {
        self.0.disconnect();
        self.cancel();
    }
}

#[derive(Default)]
struct ListenInner {
    port: Option<u16>,
    addr: Option<SocketAddr>,
    listening: bool,
    requests: VecDeque<Arc<ConnShared>>,
    waiting: Option<(Pending, Arc<ConnShared>)>,
}

struct ListenShared {
    inner: Mutex<ListenInner>,
}

/// Hands `client`'s request to server connector `server`.
fn hand_over(server: &ConnShared, client: Arc<ConnShared>) {
    let (addr, private) = {
        let c = lock(&client.inner);
        (c.local, c.private_out.clone())
    };
    let mut s = lock(&server.inner);
    s.peer_addr = addr;
    s.private_in = private;
    s.request = Some(client);
}

struct ListenerState(Arc<ListenShared>);
impl Soft for ListenerState {
    const IIDS: &'static [GUID] = &[IID_IND2Listener, IID_IND2Overlapped];
    fn cancel(&self) {
        if let Some((p, _)) = lock(&self.0.inner).waiting.take() {
            p.complete(ND_CANCELED);
        }
    }
}

impl Drop for ListenerState {
    fn drop(&mut self) {
        self.cancel();
        let (port, pending) = {
            let mut g = lock(&self.0.inner);
            (g.port, g.requests.drain(..).collect::<Vec<_>>())
        };
        if let Some(port) = port {
            lock(&LISTENERS).get_or_insert_with(HashMap::new).remove(&port);
        }
        for c in pending {
            if let Some(p) = lock(&c.inner).connect.take() {
                p.complete(ND_CONNECTION_REFUSED);
            }
        }
    }
}

/// Reads the address a Bind names; port 0 gets one of ours.
///
/// # Safety
/// `a` has `len` readable bytes.
unsafe fn bind_address(a: *const SOCKADDR, len: u32) -> Result<SocketAddr, HRESULT> {
    // SAFETY: caller's contract.
    let mut addr = unsafe { addr::read(a, len as usize) }.ok_or(ND_INVALID_ADDRESS)?;
    if addr.ip() != ADDRESS && !addr.ip().is_unspecified() {
        return Err(ND_INVALID_ADDRESS);
    }
    if addr.port() == 0 {
        addr.set_port(NEXT_PORT.fetch_add(1, Ordering::SeqCst));
    }
    Ok(addr)
}

/// Writes `addr` into a caller's sockaddr buffer.
///
/// # Safety
/// `out` has `*len` writable bytes; `len` is valid.
unsafe fn put_address(addr: Option<SocketAddr>, out: *mut SOCKADDR, len: *mut u32) -> HRESULT {
    let Some(a) = addr else { return ND_CONNECTION_INVALID };
    let s = SockAddr::from(a);
    // SAFETY: caller's contract.
    unsafe {
        if out.is_null() || *len < s.len() {
            *len = s.len();
            return ND_BUFFER_OVERFLOW;
        }
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<u8>(), out.cast::<u8>(), s.len() as usize);
        *len = s.len();
    }
    ND_SUCCESS
}

/// # Safety
/// `p`/`n` describe readable bytes (or `n` is 0).
unsafe fn private(p: *const c_void, n: u32) -> Vec<u8> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: caller's contract.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n as usize) }.to_vec()
}

unsafe extern "system" fn conn_bind(
    this: *mut IND2Connector,
    a: *const SOCKADDR,
    len: u32,
) -> HRESULT {
    // SAFETY: a live connector; `a` has `len` bytes.
    let (c, addr) = unsafe { (state::<ConnState, _>(this), bind_address(a, len)) };
    match addr {
        Ok(addr) => {
            lock(&c.0.inner).local = Some(addr);
            ND_SUCCESS
        }
        Err(hr) => hr,
    }
}

unsafe extern "system" fn conn_connect(
    this: *mut IND2Connector,
    qp: *mut IUnknown,
    dest: *const SOCKADDR,
    dest_len: u32,
    inbound: u32,
    outbound: u32,
    data: *const c_void,
    data_len: u32,
    ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live connector; the caller passes live objects and valid buffers.
    let (c, qp, dest, data) = unsafe {
        (
            state::<ConnState, _>(this),
            ours::<QpState, _>(qp, &QP_VTBL),
            addr::read(dest, dest_len as usize),
            private(data, data_len),
        )
    };
    let Some(qp) = qp else { return ND_INVALID_PARAMETER_1 };
    let Some(dest) = dest else { return ND_INVALID_ADDRESS };
    if data.len() > adapter_info().MaxCallerData as usize {
        return ND_INVALID_BUFFER_SIZE;
    }
    let listener =
        lock(&LISTENERS).get_or_insert_with(HashMap::new).get(&dest.port()).and_then(Weak::upgrade);
    let Some(listener) = listener.filter(|l| lock(&l.inner).listening) else {
        return ND_CONNECTION_REFUSED;
    };
    {
        let mut g = lock(&c.0.inner);
        if g.connected || g.connect.is_some() {
            return ND_CONNECTION_ACTIVE;
        }
        if g.local.is_none() {
            g.local = Some(SocketAddr::new(ADDRESS, NEXT_PORT.fetch_add(1, Ordering::SeqCst)));
        }
        g.qp = Some(qp.0.clone());
        g.private_out = data;
        g.read_limits = (inbound, outbound);
        g.peer_addr = Some(dest);
        g.rejected = false;
        g.connect = Some(Pending::start(ov));
    }
    let waiting = {
        let mut l = lock(&listener.inner);
        match l.waiting.take() {
            Some(w) => Some(w),
            None => {
                l.requests.push_back(c.0.clone());
                None
            }
        }
    };
    if let Some((pending, server)) = waiting {
        hand_over(&server, c.0.clone());
        pending.complete(ND_SUCCESS);
    }
    ND_PENDING
}

unsafe extern "system" fn conn_complete_connect(
    this: *mut IND2Connector,
    _ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live connector.
    let c = unsafe { state::<ConnState, _>(this) };
    let g = lock(&c.0.inner);
    match (g.accepted, g.rejected) {
        (true, _) => ND_SUCCESS,
        (_, true) => ND_CONNECTION_REFUSED,
        _ => ND_CONNECTION_INVALID,
    }
}

unsafe extern "system" fn conn_accept(
    this: *mut IND2Connector,
    qp: *mut IUnknown,
    inbound: u32,
    outbound: u32,
    data: *const c_void,
    data_len: u32,
    _ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live connector; the caller passes live objects and valid buffers.
    let (c, qp, data) = unsafe {
        (state::<ConnState, _>(this), ours::<QpState, _>(qp, &QP_VTBL), private(data, data_len))
    };
    let Some(qp) = qp else { return ND_INVALID_PARAMETER_1 };
    let Some(client) = lock(&c.0.inner).request.take() else {
        return ND_CONNECTION_INVALID;
    };
    let (client_qp, pending) = {
        let mut g = lock(&client.inner);
        (g.qp.clone(), g.connect.take())
    };
    let (Some(client_qp), Some(pending)) = (client_qp, pending) else {
        return ND_CONNECTION_ABORTED; // the client canceled or went away
    };
    {
        let mut s = lock(&qp.0.inner);
        s.peer = Some(Arc::downgrade(&client_qp));
        s.connected = true;
    }
    {
        let mut s = lock(&client_qp.inner);
        s.peer = Some(Arc::downgrade(&qp.0));
        s.connected = true;
    }
    {
        let mut g = lock(&c.0.inner);
        g.qp = Some(qp.0.clone());
        g.read_limits = (inbound, outbound);
        g.connected = true;
        g.accepted = true;
        g.peer = Some(Arc::downgrade(&client));
        if g.local.is_none() {
            g.local = Some(SocketAddr::new(ADDRESS, 0));
        }
    }
    {
        let mut g = lock(&client.inner);
        g.private_in = data;
        g.connected = true;
        g.accepted = true;
        g.peer = Some(Arc::downgrade(&c.0));
    }
    pending.complete(ND_SUCCESS);
    ND_SUCCESS
}

unsafe extern "system" fn conn_reject(
    this: *mut IND2Connector,
    data: *const c_void,
    data_len: u32,
) -> HRESULT {
    // SAFETY: a live connector; valid buffer.
    let (c, data) = unsafe { (state::<ConnState, _>(this), private(data, data_len)) };
    let Some(client) = lock(&c.0.inner).request.take() else {
        return ND_CONNECTION_INVALID;
    };
    let pending = {
        let mut g = lock(&client.inner);
        g.private_in = data;
        g.rejected = true;
        g.connect.take()
    };
    if let Some(p) = pending {
        p.complete(ND_CONNECTION_REFUSED);
    }
    ND_SUCCESS
}

unsafe extern "system" fn conn_read_limits(
    this: *mut IND2Connector,
    inbound: *mut u32,
    outbound: *mut u32,
) -> HRESULT {
    // SAFETY: a live connector; out-pointers are null or valid.
    unsafe {
        let (i, o) = lock(&state::<ConnState, _>(this).0.inner).read_limits;
        if !inbound.is_null() {
            *inbound = i;
        }
        if !outbound.is_null() {
            *outbound = o;
        }
    }
    ND_SUCCESS
}

unsafe extern "system" fn conn_private_data(
    this: *mut IND2Connector,
    out: *mut c_void,
    len: *mut u32,
) -> HRESULT {
    // SAFETY: a live connector.
    let data = lock(&unsafe { state::<ConnState, _>(this) }.0.inner).private_in.clone();
    // SAFETY: `len` is valid; `out` has `*len` bytes when not null.
    unsafe {
        let room = *len as usize;
        *len = data.len() as u32;
        if data.len() > room || (out.is_null() && !data.is_empty()) {
            return ND_BUFFER_OVERFLOW;
        }
        std::ptr::copy_nonoverlapping(data.as_ptr(), out.cast::<u8>(), data.len());
    }
    ND_SUCCESS
}

unsafe extern "system" fn conn_local_address(
    this: *mut IND2Connector,
    out: *mut SOCKADDR,
    len: *mut u32,
) -> HRESULT {
    // SAFETY: a live connector; caller's buffers.
    unsafe { put_address(lock(&state::<ConnState, _>(this).0.inner).local, out, len) }
}

unsafe extern "system" fn conn_peer_address(
    this: *mut IND2Connector,
    out: *mut SOCKADDR,
    len: *mut u32,
) -> HRESULT {
    // SAFETY: a live connector; caller's buffers.
    unsafe { put_address(lock(&state::<ConnState, _>(this).0.inner).peer_addr, out, len) }
}

unsafe extern "system" fn conn_notify_disconnect(
    this: *mut IND2Connector,
    ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live connector.
    let c = unsafe { state::<ConnState, _>(this) };
    let mut g = lock(&c.0.inner);
    if g.peer_gone {
        return ND_SUCCESS;
    }
    if g.disconnect_wait.is_some() {
        return ND_INVALID_DEVICE_STATE;
    }
    g.disconnect_wait = Some(Pending::start(ov));
    ND_PENDING
}

unsafe extern "system" fn conn_disconnect(
    this: *mut IND2Connector,
    _ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live connector.
    unsafe { state::<ConnState, _>(this) }.0.disconnect();
    ND_SUCCESS
}

static CONNECTOR_VTBL: IND2ConnectorVtbl = IND2ConnectorVtbl {
    base: overlapped::<ConnState>(),
    Bind: conn_bind,
    Connect: conn_connect,
    CompleteConnect: conn_complete_connect,
    Accept: conn_accept,
    Reject: conn_reject,
    GetReadLimits: conn_read_limits,
    GetPrivateData: conn_private_data,
    GetLocalAddress: conn_local_address,
    GetPeerAddress: conn_peer_address,
    NotifyDisconnect: conn_notify_disconnect,
    Disconnect: conn_disconnect,
};

unsafe extern "system" fn listener_bind(
    this: *mut IND2Listener,
    a: *const SOCKADDR,
    len: u32,
) -> HRESULT {
    // SAFETY: a live listener; `a` has `len` bytes.
    let (l, addr) = unsafe { (state::<ListenerState, _>(this), bind_address(a, len)) };
    let addr = match addr {
        Ok(a) => a,
        Err(hr) => return hr,
    };
    let mut table = lock(&LISTENERS);
    let table = table.get_or_insert_with(HashMap::new);
    if table.get(&addr.port()).and_then(Weak::upgrade).is_some() {
        return ND_SHARING_VIOLATION; // what the SPI documents for an address in use
    }
    table.insert(addr.port(), Arc::downgrade(&l.0));
    let mut g = lock(&l.0.inner);
    g.port = Some(addr.port());
    g.addr = Some(addr);
    ND_SUCCESS
}

unsafe extern "system" fn listener_listen(this: *mut IND2Listener, _backlog: u32) -> HRESULT {
    // SAFETY: a live listener.
    let mut g = lock(&unsafe { state::<ListenerState, _>(this) }.0.inner);
    if g.port.is_none() {
        return ND_INVALID_DEVICE_STATE;
    }
    g.listening = true;
    ND_SUCCESS
}

unsafe extern "system" fn listener_local_address(
    this: *mut IND2Listener,
    out: *mut SOCKADDR,
    len: *mut u32,
) -> HRESULT {
    // SAFETY: a live listener; caller's buffers.
    unsafe { put_address(lock(&state::<ListenerState, _>(this).0.inner).addr, out, len) }
}

unsafe extern "system" fn listener_get_request(
    this: *mut IND2Listener,
    connector: *mut IUnknown,
    ov: *mut OVERLAPPED,
) -> HRESULT {
    // SAFETY: a live listener; the caller passes a live connector.
    let (l, server) = unsafe {
        (state::<ListenerState, _>(this), ours::<ConnState, _>(connector, &CONNECTOR_VTBL))
    };
    let Some(server) = server else { return ND_INVALID_PARAMETER_1 };
    let mut g = lock(&l.0.inner);
    if !g.listening {
        return ND_INVALID_DEVICE_STATE;
    }
    if g.waiting.is_some() {
        return ND_INVALID_DEVICE_STATE;
    }
    // Skip requests whose client gave up (canceled its connect).
    while let Some(client) = g.requests.pop_front() {
        if lock(&client.inner).connect.is_some() {
            drop(g);
            hand_over(&server.0, client);
            return ND_SUCCESS;
        }
    }
    g.waiting = Some((Pending::start(ov), server.0.clone()));
    ND_PENDING
}

static LISTENER_VTBL: IND2ListenerVtbl = IND2ListenerVtbl {
    base: overlapped::<ListenerState>(),
    Bind: listener_bind,
    Listen: listener_listen,
    GetLocalAddress: listener_local_address,
    GetConnectionRequest: listener_get_request,
};
