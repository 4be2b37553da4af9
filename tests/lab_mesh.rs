//! `rdmabench mesh` under mpirun in the lab (docs/mesh.md): four ranks over rxe0 in one
//! guest (a 4×4 matrix, twelve links), the same under `srun` in a one-node Slurm cluster
//! started in the guest, a link slowed by `tc netem` named as the outlier, and across the
//! two-host lab, two ranks per node started over ssh. (A rank killed or
//! stopped mid-round is the launcher's business, the same over TCP: tests/mesh.rs.)
//!
//! With RDMABENCH_REPORT_DIR set (ci/test sets it), the four-rank mesh writes its files to
//! that directory's sibling `mesh/`, and the host opens report.html in Chromium after the
//! boot (ci/check-report --mesh).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{err, finish, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

fn scratch() -> PathBuf {
    common::scratch("rdmabench-lab-mesh")
}

fn read_json(path: &Path, out: &Output) -> Value {
    let body = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!("{}: {e}\nstdout: {}\nstderr: {}", path.display(), text(out), err(out))
    });
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{}: {e}: {body}", path.display()))
}

/// The (from, to) links of the findings whose check is `check`.
fn flagged(doc: &Value, check: &str) -> std::collections::BTreeSet<(u64, u64)> {
    doc["analysis"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .map(|f| (f["from"].as_u64().unwrap(), f["to"].as_u64().unwrap()))
        .collect()
}

/// Every directed link of `n` ranks once, each with a bandwidth and a latency.
fn assert_every_link(doc: &Value, n: u64) {
    let links = doc["links"].as_array().unwrap();
    assert_eq!(links.len() as u64, n * (n - 1), "{doc}");
    let mut seen = std::collections::BTreeSet::new();
    for l in links {
        assert!(l["bw_mb_per_sec"].as_f64().is_some_and(|v| v > 0.0), "{l}");
        assert!(l["t_typical_usec"].as_f64().is_some_and(|v| v > 0.0), "{l}");
        assert!(l["error"].is_null(), "{l}");
        assert!(seen.insert((l["from"].as_u64().unwrap(), l["to"].as_u64().unwrap())), "{l}");
    }
    assert_eq!(doc["analysis"]["measured_links"].as_u64(), Some(n * (n - 1)));
    for (i, row) in doc["analysis"]["bw"].as_array().unwrap().iter().enumerate() {
        for (j, v) in row.as_array().unwrap().iter().enumerate() {
            assert_eq!(v.is_null(), i == j, "bw[{i}][{j}] = {v}");
        }
    }
}

/// The exit status follows the findings: 1 when a link failed a threshold, else 0.
fn assert_status_matches(doc: &Value, out: &Output) {
    let findings = doc["analysis"]["findings"].as_array().unwrap();
    assert!(findings.iter().all(|f| f["check"] != "error"), "{findings:?}");
    let want = if findings.is_empty() { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(want), "{}\n{}", text(out), err(out));
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_mesh_four_ranks_over_rxe0_give_a_4x4_matrix_of_12_links() {
    let _ = common::rdmabench(true);
    let dir = match std::env::var_os("RDMABENCH_REPORT_DIR") {
        Some(d) => Path::new(&d).parent().unwrap().join("mesh"),
        None => scratch().join("four"),
    };
    std::fs::create_dir_all(&dir).unwrap();
    let (json, csv, html) = (dir.join("mesh.json"), dir.join("mesh.csv"), dir.join("report.html"));
    let out = finish(
        common::mpirun(
            4,
            &[
                "mesh",
                "-n",
                "50",
                "--json",
                json.to_str().unwrap(),
                "--csv",
                csv.to_str().unwrap(),
                "--html",
                html.to_str().unwrap(),
            ],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let doc = read_json(&json, &out);
    assert_status_matches(&doc, &out);
    assert_eq!(doc["complete"], true);
    assert_eq!((doc["rounds"].as_u64(), doc["rounds_done"].as_u64()), (Some(3), Some(3)));
    assert_every_link(&doc, 4);
    for r in doc["ranks"].as_array().unwrap() {
        assert_eq!(r["device"], "rxe0", "{r}");
        assert_eq!(r["address"], "127.0.0.1", "the RoCE v2 GID's address: {r}");
    }
    assert!(doc["bw_test"].as_str().unwrap().starts_with("write_bw 64K, 20 iterations"), "{doc}");
    assert!(doc["lat_test"].as_str().unwrap().starts_with("write_lat 2, 20 iterations"), "{doc}");
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 13, "{rows}");
    assert!(rows.lines().skip(1).all(|l| l.contains(",rxe0,")), "{rows}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("class=\"cell\"").count(), 32, "two 4×4 heatmaps");
    let table = text(&out);
    assert!(table.contains("12 of 12 directed links measured"), "{table}");
}

/// A one-node Slurm cluster in the guest (Debian's slurm-wlm 22.05): slurmctld and slurmd
/// on 127.0.0.1 with `auth/none` (the guest is its own cluster: no munge), four CPUs
/// declared on two. Stopped when dropped.
struct Slurm {
    daemons: Vec<std::process::Child>,
    conf: PathBuf,
}

impl Slurm {
    fn start() -> Slurm {
        let dir = scratch().join("slurm");
        for sub in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let host =
            String::from_utf8(Command::new("hostname").arg("-s").output().unwrap().stdout).unwrap();
        let host = host.trim();
        let d = dir.display();
        let conf = format!(
            "ClusterName=lab\nSlurmctldHost={host}(127.0.0.1)\nAuthType=auth/none\nCredType=cred/none\n\
SlurmUser=root\nSlurmdUser=root\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
SlurmctldPidFile={d}/ctld.pid\nSlurmdPidFile={d}/d.pid\nSlurmctldLogFile={d}/ctld.log\nSlurmdLogFile={d}/d.log\n\
ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
SlurmdParameters=config_overrides\nReturnToService=2\nJobAcctGatherType=jobacct_gather/none\n\
NodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n\
PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n"
        );
        std::fs::write(dir.join("slurm.conf"), conf).unwrap();
        // slurmd's cgroup/v2 asks systemd (over dbus) for a scope; the guest has neither,
        // so it makes the slice itself under the guest's own cgroup tree.
        std::fs::write(dir.join("cgroup.conf"), "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n")
            .unwrap();
        std::fs::create_dir_all("/sys/fs/cgroup/system.slice").unwrap();
        let controllers = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap();
        for c in controllers.split_whitespace() {
            let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", format!("+{c}"));
        }
        let conf = dir.join("slurm.conf");
        let daemons = ["slurmctld", "slurmd"]
            .iter()
            .map(|d| {
                Command::new(d)
                    .arg("-D")
                    .arg("-f")
                    .arg(&conf)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let slurm = Slurm { daemons, conf };
        let start = std::time::Instant::now();
        loop {
            let state = slurm.command("sinfo").args(["-h", "-o", "%T"]).output().unwrap();
            if String::from_utf8_lossy(&state.stdout).contains("idle") {
                return slurm;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the node never came up: {}",
                std::fs::read_to_string(dir.join("d.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_mesh_under_srun_in_a_one_node_slurm_cluster() {
    let _ = common::rdmabench(true);
    let slurm = Slurm::start();
    let mpi = String::from_utf8(slurm.command("srun").arg("--mpi=list").output().unwrap().stdout)
        .unwrap();
    assert!(mpi.contains("pmix"), "Slurm's PMIx plugin, which Open MPI's ranks talk to: {mpi}");
    let json = scratch().join("srun.json");
    let mut srun = slurm.command("srun");
    srun.args([
        "-n",
        "4",
        "--mpi=pmix",
        "-t",
        "5",
        env!("CARGO_BIN_EXE_rdmabench"),
        "mesh",
        "-n",
        "20",
    ])
    .args(["--outlier", "1000", "--json", json.to_str().unwrap()])
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let out = finish(srun.spawn().unwrap(), LIMIT);
    let doc = read_json(&json, &out);
    assert_status_matches(&doc, &out);
    assert_every_link(&doc, 4);
    assert!(text(&out).contains("4 ranks on 1 host(s)"), "{}", text(&out));
}

/// Puts the traffic between two of lo's addresses, both ways, through `tc netem` with
/// `netem`'s settings; removes it when dropped.
struct Netem;

impl Netem {
    fn between(a: &str, b: &str, netem: &str) -> Netem {
        let tc = |line: &str| {
            let ok = Command::new("tc").args(line.split_whitespace()).status().unwrap().success();
            assert!(ok, "tc {line}");
        };
        let _ = Command::new("tc").args(["qdisc", "del", "dev", "lo", "root"]).output();
        tc("qdisc add dev lo root handle 1: prio bands 4 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0");
        tc(&format!("qdisc add dev lo parent 1:4 handle 40: netem {netem}"));
        for (src, dst) in [(a, b), (b, a)] {
            tc(&format!(
                "filter add dev lo parent 1: protocol ip prio 1 u32 match ip src {src}/32 match ip dst {dst}/32 flowid 1:4"
            ));
        }
        Netem
    }
}

impl Drop for Netem {
    fn drop(&mut self) {
        let _ = Command::new("tc").args(["qdisc", "del", "dev", "lo", "root"]).status();
    }
}

/// `mpirun` with one rank per address (198.18.0.11…14 on lo, ci/lab-vm), each given
/// `--address` and then `args`.
fn mpirun_per_address(addresses: &[&str], args: &[&str]) -> Command {
    let mut c = common::mpirun(1, &[]);
    // common::mpirun ends with the binary: the first rank's arguments follow it.
    let bin = env!("CARGO_BIN_EXE_rdmabench");
    for (k, a) in addresses.iter().enumerate() {
        if k > 0 {
            c.args([":", "-np", "1", bin]);
        }
        c.args(args).args(["--address", a]);
    }
    c
}

#[test]
#[ignore = "lab: runs in the lab with the RDMA tests (ci/lab-vm)"]
fn lab_mesh_a_link_slowed_by_netem_is_named_as_the_outlier() {
    // Over TCP: rxe0 on lo delivers its own traffic inside the driver, past every qdisc
    // (docs/mesh.md#in-the-lab), while TCP between two of lo's addresses passes netem.
    let _ = common::rdmabench(true);
    let json = scratch().join("netem.json");
    // 10 ms each way: twenty times the other links' latency. (Not their bandwidth: a TCP
    // sender's figure counts what its socket buffers took, and they take a short run.)
    let _netem = Netem::between("198.18.0.12", "198.18.0.13", "delay 10ms");
    let addresses = ["198.18.0.11", "198.18.0.12", "198.18.0.13", "198.18.0.14"];
    let out = finish(
        mpirun_per_address(
            &addresses,
            &["mesh", "--tcp", "-n", "30", "--outlier", "500", "--json", json.to_str().unwrap()],
        )
        .spawn()
        .unwrap(),
        LIMIT,
    );
    let doc = read_json(&json, &out);
    assert_eq!(out.status.code(), Some(1), "{}\n{}", text(&out), err(&out));
    assert_every_link(&doc, 4);
    let slowed = [(1, 2), (2, 1)].into_iter().collect();
    assert_eq!(flagged(&doc, "latency_outlier"), slowed, "{}", text(&out));
    let lat = doc["analysis"]["lat"][1][2].as_f64().unwrap();
    assert!(lat > 10_000.0, "half of a 20 ms round trip at least: {lat} usec");
    let table = text(&out);
    assert!(
        table.contains("FAIL rank 1 (virtme-ng tcp) -> rank 2 (virtme-ng tcp): t_typical"),
        "both ends named: {table}"
    );
}

#[test]
#[ignore = "hosts: needs two lab hosts (ci/lab-vm --nodes 2)"]
fn hosts_mesh_two_ranks_on_each_node_give_12_links_across_and_within_hosts() {
    let nodes = common::nodes::addresses();
    let config = std::env::var("RDMABENCH_LAB_SSH_CONFIG").expect("the lab's ssh config");
    let json = scratch().join("hosts.json");
    let agent = format!("ssh -F {config}");
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--host", "node1:2,node2:2", "-np", "4", "--mca", "plm_rsh_agent", &agent])
        // Open MPI's own connections on the lab link (the nodes have no other).
        .args([
            "--mca",
            "oob_tcp_if_include",
            "198.18.1.0/24",
            "--mca",
            "btl_tcp_if_include",
            "198.18.1.0/24",
        ])
        .args([env!("CARGO_BIN_EXE_rdmabench"), "mesh", "-n", "30", "--outlier", "1000"])
        .args(["--json", json.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = finish(c.spawn().unwrap(), LIMIT);
    let doc = read_json(&json, &out);
    assert_status_matches(&doc, &out);
    assert_every_link(&doc, 4);
    let ranks: Vec<(String, String)> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["host"].as_str().unwrap().into(), r["address"].as_str().unwrap().into()))
        .collect();
    let want: Vec<(String, String)> = [(1, 0), (1, 0), (2, 1), (2, 1)]
        .iter()
        .map(|&(n, i): &(u32, usize)| (format!("node{n}"), nodes[i].clone()))
        .collect();
    assert_eq!(ranks, want, "two ranks per node, each at its node's RoCE address");
    assert!(text(&out).contains("4 ranks on 2 host(s)"), "{}", text(&out));
}
