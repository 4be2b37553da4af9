//! Hostile peers over the network, round 2 (issue 43), on this host only: a one-shot
//! server's deadline against silent strays, a data port against a silent stranger,
//! `serve --max-time` against tests that would run on, authentication that makes the
//! client prove first and limits failures, and results a client may forge.

use std::net::{IpAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use rdmabench::transport::tcp::{connect_streams, DataListener, StreamOptions};

mod common;
use common::{err, finish, frame, session, text, wait_listening};

use common::free_port as port;

fn spawn(args: &[&str]) -> Child {
    common::spawn(false, args)
}

/// `rdmabench ARGS -p PORT --timeout 10 127.0.0.1`, to its end.
fn client(port: &str, args: &[&str]) -> Output {
    let mut a = args.to_vec();
    a.extend(["-p", port, "--timeout", "10", "127.0.0.1"]);
    finish(spawn(&a), Duration::from_secs(60))
}

fn key_file(name: &str, secret: &str) -> PathBuf {
    common::key_file("rdmabench-hostile-net", name, secret)
}

const TCP_BW_HELLO: &str = r#"{"type":"hello","tool":"x","auth":"00112233445566778899aabbccddeeff","spec":{"kind":{"verb":"send","measure":"bw"},"sizes":[65536],"run":{"iterations":100},"validate":false,"link":{"transport":"tcp","streams":1,"window":null,"nodelay":false}}}"#;

#[test]
fn b1_silent_strays_neither_stretch_a_one_shot_deadline_nor_hold_its_client() {
    // 40 silent connections queued before the real client: it is served at once.
    let p = port();
    let server = spawn(&["tcp-bw", "-p", &p, "--bind", "127.0.0.1", "-n", "50", "--timeout", "20"]);
    wait_listening(&p);
    let strays: Vec<_> =
        (0..40).map(|_| TcpStream::connect(format!("127.0.0.1:{p}")).unwrap()).collect();
    let start = Instant::now();
    let c = client(&p, &["tcp-bw", "-n", "50"]);
    assert!(c.status.success(), "the real client behind the strays: {}", err(&c));
    // Well before the 20 s a stray holding the place would have cost it.
    assert!(start.elapsed() < Duration::from_secs(10), "served in {:?}", start.elapsed());
    let server = finish(server, Duration::from_secs(30));
    assert!(server.status.success(), "{}", err(&server));
    drop(strays);
    // Only strays: the server ends at its --timeout, within a second.
    let p = port();
    let lonely = spawn(&["tcp-bw", "-p", &p, "--bind", "127.0.0.1", "--timeout", "2"]);
    wait_listening(&p);
    let start = Instant::now();
    let strays: Vec<_> =
        (0..40).map(|_| TcpStream::connect(format!("127.0.0.1:{p}")).unwrap()).collect();
    let lonely = finish(lonely, Duration::from_secs(60));
    let took = start.elapsed();
    assert_eq!(lonely.status.code(), Some(2), "{}", err(&lonely));
    assert!(took < Duration::from_secs(3), "--timeout 2 took {took:?}");
    assert!(err(&lonely).contains("within 2 s (--timeout)"), "{}", err(&lonely));
    drop(strays);
}

#[test]
fn b10_a_silent_stranger_on_a_data_port_does_not_stall_the_streams() {
    let opts = StreamOptions {
        window: None,
        nodelay: true,
        timeout: Duration::from_secs(5),
        buf_len: 64,
        end: None,
    };
    let l = DataListener::bind(IpAddr::from([127, 0, 0, 1]), &opts).unwrap();
    let ep = l.endpoint().unwrap();
    // From the client's own address, first in the queue, and silent.
    let silent = TcpStream::connect(ep.addr).unwrap();
    let client = std::thread::spawn(move || connect_streams(&ep, 2, None, &opts).unwrap());
    let start = Instant::now();
    let from = Some(IpAddr::from([127, 0, 0, 1]));
    let server = l.accept_streams(2, &opts, from, || false).unwrap();
    // Not the 5 s of the data timeout the stranger would have held.
    assert!(start.elapsed() < Duration::from_secs(3), "took {:?}", start.elapsed());
    let client = client.join().unwrap();
    assert_eq!(server.len(), 2);
    for (c, s) in client.iter().zip(&server) {
        assert_eq!(c.local_addr(), s.peer_addr(), "the streams in order, the stranger not one");
    }
    assert_ne!(server[0].peer_addr(), silent.local_addr().ok());
}

#[test]
fn b5_max_time_ends_a_test_whose_loops_would_run_on() {
    let p = port();
    let serve = spawn(&["serve", "-p", &p, "--timeout", "10", "--max-time", "3", "--count", "2"]);
    wait_listening(&p);
    for test in [["tcp-lat", "-n", "100000000"], ["tcp-bw", "-n", "100000000"]] {
        let start = Instant::now();
        let c = client(&p, &test);
        let took = start.elapsed();
        assert_eq!(c.status.code(), Some(2), "{test:?}: {}", err(&c));
        assert!(err(&c).contains("(serve --max-time)"), "{test:?}: {}", err(&c));
        assert!(took < Duration::from_secs(10), "{test:?}: --max-time 3 took {took:?}");
    }
    let serve = finish(serve, Duration::from_secs(30));
    let log = text(&serve);
    assert_eq!(log.matches("the test ran past this server's limit of 3 s").count(), 2, "{log}");
}

#[test]
fn b6_a_weak_key_is_refused_at_start_up_in_one_line() {
    for (name, weak, why) in [
        ("lower", "abcdefghijklmnop\n", "too weak (about 75 bits; at least 80)"),
        ("same", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "only 1 different bytes"),
        ("short", "Ab1!Ab1!\n", "8 bytes; use at least 16"),
    ] {
        let key = key_file(name, weak);
        let p = port();
        let out = finish(
            spawn(&["serve", "-p", &p, "--auth-key", key.to_str().unwrap()]),
            Duration::from_secs(10),
        );
        assert_eq!(out.status.code(), Some(2), "{name}");
        let e = err(&out);
        assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
        assert!(e.contains(why), "{name}: {e}");
    }
}

#[test]
fn b6_the_client_proves_first_and_failures_make_an_address_wait() {
    let p = port();
    let key = key_file("good", "correct horse battery staple\n");
    let k = key.to_str().unwrap();
    let serve = spawn(&["serve", "-p", &p, "--timeout", "3", "--count", "1", "--auth-key", k]);
    wait_listening(&p);
    // A stranger's hello gets the server's nonce and nothing keyed.
    let answer = session(&p, &[frame(TCP_BW_HELLO)]);
    assert!(answer.contains(r#""type":"challenge""#), "{answer}");
    assert!(!answer.contains(r#""proof":"#), "the server proves nothing first: {answer}");
    // A peer of the old protocol is told so.
    let mut old = frame(TCP_BW_HELLO);
    old[4..6].copy_from_slice(&2u16.to_be_bytes());
    let answer = session(&p, &[old]);
    assert!(answer.contains("this side speaks 3, the peer 2"), "{answer}");
    // Five made-up proofs; then this address must wait, even with the key.
    let forged = frame(&format!(r#"{{"type":"proof","proof":"{}"}}"#, "ab".repeat(32)));
    for _ in 0..5 {
        let answer = session(&p, &[frame(TCP_BW_HELLO), forged.clone()]);
        assert!(answer.contains("the client's proof does not hold"), "{answer}");
        assert!(!answer.contains(r#""type":"proof""#), "{answer}");
    }
    let held = client(&p, &["tcp-bw", "-n", "50", "--auth-key", k]);
    assert_eq!(held.status.code(), Some(2));
    assert!(err(&held).contains("too many failed attempts from 127.0.0.1"), "{}", err(&held));
    // After the back-off (1 s after the fifth failure), the key is heard again.
    std::thread::sleep(Duration::from_millis(1200));
    let ok = client(&p, &["tcp-bw", "-n", "50", "--auth-key", k]);
    assert!(ok.status.success(), "{}", err(&ok));
    let serve = finish(serve, Duration::from_secs(30));
    assert!(serve.status.success(), "{}", err(&serve));
    assert!(text(&serve).contains("tcp_bw ok"), "{}", text(&serve));
}

/// Relays one client to `serve` on `to`, changing each `result` the client sends with
/// `forge`: a client that reports what it likes.
fn forging_relay(
    to: String,
    forge: fn(&mut serde_json::Value),
) -> (String, std::thread::JoinHandle<()>) {
    common::relay::rewriting(to, true, move |msg| {
        if msg["type"] == "result" {
            forge(&mut msg["result"]);
        }
    })
}

#[test]
#[cfg_attr(
    windows,
    ignore = "under wine the relayed client's connection ends mid-frame (not traced)"
)]
fn b9_a_clients_forged_result_is_refused_not_logged() {
    let p = port();
    let serve = spawn(&["serve", "-p", &p, "--timeout", "10", "--count", "1"]);
    wait_listening(&p);
    let (relay, relayed) = forging_relay(format!("127.0.0.1:{p}"), |r| {
        r["bw"]["avg_bytes_per_sec"] = serde_json::json!(1e300);
    });
    let c = client(&relay, &["tcp-bw", "-n", "50"]);
    relayed.join().unwrap();
    assert_eq!(c.status.code(), Some(2), "{}", err(&c));
    assert!(err(&c).contains("the peer's result: a bandwidth out of range"), "{}", err(&c));
    let serve = finish(serve, Duration::from_secs(30));
    let log = text(&serve);
    assert!(log.contains("tcp_bw FAILED: the peer's result: a bandwidth out of range"), "{log}");
    assert!(!log.contains("tcp_bw ok"), "{log}");
}
