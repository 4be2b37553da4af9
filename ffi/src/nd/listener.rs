//! `IND2Listener`: waits for connection requests on a local address.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::adapter::{create, Adapter, AdapterShared};
use super::addr::SockAddr;
use super::com::ComPtr;
use super::connector::{get_address, Connector};
use super::overlapped::Overlapped;
use super::status::{check, NdError};
use super::sys;

/// A listener.
pub struct Listener {
    ptr: ComPtr<sys::IND2Listener>,
    ov: Overlapped,
    _adapter: Arc<AdapterShared>,
}

impl Adapter {
    /// Creates a listener bound to `local` (port 0: the provider picks) and listening
    /// with `backlog`.
    ///
    /// # Errors
    /// `CreateListener`, `Bind` (address taken or not this adapter's) or `Listen` failing.
    pub fn listen(&self, local: SocketAddr, backlog: u32) -> Result<Listener, NdError> {
        let a = &self.shared;
        let ptr: ComPtr<sys::IND2Listener> = create("IND2Adapter::CreateListener", |out| {
            // SAFETY: live adapter and overlapped file; out-pointer valid.
            unsafe {
                (a.ptr.vtbl().CreateListener)(a.ptr.as_raw(), &sys::IID_IND2Listener, a.file, out)
            }
        })?;
        let s = SockAddr::from(local);
        // SAFETY: live listener; the address is read during the call.
        check("IND2Listener::Bind", unsafe {
            (ptr.vtbl().Bind)(ptr.as_raw(), s.as_ptr(), s.len())
        })?;
        // SAFETY: live, bound listener.
        check("IND2Listener::Listen", unsafe { (ptr.vtbl().Listen)(ptr.as_raw(), backlog) })?;
        Ok(Listener { ptr, ov: Overlapped::new()?, _adapter: self.shared.clone() })
    }
}

impl Listener {
    /// The address it listens on (with the port the provider picked).
    ///
    /// # Errors
    /// `GetLocalAddress` failing.
    pub fn local_address(&self) -> Result<SocketAddr, NdError> {
        get_address("IND2Listener::GetLocalAddress", |a, len| {
            // SAFETY: live listener; `a` has `*len` bytes.
            unsafe { (self.ptr.vtbl().GetLocalAddress)(self.ptr.as_raw(), a, len) }
        })
    }

    /// Waits up to `timeout` for the next connection request and hands it to
    /// `connector`, which then accepts or rejects it.
    ///
    /// # Errors
    /// `ND_IO_TIMEOUT` when nobody connected in time.
    pub fn get_request(
        &mut self,
        connector: &mut Connector,
        timeout: Duration,
    ) -> Result<(), NdError> {
        let ov = self.ov.start();
        // SAFETY: live listener and connector; the OVERLAPPED outlives the request.
        let hr = unsafe {
            (self.ptr.vtbl().GetConnectionRequest)(
                self.ptr.as_raw(),
                connector.ptr.as_unknown(),
                ov,
            )
        };
        self.ov.finish(&self.ptr, "IND2Listener::GetConnectionRequest", hr, Some(timeout))
    }
}
