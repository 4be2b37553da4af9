//! Files and lists a user names are read bounded: a qualify profile and a `--baseline`
//! that are a device, a FIFO or too large, and a `--cpus` list of too many CPUs, each
//! give one error line and exit 2 at once (a FIFO hung for ever, /dev/zero took all
//! memory, a long CPU list aborted the process).
#![cfg(unix)] // FIFOs and /dev/zero

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// A scratch directory with a FIFO and a file of `PROFILE_LIMIT + 1` bytes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("rdmabench-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(Command::new("mkfifo").arg(dir.join("fifo")).status().unwrap().success());
        std::fs::write(dir.join("big.toml"), "#".repeat((1 << 20) + 1)).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs rdmabench with `args`; its one stderr line, after checking exit 2 within 10 s.
fn one_line_error(args: &[&str]) -> String {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench")).args(args).output().unwrap();
    assert!(start.elapsed() < Duration::from_secs(10), "{args:?}: {:?}", start.elapsed());
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    err
}

#[test]
fn a_profile_that_is_no_regular_file_or_too_large_is_refused() {
    let s = Scratch::new("profile");
    let fifo = s.0.join("fifo").display().to_string();
    let big = s.0.join("big.toml").display().to_string();
    let out = s.0.join("out").display().to_string();
    let run = |p: &str| {
        one_line_error(&["qualify", p, "--server", "127.0.0.1", "--out", &out, "--no-store"])
    };
    assert_eq!(run("/dev/zero"), "rdmabench: profile /dev/zero: not a regular file\n");
    assert_eq!(run(&fifo), format!("rdmabench: profile {fifo}: not a regular file\n"));
    assert_eq!(run(&big), format!("rdmabench: profile {big}: larger than 1048576 bytes\n"));
}

#[test]
fn a_baseline_that_is_no_regular_file_is_refused() {
    let s = Scratch::new("baseline");
    let fifo = s.0.join("fifo").display().to_string();
    let out = s.0.join("out").display().to_string();
    let run = |b: &str| {
        one_line_error(&[
            "qualify",
            "quick",
            "--server",
            "127.0.0.1",
            "--out",
            &out,
            "--no-store",
            "--baseline",
            b,
        ])
    };
    assert_eq!(run("/dev/zero"), "rdmabench: --baseline /dev/zero: not a regular file\n");
    assert_eq!(run(&fifo), format!("rdmabench: --baseline {fifo}: not a regular file\n"));
}

#[test]
fn a_cpu_list_of_too_many_cpus_is_refused() {
    let list = vec!["0-4095"; 4000].join(",");
    let err = one_line_error(&["tcp-bw", "--cpus", &list, "127.0.0.1"]);
    assert!(err.starts_with("rdmabench: --cpus '0-4095,0-4095,"), "{err}");
    assert!(err.ends_with("…': more than 8192 CPUs listed in all\n") && err.len() < 400, "{err}");
}
