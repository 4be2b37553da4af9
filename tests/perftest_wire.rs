//! `--perftest` before any device is involved: the version exchange, peers that are
//! too old or not perftest at all, strays at a server, and the mix-ups of the two
//! protocols, each ending in one line that names the cause, within the timeout.
//! (The tests against perftest itself are in lab_perftest.rs.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdout};
use std::time::{Duration, Instant};

mod common;
use common::{err, finish, spawn};

/// A version record as perftest writes it.
fn version(v: &str) -> [u8; 16] {
    let mut raw = [0u8; 16];
    raw[..v.len()].copy_from_slice(v.as_bytes());
    raw
}

/// A `--perftest` server on a port the system picks; returns it and the port.
fn server(test: &str, timeout: &str) -> (Child, u16, BufReader<ChildStdout>) {
    let mut s =
        spawn(false, &[test, "--perftest", "--backend", "verbs", "-p", "0", "--timeout", timeout]);
    let mut out = BufReader::new(s.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let port = line
        .trim()
        .strip_prefix("Waiting for a perftest client on port ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (s, port, out)
}

#[test]
fn a_perftest_older_than_5_70_is_refused_by_name_without_a_wait() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut theirs = [0u8; 16];
        s.read_exact(&mut theirs).unwrap();
        s.write_all(&version("5.60")).unwrap();
        // Keep the connection open: the client must end on the version, not on a close.
        std::thread::sleep(Duration::from_secs(5));
        theirs
    });
    let start = Instant::now();
    let client = spawn(
        false,
        &[
            "write-bw",
            "--perftest",
            "--backend",
            "verbs",
            "-p",
            &port,
            "--timeout",
            "30",
            "127.0.0.1",
        ],
    );
    let client = finish(client, Duration::from_secs(20));
    assert_eq!(client.status.code(), Some(2), "{}", err(&client));
    let e = err(&client);
    assert!(e.contains("the peer is perftest 5.60"), "{e}");
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    assert!(start.elapsed() < Duration::from_secs(15), "it waited: {:?}", start.elapsed());
    // What it announced: a version perftest 5.70 and later accept, NUL-padded.
    assert_eq!(fake.join().unwrap(), version("6.06"));
}

#[test]
fn a_perftest_mode_client_names_a_peer_that_is_not_perftest() {
    // rdmabench's own server answers the 16 bytes with its refusal, a framed message.
    // (A TCP server: a verbs one finds its device before it listens, and the host that
    // runs these tests may have none; the refusal is the control channel's, the same.)
    let (mut own, port) = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let s = spawn(false, &["tcp-bw", "-p", &port.to_string(), "--timeout", "5"]);
        (s, port)
    };
    std::thread::sleep(Duration::from_millis(500));
    let client = spawn(
        false,
        &[
            "write-bw",
            "--perftest",
            "--backend",
            "verbs",
            "-p",
            &port.to_string(),
            "--timeout",
            "10",
            "127.0.0.1",
        ],
    );
    let client = finish(client, Duration::from_secs(30));
    let _ = own.kill();
    let _ = own.wait();
    assert_eq!(client.status.code(), Some(2), "{}", err(&client));
    let e = err(&client);
    assert!(e.contains("does not speak perftest's exchange") && e.contains("RDMB"), "{e}");
}

#[test]
fn a_perftest_mode_server_outlasts_strays_and_names_the_last_one() {
    let start = Instant::now();
    let (s, port, _out) = server("read-lat", "4");
    // Garbage, then a perftest too old: each gets the version (perftest's order: both
    // versions cross, then each side judges), is refused, and the wait goes on.
    for first in [*b"GET / HTTP/1.1\r\n", version("5.60")] {
        let mut stray = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stray.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stray.write_all(&first).unwrap();
        let mut answer = Vec::new();
        stray.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, version("6.06"), "the version, then the end of the connection");
    }
    let s = finish(s, Duration::from_secs(30));
    assert_eq!(s.status.code(), Some(2), "{}", err(&s));
    let e = err(&s);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 3, "{e}");
    assert!(lines[0].contains("ignored") && lines[0].contains("GET / HTTP"), "{e}");
    assert!(lines[1].contains("ignored") && lines[1].contains("perftest 5.60"), "{e}");
    assert!(
        lines[2].contains("no perftest client within 4 s (--timeout)")
            && lines[2].contains("the peer is perftest 5.60"),
        "{e}"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_perftest_mode_server_answers_its_client_past_silent_strays() {
    let (s, port, _out) = server("write-bw", "10");
    // Five connections that never say a word, held open...
    let strays: Vec<TcpStream> =
        (0..5).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    // ...then a perftest client: its version is answered at once, not after the wait.
    let start = Instant::now();
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    client.write_all(&version("6.06")).unwrap();
    let mut answer = [0u8; 16];
    client.read_exact(&mut answer).unwrap_or_else(|e| panic!("no version back: {e}"));
    assert_eq!(answer, version("6.06"));
    assert!(start.elapsed() < Duration::from_secs(3), "answered after {:?}", start.elapsed());
    drop((client, strays));
    let s = finish(s, Duration::from_secs(30));
    assert_eq!(s.status.code(), Some(2), "the client left: {}", err(&s));
    assert!(!err(&s).contains("no perftest client"), "{}", err(&s));
}

#[test]
fn rdmabenchs_own_client_at_a_perftest_port_is_told_about_perftest() {
    let (s, port, _out) = server("write-bw", "5");
    let client = spawn(
        false,
        &[
            "write-bw",
            "--backend",
            "verbs",
            "-p",
            &port.to_string(),
            "--timeout",
            "10",
            "127.0.0.1",
        ],
    );
    let client = finish(client, Duration::from_secs(30));
    assert_eq!(client.status.code(), Some(2), "{}", err(&client));
    // The server answered the hello's first 16 bytes with its version, as perftest does.
    assert!(err(&client).contains("perftest is spoken to with --perftest"), "{}", err(&client));
    let s = finish(s, Duration::from_secs(30));
    assert!(err(&s).contains("does not speak perftest's exchange"), "{}", err(&s));
}

#[test]
fn what_perftest_cannot_carry_is_refused_by_flag() {
    let key = common::key_file("rdmabench-perftest-wire", "key", "correct horse battery staple\n");
    let key = key.to_str().unwrap();
    for (test, flags, says) in [
        ("write-bw", &["--reversed"][..], "--reversed is not run against perftest yet"),
        ("send-bw", &["--send_with_imm"][..], "--send_with_imm are not run against perftest yet"),
        ("write-bw", &["--validate"][..], "--validate: perftest neither lays nor checks"),
        ("write-bw", &["-D", "4"][..], "-D is not run against perftest yet"),
        ("write-bw", &["--auth-key", key][..], "perftest has no --auth-key"),
        ("write-bw", &["--backend", "nd"][..], "perftest runs over verbs"),
    ] {
        let mut args = vec![test, "--perftest"];
        if !flags.contains(&"--backend") {
            args.extend(["--backend", "verbs"]);
        }
        args.extend(flags);
        args.push("127.0.0.1");
        let out = finish(spawn(false, &args), Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", err(&out));
        assert!(err(&out).contains(says), "{flags:?}: {}", err(&out));
    }
}
