//! `IND2Connector`: connection set-up for one queue pair — connect (client), accept
//! or reject (server), then disconnect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::adapter::{create, Adapter, AdapterShared};
use super::addr::{self, SockAddr};
use super::com::ComPtr;
use super::overlapped::Overlapped;
use super::qp::QueuePair;
use super::status::{check, NdError, ND_BUFFER_OVERFLOW};
use super::sys;

/// How long a disconnect may take when a connector is dropped.
const DISCONNECT_WAIT: Duration = Duration::from_secs(2);

/// A connector.
pub struct Connector {
    pub(crate) ptr: ComPtr<sys::IND2Connector>,
    ov: Overlapped,
    connected: bool,
    _adapter: Arc<AdapterShared>,
}

impl Adapter {
    /// Creates a connector.
    ///
    /// # Errors
    /// `CreateConnector` failing.
    pub fn create_connector(&self) -> Result<Connector, NdError> {
        let a = &self.shared;
        let ptr = create("IND2Adapter::CreateConnector", |out| {
            // SAFETY: live adapter and overlapped file; out-pointer valid.
            unsafe {
                (a.ptr.vtbl().CreateConnector)(a.ptr.as_raw(), &sys::IID_IND2Connector, a.file, out)
            }
        })?;
        Ok(Connector {
            ptr,
            ov: Overlapped::new()?,
            connected: false,
            _adapter: self.shared.clone(),
        })
    }
}

/// Runs a `GetLocalAddress`-shaped call into a buffer big enough for IPv6.
pub(crate) fn get_address(
    call: &'static str,
    f: impl FnOnce(*mut sys::SOCKADDR, *mut u32) -> sys::HRESULT,
) -> Result<SocketAddr, NdError> {
    let mut buf = sys::SOCKADDR_IN6::default();
    let mut len = std::mem::size_of::<sys::SOCKADDR_IN6>() as u32;
    check(call, f((&mut buf as *mut sys::SOCKADDR_IN6).cast(), &mut len))?;
    // SAFETY: the provider wrote `len` bytes (at most the buffer's size) into `buf`.
    unsafe { addr::read((&buf as *const sys::SOCKADDR_IN6).cast(), len.min(28) as usize) }
        .ok_or(NdError::new(call, super::status::ND_INVALID_ADDRESS))
}

impl Connector {
    /// Binds to a local address (port 0: the provider picks).
    ///
    /// # Errors
    /// `ND_INVALID_ADDRESS` for an address no adapter owns; `ND_ADDRESS_ALREADY_EXISTS`.
    pub fn bind(&mut self, local: SocketAddr) -> Result<(), NdError> {
        let a = SockAddr::from(local);
        // SAFETY: live connector; the address is valid for the call.
        let hr = unsafe { (self.ptr.vtbl().Bind)(self.ptr.as_raw(), a.as_ptr(), a.len()) };
        check("IND2Connector::Bind", hr).map(drop)
    }

    /// Connects `qp` to a listener at `dest`, offering `private` data, and completes
    /// the connection (`Connect`, then `CompleteConnect`), waiting up to `timeout`.
    ///
    /// # Errors
    /// `ND_CONNECTION_REFUSED` (nobody listens, or the peer rejected),
    /// `ND_IO_TIMEOUT` when the peer did not answer in time.
    pub fn connect(
        &mut self,
        qp: &QueuePair,
        dest: SocketAddr,
        read_limits: (u32, u32),
        private: &[u8],
        timeout: Duration,
    ) -> Result<(), NdError> {
        let d = SockAddr::from(dest);
        let ov = self.ov.start();
        // SAFETY: live connector and QP; address and private data are read during the
        // call; the OVERLAPPED is boxed and outlives the request (finish waits or
        // cancels).
        let hr = unsafe {
            (self.ptr.vtbl().Connect)(
                self.ptr.as_raw(),
                qp.ptr.as_unknown(),
                d.as_ptr(),
                d.len(),
                read_limits.0,
                read_limits.1,
                private.as_ptr().cast(),
                private.len() as u32,
                ov,
            )
        };
        self.ov.finish(&self.ptr, "IND2Connector::Connect", hr, Some(timeout))?;
        let ov = self.ov.start();
        // SAFETY: as above.
        let hr = unsafe { (self.ptr.vtbl().CompleteConnect)(self.ptr.as_raw(), ov) };
        self.ov.finish(&self.ptr, "IND2Connector::CompleteConnect", hr, Some(timeout))?;
        self.connected = true;
        Ok(())
    }

    /// Accepts the request this connector received from a listener, on `qp`.
    ///
    /// # Errors
    /// The peer gone (`ND_CONNECTION_ABORTED`) or the accept timing out.
    pub fn accept(
        &mut self,
        qp: &QueuePair,
        read_limits: (u32, u32),
        private: &[u8],
        timeout: Duration,
    ) -> Result<(), NdError> {
        let ov = self.ov.start();
        // SAFETY: as in `connect`.
        let hr = unsafe {
            (self.ptr.vtbl().Accept)(
                self.ptr.as_raw(),
                qp.ptr.as_unknown(),
                read_limits.0,
                read_limits.1,
                private.as_ptr().cast(),
                private.len() as u32,
                ov,
            )
        };
        self.ov.finish(&self.ptr, "IND2Connector::Accept", hr, Some(timeout))?;
        self.connected = true;
        Ok(())
    }

    /// Rejects the request this connector received, with `private` data.
    ///
    /// # Errors
    /// `Reject` failing.
    pub fn reject(&mut self, private: &[u8]) -> Result<(), NdError> {
        // SAFETY: live connector; the data is read during the call.
        let hr = unsafe {
            (self.ptr.vtbl().Reject)(
                self.ptr.as_raw(),
                private.as_ptr().cast(),
                private.len() as u32,
            )
        };
        check("IND2Connector::Reject", hr).map(drop)
    }

    /// The peer's private data (of its connect, accept or reject).
    ///
    /// # Errors
    /// `GetPrivateData` failing.
    pub fn private_data(&self) -> Result<Vec<u8>, NdError> {
        let mut buf = vec![0u8; 64];
        let mut len = buf.len() as u32;
        // SAFETY: live connector; `buf` has `len` writable bytes.
        let mut hr = unsafe {
            (self.ptr.vtbl().GetPrivateData)(self.ptr.as_raw(), buf.as_mut_ptr().cast(), &mut len)
        };
        if hr == ND_BUFFER_OVERFLOW {
            buf.resize(len as usize, 0);
            // SAFETY: as above, with the size the provider asked for.
            hr = unsafe {
                (self.ptr.vtbl().GetPrivateData)(
                    self.ptr.as_raw(),
                    buf.as_mut_ptr().cast(),
                    &mut len,
                )
            };
        }
        check("IND2Connector::GetPrivateData", hr)?;
        buf.truncate(len as usize);
        Ok(buf)
    }

    /// Inbound and outbound read limits agreed with the peer.
    ///
    /// # Errors
    /// `GetReadLimits` failing.
    pub fn read_limits(&self) -> Result<(u32, u32), NdError> {
        let (mut i, mut o) = (0, 0);
        // SAFETY: live connector; out-pointers valid.
        let hr = unsafe { (self.ptr.vtbl().GetReadLimits)(self.ptr.as_raw(), &mut i, &mut o) };
        check("IND2Connector::GetReadLimits", hr)?;
        Ok((i, o))
    }

    /// Local address of the connection.
    ///
    /// # Errors
    /// Not bound or connected.
    pub fn local_address(&self) -> Result<SocketAddr, NdError> {
        get_address("IND2Connector::GetLocalAddress", |a, len| {
            // SAFETY: live connector; `a` has `*len` bytes.
            unsafe { (self.ptr.vtbl().GetLocalAddress)(self.ptr.as_raw(), a, len) }
        })
    }

    /// The peer's address.
    ///
    /// # Errors
    /// Not connected.
    pub fn peer_address(&self) -> Result<SocketAddr, NdError> {
        get_address("IND2Connector::GetPeerAddress", |a, len| {
            // SAFETY: live connector; `a` has `*len` bytes.
            unsafe { (self.ptr.vtbl().GetPeerAddress)(self.ptr.as_raw(), a, len) }
        })
    }

    /// Waits up to `timeout` for the peer to disconnect: `true` when it did.
    ///
    /// # Errors
    /// `NotifyDisconnect` failing.
    pub fn wait_disconnect(&mut self, timeout: Duration) -> Result<bool, NdError> {
        let ov = self.ov.start();
        // SAFETY: as in `connect`.
        let hr = unsafe { (self.ptr.vtbl().NotifyDisconnect)(self.ptr.as_raw(), ov) };
        match self.ov.finish(&self.ptr, "IND2Connector::NotifyDisconnect", hr, Some(timeout)) {
            Ok(()) => Ok(true),
            Err(e) if e.status == super::status::ND_IO_TIMEOUT => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Disconnects (the peer's work then fails with `ND_CONNECTION_ABORTED`/`ND_CANCELED`).
    ///
    /// # Errors
    /// `Disconnect` failing.
    pub fn disconnect(&mut self) -> Result<(), NdError> {
        if !std::mem::take(&mut self.connected) {
            return Ok(());
        }
        let ov = self.ov.start();
        // SAFETY: as in `connect`.
        let hr = unsafe { (self.ptr.vtbl().Disconnect)(self.ptr.as_raw(), ov) };
        self.ov.finish(&self.ptr, "IND2Connector::Disconnect", hr, Some(DISCONNECT_WAIT))
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        let _ = self.disconnect();
    }
}
