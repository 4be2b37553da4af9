//! A soak's records over soft-RoCE on one host (issue #54), in the lab: each
//! `--json-lines` record of a `write-bw -D` run carries this side's port counters that
//! moved (rxe0's packets) and its link as sysfs words it, and passes. (Loss on the data
//! path needs two hosts: rxe on `lo` loops its packets back under any qdisc, so the
//! lossy soak is `hosts_a_soak_flags_the_intervals_of_loss` in lab_hosts.rs.)

use std::time::Duration;

use serde_json::Value;

mod common;
use common::{err, finish, text};

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_write_bw_soak_records_carry_the_ports_counters_and_link() {
    let port = common::free_port();
    let dir = common::scratch("rdmabench-lab-soak");
    let lines = dir.join(format!("soak-{port}.jsonl"));
    let json = dir.join(format!("soak-{port}.json"));
    let (lines_arg, json_arg) = (lines.display().to_string(), json.display().to_string());
    let server = common::spawn(true, &["write-bw", "-p", &port, "-D", "4", "--timeout", "30"]);
    let client = common::spawn(
        true,
        &[
            "write-bw",
            "127.0.0.1",
            "-p",
            &port,
            "-D",
            "4",
            "--timeout",
            "30",
            "--json-lines",
            &lines_arg,
            "--json",
            &json_arg,
        ],
    );
    let out = finish(client, Duration::from_secs(120));
    let _ = finish(server, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{} {}", text(&out), err(&out));
    let written = std::fs::read_to_string(&lines).unwrap();
    let records: Vec<Value> = written.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(records.len() >= 4, "{written}");
    for r in &records {
        assert_eq!(r["verdict"], serde_json::json!({ "pass": true, "reasons": [] }), "{r}");
        assert_eq!(r["counters"]["port"], "rxe0/1", "{r}");
        // Data went out every second: soft-RoCE counted its packets.
        assert!(r["counters"]["changes"]["hw_counters/sent_pkts"].as_u64() > Some(0), "{r}");
        let link = &r["link"];
        assert_eq!((&link["state"], &link["changed"]), (&"ACTIVE".into(), &Value::Null), "{r}");
        assert!(link["rate"].as_str().is_some_and(|r| r.contains("Gb/sec")), "{r}");
        // rxe has no PCI function.
        assert!(link["pcie"].is_null(), "{r}");
    }
    let doc = common::read_json(&json, &out);
    let judged = &doc["results"][0]["interval_verdicts"];
    let n = records.len();
    assert_eq!(judged, &serde_json::json!({ "judged": n, "failed": 0 }), "{doc}");
}
