//! `serve` and the one-shot servers against hostile or careless clients, over real
//! sockets on this host: floods of idle connections, a second client while a test
//! runs, tests over the server's memory cap, shared-secret authentication, stray
//! connections to a one-shot server. Each case ends with a normal client served.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Output};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{err, finish, frame, session, text};

static NEXT_PORT: AtomicU16 = AtomicU16::new(19800);

fn port() -> String {
    NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string()
}

fn spawn(args: &[&str]) -> Child {
    common::spawn(false, args)
}

/// `rdmabench ARGS -p PORT 127.0.0.1`, to its end.
fn client(port: &str, args: &[&str]) -> Output {
    let mut a = args.to_vec();
    a.extend(["-p", port, "--timeout", "10", "127.0.0.1"]);
    finish(spawn(&a), Duration::from_secs(60))
}

fn serve(port: &str, extra: &[&str]) -> Child {
    let mut a = vec!["serve", "-p", port, "--timeout", "3"];
    a.extend(extra);
    let child = spawn(&a);
    wait_listening(port);
    child
}

fn wait_listening(port: &str) {
    let start = Instant::now();
    while TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

const TCP_BW_HELLO: &str = r#"{"type":"hello","tool":"x","spec":{"kind":{"verb":"send","measure":"bw"},"sizes":[65536],"run":{"iterations":100},"validate":false,"link":{"transport":"tcp","streams":1,"window":null,"nodelay":false}}}"#;

fn key_file(name: &str, secret: &str) -> PathBuf {
    let p = common::scratch("rdmabench-serve").join(name);
    std::fs::write(&p, secret).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    p
}

#[test]
fn a_flood_of_idle_connections_and_slow_clients_starve_nobody() {
    let port = port();
    let serve = serve(&port, &["--count", "2"]);
    let addr = format!("127.0.0.1:{port}");
    // 200 connections that never speak: more than the 64 that may owe a hello.
    let idle: Vec<TcpStream> = (0..200).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    // One that beats before its hello, one that trickles a hello a byte at a time.
    let mut beater = TcpStream::connect(&addr).unwrap();
    let beats = std::thread::spawn(move || {
        for _ in 0..20 {
            if beater.write_all(&frame(r#"{"type":"heartbeat"}"#)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let mut trickler = TcpStream::connect(&addr).unwrap();
    let trickle = std::thread::spawn(move || {
        for b in frame(TCP_BW_HELLO) {
            if trickler.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    // Real clients are served meanwhile, at once.
    let start = Instant::now();
    let lat = client(&port, &["tcp-lat", "-n", "50"]);
    assert!(lat.status.success(), "{}", err(&lat));
    let bw = client(&port, &["tcp-bw", "-n", "100", "-P", "2"]);
    assert!(bw.status.success(), "{}", err(&bw));
    assert!(start.elapsed() < Duration::from_secs(15), "served in {:?}", start.elapsed());
    let serve = finish(serve, Duration::from_secs(30));
    assert!(serve.status.success(), "{}", err(&serve));
    let log = text(&serve);
    assert!(log.contains("dropped: 64 connections owed their hello"), "{log}");
    assert!(log.contains("tcp_lat ok") && log.contains("tcp_bw ok"), "{log}");
    drop(idle);
    beats.join().unwrap();
    trickle.join().unwrap();
}

#[test]
fn silent_beating_and_trickling_clients_are_dropped_within_the_timeout() {
    let port = port();
    let serve = serve(&port, &["--count", "1"]);
    let addr = format!("127.0.0.1:{port}");
    let start = Instant::now();
    let mut silent = TcpStream::connect(&addr).unwrap();
    let mut beater = TcpStream::connect(&addr).unwrap();
    beater.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut answer = Vec::new();
    // Beats for 6 s: twice the timeout. The server must close before.
    let mut closed_after = None;
    for _ in 0..30 {
        if beater.write_all(&frame(r#"{"type":"heartbeat"}"#)).is_err() {
            closed_after = Some(start.elapsed());
            break;
        }
        let mut b = [0u8; 512];
        match beater.read(&mut b) {
            Ok(0) => {
                closed_after = Some(start.elapsed());
                break;
            }
            Ok(n) => answer.extend_from_slice(&b[..n]),
            Err(_) => {}
        }
    }
    let closed_after = closed_after.expect("a heartbeat-only client is dropped");
    assert!(closed_after < Duration::from_secs(5), "dropped after {closed_after:?} (timeout 3 s)");
    assert!(String::from_utf8_lossy(&answer).contains("waiting for hello"), "{answer:?}");
    silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let _ = silent.read_to_end(&mut rest);
    assert!(start.elapsed() < Duration::from_secs(5), "the silent one too");
    let ok = client(&port, &["tcp-lat", "-n", "20"]);
    assert!(ok.status.success(), "{}", err(&ok));
    let serve = finish(serve, Duration::from_secs(30));
    assert!(serve.status.success(), "{}", err(&serve));
    let log = text(&serve);
    let silent_lines = log.lines().filter(|l| l.contains("sent no whole message for 3 s")).count();
    assert_eq!(silent_lines, 2, "both logged with their address:\n{log}");
    assert!(log.lines().all(|l| !l.contains("refused") || l.contains(" 127.0.0.1:")), "{log}");
}

#[test]
fn a_second_client_is_told_the_server_is_busy_and_by_whom() {
    let port = port();
    let serve = serve(&port, &["--count", "2"]);
    // The second client waits up to the timeout (3 s) for the first test to end.
    let long = spawn(&["tcp-bw", "-D", "8", "-f", "1", "-p", &port, "127.0.0.1"]);
    std::thread::sleep(Duration::from_millis(1500));
    let second = client(&port, &["tcp-lat", "-n", "20"]);
    assert_eq!(second.status.code(), Some(2));
    let e = err(&second);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("server busy: running tcp_bw since "), "{e}");
    assert!(!e.contains("127.0.0.1:"), "a stranger is not told who runs: {e}");
    let long = finish(long, Duration::from_secs(60));
    assert!(long.status.success(), "the running test is undisturbed: {}", err(&long));
    let after = client(&port, &["tcp-lat", "-n", "20"]);
    assert!(after.status.success(), "{}", err(&after));
    let serve = finish(serve, Duration::from_secs(30));
    assert!(serve.status.success(), "{}", err(&serve));
    let log = text(&serve);
    assert!(log.contains("tcp_lat refused: server busy") && log.contains("(busy)"), "{log}");
}

#[test]
fn tests_over_the_memory_or_time_caps_are_refused_and_the_caps_are_checked() {
    let port = port();
    let serve = serve(&port, &["--count", "1", "--max-memory", "16M", "--max-time", "60"]);
    let long = client(&port, &["tcp-bw", "-D", "61"]);
    assert_eq!(long.status.code(), Some(2));
    assert!(
        err(&long)
            .contains("the test runs 61 s; this server allows 60 s per test (serve --max-time)"),
        "{}",
        err(&long)
    );
    let big = client(&port, &["tcp-bw", "-s", "8M", "-P", "4", "-n", "5"]);
    assert_eq!(big.status.code(), Some(2));
    assert!(
        err(&big).contains(
            "the test needs 32 MiB of buffers; this server allows 16 MiB (serve --max-memory)"
        ),
        "{}",
        err(&big)
    );
    // A hostile hello far over every limit: refused before anything is allocated.
    let huge = TCP_BW_HELLO.replace("[65536]", "[4611686018427387904]");
    let answer = session(&port, &[frame(&huge)]);
    assert!(answer.contains("usage"), "{answer}");
    let ok = client(&port, &["tcp-bw", "-s", "1M", "-P", "2", "-n", "20"]);
    assert!(ok.status.success(), "{}", err(&ok));
    let serve = finish(serve, Duration::from_secs(30));
    assert!(serve.status.success(), "{}", err(&serve));
    assert!(text(&serve).contains("up to 60 s and 16 MiB of buffers"), "{}", text(&serve));
    for bad in [
        &["--max-memory", "0"][..],
        &["--max-memory", "512K"],
        &["--max-memory", "5G"],
        &["--max-time", "0"],
        &["--max-time", "86401"],
    ] {
        let out = common::rdmabench(false).arg("serve").args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(err(&out).contains(bad[0]), "{}", err(&out));
    }
}

#[test]
fn with_auth_key_only_clients_holding_the_key_are_served() {
    let port = port();
    let key = key_file("key", "correct horse battery staple\n");
    let other = key_file("other", "another secret of some length\n");
    let (key_s, other_s) = (key.to_str().unwrap(), other.to_str().unwrap());
    let serve = serve(&port, &["--count", "1", "--auth-key", key_s]);
    // No key: refused, and told why.
    let none = client(&port, &["tcp-lat", "-n", "20"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        err(&none).contains(
            "authentication failed: the server requires --auth-key and the client has none"
        ),
        "{}",
        err(&none)
    );
    // Another key: refused by the server, which checks the client's proof first.
    let wrong = client(&port, &["tcp-lat", "-n", "20", "--auth-key", other_s]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        err(&wrong).contains(
            "authentication failed: the client's proof does not hold (another --auth-key, or relayed by a third host)"
        ),
        "{}",
        err(&wrong)
    );
    // What the server sends a stranger that asks to authenticate: no key, no buffer.
    let hello = TCP_BW_HELLO
        .replace(r#""tool":"x","#, r#""tool":"x","auth":"00112233445566778899aabbccddeeff","#);
    let answer = session(&port, &[frame(&hello)]);
    assert!(answer.contains(r#""type":"challenge""#), "{answer}");
    assert!(!answer.contains("correct horse"), "the key never crosses the wire: {answer}");
    assert!(!answer.contains(r#""type":"accept""#), "nothing opened for it: {answer}");
    // A client that answers the challenge with a made-up proof is refused.
    let proof = frame(&format!(r#"{{"type":"proof","proof":"{}"}}"#, "ab".repeat(32)));
    let answer = session(&port, &[frame(&hello), proof]);
    assert!(answer.contains("the client's proof does not hold"), "{answer}");
    // The key: served.
    let ok = client(&port, &["tcp-bw", "-n", "50", "--auth-key", key_s]);
    assert!(ok.status.success(), "{}", err(&ok));
    let serve = finish(serve, Duration::from_secs(30));
    assert!(serve.status.success(), "{}", err(&serve));
    let log = text(&serve);
    assert!(log.contains("clients must hold --auth-key"), "{log}");
    assert_eq!(log.matches("(auth)").count(), 3, "{log}");
    assert!(log.contains("tcp_bw ok"), "{log}");
}

#[test]
fn a_client_with_a_key_refuses_a_server_without_one() {
    let port = port();
    let key = key_file("client-key", "0123456789abcdef0123456789\n");
    let serve = serve(&port, &["--count", "1"]);
    let out = client(&port, &["tcp-lat", "-n", "20", "--auth-key", key.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err(&out).contains("the client requires --auth-key and the server has none"),
        "{}",
        err(&out)
    );
    // One-shot server and client with the same key.
    let p2 = self::port();
    let k = key.to_str().unwrap();
    let server = spawn(&["tcp-lat", "-n", "20", "-p", &p2, "--auth-key", k]);
    let c = client(&p2, &["tcp-lat", "-n", "20", "--auth-key", k]);
    assert!(c.status.success(), "{}", err(&c));
    let server = finish(server, Duration::from_secs(30));
    assert!(server.status.success(), "{}", err(&server));
    // The server learns it only from the client, after its accept: its test failed.
    let serve = finish(serve, Duration::from_secs(30));
    assert_eq!(serve.status.code(), Some(2));
    assert!(
        text(&serve).contains("FAILED: the peer stopped: authentication failed"),
        "{}",
        text(&serve)
    );
}

#[test]
fn a_one_shot_server_outlives_stray_connections_and_names_its_port() {
    // -p 0: the system picks the port, and the server says which.
    let mut server = common::rdmabench(false)
        .args(["tcp-bw", "-p", "0", "--bind", "127.0.0.1", "-n", "50", "--timeout", "20"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let mut stdout = server.stdout.take().unwrap();
    let mut b = [0u8; 1];
    while !first.ends_with('\n') && stdout.read(&mut b).unwrap() == 1 {
        first.push(b[0] as char);
    }
    let port = first.trim().rsplit(' ').next().unwrap().to_string();
    assert!(first.contains("Waiting for a client on port "), "{first}");
    assert_ne!(port, "0");
    // --bind: another local address finds nobody there.
    assert!(TcpStream::connect(format!("127.0.0.2:{port}")).is_err(), "bound to 127.0.0.1 only");
    // A port scan, a reachability check and garbage do not end it.
    drop(TcpStream::connect(format!("127.0.0.1:{port}")).unwrap());
    let mut g = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    g.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let _ = g.read_to_end(&mut Vec::new());
    let c = client(&port, &["tcp-bw", "-n", "50"]);
    assert!(c.status.success(), "{}", err(&c));
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let server = finish(server, Duration::from_secs(30));
    assert!(server.status.success(), "{}", err(&server));
    assert!(rest.contains("BW average"), "{rest}");
    // With nobody but strays, the timeout names the last of them.
    let p = self::port();
    let lonely = spawn(&["tcp-bw", "-p", &p, "--timeout", "2"]);
    wait_listening(&p);
    let mut g = TcpStream::connect(format!("127.0.0.1:{p}")).unwrap();
    g.write_all(b"SSH-2.0-OpenSSH\r\n").unwrap();
    let lonely = finish(lonely, Duration::from_secs(20));
    assert_eq!(lonely.status.code(), Some(2));
    let e = err(&lonely);
    assert!(e.contains("no client said hello within 2 s") && e.contains("does not speak"), "{e}");
}

#[test]
fn clients_cannot_bind_and_need_a_real_port() {
    for (args, says) in [
        (&["tcp-bw", "--bind", "127.0.0.1", "127.0.0.1"][..], "--bind: only a server listens"),
        (&["write-bw", "-p", "0", "127.0.0.1"][..], "-p 0: a client needs the server's port"),
        (&["compare"][..], "<HOST>"),
    ] {
        let out = common::rdmabench(false).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(err(&out).contains(says), "{args:?}: {}", err(&out));
        assert_eq!(err(&out).lines().count(), 1);
    }
}

#[test]
fn a_fake_server_that_only_beats_cannot_hold_a_client_past_its_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 4096];
        let _ = s.read(&mut hello);
        for _ in 0..40 {
            if s.write_all(&frame(r#"{"type":"heartbeat"}"#)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    let start = Instant::now();
    let out = finish(
        spawn(&["tcp-bw", "-n", "10", "-p", &port, "--timeout", "2", "127.0.0.1"]),
        Duration::from_secs(30),
    );
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(2));
    assert!(took < Duration::from_secs(4), "--timeout 2 honoured: took {took:?}");
    assert!(err(&out).contains("sent no whole message for 2 s"), "{}", err(&out));
    fake.join().unwrap();
}

#[test]
fn a_one_shot_servers_test_has_the_whole_timeout_however_late_its_client_came() {
    // The hello gets what is left of the wait; what follows gets --timeout again.
    let port = port();
    let server = spawn(&["tcp-bw", "-p", &port, "--timeout", "3"]);
    wait_listening(&port);
    std::thread::sleep(Duration::from_millis(1500));
    let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    let hello = TCP_BW_HELLO.replace(r#""iterations":100"#, r#""iterations":5000"#);
    s.write_all(&frame(&hello)).unwrap();
    // Then silence, where the client's endpoints should come.
    let start = Instant::now();
    let server = finish(server, Duration::from_secs(30));
    assert_eq!(server.status.code(), Some(2));
    let e = err(&server);
    assert!(e.contains("the peer sent no whole message for 3 s (waiting for endpoints)"), "{e}");
    assert!(start.elapsed() >= Duration::from_millis(2800), "{:?}", start.elapsed());
    drop(s);
}

/// `compare` against `serve` on a host without RDMA (this host, and the Windows build
/// under wine in ci/test): the TCP series are measured with this platform's own CPU
/// counters, and every RDMA point fails naming what the platform lacks.
#[test]
fn compare_against_serve_measures_the_tcp_series_and_names_what_rdma_lacks() {
    // Not a pass where it cannot check: on a host with RDMA, it fails saying so
    // (tests/lab_compare.rs covers compare with a device; skip this one there).
    assert!(
        !std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some()),
        "this host has RDMA devices: this test needs a host without (--skip compare_against_serve)"
    );
    let port = port();
    let mut server = serve(&port, &[]);
    let out_dir = common::scratch("rdmabench-serve").join(format!("compare-{port}"));
    let out = out_dir.display().to_string();
    // 32 MiB a bandwidth point: Windows (and wine) count process time in whole ticks of
    // 10-15.6 ms, and at 2 MiB a point the server's six points summed to 0.03-0.09 s
    // under wine, and once (ci/test, wine beside the lab's boot) to none; at 32 MiB
    // 0.46-0.65 s.
    let sizes = ["--sizes", "4K,64K", "--bytes", "32M", "--lat-bytes", "64K", "-P", "2"];
    let mut args = vec!["compare", "--out", &out, "--quiet"];
    args.extend(sizes);
    let compare = client(&port, &args);
    let _ = server.kill();
    let _ = server.wait();
    // Some points failed: exit 1, and the results are all there.
    assert_eq!(compare.status.code(), Some(1), "{}", err(&compare));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let rows = json["rows"].as_array().unwrap();
    // (A Linux kernel without RDMA refuses libibverbs' first call.)
    let missing = if cfg!(windows) {
        "no NetworkDirect provider is installed"
    } else {
        "ibv_get_device_list"
    };
    let own = if cfg!(windows) { "windows" } else { "linux" };
    let (mut tcp, mut rdma) = (0, 0);
    // Windows counts process time in clock ticks (15.6 ms; wine's 10 ms): a point may
    // show none, the series together must (the budget above makes it many ticks).
    let mut cpu_s = [0.0f64; 2];
    for row in rows {
        let series = row["series"].as_str().unwrap();
        if series.starts_with("tcp_") {
            tcp += 1;
            let r = &row["result"];
            assert!(row["error"].is_null(), "{row}");
            if series.starts_with("tcp_bw") {
                let streams = if series == "tcp_bw_2" { 2 } else { 1 };
                let moved = r["bw"]["bytes"].as_u64().unwrap();
                assert_eq!(moved, r["received_bytes"].as_u64().unwrap(), "{row}");
                assert_eq!(
                    moved,
                    r["iterations"].as_u64().unwrap() * r["size"].as_u64().unwrap() * streams
                );
            }
            for (side, spent) in ["client", "server"].into_iter().zip(&mut cpu_s) {
                let cpu = &r["cpu"][side];
                assert_eq!(cpu["source"], own, "{series} {side}: {cpu}");
                assert!(cpu["peak_resident_bytes"].as_u64().unwrap() > 0, "{series} {side}: {cpu}");
                *spent += cpu["process_user_s"].as_f64().unwrap()
                    + cpu["process_system_s"].as_f64().unwrap();
            }
        } else {
            rdma += 1;
            let message = row["error"]["message"].as_str().unwrap();
            assert_eq!(row["error"]["kind"], "no_device", "{series}: {message}");
            assert!(message.contains(missing), "{series}: {message}");
        }
    }
    // Two sizes of TCP 1 stream, 2 streams and latency; of the six RDMA series.
    assert_eq!((tcp, rdma), (6, 12), "{rows:?}");
    assert!(cpu_s.iter().all(|&s| s > 0.0), "process CPU seconds (client, server): {cpu_s:?}");
    assert!(text(&compare).contains("12 of 18 points failed"), "{}", text(&compare));
}
