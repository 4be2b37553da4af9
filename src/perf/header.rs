//! A perftest-style run's header (perftest's block of parameters, a line per side) and
//! its verdict against the thresholds; the table under it is [`super::table`]'s (the
//! model they print is `crate::results`).

use std::fmt::Write;

use crate::measure::bw_in_unit;
use crate::measure::clock::ClockInfo;
use crate::report::RESULT_LINE;
use crate::results::{
    EffectiveParams, EnvironmentReport, PathParams, SizeResult, TcpEffective, Verdict,
};
use crate::spec::role::Role;
use crate::spec::{Measure, Output, RunLength, TestKind, TestSpec, Verb};
use crate::transport::Backend;

/// Checks `results` against the thresholds of `output`.
pub fn verdict(output: &Output, results: &[SizeResult]) -> Verdict {
    let unit = if output.report_gbits { "Gb/sec" } else { "MiB/sec" };
    let mut failures = Vec::new();
    for r in results {
        if let (Some(min), Some(bw)) = (output.min_bw, &r.bw) {
            let avg = bw_in_unit(bw.avg_bytes_per_sec, output.report_gbits);
            if avg < min {
                failures.push(format!(
                    "{} B: BW average {avg:.2} {unit} is below --min-bw {min}",
                    r.size
                ));
            }
        }
        if let (Some(min), Some(bw)) = (output.min_msg_rate, &r.bw) {
            let rate = bw.msg_rate / 1e6;
            if rate < min {
                failures.push(format!(
                    "{} B: MsgRate {rate:.6} Mpps is below -y/--limit_msgrate {min}",
                    r.size
                ));
            }
        }
        if let (Some(max), Some(lat)) = (output.max_lat, &r.lat) {
            if lat.t_typical_us > max {
                failures.push(format!(
                    "{} B: t_typical {:.2} usec is above --max-lat {max}",
                    r.size, lat.t_typical_us
                ));
            }
        }
        if let Some(v) = r.interval_verdicts.filter(|v| v.failed > 0) {
            failures.push(format!(
                "{} B: {} of {} intervals failed their verdict (--json-lines)",
                r.size, v.failed, v.judged
            ));
        }
        if let Some(v) = &r.validation {
            if v.corrupted_bytes > 0 {
                failures.push(format!(
                    "{} B: {} of {} bytes corrupted (first at offset {})",
                    r.size,
                    v.corrupted_bytes,
                    v.checked_bytes,
                    v.first_corrupted_offset.unwrap_or(0)
                ));
            }
        }
    }
    Verdict { pass: failures.is_empty(), failures }
}

/// perftest's header block, with a line per side saying what it ran on.
pub fn header(
    spec: &TestSpec,
    role: &Role,
    p: &EffectiveParams,
    env: Option<&EnvironmentReport>,
    clock: Option<&ClockInfo>,
) -> String {
    let mut o = match &p.tcp {
        Some(t) => tcp_header(spec, p, t),
        None => rdma_header(spec, role, p),
    };
    if let Some(env) = env {
        let _ = writeln!(o, " local host      : {}", env.local.summary());
        if let Some(peer) = &env.peer {
            let _ = writeln!(o, " remote host     : {}", peer.summary());
        }
    }
    if let Some(c) = clock {
        let source = c
            .kernel_clocksource
            .as_deref()
            .map_or(String::new(), |k| format!(", kernel clocksource {k}"));
        let _ = writeln!(o, " Clock           : {}, {:.0} ns a read{source}", c.source, c.read_ns);
        if let Some(w) = &c.warning {
            let _ = writeln!(o, " WARNING         : {w}");
        }
    }
    let _ = writeln!(o, "{RESULT_LINE}");
    o
}

fn rdma_header(spec: &TestSpec, role: &Role, p: &EffectiveParams) -> String {
    let test = spec.kind;
    let title = spec.title();
    let mut o = String::new();
    let _ = writeln!(o, "{RESULT_LINE}");
    let _ = writeln!(o, "{:>width$}", title, width = 20 + title.len());
    let _ = writeln!(o, " Dual-port       : OFF\t\tDevice         : {}", p.granted.device);
    let nd = spec.rdma().is_some_and(|r| r.backend == Backend::Nd);
    let transport = if nd { "NetworkDirect" } else { "IB" };
    let _ = writeln!(o, " Number of qps   : {}\t\tTransport type : {transport}", p.test.qps);
    let srq = if p.queues.shared_receives { "ON" } else { "OFF" };
    let _ = writeln!(o, " Connection type : {}\t\tUsing SRQ      : {srq}", p.test.connection);
    // The sender's queue: the client's, or the server's under --reversed.
    if test.measure == Measure::Lat || role.sends {
        let _ = writeln!(o, " TX depth        : {}", p.queues.tx_depth);
    }
    if test.verb == Verb::Send {
        let _ = writeln!(o, " RX depth        : {}", p.queues.rx_depth);
    }
    if test.measure == Measure::Bw {
        let _ = writeln!(o, " CQ Moderation   : {}", p.queues.cq_mod);
        if p.queues.post_list > 1 {
            let _ = writeln!(o, " Post List       : {}", p.queues.post_list);
        }
    }
    if !nd {
        // NetworkDirect neither reports nor sets a path MTU.
        let _ = writeln!(o, " Mtu             : {}[B]", p.granted.mtu);
    }
    let link = match p.granted.link_layer.as_str() {
        _ if nd => "NetworkDirect",
        "Ethernet" => "Ethernet",
        _ => "IB",
    };
    let _ = writeln!(o, " Link type       : {link}");
    if let Some(g) = p.granted.gid_index {
        let _ = writeln!(o, " GID index       : {g}");
    }
    if let Some(c) = p.granted.path.filter(|c| *c != PathParams::default()) {
        let _ = writeln!(
            o,
            " Service level   : {}\t\tTraffic class  : {}\tFlow label : {}",
            c.sl, c.traffic_class, c.flow_label
        );
    }
    match test.verb {
        Verb::Read | Verb::Atomic => {
            let _ = writeln!(o, " Outstand reads  : {}", p.granted.outs);
        }
        _ => {
            let _ = writeln!(o, " Max inline data : {}[B]", p.granted.inline_size);
        }
    }
    if let Some(a) = &p.test.atomic_type {
        let _ = writeln!(o, " Atomic type     : {a}");
    }
    if let Some(l) = &p.test.rate_limit {
        let _ = writeln!(
            o,
            " Rate limiter    : SW, {} in bursts of {} messages",
            l.describe(),
            l.burst
        );
    }
    if let Some(a) = &p.cpu_affinity {
        let _ = match a.cpus.as_slice() {
            [] => writeln!(o, " CPU affinity    : {}", a.source),
            cpus => writeln!(
                o,
                " CPU affinity    : CPUs {} ({})",
                crate::results::cpu_ranges(cpus),
                a.source
            ),
        };
    }
    if p.test.hugepages {
        let _ = writeln!(o, " Huge pages      : ON (buffers in MAP_HUGETLB pages)");
    }
    if p.test.odp {
        let _ = writeln!(o, " ODP             : ON (buffers paged in on demand, not pinned)");
    }
    if p.test.warm_up {
        let _ = writeln!(o, " Warm up         : ON (a send queue per QP before each size)");
    }
    if p.test.reversed {
        let _ = writeln!(o, " Reversed        : ON (the server sends and measures)");
    }
    let _ = writeln!(o, " rdma_cm QPs\t : {}", if p.test.rdma_cm { "ON" } else { "OFF" });
    let _ = writeln!(o, " Data ex. method : Ethernet");
    let _ = writeln!(o, " Events          : {}", if p.queues.events { "ON" } else { "OFF" });
    header_end(&mut o, test, p);
    o
}

/// The lines every header ends with: what a latency sample is, the measured window.
fn header_end(o: &mut String, test: TestKind, p: &EffectiveParams) {
    if test.measure == Measure::Lat {
        let _ = writeln!(o, " Latency         : {}", p.test.latency_is);
    }
    if let RunLength::Duration { secs, margin_ms } = p.test.run {
        let _ = writeln!(
            o,
            " Duration        : {secs} s, measured window {} s (margin {} s each side)",
            crate::spec::secs_text((secs * 1000).saturating_sub(2 * margin_ms)),
            crate::spec::secs_text(margin_ms)
        );
    }
}

/// The same block for a TCP test, with the socket set-up in place of the QP's.
fn tcp_header(spec: &TestSpec, p: &EffectiveParams, t: &TcpEffective) -> String {
    let test = spec.kind;
    let title = spec.title();
    let mut o = String::new();
    let _ = writeln!(o, "{RESULT_LINE}");
    let _ = writeln!(o, "{:>width$}", title, width = 20 + title.len());
    let _ = writeln!(o, " Number of streams: {}\t\tTransport type : TCP", t.streams);
    let _ = writeln!(
        o,
        " Socket buffer   : {}",
        t.socket_buffer.map_or("autotuned".to_string(), |b| format!("{b}[B] granted"))
    );
    let _ = writeln!(o, " TCP_NODELAY     : {}", if t.nodelay { "ON" } else { "OFF" });
    if let Some(cpus) = &t.pinned_cpus {
        let list: Vec<String> = cpus.iter().map(ToString::to_string).collect();
        let _ = writeln!(o, " Pinned to CPUs  : {}", list.join(","));
    }
    header_end(&mut o, test, p);
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{BwStats, LatStats, MIB};
    use crate::perf::table::{table_header, table_row, Layout};
    use crate::results::{IntervalVerdicts, Validation};

    const WRITE_BW: TestKind = TestKind { verb: Verb::Write, measure: Measure::Bw };
    const READ_LAT: TestKind = TestKind { verb: Verb::Read, measure: Measure::Lat };

    fn bw_result(avg: f64) -> SizeResult {
        SizeResult {
            size: 65536,
            iterations: 5000,
            bw: Some(BwStats {
                messages: 5000,
                bytes: 5000 * 65536,
                window_ns: 1_000_000_000,
                avg_bytes_per_sec: avg,
                peak_bytes_per_sec: Some(avg * 1.01),
                min_bytes_per_sec: Some(avg * 0.9),
                interval_ns: Some(100_000_000),
                msg_rate: 5000.0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn bw_rows_keep_perftests_column_order() {
        let head = table_header(WRITE_BW, Layout::default());
        assert!(head.starts_with(
            " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
        ));
        let row = table_row(WRITE_BW, &bw_result(100.0 * MIB), Layout::default());
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols, ["65536", "5000", "101.00", "100.00", "0.005000", "90.00"]);
        let gbits = Layout { gbits: true, ..Layout::default() };
        let row = table_row(WRITE_BW, &bw_result(1e9 / 8.0), gbits);
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[3], "1.00", "Gb/s are 10^9 bits");
        // No peak computed: perftest's 0.00 on RDMA, n/a on TCP.
        let mut none = bw_result(100.0 * MIB);
        none.bw.as_mut().unwrap().peak_bytes_per_sec = None;
        let peak =
            |layout| table_row(WRITE_BW, &none, layout).split_whitespace().nth(2).map(String::from);
        assert_eq!(peak(Layout::default()).as_deref(), Some("0.00"));
        let tcp = Layout { streams: true, ..Layout::default() };
        assert_eq!(peak(tcp).as_deref(), Some("n/a"));
    }

    #[test]
    fn a_size_of_seven_digits_stays_inside_its_column() {
        let mut big = bw_result(100.0 * MIB);
        big.size = 8 << 20;
        let wide = Layout { wide: true, ..Layout::default() };
        let head = table_header(WRITE_BW, wide);
        assert!(head.starts_with("  #bytes     #iterations"), "{head}");
        let row = table_row(WRITE_BW, &big, wide);
        // The size ends where `#bytes` ends, after a leading space, as smaller ones do.
        assert!(row.starts_with(" 8388608 "), "{row}");
        let end = head.find("#bytes").unwrap() + "#bytes".len();
        assert_eq!(&row[end - 7..end], "8388608", "{head}{row}");
        // Smaller runs keep perftest's header as it is.
        assert!(table_header(WRITE_BW, Layout::default()).starts_with(" #bytes     #iterations"));
    }

    #[test]
    fn latency_rows_follow_the_header() {
        let head = table_header(READ_LAT, Layout::default());
        let names: Vec<&str> = head.split("  ").map(str::trim).filter(|s| !s.is_empty()).collect();
        // perftest's header: one space between the first two names, two or more after.
        let mut columns = vec!["#bytes #iterations"];
        columns.extend(&crate::perf::table::LAT_COLUMNS[2..]);
        assert_eq!(names, columns);
        let r = SizeResult {
            size: 2,
            iterations: 1000,
            lat: Some(LatStats {
                samples: 1000,
                t_min_us: 1.0,
                t_max_us: 9.0,
                t_typical_us: 2.0,
                t_avg_us: 2.5,
                t_stdev_us: 0.5,
                p99_us: 5.0,
                p99_9_us: 8.0,
                p99_99_us: 9.0,
                histogram: vec![],
            }),
            ..Default::default()
        };
        let cols: Vec<String> = table_row(READ_LAT, &r, Layout::default())
            .split_whitespace()
            .map(String::from)
            .collect();
        assert_eq!(
            cols,
            ["2", "1000", "1.00", "9.00", "2.00", "2.50", "0.50", "5.00", "8.00", "9.00"]
        );
    }

    #[test]
    fn thresholds_fail_with_a_reason() {
        let cfg = Output { min_bw: Some(150.0), ..Default::default() };
        let v = verdict(&cfg, &[bw_result(100.0 * MIB)]);
        assert!(!v.pass);
        assert_eq!(v.failures, ["65536 B: BW average 100.00 MiB/sec is below --min-bw 150"]);
        assert!(verdict(&cfg, &[bw_result(200.0 * MIB)]).pass);
        let mut corrupt = bw_result(200.0 * MIB);
        corrupt.validation = Some(Validation {
            checked_bytes: 100,
            corrupted_bytes: 3,
            first_corrupted_offset: Some(7),
        });
        let v = verdict(&cfg, &[corrupt]);
        assert_eq!(v.failures, ["65536 B: 3 of 100 bytes corrupted (first at offset 7)"]);
        // -y: the message rate, in Mpps as the table shows it.
        let rate = Output { min_msg_rate: Some(0.006), ..Default::default() };
        let v = verdict(&rate, &[bw_result(100.0 * MIB)]);
        assert_eq!(
            v.failures,
            ["65536 B: MsgRate 0.005000 Mpps is below -y/--limit_msgrate 0.006"]
        );
        let rate = Output { min_msg_rate: Some(0.004), ..Default::default() };
        assert!(verdict(&rate, &[bw_result(100.0 * MIB)]).pass);
    }

    #[test]
    fn failed_intervals_fail_the_run_and_are_counted() {
        let mut soaked = bw_result(200.0 * MIB);
        soaked.interval_verdicts = Some(IntervalVerdicts { judged: 10, failed: 3 });
        let v = verdict(&Output::default(), &[soaked.clone()]);
        assert_eq!(v.failures, ["65536 B: 3 of 10 intervals failed their verdict (--json-lines)"]);
        soaked.interval_verdicts = Some(IntervalVerdicts { judged: 10, failed: 0 });
        assert!(verdict(&Output::default(), &[soaked]).pass);
    }
}
