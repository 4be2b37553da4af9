//! `health` on one lab guest: rxe0 and rxe1 at once are healthy (exit 0, one `HOST |
//! Healthy` line, each port's loopback figures in the JSON), and rxe1 with its netdev
//! (rdv0) set down is named `PORT_DOWN` (exit 1), its loopback skipped, and recorded in
//! the default results store (here under a scratch `XDG_DATA_HOME`).
#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::{err, finish, read_json, text};

/// `rdmabench health ARGS` with short loopbacks (2 s of write_bw, 200 round trips), its
/// default store under `data` (`XDG_DATA_HOME`: never the lab's home, the host's over 9p).
fn health(data: &Path, args: &[&str]) -> Output {
    let child = common::rdmabench(true)
        .env("XDG_DATA_HOME", data)
        .arg("health")
        .args(["-D", "2", "-n", "200"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("rdmabench starts");
    finish(child, Duration::from_secs(180))
}

/// The host's verdict lines: `HOST | …`.
fn verdicts(o: &Output) -> Vec<String> {
    text(o).lines().filter(|l| l.contains(" | ")).map(String::from).collect()
}

#[test]
#[ignore = "needs the soft-RoCE lab (ci/lab-vm)"]
fn lab_health_is_healthy_on_rxe0_and_rxe1_at_once() {
    let dir = common::scratch("rdmabench-lab-health");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (json, store, prom) = (dir.join("health.json"), path("results.db"), path("health.prom"));
    let (junit, csv, list) = (path("junit.xml"), path("health.csv"), path("unhealthy"));
    let o = health(
        &dir,
        &[
            "-d",
            "rxe0",
            "-d",
            "rxe1",
            "-p",
            "19760",
            "--json",
            json.to_str().unwrap(),
            "--store",
            &store,
            "--prometheus",
            &prom,
            "--junit",
            &junit,
            "--csv",
            &csv,
            "--hostlist",
            &list,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "stdout: {}\nstderr: {}", text(&o), err(&o));
    let lines = verdicts(&o);
    assert_eq!(lines.len(), 1, "{}", text(&o));
    assert!(lines[0].ends_with(" | Healthy"), "{}", lines[0]);
    let doc = read_json(&json, &o);
    assert_eq!(doc["kind"], "health");
    let host = &doc["hosts"][0];
    assert_eq!(host["healthy"], true);
    assert_eq!(host["findings"].as_array().unwrap().len(), 0);
    let ports = host["ports"].as_array().unwrap();
    let subjects: Vec<&str> = ports.iter().map(|p| p["subject"].as_str().unwrap()).collect();
    assert_eq!(subjects, ["rxe0/1", "rxe1/1"]);
    for p in ports {
        let lb = &p["loopback"];
        assert!(lb["bw_gbps"].as_f64().unwrap() > 0.0, "{p}");
        assert!(lb["lat_us"].as_f64().unwrap() > 0.0, "{p}");
        assert!(lb["error"].is_null() && lb["skipped"].is_null(), "{p}");
        assert_eq!(p["before"]["state"], "ACTIVE");
        // The driver the homogeneity check compares: soft-RoCE's module and rdma-core.
        let driver = p["before"]["driver"].as_str().unwrap_or_default();
        assert!(driver.starts_with("rdma_rxe, rdma-core "), "{p}");
        assert_eq!(p["after"], p["before"], "{p}");
        // The loopback's packets moved the port's own counters.
        let sent = p["counters"]["changes"]["hw_counters/sent_pkts"].as_u64().unwrap();
        assert!(sent > 0, "{p}");
    }
    println!("phases: {}", host["phases"]);
    // The other outputs say the same: no unhealthy host, a passing testcase, a Healthy
    // row, the gauges, and the host's record in the store.
    let name = host["host"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(&list).unwrap(), "");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"1\" failures=\"0\""), "{xml}");
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        format!("host,healthy,code,subject,detail\n{name},true,,,\n")
    );
    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(
        metrics.contains(&format!("rdmabench_health_healthy{{host=\"{name}\"}} 1\n")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "rdmabench_health_port_active{{host=\"{name}\",device=\"rxe1\",port=\"1\"}} 1\n"
        )),
        "{metrics}"
    );
    let history = |args: &[&str]| history(&store, args);
    let listed = history(&["--host", name]);
    assert_eq!(listed.status.code(), Some(0), "{}", err(&listed));
    assert!(text(&listed).contains("health"), "{}", text(&listed));
    let shown = history(&["--show", "1"]);
    assert!(
        text(&shown).contains(&format!("{name} | Healthy")),
        "{}\n{}",
        text(&shown),
        err(&shown)
    );
}

/// `rdmabench history --store STORE ARGS`.
fn history(store: &str, args: &[&str]) -> Output {
    let child = common::rdmabench(true)
        .arg("history")
        .args(["--store", store])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, Duration::from_secs(60))
}

/// Sets rdv0 (rxe1's netdev) up again, and waits for rxe1 to be ACTIVE, whatever the
/// test did.
struct LinkBack;

impl Drop for LinkBack {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "set", "rdv0", "up"]).status();
        wait_state("ACTIVE");
    }
}

fn wait_state(want: &str) -> bool {
    let state = Path::new("/sys/class/infiniband/rxe1/ports/1/state");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        if std::fs::read_to_string(state).is_ok_and(|s| s.contains(want)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
#[ignore = "needs the soft-RoCE lab (ci/lab-vm)"]
fn lab_health_names_a_port_whose_link_is_down() {
    let _back = LinkBack;
    let down = Command::new("ip").args(["link", "set", "rdv0", "down"]).status().unwrap();
    assert!(down.success());
    assert!(wait_state("DOWN"), "rxe1 did not go DOWN with rdv0");
    let data = common::scratch("rdmabench-lab-health-data");
    let o = health(&data, &["-d", "rxe1", "-p", "19770", "--hostlist", "-", "--drain"]);
    assert_eq!(o.status.code(), Some(1), "stdout: {}\nstderr: {}", text(&o), err(&o));
    let lines = verdicts(&o);
    assert_eq!(lines.len(), 1, "{}", text(&o));
    let (_, verdict) = lines[0].split_once(" | ").unwrap();
    assert!(verdict.starts_with("PORT_DOWN rxe1/1: DOWN / "), "{verdict}");
    assert!(verdict.ends_with("[ACTIVE / LinkUp]"), "{verdict}");
    assert!(text(&o).contains("skipped: port DOWN"), "{}", text(&o));
    // The hostlist names the host; the drain line is printed, with the code as reason.
    let host = lines[0].split_once(" | ").unwrap().0;
    assert!(text(&o).lines().any(|l| l == host), "{}", text(&o));
    let drain = format!(
        "scontrol update NodeName={host} State=DRAIN Reason=\"rdmabench health: PORT_DOWN rxe1/1: "
    );
    assert!(text(&o).lines().any(|l| l.starts_with(&drain)), "{}", text(&o));
    // Without --store, the run is in the default store, failed.
    let store = data.join("rdmabench").join("results.db");
    let listed = history(store.to_str().unwrap(), &["--host", host, "--json"]);
    let runs: serde_json::Value =
        serde_json::from_str(&text(&listed)).unwrap_or_else(|e| panic!("{e}: {}", err(&listed)));
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    assert_eq!((&runs[0]["kind"], &runs[0]["pass"]), (&"health".into(), &false.into()), "{runs}");
}
