//! `rdmabench serve`: one long-lived server. Each client says which test it wants in
//! its hello; the server applies that test's rules to the client's parameters, runs
//! its side, logs one line, and goes back to listening, whatever the client did.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::cli::args::timeout;
use crate::cli::ServeArgs;
use crate::engine::serve_client;
use crate::error::{one_line, Error};
use crate::perf::report::{bw_in_unit, RunReport};
use crate::session::connect::ControlListener;
use crate::spec::{Local, DEFAULT_PORT};

/// Serves tests until `--count` is reached (or for ever). Returns the exit status.
///
/// # Errors
/// Only a listener that cannot be opened; a failing client is logged and served no more.
pub fn serve(args: &ServeArgs, out: &mut dyn Write) -> Result<u8, Error> {
    let port = args.port.unwrap_or(DEFAULT_PORT);
    let timeout = timeout(args.timeout)?;
    let local = Local {
        device: args.device.clone(),
        ib_port: args.ib_port.unwrap_or(1),
        gid_index: args.gid_index,
        port,
        bind: args.bind,
        timeout,
        connect_window: timeout,
        pin: Vec::new(),
    };
    let listener = ControlListener::bind(args.bind, port)?;
    let addr = listener.local_addr().map_or_else(|| format!("port {port}"), |a| a.to_string());
    log(out, &format!("serving on {addr}"));
    let mut served = 0u64;
    while args.count.is_none_or(|n| served < n) {
        // A client that connects and says nothing is dropped after the timeout.
        let (ch, spec) = match listener.accept_hello(None, timeout) {
            Ok(Some(accepted)) => accepted,
            // A reachability check (compare's), not a test: neither logged nor counted.
            Ok(None) => continue,
            Err(r) => {
                let peer = r.peer.map_or_else(|| "-".to_string(), |a| a.to_string());
                log(out, &format!("{peer} refused: {} ({})", r.error, r.error.kind));
                served += 1;
                continue;
            }
        };
        served += 1;
        let peer = ch.peer_addr().map_or_else(|| "?".to_string(), |a| a.to_string());
        let test = spec.id();
        // The client's spec whole: both sides run with the same parameters.
        let outcome = serve_client(&spec, ch, &local, &mut io::sink());
        let line = match outcome.error {
            None => format!("{peer} {test} ok: {}", summary(&outcome.report)),
            Some(e) => format!("{peer} {test} FAILED: {e} ({})", e.kind),
        };
        log(out, &line);
    }
    Ok(0)
}

/// `3 sizes, 65536 B: 612.30 MiB/sec` or `2 B: t_typical 12.30 usec`: the last size.
pub fn summary(report: &RunReport) -> String {
    let n = report.results.len();
    let Some(last) = report.results.last() else { return "no sizes".into() };
    let what = match (&last.bw, &last.lat) {
        (Some(bw), _) => {
            format!("BW average {:.2} MiB/sec", bw_in_unit(bw.avg_bytes_per_sec, false))
        }
        (None, Some(lat)) => format!("t_typical {:.2} usec", lat.t_typical_us),
        (None, None) => "no figures".into(),
    };
    let sizes = if n > 1 { format!("{n} sizes, last ") } else { String::new() };
    format!("{sizes}{} B x {}: {what}", last.size, last.iterations)
}

fn log(out: &mut dyn Write, line: &str) {
    let _ = writeln!(out, "{} {}", utc_now(), one_line(line));
    let _ = out.flush();
}

/// `2026-11-30T05:12:03Z`, without a date crate.
pub fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc(secs)
}

fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_008_323), "2026-11-30T03:12:03Z");
    }
}
