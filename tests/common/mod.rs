//! Helpers the process-level tests share: start `rdmabench`, wait for it with a limit
//! (a hang fails a test, it never blocks the run), read what it printed.
#![allow(dead_code)] // each test binary uses its own part

pub mod nodes;
pub mod patterns;
pub mod relay;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test. With `lab`, first asserts that the lab's RDMA device is
/// there: a lab test fails, never passes vacuously, outside the lab.
pub fn rdmabench(lab: bool) -> Command {
    if lab {
        let dev = std::env::var("RDMABENCH_DEVICE").unwrap_or_else(|_| "rxe0".into());
        assert!(
            std::path::Path::new("/sys/class/infiniband").join(&dev).exists(),
            "lab test: RDMA device {dev} not found; run inside ci/lab-vm"
        );
    }
    Command::new(env!("CARGO_BIN_EXE_rdmabench"))
}

/// Starts `rdmabench ARGS` with its output captured.
pub fn spawn<S: AsRef<OsStr>>(lab: bool, args: &[S]) -> Child {
    rdmabench(lab)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rdmabench starts")
}

/// Waits for a child, killing it after `limit`.
pub fn finish(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "rdmabench hung for {limit:?}; stderr: {}\nstdout: {}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// What it printed on stdout.
pub fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What it printed on stderr.
pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON file a run wrote at `path`; a missing or broken file fails the test with
/// what the run printed.
pub fn read_json(path: &std::path::Path, out: &Output) -> serde_json::Value {
    let body = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!("{}: {e}\nstdout: {}\nstderr: {}", path.display(), text(out), err(out))
    });
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{}: {e}: {body}", path.display()))
}

/// A scratch folder of this test process: `TAG-PID` under the temp dir.
pub fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Reads `out` (a child's stdout) on a thread until a line contains `text`: false if
/// none did within `limit` (or the output ended first). The rest of the output is read
/// and dropped, so the child never blocks on it.
pub fn wait_for_line(out: std::process::ChildStdout, text: &str, limit: Duration) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = text.to_string();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut found = false;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if !found && line.contains(&wanted) {
                found = true;
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(limit).is_ok()
}

/// A raw client's session with a server on 127.0.0.1:`port`: sends `frames`, returns
/// all the server says until it closes (within 10 s).
pub fn session(port: &str, frames: &[Vec<u8>]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    for f in frames {
        s.write_all(f).unwrap();
    }
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// One frame of the control protocol (this version), as a foreign client writes it.
pub fn frame(json: &str) -> Vec<u8> {
    let mut f = b"RDMB".to_vec();
    f.extend_from_slice(&rdmabench::session::protocol::VERSION.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&(json.len() as u32).to_be_bytes());
    f.extend_from_slice(json.as_bytes());
    f
}

/// `mpirun` for a mesh of `np` ranks of the binary under test on this host: as root
/// where the lab runs as root, oversubscribed (the lab has 2 CPUs), MPI's own traffic on
/// shared memory and TCP, its output captured. `args` follow `rdmabench`.
pub fn mpirun(np: usize, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // When a rank dies, mpirun sends the others SIGTERM and, 1 s later by default,
        // SIGKILL: on a loaded machine rank 0 could be killed before it wrote its
        // "stopped by SIGTERM" line and its JSON. A user's mpirun has the same default;
        // these tests check what rank 0 does with its second, not the machine's speed.
        .env("OMPI_MCA_odls_base_sigkill_timeout", "5")
        .args(["--oversubscribe", "-np", &np.to_string(), env!("CARGO_BIN_EXE_rdmabench")])
        .args(args)
        // mpirun forwards its stdin to rank 0: it must not read a caller's (ci/lab-tests
        // reads its list of test binaries from it).
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A port free now (other tests' and other engineers' servers share this host).
pub fn free_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port().to_string()
}

/// Waits (10 s at most) until something accepts on 127.0.0.1:`port`.
pub fn wait_listening(port: &str) {
    let start = Instant::now();
    while std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A key file `name` in the scratch folder `dir` holding `secret`, readable by its
/// owner only (as `--auth-key` requires).
pub fn key_file(dir: &str, name: &str, secret: &str) -> PathBuf {
    let p = scratch(dir).join(name);
    std::fs::write(&p, secret).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    p
}

/// A qualify soak point's checks (issue #54), the host's over TCP and the lab's over
/// rxe0: the first point of `doc` (qualify.json in `out_dir`) ran `runs` times, each
/// with a record a second (at least 3) of a real rate (none stale), judged `0 of N
/// failed`; each run's records kept as `soak/FILE-RUN.jsonl`, and report.html's chart
/// of the point a line per run.
pub fn assert_soak_point(
    doc: &serde_json::Value,
    out_dir: &std::path::Path,
    file: &str,
    runs: usize,
) {
    let point = &doc["points"][0];
    let all = point["runs"].as_array().unwrap();
    assert_eq!(all.len(), runs, "{doc}");
    let mut judged = 0;
    for run in all {
        let intervals = run["intervals"].as_array().unwrap();
        assert!(intervals.len() >= 3, "a record a second: {run}");
        assert!(intervals.iter().all(|i| i[1].as_f64().unwrap() > 1.0), "none stale: {run}");
        judged += intervals.len();
    }
    let judgements = point["judgements"].as_array().unwrap();
    let soak = judgements.iter().find(|j| j["threshold"] == "intervals");
    let soak = soak.unwrap_or_else(|| panic!("the soak's judgement: {doc}"));
    assert_eq!(soak["pass"], true, "{doc}");
    assert_eq!(soak["observed"], format!("0 of {judged} failed"), "{doc}");
    for run in 1..=runs {
        let records = out_dir.join(format!("soak/{file}-{run}.jsonl"));
        assert!(records.exists(), "run {run}'s records kept: {}", records.display());
    }
    let page = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    let chart = &page[page.find(r#"id="soak-0""#).expect("the soak's chart")..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(chart.matches("<polyline").count(), runs, "a line per run: {chart}");
}
