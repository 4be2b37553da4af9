//! rdma_cm (`rdma_cm(7)`): connection set-up by IP address, for queue pairs this crate
//! owns. The QP stays ours (created in our PD, on our CQs); rdma_cm only runs the
//! CM handshake and computes each transition's attributes (`rdma_init_qp_attr`).
//!
//! Client: [`ResolvedRoute::resolve`] → create a QP on the device it names →
//! [`ResolvedRoute::connect`]. Server: [`CmListener::bind`] →
//! [`CmListener::get_request`] → create a QP → [`ConnectRequest::accept`].

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::ptr::{self, NonNull};
use std::time::{Duration, Instant};

use super::sys::{self, rdma_cm_event_type as ev};
use super::{Error, QpType, QueuePair};

/// Outstanding RDMA reads/atomics each side grants the other over rdma_cm.
const RD_ATOMIC_DEPTH: u8 = 16;

/// An rdma_cm id with its own event channel (so each connection's events are its own).
struct CmId {
    id: NonNull<sys::rdma_cm_id>,
    channel: NonNull<sys::rdma_event_channel>,
    connected: bool,
}

// SAFETY: rdma_cm ids are used from one owner at a time (no shared references escape).
unsafe impl Send for CmId {}

impl Drop for CmId {
    fn drop(&mut self) {
        if self.connected {
            // SAFETY: live, connected id; a failure only means the peer left first.
            unsafe { sys::rdma_disconnect(self.id.as_ptr()) };
        }
        // SAFETY: every event we got was acknowledged, so destroy_id will not block;
        // the id is destroyed once, then its channel.
        unsafe {
            sys::rdma_destroy_id(self.id.as_ptr());
            sys::rdma_destroy_event_channel(self.channel.as_ptr());
        }
    }
}

fn new_channel() -> Result<NonNull<sys::rdma_event_channel>, Error> {
    // SAFETY: no preconditions.
    let channel = unsafe { sys::rdma_create_event_channel() };
    let channel =
        NonNull::new(channel).ok_or_else(|| Error::last_os("rdma_create_event_channel"))?;
    // SAFETY: live channel; its fd is open.
    let fd = unsafe { channel.as_ref() }.fd;
    // SAFETY: plain fcntl on an open descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        let e = Error::last_os("fcntl(O_NONBLOCK)").on("rdma_cm event channel");
        // SAFETY: created above, not used by anything else.
        unsafe { sys::rdma_destroy_event_channel(channel.as_ptr()) };
        return Err(e);
    }
    Ok(channel)
}

/// What one rdma_cm event said, copied out before it is acknowledged.
struct Event {
    kind: sys::rdma_cm_event_type::Type,
    status: i32,
    new_id: *mut sys::rdma_cm_id,
    private_data: Vec<u8>,
}

fn event_name(kind: sys::rdma_cm_event_type::Type) -> String {
    // SAFETY: rdma_event_str returns a static string for any value.
    unsafe { CStr::from_ptr(sys::rdma_event_str(kind)) }.to_string_lossy().into_owned()
}

fn sockaddr_of(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { ptr::write(ptr::addr_of_mut!(storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { ptr::write(ptr::addr_of_mut!(storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

impl CmId {
    fn new() -> Result<Self, Error> {
        let channel = new_channel()?;
        let mut id: *mut sys::rdma_cm_id = ptr::null_mut();
        // SAFETY: live channel; `id` is an out-pointer.
        let rc = unsafe {
            sys::rdma_create_id(
                channel.as_ptr(),
                &mut id,
                ptr::null_mut(),
                sys::rdma_port_space::RDMA_PS_TCP,
            )
        };
        match NonNull::new(id) {
            Some(id) if rc == 0 => Ok(CmId { id, channel, connected: false }),
            _ => {
                let e = Error::last_os("rdma_create_id");
                // SAFETY: created above, unused.
                unsafe { sys::rdma_destroy_event_channel(channel.as_ptr()) };
                Err(e)
            }
        }
    }

    fn check(&self, rc: i32, verb: &'static str) -> Result<(), Error> {
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::last_os(verb))
        }
    }

    /// Waits for the next event and requires it to be `want`.
    fn expect(
        &self,
        want: sys::rdma_cm_event_type::Type,
        timeout: Duration,
    ) -> Result<Event, Error> {
        let e = self.next_event(timeout, event_name(want))?;
        if e.kind != want {
            if !e.new_id.is_null() {
                // A connect request we did not ask for on this id: refuse it.
                // SAFETY: the new id is ours to destroy after a reject.
                unsafe {
                    sys::rdma_reject(e.new_id, ptr::null(), 0);
                    sys::rdma_destroy_id(e.new_id);
                }
            }
            let why = match e.kind {
                ev::RDMA_CM_EVENT_REJECTED => {
                    "the peer rejected the connection (nothing listening there, or it refused)"
                        .to_string()
                }
                ev::RDMA_CM_EVENT_UNREACHABLE => "the peer is unreachable".to_string(),
                ev::RDMA_CM_EVENT_ADDR_ERROR => {
                    "address resolution failed (no RDMA device for this IP?)".to_string()
                }
                _ => format!("status {}", e.status),
            };
            return Err(Error::invalid(
                "rdma_get_cm_event",
                format!("expected {}, got {}: {why}", event_name(want), event_name(e.kind)),
            ));
        }
        Ok(e)
    }

    fn next_event(&self, timeout: Duration, waiting_for: String) -> Result<Event, Error> {
        let deadline = Instant::now() + timeout;
        // SAFETY: live channel; plain field read.
        let fd = unsafe { self.channel.as_ref() }.fd;
        loop {
            let mut event: *mut sys::rdma_cm_event = ptr::null_mut();
            // SAFETY: live channel (non-blocking); `event` is an out-pointer.
            let rc = unsafe { sys::rdma_get_cm_event(self.channel.as_ptr(), &mut event) };
            if rc == 0 {
                // SAFETY: the library handed us a valid event until we acknowledge it.
                let e = unsafe { &*event };
                let private_data = if e.event == ev::RDMA_CM_EVENT_CONNECT_REQUEST
                    || e.event == ev::RDMA_CM_EVENT_CONNECT_RESPONSE
                    || e.event == ev::RDMA_CM_EVENT_ESTABLISHED
                {
                    // SAFETY: for connection events the union holds `conn`.
                    let conn = unsafe { e.param.conn };
                    if conn.private_data.is_null() {
                        Vec::new()
                    } else {
                        // SAFETY: the library guarantees private_data_len readable bytes.
                        unsafe {
                            std::slice::from_raw_parts(
                                conn.private_data.cast::<u8>(),
                                usize::from(conn.private_data_len),
                            )
                        }
                        .to_vec()
                    }
                } else {
                    Vec::new()
                };
                let out = Event {
                    kind: e.event,
                    status: e.status,
                    new_id: if e.event == ev::RDMA_CM_EVENT_CONNECT_REQUEST {
                        e.id
                    } else {
                        ptr::null_mut()
                    },
                    private_data,
                };
                // SAFETY: acknowledged once, after copying what we need.
                unsafe { sys::rdma_ack_cm_event(event) };
                return Ok(out);
            }
            let err = Error::last_os("rdma_get_cm_event");
            if err.errno() != libc::EAGAIN && err.errno() != libc::EINTR {
                return Err(err);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::timeout("rdma_get_cm_event", timeout).on(waiting_for));
            }
            let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, ms) };
        }
    }

    fn device_name(&self) -> Option<String> {
        // SAFETY: live id; `verbs` is set once the address is resolved (or for a
        // request's id), and its device outlives the id.
        unsafe {
            let verbs = self.id.as_ref().verbs;
            if verbs.is_null() {
                return None;
            }
            let name = sys::ibv_get_device_name((*verbs).device);
            Some(CStr::from_ptr(name).to_string_lossy().into_owned())
        }
    }

    fn port(&self) -> u8 {
        // SAFETY: live id; plain field read.
        unsafe { self.id.as_ref() }.port_num
    }

    /// Moves `qp` to `state` with the attributes rdma_cm computes for this id.
    fn transition(
        &self,
        qp: &impl QueuePair,
        state: sys::ibv_qp_state::Type,
        what: &'static str,
    ) -> Result<(), Error> {
        // SAFETY: ibv_qp_attr is plain data; all-zero is valid.
        let mut attr: sys::ibv_qp_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        attr.qp_state = state;
        let mut mask = 0;
        // SAFETY: live id; out-structs valid.
        let rc = unsafe { sys::rdma_init_qp_attr(self.id.as_ptr(), &mut attr, &mut mask) };
        self.check(rc, "rdma_init_qp_attr")?;
        if state == sys::ibv_qp_state::IBV_QPS_INIT && qp.qp_type() == QpType::Rc {
            attr.qp_access_flags |= sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        }
        qp.core().modify(&mut attr, u32::try_from(mask).unwrap_or(0), what)
    }

    fn conn_param(qp: &impl QueuePair, private_data: &[u8]) -> Result<sys::rdma_conn_param, Error> {
        let len = u8::try_from(private_data.len()).map_err(|_| {
            Error::invalid("rdma_connect", format!("{} bytes of private data", private_data.len()))
        })?;
        Ok(sys::rdma_conn_param {
            private_data: private_data.as_ptr().cast(),
            private_data_len: len,
            responder_resources: RD_ATOMIC_DEPTH,
            initiator_depth: RD_ATOMIC_DEPTH,
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: 0,
            qp_num: qp.qp_num(),
        })
    }
}

/// Client side after address and route resolution: says which device and port reach
/// the peer, so the caller can build its QP there.
pub struct ResolvedRoute {
    id: CmId,
}

impl ResolvedRoute {
    /// Resolves `peer` (an IP address and the port it listens on) to a local RDMA
    /// device and a route.
    ///
    /// # Errors
    /// `rdma_resolve_addr` / `rdma_resolve_route` failures, an ADDR_ERROR event, or a
    /// timeout naming the event that never came.
    pub fn resolve(peer: SocketAddr, timeout: Duration) -> Result<Self, Error> {
        let id = CmId::new()?;
        let (mut dst, _) = sockaddr_of(&peer);
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: live id; `dst` is a valid sockaddr for the call.
        let rc = unsafe {
            sys::rdma_resolve_addr(
                id.id.as_ptr(),
                ptr::null_mut(),
                ptr::addr_of_mut!(dst).cast(),
                ms,
            )
        };
        id.check(rc, "rdma_resolve_addr").map_err(|e| e.on(peer.to_string()))?;
        id.expect(ev::RDMA_CM_EVENT_ADDR_RESOLVED, timeout).map_err(|e| e.on(peer.to_string()))?;
        // SAFETY: live id with a resolved address.
        let rc = unsafe { sys::rdma_resolve_route(id.id.as_ptr(), ms) };
        id.check(rc, "rdma_resolve_route")?;
        id.expect(ev::RDMA_CM_EVENT_ROUTE_RESOLVED, timeout).map_err(|e| e.on(peer.to_string()))?;
        Ok(ResolvedRoute { id })
    }

    /// The local device that reaches the peer (`rxe0`, `mlx4_0`).
    pub fn device_name(&self) -> String {
        self.id.device_name().unwrap_or_default()
    }

    /// The local port that reaches the peer.
    pub fn port(&self) -> u8 {
        self.id.port()
    }

    /// Connects `qp` (RESET, on [`device_name`](Self::device_name)) to the listener,
    /// sending `private_data` (at most 56 bytes) and returning the peer's.
    ///
    /// # Errors
    /// A rejected or unreachable peer, a timeout, or a failed transition.
    pub fn connect(
        self,
        qp: &impl QueuePair,
        private_data: &[u8],
        timeout: Duration,
    ) -> Result<CmConnection, Error> {
        let mut id = self.id;
        id.transition(qp, sys::ibv_qp_state::IBV_QPS_INIT, "INIT")?;
        let mut param = CmId::conn_param(qp, private_data)?;
        // SAFETY: live id; `param` and the private data it points to live across the call.
        let rc = unsafe { sys::rdma_connect(id.id.as_ptr(), &mut param) };
        id.check(rc, "rdma_connect")?;
        // The QP is ours, so rdma_cm stops at CONNECT_RESPONSE and lets us finish.
        let response = id.expect(ev::RDMA_CM_EVENT_CONNECT_RESPONSE, timeout)?;
        id.transition(qp, sys::ibv_qp_state::IBV_QPS_RTR, "RTR")?;
        id.transition(qp, sys::ibv_qp_state::IBV_QPS_RTS, "RTS")?;
        // SAFETY: live id after CONNECT_RESPONSE.
        let rc = unsafe { sys::rdma_establish(id.id.as_ptr()) };
        id.check(rc, "rdma_establish")?;
        id.connected = true;
        Ok(CmConnection { id, peer_private_data: response.private_data })
    }
}

/// A listening rdma_cm id.
pub struct CmListener {
    id: CmId,
}

impl CmListener {
    /// Binds to `addr` (port 0 picks one) and listens.
    ///
    /// # Errors
    /// `rdma_bind_addr` (EADDRINUSE, EADDRNOTAVAIL) or `rdma_listen`.
    pub fn bind(addr: SocketAddr) -> Result<Self, Error> {
        let id = CmId::new()?;
        let (mut sa, _) = sockaddr_of(&addr);
        // SAFETY: live id; valid sockaddr.
        let rc = unsafe { sys::rdma_bind_addr(id.id.as_ptr(), ptr::addr_of_mut!(sa).cast()) };
        id.check(rc, "rdma_bind_addr").map_err(|e| e.on(addr.to_string()))?;
        // SAFETY: bound id.
        let rc = unsafe { sys::rdma_listen(id.id.as_ptr(), 16) };
        id.check(rc, "rdma_listen").map_err(|e| e.on(addr.to_string()))?;
        Ok(CmListener { id })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        // SAFETY: bound id.
        u16::from_be(unsafe { sys::rdma_get_src_port(self.id.id.as_ptr()) })
    }

    /// Waits for a connection request.
    ///
    /// # Errors
    /// A timeout, or an unexpected event.
    pub fn get_request(&self, timeout: Duration) -> Result<ConnectRequest, Error> {
        let e = self.id.expect(ev::RDMA_CM_EVENT_CONNECT_REQUEST, timeout)?;
        let new_id = NonNull::new(e.new_id).ok_or_else(|| {
            Error::invalid("rdma_get_cm_event", "a connect request without an id")
        })?;
        // Give the new connection its own channel, so its events do not mix with the
        // listener's.
        let channel = match new_channel() {
            Ok(c) => c,
            Err(err) => {
                // SAFETY: the request's id is ours; reject and free it.
                unsafe {
                    sys::rdma_reject(new_id.as_ptr(), ptr::null(), 0);
                    sys::rdma_destroy_id(new_id.as_ptr());
                }
                return Err(err);
            }
        };
        // SAFETY: live id whose only event was acknowledged; live new channel.
        let rc = unsafe { sys::rdma_migrate_id(new_id.as_ptr(), channel.as_ptr()) };
        let id = CmId { id: new_id, channel, connected: false };
        id.check(rc, "rdma_migrate_id")?;
        Ok(ConnectRequest { id, private_data: e.private_data })
    }
}

/// An incoming connection request, to accept with a QP or reject.
pub struct ConnectRequest {
    id: CmId,
    private_data: Vec<u8>,
}

impl ConnectRequest {
    /// The local device the request arrived on.
    pub fn device_name(&self) -> String {
        self.id.device_name().unwrap_or_default()
    }

    /// The local port it arrived on.
    pub fn port(&self) -> u8 {
        self.id.port()
    }

    /// The client's private data (RoCE and IB pad it: the length may exceed what
    /// was sent).
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// Accepts with `qp` (RESET, on [`device_name`](Self::device_name)), replying
    /// with `private_data`.
    ///
    /// # Errors
    /// A failed transition or `rdma_accept`, or no ESTABLISHED within `timeout`.
    pub fn accept(
        self,
        qp: &impl QueuePair,
        private_data: &[u8],
        timeout: Duration,
    ) -> Result<CmConnection, Error> {
        let mut id = self.id;
        id.transition(qp, sys::ibv_qp_state::IBV_QPS_INIT, "INIT")?;
        id.transition(qp, sys::ibv_qp_state::IBV_QPS_RTR, "RTR")?;
        let mut param = CmId::conn_param(qp, private_data)?;
        // SAFETY: live id; `param` and its private data live across the call.
        let rc = unsafe { sys::rdma_accept(id.id.as_ptr(), &mut param) };
        id.check(rc, "rdma_accept")?;
        id.connected = true;
        id.expect(ev::RDMA_CM_EVENT_ESTABLISHED, timeout)?;
        id.transition(qp, sys::ibv_qp_state::IBV_QPS_RTS, "RTS")?;
        Ok(CmConnection { id, peer_private_data: self.private_data })
    }

    /// Refuses the request; the client's connect fails with REJECTED.
    pub fn reject(self) {
        // SAFETY: live request id; dropping `self` destroys it afterwards.
        unsafe { sys::rdma_reject(self.id.id.as_ptr(), ptr::null(), 0) };
    }
}

/// An established rdma_cm connection. Dropping it disconnects.
pub struct CmConnection {
    id: CmId,
    peer_private_data: Vec<u8>,
}

impl CmConnection {
    /// What the peer sent with its connect or accept.
    pub fn peer_private_data(&self) -> &[u8] {
        &self.peer_private_data
    }

    /// Disconnects now; the peer's QP sees its work flushed.
    pub fn disconnect(mut self) {
        self.id.connected = false;
        // SAFETY: live, connected id.
        unsafe { sys::rdma_disconnect(self.id.id.as_ptr()) };
    }
}
