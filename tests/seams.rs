//! The rest of what a new user met in the first hour (issue #59, items 6, 9 and 10),
//! host-only over TCP on 127.0.0.1: stored test runs shown again and compared, the clock
//! a test names, `-` as stdout, `rails --store`.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

mod common;
use common::{err, finish, text};

fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch("rdmabench-seams").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `rdmabench ARGS` in `dir`, its data directory there too (nothing in the real home).
fn run_in(dir: &Path, args: &[&str]) -> Output {
    let child = common::rdmabench(false)
        .args(args)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir)
        .env("HOME", dir)
        .env("LOCALAPPDATA", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, Duration::from_secs(120))
}

/// One `tcp-lat` run over 127.0.0.1 (a one-shot server, then the client with `extra`).
fn tcp_lat(dir: &Path, extra: &[&str]) -> Output {
    let port = common::free_port();
    let server = common::spawn(false, &["tcp-lat", "-p", &port, "--timeout", "20"]);
    common::wait_listening(&port);
    let mut args = vec!["tcp-lat", "-p", &port, "--timeout", "20", "127.0.0.1"];
    args.extend_from_slice(extra);
    let out = run_in(dir, &args);
    let server = finish(server, Duration::from_secs(30));
    assert!(server.status.success(), "server: {}", err(&server));
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    out
}

#[test]
fn diff_compares_stored_test_runs_and_history_shows_one_again() {
    let dir = scratch("diff");
    let store = "--store=runs.db";
    tcp_lat(&dir, &["-n", "200", "-s", "8", store, "--json", "a.json"]);
    let printed = tcp_lat(&dir, &["-n", "300", "-s", "8", store]);

    // By id, as history lists them: what differs, and each figure's change.
    let out = run_in(&dir, &["diff", "1", "2", "--store", "runs.db"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    let shown = text(&out);
    assert!(shown.contains("test tcp_lat"), "{shown}");
    assert!(shown.contains("run.iterations 200 → 300"), "{shown}");
    let typical = shown.lines().find(|l| l.contains("t_typical")).expect(&shown);
    assert!(typical.trim_start().starts_with("8 "), "{typical}");
    assert!(typical.contains(" % (") && typical.contains("×)"), "{typical}");

    // A file against an id, as JSON: the figures' ratio is B's over A's.
    let out = run_in(&dir, &["diff", "a.json", "2", "--store", "runs.db", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let v: serde_json::Value = serde_json::from_str(&text(&out)).unwrap();
    assert_eq!((v["kind"].as_str(), v["compared"].as_str()), (Some("diff"), Some("test")));
    assert_eq!(v["a"], "a.json");
    let typical = v["sizes"].as_array().unwrap().iter().find(|f| f["figure"] == "t_typical");
    let typical = typical.expect("t_typical compared");
    let (was, now) = (typical["was"].as_f64().unwrap(), typical["now"].as_f64().unwrap());
    assert!((typical["ratio"].as_f64().unwrap() - now / was).abs() < 1e-9, "{typical}");
    assert!(v["parameters"].as_array().unwrap().iter().any(|p| p["field"] == "run.iterations"));

    // One run again: the table it printed; --json: its document.
    let out = run_in(&dir, &["history", "--store", "runs.db", "--show", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let row = |t: &str| t.lines().find(|l| l.trim_start().starts_with("8 ")).map(str::to_string);
    assert_eq!(row(&text(&out)), row(&text(&printed)), "{}", text(&out));
    let out = run_in(&dir, &["history", "--store", "runs.db", "--show", "2", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&text(&out)).unwrap();
    assert_eq!((doc["kind"].as_str(), doc["test"].as_str()), (Some("perf"), Some("tcp_lat")));
    assert_eq!(doc["params"]["run"]["iterations"], 300);

    // Refusals: one line, exit 2.
    let one_line = |out: &Output, what: &str| {
        assert_eq!(out.status.code(), Some(2), "{}", err(out));
        assert!(err(out).contains(what) && err(out).lines().count() == 1, "{}", err(out));
    };
    std::fs::write(dir.join("devices.json"), r#"{"kind":"devices"}"#).unwrap();
    one_line(
        &run_in(&dir, &["diff", "devices.json", "1", "--store", "runs.db"]),
        "a 'devices' document",
    );
    one_line(
        &run_in(&dir, &["diff", "1", "9", "--store", "runs.db"]),
        "no run 9 in the results store",
    );
    one_line(&run_in(&dir, &["history", "--store", "runs.db", "--show", "9"]), "no run 9");
}

#[test]
fn a_hostile_stored_test_run_is_shown_inert() {
    let dir = scratch("hostile");
    let path = dir.join("runs.db");
    let mut store = rdmabench::store::Store::open(&path).unwrap();
    let report = r#"{"schema_version":2,"kind":"perf","test":"tcp_lat\u001b[2J","role":"client",
        "tool":"x\u202e","environment":null,"params":null,"results":[],
        "verdict":{"pass":false,"failures":["bad\nline\u001b]0;title\u0007"]},"error":null}"#;
    let run = rdmabench::store::NewRun {
        kind: "test".into(),
        started: "2026-12-05T00:00:00Z".into(),
        host: "h".into(),
        profile: "tcp_lat".into(),
        report: report.into(),
        ..Default::default()
    };
    store.record(&run).unwrap();
    store.record(&run).unwrap();
    drop(store);
    for args in [
        &["history", "--store", "runs.db", "--show", "1"][..],
        &["history", "--store", "runs.db", "--show", "1", "--json"],
        &["diff", "1", "2", "--store", "runs.db"],
    ] {
        let out = run_in(&dir, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", err(&out));
        let shown = text(&out);
        assert!(!shown.contains(['\u{1b}', '\u{7}', '\u{202e}']), "{args:?}: {shown:?}");
        assert!(!shown.contains("bad\nline"), "{args:?}: {shown:?}");
    }
}

#[test]
fn a_test_names_the_clock_that_timed_its_samples() {
    let dir = scratch("clock");
    let out = tcp_lat(&dir, &["-n", "100", "--json", "run.json"]);
    let doc = common::read_json(&dir.join("run.json"), &out);
    let clock = &doc["clock"];
    let source = clock["source"].as_str().unwrap_or_else(|| panic!("no clock: {doc}"));
    assert!(
        ["tsc", "clock_gettime(CLOCK_MONOTONIC)", "QueryPerformanceCounter"].contains(&source),
        "{clock}"
    );
    let read_ns = clock["read_ns"].as_f64().unwrap();
    assert!((0.0..1e6).contains(&read_ns), "{clock}");
    assert!(clock["system_call"].is_boolean(), "{clock}");
    // The header says the same.
    let line = text(&out).lines().find(|l| l.starts_with(" Clock ")).map(str::to_string);
    let line = line.unwrap_or_else(|| panic!("no Clock line: {}", text(&out)));
    assert!(line.contains(&format!("{source}, {read_ns:.0} ns a read")), "{line}");
    let warned = text(&out).lines().any(|l| l.starts_with(" WARNING         :"));
    assert_eq!(warned, !clock["warning"].is_null(), "{}", text(&out));
}

#[test]
fn a_folder_option_refuses_dash_rather_than_make_a_folder_named_dash() {
    let dir = scratch("folders");
    for args in [
        &["compare", "127.0.0.1", "--out", "-"][..],
        &["qualify", "quick", "--server", "127.0.0.1", "--out", "-"],
        &["doctor", "--capture", "-"],
        &["manpages", "-"],
    ] {
        let out = run_in(&dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", err(&out));
        assert!(err(&out).contains("a folder of files, not stdout"), "{args:?}: {}", err(&out));
        assert!(!dir.join("-").exists(), "{args:?} made a folder named -");
    }
}
