//! What a new user met in the first hour, host-only over TCP (issue #59): each test
//! shows the fixed behaviour as that user would see it.

use std::process::Child;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{err, finish};

static NEXT_PORT: AtomicU16 = AtomicU16::new(21400);

fn port() -> String {
    NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string()
}

fn spawn(args: &[&str]) -> Child {
    common::spawn(false, args)
}

#[test]
// Verbs on Linux; NetworkDirect's discovery under wine is not checked here.
#[cfg(target_os = "linux")]
fn an_rdma_client_on_a_host_without_rdma_says_so_at_once() {
    let devices = std::fs::read_dir("/sys/class/infiniband").map_or(0, Iterator::count);
    assert_eq!(devices, 0, "this host test needs a host without RDMA devices");
    let port = port();
    let start = Instant::now();
    let out = finish(spawn(&["write-bw", "-p", &port, "127.0.0.1"]), Duration::from_secs(60));
    let took = start.elapsed();
    let stderr = err(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("rdmabench: no RDMA stack on this machine ("), "{stderr}");
    assert!(!stderr.contains("server"), "not the server's fault: {stderr}");
    assert!(took < Duration::from_secs(5), "at once, not after retrying: {took:?}");
}

#[test]
fn a_tcp_server_given_test_flags_refuses_a_client_whose_test_differs() {
    let port = port();
    let server = spawn(&["tcp-bw", "-p", &port, "--timeout", "20", "-s", "4K", "-n", "100"]);
    std::thread::sleep(Duration::from_millis(300));
    let client = finish(
        spawn(&["tcp-bw", "-p", &port, "--timeout", "20", "-P", "2", "127.0.0.1"]),
        Duration::from_secs(60),
    );
    let server = finish(server, Duration::from_secs(30));
    assert_eq!((client.status.code(), server.status.code()), (Some(2), Some(2)));
    let want = "parameter mismatch: run (-n/-D/-f): client {\"iterations\":5000}, server \
                {\"iterations\":100}; sizes (-s/-a): client [65536], server [4096]; streams \
                (-P): client 2, server 1";
    let (client, server) = (err(&client), err(&server));
    assert_eq!(client.lines().count(), 1, "{client}");
    assert!(client.starts_with("rdmabench: ") && client.contains(want), "{client}");
    let last = server.lines().last().unwrap();
    assert!(last.starts_with("rdmabench: ") && last.contains(want), "{server}");
}

#[test]
fn a_two_second_run_keeps_quarter_second_margins_not_none() {
    let port = port();
    let server = spawn(&["tcp-bw", "-p", &port, "--timeout", "20"]);
    std::thread::sleep(Duration::from_millis(300));
    let client = finish(
        spawn(&["tcp-bw", "-p", &port, "--timeout", "20", "-D", "2", "--json", "-", "127.0.0.1"]),
        Duration::from_secs(60),
    );
    let server = finish(server, Duration::from_secs(30));
    assert!(client.status.success() && server.status.success(), "{}", err(&client));
    let line = " Duration        : 2 s, measured window 1 s (margin 0.5 s each side)";
    assert!(err(&client).contains(line), "{}", err(&client));
    let doc: serde_json::Value = serde_json::from_slice(&client.stdout).unwrap();
    assert_eq!(doc["params"]["run"]["duration"]["margin"], 0.5, "{doc}");
}

#[test]
fn compare_stops_after_three_failures_in_a_row() {
    let port = port();
    let dir = common::scratch("rdmabench-first-hour").join(format!("compare-{port}"));
    let mut serve = spawn(&["serve", "-p", &port, "--max-memory", "1M"]);
    std::thread::sleep(Duration::from_millis(300));
    let out = finish(
        spawn(&[
            "compare",
            "127.0.0.1",
            "-p",
            &port,
            "--sizes",
            "2M,4M,8M",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ]),
        Duration::from_secs(60),
    );
    let _ = serve.kill();
    let _ = serve.wait();
    let e = err(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("rdmabench: the sweep stopped: 3 points failed in a row (the last: "),
        "{e}"
    );
    assert!(e.contains("serve --max-memory") && e.contains("partial results in"), "{e}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    // The three RDMA bandwidth series fail on this side (no RDMA stack) and do not count;
    // TCP 1 stream's three sizes, each over the server's --max-memory, stop the sweep.
    let series: Vec<&str> = rows.iter().map(|r| r["series"].as_str().unwrap()).collect();
    assert_eq!(series.len(), 12, "{series:?}");
    assert_eq!(&series[9..], ["tcp_bw_1"; 3], "{series:?}");
    assert!(rows.iter().all(|r| !r["error"].is_null()), "{rows:?}");
}

#[test]
fn compare_tcp_only_measures_the_tcp_series_alone_and_passes() {
    let port = port();
    let dir = common::scratch("rdmabench-first-hour").join(format!("tcp-only-{port}"));
    let mut serve = spawn(&["serve", "-p", &port]);
    common::wait_listening(&port);
    let args = ["compare", "127.0.0.1", "-p", &port, "--sizes", "4K,64K", "--bytes", "4M"];
    let out_dir = dir.to_str().unwrap();
    let out = finish(
        spawn(&[&args[..], &["--tcp-only", "--quiet", "--out", out_dir]].concat()),
        Duration::from_secs(120),
    );
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let series: Vec<&str> = rows.iter().map(|r| r["series"].as_str().unwrap()).collect();
    // TCP 1 stream, 4 streams and latency, at two sizes each; every one measured.
    assert_eq!(series, ["tcp_bw_1", "tcp_bw_1", "tcp_bw_4", "tcp_bw_4", "tcp_lat", "tcp_lat"]);
    assert!(rows.iter().all(|r| r["error"].is_null() && !r["result"].is_null()), "{rows:?}");
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(page.contains("<h1>TCP</h1>") && !page.contains("RDMA write"), "the page is TCP's");
}

#[test]
fn a_dash_output_is_stdout_for_doctor_and_qualify() {
    let dir = common::scratch("rdmabench-first-hour").join("dash");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |args: &[&str]| {
        let out = common::rdmabench(false).args(args).current_dir(&dir).output().unwrap();
        assert!(!dir.join("-").exists(), "a file named -: {args:?}");
        out
    };
    // doctor --json -: the document alone on stdout, the checks on stderr.
    let out = run(&["doctor", "--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("stdout is not one JSON document ({e}): {}", common::text(&out))
    });
    assert_eq!(doc["kind"], "doctor", "{doc}");
    assert!(!err(&out).is_empty(), "the checks on stderr");
    let out = run(&["doctor", "--junit", "-"]);
    assert!(common::text(&out).starts_with("<?xml"), "{}", common::text(&out));
    // Two outputs cannot both be stdout.
    let out = run(&["doctor", "--json", "-", "--junit", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(err(&out), "rdmabench: --json -, --junit -: only one output can be stdout (-)\n");
    // qualify that cannot start still writes its JUnit, there on stdout.
    let out = run(&[
        "qualify",
        "quick",
        "--server",
        "127.0.0.1",
        "-p",
        "9",
        "--junit",
        "-",
        "--no-store",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    assert!(common::text(&out).contains("<testcase name=\"start\""), "{}", common::text(&out));
}

#[test]
fn a_server_with_timeout_0_waits_for_its_first_client() {
    let port = port();
    let mut server = spawn(&["tcp-lat", "-p", &port, "--timeout", "0", "-n", "50"]);
    let stdout = server.stdout.take().unwrap();
    let line = format!(" Listening on 0.0.0.0 until a client comes (--timeout 0). Waiting for a client on port {port}");
    assert!(common::wait_for_line(stdout, &line, Duration::from_secs(10)), "no listening line");
    std::thread::sleep(Duration::from_secs(2));
    let client =
        finish(spawn(&["tcp-lat", "-p", &port, "-n", "50", "127.0.0.1"]), Duration::from_secs(60));
    let server = finish(server, Duration::from_secs(30));
    assert!(client.status.success(), "{}", err(&client));
    assert!(server.status.success(), "{}", err(&server));
    // A client waits at least a second.
    let out = finish(spawn(&["tcp-lat", "--timeout", "0", "127.0.0.1"]), Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        err(&out),
        "rdmabench: --timeout 0: a client waits at least 1 second (0 is a server's: wait for ever)\n"
    );
}

#[test]
fn serve_says_busy_at_once_during_a_test_and_lets_back_to_back_clients_in() {
    let port = port();
    let serve = spawn(&["serve", "-p", &port, "--count", "4"]);
    std::thread::sleep(Duration::from_millis(300));
    let long = spawn(&["tcp-bw", "-D", "6", "-p", &port, "127.0.0.1"]);
    std::thread::sleep(Duration::from_millis(1500));
    let start = Instant::now();
    let second =
        finish(spawn(&["tcp-lat", "-n", "20", "-p", &port, "127.0.0.1"]), Duration::from_secs(30));
    let took = start.elapsed();
    assert_eq!(second.status.code(), Some(2), "{}", err(&second));
    assert!(err(&second).contains("server busy: running tcp_bw since "), "{}", err(&second));
    assert!(took < Duration::from_secs(2), "busy at once, not after waiting: {took:?}");
    assert!(finish(long, Duration::from_secs(60)).status.success());
    // Back to back, each as soon as the last ended: none is told busy.
    for _ in 0..3 {
        let c = finish(
            spawn(&["tcp-lat", "-n", "20", "-p", &port, "127.0.0.1"]),
            Duration::from_secs(30),
        );
        assert!(c.status.success(), "{}", err(&c));
    }
    let serve = finish(serve, Duration::from_secs(30));
    assert!(serve.status.success(), "4 tests served: {}", common::text(&serve));
}
