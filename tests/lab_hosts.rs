//! Two hosts on one link (`ci/lab-vm --nodes 2`, docs/lab.md#several-hosts): this test
//! binary runs on node 1, the servers on node 2 (started over the lab's ssh). Each side's
//! figures now come from its own kernel, the link has an MTU to get right, and it can be
//! cut or made lossy (`ci/lab-fault`).

mod common;

use std::time::{Duration, Instant};

use common::nodes::{self, Remote};
use common::{err, finish, spawn, text};
use serde_json::Value;

const MINUTE: Duration = Duration::from_secs(60);

/// Runs `rdmabench TEST ARGS` as a server on node 2 and as a client here against it,
/// both with `--json`; returns (client JSON, client output, server's ending).
fn pair(test: &str, port: u16, args: &[&str]) -> (Value, String, nodes::RemoteOutput) {
    let port = port.to_string();
    let mut server_args = vec![test, "-p", &port];
    server_args.extend_from_slice(args);
    let server = Remote::rdmabench(2, &format!("{test}-{port}"), &server_args, 3 * MINUTE);
    let json = common::scratch("rdmabench-hosts").join(format!("{test}-{port}.json"));
    let peer = nodes::address(2);
    let mut client_args = vec![test, "-p", &port, "--json", json.to_str().unwrap(), &peer];
    client_args.extend_from_slice(args);
    let out = finish(spawn(true, &client_args), 3 * MINUTE);
    let ending = server.wait(MINUTE);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("{test}: client JSON: {e}; stderr: {}", err(&out)));
    assert!(
        out.status.success() && ending.status == 0,
        "{test}: client {:?}: {}; server {}: {}",
        out.status,
        err(&out),
        ending.status,
        ending.stderr
    );
    (doc, text(&out), ending)
}

/// The hosts each side says it ran on, and the device's active MTU on each.
fn hosts_and_mtus(doc: &Value) -> (String, String, u64, u64) {
    let env = &doc["environment"];
    (
        env["hostname"].as_str().unwrap().into(),
        env["peer"]["hostname"].as_str().unwrap().into(),
        env["device"]["active_mtu"].as_u64().unwrap(),
        env["peer"]["device"]["active_mtu"].as_u64().unwrap(),
    )
}

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_rdma_tests_cross_the_link() {
    nodes::addresses();
    // perftest's -u and --retry_count, set on the RC queue pairs and reported.
    let bw = ["-s", "65536", "-n", "200", "-u", "16", "--retry_count", "5"];
    let lat = ["-s", "2", "-n", "300"];
    let cases: [(&str, &[&str]); 6] = [
        ("write-bw", &bw),
        ("read-bw", &bw),
        ("send-bw", &bw),
        ("write-lat", &lat),
        ("read-lat", &lat),
        ("send-lat", &lat),
    ];
    for (k, (test, args)) in cases.into_iter().enumerate() {
        let (doc, table, _) = pair(test, 18700 + k as u16, args);
        let r = &doc["results"][0];
        // Two kernels: each side names its own host; the link's MTU is 1500, so RoCE's
        // active MTU is 1024 on both ports, and the path MTU agreed is 1024.
        assert_eq!(hosts_and_mtus(&doc), ("node1".into(), "node2".into(), 1024, 1024), "{test}");
        assert_eq!(doc["params"]["mtu"], 1024, "{test}");
        assert_eq!(doc["peer_params"]["mtu"], 1024, "{test}");
        assert_eq!(doc["params"]["device"], "rxe0");
        let retries = if test.ends_with("-bw") { (16, 5) } else { (14, 7) };
        for side in ["params", "peer_params"] {
            let p = &doc[side];
            assert_eq!(
                (p["qp_timeout"].as_u64(), p["retry_count"].as_u64()),
                (Some(retries.0), Some(retries.1)),
                "{test}"
            );
        }
        if test.ends_with("-bw") {
            assert_eq!(r["bw"]["messages"].as_u64(), Some(200), "{test}: {r}");
            assert_eq!(r["bw"]["bytes"].as_u64(), Some(200 * 65536), "{test}: {r}");
            if test == "send-bw" {
                assert_eq!(r["received_bytes"].as_u64(), Some(200 * 65536), "node 2 counted it");
            }
        } else {
            assert_eq!(r["lat"]["samples"].as_u64(), Some(300), "{test}: {r}");
            let counts: u64 = r["lat"]["histogram"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b[1].as_u64().unwrap())
                .sum();
            assert_eq!(counts, 300, "{test}: the histogram holds every sample");
        }
        assert!(table.contains("remote host     : node2"), "{test}: {table}");
    }
}

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_each_side_measures_its_own_cpu() {
    nodes::addresses();
    // A write-bw client spins on its CQ; the server's process only waits on the control
    // channel while its kernel takes the writes. On one host both sides would read the
    // same machine; on two, the client's machine is busy in user space and the server's
    // is not.
    let (doc, _, _) = pair("write-bw", 18710, &["-s", "65536", "-n", "300"]);
    let cpu = &doc["results"][0]["cpu"];
    let (client, server) = (&cpu["client"], &cpu["server"]);
    assert_eq!((client["cores"].as_u64(), server["cores"].as_u64()), (Some(1), Some(1)), "{cpu}");
    let user = |c: &Value| c["user_percent"].as_f64().unwrap();
    assert!(server["process_percent"].as_f64().unwrap() < 10.0, "{cpu}");
    assert!(
        user(client) > user(server) + 20.0,
        "the client's host spins, the server's does not: {cpu}"
    );
    // TCP: both sides' figures, from hosts of one CPU each, and every byte counted there.
    let (doc, _, _) = pair("tcp-bw", 18711, &["-s", "65536", "-n", "200", "-P", "2"]);
    let r = &doc["results"][0];
    assert_eq!(r["received_bytes"].as_u64(), Some(2 * 200 * 65536), "{r}");
    assert_eq!(doc["environment"]["peer"]["hostname"], "node2");
    assert_eq!(doc["environment"]["peer"]["cpus"], 1);
    for side in ["client", "server"] {
        assert_eq!(r["cpu"][side]["cores"].as_u64(), Some(1), "{side}: {}", r["cpu"]);
        assert!(r["cpu"][side]["busy_percent"].as_f64().unwrap() > 0.0, "{side}");
    }
}

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_compare_runs_against_a_served_host() {
    let peer = nodes::address(2);
    let serve =
        Remote::rdmabench(2, "serve", &["serve", "-p", "18720", "--timeout", "30"], 10 * MINUTE);
    serve.wait_listening(18720);
    let dir = common::scratch("rdmabench-hosts").join("compare");
    let _ = std::fs::remove_dir_all(&dir);
    let out = finish(
        spawn(
            true,
            &[
                "compare",
                &peer,
                "-p",
                "18720",
                "--out",
                dir.to_str().unwrap(),
                "--sizes",
                "64K",
                "-P",
                "2",
                "--bytes",
                "2M",
                "--lat-bytes",
                "64K",
            ],
        ),
        10 * MINUTE,
    );
    serve.stop();
    let served = serve.wait(MINUTE);
    assert!(out.status.success(), "compare: {}\nserve: {}", err(&out), served.stderr);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(doc["environment"]["peer"]["hostname"], "node2");
    let rows = doc["rows"].as_array().unwrap();
    let series = doc["series"].as_array().unwrap();
    assert_eq!(rows.len(), series.len(), "one row per series (one size)");
    for row in rows {
        assert!(row["error"].is_null(), "{row}");
    }
    for transport in ["rdma", "tcp"] {
        let ids: Vec<&str> = series
            .iter()
            .filter(|s| s["transport"] == transport)
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert!(!ids.is_empty(), "no {transport} series");
    }
    // serve, on node 2, logged every test as node 1's and passed.
    let ok = served.stdout.lines().filter(|l| l.contains(" 198.18.1.1:") && l.contains(" ok: "));
    assert_eq!(ok.count(), rows.len(), "{}", served.stdout);
}

/// Sets the lab NIC's MTU on nodes 1 and 2 (1500 again when dropped) and waits until
/// soft-RoCE's ports follow.
struct Mtu;

impl Mtu {
    fn set(node1: u32, node2: u32) -> Mtu {
        for (n, mtu) in [(1, node1), (2, node2)] {
            nodes::on(n, &format!("ip link set \"$RDMABENCH_LAB_NIC\" mtu {mtu}"), MINUTE);
            let want = if mtu >= 4096 + 100 { 4096 } else { 1024 };
            let start = Instant::now();
            while rxe_active_mtu(n) != want {
                assert!(start.elapsed() < MINUTE, "node{n}: rxe0 did not follow MTU {mtu}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        Mtu
    }
}

impl Drop for Mtu {
    fn drop(&mut self) {
        for n in [1, 2] {
            let _ = nodes::ssh(n).arg("ip link set \"$RDMABENCH_LAB_NIC\" mtu 1500").status();
        }
    }
}

fn rxe_active_mtu(n: usize) -> u64 {
    let out = nodes::on(n, "ibv_devinfo -d rxe0 | grep active_mtu", MINUTE);
    // "active_mtu:		4096 (5)"
    out.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_jumbo_frames_raise_the_rdma_mtu_and_a_mismatch_takes_the_smaller() {
    nodes::addresses();
    let bw = ["-s", "65536", "-n", "200"];
    let mtu = Mtu::set(9000, 9000);
    let (jumbo, _, _) = pair("write-bw", 18730, &bw);
    assert_eq!(hosts_and_mtus(&jumbo), ("node1".into(), "node2".into(), 4096, 4096));
    assert_eq!(
        (jumbo["params"]["mtu"].as_u64(), jumbo["peer_params"]["mtu"].as_u64()),
        (Some(4096), Some(4096))
    );
    assert_eq!(jumbo["results"][0]["bw"]["bytes"].as_u64(), Some(200 * 65536));
    // Node 2 back at 1500: RoCE frames of 4096 bytes would be dropped there, so both
    // sides must agree on the smaller path MTU, and every byte still arrives.
    drop(mtu);
    let mtu = Mtu::set(9000, 1500);
    let (mixed, _, _) = pair("send-bw", 18731, &bw);
    assert_eq!(hosts_and_mtus(&mixed), ("node1".into(), "node2".into(), 4096, 1024));
    assert_eq!(
        (mixed["params"]["mtu"].as_u64(), mixed["peer_params"]["mtu"].as_u64()),
        (Some(1024), Some(1024))
    );
    assert_eq!(mixed["results"][0]["received_bytes"].as_u64(), Some(200 * 65536));
    drop(mtu);
    let rate = |d: &Value| d["results"][0]["bw"]["avg_bytes_per_sec"].as_f64().unwrap() / 1e6;
    eprintln!(
        "write-bw 64 KiB: {:.2} MB/s at MTU 9000; send-bw at 9000/1500: {:.2} MB/s",
        rate(&jumbo),
        rate(&mixed)
    );
}

/// The error lines of a stderr: those but the notes of a client that came before its
/// server listened ("no server at … yet (connection refused); retrying").
fn errors(stderr: &str) -> usize {
    let error = |l: &&str| l.starts_with("rdmabench:") && !l.contains("; retrying, ");
    stderr.lines().filter(error).count()
}

/// Puts both nodes' links back as the lab made them when dropped (a failed test too).
struct Faults;

impl Drop for Faults {
    fn drop(&mut self) {
        for n in [1, 2] {
            let _ = nodes::ssh(n).arg(format!("{}/ci/lab-fault clear", repo())).status();
        }
    }
}

fn repo() -> String {
    std::env::current_dir().unwrap().to_str().unwrap().to_string()
}

/// Waits until node `n`'s rxe0 port is ACTIVE again and ssh reaches it.
fn link_back(n: usize) {
    let start = Instant::now();
    loop {
        let ok = nodes::ssh(n)
            .arg("grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state")
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
        assert!(start.elapsed() < 2 * MINUTE, "node{n}'s link did not come back");
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// How long a cable is pulled for, and each side's `--timeout`. The side whose port
/// stays up gives up while the link is down; soft-RoCE fails this side's work
/// (`IBV_WC_LOC_QP_OP_ERR`, with its status) before the stall watch names the link (8 s
/// was too short for that on a loaded host); and the far end's client, whose guest
/// soft-RoCE keeps busy while its peer is unreachable, is overdue for its stall watch by
/// the time the link is back (at 14 s down a retried write reached the server's
/// destroyed QP first: `IBV_WC_REM_INV_REQ_ERR`).
const CUT_FOR: u64 = 20;
const CUT_TIMEOUT: u64 = 10;

/// A write-bw client here against a server on node 2, `-D 30`, with the link cut on
/// node `cut_at` 3 s after the client's set-up (for [`CUT_FOR`]); returns (client's
/// JSON, its stderr, the server's). (A cut 8 s after the start for 20 s took 44–48 s a
/// test in ci10; a cut 5 s after the start came during the set-up on a loaded host.)
fn cut_mid_run(port: u16, cut_at: usize) -> (Value, String, Value, String, Duration) {
    let timeout = CUT_TIMEOUT.to_string();
    let args = ["-s", "65536", "-D", "30", "--timeout", timeout.as_str()];
    let p = port.to_string();
    let server_json = format!("/tmp/rdmabench-hosts-cut-{port}.json");
    let mut server_args = vec!["write-bw", "-p", &p, "--json", &server_json];
    server_args.extend_from_slice(&args);
    let server = Remote::rdmabench(2, &format!("cut-{port}"), &server_args, 3 * MINUTE);
    let json = common::scratch("rdmabench-hosts").join(format!("cut-{port}.json"));
    let peer = nodes::address(2);
    let mut client_args = vec!["write-bw", "-p", &p, "--json", json.to_str().unwrap(), &peer];
    client_args.extend_from_slice(&args);
    let _faults = Faults;
    let mut client = spawn(true, &client_args);
    let header = client.stdout.take().unwrap();
    let set_up = common::wait_for_line(header, " remote address", 2 * MINUTE);
    assert!(set_up, "the client never set up");
    std::thread::sleep(Duration::from_secs(3));
    // Detached, a second later: the ssh session that asks for it is cut too.
    let fault = format!(
        "setsid bash -c 'sleep 1; {}/ci/lab-fault down {CUT_FOR}' < /dev/null > /dev/null 2>&1 &",
        repo()
    );
    nodes::on(cut_at, &fault, MINUTE);
    let cut = Instant::now() + Duration::from_secs(1);
    let out = finish(client, 3 * MINUTE);
    let noticed = Instant::now().saturating_duration_since(cut);
    link_back(cut_at);
    link_back(3 - cut_at);
    let ending = server.wait(2 * MINUTE);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let server_doc: Value = serde_json::from_str(&server.read(&server_json)).unwrap();
    assert_eq!(out.status.code(), Some(2), "client: {}", err(&out));
    assert_eq!(ending.status, 2, "server: {}", ending.stderr);
    (doc, err(&out), server_doc, ending.stderr, noticed)
}

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_a_cable_pulled_at_the_far_end_is_named_by_both_sides() {
    nodes::addresses();
    let (client, client_err, server, server_err, noticed) = cut_mid_run(18740, 2);
    // The client's writes go unanswered. A NIC's RC retries would run out
    // (IBV_WC_RETRY_EXC_ERR, a completion error); soft-RoCE in Linux 6.1 retries a few
    // times and then stalls, and while the peer is unreachable it keeps its single vCPU
    // busy in the kernel (docs/lab.md#link-faults): the client's stall watch names the
    // silence once the guest runs it again, when the link is back (CUT_FOR), by which
    // time the server has given up and closed the control connection.
    let kind = client["error"]["kind"].as_str().unwrap();
    assert!(kind == "peer_silent" || kind == "peer_closed", "{client_err}");
    assert!(
        client_err.contains(&format!("no progress for {CUT_TIMEOUT} s waiting for completions"))
            && errors(&client_err) == 1,
        "{client_err}"
    );
    eprintln!("far-end cut: the client stopped {noticed:?} after it; {client_err}");
    let limit = Duration::from_secs(CUT_FOR + CUT_TIMEOUT + 10);
    assert!(noticed < limit, "noticed after {noticed:?}");
    // The server, whose own port went down, names that: still down, or (when its
    // --timeout ended after the cut, as in the CI run of 50f9372) up again, its
    // `link_downed` counter moved.
    assert_eq!(server["error"]["kind"], "link_down", "{server_err}");
    assert!(
        server_err.contains("rxe0 port 1 is DOWN")
            || server_err.contains("rxe0 port 1 went down once during the run (link_downed +1)"),
        "{server_err}"
    );
}

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_a_cable_pulled_here_is_named_here_and_silence_there() {
    nodes::addresses();
    let (client, client_err, server, server_err, _) = cut_mid_run(18741, 1);
    // soft-RoCE fails work it cannot transmit at once (IBV_WC_LOC_QP_OP_ERR); the cause
    // named is this side's port, with the status kept.
    assert_eq!(client["error"]["kind"], "link_down", "{client_err}");
    assert!(client["error"]["status"].is_string(), "{}", client["error"]);
    let named = client_err.contains("rxe0 port 1 is DOWN")
        || client_err.contains("rxe0 port 1 went down once during the run (link_downed +1)");
    assert!(named && errors(&client_err) == 1, "{client_err}");
    // The server's port stayed up: for it the client went silent.
    assert_eq!(server["error"]["kind"], "peer_silent", "{server_err}");
    // Both kept the sizes they had: none completed (-D), and the run's parameters.
    assert!(client["params"].is_object() && server["params"].is_object());
}

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_one_percent_loss_costs_retransmissions_but_every_byte_arrives() {
    nodes::addresses();
    let send = ["-s", "65536", "-n", "300"];
    let (clean, _, _) = pair("send-bw", 18751, &send);
    let _faults = Faults;
    // soft-RoCE's counters: the requester's retries, the responder's requests that came
    // out of sequence or twice.
    let responder =
        || nodes::counter(2, "out_of_seq_request") + nodes::counter(2, "duplicate_request");
    let retries_before = nodes::counter(1, "completer_retry_err");
    let out_of_order_before = responder();
    for n in [1, 2] {
        nodes::on(n, &format!("{}/ci/lab-fault loss 1", repo()), MINUTE);
    }
    let (doc, _, _) = pair("send-bw", 18750, &send);
    let r = &doc["results"][0];
    assert_eq!(r["received_bytes"].as_u64(), Some(300 * 65536), "every byte, in order: {r}");
    assert_eq!(r["bw"]["messages"].as_u64(), Some(300));
    // The loss was real: node 2 saw gaps in the sequence, node 1 resent.
    let retries = nodes::counter(1, "completer_retry_err") - retries_before;
    let out_of_order = responder() - out_of_order_before;
    assert!(retries > 0 && out_of_order > 0, "retries {retries}, out-of-sequence {out_of_order}");
    // And it cost bandwidth: the same run without loss, just before, moved faster (the
    // lab measured 2-3 times faster; only the direction is asserted).
    let rate = |d: &Value| d["results"][0]["bw"]["avg_bytes_per_sec"].as_f64().unwrap() / 1e6;
    eprintln!(
        "send-bw 64 KiB: {:.2} MB/s clean, {:.2} MB/s at 1% loss ({retries} retries, {out_of_order} out of sequence)",
        rate(&clean),
        rate(&doc)
    );
    assert!(rate(&doc) < rate(&clean), "1% loss did not slow RC down");
}

/// The records of `--json-lines` file `path` so far (a line being written is skipped).
fn records(path: &std::path::Path) -> Vec<Value> {
    let written = std::fs::read_to_string(path).unwrap_or_default();
    written.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Waits (two minutes at most) until `path` holds `n` records; returns how many it holds.
fn wait_for_records(path: &std::path::Path, n: usize) -> usize {
    let start = Instant::now();
    loop {
        let have = records(path).len();
        if have >= n {
            return have;
        }
        assert!(start.elapsed() < 2 * MINUTE, "{n} records in {}", path.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A soak with loss in its middle (issue #54): a `write-bw -D 30` client here, 2 % of
/// its frames dropped for four of its intervals. The records before the loss pass, those
/// of the loss fail naming the counters of a fault that moved on this side's port (the
/// sequence NAKs node 2 sent back: `rcvd_seq_err`), those from two intervals after it
/// pass, and the run fails counting them. The clean intervals pass whatever soft-RoCE's
/// ACK timer did (`completer_retry_err`, a retry now and then at no loss). The fault is
/// set here, not over ssh: the client's busy polling leaves this 1-vCPU guest's ssh
/// seconds behind.
#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_a_soak_flags_the_intervals_of_loss() {
    nodes::addresses();
    // 22 one-second records: 6 calm, 4 or more lossy, 4 or more calm again, and room for
    // ci/lab-fault's own seconds (-D 30 took 38 s in ci10).
    let (port, args) = ("18760", ["-s", "65536", "-D", "22", "--timeout", "20"]);
    let mut server_args = vec!["write-bw", "-p", port];
    server_args.extend_from_slice(&args);
    let server = Remote::rdmabench(2, "soak", &server_args, 3 * MINUTE);
    let dir = common::scratch("rdmabench-hosts");
    let (lines, json) = (dir.join("soak.jsonl"), dir.join("soak.json"));
    let peer = nodes::address(2);
    let (l, j) = (lines.to_str().unwrap(), json.to_str().unwrap());
    let mut client_args = vec!["write-bw", "-p", port, "--json-lines", l, "--json", j, &peer];
    client_args.extend_from_slice(&args);
    let _faults = Faults;
    let fault = |action: &[&str]| {
        let done = std::process::Command::new(format!("{}/ci/lab-fault", repo()))
            .args(action)
            .status()
            .unwrap();
        assert!(done.success(), "ci/lab-fault {action:?}");
        records(&lines).len()
    };
    let client = spawn(true, &client_args);
    let calm = wait_for_records(&lines, 6);
    let lossy = fault(&["loss", "2"]);
    wait_for_records(&lines, lossy + 4);
    let cleared = fault(&["clear"]);
    let out = finish(client, 3 * MINUTE);
    let ending = server.wait(MINUTE);
    let all = records(&lines);
    let passed = |r: &Value| r["verdict"]["pass"] == true;
    for (k, r) in all.iter().enumerate() {
        eprintln!("{k}: {} {}", r["verdict"], r["counters"]["changes"]);
    }
    eprintln!("records: {calm} before the loss, {lossy} as it began, {cleared} as it ended");
    assert_eq!(out.status.code(), Some(1), "a failed verdict: {}", err(&out));
    assert_eq!(ending.status, 0, "server: {}", ending.stderr);
    assert!(all.len() >= cleared + 4, "calm intervals after the loss: {}", all.len());
    assert!(all[..calm].iter().all(passed), "before the loss");
    let failed: Vec<&Value> = all[calm..=cleared].iter().filter(|r| !passed(r)).collect();
    assert!(!failed.is_empty(), "an interval of the loss fails");
    for r in &failed {
        let reasons = r["verdict"]["reasons"].to_string();
        assert!(reasons.contains("error counters moved on rxe0/1: hw_counters/"), "{reasons}");
    }
    assert!(all[cleared + 2..].iter().all(passed), "after the loss");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let failed = all.iter().filter(|r| !passed(r)).count();
    let counted = format!("{failed} of {} intervals failed their verdict", all.len());
    assert!(doc["verdict"]["failures"].to_string().contains(&counted), "{counted}: {doc}");
}

/// Counts the IPv4 TOS bytes of the RoCE v2 packets (UDP port 4791) through this
/// host's interfaces/// from "ready" on stdout until stdin closes, then prints `{"TOS": count, …}`.
const TOS_SNIFFER: &str = r#"
import json, os, select, socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: fewer drops
print("ready", flush=True)
counts = {}
while True:
    ready, _, _ = select.select([s, 0], [], [])
    if 0 in ready and not os.read(0, 1):
        break
    if s in ready:
        pkt = s.recv(65536)
        ip = pkt[14:]
        if pkt[12:14] != b"\x08\x00" or len(ip) < 28 or ip[9] != 17:
            continue
        ihl = (ip[0] & 15) * 4
        if int.from_bytes(ip[ihl + 2:ihl + 4], "big") == 4791:
            counts[str(ip[1])] = counts.get(str(ip[1]), 0) + 1
print(json.dumps(counts))
"#;

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_traffic_class_marks_every_roce_packet_on_the_wire() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    nodes::addresses();
    let mut sniffer = Command::new("python3")
        .args(["-c", TOS_SNIFFER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs in the lab");
    let mut lines = std::io::BufReader::new(sniffer.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let (doc, _, _) = pair("write-bw", 18790, &["-n", "100", "--tclass", "96"]);
    drop(sniffer.stdin.take());
    let counts: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let _ = sniffer.wait();
    assert_eq!(doc["params"]["path"]["traffic_class"], 96);
    assert_eq!(doc["peer_params"]["path"]["traffic_class"], 96);
    // Every RoCE v2 packet seen, node 1's data and node 2's acknowledgements, carries
    // traffic class 96 as its IP TOS (DSCP 24). 100 × 64 KiB at a 1024 B MTU are 6400
    // data packets; a capture socket read by Python under emulation drops some, so
    // at least one per message.
    let tos = counts.as_object().unwrap();
    assert!(tos.get("96").and_then(Value::as_u64).is_some_and(|n| n >= 100), "{counts}");
    assert_eq!(tos.len(), 1, "packets with another TOS: {counts}");
}
