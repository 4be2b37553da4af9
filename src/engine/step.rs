//! One size of a test on this side: buffers and receives prepared, a barrier, the
//! loop this side's [`Role`] calls for, then the results exchanged
//! ([`super::exchange`]). Generic over the connection; nothing here knows the backend.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::counters::PortCounters;
use crate::error::{Error, ErrorKind, Refusal};
use crate::measure::cpu::CpuSnapshot;
use crate::measure::{self, BwStats, LatencyRecorder};
use crate::perf::loops::{
    self, BwOutcome, BwPlan, Clock, LatPlan, LoopError, LoopFailure, Pace, RecvPlan,
};
use crate::results::{Progress, SizeResult};
use crate::session::connect::Heartbeat;
use crate::session::protocol::{Channel, Message, ProtocolError};
use crate::spec::{Local, Measure, RunLength, TestSpec, Verb};
use crate::transport::{Capabilities, Connection};

use super::exchange::ThisSide;
use super::intervals::IntervalPrinter;
use super::soak::SoakWatch;
use super::threads::{bw_recv_threads, bw_send_threads, groups, per_connection, Pins, Spread};
use crate::perf::payload::fill_pattern;
use crate::spec::plan::SidePlan;
use crate::spec::role::Role;

/// A size that failed: why, and what this side had measured of it by then.
#[derive(Debug)]
pub struct SizeError {
    /// Why the size ended.
    pub error: Error,
    /// This side's measurement until the failure, marked `partial` (none when nothing
    /// whole was measured; boxed: the error path stays small).
    pub kept: Option<Box<SizeResult>>,
}

impl From<Error> for SizeError {
    fn from(error: Error) -> Self {
        SizeError { error, kept: None }
    }
}

impl From<ProtocolError> for SizeError {
    fn from(e: ProtocolError) -> Self {
        Error::from(e).into()
    }
}

impl From<SizeError> for Error {
    fn from(e: SizeError) -> Self {
        e.error
    }
}

/// What every size of a run shares on this side.
pub struct Step<'a> {
    /// The test.
    pub spec: &'a TestSpec,
    /// This side's settings (timeout, pinning).
    pub local: &'a Local,
    /// This side's plan: its role, operation, queues and slots.
    pub plan: &'a SidePlan,
    /// CPU clock, MHz, for cycles per byte.
    pub mhz: Option<f64>,
    /// This side's port counters, read around each size (`-W`).
    pub counters: Option<PortCounters>,
    /// `--json-lines`: what judges each interval (borrowed by the size running).
    pub(crate) soak: RefCell<Option<SoakWatch>>,
    /// `--threads`: the CPUs its threads take in turn (the measuring thread's, as
    /// [`super::affinity`] set them; empty: unpinned).
    pub thread_cpus: Vec<usize>,
}

impl<'a> Step<'a> {
    /// For `spec` on the side `plan` is of.
    pub fn new(spec: &'a TestSpec, local: &'a Local, plan: &'a SidePlan) -> Self {
        Step {
            spec,
            local,
            plan,
            mhz: crate::measure::cpu::cpu_mhz(),
            counters: None,
            soak: RefCell::new(local.interval_lines.as_ref().and_then(SoakWatch::new)),
            thread_cpus: Vec::new(),
        }
    }

    /// Whether connections with `caps` can run this test: the operation, the largest
    /// message, inline where it applies. Checked once, before the first size, so the
    /// loops never meet an operation their backend lacks.
    ///
    /// # Errors
    /// Kind `refused`, naming what the backend lacks.
    pub fn check(&self, caps: &Capabilities) -> Result<(), Error> {
        let max = self.spec.max_size();
        match caps.lacks(&self.plan.op, max, self.plan.inline_for(max)) {
            Some((what, message)) => {
                Err(Error::refusal(Refusal::Device { what: what.into() }, message))
            }
            None => Ok(()),
        }
    }

    /// Runs one size on this side; returns the result both sides print.
    ///
    /// # Errors
    /// A loop or the control channel failing; a loop failure while the peer has
    /// closed the control connection is the peer's leaving (`peer_closed`). The error
    /// carries what this side had measured by then (a duration run's sender: its
    /// window until its last completion, this side's figures alone).
    pub fn run<C: Connection + Send>(
        &self,
        ch: &mut Channel,
        conns: &mut [C],
        size: u64,
    ) -> Result<SizeResult, SizeError> {
        let slots = self.plan.slots.slots(size);
        let size32 = SidePlan::size32(size)?;
        self.prepare(conns, size, slots)?;
        // A small barrier so the pattern and the receives are in place before the peer starts.
        ch.send(&Message::Ready { size })?;
        ch.recv("ready")?;
        let counters_before = self.counters.as_ref().map(PortCounters::snapshot);
        if self.plan.role.sends && self.spec.rdma().is_some_and(|r| r.warm_up) {
            self.warm_up(conns, size32, slots).map_err(|e| self.failed(e, ch, size))?;
        }
        let cpu_before = CpuSnapshot::now();
        let mut local = SizeResult { size, ..Default::default() };
        let measured = match self.spec.kind.measure {
            Measure::Bw => self.bandwidth(ch, conns, size32, slots, &mut local),
            Measure::Lat => self.latency(ch, &mut conns[0], size32, &mut local),
        };
        if let Err(e) = measured {
            // (Not -b's: its figure is both directions', and the peer's is gone.)
            let kept = (local.bw.is_some() && !self.spec.bidirectional())
                .then_some(Box::new(SizeResult { partial: true, ..local }));
            return Err(SizeError { error: self.failed(e, ch, size), kept });
        }
        let this = ThisSide { spec: self.spec, role: self.plan.role, mhz: self.mhz };
        let mut shown = super::exchange::exchange(&this, ch, conns, local, &cpu_before, slots)?;
        // After the exchange: a server's loop may end before the client's traffic
        // does. This side's own counters, never what the peer sent.
        shown.counters = self
            .counters
            .as_ref()
            .zip(counters_before)
            .map(|(c, before)| c.changes(&before, &c.snapshot()));
        shown.interval_verdicts = self.soak.borrow_mut().as_mut().and_then(SoakWatch::take_tally);
        Ok(shown)
    }

    /// Zeroes each buffer (stale data cannot pass a check), lays the pattern on the
    /// source, and posts receives. Receives go up before the barrier: on UC and UD a
    /// message that finds none is lost.
    fn prepare<C: Connection>(&self, conns: &mut [C], size: u64, slots: u32) -> Result<(), Error> {
        for (q, c) in conns.iter_mut().enumerate() {
            c.local_mut().fill(0);
            if self.plan.role.pattern_source {
                fill_pattern(c.local_mut(), q, size, slots);
            }
        }
        let size32 = size as u32;
        let iters = self.spec.run.iterations();
        let posted = if self.plan.role.receives {
            let each = self.plan.queues.receives_per_connection(conns.len(), iters);
            loops::post_receives(conns, size32, each, slots)
        } else if self.spec.kind.measure == Measure::Lat && self.spec.receives() {
            loops::post_receives(&mut conns[..1], size32, u64::from(self.plan.queues.rx_depth), 1)
        } else {
            Ok(())
        };
        posted.map_err(Error::from)
    }

    /// A loop's failure, named by its cause: the peer's own reason when it sent one
    /// (a server's `--max-time`), the peer's leaving when the control connection shows it
    /// closed (within a second: a killed peer's QPs can fail this side's work before its
    /// socket's close arrives), the loop's own error otherwise.
    fn failed(&self, e: Error, ch: &mut Channel, size: u64) -> Error {
        if e.kind == ErrorKind::Refused {
            // This side's own limit (its --max-time): nothing to ask the peer.
            return e;
        }
        let wait = Duration::from_secs(1);
        let start = Instant::now();
        while !ch.has_pending() && start.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(reason) = peer_reason(ch, wait) {
            return reason;
        }
        if e.kind != ErrorKind::PeerClosed && ch.peer_closed() {
            let message =
                format!("the peer closed the control connection during the {size} B run ({e})");
            return Error { status: e.status, ..Error::new(ErrorKind::PeerClosed, message) };
        }
        e
    }

    /// `blocking`: the connections' poll blocks (no peak: a TCP write completes
    /// when the kernel has copied it).
    pub(crate) fn bw_plan(&self, size: u32, slots: u32, blocking: bool) -> BwPlan {
        let run = self.spec.run;
        let iters = run.iterations();
        BwPlan {
            op: self.plan.op,
            size,
            iters,
            duration: run.duration(),
            tx_depth: self.plan.queues.tx_depth,
            cq_mod: self.plan.queues.cq_mod,
            post_list: self.plan.queues.post_list,
            inline: self.plan.inline_for(u64::from(size)),
            slots,
            peak: run.duration().is_none() && iters <= 20_000 && !blocking,
            timeout: self.local.timeout,
            events: self.plan.queues.events,
            pace: (self.spec.rdma().and_then(|r| r.rate_limit))
                .map(|l| Pace { burst: l.burst, gap_ns: l.gap_ns(u64::from(size)) }),
            interval_ns: self
                .local
                .interval_lines
                .as_ref()
                .map_or(0, |l| l.every.as_nanos() as u64),
        }
    }

    /// perftest's `--perform_warm_up`: a full send queue of signaled requests on each
    /// QP, all waited for, outside the measured window.
    ///
    /// # Errors
    /// A failed post or completion.
    pub(crate) fn warm_up<C: Connection>(
        &self,
        conns: &mut [C],
        size: u32,
        slots: u32,
    ) -> Result<(), Error> {
        let plan = BwPlan {
            iters: u64::from(self.plan.queues.tx_depth),
            duration: None,
            cq_mod: 1,
            post_list: 1,
            peak: false,
            pace: None,
            interval_ns: 0,
            ..self.bw_plan(size, slots, C::BLOCKING_POLL)
        };
        loops::bw_send(conns, &plan, Clock::start(), &mut loops::NoRecv, loops::NoPulse)?;
        Ok(())
    }

    /// How a latency loop runs `size`.
    pub(crate) fn lat_plan(&self, size: u32) -> LatPlan {
        LatPlan {
            size,
            iters: self.spec.run.iterations(),
            duration: self.spec.run.duration(),
            inline: self.plan.inline_for(u64::from(size)),
            rtt_factor: self.spec.kind.rtt_factor(),
            timeout: self.local.timeout,
            events: self.plan.queues.events,
            recv_posted: u64::from(self.plan.queues.rx_depth),
            keep_samples: self.local.keep_samples,
        }
    }

    fn bandwidth<C: Connection + Send>(
        &self,
        ch: &mut Channel,
        conns: &mut [C],
        size: u32,
        slots: u32,
        local: &mut SizeResult,
    ) -> Result<(), Error> {
        let plan = self.bw_plan(size, slots, C::BLOCKING_POLL);
        let posted = self.plan.queues.receives_per_connection(conns.len(), plan.iters);
        if self.plan.role.sends {
            let lines = self.local.interval_lines.as_ref();
            let mut soak = self.soak.borrow_mut();
            let watch = soak.as_mut();
            let printing =
                |pulse, watch| IntervalPrinter::new(pulse, lines, u64::from(size), watch);
            let sent = if C::BLOCKING_POLL {
                // TCP: the receiver reads every byte, so it never only waits.
                debug_assert!(!self.plan.role.heartbeat);
                let pins = Pins { cpus: &self.local.pin, flag: "--cpus" };
                let spread = Spread { threads: conns.len(), pins };
                bw_send_threads(conns, &plan, spread, lines, watch, loops::NoPulse)
            } else if let Some(spread) = self.spread() {
                // --threads: the heartbeat, if the peer only waits, from this thread.
                debug_assert!(!self.plan.role.receives);
                if self.plan.role.heartbeat {
                    let beat = Heartbeat::new(ch);
                    bw_send_threads(conns, &plan, spread, lines, watch, beat)
                } else {
                    bw_send_threads(conns, &plan, spread, lines, watch, loops::NoPulse)
                }
            } else if self.plan.role.receives {
                // send_bw -b: this side also receives, on the same queue pairs.
                let mut recv = loops::Reposting::new(conns.len(), plan.iters, posted, size, slots);
                let pulse = printing(loops::NoPulse, watch);
                loops::bw_send(conns, &plan, Clock::start(), &mut recv, pulse)
            } else if self.plan.role.heartbeat {
                let beat = IntervalPrinter::new(Heartbeat::new(ch), lines, u64::from(size), watch);
                loops::bw_send(conns, &plan, Clock::start(), &mut loops::NoRecv, beat)
            } else {
                let pulse = printing(loops::NoPulse, watch);
                loops::bw_send(conns, &plan, Clock::start(), &mut loops::NoRecv, pulse)
            };
            // A failed duration run still has its window until the failure: its figures
            // are filled in below, then the failure is returned.
            let (outcome, failure) = match sent {
                Ok(outcome) => (outcome, None),
                Err(mut e) => match e.take_measured() {
                    Some(outcome) => (outcome, Some(e)),
                    None => return Err(e.into()),
                },
            };
            if failure.is_none() && self.spec.receives() && plan.duration.is_some() {
                loops::send_end_markers(conns, self.local.timeout)?;
            }
            let (total, per_qp, iterations) = bw_result(u64::from(size), &outcome, &self.spec.run);
            local.stability = bw_stability(u64::from(size), &outcome, &self.spec.run);
            local.progress = bw_progress(u64::from(size), &outcome, &self.spec.run);
            local.bw = Some(total);
            local.iterations = iterations;
            if let Some(spread) = self.spread() {
                local.per_thread = per_thread(&outcome, &per_qp, spread.threads);
            }
            if per_qp.len() > 1 {
                local.per_qp = per_qp;
            }
            if let Some(e) = failure {
                return Err(e.into());
            }
        } else if self.plan.role.receives {
            let plan = RecvPlan {
                size,
                iters: plan.iters,
                posted,
                slots,
                timeout: self.local.timeout,
                events: plan.events,
            };
            let received = if C::BLOCKING_POLL {
                // Each stream ends by itself (its sender's end of stream).
                let role = self.plan.role;
                per_connection(conns, &self.local.pin, |_, conn| {
                    loops::bw_recv(std::slice::from_mut(conn), &plan, || stopped(role))
                })
                .map(|counts| counts.concat())
            } else if let Some(spread) = self.spread() {
                bw_recv_threads(conns, &plan, spread, || ch.has_pending())
            } else {
                loops::bw_recv(conns, &plan, || ch.has_pending() || stopped(self.plan.role))
            }?;
            local.iterations = received.first().copied().unwrap_or(0);
            local.received_bytes = Some(received.iter().sum::<u64>() * u64::from(size));
        }
        Ok(())
    }

    /// `--threads T` with T > 1 on an RDMA test: its threads and their CPUs (None: the
    /// one measuring thread, today's and perftest's path, no thread spawned).
    fn spread(&self) -> Option<Spread<'_>> {
        let threads = self.local.threads as usize;
        (threads > 1 && self.spec.rdma().is_some())
            .then(|| Spread { threads, pins: Pins { cpus: &self.thread_cpus, flag: "--threads" } })
    }

    fn latency<C: Connection>(
        &self,
        ch: &mut Channel,
        conn: &mut C,
        size: u32,
        local: &mut SizeResult,
    ) -> Result<(), Error> {
        let plan = self.lat_plan(size);
        let rec = match plan.duration {
            None => self.lat_loop(ch, conn, &plan, loops::CountedSampler::new(&plan))?,
            Some(_) => self.lat_loop(ch, conn, &plan, loops::TimedSampler::new(&plan))?,
        };
        if let Some(mut rec) = rec.filter(|_| self.plan.role.initiates) {
            local.iterations = rec.count();
            let lat = rec.stats();
            local.stability = measure::Stability::of_latency(&lat);
            local.lat = Some(lat);
            local.samples_ns = rec.take_samples();
        }
        Ok(())
    }

    /// The latency loop of the test on this side, with the run's kind of sampler.
    fn lat_loop<C: Connection, S: loops::Sampler>(
        &self,
        ch: &mut Channel,
        conn: &mut C,
        plan: &LatPlan,
        samples: S,
    ) -> Result<Option<LatencyRecorder>, Error> {
        let initiates = self.plan.role.initiates;
        if !initiates && !self.plan.role.responds {
            // A read or atomic target only waits: the initiator works alone.
            return Ok(None);
        }
        let rec = match self.spec.kind.verb {
            Verb::Read | Verb::Atomic => {
                // The target only waits: told every second that this side is alive.
                debug_assert!(self.plan.role.heartbeat);
                loops::lat_round_trip(conn, self.plan.op, plan, samples, Heartbeat::new(ch))
            }
            Verb::Write if !self.spec.receives() => {
                let part = loops::PingPong {
                    writes_first: initiates,
                    measures: initiates,
                    source: plan.size as usize,
                };
                loops::lat_write_pingpong(conn, part, plan, samples, || ch.has_pending())
            }
            // Messages that consume a receive: sends, and writes with immediate data.
            Verb::Write | Verb::Send => {
                loops::lat_send_pingpong(conn, initiates, self.plan.op, plan, samples, || {
                    ch.has_pending()
                })
            }
        };
        Ok(Some(rec?))
    }
}

/// Whether a server's receiving loop ends for a termination signal (a one-shot
/// server's Ctrl-C): its client is told at the result exchange that follows. A client's
/// receiver keeps receiving: its sender, the server, ends the run.
fn stopped(role: Role) -> bool {
    !role.client && loops::stop_requested()
}

/// Bandwidth of each QP and the total, from what a sender recorded.
pub(crate) fn bw_result(
    size: u64,
    outcome: &BwOutcome,
    run: &RunLength,
) -> (BwStats, Vec<BwStats>, u64) {
    let per: Vec<(BwStats, u64)> = match run {
        RunLength::Iterations(_) => outcome
            .recorders
            .iter()
            .map(|r| (measure::bw_stats(size, r), r.first_post().unwrap_or(0)))
            .collect(),
        RunLength::Duration { .. } => outcome
            .windowed
            .iter()
            .map(|w| {
                (
                    measure::windowed_stats(
                        size,
                        w.messages,
                        w.window_ns,
                        w.interval_ns,
                        &w.buckets,
                    ),
                    0,
                )
            })
            .collect(),
    };
    let total = measure::aggregate(&per);
    let iterations = per.first().map_or(0, |(b, _)| b.messages);
    (total, per.into_iter().map(|(b, _)| b).collect(), iterations)
}

/// Each thread's share of a `--threads` run: its QPs' figures together, as the whole
/// run's total is all of them together.
pub(crate) fn per_thread(outcome: &BwOutcome, per_qp: &[BwStats], threads: usize) -> Vec<BwStats> {
    let starts: Vec<u64> = match outcome.recorders.len() {
        0 => vec![0; per_qp.len()],
        _ => outcome.recorders.iter().map(|r| r.first_post().unwrap_or(0)).collect(),
    };
    groups(per_qp.len(), threads)
        .into_iter()
        .map(|g| {
            let mine: Vec<(BwStats, u64)> =
                g.map(|q| (per_qp[q], starts.get(q).copied().unwrap_or(0))).collect();
            measure::aggregate(&mine)
        })
        .collect()
}

/// A sender's bytes as its run went: an iteration run's completions, a duration run's
/// intervals inside its window (every QP's together).
fn bw_progress(size: u64, outcome: &BwOutcome, run: &RunLength) -> Option<Progress> {
    match run {
        RunLength::Iterations(_) => {
            let qps: Vec<_> =
                outcome.recorders.iter().map(|r| (r.first_post(), r.completions())).collect();
            Progress::of(outcome.started, size, &qps)
        }
        RunLength::Duration { margin_ms, .. } => {
            let interval_ns = outcome.windowed.first()?.interval_ns;
            let buckets: Vec<&[u64]> = outcome.windowed.iter().map(|w| &w.buckets[..]).collect();
            let start_ns = margin_ms.saturating_mul(1_000_000);
            Progress::of_window(outcome.started, size, start_ns, interval_ns, &buckets)
        }
    }
}

/// The spread of a sender's intervals, every QP's together: a duration run's, after
/// its leading margin's intervals; an iteration run's from each QP's first completion.
pub(crate) fn bw_stability(
    size: u64,
    outcome: &BwOutcome,
    run: &RunLength,
) -> Option<measure::Stability> {
    let (rates, interval_ns, dropped) = match run {
        RunLength::Duration { margin_ms, .. } => {
            let interval_ns = outcome.windowed.first()?.interval_ns.max(1);
            let buckets: Vec<&[u64]> = outcome.windowed.iter().map(|w| &w.buckets[..]).collect();
            let dropped = margin_ms.saturating_mul(1_000_000) / interval_ns;
            (measure::windowed_rates(size, interval_ns, &buckets), interval_ns, dropped)
        }
        RunLength::Iterations(_) => {
            let per_qp: Vec<(Vec<f64>, u64)> =
                outcome.recorders.iter().map(|r| measure::recorder_rates(size, r)).collect();
            let n = per_qp.iter().map(|(r, _)| r.len()).min().unwrap_or(0);
            let summed = (0..n).map(|i| per_qp.iter().map(|(r, _)| r[i]).sum()).collect();
            (summed, per_qp.first().map_or(0, |(_, iv)| *iv), 0)
        }
    };
    measure::Stability::of_intervals(&rates, interval_ns, dropped)
}

impl From<LoopError> for Error {
    fn from(e: LoopError) -> Self {
        match e.into_failure() {
            LoopFailure::Transport(t) => t.into(),
            f @ LoopFailure::Completion { name, .. } => Error {
                status: Some(name.to_string()),
                ..Error::new(ErrorKind::Completion, f.to_string())
            },
            f @ LoopFailure::Stalled { .. } => Error::new(ErrorKind::PeerSilent, f.to_string()),
            f @ LoopFailure::PeerGone => Error::new(ErrorKind::PeerClosed, f.to_string()),
            f @ LoopFailure::Overtime { .. } => Error::new(ErrorKind::Refused, f.to_string()),
        }
    }
}

/// The error message the peer sent, if one is waiting on `ch` (read within `wait`).
fn peer_reason(ch: &mut Channel, wait: Duration) -> Option<Error> {
    if !ch.has_pending() {
        return None;
    }
    let timeout = ch.timeout();
    ch.set_timeout(wait).ok()?;
    let got = ch.recv("the peer's reason");
    let _ = ch.set_timeout(timeout);
    match got {
        Err(e @ ProtocolError::Peer(_)) => Some(e.into()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_threads_share_is_its_qps_together_and_the_shares_add_up() {
        let qp = |messages: u64| BwStats {
            messages,
            bytes: messages * 64,
            window_ns: 1_000_000,
            ..Default::default()
        };
        let per_qp = [qp(10), qp(20), qp(30)];
        let none = BwOutcome {
            recorders: Vec::new(),
            windowed: Vec::new(),
            intervals: Vec::new(),
            started: std::time::Instant::now(),
        };
        let shares = per_thread(&none, &per_qp, 2);
        let counts: Vec<u64> = shares.iter().map(|s| s.messages).collect();
        assert_eq!(counts, [30, 30], "thread 0 has QPs 0 and 1, thread 1 QP 2");
        assert_eq!(shares[0].bytes, 30 * 64);
        let total = measure::aggregate(&per_qp.iter().map(|b| (*b, 0)).collect::<Vec<_>>());
        assert_eq!(counts.iter().sum::<u64>(), total.messages);
        assert!((shares.iter().map(|s| s.msg_rate).sum::<f64>() - total.msg_rate).abs() < 1e-6);
    }
}
