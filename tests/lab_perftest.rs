//! `--perftest` against Debian's perftest in the lab: rdmabench as the client of each
//! of perftest's six servers, and as the server of its six clients (RC; UC and UD
//! where perftest allows them). Each pair must
//! end with exit 0 on both sides, and what crossed the wire must add up: the figures a
//! perftest server prints are the ones rdmabench sent, and the other way round.

use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{err, finish, text};

static NEXT_PORT: AtomicU16 = AtomicU16::new(19800);

const DEV: &str = "rxe0";

fn perftest(tool: &str, args: &[String]) -> Child {
    // The lab's device first: a lab test fails, never passes vacuously.
    drop(common::rdmabench(true));
    Command::new(tool)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{tool} starts (Debian's perftest, ci/setup): {e}"))
}

struct Pair {
    /// rdmabench's output and JSON.
    ours: Output,
    json: Value,
    /// perftest's output.
    theirs: Output,
}

fn flags(port: &str, extra: &[&str]) -> Vec<String> {
    let mut f: Vec<String> = vec!["-d".into(), DEV.into(), "-p".into(), port.into()];
    f.extend(extra.iter().map(|s| s.to_string()));
    f
}

fn read_json(path: &std::path::Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// perftest's `ib_TEST` as the server, rdmabench's client against it.
fn against_perftest_server(test: &str, extra: &[&str]) -> Pair {
    against_perftest_server_ours(test, extra, &[])
}

/// As [`against_perftest_server`], rdmabench's client also given `ours`.
fn against_perftest_server_ours(test: &str, extra: &[&str], ours: &[&str]) -> Pair {
    again_if_perftest_cannot_calibrate(test, || once_against_perftest_server(test, extra, ours))
}

fn once_against_perftest_server(test: &str, extra: &[&str], ours: &[&str]) -> Pair {
    let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let json = common::scratch("rdmabench-lab-perftest").join(format!("{test}-{port}.json"));
    let server = perftest(&format!("ib_{test}"), &flags(&port, extra));
    // perftest listens at once; rdmabench's client retries a refused connection anyway.
    let mut args =
        vec![test.replace('_', "-"), "--perftest".into(), "--timeout".into(), "30".into()];
    args.extend(flags(&port, extra));
    args.extend(ours.iter().map(|s| s.to_string()));
    args.extend(["--json".into(), json.display().to_string(), "127.0.0.1".into()]);
    let ours = finish(common::spawn(true, &args), Duration::from_secs(300));
    let theirs = finish_perftest(server);
    Pair { ours, json: read_json(&json), theirs }
}

/// rdmabench's server for perftest's `ib_TEST` client.
fn against_perftest_client(test: &str, extra: &[&str]) -> Pair {
    serve_perftest_client(test, extra, "30")
}

/// The same, with this `--timeout` on rdmabench's side.
fn serve_perftest_client(test: &str, extra: &[&str], timeout: &str) -> Pair {
    again_if_perftest_cannot_calibrate(test, || once_serve_perftest_client(test, extra, timeout))
}

fn once_serve_perftest_client(test: &str, extra: &[&str], timeout: &str) -> Pair {
    let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let json = common::scratch("rdmabench-lab-perftest").join(format!("{test}-{port}-server.json"));
    let mut args =
        vec![test.replace('_', "-"), "--perftest".into(), "--timeout".into(), timeout.into()];
    args.extend(flags(&port, extra));
    args.extend(["--json".into(), json.display().to_string()]);
    let mut server = common::spawn(true, &args);
    // perftest's client does not retry: it starts once the server listens.
    let stdout = server.stdout.take().unwrap();
    assert!(
        common::wait_for_line(stdout, "Waiting for a perftest client", Duration::from_secs(60)),
        "the {test} server never listened"
    );
    let mut client_args = flags(&port, extra);
    client_args.push("127.0.0.1".into());
    let client = perftest(&format!("ib_{test}"), &client_args);
    let theirs = finish_perftest(client);
    let ours = finish(server, Duration::from_secs(300));
    Pair { ours, json: read_json(&json), theirs }
}

/// perftest converts its cycle counts with a clock rate it measures *after* the run
/// (`get_cpu_mhz`: timestamps against `gettimeofday` over short sleeps, fitted by least
/// squares). On a loaded TCG vCPU the fit's r² can fall below its 0.9 floor; perftest
/// then prints "Can't produce a report" and exits 1, closing on its peer mid-barrier.
/// That is perftest failing to measure, not the interop under test, so the pair runs
/// again (at most twice more). Any other failure, on either side, is judged at once.
fn again_if_perftest_cannot_calibrate(test: &str, mut run: impl FnMut() -> Pair) -> Pair {
    for _ in 0..2 {
        let pair = run();
        if !err(&pair.theirs).contains("Correlation coefficient r^2") {
            return pair;
        }
        eprintln!(
            "{test}: perftest could not measure its clock rate under load; running the pair again"
        );
    }
    run()
}

/// perftest has no limit of its own on a silent peer: the test's is five minutes.
fn finish_perftest(child: Child) -> Output {
    finish(child, Duration::from_secs(300))
}

fn both_ok(p: &Pair, what: &str) {
    assert_eq!(
        p.ours.status.code(),
        Some(0),
        "rdmabench, {what}: {}\n{}\nperftest (exit {:?}): {}\n{}",
        err(&p.ours),
        text(&p.ours),
        p.theirs.status.code(),
        err(&p.theirs),
        text(&p.theirs)
    );
    assert_eq!(
        p.theirs.status.code(),
        Some(0),
        "perftest, {what}: {}\n{}",
        err(&p.theirs),
        text(&p.theirs)
    );
    assert!(p.json["error"].is_null(), "{what}: {}", p.json["error"]);
}

/// perftest's result rows: the numbers of each line that starts with a size.
fn perftest_rows(o: &Output) -> Vec<Vec<f64>> {
    text(o)
        .lines()
        .filter(|l| l.starts_with(' ') && l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.split_whitespace().filter_map(|w| w.parse().ok()).collect())
        .collect()
}

/// A bandwidth in perftest's MB/sec (2^20 B/s), as it prints it: two decimals.
fn mb(bytes_per_sec: &Value) -> String {
    format!("{:.2}", bytes_per_sec.as_f64().unwrap() / 1_048_576.0)
}

const N: u64 = 200;

#[test]
#[ignore = "lab: needs an RDMA device and perftest (ci/lab-vm)"]
fn lab_rdmabench_clients_run_against_perftests_servers() {
    let n = N.to_string();
    for test in ["write_bw", "read_bw", "send_bw"] {
        let p = against_perftest_server(test, &["-n", &n]);
        both_ok(&p, test);
        let r = &p.json["results"][0];
        assert_eq!(
            (r["size"].as_u64(), r["iterations"].as_u64()),
            (Some(65536), Some(N)),
            "{test}: {r}"
        );
        let row = &perftest_rows(&p.theirs)[0];
        assert_eq!((row[0], row[1]), (65536.0, N as f64), "{test}: {}", text(&p.theirs));
        if test != "send_bw" {
            // The write and read servers print the report rdmabench sent them.
            assert_eq!(format!("{:.2}", row[3]), mb(&r["bw"]["avg_bytes_per_sec"]), "{test}");
            assert_eq!(format!("{:.2}", row[2]), mb(&r["bw"]["peak_bytes_per_sec"]), "{test}");
        }
    }
    // -W against perftest: this side's port counters, from its own sysfs.
    let p = against_perftest_server_ours("write_bw", &["-n", &n], &["-W", "sent_pkts"]);
    both_ok(&p, "write_bw -W");
    let sent = &p.json["results"][0]["counters"]["changes"]["hw_counters/sent_pkts"];
    assert!(sent.as_u64().is_some_and(|s| s >= N * 16), "{N} × 64 KiB at 4096 B: {sent}");
    for (test, samples) in [("write_lat", N - 1), ("read_lat", N), ("send_lat", N)] {
        let p = against_perftest_server(test, &["-n", &n]);
        both_ok(&p, test);
        let r = &p.json["results"][0];
        // write_lat: perftest's server writes first, so the client's posts bound N - 1
        // round trips; read and send: one per message.
        assert_eq!(r["lat"]["samples"].as_u64(), Some(samples), "{test}: {r}");
        assert!(r["lat"]["t_min_us"].as_f64().unwrap() > 0.0, "{test}: {r}");
        if test != "read_lat" {
            let row = &perftest_rows(&p.theirs)[0];
            assert_eq!((row[0], row[1]), (2.0, N as f64), "{test}: {}", text(&p.theirs));
        }
    }
}

#[test]
#[ignore = "lab: needs an RDMA device and perftest (ci/lab-vm)"]
fn lab_perftests_clients_run_against_rdmabench_servers() {
    let n = N.to_string();
    for test in ["write_bw", "read_bw", "send_bw"] {
        let p = against_perftest_client(test, &["-n", &n]);
        both_ok(&p, test);
        let r = &p.json["results"][0];
        let row = &perftest_rows(&p.theirs)[0];
        assert_eq!((row[0], row[1]), (65536.0, N as f64), "{test}: {}", text(&p.theirs));
        if test == "send_bw" {
            // The receiver counted every message itself.
            assert_eq!(r["received_bytes"].as_u64(), Some(N * 65536), "{test}: {r}");
        } else {
            // The server's figures are the client's report, as perftest's server shows it.
            assert_eq!(mb(&r["bw"]["avg_bytes_per_sec"]), format!("{:.2}", row[3]), "{test}");
        }
    }
    for test in ["write_lat", "read_lat", "send_lat"] {
        let p = against_perftest_client(test, &["-n", &n]);
        both_ok(&p, test);
        let row = &perftest_rows(&p.theirs)[0];
        assert_eq!((row[0], row[1]), (2.0, N as f64), "{test}: {}", text(&p.theirs));
        let results = p.json["results"].as_array().unwrap();
        if test == "write_lat" {
            // rdmabench's server writes first, as perftest's, and measures each round trip
            // but the first (that one waits for perftest's set-up): N - 1.
            assert_eq!(results[0]["lat"]["samples"].as_u64(), Some(N - 1), "{test}: {results:?}");
        } else {
            assert!(results.is_empty(), "{test}: the client measures: {results:?}");
        }
    }
}

#[test]
#[ignore = "lab: needs an RDMA device and perftest (ci/lab-vm)"]
fn lab_bidirectional_runs_with_perftest_on_either_side() {
    // -b: both sides run, swap reports and print the sum; perftest's row is the two
    // directions rdmabench shows, added.
    let n = N.to_string();
    let cases = [
        ("write_bw -b, rdmabench's client", against_perftest_server("write_bw", &["-b", "-n", &n])),
        ("read_bw -b, rdmabench's server", against_perftest_client("read_bw", &["-b", "-n", &n])),
        ("send_bw -b, rdmabench's server", against_perftest_client("send_bw", &["-b", "-n", &n])),
    ];
    for (what, p) in cases {
        both_ok(&p, what);
        let r = &p.json["results"][0];
        let dirs = r["directions"].as_array().unwrap_or_else(|| panic!("{what}: {r}"));
        for d in dirs {
            assert_eq!(d["messages"].as_u64(), Some(N), "{what}: each direction ran -n: {r}");
        }
        let sum: f64 = dirs.iter().map(|d| d["avg_bytes_per_sec"].as_f64().unwrap()).sum();
        assert_eq!(mb(&r["bw"]["avg_bytes_per_sec"]), format!("{:.2}", sum / 1_048_576.0));
        let row = &perftest_rows(&p.theirs)[0];
        assert!(
            (row[3] - sum / 1_048_576.0).abs() < 0.011,
            "{what}: perftest's sum {} against rdmabench's {:.3}: {}",
            row[3],
            sum / 1_048_576.0,
            text(&p.theirs)
        );
    }
    // A sweep: perftest (4.6 and later) ends each size with a barrier too.
    let p = against_perftest_server("write_bw", &["-b", "-a", "-n", "5"]);
    both_ok(&p, "write_bw -b -a");
    assert_eq!(p.json["results"].as_array().unwrap().len(), 23);
    assert_eq!(perftest_rows(&p.theirs).len(), 23, "{}", text(&p.theirs));
}

#[test]
#[ignore = "lab: needs an RDMA device and perftest (ci/lab-vm)"]
fn lab_uc_and_ud_run_with_perftest_on_either_side() {
    // Where perftest allows them: writes and sends over UC, sends over UD (a message
    // fits the MTU; each receive holds the 40-byte GRH in front).
    let n = N.to_string();
    let ours_client = [
        ("write_bw", vec!["-c", "UC", "-n", &n]),
        ("send_bw", vec!["-c", "UD", "-s", "2048", "-n", &n]),
        ("send_lat", vec!["-c", "UD", "-n", &n]),
    ];
    for (test, extra) in ours_client {
        let p = against_perftest_server(test, &extra);
        both_ok(&p, &format!("{test} {extra:?}"));
        assert_eq!(p.json["params"]["connection"], extra[1], "{test}");
        let row = &perftest_rows(&p.theirs)[0];
        assert_eq!(row[1], N as f64, "{test} {extra:?}: {}", text(&p.theirs));
    }
    let ours_server = [
        ("send_bw", vec!["-c", "UC", "-n", &n]),
        ("write_lat", vec!["-c", "UC", "-n", &n]),
        ("send_lat", vec!["-c", "UD", "-n", &n]),
    ];
    for (test, extra) in ours_server {
        let p = against_perftest_client(test, &extra);
        both_ok(&p, &format!("{test} {extra:?}"));
        let row = &perftest_rows(&p.theirs)[0];
        assert_eq!(row[1], N as f64, "{test} {extra:?}: {}", text(&p.theirs));
        if test == "send_bw" {
            let r = &p.json["results"][0];
            assert_eq!(r["received_bytes"].as_u64(), Some(N * 65536), "every UC send: {r}");
        }
    }
}

#[test]
#[ignore = "lab: needs an RDMA device and perftest (ci/lab-vm)"]
fn lab_sweeps_and_queue_pairs_keep_perftests_order() {
    // -a: send_bw has two barriers per size, write_lat none (its counters and poll bytes
    // carry over from size to size); 23 sizes each.
    let p = against_perftest_server("send_bw", &["-a", "-n", "5"]);
    both_ok(&p, "send_bw -a");
    let sizes: Vec<u64> =
        p.json["results"].as_array().unwrap().iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, (1..=23).map(|k| 1u64 << k).collect::<Vec<_>>());
    assert_eq!(perftest_rows(&p.theirs).len(), 23, "{}", text(&p.theirs));
    let p = against_perftest_client("write_lat", &["-a", "-n", "5"]);
    both_ok(&p, "write_lat -a");
    assert_eq!(p.json["results"].as_array().unwrap().len(), 23);
    assert_eq!(perftest_rows(&p.theirs).len(), 23, "{}", text(&p.theirs));
    // -q 4: a record per queue pair in each handshake; the iterations of all four.
    let p = against_perftest_server("write_bw", &["-q", "4", "-n", "100"]);
    both_ok(&p, "write_bw -q 4");
    assert_eq!(p.json["results"][0]["per_qp"].as_array().map(Vec::len), Some(4));
    assert_eq!(perftest_rows(&p.theirs)[0][1], 400.0, "{}", text(&p.theirs));
    let p = against_perftest_client("send_bw", &["-q", "4", "-n", "100"]);
    both_ok(&p, "send_bw -q 4");
    assert_eq!(p.json["results"][0]["received_bytes"].as_u64(), Some(4 * 100 * 65536));
}

/// Runs alone (ci/lab-tests): perftest's client must start within the 3 s --timeout, and
/// a test beside it could take that CPU. (Apart from the sweeps above, which took 40 s
/// of ci/test alone when they were one test.)
#[test]
#[ignore = "lab: needs an RDMA device and perftest (ci/lab-vm)"]
fn lab_a_write_bw_server_outlasts_its_timeout_while_perftests_client_runs() {
    // A write_bw server says nothing while perftest's client runs; it outlasts its
    // --timeout (3 s here: perftest's write_bw client sleeps 1 s before its version; the
    // run takes several) as long as its port's counters move.
    let p = serve_perftest_client("write_bw", &["-n", "4000"], "3");
    both_ok(&p, "write_bw -n 4000 against a 3 s --timeout");
    let window = p.json["results"][0]["bw"]["window_ns"].as_u64().unwrap();
    assert!(window > 3_000_000_000, "the run was not longer than the timeout: {window} ns");
}

#[test]
#[ignore = "lab: needs an RDMA device and perftest (ci/lab-vm)"]
fn lab_a_perftest_run_prints_its_interval_lines() {
    // As rdmabench's own exchange: one line a second on the sending side, as it goes.
    // (-D is not run against perftest: 3,000 writes of 64 KiB take seconds in the lab.)
    let p = against_perftest_server_ours("write_bw", &["-n", "3000"], &["--interval", "1"]);
    both_ok(&p, "write_bw -n 3000 --interval 1");
    let lines: Vec<String> =
        text(&p.ours).lines().filter(|l| l.contains(" sec] ")).map(str::to_string).collect();
    assert!(lines.len() >= 2, "interval lines: {lines:?}\n{}", text(&p.ours));
    assert!(lines.iter().all(|l| l.contains("MiB/sec") && l.contains("Mpps")), "{lines:?}");
}
