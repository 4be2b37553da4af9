//! The adapter object: what it reports, and the factory of every other object.

use std::ffi::c_void;
use std::sync::Mutex;

use rdmabench_ffi::nd::status::*;
use rdmabench_ffi::nd::sys::*;

use crate::connector::{ConnState, CONNECTOR_VTBL};
use crate::cq::{CqState, CQ_VTBL};
use crate::listener::{ListenerState, LISTENER_VTBL};
use crate::mr::{MrState, MR_VTBL};
use crate::object::{make, ours, unknown, Soft};
use crate::provider::query_address_list;
use crate::qp::{QpState, QP_VTBL};
use crate::{ADAPTER_ID, MAX_INLINE};

const FAKE_FILE: usize = 0x50F7_F11E;

pub(crate) struct AdapterState;
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
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &CQ_VTBL, CqState::new, out) }
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
    let qp = || QpState::new(context as usize, rcq, icq, receive_depth, inline);
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
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &CONNECTOR_VTBL, ConnState::new, out) }
}

unsafe extern "system" fn adapter_create_listener(
    _this: *mut IND2Adapter,
    iid: *const GUID,
    _file: HANDLE,
    out: *mut *mut c_void,
) -> HRESULT {
    // SAFETY: the caller passes valid IID and out-pointers.
    unsafe { make(iid, &LISTENER_VTBL, ListenerState::new, out) }
}

pub(crate) static ADAPTER_VTBL: IND2AdapterVtbl = IND2AdapterVtbl {
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
