//! What the command line refuses, the library refuses the same way: a program that
//! builds a spec by hand (as examples/engine.rs does) and runs it gets the same typed
//! error, kind and rule, as the CLI's exit — before any connection, with no device.
#![cfg(unix)]

use std::process::Command;
use std::time::Duration;

use rdmabench::engine::{self, Side};
use rdmabench::error::{Error, ErrorKind, Refusal};
use rdmabench::spec::rules::{self, RdmaRequest};
use rdmabench::spec::{
    IntervalLines, Link, Local, Measure, Output, TestKind, TestOptions, TestSpec, Verb,
};
use rdmabench::transport::Backend;

/// The CLI's error for `argv`, in-process and from the binary (its status and line).
fn cli_refuses(argv: &[&str]) -> Error {
    let cli = rdmabench::cli::parse(std::iter::once("rdmabench").chain(argv.iter().copied()))
        .expect("the flags parse")
        .expect("a command");
    let e = rdmabench::run(cli, &mut std::io::sink()).expect_err("the CLI refuses");
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench")).args(argv).output().unwrap();
    assert_eq!(out.status.code(), Some(i32::from(e.kind.exit_code())), "{argv:?}");
    let line = String::from_utf8_lossy(&out.stderr);
    assert_eq!(line.trim_end(), format!("rdmabench: {}", e.message), "{argv:?}");
    e
}

/// The library's error for a spec of `kind`, built from perftest's defaults and then
/// changed by hand, run as a client.
fn library_refuses(kind: TestKind, request: RdmaRequest, change: impl Fn(&mut TestSpec)) -> Error {
    let request = RdmaRequest { backend: Some(Backend::Verbs), ..request };
    let mut spec = rules::rdma(kind, &request).expect("perftest's defaults hold");
    change(&mut spec);
    let side = Side::Client { host: "127.0.0.1".into() };
    let outcome = engine::run(&spec, &side, &Local::default(), false, &mut std::io::sink());
    assert!(outcome.report.results.is_empty());
    outcome.error.expect("the library refuses")
}

fn rule(e: &Error) -> (ErrorKind, Option<&Refusal>) {
    (e.kind, e.refusal.as_deref())
}

#[test]
fn the_library_refuses_what_the_cli_refuses_with_the_same_rule() {
    let write_bw = TestKind { verb: Verb::Write, measure: Measure::Bw };
    let atomic_bw = TestKind { verb: Verb::Atomic, measure: Measure::Bw };
    let d = RdmaRequest::default;

    // A message over the largest any device takes (MAX_MESSAGE).
    let cli = cli_refuses(&["write-bw", "--backend", "verbs", "-s", "3G", "127.0.0.1"]);
    let lib = library_refuses(write_bw, d(), |s| s.sizes = vec![3 << 30]);
    assert_eq!(rule(&cli), (ErrorKind::Usage, Some(&Refusal::range("-s"))), "{cli}");
    assert_eq!((rule(&lib), &lib.message), (rule(&cli), &cli.message));

    // An atomic of 16 bytes.
    let cli = cli_refuses(&["atomic-bw", "--backend", "verbs", "-s", "16", "127.0.0.1"]);
    let lib = library_refuses(atomic_bw, d(), |s| s.sizes = vec![16]);
    assert_eq!(rule(&cli), (ErrorKind::Usage, Some(&Refusal::range("-s"))), "{cli}");
    assert_eq!((rule(&lib), &lib.message), (rule(&cli), &cli.message));

    // --run_infinitely with -a: a sweep of -n runs, where it needs -D. A library spec
    // once ran it.
    let argv = ["write-bw", "--backend", "verbs", "--run_infinitely", "-a", "127.0.0.1"];
    let cli = cli_refuses(&argv);
    let sweep = RdmaRequest { all: true, ..d() };
    let lib = library_refuses(write_bw, sweep, |s| {
        if let Link::Rdma(r) = &mut s.link {
            r.run_infinitely = true;
        }
    });
    let needs = Refusal::needs("--run_infinitely", "-D");
    assert_eq!(rule(&cli), (ErrorKind::Usage, Some(&needs)), "{cli}");
    assert_eq!((rule(&lib), &lib.message), (rule(&cli), &cli.message));

    // In JSON, the rule and its flags: what a program branches on.
    let json = serde_json::to_value(&lib).unwrap();
    assert_eq!(
        json["refusal"],
        serde_json::json!({"rule": "needs", "flag": "--run_infinitely", "needs": "-D"})
    );
    assert_eq!(json["kind"], "usage");
}

/// The library's error for perftest's default spec of `kind` run as a client with this
/// side's settings `local`.
fn library_refuses_local(kind: TestKind, local: Local) -> Error {
    let request = RdmaRequest { backend: Some(Backend::Verbs), ..RdmaRequest::default() };
    let spec = rules::rdma(kind, &request).expect("perftest's defaults hold");
    let side = Side::Client { host: "127.0.0.1".into() };
    let outcome = engine::run(&spec, &side, &local, false, &mut std::io::sink());
    assert!(outcome.report.results.is_empty());
    outcome.error.expect("the library refuses")
}

#[test]
fn the_library_refuses_this_sides_settings_and_output_as_the_cli_does() {
    let write_lat = TestKind { verb: Verb::Write, measure: Measure::Lat };
    let write_bw = TestKind { verb: Verb::Write, measure: Measure::Bw };

    // A latency test over threads: one QP, one thread. A library Local once ran it.
    let cli = cli_refuses(&["write-lat", "--backend", "verbs", "--threads", "2", "127.0.0.1"]);
    let lib = library_refuses_local(write_lat, Local { threads: 2, ..Local::default() });
    assert_eq!(
        rule(&cli),
        (ErrorKind::Usage, Some(&Refusal::not_this_test("--threads", "write_lat")))
    );
    assert_eq!((rule(&lib), &lib.message), (rule(&cli), &cli.message));

    // Intervals of a latency test.
    let cli = cli_refuses(&["write-lat", "--backend", "verbs", "--interval", "1", "127.0.0.1"]);
    let lines = IntervalLines {
        every: Duration::from_secs(1),
        text: true,
        json_lines: None,
        gbits: false,
        to_stderr: false,
        min_bw: None,
    };
    let lib =
        library_refuses_local(write_lat, Local { interval_lines: Some(lines), ..Local::default() });
    assert_eq!(
        rule(&cli),
        (ErrorKind::Usage, Some(&Refusal::not_this_test("--interval", "write_lat")))
    );
    assert_eq!((rule(&lib), &lib.message), (rule(&cli), &cli.message));

    // Every sample of a bandwidth test, which has none to list.
    let cli = cli_refuses(&["write-bw", "--backend", "verbs", "-H", "127.0.0.1"]);
    let lib = library_refuses_local(write_bw, Local { keep_samples: true, ..Local::default() });
    assert_eq!(rule(&cli), (ErrorKind::Usage, Some(&Refusal::not_this_test("-H/-U", "write_bw"))));
    assert_eq!((rule(&lib), &lib.message), (rule(&cli), &cli.message));

    // A bandwidth floor on a latency test: the output's rule, met by a hand-built test.
    let cli = cli_refuses(&["write-lat", "--backend", "verbs", "--min-bw", "5", "127.0.0.1"]);
    let request = RdmaRequest { backend: Some(Backend::Verbs), ..RdmaRequest::default() };
    let test = TestOptions {
        spec: rules::rdma(write_lat, &request).unwrap(),
        host: Some("127.0.0.1".into()),
        local: Local::default(),
        output: Output { min_bw: Some(5.0), ..Output::default() },
        perftest: false,
    };
    let lib = test.validate().expect_err("the library refuses");
    assert_eq!((rule(&lib), &lib.message), (rule(&cli), &cli.message));
}
