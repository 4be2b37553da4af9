//! `ibv_create_cq(3)`, `ibv_poll_cq(3)` and completion events
//! (`ibv_create_comp_channel(3)`, `ibv_req_notify_cq(3)`, `ibv_get_cq_event(3)`).

use std::fmt;
use std::mem::MaybeUninit;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{sys, Context, Error};

/// A completion channel: the file descriptor that event-mode CQs signal. Shared by
/// the CQs created on it, and destroyed after the last of them.
#[derive(Clone)]
pub struct CompletionChannel {
    inner: Arc<ChannelInner>,
}

struct ChannelInner {
    raw: NonNull<sys::ibv_comp_channel>,
    _context: Context,
}

// SAFETY: the channel is a file descriptor plus library state guarded by the library.
unsafe impl Send for ChannelInner {}
// SAFETY: as above.
unsafe impl Sync for ChannelInner {}

impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_comp_channel; every CQ on it holds this Arc and
        // is destroyed first.
        let rc = unsafe { sys::ibv_destroy_comp_channel(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_comp_channel failed");
    }
}

impl Context {
    /// Creates a completion channel, its descriptor non-blocking so waits can time out.
    ///
    /// # Errors
    /// `ibv_create_comp_channel` or `fcntl` with their errno.
    pub fn create_comp_channel(&self) -> Result<CompletionChannel, Error> {
        // SAFETY: live context.
        let raw = unsafe { sys::ibv_create_comp_channel(self.as_ptr()) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::last_os("ibv_create_comp_channel").on(self.name()))?;
        let channel =
            CompletionChannel { inner: Arc::new(ChannelInner { raw, _context: self.clone() }) };
        let fd = channel.fd();
        // SAFETY: `fd` is the channel's open descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above; adding O_NONBLOCK is always valid.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(Error::last_os("fcntl(O_NONBLOCK)").on("completion channel"));
        }
        Ok(channel)
    }

    /// Creates a completion queue with room for at least `entries` completions,
    /// optionally signalling `channel` when armed with
    /// [`req_notify`](CompletionQueue::req_notify).
    ///
    /// # Errors
    /// `ibv_create_cq` with its errno (EINVAL when `entries` exceeds `max_cqe`).
    pub fn create_cq(
        &self,
        entries: u32,
        channel: Option<&CompletionChannel>,
    ) -> Result<CompletionQueue, Error> {
        let cqe = i32::try_from(entries)
            .map_err(|_| Error::invalid("ibv_create_cq", format!("{entries} entries")))?;
        let channel_ptr = channel.map_or(ptr::null_mut(), |c| c.inner.raw.as_ptr());
        // SAFETY: live context; the channel (if any) is live and outlives the CQ (the
        // CQ holds it).
        let raw =
            unsafe { sys::ibv_create_cq(self.as_ptr(), cqe, ptr::null_mut(), channel_ptr, 0) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::last_os("ibv_create_cq").on(format!("{} cqe {entries}", self.name()))
        })?;
        // (Made before the check below: a refused CQ is still destroyed, on drop.)
        let inner = CqInner { raw, channel: channel.cloned(), _context: self.clone() };
        // SAFETY: a live CQ; its context and the context's ops table live as long.
        let poll_cq = unsafe { (*(*raw.as_ptr()).context).ops.poll_cq }.ok_or_else(|| {
            Error::invalid("ibv_poll_cq", format!("{}'s provider has no poll_cq", self.name()))
        })?;
        Ok(CompletionQueue { inner: Arc::new(inner), poll_cq })
    }
}

impl CompletionChannel {
    /// The descriptor that becomes readable when an armed CQ gets a completion.
    pub fn fd(&self) -> i32 {
        // SAFETY: live channel; plain field read.
        unsafe { self.inner.raw.as_ref() }.fd
    }
}

/// The provider's `poll_cq`, as `ibv_poll_cq` would look it up on every call.
type PollCq = unsafe extern "C" fn(*mut sys::ibv_cq, i32, *mut sys::ibv_wc) -> i32;

/// A completion queue. Cheap to clone (shared); queue pairs hold it alive.
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
    /// Looked up (and checked) once, at creation: a poll is the hot path.
    poll_cq: PollCq,
}

struct CqInner {
    raw: NonNull<sys::ibv_cq>,
    channel: Option<CompletionChannel>,
    _context: Context,
}

// SAFETY: ibv_poll_cq and friends are thread-safe in libibverbs.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_cq; destroyed once, after every QP using it
        // (they hold this Arc). Every event we got was acknowledged in `wait`.
        let rc = unsafe { sys::ibv_destroy_cq(self.raw.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_cq failed");
    }
}

impl CompletionQueue {
    /// How many completions it holds (`cqe`, at least what was asked for).
    pub fn capacity(&self) -> usize {
        // SAFETY: live CQ; plain field read.
        usize::try_from(unsafe { self.inner.raw.as_ref() }.cqe).unwrap_or(0)
    }

    /// Moves up to `out.len()` completions into `out`; returns how many. Allocates
    /// nothing: [`Completion`] has the layout of `struct ibv_wc`.
    ///
    /// # Errors
    /// `ibv_poll_cq` when the provider reports a failure (a CQ overrun on some HCAs).
    #[inline(always)]
    pub fn poll(&self, out: &mut [Completion]) -> Result<usize, Error> {
        let n = i32::try_from(out.len()).unwrap_or(i32::MAX);
        // SAFETY: live CQ, and its provider's poll_cq (what ibv_poll_cq calls); `out`
        // has room for `n` entries of `ibv_wc` layout (Completion is repr(transparent)
        // over it).
        let got = unsafe { (self.poll_cq)(self.inner.raw.as_ptr(), n, out.as_mut_ptr().cast()) };
        usize::try_from(got).map_err(|_| Error::from_errno("ibv_poll_cq", -got))
    }

    /// Arms the CQ: the next completion (or next solicited one) signals its channel.
    ///
    /// # Errors
    /// Refused without a channel; `ibv_req_notify_cq` with its errno.
    pub fn req_notify(&self, solicited_only: bool) -> Result<(), Error> {
        if self.inner.channel.is_none() {
            return Err(Error::invalid(
                "ibv_req_notify_cq",
                "the CQ was created without a channel",
            ));
        }
        // SAFETY: live CQ.
        let rc =
            unsafe { sys::ibv_req_notify_cq(self.inner.raw.as_ptr(), i32::from(solicited_only)) };
        if rc != 0 {
            return Err(Error::from_errno("ibv_req_notify_cq", rc));
        }
        Ok(())
    }

    /// Waits up to `timeout` for the armed CQ's channel to fire, and acknowledges the
    /// event. Returns `false` on timeout. Poll afterwards, and re-arm before the next
    /// wait.
    ///
    /// # Errors
    /// Refused without a channel; `poll(2)` or `ibv_get_cq_event` with their errno.
    pub fn wait(&self, timeout: Duration) -> Result<bool, Error> {
        let channel = self.inner.channel.as_ref().ok_or_else(|| {
            Error::invalid("ibv_get_cq_event", "the CQ was created without a channel")
        })?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd { fd: channel.fd(), events: libc::POLLIN, revents: 0 };
            let ms = i32::try_from(left.as_millis().max(u128::from(!left.is_zero())))
                .unwrap_or(i32::MAX);
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
            if ready < 0 {
                let e = Error::last_os("poll");
                if e.errno() == libc::EINTR {
                    continue;
                }
                return Err(e.on("completion channel"));
            }
            if ready == 0 {
                return Ok(false);
            }
            let mut cq: *mut sys::ibv_cq = ptr::null_mut();
            let mut cq_context: *mut c_void = ptr::null_mut();
            // SAFETY: live channel; out-pointers are valid. The descriptor is
            // non-blocking, so a spurious wake gives EAGAIN instead of blocking.
            let rc = unsafe {
                sys::ibv_get_cq_event(channel.inner.raw.as_ptr(), &mut cq, &mut cq_context)
            };
            if rc != 0 {
                let e = Error::last_os("ibv_get_cq_event");
                if e.errno() == libc::EAGAIN {
                    continue;
                }
                return Err(e);
            }
            // SAFETY: `cq` is the CQ the library just gave an event for; acknowledging
            // it once balances that event (required before ibv_destroy_cq).
            unsafe { sys::ibv_ack_cq_events(cq, 1) };
            return Ok(true);
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_cq {
        self.inner.raw.as_ptr()
    }

    /// The C handle, for calling rdma-sys directly. Valid while any clone lives.
    pub fn as_raw(&self) -> *mut sys::ibv_cq {
        self.as_ptr()
    }
}

/// What a completion says happened (`enum ibv_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum WcStatus {
    Success,
    LocLenErr,
    LocQpOpErr,
    LocEecOpErr,
    LocProtErr,
    WrFlushErr,
    MwBindErr,
    BadRespErr,
    LocAccessErr,
    RemInvReqErr,
    RemAccessErr,
    RemOpErr,
    RetryExcErr,
    RnrRetryExcErr,
    LocRddViolErr,
    RemInvRdReqErr,
    RemAbortErr,
    InvEecnErr,
    InvEecStateErr,
    FatalErr,
    RespTimeoutErr,
    GeneralErr,
    TmErr,
    TmRndvIncomplete,
    /// A code this build does not know.
    Unknown(u32),
}

impl WcStatus {
    const ALL: [WcStatus; 24] = {
        use WcStatus::*;
        [
            Success,
            LocLenErr,
            LocQpOpErr,
            LocEecOpErr,
            LocProtErr,
            WrFlushErr,
            MwBindErr,
            BadRespErr,
            LocAccessErr,
            RemInvReqErr,
            RemAccessErr,
            RemOpErr,
            RetryExcErr,
            RnrRetryExcErr,
            LocRddViolErr,
            RemInvRdReqErr,
            RemAbortErr,
            InvEecnErr,
            InvEecStateErr,
            FatalErr,
            RespTimeoutErr,
            GeneralErr,
            TmErr,
            TmRndvIncomplete,
        ]
    };

    /// Decodes the C value.
    pub fn from_raw(code: u32) -> Self {
        Self::ALL.get(code as usize).copied().unwrap_or(WcStatus::Unknown(code))
    }

    /// The C value (`enum ibv_wc_status`).
    pub fn code(self) -> u32 {
        match self {
            WcStatus::Unknown(code) => code,
            known => Self::ALL.iter().position(|&s| s == known).unwrap_or(0) as u32,
        }
    }

    /// The C name, as `ibv_wc_status_str(3)` and perftest print it.
    pub fn name(self) -> &'static str {
        use WcStatus::*;
        match self {
            Success => "IBV_WC_SUCCESS",
            LocLenErr => "IBV_WC_LOC_LEN_ERR",
            LocQpOpErr => "IBV_WC_LOC_QP_OP_ERR",
            LocEecOpErr => "IBV_WC_LOC_EEC_OP_ERR",
            LocProtErr => "IBV_WC_LOC_PROT_ERR",
            WrFlushErr => "IBV_WC_WR_FLUSH_ERR",
            MwBindErr => "IBV_WC_MW_BIND_ERR",
            BadRespErr => "IBV_WC_BAD_RESP_ERR",
            LocAccessErr => "IBV_WC_LOC_ACCESS_ERR",
            RemInvReqErr => "IBV_WC_REM_INV_REQ_ERR",
            RemAccessErr => "IBV_WC_REM_ACCESS_ERR",
            RemOpErr => "IBV_WC_REM_OP_ERR",
            RetryExcErr => "IBV_WC_RETRY_EXC_ERR",
            RnrRetryExcErr => "IBV_WC_RNR_RETRY_EXC_ERR",
            LocRddViolErr => "IBV_WC_LOC_RDD_VIOL_ERR",
            RemInvRdReqErr => "IBV_WC_REM_INV_RD_REQ_ERR",
            RemAbortErr => "IBV_WC_REM_ABORT_ERR",
            InvEecnErr => "IBV_WC_INV_EECN_ERR",
            InvEecStateErr => "IBV_WC_INV_EEC_STATE_ERR",
            FatalErr => "IBV_WC_FATAL_ERR",
            RespTimeoutErr => "IBV_WC_RESP_TIMEOUT_ERR",
            GeneralErr => "IBV_WC_GENERAL_ERR",
            TmErr => "IBV_WC_TM_ERR",
            TmRndvIncomplete => "IBV_WC_TM_RNDV_INCOMPLETE",
            Unknown(_) => "IBV_WC_UNKNOWN",
        }
    }

    /// What it means, for a lab engineer reading a failed run.
    pub fn meaning(self) -> &'static str {
        use WcStatus::*;
        match self {
            Success => "the operation completed",
            LocLenErr => "local length error: a message longer than the posted receive buffer, or an SGE too long",
            LocQpOpErr => "local QP operation error: a work request inconsistent with the QP (inline too large, bad opcode), or a message too long for the receive (rxe)",
            LocEecOpErr => "local EE context operation error",
            LocProtErr => "local protection error: an SGE does not lie in a memory region of this PD with the needed rights",
            WrFlushErr => "flushed: the QP entered the error state and this request was not executed",
            MwBindErr => "memory window bind error",
            BadRespErr => "bad response from the responder (unexpected transport opcode)",
            LocAccessErr => "local access error: protection error on a local buffer written by an RDMA read or atomic response",
            RemInvReqErr => "remote invalid request: the responder saw an invalid message (opcode not allowed on this QP, message too long)",
            RemAccessErr => "remote access error: the rkey, address range or rights do not match a region of the peer",
            RemOpErr => "remote operation error: the responder could not complete the operation",
            RetryExcErr => "transport retry counter exceeded: the peer stopped answering (gone, or no path)",
            RnrRetryExcErr => "receiver-not-ready retry counter exceeded: the peer posted no receive in time",
            LocRddViolErr => "local RDD violation",
            RemInvRdReqErr => "remote invalid RD request",
            RemAbortErr => "remote aborted the operation",
            InvEecnErr => "invalid EE context number",
            InvEecStateErr => "invalid EE context state",
            FatalErr => "fatal error in the HCA",
            RespTimeoutErr => "response timeout",
            GeneralErr => "general error",
            TmErr => "tag matching error",
            TmRndvIncomplete => "tag matching rendezvous incomplete",
            Unknown(_) => "a status this build does not know",
        }
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WcStatus::Unknown(code) => write!(f, "unknown completion status {code}"),
            s => write!(f, "{} ({})", s.name(), s.meaning()),
        }
    }
}

/// What kind of work completed (`enum ibv_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum WcOpcode {
    Send,
    RdmaWrite,
    RdmaRead,
    CompSwap,
    FetchAdd,
    BindMw,
    LocalInv,
    Recv,
    RecvRdmaWithImm,
    /// Any other code (TSO, tag matching, driver-specific).
    Other(u32),
}

impl WcOpcode {
    fn from_raw(code: u32) -> Self {
        use sys::ibv_wc_opcode::*;
        match code {
            IBV_WC_SEND => WcOpcode::Send,
            IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
            IBV_WC_RDMA_READ => WcOpcode::RdmaRead,
            IBV_WC_COMP_SWAP => WcOpcode::CompSwap,
            IBV_WC_FETCH_ADD => WcOpcode::FetchAdd,
            IBV_WC_BIND_MW => WcOpcode::BindMw,
            IBV_WC_LOCAL_INV => WcOpcode::LocalInv,
            IBV_WC_RECV => WcOpcode::Recv,
            IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvRdmaWithImm,
            other => WcOpcode::Other(other),
        }
    }
}

/// One work completion. Same layout as `struct ibv_wc`, so a `[Completion]` is what
/// `ibv_poll_cq` fills: no copy, no allocation.
#[repr(transparent)]
pub struct Completion(sys::ibv_wc);

impl Default for Completion {
    fn default() -> Self {
        // SAFETY: ibv_wc is plain integers and a union of integers; all-zero is valid.
        Completion(unsafe { MaybeUninit::zeroed().assume_init() })
    }
}

impl Clone for Completion {
    fn clone(&self) -> Self {
        // SAFETY: ibv_wc is plain old data (no pointers, no Drop): a bitwise copy is a
        // valid, independent value.
        Completion(unsafe { ptr::read(&self.0) })
    }
}

impl Completion {
    /// The `wr_id` of the work request.
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// Status; only [`WcStatus::Success`] makes the other fields meaningful.
    pub fn status(&self) -> WcStatus {
        WcStatus::from_raw(self.0.status)
    }

    /// Whether it succeeded.
    pub fn is_success(&self) -> bool {
        self.0.status == sys::ibv_wc_status::IBV_WC_SUCCESS
    }

    /// Whether it consumed a receive (every receive opcode has `IBV_WC_RECV`'s bit;
    /// valid on success).
    #[inline]
    pub fn is_receive(&self) -> bool {
        self.0.opcode & sys::ibv_wc_opcode::IBV_WC_RECV != 0
    }

    /// Operation (valid on success).
    pub fn opcode(&self) -> WcOpcode {
        WcOpcode::from_raw(self.0.opcode)
    }

    /// Bytes received (receive completions; includes the 40-byte GRH on UD), or
    /// transferred for RDMA read.
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }

    /// Immediate data in host order, if the message carried it.
    pub fn imm_data(&self) -> Option<u32> {
        let with_imm = self.0.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
        // SAFETY: with IBV_WC_WITH_IMM set the union holds imm_data (network order);
        // either member is a plain u32.
        with_imm.then(|| u32::from_be(unsafe { self.0.imm_data_invalidated_rkey_union.imm_data }))
    }

    /// Local QP number the completion belongs to.
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }

    /// Sender's QP number (UD receives).
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }

    /// Whether a UD receive starts with a GRH (the first 40 bytes of the buffer).
    pub fn has_grh(&self) -> bool {
        self.0.wc_flags & sys::ibv_wc_flags::IBV_WC_GRH.0 != 0
    }

    /// Vendor error syndrome (failed completions).
    pub fn vendor_err(&self) -> u32 {
        self.0.vendor_err
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("wr_id", &self.wr_id())
            .field("status", &self.status())
            .field("opcode", &self.opcode())
            .field("byte_len", &self.byte_len())
            .field("imm_data", &self.imm_data())
            .field("qp_num", &self.qp_num())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_has_ibv_wc_layout() {
        assert_eq!(std::mem::size_of::<Completion>(), 48);
        assert_eq!(std::mem::size_of::<Completion>(), std::mem::size_of::<sys::ibv_wc>());
    }

    #[test]
    fn every_status_has_its_c_name_and_code() {
        use sys::ibv_wc_status::*;
        let pairs = [
            (IBV_WC_SUCCESS, "IBV_WC_SUCCESS"),
            (IBV_WC_LOC_PROT_ERR, "IBV_WC_LOC_PROT_ERR"),
            (IBV_WC_WR_FLUSH_ERR, "IBV_WC_WR_FLUSH_ERR"),
            (IBV_WC_REM_ACCESS_ERR, "IBV_WC_REM_ACCESS_ERR"),
            (IBV_WC_RETRY_EXC_ERR, "IBV_WC_RETRY_EXC_ERR"),
            (IBV_WC_RNR_RETRY_EXC_ERR, "IBV_WC_RNR_RETRY_EXC_ERR"),
            (IBV_WC_GENERAL_ERR, "IBV_WC_GENERAL_ERR"),
            (IBV_WC_TM_RNDV_INCOMPLETE, "IBV_WC_TM_RNDV_INCOMPLETE"),
        ];
        for (code, name) in pairs {
            assert_eq!(WcStatus::from_raw(code).name(), name);
        }
        for code in 0..24 {
            assert_ne!(WcStatus::from_raw(code), WcStatus::Unknown(code), "{code}");
            assert_eq!(WcStatus::from_raw(code).code(), code);
            assert!(!WcStatus::from_raw(code).meaning().is_empty());
        }
        assert_eq!(WcStatus::from_raw(99), WcStatus::Unknown(99));
        assert_eq!(WcStatus::Unknown(99).code(), 99);
        let text = WcStatus::RemAccessErr.to_string();
        assert!(text.starts_with("IBV_WC_REM_ACCESS_ERR (remote access error"), "{text}");
    }

    #[test]
    fn immediate_data_is_host_order_and_only_when_flagged() {
        let mut c = Completion::default();
        assert_eq!(c.imm_data(), None);
        c.0.wc_flags = sys::ibv_wc_flags::IBV_WC_WITH_IMM.0;
        c.0.imm_data_invalidated_rkey_union.imm_data = 0x1234_5678u32.to_be();
        assert_eq!(c.imm_data(), Some(0x1234_5678));
        assert_eq!(c.clone().imm_data(), Some(0x1234_5678));
    }
}
