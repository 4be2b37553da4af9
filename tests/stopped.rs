//! Stopped, never lost (issue #54): a TCP test on 127.0.0.1 ended by SIGINT, SIGTERM or
//! its server's going away still prints its summary and leaves `--json` whole, with a
//! `stopped` reason and what was measured until then.
#![cfg(unix)]

use std::path::PathBuf;
use std::process::{Child, Output};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{err, finish, text};

fn scratch(name: &str) -> PathBuf {
    common::scratch("rdmabench-stopped").join(name)
}

/// A one-shot `tcp-bw` server and its client with `client_flags`, the client's
/// `--json` going to the returned path.
fn pair(tag: &str, client_flags: &[&str]) -> (Child, Child, PathBuf) {
    let port = common::free_port();
    let json = scratch(&format!("{tag}-{port}.json"));
    let server = common::spawn(false, &["tcp-bw", "-p", &port, "--timeout", "20"]);
    let mut args = vec!["tcp-bw", "127.0.0.1", "-p", &port, "--timeout", "20"];
    args.extend(client_flags);
    let json_arg = json.display().to_string();
    args.extend(["--json", &json_arg]);
    (server, common::spawn(false, &args), json)
}

fn signal(child: &Child, name: &str) {
    let sent = std::process::Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{name}");
}

fn read(path: &PathBuf, out: &Output) -> Value {
    let doc = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&doc).unwrap_or_else(|e| {
        panic!("{}: not JSON ({e}): {doc:?}; stderr {}", path.display(), err(out))
    })
}

/// Waits (30 s at most) until `--json-lines` file `path` holds `n` records: the loop has
/// run `n` seconds, whatever its set-up took.
fn wait_for_records(path: &PathBuf, n: usize) {
    let start = std::time::Instant::now();
    while std::fs::read_to_string(path).map_or(0, |t| t.lines().count()) < n {
        assert!(start.elapsed() < Duration::from_secs(30), "{n} records in {}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `-D 20` has a 5 s margin each side: 7 s into the loop, two whole 1 s intervals are
/// measured.
fn stopped_by(name: &str, status: i32, reason: &str) {
    let lines = scratch(&format!("{name}-{}.jsonl", common::free_port()));
    let (server, client, json) =
        pair(name, &["-D", "20", "--json-lines", &lines.display().to_string()]);
    wait_for_records(&lines, 7);
    signal(&client, name);
    let out = finish(client, Duration::from_secs(15));
    let server = finish(server, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(status), "stderr: {}\nstdout: {}", err(&out), text(&out));
    let stdout = text(&out);
    assert!(stdout.contains("BW average"), "the table's header: {stdout}");
    assert!(stdout.contains(&format!("stopped: {reason}")), "{stdout}");
    let doc = read(&json, &out);
    assert_eq!(doc["stopped"], reason, "{doc}");
    assert!(doc["error"].is_null(), "{doc}");
    let bw = &doc["results"][0]["bw"];
    let window = bw["window_ns"].as_u64().unwrap();
    assert!((1_500_000_000..4_000_000_000).contains(&window), "cut where it stood: {bw}");
    assert!(bw["messages"].as_u64().unwrap() > 0, "{bw}");
    assert!(bw["min_bytes_per_sec"].as_f64().unwrap() > 0.0, "a whole interval: {bw}");
    // The server saw a shorter run, not a failure.
    assert!(server.status.success(), "server: {}", err(&server));
}

#[test]
fn sigint_ends_a_duration_run_with_its_summary_and_json() {
    stopped_by("INT", 130, "interrupted");
}

#[test]
fn sigterm_ends_a_duration_run_with_its_summary_and_json() {
    stopped_by("TERM", 143, "terminated");
}

#[test]
fn sigint_ends_a_sweep_after_the_size_running() {
    // 2 B … 8 MiB, 5000 messages each: about 15 s here, the last sizes taking seconds.
    let (server, client, json) = pair("sweep", &["-a"]);
    std::thread::sleep(Duration::from_millis(3_000));
    signal(&client, "INT");
    let out = finish(client, Duration::from_secs(15));
    let server = finish(server, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "stderr: {}", err(&out));
    let doc = read(&json, &out);
    assert_eq!(doc["stopped"], "interrupted");
    let sizes = doc["results"].as_array().unwrap().len();
    assert!((2..23).contains(&sizes), "the sizes until the signal, not all 23: {sizes}");
    // Both sides said done at the next size's barrier: the server ends as a run does.
    assert!(server.status.success(), "server: {}", err(&server));
}

#[test]
fn a_server_that_goes_away_leaves_the_summary_and_json() {
    let (mut server, client, json) = pair("gone", &["-D", "20"]);
    std::thread::sleep(Duration::from_secs(3));
    server.kill().unwrap();
    let _ = server.wait();
    let out = finish(client, Duration::from_secs(40));
    assert_eq!(out.status.code(), Some(2), "stderr: {}", err(&out));
    assert!(text(&out).contains("stopped: the peer went away"), "{}", text(&out));
    let doc = read(&json, &out);
    assert_eq!(doc["stopped"], "peer_gone", "{doc}");
    assert_eq!(doc["error"]["kind"], "peer_closed", "{doc}");
    assert_eq!(doc["verdict"]["pass"], false, "{doc}");
}

/// A server gone 7 s into `-D 20` (two seconds into the window, after its 5 s margin):
/// the client keeps its window until its last completion, beside the error.
#[test]
fn a_server_gone_mid_window_leaves_the_window_measured_until_then() {
    let lines = scratch(&format!("gone-window-{}.jsonl", common::free_port()));
    let (mut server, client, json) =
        pair("gone-window", &["-D", "20", "--json-lines", &lines.display().to_string()]);
    wait_for_records(&lines, 7);
    server.kill().unwrap();
    let _ = server.wait();
    let out = finish(client, Duration::from_secs(40));
    assert_eq!(out.status.code(), Some(2), "stderr: {}", err(&out));
    let stdout = text(&out);
    assert!(stdout.contains("stopped: the peer went away"), "{stdout}");
    let doc = read(&json, &out);
    assert_eq!(doc["stopped"], "peer_gone", "{doc}");
    assert_eq!(doc["error"]["kind"], "peer_closed", "{doc}");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "the size that was running, as far as it went: {doc}");
    assert_eq!(results[0]["partial"], true, "marked as what was measured: {doc}");
    let bw = &results[0]["bw"];
    let window = bw["window_ns"].as_u64().unwrap();
    assert!((1_000_000_000..6_000_000_000).contains(&window), "cut at the last completion: {bw}");
    let (messages, bytes) = (bw["messages"].as_u64().unwrap(), bw["bytes"].as_u64().unwrap());
    assert!(messages > 0 && bytes == messages * 65_536, "{bw}");
    let avg = bw["avg_bytes_per_sec"].as_f64().unwrap();
    let expect = bytes as f64 / (window as f64 / 1e9);
    assert!((avg - expect).abs() <= expect * 0.01, "bytes over the window: {avg} vs {expect}");
    // The row is in the table, above the stopped line.
    let row = stdout.lines().find(|l| l.trim_start().starts_with("65536"));
    assert!(row.is_some(), "{stdout}");
    assert_eq!(doc["verdict"]["pass"], false, "{doc}");
}

#[test]
fn the_json_reads_unfinished_while_the_run_goes() {
    let (server, client, json) = pair("unfinished", &["-D", "3"]);
    std::thread::sleep(Duration::from_millis(1_500));
    let during = std::fs::read_to_string(&json).unwrap();
    let out = finish(client, Duration::from_secs(30));
    let _ = finish(server, Duration::from_secs(30));
    let during: Value = serde_json::from_str(&during).unwrap();
    assert_eq!(during["stopped"], "unfinished", "{during}");
    assert_eq!(during["verdict"]["pass"], false, "never read as a pass: {during}");
    assert!(out.status.success(), "{}", err(&out));
    let after = read(&json, &out);
    assert!(after["stopped"].is_null(), "{after}");
    let dir = json.parent().unwrap();
    let partial = std::fs::read_dir(dir).unwrap().flatten().any(|e| {
        e.file_name().to_string_lossy().starts_with("unfinished-")
            && e.file_name().to_string_lossy().ends_with(".partial")
    });
    assert!(!partial, "no temporary file left");
}

#[test]
fn the_servers_max_time_is_named_as_what_stopped_the_run() {
    let port = common::free_port();
    let mut serve = common::spawn(false, &["serve", "-p", &port, "--max-time", "2"]);
    let json = scratch(&format!("max-time-{port}.json"));
    let json_arg = json.display().to_string();
    // A hundred million messages declare no time: the server's limit ends them.
    let args = ["tcp-bw", "127.0.0.1", "-p", &port, "-n", "100000000", "--json", &json_arg];
    let out = finish(common::spawn(false, &args), Duration::from_secs(30));
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(out.status.code(), Some(2), "stderr: {}", err(&out));
    assert!(text(&out).contains("stopped: the server's --max-time"), "{}", text(&out));
    let doc = read(&json, &out);
    assert_eq!(doc["stopped"], "max_time", "{doc}");
    assert_eq!(doc["error"]["kind"], "refused", "{doc}");
}

/// `--json-lines`: a record per second as the run goes, each line whole JSON with its
/// RFC 3339 time; stopped by SIGINT, the lines written so far stay, the last one whole.
#[test]
fn json_lines_hold_a_whole_record_per_interval_up_to_the_stop() {
    let lines = scratch(&format!("lines-{}.jsonl", common::free_port()));
    let lines_arg = lines.display().to_string();
    std::fs::write(&lines, "an older run's line\n").unwrap();
    let (server, client, json) = pair("lines", &["-D", "20", "--json-lines", &lines_arg]);
    wait_for_records(&lines, 7);
    signal(&client, "INT");
    let out = finish(client, Duration::from_secs(15));
    let _ = finish(server, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "stderr: {}", err(&out));
    assert!(!text(&out).contains(" sec] "), "--json-lines alone prints no interval lines");
    assert_eq!(read(&json, &out)["stopped"], "interrupted");
    let written = std::fs::read_to_string(&lines).unwrap();
    assert!(written.ends_with('\n'), "the last line whole: {written:?}");
    let records: Vec<Value> = written.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Seven 1 s intervals, and the one the stop closed (or not yet the stop's).
    assert!((7..=9).contains(&records.len()), "{written}");
    for (k, r) in records.iter().enumerate() {
        let time = r["time"].as_str().unwrap();
        assert!(time.len() == 24 && time.ends_with('Z') && &time[10..11] == "T", "{time}");
        assert!(r["bytes"].as_u64().unwrap() > 0 && r["bytes_per_sec"].as_f64().unwrap() > 0.0);
        assert!(r["stream"].is_null(), "{r}");
        if k + 1 < records.len() {
            let secs = r["end_s"].as_f64().unwrap() - r["start_s"].as_f64().unwrap();
            assert!((0.9..1.2).contains(&secs), "a whole second: {r}");
        }
    }
}

#[test]
fn sigint_ends_a_latency_duration_run_with_the_samples_so_far() {
    let port = common::free_port();
    let json = scratch(&format!("lat-{port}.json"));
    let json_arg = json.display().to_string();
    let server = common::spawn(false, &["tcp-lat", "-p", &port, "--timeout", "20"]);
    let args = ["tcp-lat", "127.0.0.1", "-p", &port, "-D", "20", "--json", &json_arg];
    let client = common::spawn(false, &args);
    // Past the 5 s margin (a latency test has no --json-lines to wait on).
    std::thread::sleep(Duration::from_millis(8_500));
    signal(&client, "INT");
    let out = finish(client, Duration::from_secs(15));
    let server = finish(server, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "stderr: {}", err(&out));
    assert!(text(&out).contains("stopped: interrupted"), "{}", text(&out));
    let doc = read(&json, &out);
    assert_eq!(doc["stopped"], "interrupted");
    // The samples of the 5 s margin's end to the stop: some, and then it ended.
    assert!(doc["results"][0]["lat"]["samples"].as_u64().unwrap() > 0, "{doc}");
    assert!(server.status.success(), "server: {}", err(&server));
}

/// A one-shot server's Ctrl-C while its client measures (`tcp-bw -D 20`) ends it at
/// once with its summary, like a client's: exit 130, `stopped: interrupted` under its
/// table, `--json` whole with `stopped` and no error. Its client is told the server left.
#[test]
fn sigint_ends_a_one_shot_server_mid_run_with_its_summary() {
    let port = common::free_port();
    let (sjson, cjson) =
        (scratch(&format!("srv-{port}.json")), scratch(&format!("cli-{port}.json")));
    let lines = scratch(&format!("srv-{port}.jsonl"));
    let (s, c, l) =
        (sjson.display().to_string(), cjson.display().to_string(), lines.display().to_string());
    let server = common::spawn(false, &["tcp-bw", "-p", &port, "--timeout", "20", "--json", &s]);
    let args = ["tcp-bw", "127.0.0.1", "-p", &port, "-D", "20", "--json", &c, "--json-lines", &l];
    let client = common::spawn(false, &args);
    wait_for_records(&lines, 3);
    signal(&server, "INT");
    let start = std::time::Instant::now();
    let out = finish(server, Duration::from_secs(15));
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "at once, not at the run's end: {took:?}");
    assert_eq!(out.status.code(), Some(130), "stderr: {}\nstdout: {}", err(&out), text(&out));
    assert!(text(&out).contains("stopped: interrupted"), "{}", text(&out));
    let doc = read(&sjson, &out);
    assert_eq!(doc["stopped"], "interrupted", "{doc}");
    assert!(doc["error"].is_null(), "a stop, not a failure: {doc}");
    assert_eq!(doc["role"], "server", "{doc}");
    let client = finish(client, Duration::from_secs(30));
    assert_eq!(client.status.code(), Some(2), "stderr: {}", err(&client));
    let cdoc = read(&cjson, &client);
    assert_eq!(cdoc["stopped"], "peer_gone", "{cdoc}");
}

/// Waiting for its client, a one-shot server's Ctrl-C ends the wait: exit 130, and its
/// `--json` says `interrupted` (not `unfinished`) with no results.
#[test]
fn sigint_ends_a_one_shot_server_waiting_for_its_client() {
    let port = common::free_port();
    let json = scratch(&format!("waiting-{port}.json"));
    let j = json.display().to_string();
    let server = common::spawn(false, &["tcp-bw", "-p", &port, "--timeout", "30", "--json", &j]);
    std::thread::sleep(Duration::from_millis(700));
    signal(&server, "INT");
    let out = finish(server, Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(130), "stderr: {}\nstdout: {}", err(&out), text(&out));
    assert!(text(&out).contains("stopped: interrupted"), "{}", text(&out));
    let doc = read(&json, &out);
    assert_eq!(doc["stopped"], "interrupted", "{doc}");
    assert!(doc["error"].is_null() && doc["results"] == serde_json::json!([]), "{doc}");
}
