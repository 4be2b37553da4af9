//! `doctor` and `qualify` in the lab: doctor's JSON over the live rxe0 (the verbs query
//! behind the MTU), a profile that passes with JUnit checked by an XML parser, a profile
//! with an impossible threshold that fails naming its point, and a baseline with ten times
//! the bandwidth that fails naming each regression.
//!
//! With RDMABENCH_REPORT_DIR set (ci/test sets it), the passing qualification's files go
//! to its sibling `qualify/`, and the host opens report.html in Chromium after the boot
//! (ci/check-report --qualify).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{err, finish, text};

const PORT: &str = "19730";

fn scratch() -> PathBuf {
    common::scratch("rdmabench-lab-qualify")
}

/// `rdmabench ARGS`, its results store under the scratch folder (never the home's).
fn rdmabench(args: &[&str]) -> Output {
    let child = common::rdmabench(true)
        .args(args)
        .env("XDG_DATA_HOME", scratch().join("data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("rdmabench starts");
    finish(child, Duration::from_secs(300))
}

/// `qualify PROFILE --server 127.0.0.1 -p PORT EXTRA…` against the test's `serve`.
fn qualify(profile: &str, extra: &[&str]) -> Output {
    let mut args = vec!["qualify", profile, "--server", "127.0.0.1", "-p", PORT];
    args.extend_from_slice(extra);
    rdmabench(&args)
}

/// The qualification's `--out`: the report directory's sibling when ci/test asks.
fn report_dir() -> PathBuf {
    match std::env::var_os("RDMABENCH_REPORT_DIR") {
        Some(d) => Path::new(&d).parent().unwrap().join("qualify"),
        None => scratch().join("pass"),
    }
}

/// A testsuite as Python's XML parser read it: name, tests, failures, and each
/// testcase's name with its failure message.
type Suite = (String, u64, u64, Vec<(String, Option<String>)>);

/// The testsuites of a JUnit file, read by Python's XML parser: (suite, tests,
/// failures, [(case, failure message)]).
fn junit(path: &Path) -> Vec<Suite> {
    let script = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
out = []
for s in root.iter("testsuite"):
    cases = [(c.get("name"), (c.find("failure").get("message") if c.find("failure") is not None else None)) for c in s.iter("testcase")]
    out.append((s.get("name"), int(s.get("tests")), int(s.get("failures")), cases))
print(json.dumps(out))
"#;
    let out =
        Command::new("python3").args(["-c", script]).arg(path).output().expect("python3 runs");
    assert!(out.status.success(), "{}: not JUnit XML: {}", path.display(), err(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn profile(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, body).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_doctor_judges_the_live_rxe0() {
    let json = scratch().join("doctor.json");
    let out = rdmabench(&["doctor", "-d", "rxe0", "--json", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let checks = v["checks"].as_array().unwrap();
    let find = |id: &str, subject: &str| {
        checks
            .iter()
            .find(|c| c["id"] == id && c["subject"] == subject)
            .unwrap_or_else(|| panic!("no {id} {subject} in {v}"))
    };
    for c in checks {
        assert!(["pass", "warn", "fail", "na"].contains(&c["status"].as_str().unwrap()), "{c}");
        assert!(c["observed"].is_string() && c["expected"].is_string() && c["fix"].is_string());
    }
    assert_eq!(find("port.state", "rxe0/1")["status"], "pass");
    // lo's MTU of 65536 gives rxe0 the largest RoCE MTU, as the verbs query says.
    let mtu = find("roce.mtu", "rxe0/1");
    assert_eq!(mtu["status"], "pass");
    assert!(mtu["observed"].as_str().unwrap().ends_with("RoCE MTU 4096"), "{mtu}");
    assert_eq!(find("roce.gid", "rxe0/1")["status"], "pass");
    assert_eq!(find("memlock", "host")["status"], "pass", "root in the lab");
    // -d keeps to rxe0: rxe1's ports are not judged.
    assert!(checks.iter().all(|c| !c["subject"].as_str().unwrap().starts_with("rxe1")));
    assert_eq!(v["environment"]["device"]["name"], "rxe0");
    assert!(text(&out).contains("doctor: "), "{}", text(&out));
}

/// For each testsuite of a JUnit file: its timestamp and hostname, its properties, and
/// each testcase's time (None when absent), read by Python's XML parser.
fn junit_environment(path: &Path) -> Value {
    let script = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
print(json.dumps([{"timestamp": s.get("timestamp"), "hostname": s.get("hostname"),
    "properties": {p.get("name"): p.get("value") for p in s.iter("property")},
    "times": [c.get("time") for c in s.iter("testcase")]} for s in root.iter("testsuite")]))
"#;
    let out =
        Command::new("python3").args(["-c", script]).arg(path).output().expect("python3 runs");
    assert!(out.status.success(), "{}: not JUnit XML: {}", path.display(), err(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A passing qualification's report.html names rxe0's model, firmware and the kernel,
/// and its junit.xml has a time on every testcase and the environment as properties.
fn what_was_tested(out_dir: &Path, report: &Value) {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let kernel = kernel.trim();
    let device = &report["environment"]["local"]["device"];
    let firmware = device["firmware"].as_str().unwrap();
    assert_eq!(device["model"], "Soft-RoCE (rxe)", "{device}");
    let page = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    for (field, value) in [("model", "Soft-RoCE (rxe)"), ("firmware", firmware), ("kernel", kernel)]
    {
        let row = format!("<tr data-field=\"{field}\"><th>{field}</th><td>{value}</td>");
        assert!(page.contains(&row), "{row} not in the page:\n{page}");
    }
    let suites = junit_environment(&out_dir.join("junit.xml"));
    for s in suites.as_array().unwrap() {
        assert!(s["timestamp"].as_str().is_some_and(|t| t.len() == 19), "{s}");
        assert!(s["hostname"].as_str().is_some_and(|h| !h.is_empty()), "{s}");
        let times = s["times"].as_array().unwrap();
        assert!(
            !times.is_empty()
                && times.iter().all(|t| t.as_str().is_some_and(|t| t.parse::<f64>().is_ok())),
            "{s}"
        );
        assert_eq!(s["properties"]["local.kernel"], kernel, "{s}");
    }
    let points = &suites[1];
    assert_eq!(points["properties"]["local.model"], "Soft-RoCE (rxe)", "{points}");
    assert_eq!(points["properties"]["local.firmware"], firmware, "{points}");
    assert_eq!(points["properties"]["server.device"], "rxe0 port 1", "{points}");
    let busy: Vec<f64> = points["times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().parse().unwrap())
        .collect();
    assert!(busy.iter().all(|&t| t > 0.0), "every point took time: {busy:?}");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_qualify_passes_fails_a_threshold_and_names_regressions() {
    let dir = scratch();
    let mut serve = common::spawn(true, &["serve", "-p", PORT, "--timeout", "20"]);
    // The lab's profile: three runs a point, and no more when the comparison is
    // inconclusive; against a baseline up to five (three against three cannot say
    // `worse`: crate::stats).
    let lab_profile = |repeats: u32, max_repeats: u32| {
        format!(
            "name = \"lab\"\nrepeats = {repeats}\nmax_repeats = {max_repeats}\ntolerance = \"20%\"\nwaive = [\"roce.mtu\"]\n\n\
             [[test]]\ntest = \"write_bw\"\nsizes = [\"64K\"]\niters = 300\nmin_bw = \"1 MiB/s\"\n\n\
             [[test]]\ntest = \"write_lat\"\nsizes = [2]\niters = 200\nmax_lat_typical = \"1 s\"\n\n\
             [[test]]\ntest = \"tcp_bw\"\nsizes = [\"64K\"]\niters = 200\nmin_bw = \"1 MiB/s\"\n"
        )
    };
    let lab = profile(&dir, "lab", &lab_profile(3, 3));
    let out_dir = report_dir();
    let json = dir.join("pass.json");
    let xml = dir.join("pass.xml");
    let store = dir.join("pass.db");
    let _ = std::fs::remove_file(&store);
    let out = qualify(
        &lab,
        &[
            "--out",
            out_dir.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--junit",
            xml.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    assert!(text(&out).contains("qualify: PASS"), "{}", text(&out));
    let suites = junit(&xml);
    assert_eq!(suites.len(), 2, "{suites:?}");
    let (ref name, tests, failures, ref cases) = suites[1];
    assert_eq!((name.as_str(), tests, failures), ("qualify.lab", 3, 0));
    let names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["write_bw 64K", "write_lat 2", "tcp_bw 64K"]);
    assert_eq!(suites[0].0, "doctor");
    assert_eq!(suites[0].2, 0, "no doctor failure: {:?}", suites[0].3);
    assert!(suites[0].1 >= 10, "every doctor check is a testcase");
    // The same verdict in --out, where report.html sits next to the data.
    assert_eq!(std::fs::read(&xml).unwrap(), std::fs::read(out_dir.join("junit.xml")).unwrap());
    assert!(out_dir.join("report.html").exists());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["verdict"]["pass"], true);
    let points = report["points"].as_array().unwrap();
    for p in points {
        assert_eq!(p["runs"].as_array().unwrap().len(), 3, "repeats = 3: {p}");
    }
    let bw = points[0]["median"]["bw_bytes_per_sec"].as_f64().unwrap();
    assert!(bw > 1048576.0, "{bw}");
    assert_eq!(report["environment"]["peer"]["device"]["name"], "rxe0");
    what_was_tested(&out_dir, &report);
    // Stored with the device its RDMA points ran on.
    let out = rdmabench(&["history", "--store", store.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let rows: Value = serde_json::from_str(&text(&out)).unwrap();
    assert_eq!(
        (rows[0]["profile"].as_str(), rows[0]["device"].as_str()),
        (Some("lab"), Some("rxe0"))
    );

    // An impossible floor: exit 1, the point named in the JUnit failure.
    let impossible = profile(
        &dir,
        "impossible",
        "repeats = 1\n[[test]]\ntest = \"write_bw\"\nsizes = [\"64K\"]\niters = 300\nmin_bw = \"100 GiB/s\"\n",
    );
    let xml2 = dir.join("impossible.xml");
    let out2 = dir.join("impossible");
    let out =
        qualify(&impossible, &["--out", out2.to_str().unwrap(), "--junit", xml2.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out), err(&out));
    let suites = junit(&xml2);
    let (_, tests, failures, cases) = &suites[1];
    assert_eq!((*tests, *failures), (1, 1));
    assert_eq!(cases[0].0, "write_bw 64K");
    let why = cases[0].1.as_deref().unwrap();
    assert!(why.starts_with("min_bw: ") && why.contains("limit 102400.00 MiB/s"), "{why}");

    // "90% link" on soft-RoCE, whose 2.5 Gb/s is nominal: n/a as doctor says, not a fail.
    let of_link = profile(
        &dir,
        "of-link",
        "repeats = 1\nwaive = [\"roce.mtu\"]\n[[test]]\ntest = \"write_bw\"\nsizes = [\"64K\"]\niters = 300\nmin_bw = \"90% link\"\n",
    );
    let json4 = dir.join("of-link.json");
    let out = qualify(
        &of_link,
        &["--out", dir.join("of-link").to_str().unwrap(), "--json", json4.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json4).unwrap()).unwrap();
    let floor = &v["points"][0]["judgements"][1];
    assert_eq!((&floor["threshold"], &floor["pass"]), (&"min_bw".into(), &true.into()), "{floor}");
    let observed = floor["observed"].as_str().unwrap();
    assert!(observed.starts_with("n/a: rxe0/1: soft device: no physical link"), "{observed}");
    assert!(text(&out).contains("min_bw n/a: rxe0/1"), "{}", text(&out));

    // A baseline with ten times this run's bandwidth: each bandwidth point has
    // regressed. (Not twice: the lab's soft-RoCE and loopback TCP change speed by up to
    // 2× between runs a few seconds apart, so a rerun could reach 80 % of a doubled
    // figure.)
    let mut baseline = report.clone();
    for p in baseline["points"].as_array_mut().unwrap() {
        for run in p["runs"].as_array_mut().unwrap() {
            // get_mut: indexing a latency run's null `bw` would make it an object.
            let bw = run.pointer_mut("/result/bw/avg_bytes_per_sec");
            if let Some(bw) = bw.filter(|b| b.is_f64()) {
                *bw = (bw.as_f64().unwrap() * 10.0).into();
            }
        }
    }
    let base = dir.join("baseline.json");
    std::fs::write(&base, serde_json::to_string(&baseline).unwrap()).unwrap();
    let json3 = dir.join("regressed.json");
    let lab_rerun = profile(&dir, "lab-rerun", &lab_profile(3, 5));
    let out = qualify(
        &lab_rerun,
        &[
            "--out",
            dir.join("regressed").to_str().unwrap(),
            "--json",
            json3.to_str().unwrap(),
            "--baseline",
            base.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out), err(&out));
    let stdout = text(&out);
    for point in ["write_bw 64K", "tcp_bw 64K"] {
        assert!(stdout.contains(&format!("{point}: BW average")), "{point} not named: {stdout}");
    }
    let regressed: Value = serde_json::from_str(&std::fs::read_to_string(&json3).unwrap()).unwrap();
    let named: Vec<&str> = regressed["verdict"]["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.as_str())
        .filter(|r| r.contains("BW average"))
        .collect();
    assert_eq!(named.len(), 2, "{named:?}");
    assert_eq!(regressed["baseline"]["file"], base.to_str().unwrap());
    // Not a qualify JSON: refused with one line, exit 2.
    let bad = dir.join("not-qualify.json");
    std::fs::write(&bad, "{\"kind\": \"compare\"}").unwrap();
    let out_bad = dir.join("bad-baseline");
    let out =
        qualify(&lab, &["--baseline", bad.to_str().unwrap(), "--out", out_bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(err(&out).contains("not a qualify JSON"), "{}", err(&out));
    serve.kill().unwrap();
    let _ = serve.wait();
}

/// lo shaped to 40 Mbit/s (netem) while it lives: the TCP points slow down, rxe0's
/// traffic does not pass the qdisc. Removed when dropped, also when the test fails.
struct Shaped;

impl Shaped {
    fn lo() -> Shaped {
        assert_eq!(
            std::env::var("RDMABENCH_LAB").as_deref(),
            Ok("1"),
            "this test changes lo: run it inside ci/lab-vm only"
        );
        let _ = Command::new("tc").args(["qdisc", "del", "dev", "lo", "root"]).output();
        let st = Command::new("tc")
            .args(["qdisc", "add", "dev", "lo", "root", "netem", "rate", "40mbit"])
            .status()
            .expect("tc runs");
        assert!(st.success(), "tc qdisc add: {st}");
        Shaped
    }
}

impl Drop for Shaped {
    fn drop(&mut self) {
        let _ = Command::new("tc").args(["qdisc", "del", "dev", "lo", "root"]).status();
    }
}

/// The verdicts of a qualify JSON's comparisons: (point, verdict).
fn verdicts(json: &Path) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let verdict = p["comparison"]["verdict"].as_str().unwrap_or("none");
            (p["id"].as_str().unwrap().to_string(), verdict.to_string())
        })
        .collect()
}

/// docs/qualify.md's firmware-upgrade walk-through, command for command, with the lab's
/// short profile (docs/qualify.md#in-the-lab): a baseline, two runs against it that find
/// no point worse, one with lo shaped to 40 Mbit/s whose TCP point is worse (exit 1),
/// all three in `history`, and `diff` of the first and last naming the TCP point.
#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_qualify_walk_through_baseline_upgrade_diff_history() {
    const WALK_PORT: &str = "19731";
    let dir = scratch().join("walk");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("results.db");
    let store = store.to_str().unwrap();
    let mut serve = common::spawn(true, &["serve", "-p", WALK_PORT, "--timeout", "20"]);
    // Under emulation on a loaded host a run's speed changes by up to 2x from the next
    // one's: the lab's tolerance is wide (40 Mbit/s is still far beyond it), and each
    // run lasts 2 s (a run of a few MB is a fraction of a second there, as noisy as the
    // guest's scheduler).
    // Five runs a side: the interval then leaves out the two farthest differences at
    // each end (one starved baseline run moves nothing). No latency point: rxe's
    // ping-pong there is ~70 us in one run and ~4 ms (a timer tick) in the next, a
    // change no tolerance would call noise. One point, TCP's, the one lo's shaping
    // moves: an RDMA point here took a third of the test's 95 s in ci/test, and what a
    // qualification does with RDMA points is lab_qualify_passes_fails_a_threshold_….
    let walk = profile(
        &dir,
        "walk",
        "name = \"walk\"\nrepeats = 5\nmax_repeats = 5\ntolerance = \"25%\"\nwaive = [\"roce.mtu\"]\n\n\
         [[test]]\ntest = \"tcp_bw\"\nsizes = [\"64K\"]\nduration = 2\n",
    );
    let run = |name: &str, baseline: Option<&str>| {
        let out_dir = dir.join(name);
        let mut args = vec!["qualify", walk.as_str(), "--server", "127.0.0.1", "-p", WALK_PORT];
        args.extend(["--store", store, "--out", out_dir.to_str().unwrap()]);
        if let Some(b) = baseline {
            args.extend(["--baseline", b]);
        }
        (rdmabench(&args), out_dir.join("qualify.json"))
    };

    // 1. The baseline, on the old firmware.
    let (out, before) = run("before", None);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    assert!(text(&out).contains(&format!("stored: run 1 in {store}")), "{}", text(&out));
    // 2. After the "upgrade": against the file, then against the stored run; nothing worse.
    let (out, again) = run("after", Some(before.to_str().unwrap()));
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    let seen = verdicts(&again);
    assert_eq!(seen.len(), 1, "{seen:?}");
    let fine = seen.iter().all(|(_, v)| v != "worse" && v != "none");
    assert!(fine, "{seen:?}\n{}{}", text(&out), err(&out));
    // 3. lo shaped to 40 Mbit/s: the TCP point is worse, the qualification fails.
    let (out, slow) = {
        let _shaped = Shaped::lo();
        run("slow", Some("1"))
    };
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out), err(&out));
    let seen = verdicts(&slow);
    assert!(seen.contains(&("tcp_bw 64K".into(), "worse".into())), "{seen:?}");
    let worse_tcp =
        text(&out).lines().any(|l| l.trim_start().starts_with("worse") && l.contains("tcp_bw 64K"));
    assert!(worse_tcp, "{}", text(&out));
    // Confirmed after the other point: five more runs, all of them still shaped.
    assert!(
        text(&out).contains("worse again with 5 more runs after every other point"),
        "{}",
        text(&out)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&slow).unwrap()).unwrap();
    let tcp = v["points"].as_array().unwrap().iter().find(|p| p["id"] == "tcp_bw 64K").unwrap();
    assert_eq!(
        (tcp["confirmation_runs"].as_u64(), tcp["runs"].as_array().map(Vec::len)),
        (Some(5), Some(10))
    );
    let page = std::fs::read_to_string(dir.join("slow").join("report.html")).unwrap();
    assert!(page.contains("<table id=\"comparison\">"), "no comparison in report.html");
    assert!(page.contains(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"trend\" data-point=\"tcp_bw 64K\""
    ));

    // 4. All three in the history.
    let out = rdmabench(&["history", "--store", store, "--profile", "walk", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    let rows: Value = serde_json::from_str(&text(&out)).unwrap();
    let ids: Vec<i64> =
        rows.as_array().unwrap().iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [1, 2, 3]);
    // A TCP-only profile tests no RDMA device (the threshold test's stored run names rxe0).
    assert!(rows[0]["device"].is_null() && rows[0]["host"].as_str().is_some_and(|h| !h.is_empty()));
    // 5. diff of the first and last names the TCP point, exit 1.
    let out = rdmabench(&["diff", "1", "3", "--store", store]);
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out), err(&out));
    assert!(text(&out).contains("tcp_bw 64K: BW average"), "{}", text(&out));
    serve.kill().unwrap();
    let _ = serve.wait();
}
