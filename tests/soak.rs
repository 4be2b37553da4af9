//! A soak's verdict per interval (issue #54): over TCP on 127.0.0.1, each `--json-lines`
//! record of the whole run's interval carries a verdict against `--min-bw`, and the run's
//! own verdict fails naming how many intervals failed; a qualify profile's stability
//! limits judge a point's spread.

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

/// A qualify profile's stability limits judge a TCP point's spread against `serve`: one
/// point's impossible CV fails it by name, the same point with loose limits passes.
#[test]
fn qualify_judges_a_points_spread() {
    let port = common::free_port();
    let dir = common::scratch("rdmabench-soak-qualify");
    let profile = dir.join(format!("spread-{port}.toml"));
    let point = |name: &str, cv: &str, low: f64| {
        format!(
            "[[test]]\nname = \"{name}\"\ntest = \"tcp_bw\"\nsizes = [\"128K\"]\nduration = 3\n\
             max_cv = \"{cv}\"\nmin_low_ratio = {low}\n\n"
        )
    };
    let text = format!(
        "repeats = 1\n\n{}{}",
        point("tight", "0.001%", 0.01),
        point("loose", "100%", 0.01)
    );
    std::fs::write(&profile, text).unwrap();
    let out_dir = dir.join(format!("out-{port}"));
    let serve = common::spawn(false, &["serve", "-p", &port]);
    common::wait_listening(&port);
    let (p, o) = (profile.display().to_string(), out_dir.display().to_string());
    let args = ["qualify", &p, "--server", "127.0.0.1", "-p", &port, "--no-store", "--out", &o];
    let out = finish(common::spawn(false, &args), Duration::from_secs(90));
    // Child::kill: no kill(1) under wine.
    let mut serve = serve;
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(out.status.code(), Some(1), "the tight point fails: {}", err(&out));
    let doc = read_json(&out_dir.join("qualify.json"), &out);
    let points = doc["points"].as_array().unwrap();
    let judged = |k: usize, threshold: &str| {
        let j = points[k]["judgements"].as_array().unwrap();
        j.iter().find(|j| j["threshold"] == threshold).cloned().unwrap_or_else(|| panic!("{doc}"))
    };
    let cv = points[0]["median"]["cv"].as_f64().unwrap();
    assert!(cv > 0.00001 && cv < 1.0, "{doc}");
    assert_eq!(judged(0, "max_cv")["pass"], false, "{doc}");
    assert_eq!(judged(0, "max_cv")["observed"], format!("{:.2}%", cv * 100.0));
    assert_eq!(judged(0, "min_low_ratio")["pass"], true, "{doc}");
    assert!(common::text(&out).contains("max_cv: "), "named in the table: {}", common::text(&out));
    assert_eq!(judged(1, "max_cv")["pass"], true, "{doc}");
    assert!(points[1]["judgements"].as_array().unwrap().iter().all(|j| j["pass"] == true), "{doc}");
}

/// A soak point: each run's intervals kept in qualify.json, judged (`intervals`), and
/// drawn in report.html as a chart of the runs over their seconds.
#[test]
fn a_qualify_soak_keeps_judges_and_draws_its_intervals() {
    let port = common::free_port();
    let dir = common::scratch("rdmabench-soak-qualify");
    let profile = dir.join(format!("soak-{port}.toml"));
    let soak = "test = \"tcp_bw\"\nsizes = [\"128K\"]\nduration = 3\nsoak = true\n";
    // The same soak with a floor no interval reaches: every interval fails it.
    let text = format!(
        "repeats = 2\n\n[[test]]\n{soak}\n[[test]]\nname = \"floored\"\n{soak}min_bw = \"1000000 GB/s\"\n"
    );
    std::fs::write(&profile, text).unwrap();
    let out_dir = dir.join(format!("soak-out-{port}"));
    // An earlier qualification's records in the same --out are not this one's.
    std::fs::create_dir_all(out_dir.join("soak")).unwrap();
    let stale = r#"{"stream":null,"end_s":1.0,"bytes_per_sec":1.0}"#;
    std::fs::write(out_dir.join("soak/tcp_bw_128K-1.jsonl"), format!("{stale}\n")).unwrap();
    let serve = common::spawn(false, &["serve", "-p", &port]);
    common::wait_listening(&port);
    let (p, o) = (profile.display().to_string(), out_dir.display().to_string());
    let args = ["qualify", &p, "--server", "127.0.0.1", "-p", &port, "--no-store", "--out", &o];
    let out = finish(common::spawn(false, &args), Duration::from_secs(90));
    // Child::kill: no kill(1) under wine.
    let mut serve = serve;
    let _ = serve.kill();
    let _ = serve.wait();
    let doc = read_json(&out_dir.join("qualify.json"), &out);
    assert_eq!(doc["points"].as_array().unwrap().len(), 2, "{doc}");
    common::assert_soak_point(&doc, &out_dir, "tcp_bw_128K", 2);
    let floored = doc["points"][1]["judgements"].as_array().unwrap();
    let soak = floored.iter().find(|j| j["threshold"] == "intervals").unwrap();
    let n = doc["points"][1]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["intervals"].as_array().unwrap().len())
        .sum::<usize>();
    assert_eq!(
        (&soak["pass"], &soak["observed"]),
        (&false.into(), &format!("{n} of {n} failed").into()),
        "{doc}"
    );
    let records = std::fs::read_to_string(out_dir.join("soak/floored_128K-1.jsonl")).unwrap();
    assert!(records.contains("is below --min-bw 953674316"), "the floor in MiB/s: {records}");
}
