//! A soak over soft-RoCE with packet loss in its middle (issue #54), in the lab: the
//! `--json-lines` records before the loss pass, those during it fail naming the rxe
//! counters of trouble that moved, those well after pass again, and the run's verdict
//! fails naming how many intervals failed.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{err, finish, text};

const TC: &str = "/usr/sbin/tc";

/// The loss, removed when dropped (a failing test too leaves `lo` whole).
struct Loss;

impl Loss {
    fn new(percent: u32) -> Loss {
        let loss = format!("{percent}%");
        let st = Command::new(TC)
            .args(["qdisc", "add", "dev", "lo", "root", "netem", "loss", &loss])
            .status()
            .expect("tc runs");
        assert!(st.success(), "tc netem loss {loss}: {st}");
        Loss
    }
}

impl Drop for Loss {
    fn drop(&mut self) {
        let _ = Command::new(TC).args(["qdisc", "del", "dev", "lo", "root"]).status();
    }
}

fn records(path: &PathBuf) -> Vec<Value> {
    let written = std::fs::read_to_string(path).unwrap_or_default();
    written.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Waits (60 s at most: TCG's pace varies) until `path` holds `n` records; returns how
/// many it holds.
fn wait_for_records(path: &PathBuf, n: usize) -> usize {
    let start = Instant::now();
    loop {
        let have = records(path).len();
        if have >= n {
            return have;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{n} records in {}", path.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn passed(r: &Value) -> bool {
    r["verdict"]["pass"] == true
}

#[test]
#[ignore = "lab: needs an RDMA device and changes lo (ci/lab-vm)"]
fn lab_write_bw_soak_flags_the_intervals_of_packet_loss() {
    assert_eq!(
        std::env::var("RDMABENCH_LAB").as_deref(),
        Ok("1"),
        "this test changes lo: run it inside ci/lab-vm only"
    );
    let port = common::free_port();
    let dir = common::scratch("rdmabench-lab-soak");
    let (lines, json) =
        (dir.join(format!("soak-{port}.jsonl")), dir.join(format!("soak-{port}.json")));
    let (lines_arg, json_arg) = (lines.display().to_string(), json.display().to_string());
    let server = common::spawn(true, &["write-bw", "-p", &port, "-D", "24", "--timeout", "30"]);
    let client_args = [
        "write-bw",
        "127.0.0.1",
        "-p",
        &port,
        "-D",
        "24",
        "--timeout",
        "30",
        "--json-lines",
        &lines_arg,
        "--json",
        &json_arg,
    ];
    let client = common::spawn(true, &client_args);
    // Four calm seconds, four lossy ones, then calm to the end.
    let before = wait_for_records(&lines, 4);
    let during = {
        let _loss = Loss::new(10);
        let started = Instant::now();
        let n = wait_for_records(&lines, before + 4);
        eprintln!("loss for {:?}", started.elapsed());
        n
    };
    let out = finish(client, Duration::from_secs(120));
    let _ = finish(server, Duration::from_secs(30));
    let all = records(&lines);
    for (k, r) in all.iter().enumerate() {
        eprintln!("{k}: {} {}", r["verdict"], r["counters"]["changes"]);
    }
    assert_eq!(out.status.code(), Some(1), "a failed verdict: {} {}", text(&out), err(&out));
    assert!(all.len() >= during + 4, "calm intervals after the loss: {}", all.len());
    // Every record carries this side's port: its counters and its link, unchanged.
    for r in &all {
        assert_eq!(r["counters"]["port"], "rxe0/1", "{r}");
        assert_eq!((&r["link"]["state"], &r["link"]["changed"]), (&"ACTIVE".into(), &Value::Null));
    }
    // Written before the loss: they pass.
    assert!(all[..before].iter().all(passed), "before the loss");
    // During it (and the interval it ended in): at least one fails, naming rxe's counters.
    let lossy: Vec<&Value> = all[before..=during].iter().filter(|r| !passed(r)).collect();
    assert!(!lossy.is_empty(), "an interval of the loss fails");
    for r in &lossy {
        let reasons = r["verdict"]["reasons"].to_string();
        assert!(reasons.contains("error counters moved on rxe0/1: hw_counters/"), "{reasons}");
    }
    // Two intervals after it ended, calm again to the end.
    assert!(all[during + 2..].iter().all(passed), "after the loss");
    let doc = common::read_json(&json, &out);
    let failed = lossy.len() + all[during + 1..during + 2].iter().filter(|r| !passed(r)).count();
    let counted = format!("{failed} of {} intervals failed their verdict", all.len());
    assert!(doc["verdict"]["failures"].to_string().contains(&counted), "{counted}: {doc}");
}
