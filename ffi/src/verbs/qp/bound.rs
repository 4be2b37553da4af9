//! A prepared send bound to its QP and region for a stretch of posts: the identity
//! checks of [`QueuePair::post_prepared`] done once, by [`QueuePair::bind_send`], and
//! kept true by the borrows (sideway's way: the type, not a test per post, makes a
//! misdirected post impossible).

use std::marker::PhantomData;

use super::super::{Error, MemoryRegion};
use super::{PreparedSend, QueuePair};

/// A [`PreparedSend`] bound to the QP it was made for and the region its SGE names,
/// both borrowed while it lives. Made by [`QueuePair::bind_send`]; each
/// [`post`](Self::post) changes the id and posts, as perftest reposts its one
/// `ibv_send_wr`. The flags are the request's, signaled or not: a loop that signals one
/// post in several binds one request of each.
///
/// ```no_run
/// # fn f(qp: &rdmabench_ffi::verbs::BasicQueuePair, mr: &rdmabench_ffi::verbs::MemoryRegion,
/// #      r: &rdmabench_ffi::verbs::SendRequest<'_>) -> Result<(), rdmabench_ffi::verbs::Error> {
/// use rdmabench_ffi::verbs::QueuePair;
///
/// let mut quiet = qp.bind_send(qp.prepare_send(r)?, mr)?;
/// let mut signaled = qp.bind_send(qp.prepare_send(&r.signaled())?, mr)?;
/// for id in 0..1000 {
///     if id % 100 == 99 { signaled.post(id)? } else { quiet.post(id)? }
/// }
/// # Ok(())
/// # }
/// ```
///
/// The region cannot go while a binding holds it:
///
/// ```compile_fail,E0505
/// # fn f(qp: &rdmabench_ffi::verbs::BasicQueuePair, mr: rdmabench_ffi::verbs::MemoryRegion,
/// #      r: &rdmabench_ffi::verbs::SendRequest<'_>) -> Result<(), rdmabench_ffi::verbs::Error> {
/// use rdmabench_ffi::verbs::QueuePair;
///
/// let mut bound = qp.bind_send(qp.prepare_send(r)?, &mr)?;
/// drop(mr);
/// bound.post(1)?;
/// # Ok(())
/// # }
/// ```
pub struct BoundSend<'a, Q: QueuePair> {
    qp: &'a Q,
    prepared: PreparedSend,
    _region: PhantomData<&'a MemoryRegion>,
}

impl<'a, Q: QueuePair> BoundSend<'a, Q> {
    /// Binds `prepared` to `qp`; the caller has checked that it was prepared there and
    /// over a region it borrows for `'a`.
    pub(super) fn new(qp: &'a Q, mut prepared: PreparedSend) -> Self {
        prepared.wr.send_flags = prepared.bits(prepared.signaled);
        BoundSend { qp, prepared, _region: PhantomData }
    }

    /// Posts the request again under id `wr_id`.
    ///
    /// # Errors
    /// From the library, as [`QueuePair::post_send`]'s: ENOMEM when the send queue is
    /// full, EINVAL for a QP not in RTS.
    #[inline(always)]
    pub fn post(&mut self, wr_id: u64) -> Result<(), Error> {
        // SAFETY: `bind_send` checked that the request was prepared on `qp` and over
        // the region it borrowed for `'a`, as this binding borrows both; the flags
        // were set by `new`.
        unsafe { self.qp.post_prepared_unchecked(&mut self.prepared, wr_id, None) }
    }

    /// The prepared request, unbound (for [`QueuePair::post_prepared`] or another
    /// binding).
    pub fn into_prepared(self) -> PreparedSend {
        self.prepared
    }
}
