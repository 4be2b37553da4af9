//! [`Transport`] over NetworkDirect (`ffi::nd`): connected queue pairs set up by an
//! ND connector (client) and listener (server), one CQ and one registered buffer per
//! connection.
//!
//! Where ND differs from verbs, and how the trait takes it:
//! - ND connects through its connector, like rdma_cm, not by exchanging QP numbers:
//!   the server's endpoint carries the address its listener waits on, the client's
//!   connects there; the private data says which queue pair a request is for.
//! - No atomics and no immediate data in NDSPI v2: [`Capabilities`] say so and the
//!   loops refuse them up front ("… is not supported by NetworkDirect").
//! - "Signaled" is `ND_OP_FLAG_SILENT_SUCCESS` inverted; failures always complete.
//! - No queue-pair state to query: a broken connection shows as failed completions.

use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ffi::nd::{
    self, status, Adapter, CompletionQueue, Connector, Listener, MemoryRegion, MrFlags,
    NdCompletion, NdError, OpFlags, QpCaps, QueuePair, RequestKind,
};
use ffi::types::RemoteBuffer;
use serde::{Deserialize, Serialize};

use super::{
    Capabilities, Completion, CompletionKind, Connection, ConnectionConfig, Failure, Op, RecvRange,
    Service, Status, Transport, TransportError, WorkRequest,
};

impl From<NdError> for TransportError {
    fn from(e: NdError) -> Self {
        TransportError::Nd(e)
    }
}

/// Which end of the connection this side is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NdRole {
    /// Listens and accepts (the server).
    Accept,
    /// Connects to the peer's listener (the client).
    Connect,
}

/// An opened NetworkDirect adapter.
pub struct NdTransport {
    adapter: Adapter,
    local: IpAddr,
    timeout: Duration,
    read_limit: u32,
    caps: Capabilities,
    /// The server's listener; a transport without one connects (the client).
    listener: Option<RefCell<Listener>>,
    prepared: std::cell::Cell<u32>,
}

/// The exchange record of an ND connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NdEndpoint {
    /// The buffer the peer may target (the token is the region's remote token).
    pub buffer: RemoteBuffer,
    /// Where the server's listener waits (absent on the client's records).
    pub listen: Option<SocketAddr>,
    /// Which queue pair of the run this is.
    pub index: u32,
}

/// A connection's resources before the peer is known.
pub struct NdPrepared {
    connector: Connector,
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
    index: u32,
}

/// A connected ND queue pair, its CQ and buffer.
pub struct NdConnection {
    // Dropped first: the connector disconnects before the queue pair goes.
    connector: Connector,
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
    remote: RemoteBuffer,
    caps: Capabilities,
    scratch: Vec<NdCompletion>,
}

impl NdTransport {
    /// Opens the adapter that owns `local` (the address this side reaches the peer
    /// from); the server (`NdRole::Accept`) starts listening on it at once.
    ///
    /// # Errors
    /// No provider or no adapter with that address (`NoDevice`, one line naming what
    /// is missing), or the adapter refusing to listen.
    pub fn open(
        local: IpAddr,
        role: NdRole,
        timeout: Duration,
        read_limit: Option<u32>,
    ) -> Result<Self, TransportError> {
        let adapter = nd::open_adapter(local).map_err(|e| match e {
            nd::OpenError::Nd(e) => TransportError::Nd(e),
            other => TransportError::NoDevice(other.to_string()),
        })?;
        let info = *adapter.info();
        let caps = Capabilities {
            backend: "NetworkDirect",
            send: true,
            rdma_write: true,
            rdma_read: true,
            atomics: false,
            immediate: false,
            max_inline: info.MaxInlineDataSize,
            max_message: u64::from(info.MaxTransferLength),
            recv_overhead: 0,
            events: true,
        };
        let most = info.MaxOutboundReadLimit.min(info.MaxInboundReadLimit).max(1);
        let read_limit = read_limit.unwrap_or(16).min(most);
        let listener = match role {
            NdRole::Accept => Some(RefCell::new(adapter.listen(SocketAddr::new(local, 0), 64)?)),
            NdRole::Connect => None,
        };
        Ok(NdTransport {
            adapter,
            local,
            timeout,
            read_limit,
            caps,
            listener,
            prepared: std::cell::Cell::new(0),
        })
    }

    /// The adapter.
    pub fn adapter(&self) -> &Adapter {
        &self.adapter
    }

    /// The local address it was opened by.
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// Outstanding RDMA reads each side allows.
    pub fn read_limit(&self) -> u32 {
        self.read_limit
    }
}

impl Transport for NdTransport {
    type Prepared = NdPrepared;
    type Connection = NdConnection;
    type Endpoint = NdEndpoint;

    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    fn prepare(&self, cfg: &ConnectionConfig) -> Result<(NdPrepared, NdEndpoint), TransportError> {
        if cfg.service != Service::Rc {
            return Err(TransportError::Unsupported(format!(
                "{:?} is not supported by NetworkDirect (it connects reliable queue pairs only)",
                cfg.service
            )));
        }
        let info = self.adapter.info();
        let depth = (cfg.tx_depth + cfg.rx_depth).min(info.MaxCompletionQueueDepth).max(1);
        let cq = self.adapter.create_cq(depth)?;
        let mr = self.adapter.register(cfg.buf_len, MrFlags::ALL)?;
        let caps = QpCaps {
            receive_depth: cfg.rx_depth.max(1),
            initiator_depth: cfg.tx_depth.max(1),
            receive_sge: 1,
            initiator_sge: 1,
            inline_data: cfg.max_inline.min(info.MaxInlineDataSize),
        };
        let index = self.prepared.get();
        self.prepared.set(index + 1);
        let qp = self.adapter.create_qp(&cq, &cq, caps, u64::from(index))?;
        let connector = self.adapter.create_connector()?;
        let listen = match &self.listener {
            Some(l) => Some(l.borrow().local_address()?),
            None => None,
        };
        let ep = NdEndpoint { buffer: mr.remote(), listen, index };
        Ok((NdPrepared { connector, qp, cq, mr, index }, ep))
    }

    fn connect(
        &self,
        prepared: NdPrepared,
        peer: &NdEndpoint,
    ) -> Result<NdConnection, TransportError> {
        let NdPrepared { mut connector, qp, cq, mr, index } = prepared;
        if peer.index != index {
            return Err(TransportError::Broken(format!(
                "the peer's endpoint {} was paired with queue pair {index}",
                peer.index
            )));
        }
        let limits = (self.read_limit, self.read_limit);
        match (&self.listener, peer.listen) {
            (None, Some(at)) => {
                connector.bind(SocketAddr::new(self.local, 0))?;
                connector.connect(&qp, at, limits, &index.to_le_bytes(), self.timeout)?;
            }
            (Some(listener), _) => {
                listener.borrow_mut().get_request(&mut connector, self.timeout)?;
                let asked = connector.private_data()?;
                if asked != index.to_le_bytes() {
                    let _ = connector.reject(&[]);
                    return Err(TransportError::Broken(format!(
                        "a connection request for queue pair {asked:?} arrived while {index} was expected"
                    )));
                }
                connector.accept(&qp, limits, &[], self.timeout)?;
            }
            (None, None) => {
                return Err(TransportError::Broken(
                    "the client's peer record names no listener to connect to".into(),
                ))
            }
        }
        Ok(NdConnection {
            connector,
            qp,
            cq,
            mr,
            remote: peer.buffer,
            caps: self.caps.clone(),
            scratch: vec![NdCompletion::default(); 64],
        })
    }
}

fn kind(k: RequestKind) -> CompletionKind {
    match k {
        RequestKind::Send => CompletionKind::Send,
        RequestKind::Write => CompletionKind::Write,
        RequestKind::Read => CompletionKind::Read,
        RequestKind::Receive => CompletionKind::Recv,
        _ => CompletionKind::Other,
    }
}

fn completion_status(hr: i32) -> Status {
    if hr == status::ND_SUCCESS {
        return Status::Success;
    }
    Status::Failed(Failure::new(hr as u32, |code| {
        status::describe(code as i32)
            .unwrap_or(("ND_UNKNOWN_STATUS", "a status NetworkDirect does not define"))
    }))
}

impl NdConnection {
    /// The peer's buffer.
    pub fn remote(&self) -> RemoteBuffer {
        self.remote
    }

    /// The connector (addresses, read limits).
    pub fn connector(&self) -> &Connector {
        &self.connector
    }
}

impl Connection for NdConnection {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn local(&self) -> &[u8] {
        self.mr.as_slice()
    }

    fn local_mut(&mut self) -> &mut [u8] {
        self.mr.as_mut_slice()
    }

    #[inline(always)]
    fn wait_u8(&self, offset: usize, expect: u8, reads: u32) -> u32 {
        self.mr.wait_u8(offset, expect, reads)
    }

    // Nothing to encode ahead: a prepared request is the request.
    type Prepared = WorkRequest;

    fn prepare(&mut self, wr: &WorkRequest) -> Result<WorkRequest, TransportError> {
        Ok(*wr)
    }

    fn post_prepared(
        &mut self,
        req: &mut WorkRequest,
        wr_id: u64,
        signaled: bool,
    ) -> Result<(), TransportError> {
        self.post(&WorkRequest { wr_id, signaled, ..*req })
    }

    #[inline]
    fn post(&mut self, wr: &WorkRequest) -> Result<(), TransportError> {
        let local = [self.mr.slice(wr.local_offset, wr.len as usize)?];
        let flags = OpFlags::new(wr.signaled, wr.inline);
        let remote = || self.remote.slice(wr.remote_offset, u64::from(wr.len));
        match wr.op {
            Op::Send => self.qp.send(wr.wr_id, &local, flags)?,
            Op::Write => self.qp.write(wr.wr_id, &local, remote()?, flags)?,
            Op::Read => self.qp.read(wr.wr_id, &local, remote()?, flags)?,
            // Atomics and immediate data: the capabilities name what ND lacks.
            other => {
                self.caps.check(&other, u64::from(wr.len), wr.inline)?;
                return Err(TransportError::Unsupported(format!(
                    "{} is not supported by NetworkDirect",
                    other.name()
                )));
            }
        }
        Ok(())
    }

    fn post_recv(&mut self, wr_id: u64, offset: usize, len: u32) -> Result<(), TransportError> {
        let local = [self.mr.slice(offset, len as usize)?];
        Ok(self.qp.receive(wr_id, &local)?)
    }

    type PreparedRecv = RecvRange;

    fn prepare_recv(&mut self, offset: usize, len: u32) -> Result<RecvRange, TransportError> {
        self.mr.slice(offset, len as usize)?;
        Ok(RecvRange { offset, len })
    }

    #[inline]
    fn post_prepared_recv(&mut self, r: &mut RecvRange, wr_id: u64) -> Result<(), TransportError> {
        self.post_recv(wr_id, r.offset, r.len)
    }

    type Completion = Completion;

    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, TransportError> {
        let want = out.len().min(self.scratch.len());
        let n = self.cq.poll(&mut self.scratch[..want]);
        for (dst, c) in out.iter_mut().zip(&self.scratch[..n]) {
            *dst = Completion {
                wr_id: c.context(),
                status: completion_status(c.status()),
                kind: kind(c.kind()),
                byte_len: c.bytes(),
                imm: None,
            };
        }
        Ok(n)
    }

    fn arm(&mut self) -> Result<(), TransportError> {
        Ok(self.cq.arm()?)
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, TransportError> {
        Ok(self.cq.wait(timeout)?)
    }

    fn check_state(&self) -> Result<(), TransportError> {
        // ND has no queue-pair state to query; failures arrive as completions.
        Ok(())
    }
}
