//! `ibv_create_qp(3)` and `ibv_create_qp_ex(3)`: building a queue pair of the kind
//! asked for.

use std::fmt;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use super::super::{sys, CompletionQueue, Error, ProtectionDomain, SharedReceiveQueue};
use super::common::QpCore;
use super::{BasicQueuePair, ExtendedQueuePair, GenericQueuePair, QpCaps, QpType, MAX_SGE};

/// Builds a queue pair: `pd.create_qp(QpType::Rc, &send_cq, &recv_cq).caps(…)` then
/// [`build`](Self::build) for a [`BasicQueuePair`], [`build_extended`](Self::build_extended)
/// for an [`ExtendedQueuePair`], or
/// [`build_extended_or_basic`](Self::build_extended_or_basic) for whichever the provider
/// can make. `Copy`: try one kind, then build the other from the same builder.
#[derive(Clone, Copy)]
pub struct QueuePairBuilder<'a> {
    pd: &'a ProtectionDomain,
    qp_type: QpType,
    send_cq: &'a CompletionQueue,
    recv_cq: &'a CompletionQueue,
    caps: QpCaps,
    sq_sig_all: bool,
    srq: Option<&'a SharedReceiveQueue>,
}

impl ProtectionDomain {
    /// Starts building a queue pair of `qp_type` in this domain.
    pub fn create_qp<'a>(
        &'a self,
        qp_type: QpType,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
    ) -> QueuePairBuilder<'a> {
        QueuePairBuilder {
            pd: self,
            qp_type,
            send_cq,
            recv_cq,
            caps: QpCaps::default(),
            sq_sig_all: false,
            srq: None,
        }
    }
}

/// Why [`QueuePairBuilder::build_extended`] made no extended queue pair. A basic one
/// can still be built from the same builder.
#[derive(Debug)]
pub enum ExtendedQpError {
    /// The provider has no extended QPs: its context is not an extended one, or it has
    /// no `create_qp_ex`.
    Unavailable {
        /// The device.
        device: String,
    },
    /// The queue takes more than one SGE per send. Extended QPs take one:
    /// soft-RoCE's `ibv_wr_set_sge_list` (rdma-core 44) fails requests of two SGEs
    /// with LOC_QP_OP_ERR, so such queues are basic.
    SeveralSges {
        /// The `max_send_sge` asked for.
        max_send_sge: u32,
    },
    /// The provider's `create_qp_ex` refused this QP. Providers without the extended
    /// send API (mlx4) refuse the send operations this way; sizes over the device's
    /// limits are refused the same way.
    Refused(Error),
}

impl fmt::Display for ExtendedQpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtendedQpError::Unavailable { device } => write!(
                f,
                "ibv_create_qp_ex({device}) refused: the provider has no extended queue \
                 pairs (ibv_wr_* send API); build a basic one"
            ),
            ExtendedQpError::SeveralSges { max_send_sge } => write!(
                f,
                "ibv_create_qp_ex refused: extended queue pairs take one SGE per send, not \
                 {max_send_sge}; build a basic one"
            ),
            ExtendedQpError::Refused(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ExtendedQpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExtendedQpError::Refused(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ExtendedQpError> for Error {
    fn from(e: ExtendedQpError) -> Self {
        match e {
            ExtendedQpError::Refused(e) => e,
            other => Error::invalid("ibv_create_qp_ex", other.to_string()),
        }
    }
}

impl<'a> QueuePairBuilder<'a> {
    /// Queue sizes.
    pub fn caps(mut self, caps: QpCaps) -> Self {
        self.caps = caps;
        self
    }

    /// Take receives from `srq` instead of a receive queue of its own (the receive
    /// sizes in [`caps`](Self::caps) are then ignored). The queue pair keeps the SRQ
    /// until it is destroyed.
    pub fn srq(mut self, srq: &'a SharedReceiveQueue) -> Self {
        self.srq = Some(srq);
        self
    }

    /// Signal every send, whatever its flags say.
    pub fn sq_sig_all(mut self, yes: bool) -> Self {
        self.sq_sig_all = yes;
        self
    }

    /// Creates a basic QP (`ibv_create_qp(3)`; sends through `ibv_post_send`), in the
    /// RESET state.
    ///
    /// # Errors
    /// `ibv_create_qp` with its errno (EINVAL for sizes over the device's limits,
    /// ENOMEM when out of QPs).
    pub fn build(self) -> Result<BasicQueuePair, Error> {
        let mut init = self.init_attr();
        // SAFETY: live PD, CQs and SRQ (the QP keeps clones of them); `init` is valid.
        let raw = unsafe { sys::ibv_create_qp(self.pd.as_ptr(), &mut init) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::last_os("ibv_create_qp").on(format!("{:?} {:?}", self.qp_type, self.caps))
        })?;
        Ok(BasicQueuePair::new(self.core(raw, &init.cap, MAX_SGE as u32)))
    }

    /// Creates an extended QP (`ibv_create_qp_ex(3)` with the send operations its type
    /// can do; sends through `ibv_wr_start` … `ibv_wr_complete`, `ibv_wr_post(3)`), in
    /// the RESET state. Only for queues of one SGE per send (`max_send_sge` ≤ 1).
    ///
    /// # Errors
    /// [`ExtendedQpError`]: the provider has no extended QPs, the queue takes several
    /// SGEs, or the provider refused this one.
    pub fn build_extended(self) -> Result<ExtendedQueuePair, ExtendedQpError> {
        if self.caps.max_send_sge > 1 {
            return Err(ExtendedQpError::SeveralSges { max_send_sge: self.caps.max_send_sge });
        }
        let mut init = self.init_attr();
        let raw = self.create_extended(&mut init)?;
        // An extended QP posts one SGE per request, whatever the library granted.
        let core = self.core(raw, &init.cap, 1);
        let unavailable =
            || ExtendedQpError::Unavailable { device: self.pd.context().name().to_owned() };
        // SAFETY: a live QP created with send_ops_flags: it has an ibv_qp_ex.
        let qpx = unsafe { sys::ibv_qp_to_qp_ex(raw.as_ptr()) };
        let qpx = NonNull::new(qpx).ok_or_else(unavailable)?;
        ExtendedQueuePair::new(core, qpx).ok_or_else(unavailable)
    }

    /// The extended kind where the provider makes one for this queue, the basic kind
    /// otherwise: what a benchmark wants, chosen once here rather than on every post.
    ///
    /// # Errors
    /// As [`build`](Self::build), when the basic QP cannot be created either.
    pub fn build_extended_or_basic(self) -> Result<GenericQueuePair, Error> {
        match self.build_extended() {
            Ok(qp) => Ok(GenericQueuePair::Extended(qp)),
            Err(_) => Ok(GenericQueuePair::Basic(self.build()?)),
        }
    }

    fn init_attr(&self) -> sys::ibv_qp_init_attr {
        // SAFETY: ibv_qp_init_attr is plain data; all-zero is valid.
        let mut init: sys::ibv_qp_init_attr = unsafe { MaybeUninit::zeroed().assume_init() };
        init.send_cq = self.send_cq.as_ptr();
        init.recv_cq = self.recv_cq.as_ptr();
        init.qp_type = self.qp_type.raw();
        init.sq_sig_all = i32::from(self.sq_sig_all);
        // With an SRQ the queue pair has no receive queue of its own.
        let (max_recv_wr, max_recv_sge) = match self.srq {
            Some(srq) => {
                init.srq = srq.as_ptr();
                (0, 0)
            }
            None => (self.caps.max_recv_wr, self.caps.max_recv_sge),
        };
        init.cap = sys::ibv_qp_cap {
            max_send_wr: self.caps.max_send_wr,
            max_recv_wr,
            max_send_sge: self.caps.max_send_sge,
            max_recv_sge,
            max_inline_data: self.caps.max_inline_data,
        };
        init
    }

    /// Owns `raw`, with the sizes the library wrote back (send SGEs capped at
    /// `send_sge_cap`).
    fn core(&self, raw: NonNull<sys::ibv_qp>, cap: &sys::ibv_qp_cap, send_sge_cap: u32) -> QpCore {
        let caps = QpCaps {
            max_send_wr: cap.max_send_wr,
            max_recv_wr: cap.max_recv_wr,
            max_send_sge: cap.max_send_sge.min(send_sge_cap),
            max_recv_sge: cap.max_recv_sge.min(MAX_SGE as u32),
            max_inline_data: cap.max_inline_data,
        };
        QpCore::new(raw, self.qp_type, caps, self.pd, (self.send_cq, self.recv_cq), self.srq)
    }

    /// `ibv_create_qp_ex` with the send operations this QP type can do. `init` gets
    /// the caps the library granted.
    fn create_extended(
        &self,
        init: &mut sys::ibv_qp_init_attr,
    ) -> Result<NonNull<sys::ibv_qp>, ExtendedQpError> {
        use sys::ibv_qp_create_send_ops_flags as ops;
        let unavailable =
            || ExtendedQpError::Unavailable { device: self.pd.context().name().to_owned() };
        let mut flags = ops::IBV_QP_EX_WITH_SEND.0 | ops::IBV_QP_EX_WITH_SEND_WITH_IMM.0;
        if self.qp_type != QpType::Ud {
            flags |= ops::IBV_QP_EX_WITH_RDMA_WRITE.0 | ops::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM.0;
        }
        if self.qp_type == QpType::Rc {
            flags |= ops::IBV_QP_EX_WITH_RDMA_READ.0
                | ops::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP.0
                | ops::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD.0;
        }
        // SAFETY: ibv_qp_init_attr_ex is plain data; all-zero is valid.
        let mut ex: sys::ibv_qp_init_attr_ex = unsafe { MaybeUninit::zeroed().assume_init() };
        ex.send_cq = init.send_cq;
        ex.recv_cq = init.recv_cq;
        ex.srq = init.srq;
        ex.cap = init.cap;
        ex.qp_type = init.qp_type;
        ex.sq_sig_all = init.sq_sig_all;
        ex.pd = self.pd.as_ptr();
        ex.comp_mask = (sys::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD
            | sys::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
            .0;
        ex.send_ops_flags = u64::from(flags);
        // verbs.h's ibv_create_qp_ex, written out: rdma-sys 0.3's copy compares
        // `abi_compat` with u32::MAX where rdma-core marks extended contexts with
        // UINTPTR_MAX, so it never finds create_qp_ex on 64-bit hosts.
        // SAFETY: the PD is live, so its context is.
        let ctx = unsafe { (*self.pd.as_ptr()).context };
        // SAFETY: a live context; abi_compat is a plain pointer-sized field.
        if unsafe { (*ctx).abi_compat } as usize != usize::MAX {
            return Err(unavailable());
        }
        let offset = std::mem::offset_of!(sys::verbs_context, context);
        // SAFETY: an extended context (checked above) is the `context` member of a
        // verbs_context, which starts `offset` bytes before it (verbs.h's container_of).
        let vctx = unsafe { ctx.cast::<u8>().sub(offset).cast::<sys::verbs_context>() };
        // SAFETY: as above; `sz` says how much of the struct this library version has.
        let (sz, create) = unsafe { ((*vctx).sz, (*vctx).create_qp_ex) };
        if sz
            < std::mem::size_of::<sys::verbs_context>()
                - std::mem::offset_of!(sys::verbs_context, create_qp_ex)
        {
            return Err(unavailable());
        }
        let create = create.ok_or_else(unavailable)?;
        // SAFETY: the provider's create_qp_ex on its own live context; `ex` is a valid
        // request whose CQs and PD outlive the QP (it keeps clones of them).
        let raw = unsafe { create(ctx, &mut ex) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            // Some providers (mlx4) refuse unknown attributes without setting errno.
            let what = format!("{:?} {:?}", self.qp_type, self.caps);
            let e = Error::last_os("ibv_create_qp_ex");
            ExtendedQpError::Refused(if e.errno() == 0 {
                Error::invalid("ibv_create_qp_ex", "the provider refused the send operations")
                    .on(what)
            } else {
                e.on(what)
            })
        })?;
        init.cap = ex.cap;
        Ok(raw)
    }
}
