//! A thread per connection, for connections whose poll blocks (TCP streams, as
//! iperf3's -P): stream k runs on the k-th CPU of `--cpus`, and all share one clock.

use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use super::intervals::{record, tell, MarkSender, StreamSums};
use super::soak::SoakWatch;
use crate::perf::loops::{self, BwOutcome, BwPlan, Clock, IntervalMark, LoopError};
use crate::spec::IntervalLines;
use crate::transport::{Connection, TransportError};

/// The CPU for connection `k` from a `--cpus` list (round robin), if any.
pub fn pin_for(cpus: &[usize], k: usize) -> Option<usize> {
    (!cpus.is_empty()).then(|| cpus[k % cpus.len()])
}

fn pin_thread(cpus: &[usize], k: usize) -> Result<(), LoopError> {
    if let Some(cpu) = pin_for(cpus, k) {
        ffi::os::pin_current_thread(cpu).map_err(|e| {
            LoopError::from(TransportError::Broken(format!(
                "--cpus: cannot pin stream {k} to CPU {cpu}: {e}"
            )))
        })?;
    }
    Ok(())
}

/// Runs `each` on every connection in a thread of its own, stream k pinned to the
/// k-th CPU of `cpus`; the results in connection order.
pub fn per_connection<C: Connection + Send, T: Send>(
    conns: &mut [C],
    cpus: &[usize],
    each: impl Fn(usize, &mut C) -> Result<T, LoopError> + Sync,
) -> Result<Vec<T>, LoopError> {
    per_connection_watching(conns, cpus, each, |_| {})
}

/// As [`per_connection`], running `watch` on this thread while the streams run; it is
/// given a test of whether every stream's thread has ended.
pub fn per_connection_watching<C: Connection + Send, T: Send>(
    conns: &mut [C],
    cpus: &[usize],
    each: impl Fn(usize, &mut C) -> Result<T, LoopError> + Sync,
    watch: impl FnOnce(&dyn Fn() -> bool),
) -> Result<Vec<T>, LoopError> {
    let each = &each;
    // serve --max-time reaches the streams' loops too.
    let end = loops::tests_end();
    std::thread::scope(|scope| {
        let threads: Vec<_> = conns
            .iter_mut()
            .enumerate()
            .map(|(k, conn)| {
                scope.spawn(move || {
                    loops::set_tests_end(end);
                    pin_thread(cpus, k)?;
                    each(k, conn)
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

/// The sender's loop on every stream at once, all on one clock so their figures
/// aggregate as the QPs of one loop do.
/// With `lines`, each stream's interval lines are printed by this thread as they come
/// (numbered when there are several): this thread may hold the output's lock for the
/// whole run, which a stream's thread would wait for. `watch` judges the whole run's
/// intervals: with several streams, each once every stream has told its own.
pub(crate) fn bw_send_threads<C: Connection + Send>(
    conns: &mut [C],
    plan: &BwPlan,
    cpus: &[usize],
    lines: Option<&IntervalLines>,
    mut watch: Option<&mut SoakWatch>,
) -> Result<BwOutcome, LoopError> {
    let clock = Clock::start();
    let several = conns.len() > 1;
    let mut sums = StreamSums::new(conns.len());
    let (tx, rx) = std::sync::mpsc::channel();
    let each = |k: usize, conn: &mut C| {
        let pulse = MarkSender::new(tx.clone(), k);
        loops::bw_send(std::slice::from_mut(conn), plan, clock, &mut loops::NoRecv, pulse)
    };
    let printer = |all_ended: &dyn Fn() -> bool| {
        let Some(lines) = lines else { return };
        let size = u64::from(plan.size);
        let mut print = |(k, mark): (usize, IntervalMark)| {
            if !several {
                return tell(lines, &mark, size, None, watch.as_deref_mut());
            }
            tell(lines, &mark, size, Some(k + 1), None);
            if let Some(whole) = sums.add(k, mark) {
                record(lines, &whole, size, None, watch.as_deref_mut());
            }
        };
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(m) => print(m),
                Err(RecvTimeoutError::Timeout) if !all_ended() => {}
                Err(_) => break,
            }
        }
        rx.try_iter().for_each(print);
    };
    let outcomes = per_connection_watching(conns, cpus, each, printer)?;
    let mut all = BwOutcome {
        recorders: Vec::new(),
        windowed: Vec::new(),
        intervals: Vec::new(),
        started: clock.origin(),
    };
    for o in outcomes {
        all.recorders.extend(o.recorders);
        all.windowed.extend(o.windowed);
        // The streams' k-th intervals, on one clock, as one.
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
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_take_the_cpus_in_turn() {
        assert_eq!(pin_for(&[], 3), None);
        assert_eq!(
            (pin_for(&[0, 2], 0), pin_for(&[0, 2], 1), pin_for(&[0, 2], 2)),
            (Some(0), Some(2), Some(0))
        );
    }
}
