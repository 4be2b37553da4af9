//! Hostile peers and hostile local files, round 3 (issue 57), on this host only:
//! a trickling data stream against `serve --max-time`, and what a test does with its
//! files before and after it runs.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

mod common;
use common::{err, finish, text};

/// Held by each test that starts a server on a port of [`port`]: two of this file's
/// servers never race for one port.
static SERVING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serving() -> std::sync::MutexGuard<'static, ()> {
    SERVING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A port free now (other engineers' and tests' servers share this host).
fn port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port().to_string()
}

fn spawn(args: &[&str]) -> Child {
    common::spawn(false, args)
}

fn wait_listening(port: &str) {
    let start = Instant::now();
    while TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `rdmabench ARGS -p PORT 127.0.0.1`, to its end.
fn client(port: &str, args: &[&str]) -> Output {
    let mut a = args.to_vec();
    a.extend(["-p", port, "127.0.0.1"]);
    finish(spawn(&a), Duration::from_secs(90))
}

/// Relays one client's data stream to `to`: its 12-byte greeting at once, then one byte
/// a second, for at most `limit`.
fn trickle(to: String, limit: Duration) -> String {
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
            if server.write_all(&b).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    addr
}

/// Relays one client to `serve` on `to`, its TCP data stream through [`trickle`]: a
/// client whose data arrives one byte a second.
fn trickling_relay(to: String) -> String {
    use rdmabench::session::protocol::{decode_header, encode, HEADER_LEN};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    std::thread::spawn(move || {
        let (mut client, _) = l.accept().unwrap();
        let mut server = TcpStream::connect(to).unwrap();
        let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut c2, &mut s2);
            let _ = s2.shutdown(std::net::Shutdown::Both);
        });
        let mut header = [0u8; HEADER_LEN];
        while server.read_exact(&mut header).is_ok() {
            let mut payload = vec![0u8; decode_header(&header).unwrap() as usize];
            if server.read_exact(&mut payload).is_err() {
                break;
            }
            let mut msg: serde_json::Value = serde_json::from_slice(&payload).unwrap();
            if msg["type"] == "endpoints" {
                for qp in msg["qps"].as_array_mut().unwrap() {
                    let real = qp["addr"].as_str().unwrap().to_string();
                    qp["addr"] = trickle(real, Duration::from_secs(60)).into();
                }
            }
            let frame = encode(&serde_json::to_vec(&msg).unwrap()).unwrap();
            if client.write_all(&frame).is_err() {
                break;
            }
        }
        let _ = client.shutdown(std::net::Shutdown::Both);
    });
    port
}

#[test]
fn item1_a_trickling_client_holds_the_slot_no_longer_than_max_time() {
    let _serving = serving();
    let p = port();
    let serve = spawn(&["serve", "-p", &p, "--timeout", "30", "--max-time", "2", "--count", "2"]);
    wait_listening(&p);
    let relay = trickling_relay(format!("127.0.0.1:{p}"));
    let start = Instant::now();
    let trickled = std::thread::spawn(move || {
        client(&relay, &["tcp-bw", "-s", "65536", "-n", "100000", "--timeout", "60"])
    });
    // The trickled test holds the slot now; a second client comes a second later and
    // may wait 5 s for it: it is served once the first test's 2 s are up.
    std::thread::sleep(Duration::from_secs(1));
    let second = client(&p, &["tcp-bw", "-n", "50", "--timeout", "10"]);
    let served_after = start.elapsed();
    assert_eq!(second.status.code(), Some(0), "{}", err(&second));
    assert!(served_after < Duration::from_secs(6), "served after {served_after:?}");
    let trickled = trickled.join().unwrap();
    assert_eq!(trickled.status.code(), Some(2), "{}", err(&trickled));
    assert!(err(&trickled).contains("(serve --max-time)"), "{}", err(&trickled));
    let log = text(&finish(serve, Duration::from_secs(30)));
    assert!(log.contains("tcp_bw FAILED: the test ran past this server's limit of 2 s"), "{log}");
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
    use rdmabench::session::protocol::{decode_header, encode, HEADER_LEN};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    std::thread::spawn(move || {
        let (mut client, _) = l.accept().unwrap();
        let mut server = TcpStream::connect(to).unwrap();
        let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Both);
        });
        let mut header = [0u8; HEADER_LEN];
        while client.read_exact(&mut header).is_ok() {
            let mut payload = vec![0u8; decode_header(&header).unwrap() as usize];
            if client.read_exact(&mut payload).is_err() {
                break;
            }
            let mut msg: serde_json::Value = serde_json::from_slice(&payload).unwrap();
            if msg["type"] == "result" {
                forge(&mut msg["result"]);
            }
            let frame = encode(&serde_json::to_vec(&msg).unwrap()).unwrap();
            if server.write_all(&frame).is_err() {
                break;
            }
        }
        let _ = server.shutdown(std::net::Shutdown::Both);
    });
    port
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

