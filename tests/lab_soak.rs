//! A soak's records over soft-RoCE on one host (issue #54), in the lab: each
//! `--json-lines` record of a `write-bw -D` run carries this side's port counters that
//! moved (rxe0's packets) and its link as sysfs words it; an interval that fails names
//! the counters of trouble that moved, never a link that did not change. (The first lab
//! run, 2026-12-05, failed all 3 of 3 intervals without a floor, so something of
//! trouble moved every second: both sides share rxe0 and two TCG vCPUs there. Loss on
//! the data path needs two hosts: rxe on `lo` loops its packets back under any qdisc,
//! so the lossy soak is `trial_hosts_a_soak_flags_the_intervals_of_loss` in lab_hosts.rs.)

use std::time::Duration;

use serde_json::Value;

mod common;
use common::{err, finish, text};

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn trial_lab_write_bw_soak_records_carry_the_ports_counters_and_link() {
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
    let written = std::fs::read_to_string(&lines).unwrap();
    eprintln!("{written}");
    let records: Vec<Value> = written.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(records.len() >= 3, "{written}");
    let failed = records.iter().filter(|r| r["verdict"]["pass"] == false).count();
    // Exit 0 when every interval passed, 1 (the verdict) when one did not.
    let status = if failed == 0 { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(status), "{} {}", text(&out), err(&out));
    for r in &records {
        for reason in r["verdict"]["reasons"].as_array().unwrap() {
            let reason = reason.as_str().unwrap();
            assert!(reason.starts_with("error counters moved on rxe0/1: hw_counters/"), "{r}");
        }
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
    assert_eq!(judged, &serde_json::json!({ "judged": n, "failed": failed }), "{doc}");
}
