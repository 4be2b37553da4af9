//! Hostile peers and hostile local files, round 3 (issue 57), on this host only:
//! a trickling data stream against `serve --max-time`, and what a test does with its
//! files before and after it runs. Unix only: its files are symbolic links, FIFOs,
//! /dev/full and a read-only mount (the Windows build under wine compiles none of it).
#![cfg(unix)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{err, finish, text, wait_listening};

/// Held by each test that starts a server on a port of [`port`]: two of this file's
/// servers never race for one port.
static SERVING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serving() -> std::sync::MutexGuard<'static, ()> {
    SERVING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

use common::free_port as port;

fn spawn(args: &[&str]) -> Child {
    common::spawn(false, args)
}

/// `rdmabench ARGS -p PORT 127.0.0.1`, to its end.
fn client(port: &str, args: &[&str]) -> Output {
    let mut a = args.to_vec();
    a.extend(["-p", port, "127.0.0.1"]);
    finish(spawn(&a), Duration::from_secs(90))
}

/// Relays one client's data stream to `to`: its 12-byte greeting at once, then, for at
/// most `limit`, one byte a second (`trickling`) or nothing at all (silent).
fn trickle(to: String, limit: Duration, trickling: bool) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut client, _) = l.accept().unwrap();
        let mut server = TcpStream::connect(to).unwrap();
        let mut greeting = [0u8; 12];
        client.read_exact(&mut greeting).unwrap();
        server.write_all(&greeting).unwrap();
        let start = Instant::now();
        let mut b = [0u8; 1];
        while start.elapsed() < limit && client.read_exact(&mut b).is_ok() {
            if trickling && server.write_all(&b).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    addr
}

/// Relays one client to `serve` on `to`, its TCP data stream through [`trickle`]: a
/// client whose data arrives one byte a second (`trickling`), or never.
fn trickling_relay(to: String, trickling: bool) -> String {
    common::relay::rewriting(to, false, move |msg| {
        if msg["type"] == "endpoints" {
            for qp in msg["qps"].as_array_mut().unwrap() {
                let real = qp["addr"].as_str().unwrap().to_string();
                qp["addr"] = trickle(real, Duration::from_secs(60), trickling).into();
            }
        }
    })
    .0
}

#[test]
fn item1_a_trickling_or_silent_client_holds_the_slot_no_longer_than_max_time() {
    let _serving = serving();
    // tcp_bw's data trickled a byte a second; tcp_lat's first ping never arriving (the
    // server's read waited its whole --timeout, 30 s, before it looked at the time).
    for (test, trickling) in [("tcp-bw", true), ("tcp-lat", false)] {
        let p = port();
        let serve =
            spawn(&["serve", "-p", &p, "--timeout", "30", "--max-time", "2", "--count", "2"]);
        wait_listening(&p);
        let relay = trickling_relay(format!("127.0.0.1:{p}"), trickling);
        let start = Instant::now();
        let held = std::thread::spawn(move || {
            client(&relay, &[test, "-s", "65536", "-n", "100000", "--timeout", "10"])
        });
        // The first test holds the slot now. A second client is told `busy` at once while
        // it measures (#59), so it asks again every half second: it is served once the
        // first test's 2 s are up, not when the trickling client lets go.
        std::thread::sleep(Duration::from_secs(1));
        let second = loop {
            let second = client(&p, &["tcp-bw", "-n", "50", "--timeout", "10"]);
            let busy = second.status.code() != Some(0) && err(&second).contains("server busy");
            if !busy || start.elapsed() > Duration::from_secs(8) {
                break second;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        let served_after = start.elapsed();
        assert_eq!(second.status.code(), Some(0), "{test}: {}", err(&second));
        assert!(served_after < Duration::from_secs(6), "{test}: served after {served_after:?}");
        let held = held.join().unwrap();
        assert_eq!(held.status.code(), Some(2), "{test}: {}", err(&held));
        assert!(err(&held).contains("(serve --max-time)"), "{test}: {}", err(&held));
        let log = text(&finish(serve, Duration::from_secs(30)));
        let id = test.replace('-', "_");
        let why = format!("{id} FAILED: the test ran past this server's limit of 2 s");
        assert!(log.contains(&why), "{log}");
    }
}

/// Relays one data stream to `to`, taking 128 KiB from its client every 0.5 s for at
/// most a minute or until `done`: a stream that always moves (a byte a second would not:
/// the client's socket sees no window open for less than a segment), far too slowly to
/// end. (`done`: once the client has gone, what its socket still holds would take the
/// relay half a minute to pass on.)
fn slow_reader(to: String, done: Arc<AtomicBool>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut client, _) = l.accept().unwrap();
        let mut server = TcpStream::connect(to).unwrap();
        let mut chunk = vec![0u8; 128 << 10];
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) && !done.load(Ordering::Relaxed) {
            let Ok(n) = client.read(&mut chunk) else { break };
            if n == 0 || server.write_all(&chunk[..n]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    addr
}

/// Relays one client to `serve` on `to`, the server's data endpoints replaced by
/// [`slow_reader`]s: a server that takes the client's data slowly, and never stops.
fn slow_server(to: String, done: Arc<AtomicBool>) -> String {
    common::relay::rewriting(to, false, move |msg| {
        if msg["type"] == "endpoints" {
            for qp in msg["qps"].as_array_mut().unwrap() {
                let real = qp["addr"].as_str().unwrap().to_string();
                qp["addr"] = slow_reader(real, done.clone()).into();
            }
        }
    })
    .0
}

#[test]
fn item1_a_slow_server_holds_a_client_no_longer_than_its_max_time() {
    let _serving = serving();
    // Before, the client sent on at 256 KiB/s for the relay's whole minute. (A -D run's
    // default limit, its seconds and a --timeout a step, is `spec::Local::run_limit`'s.)
    let p = port();
    let serve = spawn(&["serve", "-p", &p, "--count", "1"]);
    wait_listening(&p);
    let done = Arc::new(AtomicBool::new(false));
    let relay = slow_server(format!("127.0.0.1:{p}"), done.clone());
    let start = Instant::now();
    let args = ["tcp-bw", "-s", "65536", "-n", "100000", "--timeout", "2", "--max-time", "3"];
    let held = client(&relay, &args);
    let took = start.elapsed();
    done.store(true, Ordering::Relaxed);
    assert_eq!(held.status.code(), Some(2), "{}", err(&held));
    let why = "the test ran past this side's limit of 3 s (--max-time)";
    assert!(err(&held).contains(why), "{}", err(&held));
    // The end, a socket's tick past it, and the process's start and stop.
    assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(5), "{took:?}");
    let log = text(&finish(serve, Duration::from_secs(90)));
    assert!(log.contains("tcp_bw FAILED"), "{log}");
}

#[test]
fn item1_a_one_shot_server_ends_a_trickling_clients_test_at_its_max_time() {
    let _serving = serving();
    let p = port();
    let server = spawn(&["tcp-bw", "-p", &p, "--timeout", "10", "--max-time", "3"]);
    wait_listening(&p);
    let relay = trickling_relay(format!("127.0.0.1:{p}"), true);
    let start = Instant::now();
    let held = std::thread::spawn(move || client(&relay, &["tcp-bw", "-n", "100000"]));
    let server = finish(server, Duration::from_secs(60));
    let took = start.elapsed();
    assert_eq!(server.status.code(), Some(2), "{}", err(&server));
    let why = "the test ran past this side's limit of 3 s (--max-time)";
    assert!(err(&server).contains(why), "{}", err(&server));
    assert!(took < Duration::from_secs(6), "the server held {took:?}");
    let held = held.join().unwrap();
    assert_eq!(held.status.code(), Some(2), "{}", err(&held));
    assert!(err(&held).contains(why), "the client is told why: {}", err(&held));
}

/// A scratch directory of this test binary's own.
fn scratch(name: &str) -> std::path::PathBuf {
    common::scratch("rdmabench-hostile3").join(name)
}

#[test]
fn item2_doctor_refuses_a_link_out_of_its_root_and_captures_none() {
    let root = scratch("link-out");
    let _ = std::fs::remove_dir_all(&root);
    let dev = root.join("sys/devices/pci0000:00/0000:00:01.0/infiniband/mlx0");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::create_dir_all(root.join("sys/class/infiniband")).unwrap();
    std::os::unix::fs::symlink(
        "../../devices/pci0000:00/0000:00:01.0/infiniband/mlx0",
        root.join("sys/class/infiniband/mlx0"),
    )
    .unwrap();
    let secret = scratch("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-LINE\n").unwrap();
    std::os::unix::fs::symlink(&secret, dev.join("fw_ver")).unwrap();
    std::fs::write(dev.join("node_type"), "1: CA\n").unwrap();
    let fw = root.join("sys/class/infiniband/mlx0/fw_ver");
    let out = finish(spawn(&["doctor", "--root", root.to_str().unwrap()]), Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    let said = format!("{}{}", text(&out), err(&out));
    assert!(!said.contains("TOP-SECRET"), "{said}");
    assert!(
        err(&out).contains(&format!("{}: a link out of the tree", fw.display())),
        "{}",
        err(&out)
    );
    let copy = scratch("link-out-capture");
    let _ = std::fs::remove_dir_all(&copy);
    let out = finish(
        spawn(&["doctor", "--root", root.to_str().unwrap(), "--capture", copy.to_str().unwrap()]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    assert!(err(&out).contains("a link out of the tree"), "{}", err(&out));
    let grep = std::process::Command::new("grep").args(["-r", "TOP-SECRET"]).arg(&copy).output();
    assert!(!grep.unwrap().status.success(), "the secret was captured");
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&copy);
}

#[test]
fn item3_cpu_lists_are_bounded_across_a_trees_numa_nodes() {
    let root = scratch("numa-flood");
    let _ = std::fs::remove_dir_all(&root);
    for n in 0..3000 {
        let dir = root.join(format!("sys/devices/system/node/node{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpulist"), "0-65535\n").unwrap();
    }
    // Under 1 GiB of address space: the 3000 lists expanded took 1.55 GB.
    let line = format!(
        "ulimit -v 1048576 && exec '{}' doctor --root '{}'",
        env!("CARGO_BIN_EXE_rdmabench"),
        root.display()
    );
    let child = std::process::Command::new("sh")
        .args(["-c", &line])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    let node0 = root.join("sys/devices/system/node/node0/cpulist");
    assert_eq!(
        err(&out).trim(),
        format!("rdmabench: {}: CPU 65535: CPUs are numbered below 8192", node0.display())
    );
    // Within bounds, node by node, until the tree's lists together pass 8192 CPUs.
    for n in 0..3000 {
        let list = root.join(format!("sys/devices/system/node/node{n}/cpulist"));
        std::fs::write(list, "0-4095\n").unwrap();
    }
    let out = finish(spawn(&["doctor", "--root", root.to_str().unwrap()]), Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    let node2 = root.join("sys/devices/system/node/node2/cpulist");
    assert_eq!(
        err(&out).trim(),
        format!("rdmabench: {}: more than 8192 CPUs listed in all", node2.display())
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Relays one client to `serve` on `to`, changing each `result` the client sends with
/// `forge`: a client that reports what it likes.
fn forging_relay(to: String, forge: fn(&mut serde_json::Value)) -> String {
    common::relay::rewriting(to, true, move |msg| {
        if msg["type"] == "result" {
            forge(&mut msg["result"]);
        }
    })
    .0
}

#[test]
fn item4_item10_a_peers_cpu_figures_are_range_checked_and_refusals_name_the_figure() {
    type Forge = fn(&mut serde_json::Value);
    let cases: [(&str, Forge, &str); 4] = [
        (
            "tcp-bw",
            |r| r["cpu"]["client"]["busy_percent"] = 1e308.into(),
            "a CPU figure out of range (busy_percent 1e308)",
        ),
        (
            "tcp-bw",
            |r| r["cpu"]["client"]["window_s"] = (-1.0).into(),
            "a CPU figure out of range (window_s -1)",
        ),
        (
            "tcp-bw",
            |r| r["cpu"]["client"]["cpu_s_per_gb"] = (-0.5).into(),
            "a CPU figure out of range (cpu_s_per_gb -0.5)",
        ),
        (
            "tcp-lat",
            |r| r["lat"]["t_min_us"] = (-1.0).into(),
            "a latency out of range (t_min_us -1 usec)",
        ),
    ];
    let _serving = serving();
    let p = port();
    let serve = spawn(&["serve", "-p", &p, "--timeout", "10", "--count", "4"]);
    wait_listening(&p);
    for (test, forge, said) in cases {
        let relay = forging_relay(format!("127.0.0.1:{p}"), forge);
        let c = client(&relay, &[test, "-n", "50", "--timeout", "10"]);
        assert_eq!(c.status.code(), Some(2), "{test}: {}", err(&c));
        assert!(err(&c).contains(&format!("the peer's result: {said}")), "{said}: {}", err(&c));
    }
    let log = text(&finish(serve, Duration::from_secs(30)));
    assert_eq!(log.matches("FAILED: the peer's result: a CPU figure out of range").count(), 3);
    assert!(!log.contains(" ok: "), "{log}");
}

/// `rdmabench ARGS` with its data directory (and home) under `home`, run there.
fn in_home(home: &std::path::Path, args: &[&str]) -> Output {
    let child = common::rdmabench(false)
        .args(args)
        .current_dir(home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("HOME", home)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, Duration::from_secs(60))
}

/// One error line on stderr, exit 2, containing each of `what`.
fn refused(out: &Output, what: &[&str]) {
    let e = err(out);
    assert_eq!(out.status.code(), Some(2), "{e}{}", text(out));
    assert_eq!(e.lines().count(), 1, "{e}");
    for w in what {
        assert!(e.contains(w), "{w}: {e}");
    }
}

/// A fresh scratch folder.
fn fresh(name: &str) -> std::path::PathBuf {
    let d = scratch(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A store at `path` holding `n` test runs, the host of each `host`.
fn a_store(path: &std::path::Path, n: usize, host: &str) {
    let mut store = rdmabench::store::Store::open(path).unwrap();
    for _ in 0..n {
        let run = rdmabench::store::NewRun {
            kind: "test".into(),
            started: "2026-12-01T00:00:00Z".into(),
            host: host.into(),
            profile: "tcp_bw".into(),
            report: "{}".into(),
            ..Default::default()
        };
        store.record(&run).unwrap();
    }
}

#[test]
fn item5_a_store_that_cannot_take_the_run_stops_it_before_it_starts() {
    let dir = fresh("store-first");
    let broken = dir.join("broken.db");
    std::fs::write(&broken, vec![0x5a; 8192]).unwrap();
    let json = dir.join("r.json");
    // Nothing listens on the port: had the test started, it would wait for a server.
    let start = Instant::now();
    let store = format!("--store={}", broken.display());
    let out = in_home(
        &dir,
        &[
            "tcp-bw",
            "-D",
            "3",
            &store,
            "--json",
            json.to_str().unwrap(),
            "-p",
            &port(),
            "127.0.0.1",
        ],
    );
    refused(&out, &["not a usable SQLite database", "--no-store"]);
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    assert!(!json.exists(), "a JSON was written for a run that never started");
    // rdmabench's version mark, not its tables: qualify refuses before any point runs.
    let marked = dir.join("marked.db");
    rusqlite::Connection::open(&marked).unwrap().execute_batch("PRAGMA user_version = 1;").unwrap();
    let q = dir.join("q");
    let out = in_home(
        &dir,
        &[
            "qualify",
            "quick",
            "--server",
            "127.0.0.1",
            "--store",
            marked.to_str().unwrap(),
            "--out",
            q.to_str().unwrap(),
        ],
    );
    refused(&out, &["no table runs: not a results store this rdmabench made"]);
    assert!(!q.join("qualify.json").exists(), "a point ran before the store was checked");
}

#[test]
fn item6_a_reader_never_creates_a_store_and_reads_one_on_read_only_media() {
    let dir = fresh("readers");
    let missing = dir.join("no/such/dir/results.db");
    for args in [vec!["history"], vec!["diff", "1", "2"], vec!["history", "--json"]] {
        let mut a = args.clone();
        a.extend(["--store", missing.to_str().unwrap()]);
        let out = in_home(&dir, &a);
        refused(&out, &[&format!("no results store at {}", missing.display())]);
        assert!(!dir.join("no").exists(), "{args:?} created a directory");
    }
    // The default store, absent: nothing made under the data directory either.
    let out = in_home(&dir, &["history"]);
    refused(&out, &["no results store at"]);
    assert!(!dir.join("data").exists());
    // A valid (WAL) store on a read-only bind mount.
    if !cfg!(target_os = "linux") || rustix_is_not_root() {
        eprintln!("read-only media: needs root for a mount namespace; not run");
        return;
    }
    let src = fresh("ro-src");
    let ro = fresh("ro-mnt");
    a_store(&src.join("results.db"), 2, "lab1");
    let line = format!(
        "mount --bind -o ro '{}' '{}' && exec '{}' history --store '{}/results.db'",
        src.display(),
        ro.display(),
        env!("CARGO_BIN_EXE_rdmabench"),
        ro.display()
    );
    let child = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", &line])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", err(&out));
    assert_eq!(text(&out).matches("lab1").count(), 2, "{}", text(&out));
}

/// Not root (a mount namespace and a bind mount need it).
fn rustix_is_not_root() -> bool {
    let id = std::process::Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&id.stdout).trim() != "0"
}

#[test]
fn item7_a_default_store_in_a_home_that_cannot_be_written_names_the_way_out() {
    let dir = fresh("no-home");
    // The home's .local is a file: the default store's folder cannot be made.
    std::fs::write(dir.join(".local"), "not a folder").unwrap();
    let child = common::rdmabench(false)
        .args([
            "qualify",
            "quick",
            "--server",
            "127.0.0.1",
            "--out",
            dir.join("q").to_str().unwrap(),
        ])
        .current_dir(&dir)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", &dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(60));
    refused(&out, &["cannot create", "--store PATH", "--no-store"]);
}

#[test]
fn item8_a_hostile_database_is_refused_bounded_and_shown_inert() {
    let dir = fresh("hostile-db");
    // A recursive view where the runs table belongs: refused at once, not run.
    let view = dir.join("view.db");
    rusqlite::Connection::open(&view)
        .unwrap()
        .execute_batch(
            "CREATE TABLE points (run_id, point, figure, unit, median, runs);
             CREATE VIEW runs AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)
               SELECT x AS id, 'test' AS kind, '' AS started, 'h' AS host, NULL AS device,
                      NULL AS firmware, 'p' AS profile, NULL AS server, 1 AS pass, '{}' AS report
               FROM c;
             PRAGMA user_version = 1;",
        )
        .unwrap();
    let start = Instant::now();
    let out = in_home(&dir, &["history", "--store", view.to_str().unwrap()]);
    refused(&out, &["runs is a view, not a table"]);
    assert!(start.elapsed() < Duration::from_secs(10));
    // A trigger on the runs table: refused for writers and readers alike.
    let trig = dir.join("trigger.db");
    a_store(&trig, 1, "h");
    rusqlite::Connection::open(&trig)
        .unwrap()
        .execute_batch("CREATE TRIGGER t AFTER INSERT ON runs BEGIN SELECT 1; END;")
        .unwrap();
    let out = in_home(&dir, &["history", "--store", trig.to_str().unwrap()]);
    refused(&out, &["a trigger (t) on its table runs"]);
    // A 100 MB report: refused by its length, never fetched.
    let big = dir.join("big.db");
    a_store(&big, 2, "h");
    rusqlite::Connection::open(&big)
        .unwrap()
        .execute_batch("UPDATE runs SET report = hex(zeroblob(50000000)) WHERE id = 1;")
        .unwrap();
    let out = in_home(&dir, &["diff", "2", "1", "--store", big.to_str().unwrap()]);
    refused(&out, &["run 1's report is 100000000 bytes, over the 67108864"]);
    // C1 controls and bidi overrides: the same inert text in the table and in --json.
    let odd = dir.join("odd.db");
    a_store(&odd, 1, "lab\u{9b}31m\u{202e}x");
    for json in [false, true] {
        let mut args = vec!["history", "--store", odd.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let out = in_home(&dir, &args);
        assert_eq!(out.status.code(), Some(0), "{}", err(&out));
        let shown = text(&out);
        assert!(!shown.contains('\u{9b}') && !shown.contains('\u{202e}'), "{shown:?}");
        assert!(shown.contains("lab 31m x"), "{shown:?}");
    }
}

#[test]
fn item9_escape_codes_in_a_profile_reach_no_output_raw() {
    let dir = fresh("profile-text");
    let _serving = serving();
    let p = port();
    let serve = spawn(&["serve", "-p", &p, "--timeout", "10", "--count", "1"]);
    wait_listening(&p);
    let profile = dir.join("evil.toml");
    std::fs::write(
        &profile,
        "name = \"lab\\u001b[2J\\u0007\\u0001\"\nrepeats = 1\nwaive = [\"rdma.device\"]\n\n[[test]]\ntest = \"tcp_lat\"\nname = \"t\\u001b]0;owned\\u0007\\u0085<x>&\"\nsizes = [2]\niters = 100\nmax_lat_typical = \"1 s\"\n",
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = in_home(
        &dir,
        &[
            "qualify",
            profile.to_str().unwrap(),
            "--server",
            "127.0.0.1",
            "-p",
            &p,
            "--store",
            dir.join("r.db").to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let _ = finish(serve, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), err(&out));
    let raw = ['\u{1b}', '\u{7}', '\u{1}', '\u{85}'];
    let mut seen = vec![("stdout".to_string(), text(&out)), ("stderr".to_string(), err(&out))];
    for f in ["qualify.json", "report.html", "junit.xml"] {
        seen.push((f.into(), std::fs::read_to_string(out_dir.join(f)).unwrap()));
    }
    let history =
        in_home(&dir, &["history", "--json", "--store", dir.join("r.db").to_str().unwrap()]);
    seen.push(("history".into(), text(&history)));
    let stored = rusqlite::Connection::open(dir.join("r.db"))
        .unwrap()
        .query_row("SELECT profile || report FROM runs", [], |r| r.get::<_, String>(0))
        .unwrap();
    seen.push(("the store".into(), stored));
    for (what, body) in &seen {
        // JSON escapes them as \u001b; the escaped form is raw text too.
        assert!(!body.chars().any(|c| raw.contains(&c)), "{what}: {body:?}");
        assert!(!body.contains("\\u001b") && !body.contains("\\u0007"), "{what}: {body}");
    }
    assert!(text(&out).contains("t ]0;owned <x>&"), "{}", text(&out));
    // junit.xml is XML: the names escaped once.
    let junit = &seen[4].1;
    assert!(junit.contains("t ]0;owned &lt;x&gt;&amp;"), "{junit}");
}

#[test]
fn item10_a_json_fifo_without_reader_and_a_full_stdout_are_errors() {
    let dir = fresh("fifo");
    let fifo = dir.join("r.json");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let start = Instant::now();
    let out =
        in_home(&dir, &["tcp-bw", "--json", fifo.to_str().unwrap(), "-p", &port(), "127.0.0.1"]);
    refused(&out, &[&format!("--json {}: a FIFO with no reader", fifo.display())]);
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    for args in [&["--help"][..], &["tcp-bw", "--help"], &["--version"]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let child = common::rdmabench(false)
            .args(args)
            .stdout(full)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = finish(child, Duration::from_secs(30));
        refused(&out, &["writing output", "No space left on device"]);
    }
}
