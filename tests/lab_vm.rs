//! `ci/lab-vm --nodes 2` itself, run from the host (ci/test runs these; they boot guests):
//! each node's output labelled and kept whole in an appended log, node 1's exit status,
//! and no qemu left behind when the run ends, times out or is interrupted.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `ci/lab-vm --nodes 2 CMD…` with its output appended to `log`.
fn lab_vm(log: &Path, timeout: Option<u64>, cmd: &[&str]) -> Child {
    lab_vm_nodes(2, log, timeout, cmd)
}

fn lab_vm_nodes(nodes: u32, log: &Path, timeout: Option<u64>, cmd: &[&str]) -> Child {
    let out = fs::OpenOptions::new().append(true).create(true).open(log).unwrap();
    let mut c = Command::new(repo().join("ci/lab-vm"));
    c.args(["--nodes", &nodes.to_string()]).args(cmd).current_dir(repo());
    c.stdout(out.try_clone().unwrap()).stderr(out).stdin(Stdio::null());
    if let Some(t) = timeout {
        c.env("RDMABENCH_LAB_TIMEOUT", t.to_string());
    }
    c.spawn().expect("ci/lab-vm starts")
}

/// The processes whose command line names this run's folder (`.lab/nodes-PID/`).
fn run_processes(lab_vm_pid: u32) -> Vec<String> {
    let needle = format!("/.lab/nodes-{lab_vm_pid}/");
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) && !cmdline.contains("lab_vm") {
            found.push(format!("{}: {}", entry.file_name().to_string_lossy(), cmdline));
        }
    }
    found
}

fn qemus(lab_vm_pid: u32) -> usize {
    run_processes(lab_vm_pid).iter().filter(|p| p.contains("qemu-system")).count()
}

fn wait(child: &mut Child, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("ci/lab-vm still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rdmabench-lab-vm-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    fs::write(&path, "a line written before the lab\n").unwrap();
    path
}

#[test]
#[ignore = "lab-vm: boots two guests on the host (ci/test runs it)"]
fn vm_two_nodes_label_their_lines_return_node_ones_status_and_leave_no_qemu() {
    let log = scratch("nodes.log");
    let script = r#"echo "hello from $(hostname), node $RDMABENCH_NODE of [$RDMABENCH_NODES] on $RDMABENCH_DEVICE"
        [ "$RDMABENCH_NODE" = 1 ] && exit 3
        sleep 600"#;
    let mut child = lab_vm(&log, Some(600), &["bash", "-c", script]);
    let pid = child.id();
    let status = wait(&mut child, Duration::from_secs(600));
    let text = fs::read(&log).unwrap();
    assert!(!text.contains(&0), "NUL bytes in the log: the console overwrote it");
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with("a line written before the lab\n"), "{text}");
    for n in [1, 2] {
        let line =
            format!("[node{n}] hello from node{n}, node {n} of [198.18.1.1 198.18.1.2] on rxe0");
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    assert_eq!(status, 3, "node 1's exit status:\n{text}");
    // Node 2's sleep was stopped when node 1 was done, not counted as a failure.
    assert!(!text.contains("node 2: the command failed"), "{text}");
    assert_eq!(run_processes(pid), Vec::<String>::new(), "left behind");
    assert!(!repo().join(format!(".lab/nodes-{pid}")).exists(), "run folder left");
}

#[test]
#[ignore = "lab-vm: boots two guests on the host (ci/test runs it)"]
fn vm_an_interrupted_or_timed_out_lab_leaves_no_qemu() {
    // Ctrl-C while the guests boot.
    let log = scratch("interrupted.log");
    let mut child = lab_vm(&log, None, &["sleep", "600"]);
    let pid = child.id();
    let start = Instant::now();
    while qemus(pid) < 2 {
        assert!(start.elapsed() < Duration::from_secs(120), "no qemu started");
        std::thread::sleep(Duration::from_millis(200));
    }
    let sent = Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
    assert!(sent.success());
    assert_eq!(
        wait(&mut child, Duration::from_secs(60)),
        130,
        "{}",
        fs::read_to_string(&log).unwrap()
    );
    assert_eq!(run_processes(pid), Vec::<String>::new(), "left behind after Ctrl-C");
    assert!(fs::read_to_string(&log).unwrap().contains("interrupted: stopping the guests"));

    // The overall limit running out.
    let log = scratch("timed-out.log");
    let mut child = lab_vm(&log, Some(12), &["sleep", "600"]);
    let pid = child.id();
    assert_eq!(wait(&mut child, Duration::from_secs(90)), 124);
    assert_eq!(run_processes(pid), Vec::<String>::new(), "left behind after the timeout");
    assert!(fs::read_to_string(&log).unwrap().contains("timed out after 12s"));
}

#[test]
#[ignore = "lab-vm: boots a guest on the host (ci/test runs it)"]
fn vm_one_node_appends_to_a_log_whole() {
    // `ci/lab > lab.log`: the set-up and build lines written before the guest's console
    // must survive it (qemu reopens a redirected stdout from offset 0).
    let log = scratch("one-node.log");
    let mut child = lab_vm_nodes(
        1,
        &log,
        Some(600),
        &["bash", "-c", "echo inside the lab on $RDMABENCH_DEVICE"],
    );
    let status = wait(&mut child, Duration::from_secs(600));
    let text = fs::read(&log).unwrap();
    assert!(!text.contains(&0), "NUL bytes in the log");
    let text = String::from_utf8(text).unwrap();
    assert_eq!(status, 0, "{text}");
    assert!(text.starts_with("a line written before the lab\n"), "{text}");
    assert!(text.lines().any(|l| l == "inside the lab on rxe0"), "{text}");
}
