//! The perftest-style tests over NetworkDirect, run in Linux CI: server and client are
//! two threads of this process, each going through the same `parse` + `run` as the
//! binary, with `--backend nd` and the software provider standing in for a vendor's.
//! They check what moved and what was reported, as the lab tests do over verbs.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

// Ports of their own: ci/test runs two test binaries at a time, and tests/tcp.rs starts
// at 19600.
static NEXT_PORT: AtomicU16 = AtomicU16::new(20200);

/// One side, as `main` runs it: exit status (2 on errors) and what it printed.
fn side(args: Vec<String>) -> (u8, String) {
    let out = Shared::default();
    let code = side_to(args, &out);
    (code, out.text())
}

/// [`side`], its output going to `out` as it runs.
fn side_to(args: Vec<String>, out: &Shared) -> u8 {
    let mut out = out.clone();
    match rdmabench::cli::parse(std::iter::once("rdmabench".to_string()).chain(args)) {
        Ok(Some(cli)) => match rdmabench::run(cli, &mut out) {
            Ok(code) => code,
            Err(e) => {
                let _ = writeln!(out, "rdmabench: {e}");
                e.kind.exit_code()
            }
        },
        Ok(None) => 0,
        Err(e) => {
            let _ = writeln!(out, "rdmabench: {e}");
            e.kind.exit_code()
        }
    }
}

/// A side's output, readable by the test while the side runs.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Shared {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Waits until the output holds `line` (a minute at most: then the test goes on,
    /// and fails on what the side said).
    fn wait_for(&self, line: &str) {
        let start = Instant::now();
        while !self.text().contains(line) && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Run {
    server: (u8, String),
    client: (u8, String),
    json: Value,
}

fn json_path(tag: &str) -> PathBuf {
    common::scratch("rdmabench-nd-perf").join(format!("{tag}.json"))
}

/// Runs `test` over ND with the same flags on both sides; the client writes JSON.
fn pair(test: &str, flags: &[&str]) -> Run {
    nd_soft::install();
    let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let json = json_path(&format!("{test}-{port}"));
    let mut args: Vec<String> = [test, "--backend", "nd", "-p", &port, "--timeout", "10"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(flags.iter().map(|s| s.to_string()));
    let server_args = args.clone();
    let server = std::thread::spawn(move || side(server_args));
    let mut client_args = args;
    client_args.extend(["--json".into(), json.display().to_string(), "127.0.0.1".into()]);
    let client = side(client_args);
    let server = server.join().expect("the server thread returns");
    let json = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    Run { server, client, json }
}

fn ok(test: &str, flags: &[&str]) -> Run {
    let r = pair(test, flags);
    assert_eq!(r.client.0, 0, "client of {test} {flags:?}:\n{}", r.client.1);
    assert_eq!(r.server.0, 0, "server of {test} {flags:?}:\n{}", r.server.1);
    assert_eq!(r.json["test"], test.replace('-', "_"));
    r
}

fn rows(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(' ') && l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .map(String::from)
        .collect()
}

#[test]
fn bandwidth_tests_move_what_they_report_over_nd() {
    for test in ["write-bw", "read-bw", "send-bw"] {
        let r = ok(test, &["-n", "400", "-s", "4096"]);
        let res = &r.json["results"][0];
        assert_eq!(res["size"], 4096);
        assert_eq!(res["iterations"], 400);
        let b = &res["bw"];
        assert_eq!(b["messages"], 400, "{test}");
        assert_eq!(b["bytes"], 400 * 4096, "{test}: bytes = messages × size");
        let avg = b["avg_bytes_per_sec"].as_f64().unwrap();
        let window = b["window_ns"].as_f64().unwrap();
        assert!((avg - (400.0 * 4096.0) / (window / 1e9)).abs() / avg < 1e-9, "{test}");
        // perftest's layout, as over verbs: header, address lines, the same columns.
        let head = &r.client.1;
        assert!(head.contains("Transport type : NetworkDirect"), "{head}");
        assert!(head.contains(" Link type       : NetworkDirect"), "{head}");
        assert!(head.contains(" local address: NetworkDirect 127.0.0.1"), "{head}");
        assert!(head.contains(" remote address: NetworkDirect 127.0.0.1:"), "{head}");
        assert!(
            head.contains(
                " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
            ),
            "{head}"
        );
        let c = rows(&r.client.1);
        assert_eq!(c.len(), 1, "{head}");
        assert_eq!(c, rows(&r.server.1), "both sides print the same row");
        let fields: Vec<&str> = c[0].split_whitespace().take(2).collect();
        assert_eq!(fields, ["4096", "400"], "{}", c[0]);
        assert_eq!(r.json["params"]["link_layer"], "NetworkDirect");
    }
}

#[test]
fn latency_tests_report_every_sample_over_nd() {
    for (test, samples) in [("write-lat", 300), ("read-lat", 300), ("send-lat", 300)] {
        let r = ok(test, &["-n", "300"]);
        let lat = &r.json["results"][0]["lat"];
        assert_eq!(lat["samples"], samples, "{test}: {lat}");
        let hist: u64 =
            lat["histogram"].as_array().unwrap().iter().map(|b| b[1].as_u64().unwrap()).sum();
        assert_eq!(hist, samples, "{test}: every sample is in the histogram");
        let f = |k: &str| lat[k].as_f64().unwrap();
        assert!(0.0 < f("t_min_us") && f("t_min_us") <= f("t_typical_us"), "{test}: {lat}");
        assert!(f("t_typical_us") <= f("p99_us") && f("p99_us") <= f("t_max_us"), "{test}: {lat}");
        assert!(
            r.client
                .1
                .contains(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]"),
            "{}",
            r.client.1
        );
        assert_eq!(rows(&r.client.1).len(), 1);
    }
}

#[test]
fn sweeps_multiple_qps_bidirectional_events_and_validation_over_nd() {
    let r = ok("write-bw", &["-a", "-n", "20"]);
    let sizes: Vec<u64> =
        r.json["results"].as_array().unwrap().iter().map(|x| x["size"].as_u64().unwrap()).collect();
    assert_eq!(
        sizes,
        (1..24).map(|i| 1u64 << i).collect::<Vec<_>>(),
        "2 B … 8 MiB in one document"
    );

    let r = ok("write-bw", &["-q", "4", "-n", "200", "-s", "1024"]);
    let per_qp = r.json["results"][0]["per_qp"].as_array().unwrap();
    assert_eq!(per_qp.len(), 4);
    let total: u64 = per_qp.iter().map(|q| q["messages"].as_u64().unwrap()).sum();
    assert_eq!(
        total,
        r.json["results"][0]["bw"]["messages"].as_u64().unwrap(),
        "per-QP counts add up"
    );

    let r = ok("send-bw", &["-b", "-n", "200", "-s", "512"]);
    let res = &r.json["results"][0];
    assert_eq!(res["bw"]["bytes"], 2 * 200 * 512, "both directions summed: {res}");

    let r = ok("send-bw", &["-e", "-n", "200"]);
    assert!(r.client.1.contains(" Events          : ON"));
    assert_eq!(r.json["results"][0]["bw"]["messages"], 200);

    let r = ok("write-bw", &["--validate", "-n", "64", "-s", "256"]);
    let v = &r.json["results"][0]["validation"];
    assert_eq!(v["corrupted_bytes"], 0, "{v}");
    assert!(v["checked_bytes"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn what_nd_lacks_is_refused_by_name() {
    let bad = [
        (
            vec!["atomic-bw", "--backend", "nd"],
            "atomic_bw: atomics are not supported by NetworkDirect",
        ),
        (
            vec!["write-bw", "--backend", "nd", "-c", "UC"],
            "-c UC: not supported by NetworkDirect (it connects RC queue pairs only)",
        ),
        (
            vec!["write-bw", "--backend", "nd", "-x", "1"],
            "-x: NetworkDirect has no GID table; it addresses adapters by IP",
        ),
        (
            vec!["write-bw", "--backend", "nd", "-R"],
            "-R: NetworkDirect connects through its own connector; drop -R",
        ),
        (
            vec!["write-bw", "--backend", "nd", "-d", "rxe0"],
            "-d rxe0: with NetworkDirect, name the adapter by one of its IP addresses",
        ),
    ];
    for (args, want) in bad {
        let (code, out) = side(args.iter().map(|s| s.to_string()).collect());
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(out.trim(), format!("rdmabench: {want}"), "{args:?}");
    }
}

#[test]
fn a_missing_peer_and_a_backend_mismatch_end_with_one_line() {
    nd_soft::install();
    // The server waits for a client that never comes.
    let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let (code, out) = side(
        ["write-bw", "--backend", "nd", "-p", &port, "--timeout", "1"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    assert_eq!(code, 2);
    assert!(out.contains("rdmabench: ") && out.contains("no client"), "{out}");
    // A verbs client against an ND server: refused, naming both sides' values. (Not the
    // other way round: a verbs server finds its device before it listens, and the host
    // that runs these tests may have none.)
    let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let server_args: Vec<String> = ["write-bw", "--backend", "nd", "-p", &port, "--timeout", "5"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let server_out = Shared::default();
    let server = std::thread::spawn({
        let out = server_out.clone();
        move || (side_to(server_args, &out), out.text())
    });
    // A verbs client with no verbs stack here says so at once when refused, instead of
    // retrying: it must find the server listening.
    server_out.wait_for(" Listening on ");
    let (code, out) = side(
        ["write-bw", "--backend", "verbs", "-p", &port, "--timeout", "5", "127.0.0.1"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    let (scode, sout) = server.join().unwrap();
    assert_eq!((code, scode), (2, 2), "{out}\n{sout}");
    assert!(out.contains("backend (--backend): client \"verbs\", server \"nd\""), "{out}");
    assert!(sout.contains("parameter mismatch: backend"), "{sout}");
}

#[test]
fn devices_lists_nd_adapters_in_the_inventory_model() {
    nd_soft::install();
    let (code, text) = side(vec!["devices".into(), "--backend".into(), "nd".into()]);
    assert_eq!(code, 0, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "127.0.0.1: vendor 0x0000 part 0, NetworkDirect adapter 0x50f7", "{text}");
    assert!(lines[1].starts_with("  provider: rdmabench software provider"), "{text}");
    assert_eq!(lines[2], "  addresses: 127.0.0.1");
    assert_eq!(
        lines[3],
        "  inline 128 B, max transfer 1073741824 B, read limits in/out 16 / 16, flags: in-order DMA, loopback connections"
    );
    let (code, json) = side(
        ["devices", "--backend", "nd", "--json", "-d", "127.0.0.1"].map(String::from).to_vec(),
    );
    assert_eq!(code, 0, "{json}");
    let v: Value = serde_json::from_str(&json).unwrap();
    let d = &v["devices"][0];
    assert_eq!(d["transport"], "NetworkDirect");
    assert_eq!(d["limits"]["atomic_cap"], "NONE");
    assert_eq!(d["limits"]["max_cqe"], 65536);
    assert_eq!(d["nd"]["addresses"][0], "127.0.0.1");
    assert_eq!(d["ports"].as_array().unwrap().len(), 0);
    let (code, out) =
        side(["devices", "--backend", "nd", "-d", "10.1.1.1"].map(String::from).to_vec());
    assert_eq!(code, 2);
    assert_eq!(out.trim(), "rdmabench: no RDMA device named '10.1.1.1' (found: 127.0.0.1)");
}

#[test]
fn serve_runs_an_nd_client_test() {
    nd_soft::install();
    let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let serve_args: Vec<String> =
        ["serve", "-p", &port, "--count", "1", "--timeout", "10"].map(String::from).to_vec();
    let server = std::thread::spawn(move || side(serve_args));
    std::thread::sleep(Duration::from_millis(100));
    let (code, out) = side(
        ["read-lat", "--backend", "nd", "-n", "100", "-p", &port, "--timeout", "10", "127.0.0.1"]
            .map(String::from)
            .to_vec(),
    );
    let (scode, log) = server.join().unwrap();
    assert_eq!((code, scode), (0, 0), "{out}\n{log}");
    assert!(out.contains("Transport type : NetworkDirect"), "{out}");
    assert_eq!(rows(&out).len(), 1, "{out}");
    assert!(log.contains("read_lat"), "{log}");
}

#[test]
fn an_nd_connection_refuses_what_nd_lacks_at_post_time_too() {
    use rdmabench::transport::nd::{NdRole, NdTransport};
    use rdmabench::transport::{Connection, ConnectionConfig, Op, Transport, WorkRequest};
    nd_soft::install();
    let ip = nd_soft::ADDRESS;
    let timeout = Duration::from_secs(5);
    let server = NdTransport::open(ip, NdRole::Accept, timeout, None).unwrap();
    let client = NdTransport::open(ip, NdRole::Connect, timeout, None).unwrap();
    let cfg = ConnectionConfig::default();
    let (sp, sep) = server.prepare(&cfg).unwrap();
    let (cp, cep) = client.prepare(&cfg).unwrap();
    let accepted = std::thread::spawn(move || {
        let conn = server.connect(sp, &cep).unwrap();
        (server, conn)
    });
    let mut conn = client.connect(cp, &sep).unwrap();
    let _server = accepted.join().unwrap();
    for (op, why) in [
        (Op::FetchAdd(1), "atomics is not supported by NetworkDirect"),
        (Op::WriteImm(7), "immediate data is not supported by NetworkDirect"),
    ] {
        let wr = WorkRequest {
            wr_id: 1,
            op,
            local_offset: 0,
            len: 8,
            remote_offset: 0,
            signaled: true,
            inline: false,
        };
        assert_eq!(conn.post(&wr).unwrap_err().to_string(), why);
    }
}
