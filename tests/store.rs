//! The results store (docs/history.md): two writers at once, a writer killed mid-run,
//! a schema it does not read, a damaged file; `history` and `diff` over stored runs, and
//! a baseline of another profile. Every child runs with XDG_DATA_HOME (LOCALAPPDATA on
//! Windows) in a scratch folder: no test writes to the real home.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rdmabench::doctor::DoctorReport;
use rdmabench::environment::{DeviceEnvironment, Environment};
use rdmabench::measure::{BwStats, LatStats, MIB};
use rdmabench::qualify::report::{Point, ProfileSummary, QualifyReport, QualifyVerdict, Sides};
use rdmabench::qualify::verdict::{Median, Run};
use rdmabench::results::SizeResult;
use rdmabench::store::{NewRun, PointRow, Store};

mod common;
use common::{err, finish, text};

/// Points each run of the writer child records: enough that a kill lands inside one.
const POINTS: usize = 400;

fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch("rdmabench-store").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `rdmabench ARGS` with the data directory under `home`.
fn rdmabench(home: &Path, args: &[&str]) -> Output {
    // In the scratch folder: a qualify refused before it starts writes its JUnit into
    // the default --out (./rdmabench-qualify), which must not land in the source tree.
    let child = common::rdmabench(false)
        .args(args)
        .current_dir(home)
        .env("XDG_DATA_HOME", home)
        .env("HOME", home)
        .env("LOCALAPPDATA", home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, Duration::from_secs(120))
}

fn a_run(n: usize) -> NewRun {
    NewRun {
        kind: "test".into(),
        started: format!("2026-12-04T08:{:02}:00Z", n % 60),
        host: "writer".into(),
        profile: "write_bw".into(),
        pass: true,
        report: format!("{{\"run\": {n}}}"),
        points: (0..POINTS)
            .map(|i| PointRow {
                point: format!("write_bw {i}"),
                figure: "BW average".into(),
                unit: "MiB/s".into(),
                median: Some(i as f64),
                runs: 1,
            })
            .collect(),
        ..NewRun::default()
    }
}

/// The store's writer: `RDMABENCH_TEST_RUNS` runs (default 20) into
/// `RDMABENCH_TEST_STORE` (default a scratch file), each checked back. The tests below
/// run this test as their child process.
#[test]
fn a_writer_records_each_run_whole() {
    let runs: usize =
        std::env::var("RDMABENCH_TEST_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(20);
    let path = std::env::var_os("RDMABENCH_TEST_STORE")
        .map_or_else(|| scratch("writer").join("results.db"), PathBuf::from);
    let mut store = Store::open(&path).unwrap();
    for n in 0..runs {
        let id = store.record(&a_run(n)).unwrap();
        let (row, report) = store.run(id).unwrap();
        assert_eq!((row.points as usize, report), (POINTS, format!("{{\"run\": {n}}}")));
    }
}

/// This test binary running [`a_writer_records_each_run_whole`] alone.
fn writer(path: &Path, runs: usize) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "a_writer_records_each_run_whole", "--test-threads", "1"])
        .env("RDMABENCH_TEST_STORE", path)
        .env("RDMABENCH_TEST_RUNS", runs.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Every run in `path` has all its points, and SQLite finds the file sound.
fn whole_runs(path: &Path) -> usize {
    let db = rusqlite::Connection::open(path).unwrap();
    let ok: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    let half: i64 = db
        .query_row(
            "SELECT count(*) FROM runs r WHERE (SELECT count(*) FROM points p WHERE p.run_id = r.id) != ?1",
            [POINTS as i64],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(half, 0, "a run without all its points");
    let runs: i64 = db.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).unwrap();
    runs as usize
}

#[test]
fn two_writers_at_once_both_record_every_run() {
    let path = scratch("two").join("results.db");
    let children: Vec<_> = (0..2).map(|_| writer(&path, 15).spawn().unwrap()).collect();
    for c in children {
        let out = finish(c, Duration::from_secs(300));
        // The harness prints a failed test's panic on stdout.
        assert!(out.status.success(), "a writer failed: {}{}", text(&out), err(&out));
    }
    assert_eq!(whole_runs(&path), 30);
}

#[test]
fn a_writer_killed_mid_run_leaves_whole_runs_and_a_usable_store() {
    let path = scratch("killed").join("results.db");
    let mut child = writer(&path, 100_000).spawn().unwrap();
    // Killed once a few runs are in: most of its time is inside a run's transaction.
    let start = Instant::now();
    loop {
        assert!(child.try_wait().unwrap().is_none(), "the writer ended before it was killed");
        assert!(start.elapsed() < Duration::from_secs(120), "the writer recorded nothing");
        let runs = Store::open(&path).and_then(|s| s.list(&Default::default())).map(|r| r.len());
        if runs.unwrap_or(0) >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(37));
    child.kill().unwrap();
    child.wait().unwrap();
    let before = whole_runs(&path);
    assert!(before >= 3, "{before}");
    let mut store = Store::open(&path).unwrap();
    let id = store.record(&a_run(0)).unwrap();
    assert_eq!(whole_runs(&path), before + 1);
    assert_eq!(store.run(id).unwrap().0.points as usize, POINTS);
}

/// One line on stderr, exit 2, containing `what`.
fn refused(out: &Output, what: &str) {
    let e = err(out);
    assert_eq!(out.status.code(), Some(2), "{e}{}", text(out));
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains(what), "{e}");
}

#[test]
fn a_damaged_or_foreign_store_is_one_error_line() {
    let dir = scratch("bad");
    let corrupt = dir.join("corrupt.db");
    std::fs::write(&corrupt, vec![0x5a; 8192]).unwrap();
    let c = corrupt.to_str().unwrap();
    let out = rdmabench(&dir, &["history", "--store", c]);
    refused(&out, "not a usable SQLite database");
    assert!(err(&out).contains(c) && err(&out).contains("move it aside"), "{}", err(&out));
    // qualify finds it before it runs anything (no server is listening).
    let q = dir.join("q");
    let q = q.to_str().unwrap();
    let out =
        rdmabench(&dir, &["qualify", "quick", "--server", "127.0.0.1", "--store", c, "--out", q]);
    refused(&out, "not a usable SQLite database");
    // Nothing ran: --out holds only the JUnit that says why it could not start.
    assert!(
        !Path::new(q).join("qualify.json").exists(),
        "a point ran before the store was checked"
    );
    let junit = std::fs::read_to_string(Path::new(q).join("junit.xml")).unwrap();
    assert!(junit.contains("not a usable SQLite database"), "{junit}");

    // An SQLite file of someone else's, and one of a newer rdmabench.
    let foreign = dir.join("foreign.db");
    rusqlite::Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE runs (x);").unwrap();
    let out = rdmabench(&dir, &["history", "--store", foreign.to_str().unwrap()]);
    refused(&out, "not a results store this rdmabench made");
    let newer = dir.join("newer.db");
    let db = rusqlite::Connection::open(&newer).unwrap();
    db.execute_batch("CREATE TABLE runs (x); PRAGMA user_version = 7;").unwrap();
    drop(db);
    let out = rdmabench(&dir, &["diff", "1", "2", "--store", newer.to_str().unwrap()]);
    refused(&out, "schema version 7 is a newer rdmabench's (this one reads 1)");
}

fn environment(firmware: &str) -> Environment {
    let mut e = Environment::host();
    e.hostname = "labhost".into();
    // From JSON: fields other than these are optional.
    let device = serde_json::json!({"name": "rxe0", "model": "Soft-RoCE (rxe)",
        "firmware": firmware, "link_layer": "Ethernet", "port": 1});
    e.device = Some(serde_json::from_value::<DeviceEnvironment>(device).unwrap());
    e
}

/// A qualification of `profile`: tcp_bw at `tcp` MiB/s and write_lat at 5 µs, five
/// runs each with ±1 % between them (three against three cannot say `worse`).
fn qualification(profile: &str, firmware: &str, tcp: f64) -> QualifyReport {
    let bw = |mib: f64| Run {
        result: Some(SizeResult {
            bw: Some(BwStats { avg_bytes_per_sec: mib * MIB, ..Default::default() }),
            ..Default::default()
        }),
        error: None,
        intervals: Vec::new(),
    };
    let lat = |us: f64| Run {
        result: Some(SizeResult {
            lat: Some(LatStats { t_typical_us: us, ..Default::default() }),
            ..Default::default()
        }),
        error: None,
        intervals: Vec::new(),
    };
    let point = |id: &str, runs: Vec<Run>| Point {
        id: id.into(),
        test: id.split(' ').next().unwrap().into(),
        kind: id.split(' ').next().unwrap().into(),
        size: 2,
        median: Median::of(&runs),
        runs,
        judgements: Vec::new(),
        regressions: Vec::new(),
        seconds: 0.0,
        confirmation_runs: 0,
        comparison: None,
    };
    QualifyReport {
        schema_version: 1,
        kind: "qualify".into(),
        tool: "rdmabench test".into(),
        profile: ProfileSummary {
            name: profile.into(),
            source: "test".into(),
            repeats: 3,
            sequential: false,
            tolerance_percent: 10.0,
            waive: Vec::new(),
        },
        server: "127.0.0.1".into(),
        started: "2026-12-04T08:00:00Z".into(),
        verdict: QualifyVerdict { pass: true, ..Default::default() },
        doctor: DoctorReport {
            schema_version: 1,
            kind: "doctor".into(),
            checks: Vec::new(),
            environment: environment(firmware),
        },
        waived: Vec::new(),
        points: vec![
            point("tcp_bw 128K", [1.0, 1.01, 0.99, 1.005, 0.995].map(|f| bw(tcp * f)).to_vec()),
            point("write_lat 2", [1.0, 1.01, 0.99, 1.005, 0.995].map(|f| lat(5.0 * f)).to_vec()),
        ],
        environment: Some(Sides { local: environment(firmware), peer: None }),
        baseline: None,
        run_id: None,
        trend: Vec::new(),
    }
}

fn store_qualification(store: &mut Store, r: &QualifyReport) -> i64 {
    let device = r.doctor.environment.device.as_ref().unwrap();
    store
        .record(&NewRun {
            kind: "qualify".into(),
            started: r.started.clone(),
            host: "labhost".into(),
            device: Some(device.name.clone()),
            firmware: Some(device.firmware.clone()),
            profile: r.profile.name.clone(),
            server: Some(r.server.clone()),
            pass: true,
            report: rdmabench::report::to_json(r),
            points: Vec::new(),
        })
        .unwrap()
}

#[test]
fn history_lists_and_diff_judges_stored_runs() {
    let dir = scratch("diff");
    let path = dir.join("rdmabench").join("results.db");
    let mut store = Store::open(&path).unwrap();
    let before = store_qualification(&mut store, &qualification("lab", "2.40.7000", 1000.0));
    let same = store_qualification(&mut store, &qualification("lab", "2.42.5000", 1020.0));
    let slower = store_qualification(&mut store, &qualification("lab", "2.42.5000", 40.0));
    let other = store_qualification(&mut store, &qualification("sweep", "2.42.5000", 1000.0));
    drop(store);

    // The default store is the data directory's.
    let out = rdmabench(&dir, &["history", "--firmware", "2.42.5000", "--profile", "lab"]);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let listing = text(&out);
    let rows: Vec<&str> = listing.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{}", text(&out));
    assert!(rows[0].trim_start().starts_with(&same.to_string()), "{}", text(&out));
    let out = rdmabench(&dir, &["history", "--json", "--until", "2026-12-03"]);
    assert_eq!(text(&out).trim(), "[]");
    let out = rdmabench(&dir, &["history", "--json", "--since", "2026-12-04", "--host", "labhost"]);
    let v: serde_json::Value = serde_json::from_str(&text(&out)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 4);

    let diff = |a: i64, b: i64| rdmabench(&dir, &["diff", &a.to_string(), &b.to_string()]);
    let out = diff(before, same);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    assert!(text(&out).contains("no point worse"), "{}", text(&out));
    assert!(text(&out).contains("local firmware 2.40.7000 → 2.42.5000"), "{}", text(&out));
    let out = diff(before, slower);
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out), err(&out));
    let printed = text(&out);
    let worse: Vec<&str> =
        printed.lines().filter(|l| l.trim_start().starts_with("worse")).collect();
    assert_eq!(worse.len(), 1, "{}", text(&out));
    assert!(worse[0].contains("tcp_bw 128K") && worse[0].contains("-96.0%"), "{}", worse[0]);
    assert!(text(&out)
        .contains("tcp_bw 128K: BW average 40.00 MiB/s against the baseline's 1000.00 MiB/s"));

    let out = rdmabench(&dir, &["diff", "--json", &before.to_string(), &slower.to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    let v: serde_json::Value = serde_json::from_str(&text(&out)).unwrap();
    assert_eq!((v["kind"].as_str(), v["compared"].as_str()), (Some("diff"), Some("qualify")));
    assert_eq!(v["worse"], 1);
    let worse = v["points"].as_array().unwrap().iter().find(|p| p["id"] == "tcp_bw 128K");
    assert_eq!(worse.unwrap()["comparison"]["verdict"], "worse", "{v}");

    refused(&diff(before, other), "A is profile 'lab', B is 'sweep'");
    refused(&diff(before, 99), "no run 99 in the results store");
    // A baseline of another profile, from the store or a file, before anything runs.
    let out = rdmabench(&dir, &["qualify", "quick", "--server", "127.0.0.1", "--baseline", "1"]);
    refused(&out, "--baseline run 1 in");
    assert!(err(&out).contains("a qualification of profile 'lab', this one runs 'quick'"));
    let file = dir.join("sweep.json");
    std::fs::write(&file, rdmabench::report::to_json(&qualification("sweep", "1", 1.0))).unwrap();
    let out = rdmabench(
        &dir,
        &["qualify", "quick", "--server", "127.0.0.1", "--baseline", file.to_str().unwrap()],
    );
    refused(&out, "a qualification of profile 'sweep', this one runs 'quick'");
}

#[test]
fn a_test_run_with_store_is_recorded_with_its_sizes() {
    let dir = scratch("test-run");
    let path = dir.join("tests.db");
    let port = "19591";
    let server = common::rdmabench(false)
        .args(["tcp-bw", "-p", port, "--timeout", "20"])
        .env("XDG_DATA_HOME", &dir)
        .env("LOCALAPPDATA", &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let store = format!("--store={}", path.display());
    let client = ["tcp-bw", "-p", port, "--timeout", "20", "-a", "-n", "20", &store, "127.0.0.1"];
    // The server may still be starting: the client retries within its window.
    let out = rdmabench(&dir, &client);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    let server = finish(server, Duration::from_secs(30));
    assert!(server.status.success(), "{}", err(&server));
    let store = Store::open(&path).unwrap();
    let runs = store.list(&Default::default()).unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        (runs[0].kind.as_str(), runs[0].profile.as_str(), runs[0].pass),
        ("test", "tcp_bw", true)
    );
    let (_, report) = store.run(runs[0].id).unwrap();
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let sizes = report["results"].as_array().unwrap().len();
    assert!(sizes > 10, "-a: every size: {sizes}");
    assert_eq!(runs[0].points as usize, sizes);
    assert!(!dir.join("rdmabench").exists(), "--store=PATH: nothing in the default store");
}
