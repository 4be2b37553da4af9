//! A soak's verdict per interval (issue #54): over TCP on 127.0.0.1, each `--json-lines`
//! record of the whole run's interval carries a verdict against `--min-bw`, and the run's
//! own verdict fails naming how many intervals failed.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{err, finish, read_json};

/// A `tcp-bw` client's run of `flags` against a one-shot server, with `--json-lines`
/// and `--json`: its exit status, its records and its document.
fn soak(tag: &str, flags: &[&str]) -> (Option<i32>, Vec<Value>, Value) {
    let port = common::free_port();
    let dir = common::scratch("rdmabench-soak");
    let lines: PathBuf = dir.join(format!("{tag}-{port}.jsonl"));
    let json: PathBuf = dir.join(format!("{tag}-{port}.json"));
    let server = common::spawn(false, &["tcp-bw", "-p", &port, "--timeout", "20"]);
    let (lines_arg, json_arg) = (lines.display().to_string(), json.display().to_string());
    let mut args = vec!["tcp-bw", "127.0.0.1", "-p", &port, "--timeout", "20"];
    args.extend(["--json-lines", &lines_arg, "--json", &json_arg]);
    args.extend(flags);
    let out = finish(common::spawn(false, &args), Duration::from_secs(60));
    let _ = finish(server, Duration::from_secs(30));
    let written = std::fs::read_to_string(&lines).unwrap_or_default();
    let records = written
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let doc = read_json(&json, &out);
    assert!(doc["params"].is_object(), "the run ran: {}", err(&out));
    (out.status.code(), records, doc)
}

#[test]
fn every_interval_below_the_floor_fails_and_so_does_the_run() {
    let (status, records, doc) = soak("floor", &["-D", "4", "--min-bw", "1e12"]);
    assert_eq!(status, Some(1), "a failed verdict exits 1: {doc}");
    assert!(records.len() >= 4, "a record a second over 4 s and more: {records:?}");
    for r in &records {
        assert_eq!(r["verdict"]["pass"], false, "{r}");
        let reasons = r["verdict"]["reasons"].as_array().unwrap();
        assert_eq!(reasons.len(), 1, "{r}");
        let reason = reasons[0].as_str().unwrap();
        assert!(reason.contains(" MiB/sec is below --min-bw 1000000000000"), "{reason}");
        assert!(r.get("link").is_none() && r.get("counters").is_none(), "TCP: no port: {r}");
    }
    let judged = doc["results"][0]["interval_verdicts"].clone();
    let n = records.len();
    assert_eq!(judged, serde_json::json!({ "judged": n, "failed": n }), "{doc}");
    let failures = doc["verdict"]["failures"].to_string();
    let counted = format!("{n} of {n} intervals failed their verdict (--json-lines)");
    assert!(failures.contains(&counted), "{failures}");
    assert_eq!(doc["verdict"]["pass"], false);
}

#[test]
fn without_a_floor_every_interval_passes() {
    let (status, records, doc) = soak("calm", &["-D", "3"]);
    assert_eq!(status, Some(0), "{doc}");
    assert!(records.len() >= 3, "{records:?}");
    for r in &records {
        assert_eq!(r["verdict"], serde_json::json!({ "pass": true, "reasons": [] }), "{r}");
    }
    let n = records.len();
    let judged = &doc["results"][0]["interval_verdicts"];
    assert_eq!(judged, &serde_json::json!({ "judged": n, "failed": 0 }), "{doc}");
    assert_eq!(doc["verdict"]["pass"], true, "{doc}");
}

/// With several streams each stream's record is its own, unjudged; the whole run's
/// interval (`stream` null: every stream's together) carries the verdict.
#[test]
fn several_streams_are_judged_together() {
    let (status, records, doc) = soak("streams", &["-D", "3", "-P", "2", "--min-bw", "1e12"]);
    assert_eq!(status, Some(1), "{doc}");
    let (whole, streams): (Vec<&Value>, Vec<&Value>) =
        records.iter().partition(|r| r["stream"].is_null());
    assert!(whole.len() >= 3 && streams.len() >= 2 * whole.len(), "{records:?}");
    assert!(streams.iter().all(|r| r.get("verdict").is_none()), "{records:?}");
    assert!(whole.iter().all(|r| r["verdict"]["pass"] == false), "{records:?}");
    // The first whole interval is the two streams' first intervals added up.
    let first_of = |k: u64| {
        let first = streams.iter().find(|r| r["stream"] == k).expect("each stream's record");
        first["bytes"].as_u64().unwrap()
    };
    assert_eq!(whole[0]["bytes"].as_u64(), Some(first_of(1) + first_of(2)), "{records:?}");
    let n = whole.len();
    assert_eq!(doc["results"][0]["interval_verdicts"]["judged"], n, "{doc}");
}
