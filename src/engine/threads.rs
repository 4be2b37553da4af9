//! Loops on several threads: a thread per connection, for connections whose poll blocks
//! (TCP streams, as iperf3's -P: stream k runs on the k-th CPU of `--cpus`), and an RDMA
//! bandwidth test's `--threads T` (its QPs in T runs, thread k on the k-th CPU of the
//! device's NUMA node or `--pin_cores`). All of one run share one clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::intervals::{record, tell, MarkSender, StreamSums};
use super::soak::SoakWatch;
use crate::perf::loops::{self, BwOutcome, BwPlan, Clock, IntervalMark, LoopError, Pulse};
use crate::spec::IntervalLines;
use crate::transport::{Connection, TransportError};

/// The CPU for connection `k` from a `--cpus` list (round robin), if any.
pub fn pin_for(cpus: &[usize], k: usize) -> Option<usize> {
    (!cpus.is_empty()).then(|| cpus[k % cpus.len()])
}

/// Where each thread runs: thread k on the k-th CPU of `cpus` (round robin; none:
/// where the kernel puts it), and the flag that chose them, for the error.
#[derive(Clone, Copy)]
pub struct Pins<'a> {
    /// The CPUs, in turn.
    pub cpus: &'a [usize],
    /// `--cpus` (TCP's streams) or `--threads` (RDMA's).
    pub flag: &'static str,
}

fn pin_thread(pins: Pins<'_>, k: usize) -> Result<(), LoopError> {
    if let Some(cpu) = pin_for(pins.cpus, k) {
        ffi::os::pin_current_thread(cpu).map_err(|e| {
            LoopError::from(TransportError::Broken(format!(
                "{}: cannot pin thread {k} to CPU {cpu}: {e}",
                pins.flag
            )))
        })?;
    }
    Ok(())
}

/// The connections of each of `threads` threads: contiguous runs, the first ones a
/// connection longer when they do not divide evenly (-q 5 over 2: 0..3 and 3..5).
pub fn groups(conns: usize, threads: usize) -> Vec<std::ops::Range<usize>> {
    let threads = threads.clamp(1, conns.max(1));
    let (each, longer) = (conns / threads, conns % threads);
    let mut start = 0;
    (0..threads)
        .map(|k| {
            let len = each + usize::from(k < longer);
            start += len;
            start - len..start
        })
        .collect()
}

/// Runs `each` on every connection in a thread of its own, stream k pinned to the
/// k-th CPU of `cpus`; the results in connection order.
pub fn per_connection<C: Connection + Send, T: Send>(
    conns: &mut [C],
    cpus: &[usize],
    each: impl Fn(usize, &mut C) -> Result<T, LoopError> + Sync,
) -> Result<Vec<T>, LoopError> {
    let (threads, pins) = (conns.len(), Pins { cpus, flag: "--cpus" });
    per_group_watching(conns, threads, pins, |k, c| each(k, &mut c[0]), |_| {})
}

/// Runs `each` on the connections of every one of `threads` [`groups`] in a thread of
/// its own, thread k pinned to the k-th CPU of `pins`, and `watch` on this thread while
/// they run; it is given a test of whether every thread has ended. The results in
/// thread order.
pub fn per_group_watching<C: Connection + Send, T: Send>(
    conns: &mut [C],
    threads: usize,
    pins: Pins<'_>,
    each: impl Fn(usize, &mut [C]) -> Result<T, LoopError> + Sync,
    watch: impl FnOnce(&dyn Fn() -> bool),
) -> Result<Vec<T>, LoopError> {
    each_group_watching(conns, threads, pins, each, watch).into_iter().collect()
}

/// As [`per_group_watching`], every thread's own outcome, failed or not.
fn each_group_watching<C: Connection + Send, T: Send>(
    conns: &mut [C],
    threads: usize,
    pins: Pins<'_>,
    each: impl Fn(usize, &mut [C]) -> Result<T, LoopError> + Sync,
    watch: impl FnOnce(&dyn Fn() -> bool),
) -> Vec<Result<T, LoopError>> {
    let each = &each;
    // serve --max-time reaches the streams' loops too.
    let end = loops::tests_end();
    let mut rest = conns;
    let mut parts = Vec::new();
    for g in groups(rest.len(), threads) {
        let (part, tail) = std::mem::take(&mut rest).split_at_mut(g.len());
        parts.push(part);
        rest = tail;
    }
    std::thread::scope(|scope| {
        let threads: Vec<_> = parts
            .into_iter()
            .enumerate()
            .map(|(k, part)| {
                scope.spawn(move || {
                    loops::set_tests_end(end);
                    pin_thread(pins, k)?;
                    each(k, part)
                })
            })
            .collect();
        watch(&|| threads.iter().all(std::thread::ScopedJoinHandle::is_finished));
        threads
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| {
                    Err(TransportError::Broken("a stream's thread panicked".into()).into())
                })
            })
            .collect()
    })
}

/// How [`bw_send_threads`] spreads a run: its threads and where they run.
#[derive(Clone, Copy)]
pub(crate) struct Spread<'a> {
    /// Threads, each with a contiguous run of the connections ([`groups`]).
    pub threads: usize,
    /// Where thread k runs.
    pub pins: Pins<'a>,
}

/// The sender's loop on every thread at once (a stream each for TCP; `--threads`' runs
/// of QPs for RDMA), all on one clock so their figures aggregate as the QPs of one loop
/// do. The outcome's recorders are in connection order.
/// With `lines`, each thread's interval lines are printed by this thread as they come
/// (numbered when there are several): this thread may hold the output's lock for the
/// whole run, which a stream's thread would wait for. `watch` judges the whole run's
/// intervals: with several threads, each once every thread has told its own. `pulse`
/// is told this side is alive while they run (a peer that only waits hears it here, the
/// loops' threads never touch the control channel).
pub(crate) fn bw_send_threads<C: Connection + Send>(
    conns: &mut [C],
    plan: &BwPlan,
    spread: Spread<'_>,
    lines: Option<&IntervalLines>,
    mut watch: Option<&mut SoakWatch>,
    mut pulse: impl Pulse,
) -> Result<BwOutcome, LoopError> {
    let clock = Clock::start();
    let threads = groups(conns.len(), spread.threads).len();
    let several = threads > 1;
    let mut sums = StreamSums::new(threads);
    // Each thread owns its sender (none is left here), so the channel closes, and the
    // printer below stops, as the last loop ends, not at its next 50 ms beat (a wait
    // that had been every bandwidth run's, a fifth of a compare point's time on a host).
    let (tx, rx) = std::sync::mpsc::channel();
    let senders: Vec<_> =
        (0..threads).map(|k| Mutex::new(Some(MarkSender::new(tx.clone(), k)))).collect();
    drop(tx);
    let each = |k: usize, part: &mut [C]| {
        let marks = senders[k].lock().ok().and_then(|mut s| s.take());
        let marks = marks.ok_or_else(|| TransportError::Broken("a stream's marks twice".into()))?;
        loops::bw_send(part, plan, clock, &mut loops::NoRecv, marks)
    };
    let printer = |all_ended: &dyn Fn() -> bool| {
        let size = u64::from(plan.size);
        let mut print = |(k, mark): (usize, IntervalMark)| {
            let Some(lines) = lines else { return };
            if !several {
                return tell(lines, &mark, size, None, watch.as_deref_mut());
            }
            tell(lines, &mark, size, Some(k + 1), None);
            if let Some(whole) = sums.add(k, mark) {
                record(lines, &whole, size, None, watch.as_deref_mut());
            }
        };
        loop {
            // (A peer gone ends each thread's loop by its own stall watch: this beat
            // cannot stop them.)
            pulse.alive(Instant::now());
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(m) => print(m),
                Err(RecvTimeoutError::Timeout) if !all_ended() => {}
                Err(_) => break,
            }
        }
        rx.try_iter().for_each(print);
    };
    // A failed duration run's threads each keep their window until the failure; the
    // run's measure is theirs together, unless a thread failed with nothing to keep.
    let (mut failure, mut all_kept) = (None, true);
    let mut outcomes = Vec::with_capacity(threads);
    for result in each_group_watching(conns, threads, spread.pins, each, printer) {
        match result {
            Ok(outcome) => outcomes.push(outcome),
            Err(mut e) => {
                match e.take_measured() {
                    Some(outcome) => outcomes.push(outcome),
                    None => all_kept = false,
                }
                failure.get_or_insert(e);
            }
        }
    }
    let mut all = BwOutcome {
        recorders: Vec::new(),
        windowed: Vec::new(),
        intervals: Vec::new(),
        started: clock.origin(),
    };
    for o in outcomes {
        all.recorders.extend(o.recorders);
        all.windowed.extend(o.windowed);
        // The threads' k-th intervals, on one clock, as one.
        for (k, m) in o.intervals.into_iter().enumerate() {
            match all.intervals.get_mut(k) {
                Some(sum) => {
                    sum.messages += m.messages;
                    sum.end_ns = sum.end_ns.max(m.end_ns);
                }
                None => all.intervals.push(m),
            }
        }
    }
    match failure {
        None => Ok(all),
        Some(e) if all_kept => Err(e.with_measured(all)),
        Some(e) => Err(e),
    }
}

/// The receiver's loop (send tests) on every thread at once, each on its run of the
/// QPs; `stop` is polled on this thread while they run (the peer has said something on
/// the control channel: the loops end). Each QP's count of messages, in QP order.
pub(crate) fn bw_recv_threads<C: Connection + Send>(
    conns: &mut [C],
    plan: &loops::RecvPlan,
    spread: Spread<'_>,
    mut stop: impl FnMut() -> bool,
) -> Result<Vec<u64>, LoopError> {
    let stopped = AtomicBool::new(false);
    let each =
        |_: usize, part: &mut [C]| loops::bw_recv(part, plan, || stopped.load(Ordering::Relaxed));
    let watch = |all_ended: &dyn Fn() -> bool| {
        while !all_ended() {
            if stop() {
                stopped.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let counts = per_group_watching(conns, spread.threads, spread.pins, each, watch)?;
    Ok(counts.concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_take_contiguous_runs_of_the_connections() {
        assert_eq!(groups(4, 2), vec![0..2, 2..4]);
        assert_eq!(groups(5, 2), vec![0..3, 3..5]);
        assert_eq!(groups(5, 3), vec![0..2, 2..4, 4..5]);
        assert_eq!(groups(3, 1), vec![0..3]);
        // More threads than connections: one each; none asked: one.
        assert_eq!(groups(2, 8), vec![0..1, 1..2]);
        assert_eq!(groups(2, 0), vec![0..2]);
    }

    #[test]
    fn streams_take_the_cpus_in_turn() {
        assert_eq!(pin_for(&[], 3), None);
        assert_eq!(
            (pin_for(&[0, 2], 0), pin_for(&[0, 2], 1), pin_for(&[0, 2], 2)),
            (Some(0), Some(2), Some(0))
        );
    }
}
