//! Connectors: bind, connect to a listener's port, accept or reject, private data,
//! disconnect; and the socket-address helpers listeners share.

use std::collections::HashMap;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rdmabench_ffi::nd::addr::{self, SockAddr};
use rdmabench_ffi::nd::status::*;
use rdmabench_ffi::nd::sys::*;

use crate::adapter::adapter_info;
use crate::listener::LISTENERS;
use crate::object::{ours, state, Soft};
use crate::overlapped::{overlapped, Pending};
use crate::qp::{QpShared, QpState, QP_VTBL};
use crate::{lock, ADDRESS};

static NEXT_PORT: AtomicU16 = AtomicU16::new(40000);

#[derive(Default)]
pub(crate) struct ConnInner {
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
    pub(crate) connect: Option<Pending>,
    disconnect_wait: Option<Pending>,
    connected: bool,
    accepted: bool,
    rejected: bool,
    peer_gone: bool,
}

pub(crate) struct ConnShared {
    pub(crate) inner: Mutex<ConnInner>,
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

/// Hands `client`'s request to server connector `server`.
pub(crate) fn hand_over(server: &ConnShared, client: Arc<ConnShared>) {
    let (addr, private) = {
        let c = lock(&client.inner);
        (c.local, c.private_out.clone())
    };
    let mut s = lock(&server.inner);
    s.peer_addr = addr;
    s.private_in = private;
    s.request = Some(client);
}

pub(crate) struct ConnState(pub(crate) Arc<ConnShared>);

impl ConnState {
    pub(crate) fn new() -> Self {
        ConnState(Arc::new(ConnShared { inner: Mutex::new(ConnInner::default()) }))
    }
}

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

/// Reads the address a Bind names; port 0 gets one of ours.
///
/// # Safety
/// `a` has `len` readable bytes.
pub(crate) unsafe fn bind_address(a: *const SOCKADDR, len: u32) -> Result<SocketAddr, HRESULT> {
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
pub(crate) unsafe fn put_address(
    addr: Option<SocketAddr>,
    out: *mut SOCKADDR,
    len: *mut u32,
) -> HRESULT {
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

pub(crate) static CONNECTOR_VTBL: IND2ConnectorVtbl = IND2ConnectorVtbl {
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
