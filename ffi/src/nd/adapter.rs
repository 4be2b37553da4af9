//! `IND2Adapter`: opening the NetworkDirect adapter that owns an address, the opened
//! adapter, and the overlapped file its objects complete their requests on.

use std::ffi::c_void;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::addr::query_list;
use super::com::ComPtr;
use super::provider::{discover, Provider};
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

impl Provider {
    /// Opens adapter `id`.
    ///
    /// # Errors
    /// `OpenAdapter` or the adapter's first queries failing.
    pub fn open(&self, id: u64) -> Result<Adapter, NdError> {
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: live provider; IID and out-pointer valid for the call.
        let hr = unsafe {
            (self.ptr.vtbl().OpenAdapter)(self.ptr.as_raw(), &sys::IID_IND2Adapter, id, &mut out)
        };
        check("IND2Provider::OpenAdapter", hr)?;
        // SAFETY: on success a counted IND2Adapter reference.
        let ptr = unsafe { ComPtr::from_raw(out.cast::<sys::IND2Adapter>()) }
            .ok_or(NdError::new("IND2Provider::OpenAdapter", super::status::ND_INTERNAL_ERROR))?;
        Adapter::new(ptr, self.clone())
    }
}

/// Why no adapter could be opened.
#[derive(Debug)]
pub enum OpenError {
    /// No provider at all.
    NoProvider(Vec<String>),
    /// Providers, but none owns the address.
    NoAdapter {
        /// The address asked for.
        ip: IpAddr,
        /// Addresses the providers have.
        available: Vec<IpAddr>,
    },
    /// A call failed.
    Nd(NdError),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NoProvider(problems) => {
                if cfg!(windows) {
                    write!(
                        f,
                        "no NetworkDirect provider is installed: install the adapter's driver with \
                         NetworkDirect (WinOF / WinOF-2 for ConnectX) and enable it \
                         (Set-NetOffloadGlobalSetting -NetworkDirect Enabled)"
                    )?;
                } else {
                    write!(f, "no NetworkDirect provider: NetworkDirect is Windows' RDMA interface; on Linux use verbs")?;
                }
                if !problems.is_empty() {
                    write!(f, " ({})", problems.join("; "))?;
                }
                Ok(())
            }
            OpenError::NoAdapter { ip, available } => {
                let list: Vec<String> = available.iter().map(|a| a.to_string()).collect();
                write!(
                    f,
                    "no NetworkDirect adapter has address {ip} (adapter addresses: {})",
                    if list.is_empty() { "none".to_string() } else { list.join(", ") }
                )
            }
            OpenError::Nd(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for OpenError {}

/// Opens the adapter that owns local address `ip`, asking each provider in turn
/// (what `NdOpenAdapter` does).
///
/// # Errors
/// [`OpenError`]: no provider, no adapter with that address, or a failing call.
pub fn open_adapter(ip: IpAddr) -> Result<Adapter, OpenError> {
    let d = discover();
    if d.providers.is_empty() {
        return Err(OpenError::NoProvider(d.problems));
    }
    let mut available = Vec::new();
    for p in &d.providers {
        let addrs = p.addresses().map_err(OpenError::Nd)?;
        if addrs.iter().any(|a| a.ip() == ip) {
            let id = p.resolve(ip).map_err(OpenError::Nd)?;
            return p.open(id).map_err(OpenError::Nd);
        }
        available.extend(addrs.iter().map(|a| a.ip()));
    }
    Err(OpenError::NoAdapter { ip, available })
}
