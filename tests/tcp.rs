//! TCP tests and `serve`, over real sockets on this host (no RDMA needed): server and
//! client as two processes, asserting the bytes moved, the CPU figures on both sides,
//! and that `serve` outlives clients that misbehave.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

static NEXT_PORT: AtomicU16 = AtomicU16::new(19600);

fn port() -> String {
    NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string()
}

mod common;
use common::{err, finish, frame};

fn bin() -> Command {
    common::rdmabench(false)
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("rdmabench-tcp").join(name)
}

fn spawn(args: &[String]) -> Child {
    common::spawn(false, args)
}

/// Runs `test` server and client with the same flags; both write JSON.
fn pair(test: &str, flags: &[&str]) -> (Value, Value, String) {
    let port = port();
    let (sj, cj) =
        (scratch(&format!("{test}-{port}-s.json")), scratch(&format!("{test}-{port}-c.json")));
    let mut common: Vec<String> =
        vec![test.into(), "-p".into(), port, "--timeout".into(), "20".into()];
    common.extend(flags.iter().map(|s| s.to_string()));
    let mut s_args = common.clone();
    s_args.extend(["--json".into(), sj.display().to_string()]);
    let server = spawn(&s_args);
    let mut c_args = common;
    c_args.extend(["--json".into(), cj.display().to_string(), "127.0.0.1".into()]);
    let client = finish(spawn(&c_args), Duration::from_secs(120));
    let server = finish(server, Duration::from_secs(30));
    assert!(client.status.success(), "client failed: {}", err(&client));
    assert!(server.status.success(), "server failed: {}", err(&server));
    let read = |p: &PathBuf| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let (c, s): (Value, Value) = (read(&cj), read(&sj));
    for (side, env) in [("client", &c["environment"]), ("peer", &c["environment"]["peer"])] {
        assert!(env["device"].is_null(), "a TCP test has no RDMA device: {env}");
        if cfg!(windows) {
            // Under wine (ci/wine/run): no interface or kernel to name (docs/networkdirect.md#wine).
            assert_eq!(env["os"], "Windows", "{side}: {env}");
            let version = env["kernel"].as_str().unwrap();
            assert!(version.starts_with("10.0.") && version.contains(" under wine "), "{version}");
            // The adapter list and the registry, as on Windows.
            assert!(env["interface"]["name"].is_string(), "{side}: {env}");
            assert_ne!(env["cpu_model"], "unknown", "{side}: {env}");
            continue;
        }
        // Over 127.0.0.1 the data streams leave through `lo`.
        assert_eq!(env["interface"]["name"], "lo", "{side}: {env}");
        assert!(env["interface"]["mtu"].as_u64().unwrap() >= 1280, "{side}: {env}");
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(env["kernel"], kernel.trim(), "{side}: {env}");
    }
    assert_eq!(s["environment"]["peer"]["hostname"], c["environment"]["hostname"]);
    (c, s, String::from_utf8_lossy(&client.stdout).into_owned())
}

/// CPU figures of one side are there and plausible.
fn check_cpu(side: &Value, who: &str) {
    let cores = side["cores"].as_f64().unwrap_or_else(|| panic!("{who}: no cpu figures: {side}"));
    assert!(cores >= 1.0, "{who}: {side}");
    for key in ["busy_percent", "user_percent", "system_percent", "softirq_percent"] {
        let v = side[key].as_f64().unwrap();
        assert!((0.0..=100.0 * cores + 1e-6).contains(&v), "{who}: {key} {v} of {cores} cores");
    }
    let p = side["process_percent"].as_f64().unwrap();
    assert!(p > 0.0 && p <= 100.0 * cores * 1.05 + 5.0, "{who}: process {p} %");
    // Each platform's own counters: the Windows build (under wine in ci/test) must
    // not read the Linux host's /proc.
    let (resident, peak) =
        (side["resident_bytes"].as_u64().unwrap(), side["peak_resident_bytes"].as_u64().unwrap());
    assert!(resident > 1 << 20 && peak >= resident, "{who}: {side}");
    if cfg!(windows) {
        assert_eq!(side["source"], "windows", "{who}: {side}");
        // Windows counts context switches per thread, not per process.
        assert!(side["voluntary_switches"].is_null(), "{who}: {side}");
        assert!(side["cpu_mhz"].as_f64().unwrap() > 0.0, "{who}: the registry's ~MHz");
    } else {
        assert_eq!(side["source"], "linux", "{who}: {side}");
        let switches = side["voluntary_switches"].as_u64().unwrap()
            + side["involuntary_switches"].as_u64().unwrap();
        assert!(switches > 0, "{who}: no context switch counted: {side}");
    }
    assert!(side["window_s"].as_f64().unwrap() > 0.0);
}

fn tcp_bw_moves_what_it_reports(streams: u32) {
    // 100 MiB in all: long enough for the server's process CPU time to tick (wine's
    // moves in steps of a scheduler tick; a 25 MiB run once read 0 %).
    let n = 1600 / u64::from(streams);
    let size = 65536u64;
    let p = streams.to_string();
    let (client, server, text) = pair("tcp-bw", &["-n", &n.to_string(), "-P", &p, "--cpu_util"]);
    let r = &client["results"][0];
    let bytes = n * size * u64::from(streams);
    assert_eq!(r["bw"]["bytes"].as_u64(), Some(bytes), "{r}");
    assert_eq!(r["received_bytes"].as_u64(), Some(bytes), "the server counted what arrived");
    assert_eq!(r["iterations"].as_u64(), Some(n));
    assert!(r["bw"]["avg_bytes_per_sec"].as_f64().unwrap() > 0.0);
    if streams > 1 {
        let per: Vec<u64> =
            r["per_qp"].as_array().unwrap().iter().map(|q| q["bytes"].as_u64().unwrap()).collect();
        assert_eq!(per, vec![n * size; streams as usize]);
    }
    check_cpu(&r["cpu"]["client"], "client");
    check_cpu(&r["cpu"]["server"], "server");
    assert!(r["cpu"]["client"]["cpu_s_per_gb"].as_f64().unwrap() > 0.0);
    // Both sides report the same numbers.
    assert_eq!(server["results"], client["results"]);
    assert_eq!(client["params"]["tcp"]["streams"].as_u64(), Some(u64::from(streams)));
    assert_eq!(client["test"], "tcp_bw");
    assert!(text.contains("TCP BW Test") && text.contains("cpu server: busy"), "{text}");
    assert!(text.contains(" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]"));
}

#[test]
fn tcp_bw_one_stream() {
    tcp_bw_moves_what_it_reports(1);
}

#[test]
fn tcp_bw_four_streams() {
    tcp_bw_moves_what_it_reports(4);
}

#[test]
fn tcp_lat_counts_every_round_trip() {
    let (client, _, text) = pair("tcp-lat", &["-n", "500", "-s", "64"]);
    let r = &client["results"][0];
    let lat = &r["lat"];
    assert_eq!(lat["samples"].as_u64(), Some(500));
    let (min, typ, max) = (
        lat["t_min_us"].as_f64().unwrap(),
        lat["t_typical_us"].as_f64().unwrap(),
        lat["t_max_us"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= typ && typ <= max, "{lat}");
    check_cpu(&r["cpu"]["client"], "client");
    check_cpu(&r["cpu"]["server"], "server");
    assert!(r["cpu"]["client"]["cpu_us_per_message"].as_f64().unwrap() > 0.0);
    assert_eq!(client["params"]["latency_is"], "one-way (half round trip)");
    assert!(text.contains("t_typical[usec]"));
}

#[test]
fn tcp_duration_run_measures_its_window() {
    let (client, _, text) = pair("tcp-bw", &["-D", "3", "-f", "1", "-P", "2"]);
    let bw = &client["results"][0]["bw"];
    let window = bw["window_ns"].as_u64().unwrap();
    assert!((900_000_000..=1_100_000_000).contains(&window), "window {window} ns");
    assert!(bw["min_bytes_per_sec"].as_f64().unwrap() <= bw["avg_bytes_per_sec"].as_f64().unwrap());
    // Everything sent arrived (the window counts only part of it).
    let received = client["results"][0]["received_bytes"].as_u64().unwrap();
    assert!(received >= bw["bytes"].as_u64().unwrap(), "{received} < window bytes");
    assert!(text.contains("measured window 1 s"), "{text}");
}

#[test]
fn a_duration_run_and_a_latency_run_say_how_steady_they_were() {
    // -D 3, margin 1 s: a 1 s window of ten 100 ms intervals; the margin is ten more.
    let (client, server, text) = pair("tcp-bw", &["-D", "3", "-f", "1", "-P", "2"]);
    let st = &client["results"][0]["stability"];
    assert_eq!(st["samples"], 10, "{st}");
    assert_eq!(st["interval_ns"], 100_000_000, "{st}");
    assert_eq!((&st["unit"], &st["warm_up_dropped"]), (&"bytes_per_sec".into(), &10.into()));
    let f = |k: &str| st[k].as_f64().unwrap_or_else(|| panic!("{k}: {st}"));
    assert!(f("lowest") <= f("median") && f("median") <= f("highest"), "{st}");
    assert!((f("spike") - f("highest") / f("median")).abs() < 1e-9 && f("cv") >= 0.0, "{st}");
    assert!(st["p99"].is_null(), "{st}");
    // The server prints the client's figures, as every other.
    assert_eq!(server["results"][0]["stability"], *st);
    let line = text.lines().find(|l| l.starts_with("   stability: CV ")).expect("the line");
    assert!(line.contains("10 intervals of 100.000 ms") && line.contains("10 warm-up"), "{line}");

    let (client, _, text) = pair("tcp-lat", &["-n", "1000", "-s", "64"]);
    let (st, lat) = (&client["results"][0]["stability"], &client["results"][0]["lat"]);
    assert_eq!((&st["samples"], &st["unit"]), (&1000.into(), &"us".into()), "{st}");
    assert_eq!(
        (&st["lowest"], &st["median"], &st["highest"]),
        (&lat["t_min_us"], &lat["t_typical_us"], &lat["t_max_us"])
    );
    assert_eq!((&st["p99"], &st["p99_9"]), (&lat["p99_us"], &lat["p99_9_us"]));
    assert!(st["warm_up_dropped"].is_null(), "{st}");
    assert!(text.contains("1000 iterations") && text.contains(", p99.9 "), "{text}");
}

/// The bytes of each `--interval` line (`[  0.00-  1.00 sec]  BYTES bytes ...`).
fn interval_bytes(text: &str) -> Vec<u64> {
    let bytes = |l: &str| l.split_whitespace().skip_while(|w| *w != "sec]").nth(1)?.parse().ok();
    text.lines().filter(|l| l.contains(" sec] ")).filter_map(bytes).collect()
}

#[test]
fn tcp_bw_interval_lines_add_up_to_what_arrived() {
    // iperf3's -i: a line a second as the run goes, every message in one of them.
    let (client, _, text) = pair("tcp-bw", &["-D", "3", "-i", "1"]);
    let lines = interval_bytes(&text);
    assert!(lines.len() >= 2 && lines.iter().all(|&b| b > 0), "{lines:?} in {text}");
    let sum: u64 = lines.iter().sum();
    let received = client["results"][0]["received_bytes"].as_u64().unwrap();
    assert!(
        sum <= received && sum as f64 >= received as f64 * 0.99,
        "{sum} bytes in the lines, {received} arrived"
    );
}

#[test]
fn tcp_sweep_runs_every_size_over_one_connection() {
    let (client, _, _) = pair("tcp-lat", &["-a", "-n", "20"]);
    let sizes: Vec<u64> =
        client["results"].as_array().unwrap().iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, (1..24).map(|i| 1u64 << i).collect::<Vec<_>>());
}

#[test]
fn bad_tcp_flags_are_one_line_and_exit_2() {
    for (args, want) in [
        (vec!["tcp-lat", "-P", "2"], "-P: tcp_lat is one ping-pong stream"),
        (vec!["tcp-bw", "-w", "1"], "-w 1: a socket buffer between 4 KiB and 1 GiB"),
        (vec!["tcp-bw", "--cpus", "3-1"], "--cpus '3-1'"),
        (vec!["tcp-bw", "-D", "2", "-n", "10"], "-D and -n exclude each other"),
    ] {
        let out = bin().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let e = err(&out);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

#[test]
fn pinned_streams_and_socket_buffers_are_reported() {
    let (client, _, text) =
        pair("tcp-bw", &["-n", "100", "-P", "2", "--cpus", "0", "-w", "256K", "-N"]);
    let tcp = &client["params"]["tcp"];
    assert_eq!(tcp["pinned_cpus"], serde_json::json!([0]));
    assert!(tcp["socket_buffer"].as_u64().unwrap() >= 256 * 1024, "{tcp}");
    assert_eq!(tcp["nodelay"], true);
    assert!(text.contains("Pinned to CPUs  : 0") && text.contains("TCP_NODELAY     : ON"));
}

#[test]
fn serve_outlives_garbage_disconnects_and_unknown_tests() {
    let port = port();
    let serve = spawn(&[
        "serve".into(),
        "-p".into(),
        port.clone(),
        "--timeout".into(),
        "5".into(),
        // Counted: the tests that ran (1, 4, 5, 6, 7), not the refused connections.
        "--count".into(),
        "5".into(),
    ]);
    let client = |args: &[&str]| {
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        a.extend(["-p".into(), port.clone(), "127.0.0.1".into()]);
        finish(spawn(&a), Duration::from_secs(60))
    };
    // 1: a good client.
    let first = client(&["tcp-bw", "-n", "200"]);
    assert!(first.status.success(), "{}", err(&first));
    // A bare connect and close (compare's reachability check): neither logged nor counted.
    drop(TcpStream::connect(format!("127.0.0.1:{port}")).unwrap());
    // 2: garbage instead of a hello.
    let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.read_to_end(&mut answer);
    assert!(String::from_utf8_lossy(&answer).contains("does not speak rdmabench"), "{answer:?}");
    // 3: a test this version does not know.
    let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    s.write_all(&frame(
        r#"{"type":"hello","tool":"x","spec":{"kind":{"verb":"teleport","measure":"bw"}}}"#,
    ))
    .unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(
        String::from_utf8_lossy(&answer).contains("malformed hello"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // 4: a client killed in the middle of a long test.
    let mut long = spawn(&[
        "tcp-bw".into(),
        "-D".into(),
        "20".into(),
        "-p".into(),
        port.clone(),
        "127.0.0.1".into(),
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    long.kill().unwrap();
    let _ = long.wait();
    // 5: a hello, then silence and a close before the data streams. Under wine a killed
    // process's sockets can close seconds late, so the server may still be busy with
    // 4 until its timeout: then it says so, and the hello is sent again.
    let start = Instant::now();
    loop {
        let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        s.write_all(&frame(r#"{"type":"hello","tool":"x","spec":{"kind":{"verb":"send","measure":"bw"},"sizes":[65536],"run":{"iterations":100},"validate":false,"link":{"transport":"tcp","streams":1,"window":null,"nodelay":false}}}"#)).unwrap();
        // The server answers a hello at once: with its data endpoint, or busy.
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut answer = [0u8; 4096];
        let n = s.read(&mut answer).unwrap_or(0);
        if !String::from_utf8_lossy(&answer[..n]).contains("server busy") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the server stayed busy with 4");
        std::thread::sleep(Duration::from_millis(200));
    }
    // 6 and 7: good clients after all that.
    let lat = client(&["tcp-lat", "-n", "100"]);
    assert!(lat.status.success(), "{}", err(&lat));
    let bw = client(&["tcp-bw", "-n", "100", "-P", "2"]);
    assert!(bw.status.success(), "{}", err(&bw));
    let serve = finish(serve, Duration::from_secs(30));
    // Two of the five tests failed: serve says so in its status.
    assert_eq!(serve.status.code(), Some(2), "serve: {}", err(&serve));
    assert!(err(&serve).contains("5 tests served, not all passed"), "{}", err(&serve));
    let log = String::from_utf8_lossy(&serve.stdout).into_owned();
    // (Less the busy refusals of 5's retries, if any.)
    let lines: Vec<&str> = log.lines().filter(|l| !l.contains("refused: server busy")).collect();
    assert_eq!(lines.len(), 8, "one line per client after the banner:\n{log}");
    assert!(lines[0].contains(&format!("serving on 0.0.0.0:{port}")));
    assert!(lines[1].contains("tcp_bw ok: 65536 B x 200"), "{log}");
    assert!(lines[2].contains("refused: control channel: the peer does not speak"), "{log}");
    // Refusals name the client that was refused.
    assert!(lines[2].contains(" 127.0.0.1:") && lines[3].contains(" 127.0.0.1:"), "{log}");
    assert!(lines[3].contains("refused: control channel: malformed hello"), "{log}");
    // Killed mid-message or between messages: the control or the data connection closes.
    assert!(lines[4].contains("tcp_bw FAILED: ") && lines[4].contains("closed the"), "{log}");
    // Depending on timing the server notices while accepting streams, or when it sends.
    assert!(
        lines[5].contains("FAILED: the client stopped before its TCP data streams connected")
            || lines[5].contains("FAILED: the peer closed the control connection"),
        "{log}"
    );
    assert!(lines[6].contains("tcp_lat ok") && lines[7].contains("tcp_bw ok"), "{log}");
}

#[test]
fn a_served_tcp_lat_sweep_sizes_the_servers_receives_from_the_clients_spec() {
    // serve once sized its receive depth from the default -n, not the client's -n 15:
    // the client then waited for answers the server never sent.
    let port = port();
    let serve = spawn(&["serve".into(), "-p".into(), port.clone(), "--count".into(), "1".into()]);
    let json = scratch(&format!("served-lat-{port}.json"));
    let client = finish(
        spawn(&[
            "tcp-lat".into(),
            "-a".into(),
            "-n".into(),
            "15".into(),
            "--timeout".into(),
            "10".into(),
            "--json".into(),
            json.display().to_string(),
            "-p".into(),
            port,
            "127.0.0.1".into(),
        ]),
        Duration::from_secs(120),
    );
    assert!(client.status.success(), "{}", err(&client));
    let serve = finish(serve, Duration::from_secs(30));
    assert!(serve.status.success());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 23);
    assert!(results.iter().all(|r| r["lat"]["samples"] == 15), "every size, every sample");
    assert_eq!(v["params"]["rx_depth"], v["peer_params"]["rx_depth"]);
}

#[test]
fn a_failed_run_writes_its_error_and_never_leaves_an_old_pass() {
    let json = scratch("stale.json");
    std::fs::write(&json, r#"{"verdict": {"pass": true}}"#).unwrap();
    let out = bin()
        .args([
            "tcp-bw",
            "-p",
            "9",
            "--timeout",
            "1",
            "--json",
            json.to_str().unwrap(),
            "127.0.0.1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["error"]["kind"], "peer_unreachable", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("cannot reach the server"));
    assert_eq!(v["results"].as_array().unwrap().len(), 0);
    assert!(v["environment"]["hostname"].is_string(), "the host is known even then: {v}");
    // An output path that cannot be written is refused before anything runs.
    let out =
        bin().args(["tcp-bw", "--json", "/nonexistent-dir/x.json", "127.0.0.1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(err(&out).contains("--json /nonexistent-dir/x.json"), "{}", err(&out));
}

#[test]
fn compare_stops_at_once_when_the_server_dies_mid_sweep_and_keeps_the_partial_report() {
    let port = port();
    let dir = scratch(&format!("compare-dies-{port}"));
    let mut serve = spawn(&["serve".into(), "-p".into(), port.clone()]);
    let compare = spawn(&[
        "compare".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port,
        "-P".into(),
        "2".into(),
        "--sizes".into(),
        "64K,1M,8M".into(),
        "--bytes".into(),
        "4G".into(),
        "--out".into(),
        dir.display().to_string(),
    ]);
    // No RDMA on this host: the RDMA points fail on this side at once (no RDMA stack),
    // never reaching serve, and the sweep goes on to TCP, whose points move up to
    // gigabytes. Once serve has logged the first TCP point (64K), the next is under way:
    // kill it then.
    let mut log = std::io::BufReader::new(serve.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(std::io::BufRead::read_line(&mut log, &mut line).unwrap() > 0, "serve ended");
        if line.contains("tcp") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    serve.kill().unwrap();
    let _ = serve.wait();
    let start = std::time::Instant::now();
    let out = finish(compare, Duration::from_secs(60));
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    let e = err(&out);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("the sweep stopped: ") && e.contains("partial results in"), "{e}");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() < 27, "stopped at once: {} of 27 points", rows.len());
    let kind = |r: &Value| r["error"]["kind"].as_str().unwrap_or("").to_string();
    assert!(matches!(kind(rows.last().unwrap()).as_str(), "peer_closed" | "peer_unreachable"));
    // Points that failed on their own did not stop the sweep.
    let own: Vec<String> = rows[..rows.len() - 1].iter().map(kind).collect();
    assert!(own.iter().filter(|k| *k == "no_device").count() >= 9, "{own:?}");
    assert!(dir.join("report.html").exists() && dir.join("results.csv").exists());
}

#[test]
fn compare_against_no_server_fails_at_once_with_one_line() {
    let dir = common::scratch("rdmabench-tcp").join("no-server");
    let start = std::time::Instant::now();
    let out = bin()
        .args(["compare", "127.0.0.1", "-p", "9", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = err(&out);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("cannot reach `rdmabench serve` at 127.0.0.1:9"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
}
