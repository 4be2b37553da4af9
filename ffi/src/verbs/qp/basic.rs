//! Basic queue pairs: sends through `ibv_post_send(3)`, one request, a linked list of
//! them, or a reusable [`SendBatch`].

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr;

use super::super::{sys, Error, MemoryRegion};
use super::common::QpCore;
use super::request::build_wr;
use super::{PreparedSend, QueuePair, SendRequest, MAX_POST_LIST, MAX_SGE};

/// A queue pair that posts sends through `ibv_post_send(3)`: up to
/// [`caps().max_send_sge`](QueuePair::caps) SGEs per request, lists, and
/// [`SendBatch`]es. Made by [`QueuePairBuilder::build`](super::QueuePairBuilder::build).
/// It keeps its protection domain and both completion queues alive, so they are
/// destroyed after it whatever the drop order.
pub struct BasicQueuePair {
    core: QpCore,
}

impl BasicQueuePair {
    pub(super) fn new(core: QpCore) -> Self {
        BasicQueuePair { core }
    }

    /// Checks a request against this QP and turns it into C form. `sges` receives the
    /// scatter list; `wr.sg_list` is left for the caller to point at it.
    fn encode(
        &self,
        r: &SendRequest<'_>,
        sges: &mut [MaybeUninit<sys::ibv_sge>],
    ) -> Result<sys::ibv_send_wr, Error> {
        self.core.check(r)?;
        for (slice, slot) in r.local.iter().zip(sges.iter_mut()) {
            slot.write(slice.sge());
        }
        Ok(build_wr(r))
    }

    /// `ibv_post_send` of one encoded request, its errno named with the QP.
    ///
    /// # Safety
    /// `wr` is a checked request whose SGE list is valid for the call and names live
    /// registered memory; inline payloads are copied before the call returns.
    #[inline]
    unsafe fn post_one(&self, wr: &mut sys::ibv_send_wr) -> Result<(), Error> {
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: live QP in whatever state (the library checks); the request is as
        // the caller guarantees.
        let rc = unsafe { sys::ibv_post_send(self.core.raw.as_ptr(), wr, &mut bad) };
        if rc != 0 {
            return Err(post_failed(&self.core, rc));
        }
        Ok(())
    }

    /// Posts every request in `batch` with one `ibv_post_send` call, then empties it.
    ///
    /// # Errors
    /// As [`post_send`](QueuePair::post_send); the message names the first request the
    /// library refused (those before it were posted).
    pub fn post_send_batch(&self, batch: &mut SendBatch<'_>) -> Result<(), Error> {
        if batch.wrs.is_empty() {
            return Ok(());
        }
        // Link the list now that the vectors no longer move.
        let sge_base = batch.sges.as_mut_ptr();
        for (wr, &first) in batch.wrs.iter_mut().zip(&batch.first_sge) {
            // SAFETY: `first` indexes into `sges`: push added this request's SGEs there.
            wr.sg_list = unsafe { sge_base.add(first) };
        }
        let n = batch.wrs.len();
        // SAFETY: the `n` requests were checked by push; they and their SGEs live in
        // `batch`, which outlives the call, and its regions outlive `batch` (`'a`).
        let posted = unsafe { self.post_linked(batch.wrs.as_mut_ptr(), n) };
        batch.clear();
        posted.map_err(|(rc, at)| {
            Error::from_errno("ibv_post_send", rc)
                .on(format!("QP {}, request {at} of {n}", self.core.qp_num()))
        })
    }

    /// Links the `n` requests at `base` into one list and posts it with one
    /// `ibv_post_send`; on failure, the errno and the index of the request the library
    /// refused (those before it were posted).
    ///
    /// # Safety
    /// `base` points to `n` ≥ 1 initialised, checked requests whose SGE lists are valid
    /// for the call and name live registered memory.
    unsafe fn post_linked(
        &self,
        base: *mut sys::ibv_send_wr,
        n: usize,
    ) -> Result<(), (i32, usize)> {
        for i in 0..n {
            let next = if i + 1 < n {
                // SAFETY: i + 1 < n: inside the caller's requests.
                unsafe { base.add(i + 1) }
            } else {
                ptr::null_mut()
            };
            // SAFETY: i < n: an initialised request, reached only through `base` here.
            unsafe { (*base.add(i)).next = next };
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: live QP; the list is linked above and as the caller guarantees.
        let rc = unsafe { sys::ibv_post_send(self.core.raw.as_ptr(), base, &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        let at = if bad.is_null() {
            0
        } else {
            (bad as usize - base as usize) / std::mem::size_of::<sys::ibv_send_wr>()
        };
        Err((rc, at))
    }
}

impl QueuePair for BasicQueuePair {
    #[inline]
    fn core(&self) -> &QpCore {
        &self.core
    }

    /// Posts one send work request (`ibv_post_send(3)`). Nothing is allocated.
    ///
    /// # Errors
    /// Refused before posting as [`QueuePair`] says. From the library: ENOMEM when the
    /// send queue is full, EINVAL for a QP not in RTS.
    #[inline]
    fn post_send(&self, r: &SendRequest<'_>) -> Result<(), Error> {
        let mut sges = [MaybeUninit::<sys::ibv_sge>::uninit(); MAX_SGE];
        let mut wr = self.encode(r, &mut sges)?;
        wr.sg_list = sges.as_mut_ptr().cast();
        // SAFETY: `wr` and the `num_sge` initialised SGEs live across the call; every
        // SGE names a live, registered region (LocalSlice borrows it).
        unsafe { self.post_one(&mut wr) }
    }

    /// Posts `requests` linked into one list per `ibv_post_send` call (perftest's
    /// `-l`), up to [`MAX_POST_LIST`] at a time, built on the stack: no allocation.
    /// Each listed request takes at most 4 SGEs.
    ///
    /// # Errors
    /// As [`post_send`](QueuePair::post_send), checked for every request of a list
    /// before it is posted; the message names the request the library refused (those
    /// before it in its list were posted).
    fn post_send_list(&self, requests: &[SendRequest<'_>]) -> Result<(), Error> {
        const SGES: usize = 4;
        for (k, chunk) in requests.chunks(MAX_POST_LIST).enumerate() {
            let mut wrs = [const { MaybeUninit::<sys::ibv_send_wr>::uninit() }; MAX_POST_LIST];
            let mut sges = [[MaybeUninit::<sys::ibv_sge>::uninit(); SGES]; MAX_POST_LIST];
            let n = chunk.len();
            for (i, r) in chunk.iter().enumerate() {
                if r.local.len() > SGES {
                    return Err(Error::invalid(
                        "ibv_post_send",
                        format!(
                            "a listed request takes at most {SGES} SGEs, not {}",
                            r.local.len()
                        ),
                    )
                    .on(format!("QP {}", self.core.qp_num())));
                }
                let mut wr = self.encode(r, &mut sges[i])?;
                wr.sg_list = sges[i].as_mut_ptr().cast();
                wrs[i].write(wr);
            }
            // SAFETY: the loop above initialised and checked the first `n` ≥ 1
            // requests (chunks are never empty); their SGEs live in `sges` across the
            // call, and every SGE names a live registered region (the requests borrow
            // them).
            let posted = unsafe { self.post_linked(wrs.as_mut_ptr().cast(), n) };
            posted.map_err(|(rc, at)| {
                Error::from_errno("ibv_post_send", rc).on(format!(
                    "QP {}, listed request {} of {}",
                    self.core.qp_num(),
                    k * MAX_POST_LIST + at,
                    requests.len()
                ))
            })?;
        }
        Ok(())
    }

    #[inline(always)]
    unsafe fn post_prepared_unchecked(
        &self,
        p: &mut PreparedSend,
        wr_id: u64,
        bits: Option<u32>,
    ) -> Result<(), Error> {
        p.wr.wr_id = wr_id;
        if let Some(bits) = bits {
            p.wr.send_flags = bits;
        }
        // `p` may have moved since the last post; without data `num_sge` is 0 and the
        // library reads no SGE. (`next` stays null: prepared so, and never written.)
        p.wr.sg_list = &mut p.sge;
        // SAFETY: checked when prepared, on this QP (the caller's promise); `p.wr` and
        // its one SGE live across the call; the SGE names a region live across it (the
        // caller's promise); a UD destination's address handle is kept alive by `p`.
        unsafe { self.post_one(&mut p.wr) }
    }
}

/// Several send work requests posted with one `ibv_post_send` call, on a
/// [`BasicQueuePair`] (the only kind that takes one). Reuse it: after warm-up, pushing
/// and posting allocate nothing.
///
/// ```no_run
/// # fn f(qp: &rdmabench_ffi::verbs::BasicQueuePair, r: &rdmabench_ffi::verbs::SendRequest<'_>)
/// # -> Result<(), rdmabench_ffi::verbs::Error> {
/// use rdmabench_ffi::verbs::SendBatch;
///
/// let mut batch = SendBatch::with_capacity(32);
/// batch.push(qp, r)?;
/// qp.post_send_batch(&mut batch)?;
/// # Ok(())
/// # }
/// ```
///
/// An [`ExtendedQueuePair`](super::ExtendedQueuePair) has no batches; it posts lists
/// with [`post_send_list`](QueuePair::post_send_list):
///
/// ```compile_fail,E0599
/// # fn f(qp: &rdmabench_ffi::verbs::ExtendedQueuePair, mut batch: rdmabench_ffi::verbs::SendBatch<'_>)
/// # -> Result<(), rdmabench_ffi::verbs::Error> {
/// qp.post_send_batch(&mut batch)?; // no such method on an extended QP
/// # Ok(())
/// # }
/// ```
pub struct SendBatch<'a> {
    wrs: Vec<sys::ibv_send_wr>,
    sges: Vec<sys::ibv_sge>,
    first_sge: Vec<usize>,
    _regions: PhantomData<&'a MemoryRegion>,
}

impl<'a> SendBatch<'a> {
    /// Room for `requests` requests of one SGE each before growing.
    pub fn with_capacity(requests: usize) -> Self {
        SendBatch {
            wrs: Vec::with_capacity(requests),
            sges: Vec::with_capacity(requests),
            first_sge: Vec::with_capacity(requests),
            _regions: PhantomData,
        }
    }

    /// Checks `r` against `qp` and appends it.
    ///
    /// # Errors
    /// The refusals of [`post_send`](QueuePair::post_send).
    pub fn push(&mut self, qp: &BasicQueuePair, r: &SendRequest<'a>) -> Result<(), Error> {
        let mut sges = [MaybeUninit::<sys::ibv_sge>::uninit(); MAX_SGE];
        let wr = qp.encode(r, &mut sges)?;
        self.first_sge.push(self.sges.len());
        for sge in &sges[..r.local.len()] {
            // SAFETY: encode initialised the first `local.len()` entries.
            self.sges.push(unsafe { sge.assume_init() });
        }
        self.wrs.push(wr);
        Ok(())
    }

    /// Number of requests waiting.
    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    /// Whether none is waiting.
    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }

    /// Drops the waiting requests, keeping the storage.
    pub fn clear(&mut self) {
        self.wrs.clear();
        self.sges.clear();
        self.first_sge.clear();
    }
}

#[cold]
#[inline(never)]
fn post_failed(qp: &QpCore, rc: i32) -> Error {
    Error::from_errno("ibv_post_send", rc).on(format!("QP {}", qp.qp_num()))
}
