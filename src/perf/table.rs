//! The results table of a perftest-style run: perftest's columns, each number under its
//! column's name at every size, and the lines under each size (per QP or stream, per
//! direction, validation, CPU with `--cpu_util`, port counters).

use std::fmt::Write;

use crate::measure::cpu::{CounterSource, CpuCost};
use crate::spec::{Measure, Output, RunLength, TestKind, TestSpec};

use crate::measure::stability::{Stability, StabilityUnit};
use crate::measure::{bw_in_unit, BwStats};
use crate::results::SizeResult;

/// How a results table is laid out: the unit, the columns, what goes under each size.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layout {
    /// Gb/s instead of MiB/s.
    pub gbits: bool,
    /// A -D run (a latency test then shows its transaction rate).
    pub duration: bool,
    /// TCP: the connections are streams, and `#iterations` counts every stream's.
    pub streams: bool,
    /// Each side's CPU cost under each size (`--cpu_util`).
    pub cpu: bool,
    /// A row per QP or stream under each size (`--verbose`).
    pub verbose: bool,
    /// A size of 7 digits or more (1 MiB and up): the header starts a space further
    /// in, so the size column holds it under `#bytes` (perftest's header otherwise).
    pub wide: bool,
}

impl Layout {
    /// The layout of `spec`'s table as `output` asks.
    pub fn of(spec: &TestSpec, output: &Output) -> Layout {
        Layout {
            gbits: output.report_gbits,
            duration: matches!(spec.run, RunLength::Duration { .. }),
            streams: spec.rdma().is_none(),
            cpu: output.cpu,
            verbose: output.verbose,
            wide: spec.max_size() >= 1_000_000,
        }
    }

    fn unit(self) -> &'static str {
        if self.gbits {
            "Gb/sec"
        } else {
            "MiB/sec"
        }
    }
}

/// The latency columns of an `-n` run, as perftest names them.
pub(crate) const LAT_COLUMNS: [&str; 10] = [
    "#bytes",
    "#iterations",
    "t_min[usec]",
    "t_max[usec]",
    "t_typical[usec]",
    "t_avg[usec]",
    "t_stdev[usec]",
    "99% percentile[usec]",
    "99.9% percentile[usec]",
    "99.99% percentile[usec]",
];

/// The latency columns of a `-D` run.
const LAT_DURATION_COLUMNS: [&str; 8] = [
    "#bytes",
    "#iterations",
    "t_avg[usec]",
    "tps average",
    "t_min[usec]",
    "t_typical[usec]",
    "99% percentile[usec]",
    "t_max[usec]",
];

/// The column header of the results table (perftest's spacing).
pub fn table_header(test: TestKind, layout: Layout) -> String {
    let indent = if layout.wide { " " } else { "" };
    let header = match test.measure {
        Measure::Bw => {
            let u = layout.unit();
            format!(" #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]    BW min[{u}]\n")
        }
        Measure::Lat if layout.duration => {
            " #bytes        #iterations       t_avg[usec]    tps average    t_min[usec]    t_typical[usec]    \
             99% percentile[usec]    t_max[usec]\n"
                .to_string()
        }
        Measure::Lat => " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
                          t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]   99.99% percentile[usec]\n"
            .to_string(),
    };
    format!("{indent}{header}")
}

/// One row of the results table, perftest's columns first, each number ending where
/// its column's name ends in the header.
pub fn table_row(test: TestKind, r: &SizeResult, layout: Layout) -> String {
    let header = table_header(test, layout);
    // TCP's streams: the messages of them all, as the bandwidth beside it.
    let iterations = match (&r.bw, layout.streams) {
        (Some(bw), true) => bw.messages,
        _ => r.iterations,
    };
    let f = |v: f64, prec: usize| format!("{v:.prec$}");
    if let Some(bw) = &r.bw {
        let u = |v: f64| bw_in_unit(v, layout.gbits);
        let avg = u(bw.avg_bytes_per_sec);
        let prec = if layout.gbits && avg < 0.1 { 6 } else { 2 };
        let u_ = layout.unit();
        let labels = [
            "#bytes".to_string(),
            "#iterations".to_string(),
            format!("BW peak[{u_}]"),
            format!("BW average[{u_}]"),
            "MsgRate[Mpps]".to_string(),
            format!("BW min[{u_}]"),
        ];
        let values = [
            r.size.to_string(),
            iterations.to_string(),
            // Not computed: perftest's 0.00 on RDMA; n/a on TCP, which never has one (a
            // write's completion says nothing about the wire).
            match bw.peak_bytes_per_sec {
                None if layout.streams => "n/a".to_string(),
                peak => f(u(peak.unwrap_or(0.0)), prec),
            },
            f(avg, prec),
            f(bw.msg_rate / 1e6, 6),
            f(u(bw.min_bytes_per_sec.unwrap_or(0.0)), prec),
        ];
        return under_labels(&header, &labels, &values);
    }
    if let Some(l) = &r.lat {
        let (size, iterations) = (r.size.to_string(), iterations.to_string());
        if layout.duration {
            let tps = if l.t_avg_us > 0.0 { 1e6 / l.t_avg_us } else { 0.0 };
            let values = [
                size,
                iterations,
                f(l.t_avg_us, 2),
                f(tps, 2),
                f(l.t_min_us, 2),
                f(l.t_typical_us, 2),
                f(l.p99_us, 2),
                f(l.t_max_us, 2),
            ];
            return under_labels(&header, &LAT_DURATION_COLUMNS, &values);
        }
        let values = [
            size,
            iterations,
            f(l.t_min_us, 2),
            f(l.t_max_us, 2),
            f(l.t_typical_us, 2),
            f(l.t_avg_us, 2),
            f(l.t_stdev_us, 2),
            f(l.p99_us, 2),
            f(l.p99_9_us, 2),
            f(l.p99_99_us, 2),
        ];
        return under_labels(&header, &LAT_COLUMNS, &values);
    }
    format!(" {:<7}    {:<10}   (no result)\n", r.size, r.iterations)
}

/// A row whose values end where their labels end in `header` (numbers right-aligned
/// under their names), at least a space apart when a value is wider than its column.
fn under_labels<L: AsRef<str>>(header: &str, labels: &[L], values: &[String]) -> String {
    let mut row = String::new();
    let mut from = 0;
    for (label, value) in labels.iter().zip(values) {
        let label = label.as_ref();
        let start = header[from..].find(label).map_or(from, |i| from + i);
        from = start + label.len();
        // Values a space apart; the first column's leading space is the header's.
        let least = usize::from(!row.is_empty());
        let gap = from.saturating_sub(row.len() + value.len()).max(least);
        row.push_str(&" ".repeat(gap));
        row.push_str(value);
    }
    row.push('\n');
    row
}

/// One part's line under a size's row (a QP, a stream, a thread): its share of the run.
fn share_line(o: &mut String, label: &str, part: &BwStats, unit: &str, gbits: bool) {
    let _ = writeln!(
        o,
        "   {label} {:>10} messages  BW average {:.2} {unit}  MsgRate {:.6} Mpps",
        part.messages,
        bw_in_unit(part.avg_bytes_per_sec, gbits),
        part.msg_rate / 1e6
    );
}

/// Lines under a size's row: per-QP (per-stream) and per-direction figures, validation,
/// and with `--cpu_util` each side's CPU cost.
pub fn details(r: &SizeResult, layout: Layout) -> String {
    let mut o = String::new();
    let gbits = layout.gbits;
    let unit = layout.unit();
    if r.per_qp.len() > 1 && layout.verbose {
        let name = if layout.streams { "stream" } else { "qp" };
        for (i, q) in r.per_qp.iter().enumerate() {
            share_line(&mut o, &format!("{name} {i:<3}"), q, unit, gbits);
        }
    }
    // --threads: each thread's share, always (it is what the option is for).
    for (k, t) in r.per_thread.iter().enumerate() {
        share_line(&mut o, &format!("thread {k:<3}"), t, unit, gbits);
    }
    if let Some([out, back]) = &r.directions {
        let _ = writeln!(
            o,
            "   client -> server BW average {:.2} {unit}; server -> client {:.2} {unit}; sum {:.2} {unit}",
            bw_in_unit(out.avg_bytes_per_sec, gbits),
            bw_in_unit(back.avg_bytes_per_sec, gbits),
            r.bw.as_ref().map_or(0.0, |b| bw_in_unit(b.avg_bytes_per_sec, gbits))
        );
    }
    if let Some(bw) = &r.bw {
        if let Some(iv) = bw.interval_ns {
            let _ = writeln!(
                o,
                "   window {:.3} ms; BW min over {:.3} ms intervals",
                bw.window_ns as f64 / 1e6,
                iv as f64 / 1e6
            );
        }
    }
    if let Some(st) = &r.stability {
        o.push_str(&stability_line(st, layout));
    }
    if let Some(v) = &r.validation {
        let _ = writeln!(
            o,
            "   validation: {} bytes checked, {} corrupted",
            v.checked_bytes, v.corrupted_bytes
        );
    }
    if let Some(b) = r.received_bytes {
        let _ = writeln!(o, "   received: {b} bytes");
    }
    if let Some(n) = r.intervals {
        let secs = r.bw.as_ref().map_or(0.0, |b| b.window_ns as f64 / 1e9);
        let _ = writeln!(o, "   summary of {n} intervals, {secs:.3} s measured (--run_infinitely)");
    }
    for (side, c) in [("client", &r.cpu.client), ("server", &r.cpu.server)] {
        if let Some(c) = c.as_ref().filter(|_| layout.cpu) {
            o.push_str(&cpu_line(side, c));
        }
    }
    if let Some(c) = &r.counters {
        o.push_str(&c.lines());
    }
    o
}

/// How steady the run was, in one line: `stability: CV 3.10 %, intervals of 1000.000 ms
/// 4950.12–5310.40 MiB/sec (median 5120.00), spike 1.04× the median, 5 warm-up
/// intervals dropped`; a latency's iterations in usec, with p99 and p99.9.
pub fn stability_line(st: &Stability, layout: Layout) -> String {
    let (low, median, high, unit, over) = match st.unit {
        StabilityUnit::BytesPerSec => {
            let bw = |v| bw_in_unit(v, layout.gbits);
            let iv = st.interval_ns.unwrap_or(0) as f64 / 1e6;
            let over = format!("{} intervals of {iv:.3} ms", st.samples);
            (bw(st.lowest), bw(st.median), bw(st.highest), layout.unit(), over)
        }
        StabilityUnit::Us => {
            let over = format!("{} iterations", st.samples);
            (st.lowest, st.median, st.highest, "usec", over)
        }
    };
    let mut o = format!(
        "   stability: CV {:.2} %, {over} {low:.2}–{high:.2} {unit} (median {median:.2}), spike {:.2}× the median",
        st.cv * 100.0,
        st.spike
    );
    if let (Some(p99), Some(p999)) = (st.p99, st.p99_9) {
        let _ = write!(o, ", p99 {p99:.2} {unit}, p99.9 {p999:.2} {unit}");
    }
    if let Some(n) = st.warm_up_dropped.filter(|&n| n > 0) {
        let _ = write!(o, ", {n} warm-up intervals dropped");
    }
    o.push('\n');
    o
}

/// One side's CPU cost in one line: machine busy % (split), process %, switches,
/// interrupts, cost per byte, peak memory. Windows' split and counters under their
/// Windows names (docs/metrics.md#windows).
pub fn cpu_line(side: &str, c: &CpuCost) -> String {
    let windows = c.source == Some(CounterSource::Windows);
    let (sys, irq, soft) = if windows { ("priv", "intr", "dpc") } else { ("sys", "irq", "soft") };
    let mut o = format!(
        "   cpu {side}: busy {:.1}% of {} (usr {:.1} {sys} {:.1} {irq} {:.1} {soft} {:.1}), process {:.1}%",
        c.busy_percent,
        u64::from(c.cores) * 100,
        c.user_percent,
        c.system_percent,
        c.irq_percent,
        c.softirq_percent,
        c.process_percent,
    );
    if let (Some(v), Some(i)) = (c.voluntary_switches, c.involuntary_switches) {
        let _ = write!(o, ", ctx {v}/{i} vol/invol");
    } else if let Some(s) = c.system_switches {
        let _ = write!(o, ", ctx {s} machine");
    }
    let _ = match c.interrupts {
        Some(i) => write!(o, ", intr {i}"),
        None => write!(o, ", intr n/a"),
    };
    if let Some(d) = c.dpcs {
        let _ = write!(o, ", dpcs {d}");
    }
    if let Some(g) = c.cpu_s_per_gb {
        let _ = write!(o, ", {g:.3} CPU-s/GB");
    }
    if let Some(cb) = c.cycles_per_byte {
        let _ = write!(o, ", {cb:.2} cycles/B");
    }
    if let (None, Some(us)) = (c.cpu_s_per_gb, c.cpu_us_per_message) {
        let _ = write!(o, ", {us:.2} CPU-usec/msg");
    }
    if let Some(peak) = c.peak_resident_bytes {
        let _ =
            write!(o, ", peak {} {:.1} MB", if windows { "ws" } else { "rss" }, peak as f64 / 1e6);
    }
    if let (true, Some(source)) = (c.unreliable, c.source) {
        let least = source.tick_s() * crate::measure::cpu::RELIABLE_TICKS;
        let _ = write!(o, " [unreliable: a {:.3} s window, under {least:.2} s]", c.window_s);
    }
    o.push('\n');
    o
}
