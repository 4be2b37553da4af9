//! `IND2Adapter`: one opened NetworkDirect adapter, and the overlapped file its
//! objects complete their requests on.

use std::net::SocketAddr;
use std::sync::Arc;

use super::com::ComPtr;
use super::provider::{query_list, Provider};
use super::status::{check, NdError};
use super::sys::{self, HANDLE, ND2_ADAPTER_INFO};

/// The adapter and its overlapped file, shared by every object made from it so that
/// both outlive them.
#[derive(Debug)]
pub(crate) struct AdapterShared {
    pub(crate) ptr: ComPtr<sys::IND2Adapter>,
    pub(crate) file: HANDLE,
    pub(crate) provider: Provider,
}

// SAFETY: the adapter is free-threaded (see ComPtr) and the file handle is a kernel
// handle usable from any thread; neither is mutated through `&`.
unsafe impl Send for AdapterShared {}
// SAFETY: as above.
unsafe impl Sync for AdapterShared {}

impl Drop for AdapterShared {
    fn drop(&mut self) {
        #[cfg(windows)]
        super::win::close_handle(self.file);
    }
}

/// An opened adapter (`IND2Adapter`).
#[derive(Clone, Debug)]
pub struct Adapter {
    pub(crate) shared: Arc<AdapterShared>,
    info: ND2_ADAPTER_INFO,
}

impl Adapter {
    pub(crate) fn new(ptr: ComPtr<sys::IND2Adapter>, provider: Provider) -> Result<Self, NdError> {
        let mut file: HANDLE = std::ptr::null_mut();
        // SAFETY: live adapter; out-pointer valid for the call.
        let hr = unsafe { (ptr.vtbl().CreateOverlappedFile)(ptr.as_raw(), &mut file) };
        check("IND2Adapter::CreateOverlappedFile", hr)?;
        let mut info = ND2_ADAPTER_INFO { InfoVersion: sys::ND_VERSION_2, ..Default::default() };
        let mut len = std::mem::size_of::<ND2_ADAPTER_INFO>() as u32;
        let shared = Arc::new(AdapterShared { ptr, file, provider });
        // SAFETY: live adapter; `info` has `len` bytes with InfoVersion set.
        let hr = unsafe { (shared.ptr.vtbl().Query)(shared.ptr.as_raw(), &mut info, &mut len) };
        check("IND2Adapter::Query", hr)?;
        Ok(Adapter { shared, info })
    }

    /// What `Query` reported when the adapter was opened.
    pub fn info(&self) -> &ND2_ADAPTER_INFO {
        &self.info
    }

    /// The provider it came from.
    pub fn provider(&self) -> &Provider {
        &self.shared.provider
    }

    /// Its local addresses.
    ///
    /// # Errors
    /// `QueryAddressList` failing.
    pub fn addresses(&self) -> Result<Vec<SocketAddr>, NdError> {
        let p = &self.shared.ptr;
        query_list("IND2Adapter::QueryAddressList", |list, len| {
            // SAFETY: live adapter; `list` is null or has `*len` writable bytes.
            unsafe { (p.vtbl().QueryAddressList)(p.as_raw(), list, len) }
        })
    }

    /// The raw object.
    pub fn as_com(&self) -> &ComPtr<sys::IND2Adapter> {
        &self.shared.ptr
    }

    /// Names of the adapter flags that are set.
    pub fn flag_names(&self) -> Vec<&'static str> {
        const FLAGS: [(u32, &str); 5] = [
            (sys::ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED, "in-order DMA"),
            (sys::ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED, "CQ interrupt moderation"),
            (sys::ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED, "multiple engines"),
            (sys::ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, "CQ resize"),
            (sys::ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED, "loopback connections"),
        ];
        FLAGS.iter().filter(|(bit, _)| self.info.AdapterFlags & bit != 0).map(|&(_, n)| n).collect()
    }
}

/// Creates an object through one of the adapter's `Create…(iid, …, void**)` calls.
pub(crate) fn create<T: super::com::Interface>(
    call: &'static str,
    f: impl FnOnce(*mut *mut std::ffi::c_void) -> sys::HRESULT,
) -> Result<ComPtr<T>, NdError> {
    let mut out: *mut std::ffi::c_void = std::ptr::null_mut();
    check(call, f(&mut out))?;
    // SAFETY: on success the call returned one counted reference to a `T` (the IID
    // passed by the caller is `T::IID`).
    unsafe { ComPtr::from_raw(out.cast::<T>()) }
        .ok_or(NdError::new(call, super::status::ND_INTERNAL_ERROR))
}
