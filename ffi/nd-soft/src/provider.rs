//! The provider object: the one address list, address resolution, opening the
//! adapter.

use std::ffi::c_void;
use std::net::SocketAddr;

use rdmabench_ffi::nd::addr;
use rdmabench_ffi::nd::status::*;
use rdmabench_ffi::nd::sys::*;

use crate::adapter::{AdapterState, ADAPTER_VTBL};
use crate::object::{make, unknown, Soft};
use crate::{ADAPTER_ID, ADDRESS};

pub(crate) struct ProviderState;
impl Soft for ProviderState {
    const IIDS: &'static [GUID] = &[IID_IND2Provider];
}

pub(crate) unsafe extern "system" fn query_address_list(
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

pub(crate) static PROVIDER_VTBL: IND2ProviderVtbl = IND2ProviderVtbl {
    base: unknown::<ProviderState>(),
    QueryAddressList: provider_query_address_list,
    ResolveAddress: provider_resolve_address,
    OpenAdapter: provider_open_adapter,
};
