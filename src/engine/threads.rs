//! A thread per connection, for connections whose poll blocks (TCP streams, as
//! iperf3's -P): stream k runs on the k-th CPU of `--cpus`, and all share one clock.

use crate::perf::loops::{self, BwOutcome, BwPlan, Clock, LoopError};
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
    each: impl Fn(&mut C) -> Result<T, LoopError> + Sync,
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
                    each(conn)
                })
            })
            .collect();
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
pub fn bw_send_threads<C: Connection + Send>(
    conns: &mut [C],
    plan: &BwPlan,
    cpus: &[usize],
) -> Result<BwOutcome, LoopError> {
    let clock = Clock::start();
    let outcomes = per_connection(conns, cpus, |conn| {
        loops::bw_send(std::slice::from_mut(conn), plan, clock, &mut loops::NoRecv, loops::NoPulse)
    })?;
    let mut all = BwOutcome { recorders: Vec::new(), windowed: Vec::new() };
    for o in outcomes {
        all.recorders.extend(o.recorders);
        all.windowed.extend(o.windowed);
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
