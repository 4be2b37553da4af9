//! Either kind of queue pair, chosen once at set-up.

use super::super::{Error, MemoryRegion};
use super::common::QpCore;
use super::{BasicQueuePair, ExtendedQueuePair, PreparedSend, QueuePair, SendRequest};

/// A [`BasicQueuePair`] or an [`ExtendedQueuePair`], for code that takes whichever the
/// device makes ([`QueuePairBuilder::build_extended_or_basic`](super::QueuePairBuilder::build_extended_or_basic))
/// and posts through the [`QueuePair`] trait: each post matches the kind once, then
/// runs that kind's code. Match it yourself for what only one kind does
/// ([`BasicQueuePair::post_send_batch`]).
pub enum GenericQueuePair {
    /// Posts through `ibv_post_send`.
    Basic(BasicQueuePair),
    /// Posts through the extended send API.
    Extended(ExtendedQueuePair),
}

impl GenericQueuePair {
    /// Whether it posts through the extended send API.
    pub fn is_extended(&self) -> bool {
        matches!(self, GenericQueuePair::Extended(_))
    }
}

impl From<BasicQueuePair> for GenericQueuePair {
    fn from(qp: BasicQueuePair) -> Self {
        GenericQueuePair::Basic(qp)
    }
}

impl From<ExtendedQueuePair> for GenericQueuePair {
    fn from(qp: ExtendedQueuePair) -> Self {
        GenericQueuePair::Extended(qp)
    }
}

impl QueuePair for GenericQueuePair {
    #[inline]
    fn core(&self) -> &QpCore {
        match self {
            GenericQueuePair::Basic(qp) => qp.core(),
            GenericQueuePair::Extended(qp) => qp.core(),
        }
    }

    #[inline]
    fn post_send(&self, r: &SendRequest<'_>) -> Result<(), Error> {
        match self {
            GenericQueuePair::Basic(qp) => qp.post_send(r),
            GenericQueuePair::Extended(qp) => qp.post_send(r),
        }
    }

    fn post_send_list(&self, requests: &[SendRequest<'_>]) -> Result<(), Error> {
        match self {
            GenericQueuePair::Basic(qp) => qp.post_send_list(requests),
            GenericQueuePair::Extended(qp) => qp.post_send_list(requests),
        }
    }

    // Inlined down to the provider's calls: a latency loop's post is the hot path.
    #[inline(always)]
    fn post_prepared(
        &self,
        p: &mut PreparedSend,
        region: &MemoryRegion,
        wr_id: u64,
        signaled: bool,
    ) -> Result<(), Error> {
        match self {
            GenericQueuePair::Basic(qp) => qp.post_prepared(p, region, wr_id, signaled),
            GenericQueuePair::Extended(qp) => qp.post_prepared(p, region, wr_id, signaled),
        }
    }

    #[inline(always)]
    unsafe fn post_prepared_unchecked(
        &self,
        p: &mut PreparedSend,
        wr_id: u64,
        bits: Option<u32>,
    ) -> Result<(), Error> {
        // SAFETY: the caller's promise, passed on to the kind it is.
        unsafe {
            match self {
                GenericQueuePair::Basic(qp) => qp.post_prepared_unchecked(p, wr_id, bits),
                GenericQueuePair::Extended(qp) => qp.post_prepared_unchecked(p, wr_id, bits),
            }
        }
    }
}
