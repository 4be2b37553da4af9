//! The test engine from code: a write-bw server and client in two threads of one
//! process, over verbs, and what each side's outcome holds.
//!
//! In the soft-RoCE lab: `cargo build --example engine && ci/lab-vm
//! target/debug/examples/engine` (the device is `RDMABENCH_DEVICE`, default the first).
//! `qualify`, `mesh` and your own tools drive the engine the same way: build a spec,
//! run it as a side, read the typed outcome.

use std::process::ExitCode;

use rdmabench::engine::{self, Outcome, Side};
use rdmabench::spec::rules::{self, RdmaRequest};
use rdmabench::spec::{Local, Measure, TestKind, Verb};

const SIZE: u64 = 65536;
const ITERS: u64 = 1000;

fn main() -> ExitCode {
    let write_bw = TestKind { verb: Verb::Write, measure: Measure::Bw };
    // perftest's defaults for write_bw, with the size and count asked for.
    let request = RdmaRequest { size: Some(SIZE), iters: Some(ITERS), ..Default::default() };
    let spec = match rules::rdma(write_bw, &request) {
        Ok(spec) => spec,
        Err(e) => return fail("spec", &e.to_string()),
    };
    let local =
        Local { device: std::env::var("RDMABENCH_DEVICE").ok(), port: 18599, ..Local::default() };
    let (server_spec, server_local) = (spec.clone(), local.clone());
    let server = std::thread::spawn(move || {
        engine::run(&server_spec, &Side::Server, &server_local, false, &mut std::io::sink())
    });
    // The client retries a refused connection while the server thread starts listening.
    let host = Side::Client { host: "127.0.0.1".into() };
    let client = engine::run(&spec, &host, &local, false, &mut std::io::sink());
    let Ok(server) = server.join() else { return fail("server", "its thread panicked") };
    for (side, outcome) in [("server", &server), ("client", &client)] {
        if let Some(e) = &outcome.error {
            return fail(side, &format!("{} ({})", e, e.kind));
        }
    }
    show(&client);
    let moved = client.report.results.first().and_then(|r| r.bw).map_or(0, |b| b.bytes);
    if moved != SIZE * ITERS {
        return fail("client", &format!("moved {moved} bytes, not {}", SIZE * ITERS));
    }
    ExitCode::SUCCESS
}

fn show(outcome: &Outcome) {
    let report = &outcome.report;
    if let Some(env) = &report.environment {
        println!("client: {}", env.local.summary());
        if let Some(peer) = &env.peer {
            println!("server: {}", peer.summary());
        }
    }
    for r in &report.results {
        if let Some(bw) = &r.bw {
            println!(
                "{} {} B x {}: {} bytes, BW average {:.2} MiB/s, {:.3} Mpps",
                report.test,
                r.size,
                r.iterations,
                bw.bytes,
                bw.avg_bytes_per_sec / 1_048_576.0,
                bw.msg_rate / 1e6
            );
        }
    }
}

fn fail(who: &str, why: &str) -> ExitCode {
    eprintln!("engine example: {who}: {why}");
    ExitCode::FAILURE
}
