//! `rdmabench health` across three lab hosts (`ci/lab-vm --nodes 3`), one rank each under
//! mpirun on node 1: healthy → exit 0 and three `Healthy` lines, every host's run in the
//! store; node 3's link slowed (`ci/lab-fault --node 3 delay 50`) → node 3 alone
//! unhealthy, `NEIGHBOUR_LOW`; node 3's MTU unlike the others' → node 3 named
//! `CONFIG_UNLIKE`. (Slowed and unlike at once, in one run, failed a ring pair with
//! IBV_WC_REM_INV_REQ_ERR: three runs.)
//!
//! Short (issue #52): 2 s of 4 KiB write_bw (1 s measured; 64 KiB writes across the lab
//! switch fail IBV_WC_REM_INV_REQ_ERR, as in lab_mesh_hosts) and 20 round trips per test
//! (a loopback per host, then the ring's three pairs in three rounds); the MTU test, which
//! judges the facts alone, the least health takes (`-D 1 -n 5`: a 0.5 s window names
//! healthy loopbacks BELOW_MEDIAN there, which it does not assert against).
//! `--peer-fraction 0.2`: three TCG guests on two shared cores spread their own
//! bandwidths severalfold. `--lat-ratio 1.5 --lat-floor 15000`: their ring latencies are
//! timer ticks, 112 µs to 5.4 ms in one healthy run (ci10) and up to 12 ms under load,
//! where node 3's 50 ms delay adds 25 ms or more to a one-way figure (docs/health.md).
#![cfg(unix)]

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::nodes;
use common::{err, read_json, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(600);

fn three_nodes() {
    let nodes = nodes::addresses();
    assert!(nodes.len() >= 3, "a three-host test: run in `ci/lab-vm --nodes 3` ({nodes:?})");
}

/// `rdmabench health` under mpirun on nodes 1–3, with `more` flags (`-D`, `-n`).
fn health(json: &Path, more: &[&str]) -> Output {
    let args = ["health", "-d", "rxe0", "-s", "4K", "--timeout", "30"];
    let json = json.to_str().unwrap();
    let mut args = args.to_vec();
    args.extend(["--peer-fraction", "0.2", "--lat-ratio", "1.5", "--lat-floor", "15000"]);
    args.extend(["--json", json]);
    args.extend(more);
    nodes::mpirun_three(&args, LIMIT)
}

/// Each host's line: (host, verdict).
fn lines(o: &Output) -> Vec<(String, String)> {
    text(o)
        .lines()
        .filter_map(|l| l.split_once(" | "))
        .map(|(h, v)| (h.to_string(), v.to_string()))
        .collect()
}

fn codes(doc: &Value, host: &str) -> Vec<String> {
    let h = doc["hosts"].as_array().unwrap().iter().find(|h| h["host"] == host).unwrap();
    h["findings"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap().into()).collect()
}

/// Node 3's link and MTU back as the lab made them, whatever the test did.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let line = format!(
            "{}/ci/lab-fault clear; ip link set \"$RDMABENCH_LAB_NIC\" mtu \"$RDMABENCH_LAB_MTU\"",
            repo()
        );
        let _ = nodes::ssh(3).arg(line).status();
    }
}

fn repo() -> String {
    std::env::current_dir().unwrap().to_str().unwrap().to_string()
}

#[test]
#[ignore = "hosts: needs three lab hosts (ci/lab-vm --nodes 3)"]
fn hosts_health_of_three_healthy_nodes() {
    three_nodes();
    let dir = common::scratch("rdmabench-health-hosts");
    let (json, store) = (dir.join("healthy.json"), dir.join("results.db"));
    let o = health(&json, &["-D", "2", "-n", "20", "--store", store.to_str().unwrap()]);
    eprintln!("{}\n{}", text(&o), err(&o));
    let doc = read_json(&json, &o);
    let hosts: Vec<(String, String)> = lines(&o);
    let names: Vec<&str> = hosts.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(names, ["node1", "node2", "node3"], "{}", text(&o));
    for (h, v) in &hosts {
        assert_eq!(v, "Healthy", "{h}: {v}; ring: {}", doc["ring"]);
    }
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(doc["ring"].as_array().unwrap().len(), 3, "{}", doc["ring"]);
    println!("phases: {}", doc["hosts"][0]["phases"]);
    println!("ring: {}", doc["ring"]);
    // Rank 0 recorded every host's run: node 3's is in the store on node 1.
    let child = common::rdmabench(true)
        .args(["history", "--store", store.to_str().unwrap(), "--host", "node3", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let listed = common::finish(child, Duration::from_secs(60));
    let runs: Value =
        serde_json::from_str(&text(&listed)).unwrap_or_else(|e| panic!("{e}: {}", err(&listed)));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = (&runs[0]["kind"], &runs[0]["host"], &runs[0]["pass"]);
    assert_eq!(run, (&"health".into(), &"node3".into(), &true.into()), "{runs:?}");
}

#[test]
#[ignore = "hosts: needs three lab hosts (ci/lab-vm --nodes 3)"]
fn hosts_health_names_the_slowed_node_alone() {
    three_nodes();
    let _restore = Restore;
    nodes::on(3, &format!("{}/ci/lab-fault delay 50", repo()), Duration::from_secs(60));
    let json = common::scratch("rdmabench-health-hosts").join("slowed.json");
    let o = health(&json, &["-D", "2", "-n", "20", "--no-store"]);
    eprintln!("{}\n{}", text(&o), err(&o));
    let doc = read_json(&json, &o);
    let ring = &doc["ring"];
    assert_eq!(o.status.code(), Some(1), "{}; ring: {ring}", text(&o));
    assert_eq!(codes(&doc, "node1"), Vec::<String>::new(), "ring: {ring}");
    assert_eq!(codes(&doc, "node2"), Vec::<String>::new(), "ring: {ring}");
    let node3 = codes(&doc, "node3");
    assert!(node3.contains(&"NEIGHBOUR_LOW".to_string()), "{}; ring: {ring}", text(&o));
    println!("ring: {ring}");
}

#[test]
#[ignore = "hosts: needs three lab hosts (ci/lab-vm --nodes 3)"]
fn hosts_health_names_the_node_configured_unlike_the_others() {
    three_nodes();
    let _restore = Restore;
    // 1100 bytes: soft-RoCE's active MTU 512, where the others' 1500 give 1024.
    nodes::on(3, "ip link set \"$RDMABENCH_LAB_NIC\" mtu 1100", Duration::from_secs(60));
    let json = common::scratch("rdmabench-health-hosts").join("unlike.json");
    // The facts alone are judged here: the least loopback and ring health takes.
    let o = health(&json, &["-D", "1", "-n", "5", "--no-store"]);
    eprintln!("{}\n{}", text(&o), err(&o));
    let doc = read_json(&json, &o);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let node3 = lines(&o).into_iter().find(|(h, _)| h == "node3").unwrap().1;
    assert!(
        node3.contains("CONFIG_UNLIKE host: Soft-RoCE (rxe) active MTU 512 [1024 on 2 of 3 hosts]"),
        "{node3}"
    );
    assert!(!codes(&doc, "node1").contains(&"CONFIG_UNLIKE".to_string()), "{}", text(&o));
    assert!(!codes(&doc, "node2").contains(&"CONFIG_UNLIKE".to_string()), "{}", text(&o));
}
