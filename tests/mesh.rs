//! `rdmabench mesh` on the host, over TCP (the host has no RDMA): mpirun starts the
//! ranks, MPI exchanges their endpoints, each pair runs the TCP tests through the engine,
//! and rank 0's JSON, CSV and exit status say what every link did; a rank killed or
//! stopped mid-round ends the job with an error on rank 0, and no rank is left behind.
//! (The RDMA meshes run in the lab: tests/lab_mesh.rs.)

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{err, finish, text};
use serde_json::Value;

fn scratch() -> std::path::PathBuf {
    common::scratch("rdmabench-mesh")
}

#[test]
fn mesh_of_four_ranks_over_tcp_measures_twelve_links() {
    let dir = scratch();
    let (json, csv) = (dir.join("m.json"), dir.join("m.csv"));
    let out = finish(
        common::mpirun(
            4,
            &[
                "mesh",
                "--tcp",
                "-n",
                "200",
                "--address",
                "127.0.0.1",
                "--outlier",
                "99",
                "--json",
                json.to_str().unwrap(),
                "--csv",
                csv.to_str().unwrap(),
            ],
        )
        .spawn()
        .unwrap(),
        Duration::from_secs(120),
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("mesh JSON: {e}; stderr: {}", err(&out)));
    let findings = doc["analysis"]["findings"].as_array().unwrap();
    // Timing noise on a busy host may make a link an outlier (exit 1), never an error.
    assert!(findings.iter().all(|f| f["check"] != "error"), "{findings:?}");
    let want = if findings.is_empty() { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(want), "{}\n{}", text(&out), err(&out));
    assert_eq!(doc["kind"], "mesh");
    assert_eq!(doc["complete"], true);
    assert_eq!((doc["rounds"].as_u64(), doc["rounds_done"].as_u64()), (Some(3), Some(3)));
    assert_eq!(doc["ranks"].as_array().unwrap().len(), 4);
    let links = doc["links"].as_array().unwrap();
    assert_eq!(links.len(), 12);
    let mut seen = std::collections::BTreeSet::new();
    for l in links {
        assert!(l["bw_mb_per_sec"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["t_typical_usec"].as_f64().unwrap() > 0.0, "{l}");
        assert!(seen.insert((l["from"].as_u64().unwrap(), l["to"].as_u64().unwrap())));
    }
    let bw = doc["analysis"]["bw"].as_array().unwrap();
    for (i, row) in bw.iter().enumerate() {
        for (j, v) in row.as_array().unwrap().iter().enumerate() {
            assert_eq!(v.is_null(), i == j, "bw[{i}][{j}] = {v}");
        }
    }
    assert_eq!(doc["analysis"]["measured_links"], 12);
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 13, "a header and a row per link:\n{rows}");
    let table = text(&out);
    assert!(table.contains("4 ranks on 1 host(s), pairs all: 3 round(s)"), "{table}");
    assert!(table.contains("12 of 12 directed links measured"), "{table}");
}

#[test]
fn mesh_ring_of_three_meets_three_pairs() {
    let json = scratch().join("ring.json");
    let out = finish(
        common::mpirun(
            3,
            &[
                "mesh",
                "--tcp",
                "-n",
                "50",
                "--pairs",
                "ring",
                "--address",
                "127.0.0.1",
                "--outlier",
                "99",
                "--json",
                json.to_str().unwrap(),
            ],
        )
        .spawn()
        .unwrap(),
        Duration::from_secs(120),
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", err(&out)));
    assert_eq!(doc["rounds"], 3, "an odd ring: three rounds");
    assert_eq!(doc["links"].as_array().unwrap().len(), 6);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", err(&out));
}

#[test]
fn mesh_without_a_launcher_or_with_bad_flags_says_so() {
    let out = finish(common::spawn(false, &["mesh", "--tcp"]), Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(err(&out).contains("start the mesh under a launcher: mpirun -np N"), "{}", err(&out));
    for (flags, says) in [
        (&["--pairs", "random:0"][..], "not all, ring or random:K"),
        (&["--outlier", "0"], "--outlier 0: a percentage above 0"),
        (&["--tcp", "-d", "rxe0"], "--tcp: -d, -q, -c and --backend are RDMA flags"),
        (&["--min-bw", "0"], "--min-bw: a bandwidth above 0"),
    ] {
        let mut args = vec!["mesh"];
        args.extend_from_slice(flags);
        let out = finish(common::spawn(false, &args), Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        assert!(err(&out).contains(says), "{flags:?}: {}", err(&out));
        assert_eq!(err(&out).lines().count(), 1, "one line: {}", err(&out));
    }
}

/// The PID of rank `rank` of the mesh whose command line holds `marker` (its --json
/// path: the tests here run side by side), waiting for it to start.
fn rank_pid(marker: &str, rank: u32) -> u32 {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    let start = Instant::now();
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let has = |hay: &[u8], s: &str| hay.split(|&b| b == 0).any(|w| w == s.as_bytes());
            if has(&cmdline, marker) && has(&environ, &want) {
                return pid;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no process of rank {rank}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success());
}

/// No rank of the mesh whose command line holds `marker` is left running.
fn assert_no_rank_left(marker: &str) {
    let left = Command::new("pgrep").args(["-f", marker]).output().unwrap();
    assert!(left.stdout.is_empty(), "left running: {}", String::from_utf8_lossy(&left.stdout));
}

#[test]
fn mesh_a_rank_killed_mid_round_ends_the_job_with_an_error_on_rank_0() {
    let json = scratch().join("killed.json");
    let marker = json.to_str().unwrap();
    // Each test runs 1 s: a round lasts 4 s or more, time to kill a rank in round 2.
    let mut child = common::mpirun(
        4,
        &[
            "mesh",
            "--tcp",
            "-D",
            "1",
            "--address",
            "127.0.0.1",
            "--outlier",
            "1000",
            "--json",
            marker,
        ],
    )
    .spawn()
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    assert!(
        common::wait_for_line(stdout, " round 1/3:", Duration::from_secs(60)),
        "round 1 never ended"
    );
    let killed = Instant::now();
    signal(rank_pid(marker, 2), "-KILL");
    let out = finish(child, Duration::from_secs(60));
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "the job ended {:?} after the kill",
        killed.elapsed()
    );
    assert!(!out.status.success());
    let stderr = err(&out);
    assert!(
        stderr.contains("rdmabench mesh: rank 0: stopped by SIGTERM during round 2/3"),
        "{stderr}"
    );
    assert!(stderr.contains("rank 2 with PID"), "mpirun names the rank that died: {stderr}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["complete"], false);
    assert_eq!(doc["rounds_done"], 1, "round 1's links are kept");
    assert_eq!(doc["links"].as_array().unwrap().len(), 4);
    assert!(
        doc["error"].as_str().unwrap().contains("stopped by SIGTERM during round 2/3"),
        "{doc}"
    );
    assert_no_rank_left(marker);
}

#[test]
fn mesh_a_rank_stopped_mid_round_is_named_when_the_round_times_out() {
    let json = scratch().join("stopped.json");
    let marker = json.to_str().unwrap();
    let mut child = common::mpirun(
        4,
        &[
            "mesh",
            "--tcp",
            "-D",
            "1",
            "--round-timeout",
            "4",
            "--timeout",
            "2",
            "--address",
            "127.0.0.1",
            "--json",
            marker,
        ],
    )
    .spawn()
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tx.send(common::wait_for_line(stdout, " rdmabench mesh:", Duration::from_secs(60)))
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(60)), Ok(true), "no header");
    let stopped = rank_pid(marker, 3);
    signal(stopped, "-STOP");
    let out = finish(child, Duration::from_secs(60));
    let _ = Command::new("kill").args(["-CONT", &stopped.to_string()]).status();
    assert_eq!(out.status.code(), Some(2), "MPI_Abort(2): {}", err(&out));
    let stderr = err(&out);
    let line = stderr.lines().find(|l| l.contains("(--round-timeout)")).unwrap_or("");
    assert!(
        line.starts_with("rdmabench mesh: rank 0: round 1/3 did not end within 4 s"),
        "{stderr}"
    );
    assert!(
        line.contains("no report from rank 3 (") && line.contains(" tcp) [paired with rank 0 ("),
        "{stderr}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((doc["complete"].as_bool(), doc["rounds_done"].as_u64()), (Some(false), Some(0)));
    assert!(doc["error"].as_str().unwrap().contains("no report from rank 3"), "{doc}");
    assert_no_rank_left(marker);
}
