//! What a user coming from perftest and iperf3 expects, over real sockets on this host
//! (no RDMA needed): `--json -` on stdout, the CPU lines only when asked, a multi-stream
//! row that sums its streams, a closed pipe that ends quietly.

use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{err, finish, text};

static NEXT_PORT: AtomicU16 = AtomicU16::new(20600);

fn port() -> String {
    NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string()
}

fn spawn(args: &[&str]) -> Child {
    common::spawn(false, args)
}

/// A `test` server and a client (the client's own `client_flags` after the common
/// ones): both outputs, each checked to have succeeded.
fn pair(test: &str, flags: &[&str], client_flags: &[&str]) -> (Output, Output) {
    let port = port();
    let mut server_args = vec![test, "-p", &port, "--timeout", "20"];
    server_args.extend(flags);
    let server = spawn(&server_args);
    let mut client_args = server_args.clone();
    client_args.extend(client_flags);
    client_args.push("127.0.0.1");
    let client = finish(spawn(&client_args), Duration::from_secs(120));
    let server = finish(server, Duration::from_secs(30));
    assert!(client.status.success(), "client failed: {}", err(&client));
    assert!(server.status.success(), "server failed: {}", err(&server));
    (client, server)
}

/// The rows of the results table: the lines after the `#bytes` header that start
/// with a number.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip_while(|l| !l.contains("#bytes"))
        .skip(1)
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn json_dash_is_the_document_alone_on_stdout_and_the_table_on_stderr() {
    let (client, _) = pair("tcp-bw", &["-n", "50", "-s", "4096"], &["--json", "-"]);
    let doc: Value = serde_json::from_slice(&client.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", text(&client)));
    assert_eq!(doc["test"], "tcp_bw");
    assert_eq!(doc["results"][0]["bw"]["bytes"].as_u64(), Some(50 * 4096), "{doc}");
    assert!(
        err(&client).contains("#bytes     #iterations"),
        "the table on stderr: {}",
        err(&client)
    );
    assert!(!std::path::Path::new("-").exists(), "no file named -");
}

#[test]
fn cpu_lines_only_with_cpu_util_and_the_json_keeps_them_always() {
    let json = std::env::temp_dir().join(format!("habits-cpu-{}.json", std::process::id()));
    let json_arg = json.display().to_string();
    let (plain, _) = pair("tcp-lat", &["-n", "50"], &["--json", &json_arg]);
    assert!(!text(&plain).contains("cpu client"), "{}", text(&plain));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cpu = &doc["results"][0]["cpu"]["client"];
    assert!(cpu["cores"].as_u64().unwrap() >= 1, "{cpu}");
    // 50 round trips take well under a second: fewer than 100 ticks of /proc/stat.
    assert_eq!(cpu["unreliable"], true, "{cpu}");
    let (asked, _) = pair("tcp-lat", &["-n", "50", "--cpu_util"], &[]);
    let line = text(&asked).lines().find(|l| l.contains("cpu client: busy")).map(String::from);
    let line = line.unwrap_or_else(|| panic!("no CPU line: {}", text(&asked)));
    assert!(line.contains("[unreliable: a "), "{line}");
    std::fs::remove_file(&json).unwrap();
}

#[test]
fn a_multi_stream_row_sums_its_streams_and_verbose_lists_them() {
    let (client, _) = pair("tcp-bw", &["-P", "3", "-n", "40", "-s", "8M"], &["--verbose"]);
    let table = text(&client);
    let row = &rows(&table)[0];
    assert_eq!(&row[..2], ["8388608", "120"], "3 streams × 40 messages: {table}");
    let streams: Vec<&str> = table.lines().filter(|l| l.starts_with("   stream ")).collect();
    assert_eq!(streams.len(), 3, "{table}");
    assert!(streams.iter().all(|l| l.contains(" 40 messages")), "{table}");
    assert!(!table.contains("   qp "), "streams are not QPs: {table}");
    let (quiet, _) = pair("tcp-bw", &["-P", "3", "-n", "40", "-s", "8M"], &[]);
    assert!(!text(&quiet).contains("   stream "), "{}", text(&quiet));
}

#[test]
fn columns_stay_under_their_names_at_every_size() {
    let (client, _) = pair("tcp-lat", &["-a", "-n", "5"], &[]);
    let table = text(&client);
    let header = table.lines().find(|l| l.contains("#bytes")).unwrap();
    let ends = |name: &str| header.find(name).unwrap() + name.len();
    let lines: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.contains("#bytes"))
        .skip(1)
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(lines.len(), 23, "2 B … 8 MiB: {table}");
    for line in lines {
        // Each number ends where its column's name does: the size, #iterations, t_avg.
        for name in ["#bytes", "#iterations", "t_avg[usec]"] {
            let end = ends(name);
            assert!(
                line.len() >= end
                    && line.as_bytes()[end - 1] != b' '
                    && line[end..].starts_with(' '),
                "{name} misaligned:\n{header}\n{line}"
            );
        }
    }
}

#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    for args in [&["completions", "bash"][..], &["completions", "zsh"], &["--help"], &["--version"]]
    {
        let mut child = common::rdmabench(false)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `| head -0`: the reader goes away before the first byte.
        drop(child.stdout.take());
        let out = finish(child, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", err(&out));
        assert_eq!(err(&out), "", "{args:?}");
    }
}

/// The keys a table of docs/json.md lists under `heading`: each backticked name of its
/// rows' first column.
fn documented(heading: &str) -> std::collections::BTreeSet<String> {
    let doc = include_str!("../docs/json.md");
    let start = doc.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("{heading}?"));
    let keys: std::collections::BTreeSet<String> = doc[start + heading.len() + 2..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .flat_map(|row| {
            let first = row.split('|').nth(1).unwrap_or("");
            first.split('`').skip(1).step_by(2).map(String::from).collect::<Vec<_>>()
        })
        .collect();
    assert!(!keys.is_empty(), "{heading}: no table");
    keys
}

fn keys(v: &Value) -> std::collections::BTreeSet<String> {
    v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect()
}

#[test]
fn a_runs_json_has_the_fields_docs_json_md_lists() {
    let (client, _) = pair("tcp-bw", &["-P", "2", "-n", "20", "-s", "64K"], &["--json", "-"]);
    let doc: Value = serde_json::from_slice(&client.stdout).unwrap();
    assert_eq!(doc["schema_version"], 2);
    assert_eq!(keys(&doc), documented("### top-level keys"), "{doc}");
    let endpoint = documented("### endpoint");
    for side in ["local", "remote"] {
        let eps = doc[side].as_array().unwrap();
        assert_eq!(eps.len(), 2, "one endpoint per stream: {doc}");
        for ep in eps {
            assert_eq!(keys(ep), endpoint, "{ep}");
            let address: std::net::SocketAddr = ep["address"].as_str().unwrap().parse().unwrap();
            assert!(address.ip().is_loopback(), "{ep}");
            assert!(ep["qpn"].is_null() && ep["rkey"].is_null(), "TCP has no QP: {ep}");
        }
    }
    let peer: std::net::SocketAddr = doc["peer_address"].as_str().unwrap().parse().unwrap();
    assert!(peer.ip().is_loopback());
    // Optional keys are left out, never undocumented.
    for (heading, value) in [
        ("### size result", &doc["results"][0]),
        ("### params — what actually ran", &doc["params"]),
    ] {
        let listed = documented(heading);
        let extra: Vec<String> = keys(value).difference(&listed).cloned().collect();
        assert!(extra.is_empty(), "{heading}: undocumented {extra:?}");
    }
}

#[test]
fn a_client_without_a_server_counts_down_and_names_it_within_its_timeout() {
    let port = port();
    let start = std::time::Instant::now();
    let out = finish(
        spawn(&["tcp-bw", "-p", &port, "--timeout", "6", "127.0.0.1"]),
        Duration::from_secs(30),
    );
    let took = start.elapsed();
    let stderr = err(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let server = format!("127.0.0.1:{port}");
    assert!(stderr.contains(&format!("no server at {server} yet")), "{stderr}");
    assert!(stderr.contains(" s left"), "a countdown: {stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(last.starts_with(&format!("rdmabench: cannot reach the server at {server}")), "{last}");
    assert!(took < Duration::from_secs(9), "--timeout 6, gave up after {took:?}");
}

#[test]
// Verbs on Linux; NetworkDirect's discovery under wine is not checked here.
#[cfg(target_os = "linux")]
fn a_one_shot_rdma_server_on_a_host_without_rdma_fails_before_it_listens() {
    let devices = std::fs::read_dir("/sys/class/infiniband").map_or(0, Iterator::count);
    assert_eq!(devices, 0, "this host test needs a host without RDMA devices");
    let port = port();
    let start = std::time::Instant::now();
    let out = finish(spawn(&["write-bw", "-p", &port, "--timeout", "20"]), Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    assert!(start.elapsed() < Duration::from_secs(10), "at start, not after --timeout 20");
    assert!(err(&out).contains("RDMA"), "{}", err(&out));
    assert!(!text(&out).contains("Waiting for a client"), "it never listened: {}", text(&out));
}

#[test]
fn a_plain_tcp_server_runs_the_clients_streams_and_duration_like_iperf3() {
    let port = port();
    let server = spawn(&["tcp-bw", "-p", &port, "--timeout", "20", "--json", "-"]);
    let start = std::time::Instant::now();
    let client = finish(
        spawn(&["tcp-bw", "-p", &port, "-P", "4", "-D", "2", "--json", "-", "127.0.0.1"]),
        Duration::from_secs(60),
    );
    let took = start.elapsed();
    let server = finish(server, Duration::from_secs(30));
    assert!(client.status.success(), "client: {}", err(&client));
    assert!(server.status.success(), "server: {}", err(&server));
    let waiting = format!(
        " Listening on 0.0.0.0 for 20 s (--timeout). Waiting for a client on port {port}\n"
    );
    assert!(err(&server).contains(&waiting), "{}", err(&server));
    assert!(took >= Duration::from_secs(2), "-D 2 ran {took:?}");
    for (side, out) in [("client", &client), ("server", &server)] {
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["params"]["tcp"]["streams"], 4, "{side}: {doc}");
        assert_eq!(doc["params"]["run"]["duration"]["secs"], 2, "{side}: {doc}");
        let per = doc["results"][0]["per_qp"].as_array().unwrap();
        assert_eq!(per.len(), 4, "{side}: a figure per stream");
        assert!(per.iter().all(|s| s["bytes"].as_u64().unwrap() > 0), "{side}: {doc}");
    }
}

#[test]
fn a_run_that_ends_in_an_error_never_says_pass_in_its_json() {
    // A one-shot TCP server follows its client's sizes, streams and duration, but not
    // another test: a latency client against a bandwidth server is a mismatch.
    let port = port();
    let server = spawn(&["tcp-bw", "-p", &port, "--timeout", "20", "-n", "50"]);
    let json = std::env::temp_dir().join(format!("habits-mismatch-{}.json", std::process::id()));
    let json_arg = json.display().to_string();
    let client = finish(
        spawn(&[
            "tcp-lat",
            "-p",
            &port,
            "--timeout",
            "20",
            "-n",
            "50",
            "--json",
            &json_arg,
            "127.0.0.1",
        ]),
        Duration::from_secs(60),
    );
    let _ = finish(server, Duration::from_secs(30));
    assert_eq!(client.status.code(), Some(2), "{}", text(&client));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["error"]["kind"], "mismatch", "{doc}");
    assert_eq!(doc["verdict"]["pass"], false, "{doc}");
    let failures = doc["verdict"]["failures"].to_string();
    assert!(failures.contains("ended in an error"), "{doc}");
    std::fs::remove_file(&json).unwrap();
}
