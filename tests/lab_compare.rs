//! `serve` and `compare` with RDMA and TCP in the lab: several clients in a row
//! against one server, CPU figures from both sides of an RDMA test, and a comparison
//! that writes every file with RDMA and TCP rows for every size.
//!
//! With RDMABENCH_REPORT_DIR set (ci/test sets it), the comparison is written there so
//! the host can open report.html in Chromium after the lab boot (ci/check-report).

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{err, finish};

fn spawn(args: &[&str]) -> Child {
    common::spawn(true, args)
}

fn scratch() -> PathBuf {
    common::scratch("rdmabench-lab-compare")
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_a_served_sweep_runs_the_clients_parameters_on_both_sides() {
    // serve once lost the client's -a: its CQ moderation differed from the client's.
    let serve = spawn(&["serve", "-p", "19710", "--timeout", "20", "--count", "1"]);
    let json = scratch().join("served-a-b.json");
    let json = json.to_str().unwrap();
    let out = finish(
        spawn(&["write-bw", "-a", "-b", "-n", "5", "--json", json, "-p", "19710", "127.0.0.1"]),
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", err(&out));
    let serve = finish(serve, Duration::from_secs(30));
    assert!(String::from_utf8_lossy(&serve.stdout).contains("write_bw ok: 23 sizes"));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let (mine, theirs) = (&report["params"], &report["peer_params"]);
    // -a keeps perftest's moderation of 100, clamped to the 5-deep queue of -n 5.
    assert_eq!((mine["cq_mod"].as_u64(), mine["tx_depth"].as_u64()), (Some(5), Some(5)), "{mine}");
    assert_eq!(mine, theirs, "both sides ran with the same parameters");
    assert_eq!(report["results"].as_array().unwrap().len(), 23);
    assert_eq!(report["environment"]["peer"]["device"]["name"], "rxe0");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_serve_runs_rdma_and_tcp_clients_in_a_row() {
    // With --auth-key: the RDMA set-up follows the challenge and the proof.
    let key = scratch().join("lab.key");
    std::fs::write(&key, "a lab's shared secret, 32 bytes\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let key = key.to_str().unwrap();
    let serve =
        spawn(&["serve", "-p", "19700", "--timeout", "20", "--count", "4", "--auth-key", key]);
    let json = scratch().join("write_bw.json");
    let json = json.to_str().unwrap();
    let runs: [&[&str]; 4] = [
        &["write-bw", "-n", "500", "--json", json],
        &["send-lat", "-n", "200"],
        &["read-bw", "-q", "2", "-n", "200", "-s", "4096"],
        &["tcp-bw", "-n", "200", "-P", "2"],
    ];
    for args in runs {
        // A client without the key before each is refused, and not counted.
        let stranger = finish(
            spawn(&["write-bw", "-n", "50", "-p", "19700", "127.0.0.1"]),
            Duration::from_secs(60),
        );
        assert_eq!(stranger.status.code(), Some(2));
        assert!(err(&stranger).contains("authentication failed"), "{}", err(&stranger));
        let mut a = args.to_vec();
        a.extend(["-p", "19700", "--auth-key", key, "127.0.0.1"]);
        let out = finish(spawn(&a), Duration::from_secs(120));
        assert!(out.status.success(), "{args:?}: {}", err(&out));
    }
    let serve = finish(serve, Duration::from_secs(30));
    let log = String::from_utf8_lossy(&serve.stdout).into_owned();
    for test in ["write_bw ok", "send_lat ok", "read_bw ok", "tcp_bw ok"] {
        assert!(log.contains(test), "{test} missing from the serve log:\n{log}");
    }
    assert_eq!(log.matches("(auth)").count(), 4, "{log}");
    // The RDMA run has CPU figures from both sides: the server's came back.
    let report: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let cpu = &report["results"][0]["cpu"];
    for side in ["client", "server"] {
        let c = &cpu[side];
        let cores = c["cores"].as_f64().unwrap_or_else(|| panic!("no {side} cpu: {cpu}"));
        let busy = c["busy_percent"].as_f64().unwrap();
        assert!((0.0..=100.0 * cores + 1e-6).contains(&busy), "{side} busy {busy}");
        assert!(
            c["voluntary_switches"].as_u64().unwrap() + c["involuntary_switches"].as_u64().unwrap()
                > 0
        );
    }
    // The client polls; a write_bw server only waits on its control socket.
    let (client_p, server_p) = (
        cpu["client"]["process_percent"].as_f64().unwrap(),
        cpu["server"]["process_percent"].as_f64().unwrap(),
    );
    assert!(client_p > server_p, "polling client {client_p} % vs idle server {server_p} %");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_compare_writes_every_file_with_rdma_and_tcp_rows() {
    let dir = std::env::var_os("RDMABENCH_REPORT_DIR")
        .map_or_else(|| scratch().join("compare"), PathBuf::from);
    let _ = std::fs::remove_dir_all(&dir);
    let serve = spawn(&["serve", "-p", "19701", "--timeout", "20"]);
    let sizes = [2u64, 4096, 65536, 1 << 20];
    let out = finish(
        spawn(&[
            "compare",
            "127.0.0.1",
            "-p",
            "19701",
            "--out",
            dir.to_str().unwrap(),
            "--sizes",
            "2,4K,64K,1M",
            "-P",
            "2",
            "--bytes",
            "4M",
            "--lat-bytes",
            "512K",
        ]),
        Duration::from_secs(600),
    );
    let mut serve = serve;
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(out.status.success(), "compare failed: {}", err(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        table.contains("BW average [MiB/sec]")
            && table.contains("RDMA write")
            && table.contains("TCP 2 streams")
    );
    assert!(table.contains(&format!("report: {}", dir.join("report.html").display())), "{table}");
    for file in
        ["results.json", "results.csv", "bandwidth.svg", "latency.svg", "cpu.svg", "report.html"]
    {
        let len = std::fs::metadata(dir.join(file)).map_or(0, |m| m.len());
        assert!(len > 200, "{file}: {len} bytes");
    }
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let series: Vec<&str> =
        report["series"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(series.len(), 9);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), series.len() * sizes.len());
    for s in &series {
        for size in sizes {
            let row = rows
                .iter()
                .find(|r| r["series"] == *s && r["size"].as_u64() == Some(size))
                .unwrap_or_else(|| panic!("no row for {s} at {size} B"));
            assert!(row["error"].is_null(), "{s} {size} B failed: {}", row["error"]);
            let r = &row["result"];
            assert_eq!(r["size"].as_u64(), Some(size));
            let figure = if s.ends_with("_lat") {
                &r["lat"]["t_typical_us"]
            } else {
                &r["bw"]["avg_bytes_per_sec"]
            };
            assert!(figure.as_f64().unwrap() > 0.0, "{s} {size}: {r}");
            assert!(r["cpu"]["client"]["cores"].as_u64().unwrap() >= 1, "{s} {size}: client cpu");
            assert!(r["cpu"]["server"]["cores"].as_u64().unwrap() >= 1, "{s} {size}: server cpu");
        }
    }
    // TCP rows: the server counted every byte the client sent.
    for row in rows.iter().filter(|r| r["series"].as_str().unwrap().starts_with("tcp_bw")) {
        let r = &row["result"];
        assert_eq!(r["received_bytes"], r["bw"]["bytes"], "{row}");
    }
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), rows.len() + 1);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for id in ["chart-bandwidth", "chart-latency", "chart-cpu"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id} missing from report.html");
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_event_mode_shows_in_the_cpu_figures() {
    let serve = spawn(&["serve", "-p", "19702", "--timeout", "20", "--count", "2"]);
    let dir = scratch();
    let mut cpu = Vec::new();
    for (name, extra) in [("poll", None), ("events", Some("-e"))] {
        // A latency test: the client waits for every answer, by spinning or by sleeping.
        // (A soft-RoCE sender's completions are ready as soon as it posts: it never waits.)
        let json = dir.join(format!("send_lat-{name}.json"));
        let json = json.to_str().unwrap();
        let mut a = vec!["send-lat", "-n", "2000", "-p", "19702", "--json", json];
        a.extend(extra);
        a.push("127.0.0.1");
        let out = finish(spawn(&a), Duration::from_secs(120));
        assert!(out.status.success(), "{name}: {}", err(&out));
        let report: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        assert_eq!(report["params"]["events"], extra.is_some());
        cpu.push(report["results"][0]["cpu"]["client"].clone());
    }
    let _ = finish(serve, Duration::from_secs(30));
    let blocked = |c: &Value| c["voluntary_switches"].as_u64().unwrap();
    // Waiting on completion events makes the client block for each answer; polling
    // never does. (Soft-RoCE does the transport's work in the kernel on the process's
    // behalf, so its CPU time stays high either way; the send_bw test in lab_perf.rs
    // compares user time, where the difference is large.)
    assert!(
        blocked(&cpu[1]) > blocked(&cpu[0]),
        "voluntary switches: events {} vs poll {}\n{cpu:?}",
        blocked(&cpu[1]),
        blocked(&cpu[0])
    );
}
