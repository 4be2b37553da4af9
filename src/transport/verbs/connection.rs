//! A connected verbs queue pair: what the test loops post to and poll ([`Connection`]),
//! and how verbs' completions read as the loops' [`Polled`].

use std::time::Duration;

use ffi::verbs::{
    AddressHandle, CmConnection, CompletionQueue, GenericQueuePair, LocalSlice, MemoryRegion,
    PreparedSend, QpState, QueuePair, RemoteBuffer, SendOp, SendRequest, UdDest, WcOpcode,
    WcStatus, DEFAULT_QKEY, MAX_POST_LIST,
};

use super::super::{
    Capabilities, Completion, CompletionKind, Connection, Failure, Op, Polled, Status,
    TransportError, WorkRequest,
};

/// A connected verbs queue pair with its buffer and the peer's.
pub struct VerbsConnection {
    // The QP must go before the CQ and buffer it uses; it holds clones of them anyway.
    pub(super) qp: GenericQueuePair,
    pub(super) ah: Option<AddressHandle>,
    pub(super) cq: CompletionQueue,
    pub(super) mr: MemoryRegion,
    pub(super) remote: RemoteBuffer,
    pub(super) remote_qpn: u32,
    pub(super) caps: Capabilities,
    // rdma_cm connections (-R) disconnect when dropped, after the QP.
    pub(super) _cm: Option<CmConnection>,
}

impl VerbsConnection {
    /// Where a receive of up to `len` payload bytes at `offset` lands: on UD the GRH
    /// takes the `recv_overhead` bytes in front of the payload.
    #[inline(always)]
    fn recv_slice(&self, offset: usize, len: u32) -> Result<LocalSlice<'_>, TransportError> {
        let overhead = self.caps.recv_overhead as usize;
        Ok(self.mr.slice(offset, overhead + len as usize)?)
    }

    /// The queue pair (for tests and diagnostics).
    pub fn qp(&self) -> &GenericQueuePair {
        &self.qp
    }

    /// The peer's buffer.
    pub fn remote(&self) -> RemoteBuffer {
        self.remote
    }

    /// Sets the peer's buffer, for connections made before the buffers were exchanged
    /// (rdma_cm).
    pub fn set_remote(&mut self, remote: RemoteBuffer) {
        self.remote = remote;
    }
}

fn kind(op: WcOpcode) -> CompletionKind {
    match op {
        WcOpcode::Send => CompletionKind::Send,
        WcOpcode::RdmaWrite => CompletionKind::Write,
        WcOpcode::RdmaRead => CompletionKind::Read,
        WcOpcode::CompSwap | WcOpcode::FetchAdd => CompletionKind::Atomic,
        WcOpcode::Recv => CompletionKind::Recv,
        WcOpcode::RecvRdmaWithImm => CompletionKind::RecvWriteImm,
        _ => CompletionKind::Other,
    }
}

fn status(s: WcStatus) -> Status {
    match s {
        WcStatus::Success => Status::Success,
        other => Status::Failed(Failure::new(other.code(), |code| {
            let s = WcStatus::from_raw(code);
            (s.name(), s.meaning())
        })),
    }
}

impl Polled for ffi::verbs::Completion {
    #[inline(always)]
    fn wr_id(&self) -> u64 {
        ffi::verbs::Completion::wr_id(self)
    }
    #[inline(always)]
    fn status(&self) -> Status {
        // A run's completions all succeed: no decode for them.
        if self.is_success() {
            Status::Success
        } else {
            status(ffi::verbs::Completion::status(self))
        }
    }
    #[inline(always)]
    fn is_receive(&self) -> bool {
        ffi::verbs::Completion::is_receive(self)
    }
    #[inline(always)]
    fn imm(&self) -> Option<u32> {
        self.imm_data()
    }
    fn completion(&self) -> Completion {
        Completion {
            wr_id: self.wr_id(),
            status: Polled::status(self),
            kind: kind(self.opcode()),
            byte_len: self.byte_len(),
            imm: self.imm_data(),
        }
    }
}

impl VerbsConnection {
    /// The local range a request names (past the GRH room on UD).
    #[inline]
    fn local_slice(&self, wr: &WorkRequest) -> Result<LocalSlice<'_>, TransportError> {
        let skip = self.caps.recv_overhead as usize;
        Ok(self.mr.slice(skip + wr.local_offset, wr.len as usize)?)
    }

    /// `wr` as the verbs request over `local`.
    #[inline]
    fn request<'a>(
        &'a self,
        wr: &WorkRequest,
        local: &'a [LocalSlice<'a>],
    ) -> Result<SendRequest<'a>, TransportError> {
        let remote = || self.remote.slice(wr.remote_offset, u64::from(wr.len));
        let op = match wr.op {
            Op::Send => SendOp::Send,
            Op::SendImm(imm) => SendOp::SendImm(imm),
            Op::Write => SendOp::Write(remote()?),
            Op::WriteImm(imm) => SendOp::WriteImm(remote()?, imm),
            Op::Read => SendOp::Read(remote()?),
            Op::FetchAdd(add) => SendOp::FetchAdd { remote: remote()?, add },
            Op::CompareSwap { compare, swap } => {
                SendOp::CompareSwap { remote: remote()?, compare, swap }
            }
        };
        let mut req = SendRequest::new(wr.wr_id, op, local);
        req.flags.signaled = wr.signaled;
        req.flags.inline = wr.inline;
        if let Some(ah) = &self.ah {
            req.ud = Some(UdDest { ah, remote_qpn: self.remote_qpn, remote_qkey: DEFAULT_QKEY });
        }
        Ok(req)
    }
}

impl Connection for VerbsConnection {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn local(&self) -> &[u8] {
        &self.mr.as_slice()[self.caps.recv_overhead as usize..]
    }

    fn local_mut(&mut self) -> &mut [u8] {
        let skip = self.caps.recv_overhead as usize;
        &mut self.mr.as_mut_slice()[skip..]
    }

    #[inline(always)]
    fn wait_u8(&self, offset: usize, expect: u8, reads: u32) -> u32 {
        self.mr.wait_u8(self.caps.recv_overhead as usize + offset, expect, reads)
    }

    #[inline]
    fn store_u8(&mut self, offset: usize, value: u8) {
        self.mr.store_u8(self.caps.recv_overhead as usize + offset, value);
    }

    #[inline]
    fn post(&mut self, wr: &WorkRequest) -> Result<(), TransportError> {
        let local = [self.local_slice(wr)?];
        let req = self.request(wr, &local)?;
        self.qp.post_send(&req)?;
        Ok(())
    }

    fn post_list(&mut self, wrs: &[WorkRequest]) -> Result<(), TransportError> {
        if let [one] = wrs {
            return self.post(one);
        }
        for chunk in wrs.chunks(MAX_POST_LIST) {
            // Each request's one SGE, then the requests over them: all on the stack.
            let mut locals: [Option<LocalSlice<'_>>; MAX_POST_LIST] = [None; MAX_POST_LIST];
            for (slot, wr) in locals.iter_mut().zip(chunk) {
                *slot = Some(self.local_slice(wr)?);
            }
            let mut reqs = [SendRequest::new(0, SendOp::Send, &[]); MAX_POST_LIST];
            for ((req, wr), local) in reqs.iter_mut().zip(chunk).zip(&locals) {
                *req = self.request(wr, local.as_slice())?;
            }
            self.qp.post_send_list(&reqs[..chunk.len()])?;
        }
        Ok(())
    }

    type Prepared = PreparedSend;

    fn prepare(&mut self, wr: &WorkRequest) -> Result<PreparedSend, TransportError> {
        let local = [self.local_slice(wr)?];
        Ok(self.qp.prepare_send(&self.request(wr, &local)?)?)
    }

    // Inlined into the loops, down to the provider's calls (as `poll`): the latency
    // loops' per-operation instructions are counted against perftest's (ci/bench-instructions).
    #[inline(always)]
    fn post_prepared(
        &mut self,
        req: &mut PreparedSend,
        wr_id: u64,
        signaled: bool,
    ) -> Result<(), TransportError> {
        Ok(self.qp.post_prepared(req, &self.mr, wr_id, signaled)?)
    }

    #[inline(always)]
    fn post_recv(&mut self, wr_id: u64, offset: usize, len: u32) -> Result<(), TransportError> {
        let slice = self.recv_slice(offset, len)?;
        // Under --use-srq the QP takes its receives from the shared queue it holds.
        match self.qp.srq() {
            Some(srq) => srq.post_recv(wr_id, &[slice])?,
            None => self.qp.post_recv(wr_id, &[slice])?,
        }
        Ok(())
    }

    type PreparedRecv = ffi::verbs::PreparedRecv;

    fn prepare_recv(
        &mut self,
        offset: usize,
        len: u32,
    ) -> Result<ffi::verbs::PreparedRecv, TransportError> {
        Ok(self.qp.prepare_recv(&self.recv_slice(offset, len)?)?)
    }

    #[inline(always)]
    fn post_prepared_recv(
        &mut self,
        recv: &mut ffi::verbs::PreparedRecv,
        wr_id: u64,
    ) -> Result<(), TransportError> {
        Ok(self.qp.post_prepared_recv(recv, &self.mr, wr_id)?)
    }

    type Completion = ffi::verbs::Completion;

    #[inline(always)]
    fn poll(&mut self, out: &mut [ffi::verbs::Completion]) -> Result<usize, TransportError> {
        Ok(self.cq.poll(out)?)
    }

    fn arm(&mut self) -> Result<(), TransportError> {
        Ok(self.cq.req_notify(false)?)
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, TransportError> {
        Ok(self.cq.wait(timeout)?)
    }

    fn check_state(&self) -> Result<(), TransportError> {
        match self.qp.state()? {
            QpState::ReadyToSend => Ok(()),
            other => Err(TransportError::Broken(format!(
                "QP {} is in state {other:?}",
                self.qp.qp_num()
            ))),
        }
    }
}
