//! Listeners: a table of bound ports, and connection requests handed to the server's
//! connectors in arrival order.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use rdmabench_ffi::nd::status::*;
use rdmabench_ffi::nd::sys::*;

use crate::connector::{
    bind_address, hand_over, put_address, ConnShared, ConnState, CONNECTOR_VTBL,
};
use crate::lock;
use crate::object::{ours, state, Soft};
use crate::overlapped::{overlapped, Pending};

pub(crate) static LISTENERS: Mutex<Option<HashMap<u16, Weak<ListenShared>>>> = Mutex::new(None);

#[derive(Default)]
pub(crate) struct ListenInner {
    port: Option<u16>,
    addr: Option<SocketAddr>,
    pub(crate) listening: bool,
    pub(crate) requests: VecDeque<Arc<ConnShared>>,
    pub(crate) waiting: Option<(Pending, Arc<ConnShared>)>,
}

pub(crate) struct ListenShared {
    pub(crate) inner: Mutex<ListenInner>,
}

pub(crate) struct ListenerState(Arc<ListenShared>);

impl ListenerState {
    pub(crate) fn new() -> Self {
        ListenerState(Arc::new(ListenShared { inner: Mutex::new(ListenInner::default()) }))
    }
}

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

pub(crate) static LISTENER_VTBL: IND2ListenerVtbl = IND2ListenerVtbl {
    base: overlapped::<ListenerState>(),
    Bind: listener_bind,
    Listen: listener_listen,
    GetLocalAddress: listener_local_address,
    GetConnectionRequest: listener_get_request,
};
