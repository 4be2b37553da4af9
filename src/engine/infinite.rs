//! `--run_infinitely`: one size in intervals of `-D` seconds, each measured whole and
//! printed as it ends, until SIGINT (or SIGTERM, SIGHUP) on either side; the run's
//! result is then the summary of every interval. Between intervals the two sides meet
//! at a barrier where either may say it is done.

use std::io::Write;

use crate::error::Error;
use crate::measure::{BwStats, Stability};
use crate::perf::table;
use crate::results::{IntervalVerdicts, RunReport, SizeResult};
use crate::session::protocol::{Channel, Message};
use crate::transport::Connection;

use super::step::Step;

/// Runs intervals until a signal on this side or a `done` from the peer, printing each;
/// leaves their summary in `report`.
///
/// # Errors
/// No way to catch SIGINT here (a console handler refused on Windows), or whatever
/// stops an interval.
pub(super) fn run<C: Connection + Send>(
    step: &Step<'_>,
    ch: &mut Channel,
    conns: &mut [C],
    gbits: bool,
    report: &mut RunReport,
    out: &mut dyn Write,
) -> Result<(), Error> {
    ffi::os::watch_termination().map_err(|e| {
        Error::usage(format!("--run_infinitely: cannot catch SIGINT to end the run ({e})"))
    })?;
    let size = step.spec.max_size();
    let mut summary = Summary::default();
    // Each interval's row as a -D run's, without CPU lines (they are in the JSON).
    let wide = step.spec.max_size() >= 1_000_000;
    let layout = table::Layout { gbits, duration: true, wide, ..table::Layout::default() };
    print(out, &table::table_header(step.spec.kind, layout))?;
    loop {
        let stopping = ffi::os::termination_signal().is_some();
        let barrier = if stopping { Message::Done } else { Message::Ready { size } };
        ch.send(&barrier)?;
        let peer_stops = match ch.recv("the next interval")? {
            Message::Ready { size: s } if s == size => false,
            Message::Done => true,
            other => {
                return Err(Error::refused(format!(
                    "control channel: expected ready or done, got {}",
                    other.name()
                )))
            }
        };
        if stopping || peer_stops {
            break;
        }
        let mut interval = step.run(ch, conns, size)?;
        // perftest's line per interval and nothing more: the spread is the summary's.
        interval.stability = None;
        print(
            out,
            &(table::table_row(step.spec.kind, &interval, layout)
                + &table::details(&interval, layout)),
        )?;
        summary.add(&interval);
    }
    report.results.push(summary.result(size));
    Ok(())
}

fn print(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(format!("writing output: {e}")))
}

/// Every interval so far, added up.
#[derive(Default)]
struct Summary {
    intervals: u64,
    iterations: u64,
    messages: u64,
    bytes: u64,
    window_ns: u64,
    received: Option<u64>,
    /// The highest and lowest interval averages, bytes/s.
    best: Option<f64>,
    worst: Option<f64>,
    interval_ns: u64,
    /// Each interval's average, bytes/s, for the run's stability (8 bytes an interval:
    /// a day of 5 s intervals is 140 KB).
    rates: Vec<f64>,
    /// `--json-lines`' verdicts of every interval's own intervals.
    verdicts: Option<IntervalVerdicts>,
}

impl Summary {
    fn add(&mut self, r: &SizeResult) {
        self.intervals += 1;
        self.iterations += r.iterations;
        if let Some(bw) = &r.bw {
            self.messages += bw.messages;
            self.bytes += bw.bytes;
            self.window_ns += bw.window_ns;
            self.interval_ns = bw.window_ns;
            self.best =
                Some(self.best.map_or(bw.avg_bytes_per_sec, |b| b.max(bw.avg_bytes_per_sec)));
            self.worst =
                Some(self.worst.map_or(bw.avg_bytes_per_sec, |w| w.min(bw.avg_bytes_per_sec)));
            self.rates.push(bw.avg_bytes_per_sec);
        }
        if let Some(b) = r.received_bytes {
            self.received = Some(self.received.unwrap_or(0) + b);
        }
        if let Some(v) = r.interval_verdicts {
            let sum = self.verdicts.get_or_insert_with(IntervalVerdicts::default);
            sum.judged += v.judged;
            sum.failed += v.failed;
        }
    }

    /// The run as one result: every interval's messages over all their windows; peak
    /// and min are the best and worst interval's average.
    fn result(&self, size: u64) -> SizeResult {
        let secs = self.window_ns as f64 / 1e9;
        let per_sec = |v: u64| if secs > 0.0 { v as f64 / secs } else { 0.0 };
        let bw = (self.intervals > 0).then(|| BwStats {
            messages: self.messages,
            bytes: self.bytes,
            window_ns: self.window_ns,
            avg_bytes_per_sec: per_sec(self.bytes),
            peak_bytes_per_sec: self.best,
            min_bytes_per_sec: self.worst,
            interval_ns: Some(self.interval_ns),
            msg_rate: per_sec(self.messages),
        });
        SizeResult {
            size,
            iterations: self.iterations,
            bw,
            received_bytes: self.received,
            intervals: Some(self.intervals),
            stability: Stability::of_intervals(&self.rates, self.interval_ns, 0),
            interval_verdicts: self.verdicts,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_adds_every_interval_and_keeps_the_best_and_worst() {
        let interval = |messages: u64, ns: u64| SizeResult {
            size: 1000,
            iterations: messages,
            bw: Some(BwStats {
                messages,
                bytes: messages * 1000,
                window_ns: ns,
                avg_bytes_per_sec: (messages * 1000) as f64 / (ns as f64 / 1e9),
                ..Default::default()
            }),
            received_bytes: Some(messages * 1000),
            ..Default::default()
        };
        let mut s = Summary::default();
        for r in [interval(100, 1_000_000_000), interval(300, 1_000_000_000)] {
            s.add(&r);
        }
        let r = s.result(1000);
        let bw = r.bw.unwrap();
        assert_eq!(
            (r.intervals, r.iterations, bw.messages, bw.bytes),
            (Some(2), 400, 400, 400_000)
        );
        assert_eq!(bw.window_ns, 2_000_000_000);
        assert_eq!(bw.avg_bytes_per_sec, 200_000.0);
        assert_eq!(
            (bw.peak_bytes_per_sec, bw.min_bytes_per_sec),
            (Some(300_000.0), Some(100_000.0))
        );
        // Intervals of 100 and 300 kB/s: median 200, deviation 100, spike 1.5×.
        let st = r.stability.unwrap();
        assert_eq!((st.samples, st.median, st.cv, st.spike), (2, 200_000.0, 0.5, 1.5));
        assert_eq!(r.received_bytes, Some(400_000));
        let none = Summary::default().result(1000);
        assert_eq!((none.intervals, none.bw), (Some(0), None));
    }
}
