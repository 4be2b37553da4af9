//! Faults mid-run, in the lab: a peer killed (SIGKILL), stopped (SIGSTOP) or its link
//! cut (every packet on `lo` dropped), over RDMA and TCP. The side that can still tell
//! ends within `--timeout` + 2 s of the moment it could no longer progress, with exit
//! status 2, one line on stderr naming the cause, and a `--json` holding the typed error
//! and every size that completed before the fault.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::err;

static NEXT_PORT: AtomicU16 = AtomicU16::new(19400);

/// Each step's limit (`--timeout`): short, so that a case takes seconds. RDMA gets
/// more: the set-up of an `-a` sweep registers buffers for 8 MiB messages, which under
/// TCG on a busy host can take longer than 3 s before the server answers the hello.
fn timeout(test: &str) -> u64 {
    if test.starts_with("tcp") {
        3
    } else {
        5
    }
}
/// What the issue allows past the timeout (the process ending, TCG's noise).
const SLACK: f64 = 2.0;
/// Iterations per size of the `-a` sweep. The table is printed at the end, so the fault
/// is timed (below): by then the first sizes (2 B … a few KiB: the set-up and barriers
/// of each size, more than its messages) are done, and the sizes after grow long
/// enough (a second or more from 16–64 KiB on) for the fault to land in one. RDMA
/// bandwidth stays below 64 KiB in the first seconds, where a CQ moderation of 100
/// still signals a completion every second or so at the lab's 5–25 MB/s. `tcp-lat`
/// runs fewer: its round trips cost more than the other tests' messages.
fn iters(test: &str) -> u64 {
    if test == "tcp-lat" {
        100
    } else {
        1000
    }
}

/// The least time from the client's set-up (its header's last address line) to the
/// fault; the set-up's own time when that is longer, up to three times this.
const FAULT_AFTER: Duration = Duration::from_secs(3);

const TC: &str = "/usr/sbin/tc";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// SIGKILL: the kernel closes its sockets (FIN/RST) and destroys its QPs.
    Kill,
    /// SIGSTOP: its sockets stay open and its kernel still answers RDMA reads and
    /// writes, but the process sends nothing.
    Stop,
    /// Every packet on `lo` dropped: the lab's cable pulled, for both sides at once.
    Cut,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    Server,
    Client,
}

/// A running side: the process, its `--json`, and word of its set-up.
struct Peer {
    side: Side,
    child: Child,
    json: PathBuf,
    /// Its header is out: the connections are set up, the sizes begin.
    set_up: mpsc::Receiver<()>,
    stdout: JoinHandle<()>,
}

/// How a side ended.
struct Ended {
    side: Side,
    out: Output,
    /// From the fault to its exit.
    after: Duration,
    json: Value,
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("rdmabench-lab-faults").join(name)
}

/// Starts one side of `test` with the sweep's flags.
fn start(test: &str, side: Side, port: &str) -> Peer {
    let json = scratch(&format!("{test}-{port}-{side:?}.json"));
    let _ = std::fs::remove_file(&json);
    let mut args: Vec<String> = [test, "-a", "-p", port, "--timeout"].map(String::from).into();
    args.extend([timeout(test).to_string(), "-n".into(), iters(test).to_string()]);
    args.extend(["--json".into(), json.display().to_string()]);
    if side == Side::Client {
        args.push("127.0.0.1".into());
    }
    let mut child = common::spawn(true, &args);
    let (tx, set_up) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with(" remote address") {
                let _ = tx.send(());
            }
        }
    });
    Peer { side, child, json, set_up, stdout }
}

/// Waits for every peer (killing all and failing after a minute: a hang never blocks
/// the run), each one's time counted from `fault`.
fn wait_all(mut peers: Vec<Peer>, fault: Instant) -> Vec<Ended> {
    let mut ended: Vec<Option<Duration>> = vec![None; peers.len()];
    while ended.iter().any(Option::is_none) {
        for (p, e) in peers.iter_mut().zip(ended.iter_mut()) {
            if e.is_none() && p.child.try_wait().unwrap().is_some() {
                *e = Some(fault.elapsed());
            }
        }
        if fault.elapsed() > Duration::from_secs(60) {
            for p in &mut peers {
                let _ = p.child.kill();
            }
            let hung: Vec<Side> = peers
                .iter()
                .zip(&ended)
                .filter(|(_, e)| e.is_none())
                .map(|(p, _)| p.side)
                .collect();
            panic!("{hung:?} still running 60 s after the fault");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    peers
        .into_iter()
        .zip(ended)
        .map(|(p, after)| {
            let out = p.child.wait_with_output().unwrap();
            p.stdout.join().unwrap();
            let json = std::fs::read_to_string(&p.json)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(Value::Null);
            Ended { side: p.side, out, after: after.unwrap(), json }
        })
        .collect()
}

/// Every packet on `lo` dropped while it lives (netem, 100 % loss): in the lab both
/// sides' control channel and TCP streams go over `lo` (rxe0's traffic does not reach
/// the qdisc: see [`cut`]). Dropping it restores the link, also when a test fails.
struct Cut;

impl Cut {
    fn new() -> Cut {
        in_the_lab();
        tc(&["qdisc", "add", "dev", "lo", "root", "netem", "loss", "100%"]);
        Cut
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        tc(&["qdisc", "del", "dev", "lo", "root"]);
    }
}

fn tc(args: &[&str]) {
    let st = Command::new(TC).args(args).status().expect("tc runs");
    assert!(st.success(), "tc {args:?}: {st}");
}

/// The cut changes the machine's network: only ever in the guest.
fn in_the_lab() {
    assert_eq!(
        std::env::var("RDMABENCH_LAB").as_deref(),
        Ok("1"),
        "this test changes lo: run it inside ci/lab-vm only"
    );
}

/// Runs `test` with `fault` on `victim` (both sides for a cut) once the first sizes have
/// completed; returns how the sides that had to notice ended. The table comes at the
/// end, so the fault is timed: a case whose fault came before any size completed (the
/// guest starved by the host) says nothing of the sizes kept, and runs again, waiting
/// longer.
fn fault_mid_sweep(test: &str, fault: Fault, victim: Side) -> Vec<Ended> {
    for wait in [1, 2, 4] {
        let ended = fault_after(test, fault, victim, wait);
        let early = |e: &Ended| e.json["results"].as_array().is_none_or(Vec::is_empty);
        if !ended.iter().any(early) {
            return ended;
        }
        eprintln!("{test}, {fault:?}: the fault came before the first size ended; again");
    }
    panic!("{test}, {fault:?}: no size completed before the fault in three tries");
}

/// One try of [`fault_mid_sweep`], waiting `scale` times as long before the fault.
fn fault_after(test: &str, fault: Fault, victim: Side, scale: u32) -> Vec<Ended> {
    let (server, client, started) = set_up(test);
    // The lab's pace varies several-fold with the host's load: the set-up's own time
    // scales the wait, so that the first sizes are done by the fault.
    std::thread::sleep(started.elapsed().clamp(FAULT_AFTER, FAULT_AFTER * 3) * scale);
    let (victim_peer, survivor) = match victim {
        Side::Server => (server, client),
        Side::Client => (client, server),
    };
    // Each fault is in effect when its call returns: the clock starts there.
    match fault {
        Fault::Kill => {
            let mut gone = Reaped(victim_peer.child);
            gone.0.kill().unwrap();
            let _ = gone.0.wait();
            wait_all(vec![survivor], Instant::now())
        }
        Fault::Stop => {
            let stopped = Reaped(victim_peer.child);
            let pid = stopped.0.id().to_string();
            let st = Command::new("kill").args(["-STOP", &pid]).status().unwrap();
            assert!(st.success(), "kill -STOP {pid}");
            wait_all(vec![survivor], Instant::now())
        }
        Fault::Cut => {
            let _cut = Cut::new();
            wait_all(vec![survivor, victim_peer], Instant::now())
        }
    }
}

/// Starts a server and a client of `test` and waits for the client's set-up; returns
/// them and when they started. The set-up is not under test, and with a short
/// `--timeout` a host busy enough to starve the guest for seconds can fail it (the
/// server answering the hello late): it gets three tries, on fresh ports.
fn set_up(test: &str) -> (Peer, Peer, Instant) {
    let mut failed = Vec::new();
    for _ in 0..3 {
        let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
        let started = Instant::now();
        let server = start(test, Side::Server, &port);
        let client = start(test, Side::Client, &port);
        if client.set_up.recv_timeout(Duration::from_secs(60)).is_ok() {
            return (server, client, started);
        }
        let ended = wait_all(vec![server, client], Instant::now());
        let why: Vec<String> =
            ended.iter().map(|e| format!("{:?}: {}", e.side, err(&e.out).trim())).collect();
        eprintln!("{test}: the set-up failed, trying again: {why:?}");
        failed.push(why);
    }
    panic!("{test}: the client never set up: {failed:?}");
}

/// A victim, killed (SIGKILL ends a stopped process too) and reaped when dropped, also
/// when a test fails: nothing is left behind, stopped or running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One line on how a side ended, for the log (`--nocapture`) and a failure's context.
fn show(test: &str, fault: Fault, e: &Ended, bound: f64) {
    let error = &e.json["error"];
    eprintln!(
        "{test}, {fault:?}, the {:?}: exit {:?} after {:.2} s (bound {bound:.2} s), {} sizes, {} {}; {}",
        e.side,
        e.out.status.code(),
        e.after.as_secs_f64(),
        e.json["results"].as_array().map_or(0, Vec::len),
        error["kind"],
        error["status"],
        err(&e.out).trim()
    );
}

/// What a side that noticed the fault must show: exit status 2 within `bound` s of the
/// fault, one line on stderr, its JSON's error of one of the `allowed` kinds with that
/// kind's cause in the line, and the sizes that completed before the fault (at least
/// one, in sweep order, each with all its iterations).
fn assert_ended(test: &str, fault: Fault, e: &Ended, allowed: &[(&str, &str)], bound: f64) {
    let case = format!("{test}, {fault:?}, the {:?}", e.side);
    let stderr = err(&e.out);
    let error = &e.json["error"];
    let results = e.json["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(e.out.status.code(), Some(2), "{case}: {stderr}");
    assert!(e.after.as_secs_f64() <= bound, "{case}: ended {:?} after the fault", e.after);
    assert_eq!(stderr.lines().count(), 1, "{case}: one line: {stderr}");
    let kind = error["kind"].as_str().unwrap_or_default();
    let cause = allowed.iter().find(|(k, _)| *k == kind).map(|(_, c)| *c);
    let cause = cause.unwrap_or_else(|| panic!("{case}: error {error}, not one of {allowed:?}"));
    assert!(stderr.contains(cause), "{case}: {cause:?} in {stderr}");
    if kind == "completion" {
        let status = error["status"].as_str().unwrap_or_default();
        assert!(status.starts_with("IBV_WC_"), "{case}: the completion's status: {error}");
        assert!(stderr.contains(status), "{case}: {status} in {stderr}");
    }
    assert!(!results.is_empty(), "{case}: the completed sizes are kept: {}", e.json);
    assert!(results.len() < 23, "{case}: the fault came before the sweep's end");
    for (k, r) in results.iter().enumerate() {
        assert_eq!(r["size"], 2u64 << k, "{case}: the completed sizes, in order");
        let n = if test.ends_with("lat") { &r["lat"]["samples"] } else { &r["iterations"] };
        assert_eq!(n, iters(test), "{case}: size {} ran all its iterations: {r}", r["size"]);
    }
}

// ---------------------------------------------------------------- the cases

/// A killed peer's kernel closes its sockets: the survivor reads the close at once.
fn killed(test: &str) {
    for victim in [Side::Server, Side::Client] {
        let ended = fault_mid_sweep(test, Fault::Kill, victim);
        show(test, Fault::Kill, &ended[0], bound(test, 0.0));
        assert_ended(test, Fault::Kill, &ended[0], &[("peer_closed", "closed")], bound(test, 0.0));
    }
}

/// A stopped peer holds its connections open and says nothing: the survivor's loop or
/// control channel times out (`peer_silent`). `one_sided`: the test's server only
/// waits while the client works (its kernel answers RDMA writes and reads), so with
/// the server stopped the client runs its current size to the end and notices only at
/// the results exchange that follows.
fn stopped(test: &str, one_sided: bool) {
    for victim in [Side::Server, Side::Client] {
        let ended = fault_mid_sweep(test, Fault::Stop, victim);
        let e = &ended[0];
        let rest = if one_sided && victim == Side::Server {
            current_size_time(test, e, Company::BesideAnother)
        } else if test == "tcp-bw" && victim == Side::Server {
            TCP_SENDER_AFTER_STOP
        } else {
            0.0
        };
        show(test, Fault::Stop, e, bound(test, rest));
        assert_ended(test, Fault::Stop, e, &[("peer_silent", &silent(test))], bound(test, rest));
    }
}

/// How long a TCP sender still moves bytes after its receiver stops: the stopped
/// peer's kernel stays open, and the sender's own kernel keeps taking parts of its
/// writes for a while (in the lab, 64 KiB writes each took ~60 KB per 200 ms wait for
/// the first 0.6 s), which is the stream moving. The client's silence starts after
/// that: the lab measured 5.0-5.1 s from the stop to its exit with a 3 s timeout.
const TCP_SENDER_AFTER_STOP: f64 = 2.0;

/// "for N s", N the timeout: what each silent-peer message says (control channel, loop,
/// socket).
fn silent(test: &str) -> String {
    format!("for {} s", timeout(test))
}

/// The limit on a survivor's time from the fault to its exit: the timeout and the
/// issue's 2 s, plus `rest`, the time it may still legitimately work before it can
/// notice.
fn bound(test: &str, rest: f64) -> f64 {
    timeout(test) as f64 + SLACK + rest
}

/// An upper bound on the time the size that was running at the fault takes, from the
/// last completed size: a bandwidth test's bytes at half the bandwidth that size reached
/// (bandwidth grows with the size; half for TCG's noise), a latency test's round trips
/// at four times that size's mean (twice the size, twice for the noise), each stretched
/// by `company` (a neighbour's load); plus a second for its set-up and barrier.
fn current_size_time(test: &str, e: &Ended, company: Company) -> f64 {
    let results = e.json["results"].as_array().cloned().unwrap_or_default();
    let Some(last) = results.last() else { return 0.0 };
    let n = iters(test) as f64;
    let loop_s = if test.ends_with("lat") {
        // One-way figures: a round trip is two.
        n * 2.0 * last["lat"]["t_avg_us"].as_f64().unwrap_or(0.0) * 1e-6 * 4.0
    } else {
        let size = (2u64 << results.len()) as f64;
        n * size / (last["bw"]["avg_bytes_per_sec"].as_f64().unwrap_or(0.0).max(1.0) / 2.0)
    };
    loop_s * company.slowdown() + 1.0
}

/// What runs beside a fault test in the lab (ci/lab-tests' groups).
#[derive(Clone, Copy)]
enum Company {
    /// Nothing: the cuts run alone.
    Alone,
    /// Another test of its kind: the stopped-peer tests run two at a time, and the
    /// neighbour may take half the guest's CPU.
    BesideAnother,
}

impl Company {
    fn slowdown(self) -> f64 {
        match self {
            Company::Alone => 1.0,
            Company::BesideAnother => 2.0,
        }
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_write_bw_a_killed_peer_ends_the_other_side() {
    killed("write-bw");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_write_lat_a_killed_peer_ends_the_other_side() {
    killed("write-lat");
}

#[test]
#[ignore = "lab: runs in the lab with the RDMA tests (ci/lab-vm)"]
fn lab_tcp_bw_a_killed_peer_ends_the_other_side() {
    killed("tcp-bw");
}

#[test]
#[ignore = "lab: runs in the lab with the RDMA tests (ci/lab-vm)"]
fn lab_tcp_lat_a_killed_peer_ends_the_other_side() {
    killed("tcp-lat");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_write_bw_a_stopped_peer_ends_the_other_side() {
    stopped("write-bw", true);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_write_lat_a_stopped_peer_ends_the_other_side() {
    stopped("write-lat", false);
}

#[test]
#[ignore = "lab: runs in the lab with the RDMA tests (ci/lab-vm)"]
fn lab_tcp_bw_a_stopped_peer_ends_the_other_side() {
    stopped("tcp-bw", false);
}

#[test]
#[ignore = "lab: runs in the lab with the RDMA tests (ci/lab-vm)"]
fn lab_tcp_lat_a_stopped_peer_ends_the_other_side() {
    stopped("tcp-lat", false);
}

/// The cable pulled: every packet on `lo` dropped, both sides alike; neither hears
/// from the other, and each notices on its own that its peer went silent. TCP: the data
/// stream or the control channel times out. RDMA: on a real link an RC QP whose packets
/// vanish fails its work after its retries with `IBV_WC_RETRY_EXC_ERR`, but in the lab
/// rxe hands the traffic between two GIDs of `lo` to its own receive path without the
/// qdisc (measured: the sizes' writes go on completing), so the cut takes the control
/// channel only: each side finishes the size it is in, then finds the peer silent.
fn cut(test: &str, rdma: bool) {
    let silent = silent(test);
    let allowed: &[(&str, &str)] = if rdma {
        &[("completion", "IBV_WC_RETRY_EXC_ERR"), ("peer_silent", &silent)]
    } else {
        &[("peer_silent", &silent)]
    };
    let ended = fault_mid_sweep(test, Fault::Cut, Side::Server);
    let bounds: Vec<f64> = ended
        .iter()
        .map(|e| bound(test, if rdma { current_size_time(test, e, Company::Alone) } else { 0.0 }))
        .collect();
    for (e, &b) in ended.iter().zip(&bounds) {
        show(test, Fault::Cut, e, b);
    }
    for (e, &b) in ended.iter().zip(&bounds) {
        assert_ended(test, Fault::Cut, e, allowed, b);
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_write_bw_a_cut_link_ends_both_sides() {
    cut("write-bw", true);
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_write_lat_a_cut_link_ends_both_sides() {
    cut("write-lat", true);
}

#[test]
#[ignore = "lab: runs in the lab (ci/lab-vm): it drops every packet on lo"]
fn lab_tcp_bw_a_cut_link_ends_both_sides() {
    cut("tcp-bw", false);
}

#[test]
#[ignore = "lab: runs in the lab (ci/lab-vm): it drops every packet on lo"]
fn lab_tcp_lat_a_cut_link_ends_both_sides() {
    cut("tcp-lat", false);
}

/// A peer that works on for ever (here: a server given a hundred million round trips)
/// holds the client no longer than the client's own `--max-time`, over RDMA as over
/// TCP (tests/hostile3.rs): the limit counts from the hello, the set-up inside it.
#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_write_lat_a_client_ends_its_test_at_its_own_max_time() {
    let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let long = ["write-lat", "-n", "100000000", "-p", &port, "--timeout", "5"];
    let server = common::spawn(true, &long);
    common::wait_listening(&port);
    let start = Instant::now();
    let mut args = long.to_vec();
    args.extend(["--max-time", "8", "127.0.0.1"]);
    let client = common::finish(common::spawn(true, &args), Duration::from_secs(60));
    let took = start.elapsed();
    let why = "the test ran past this side's limit of 8 s (--max-time)";
    assert_eq!(client.status.code(), Some(2), "{}", err(&client));
    assert!(err(&client).contains(why), "{}", err(&client));
    // Its end comes at a lap of the loop (5-20 ms) past the limit; the rest is the
    // process starting and ending beside the other lab tests.
    assert!(took >= Duration::from_secs(8) && took < Duration::from_secs(14), "{took:?}");
    // The server is told why, and ends too.
    let server = common::finish(server, Duration::from_secs(20));
    assert_eq!(server.status.code(), Some(2), "{}", err(&server));
    assert!(err(&server).contains(why), "{}", err(&server));
}

/// The control connection cut mid-run (a relay in the middle closes both its ends): the
/// server, its client gone, ends, and its QPs go with it quietly (soft-RoCE drops work
/// for a QP that is gone: the client's writes neither complete nor fail), as a killed
/// server's can. The client's heartbeat, which looks whether the peer closed the
/// connection before each beat, ends its loop within a beat. Before that look, this
/// client waited out its `--timeout` (30.1 s after the cut, against 0.11 s with it), as a
/// killed server's client did in half of ci/test's runs of
/// `lab_a_server_killed_mid_window_leaves_the_window_measured_until_then`.
#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_a_control_connection_cut_mid_run_ends_the_client_at_its_next_beat() {
    use std::net::{Shutdown, TcpListener, TcpStream};
    let port = NEXT_PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let run = ["write-bw", "-D", "20", "--timeout", "30", "-p"];
    let server = common::spawn(true, &[&run[..], &[port.as_str()]].concat());
    common::wait_listening(&port);
    // The relay: one connection, copied both ways until it is cut.
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_port = relay.local_addr().unwrap().port().to_string();
    let json = std::env::temp_dir().join(format!("rdmabench-cut-control-{port}.json"));
    let mut args = run.to_vec();
    args.extend([relay_port.as_str(), "--json", json.to_str().unwrap(), "127.0.0.1"]);
    let mut client = common::spawn(true, &args);
    let (to_client, _) = relay.accept().unwrap();
    let to_server = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    let copy = |mut from: TcpStream, mut into: TcpStream| {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut into);
        })
    };
    copy(to_client.try_clone().unwrap(), to_server.try_clone().unwrap());
    copy(to_server.try_clone().unwrap(), to_client.try_clone().unwrap());
    // Cut 4 s after the client's set-up (its header's end): inside its window.
    let stdout = client.stdout.take().unwrap();
    let set_up = common::wait_for_line(stdout, " remote address", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(4));
    let cut = Instant::now();
    let _ = to_client.shutdown(Shutdown::Both);
    let _ = to_server.shutdown(Shutdown::Both);
    let out = common::finish(client, Duration::from_secs(60));
    let noticed = cut.elapsed();
    let server = common::finish(server, Duration::from_secs(60));
    let stderr = err(&out);
    eprintln!("the client ended {noticed:?} after the cut: {stderr}");
    assert!(set_up, "the client's set-up ended: {stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("closed the control connection"), "{stderr}");
    // A beat a second, the loop's lap, and the process's end beside another lab test:
    // well short of the 13 s and more its window still had to run.
    assert!(noticed < Duration::from_secs(5), "ended {noticed:?} after the cut: {stderr}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["stopped"], "peer_gone", "{doc}");
    assert_eq!(doc["error"]["kind"], "peer_closed", "{doc}");
    // The server's control connection closed too: it ends, and names that.
    assert_eq!(server.status.code(), Some(2), "{}", err(&server));
}
