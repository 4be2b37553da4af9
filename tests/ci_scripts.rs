//! ci/test's own logic: `ci/lab-count`, which lists the lab tests on the host and checks
//! that every one of them passed in the lab (fake test binaries, shell scripts answering
//! `--ignored --list` as libtest does, stand in for the real ones); and `ci/floors`, the
//! house's structure check, on small trees with an upward import, a circle, a long file.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("rdmabench-ci-scripts-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fake test binary: prints `listing` to `--list` and exits with `status`.
fn fake_binary(dir: &Path, name: &str, listing: &str, status: i32) -> PathBuf {
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\ncat <<'EOF'\n{listing}EOF\n[ {status} = 0 ] || echo \"thread 'main' panicked at src/lib.rs:1:1\" >&2\nexit {status}\n"
    );
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn lab_count(args: &[&str]) -> Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/lab-count"))
        .args(args)
        .output()
        .expect("ci/lab-count runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const PERF: &str =
    "lab_write_bw: test\nlab_read_lat: test\nhosts_pair: test\n\n3 tests, 0 benchmarks\n";
const QP: &str = "tests::lab_qp_rc: test\nnot_lab_thing: test\n\n2 tests, 0 benchmarks\n";

/// The binaries' list file and the `EXE<TAB>TEST` rows ci/lab-count makes of it.
fn listed(dir: &Path, exes: &[&Path], prefix: &str) -> Output {
    let binaries = dir.join("binaries");
    let names: Vec<String> = exes.iter().map(|e| e.display().to_string()).collect();
    fs::write(&binaries, names.join("\n") + "\n").unwrap();
    lab_count(&["list", prefix, binaries.to_str().unwrap()])
}

#[test]
fn a_binary_that_cannot_list_its_tests_fails_the_listing_by_name() {
    let dir = scratch("broken");
    let perf = fake_binary(&dir, "lab_perf-1", PERF, 0);
    let broken = fake_binary(&dir, "lab_faults-2", "", 101);
    let out = listed(&dir, &[&perf, &broken], "lab_");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("cannot list the tests of") && stderr.contains("lab_faults-2 (exit 101)"),
        "{stderr}"
    );
    assert!(stderr.contains("panicked"), "the binary's own last words are shown: {stderr}");
    assert!(!stderr.contains("lab_perf-1"), "{stderr}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_listing_names_each_prefixed_test_with_its_binary() {
    let dir = scratch("list");
    let perf = fake_binary(&dir, "lab_perf-1", PERF, 0);
    let qp = fake_binary(&dir, "lab_qp-2", QP, 0);
    let out = listed(&dir, &[&perf, &qp], "lab_");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = text(&out.stdout);
    let expected = format!(
        "{0}\tlab_write_bw\n{0}\tlab_read_lat\n{1}\ttests::lab_qp_rc\n",
        perf.display(),
        qp.display()
    );
    assert_eq!(rows, expected);
    // '' lists every ignored test (ci/lab-vm's own, run on the host).
    let all = text(&listed(&dir, &[&qp], "").stdout);
    assert_eq!(all.lines().count(), 2, "{all}");
    fs::remove_dir_all(&dir).unwrap();
}

/// ci/lab-count check over `log` against the listing of the two fake binaries.
fn check(dir: &Path, log: &str) -> Output {
    let perf = fake_binary(dir, "lab_perf-1", PERF, 0);
    let qp = fake_binary(dir, "lab_qp-2", QP, 0);
    let expected = dir.join("expected");
    fs::write(&expected, listed(dir, &[&perf, &qp], "lab_").stdout).unwrap();
    let log_path = dir.join("lab.log");
    fs::write(&log_path, log).unwrap();
    lab_count(&["check", expected.to_str().unwrap(), log_path.to_str().unwrap()])
}

#[test]
fn every_listed_test_must_pass_and_the_missing_are_named() {
    let dir = scratch("check");
    let all_passed =
        "running 2 tests\ntest lab_write_bw ... ok <12.5s>\ntest lab_read_lat ... ok <3.0s>\n\
                      test tests::lab_qp_rc ... ok\n\ntest result: ok. 3 passed; 0 failed\n";
    let out = check(&dir, all_passed);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("3 passed of the 3 listed"), "{}", text(&out.stdout));

    // A binary that vanished in the lab (its tests never ran), and one test failed.
    let one_failed = "test lab_write_bw ... ok\ntest lab_read_lat ... FAILED\n";
    let out = check(&dir, one_failed);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(text(&out.stdout).contains("1 passed of the 3 listed"), "{}", text(&out.stdout));
    assert!(
        stderr.contains("did not pass: lab_read_lat")
            && stderr.contains("did not pass: tests::lab_qp_rc")
    );
    assert!(stderr.contains("lab_qp-2"), "the binary is named: {stderr}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_test_passed_twice_or_unlisted_does_not_make_up_for_a_missing_one() {
    let dir = scratch("extra");
    let log = "[node1] test lab_write_bw ... ok\n[node1] test lab_write_bw ... ok\n\
               test tests::lab_qp_rc ... ok\ntest lab_other ... ok\n";
    let out = check(&dir, log);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("did not pass: lab_read_lat"), "{stderr}");
    assert!(stderr.contains("passed but not listed: lab_other"), "{stderr}");
    assert!(stderr.contains("passed more often than listed: lab_write_bw"), "{stderr}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_slowest_tests_come_from_the_reported_times() {
    let dir = scratch("slowest");
    let log = dir.join("lab.log");
    fs::write(&log, "test a ... ok <1.0s>\ntest b ... ok <30.2s>\n[node1] test c ... FAILED <7.5s>\ntest d ... ok\n")
        .unwrap();
    let out = lab_count(&["slowest", "2", log.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), "    30.2 s  b\n     7.5 s  c\n");
    fs::remove_dir_all(&dir).unwrap();
}

/// A Windows test log as `cargo test --no-fail-fast` writes it under wine: one binary's
/// failures (each with what it printed) and cargo's line naming how to rerun it.
fn wine_failures(binary: &str, rerun: &str, failed: &[(&str, &str)]) -> String {
    let mut log = format!("     Running {binary} (target/x86_64-pc-windows-gnu/debug/deps/x.exe)\n\nrunning 3 tests\n");
    log += "test fine ... ok\n\nfailures:\n\n";
    for (name, said) in failed {
        log += &format!("---- {name} stdout ----\n\nthread '{name}' (7) panicked at tests/x.rs:1:2:\n{said}\n\n");
    }
    log += "\nfailures:\n";
    for (name, _) in failed {
        log += &format!("    {name}\n");
    }
    log += &format!("\ntest result: FAILED. 1 passed; {} failed; 0 ignored\n\n", failed.len());
    log + &format!("error: test failed, to rerun pass `{rerun}`\n")
}

fn spawn_failures(log: &str) -> Output {
    let dir = scratch("spawn-failures");
    fs::write(dir.join("windows-tests.log"), log).unwrap();
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/wine/spawn-failures"))
        .arg(dir.join("windows-tests.log"))
        .output()
        .expect("ci/wine/spawn-failures runs");
    fs::remove_dir_all(&dir).unwrap();
    out
}

/// ci/test reruns a Windows test once only when wine could not start its process
/// (ERROR_INTERNAL_ERROR): every failure in the log must be that one, and named.
#[test]
fn only_tests_that_wine_could_not_start_are_rerun() {
    const SPAWN: &str = "called `Result::unwrap()` on an `Err` value: Os { code: 1359, kind: Uncategorized, message: \"Internal error.\" }";
    let ok =
        wine_failures("tests/tcp.rs", "-p rdmabench --test tcp", &[("a", SPAWN), ("b", SPAWN)])
            + &wine_failures("unittests src/lib.rs", "-p rdmabench --lib", &[("c::d", SPAWN)]);
    let out = spawn_failures(&ok);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "-p rdmabench --test tcp\ta\n-p rdmabench --test tcp\tb\n-p rdmabench --lib\tc::d\n"
    );

    // A real failure beside a spawn failure: nothing is rerun.
    let mixed = wine_failures(
        "tests/tcp.rs",
        "-p rdmabench --test tcp",
        &[("a", SPAWN), ("b", "assertion failed: 2 == 3")],
    );
    let out = spawn_failures(&mixed);
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(1), String::new()));

    // A binary that failed without naming its tests (a crash) counts against the rerun.
    let crashed = ok.clone() + "     Running tests/serve.rs (x.exe)\n\ntest result: FAILED. 0 passed; 2 failed; 0 ignored\n";
    let out = spawn_failures(&crashed);
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(1), String::new()));

    // A binary that died before libtest's summary (no result line, no test named, only
    // cargo's line): its failure is not wine's start, and nothing is rerun.
    let died = ok.clone() + "     Running tests/serve.rs (x.exe)\n\nrunning 5 tests\nerror: test failed, to rerun pass `-p rdmabench --test serve`\n";
    let out = spawn_failures(&died);
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(1), String::new()));

    // No failure at all: nothing to rerun, and not a success of this script.
    let out = spawn_failures("test result: ok. 3 passed; 0 failed; 0 ignored\n");
    assert_eq!(out.status.code(), Some(1));
}

/// The benches' verdicts (ci/bench_common.py's Verdicts): a missed target ends the bench
/// with exit 1 and is recorded as missed; a partial run says it is not a result.
#[test]
fn a_bench_with_a_missed_target_exits_1_and_records_it() {
    let dir = scratch("verdicts");
    let ci = Path::new(env!("CARGO_MANIFEST_DIR")).join("ci");
    let bench = |partial: &str, met: &str| {
        let script = format!(
            "import sys; sys.path.insert(0, {ci:?}); from bench_common import Verdicts\n\
             v = Verdicts('fake', {partial:?})\n\
             print(v.judge('write_lat rdmabench/perftest', 1.2, '<= 1.05', {met}))\n\
             v.judge('read_lat rdmabench/perftest', 1.0, '<= 1.05', True)\n\
             v.finish('one round')\n"
        );
        Command::new("python3")
            .arg("-c")
            .arg(script)
            .current_dir(&dir)
            .output()
            .expect("python3 runs")
    };
    let out = bench("", "False");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("MISSED\n"), "{stdout}");
    assert!(stdout.ends_with("some targets missed: write_lat rdmabench/perftest\n"), "{stdout}");
    let record: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("target/bench/fake.json")).unwrap())
            .unwrap();
    assert_eq!(record["rows"][0]["met"], false, "{record}");
    assert_eq!(record["rows"][1]["met"], true, "{record}");
    assert_eq!(record["partial"], "", "{record}");

    let out = bench("BENCH_ONLY=write_lat", "True");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("partial run (BENCH_ONLY=write_lat): not a result"));
    assert!(text(&out.stdout).ends_with("all targets met\n"));
    fs::remove_dir_all(&dir).unwrap();
}

/// The rules besides the floors, as docs/architecture.md's sections: `serve/` has a front
/// door; system paths only in `util/`, clap only in `cli/`.
const RULES: &str =
    "## Front doors\n\n| room | its door |\n|---|---|\n| `serve/` | `ServeOptions` |\n\n\
     ## Only here\n\n| what | only in | why |\n|---|---|---|\n\
     | `sysfs` | `util/` | one reader |\n| `clap` | `cli/` | flags |\n\n";

/// A small tree for ci/floors: a floor table, the rules of [`RULES`], and src/ files with
/// the given texts.
fn floors_tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    floors_tree_ruled(name, RULES, files)
}

/// [`floors_tree`] with `rules` (sections of docs/architecture.md) in place of [`RULES`].
fn floors_tree_ruled(name: &str, rules: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = scratch(name);
    fs::create_dir_all(dir.join("docs")).unwrap();
    fs::write(
        dir.join("docs/architecture.md"),
        "# Architecture\n\n## Floors\n\n| floor | rooms | what |\n|---|---|---|\n\
         | 1 top | `lib.rs` `cli/` | the command line |\n\
         | 2 commands | `serve/` `compare.rs` | commands |\n\
         | 3 ground | `model.rs` `util/` | the model |\n\n"
            .to_string()
            + rules
            + "## Next\n\n| floor | rooms |\n|---|---|\n| x | `nothing/` |\n",
    )
    .unwrap();
    for (path, text) in files {
        let path = dir.join("src").join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    dir
}

fn floors(root: &Path) -> Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/floors"))
        .arg(root)
        .output()
        .expect("ci/floors runs")
}

/// A house whose imports all go down.
const SOUND: &[(&str, &str)] = &[
    ("lib.rs", "pub mod cli;\npub mod compare;\npub mod model;\npub mod serve;\npub mod util;\n"),
    ("cli/mod.rs", "//! Flags.\nuse crate::serve::ServeOptions;\nuse crate::compare::{self, Options};\n"),
    ("serve/mod.rs", "//! Serve.\nmod client;\nuse crate::model::Report;\npub struct ServeOptions;\n"),
    ("serve/client.rs", "//! One client.\nuse super::ServeOptions;\nuse crate::util::time::now;\n"),
    ("compare.rs", "//! Compare.\nuse crate::{model::Report, util};\n/// `crate::cli` in a comment is no import.\nconst S: &str = \"crate::cli::X\";\n"),
    ("model.rs", "//! The model.\npub struct Report;\n#[cfg(test)]\nmod tests {\n    use super::Report;\n}\n"),
    ("util/mod.rs", "//! Helpers.\npub mod time;\n"),
    ("util/time.rs", "//! Time.\npub fn now() {}\n"),
];

#[test]
fn floors_pass_a_house_whose_imports_go_down() {
    let dir = floors_tree("floors-sound", SOUND);
    let out = floors(&dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn floors_fail_an_upward_import_naming_file_line_and_path() {
    let mut files = SOUND.to_vec();
    files[2] = (
        "serve/mod.rs",
        "//! Serve.\nmod client;\n\nuse crate::cli::args::timeout;\npub struct ServeOptions;\n",
    );
    let dir = floors_tree("floors-up", &files);
    let out = floors(&dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("src/serve/mod.rs:4: imports crate::cli::args::timeout from `cli` (floor 1), above its own room `serve` (floor 2)"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("ci/floors: src/").count(), 1, "only the one import: {stderr}");
    // A grouped path, and a room the table does not name, are found too.
    files[4] = ("compare.rs", "//! Compare.\nuse crate::{model::Report, cli::Flags};\n");
    files.push(("stray.rs", "//! Nowhere.\n"));
    let dir = floors_tree("floors-up-grouped", &files);
    let stderr = text(&floors(&dir).stderr);
    assert!(stderr.contains("src/compare.rs:2: imports crate::cli::Flags from `cli`"), "{stderr}");
    assert!(stderr.contains("src/stray.rs: room `stray` has no floor"), "{stderr}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn floors_fail_circles_across_folders_and_unexplained_ones_within_a_folder() {
    // model.rs and util/time.rs import each other: both on the ground floor, but a circle.
    let mut files = SOUND.to_vec();
    files[5] = ("model.rs", "//! The model.\nuse crate::util::time::now;\npub struct Report;\n");
    files[7] = ("util/time.rs", "//! Time.\nuse crate::model::Report;\npub fn now() {}\n");
    let dir = floors_tree("floors-circle", &files);
    let stderr = text(&floors(&dir).stderr);
    assert!(stderr.contains("circle across folders: src/model.rs, src/util/time.rs"), "{stderr}");
    fs::remove_dir_all(&dir).unwrap();
    // time.rs and twin.rs: one folder, not said to be one idea split for length.
    let mut files = SOUND.to_vec();
    files[6] = ("util/mod.rs", "//! Helpers.\npub mod time;\npub mod twin;\n");
    files[7] = ("util/time.rs", "//! Time.\nuse super::twin::b;\npub fn now() {}\n");
    files.push(("util/twin.rs", "//! Twin.\npub fn b() { super::time::now() }\n"));
    let dir = floors_tree("floors-pair", &files);
    let stderr = text(&floors(&dir).stderr);
    assert!(
        stderr.contains("circle in one folder: src/util/time.rs, src/util/twin.rs (not said"),
        "{stderr}"
    );
    fs::remove_dir_all(&dir).unwrap();
    // Said so in both module docs, the pair in one folder is allowed.
    files[7] =
        ("util/time.rs", "//! Time: one idea split for length (twin.rs).\nuse super::twin::b;\n");
    files[8] = (
        "util/twin.rs",
        "//! Twin: one idea split for length (time.rs).\npub fn b() { super::time::now() }\n",
    );
    let dir = floors_tree("floors-twins", &files);
    let out = floors(&dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn floors_fail_a_circle_in_one_folder_once_circles_have_their_section() {
    // The twins that say they are one idea split for length: allowed without the section.
    let mut files = SOUND.to_vec();
    files[6] = ("util/mod.rs", "//! Helpers.\npub mod time;\npub mod twin;\n");
    files[7] =
        ("util/time.rs", "//! Time: one idea split for length (twin.rs).\nuse super::twin::b;\n");
    files.push((
        "util/twin.rs",
        "//! Twin: one idea split for length (time.rs).\npub fn b() { super::time::now() }\n",
    ));
    let circles = RULES.to_string() + "## Circles\n\nNone, not even inside a folder.\n\n";
    let dir = floors_tree_ruled("floors-no-twins", &circles, &files);
    let stderr = text(&floors(&dir).stderr);
    assert!(
        stderr.contains(
            "circle in one folder: src/util/time.rs, src/util/twin.rs \
             (move what both need into a file of its own)"
        ),
        "{stderr}"
    );
    fs::remove_dir_all(&dir).unwrap();
    // What both need in a file of its own: no circle.
    files[7] = ("util/time.rs", "//! Time.\nuse super::both::b;\n");
    files[8] = ("util/twin.rs", "//! Twin.\nuse super::both::b;\n");
    files.push(("util/both.rs", "//! Both.\npub fn b() {}\n"));
    let dir = floors_tree_ruled("floors-no-twins-fixed", &circles, &files);
    let out = floors(&dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn floors_fail_a_reach_past_a_front_door() {
    // SOUND passes with the door in place: cli/ imports `crate::serve::ServeOptions` (the
    // door itself), and serve/client.rs's own `super::` imports are inside the room.
    let mut files = SOUND.to_vec();
    files[4] = ("compare.rs", "//! Compare.\nuse crate::serve::client::Conn;\n");
    let dir = floors_tree("floors-door", &files);
    let out = floors(&dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "src/compare.rs:2: reaches crate::serve::client::Conn past `serve`'s front door (serve/mod.rs)"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.matches("ci/floors: src/").count(), 1, "only the one reach: {stderr}");
    fs::remove_dir_all(&dir).unwrap();
    // A path in code, not only in a `use`, is a reach too.
    files[4] = ("compare.rs", "//! Compare.\nfn f() {\n    crate::serve::client::run();\n}\n");
    let dir = floors_tree("floors-door-path", &files);
    let stderr = text(&floors(&dir).stderr);
    assert!(
        stderr.contains("src/compare.rs:3: reaches crate::serve::client::run past"),
        "{stderr}"
    );
    fs::remove_dir_all(&dir).unwrap();
    // Without the section the rule sleeps.
    let dir = floors_tree_ruled("floors-door-dormant", "", &files);
    let out = floors(&dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn floors_fail_a_system_path_outside_its_room() {
    let mut files = SOUND.to_vec();
    files[4] = (
        "compare.rs",
        "//! Compare.\nuse crate::model::Report;\n\nconst P: &str = \"/sys/class/net\";\n\
         const Q: &str = \"sys/class/infiniband\"; // read under a root\n\
         const R: &str = \"reading cat /proc/meminfo: {e}\";\n",
    );
    let dir = floors_tree("floors-sysfs", &files);
    let out = floors(&dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for found in [
        "src/compare.rs:4: names the system path \"/sys/class/net\" outside `util/`",
        "src/compare.rs:5: names the system path \"sys/class/infiniband\" outside `util/`",
        "src/compare.rs:6: names the system path \"/proc/meminfo\" outside `util/`",
    ] {
        assert!(stderr.contains(found), "{found}: {stderr}");
    }
    assert_eq!(stderr.matches("ci/floors: src/").count(), 3, "{stderr}");
    fs::remove_dir_all(&dir).unwrap();
    // Each of these passes: the literal in its room, in a test module, in a `tests.rs`,
    // in a comment, and a path that only ends in `sys/`.
    files[7] =
        ("util/time.rs", "//! Time.\nconst P: &str = \"/sys/class/net\";\npub fn now() {}\n");
    files[4] = (
        "compare.rs",
        "//! Compare: reads nothing under /sys/class/net.\nuse crate::model::Report;\n\
         // not \"/sys/class/net\" either\nconst D: &str = \"docs/sys/notes\";\n\
         #[cfg(test)]\nmod tests {\n    const P: &str = \"/sys/class/net\";\n}\n",
    );
    files.push(("serve/tests.rs", "//! Tests.\nconst P: &str = \"/proc/meminfo\";\n"));
    let dir = floors_tree("floors-sysfs-allowed", &files);
    let out = floors(&dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn floors_fail_clap_outside_cli() {
    let mut files = SOUND.to_vec();
    files[2] = (
        "serve/mod.rs",
        "//! Serve, not clap::Parser in a comment.\nmod client;\nuse clap::Parser;\npub struct ServeOptions;\n",
    );
    files[4] = ("compare.rs", "//! Compare.\n#[derive(clap::Args)]\npub struct Options;\n");
    let dir = floors_tree("floors-clap", &files);
    let out = floors(&dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("src/serve/mod.rs:3: uses clap outside `cli/`"), "{stderr}");
    assert!(stderr.contains("src/compare.rs:2: uses clap outside `cli/`"), "{stderr}");
    assert_eq!(stderr.matches("ci/floors: src/").count(), 2, "{stderr}");
    fs::remove_dir_all(&dir).unwrap();
    // In cli/, clap is at home.
    let mut files = SOUND.to_vec();
    files[1] = ("cli/mod.rs", "//! Flags.\nuse clap::Parser;\nuse crate::serve::ServeOptions;\n");
    let dir = floors_tree("floors-clap-home", &files);
    let out = floors(&dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn floors_fail_a_rules_table_naming_what_is_not_there() {
    let rules = "## Front doors\n\n| room |\n|---|\n| `srve/` |\n\n\
                 ## Only here\n\n| what | only in |\n|---|---|\n| `sysfz` | `util/` |\n| `clap` | `clli/` |\n\n";
    let dir = floors_tree_ruled("floors-rules-typo", rules, SOUND);
    let out = floors(&dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for found in [
        "## Front doors names `srve`, which has no floor",
        "## Only here names `sysfz`, which ci/floors cannot find (it knows `sysfs`, `clap`)",
        "## Only here names `clli`, which has no floor",
    ] {
        assert!(stderr.contains(found), "{found}: {stderr}");
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn floors_fail_a_file_over_650_lines() {
    let mut files = SOUND.to_vec();
    let long = "//! Long.\n".to_string() + &"pub fn f() {}\n".repeat(650);
    files.push(("util/long.rs", &long));
    files[6] = ("util/mod.rs", "//! Helpers.\npub mod time;\npub mod long;\n");
    let dir = floors_tree("floors-long", &files);
    let stderr = text(&floors(&dir).stderr);
    assert!(stderr.contains("src/util/long.rs: 651 lines, over 650"), "{stderr}");
    fs::remove_dir_all(&dir).unwrap();
}

/// This repository's own house (docs/architecture.md's floors) holds.
#[test]
fn floors_pass_this_repository() {
    let out = floors(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `ci/check-report --junit`: doctor's JUnit (of the lab's captured tree) passes the
/// common schema; a file that breaks it fails, naming what.
#[test]
fn check_report_holds_junit_to_the_common_schema() {
    let dir = scratch("junit");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let xml = dir.join("doctor.xml");
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["doctor", "--root"])
        .arg(root.join("tests/fixtures/doctor/lab-rxe"))
        .arg("--junit")
        .arg(&xml)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let check = |p: &Path| {
        Command::new(root.join("ci/check-report")).arg("--junit").arg(p).output().unwrap()
    };
    let out = check(&xml);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("is valid JUnit ... ok"), "{}", text(&out.stdout));
    let good = fs::read_to_string(&xml).unwrap();
    let bad = dir.join("bad.xml");
    let broken = good.replacen(" time=\"0.000\">", " time=\"fast\">", 1).replacen(
        "<testcase ",
        "<testcase flaky=\"yes\" ",
        1,
    );
    assert_ne!(broken, good);
    fs::write(&bad, broken).unwrap();
    let out = check(&bad);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let said = text(&out.stdout);
    assert!(said.contains("is not a decimal") && said.contains("<testcase flaky=...>"), "{said}");
    let _ = fs::remove_dir_all(&dir);
}

fn setup_packages(mode: &str) -> Vec<String> {
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/setup"))
        .args([mode, "--list-packages"])
        .output()
        .expect("ci/setup runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn the_readme_names_what_the_build_needs_as_ci_setup_installs_it() {
    // A user with real hardware builds by the README's line, not by ci/setup: the two
    // must name the same packages (the system SQLite's headers were missing from it).
    let readme =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let listed = flat
        .split("Build needs `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("the README says what the build needs");
    let mut readme_packages: Vec<&str> = listed.split(' ').collect();
    let mut build = setup_packages("build");
    readme_packages.sort();
    build.sort();
    assert_eq!(readme_packages, build, "README: {listed}");
}

#[test]
fn the_main_jobs_setup_installs_what_the_lab_runs_and_nothing_of_the_tests() {
    let build = setup_packages("build");
    let lab = setup_packages("lab");
    let nodes = setup_packages("lab-nodes");
    let all = setup_packages("all");
    // What `cargo build` needs: bindgen over rdma-core's headers, the system's SQLite.
    for needed in
        ["pkg-config", "libibverbs-dev", "librdmacm-dev", "libclang-dev", "libsqlite3-dev"]
    {
        assert!(build.iter().any(|p| p == needed), "build lacks {needed}: {build:?}");
    }
    // What ci/lab's one VM runs: ci/lab-vm's qemu, kernel, busybox and `file` (virtme-ng
    // reads the kernel's version with it); in the guest modprobe, ip, tc, rdma and librxe.
    for needed in [
        "ibverbs-providers",
        "iproute2",
        "kmod",
        "qemu-system-x86",
        "linux-image-amd64",
        "busybox-static",
        "file",
    ] {
        assert!(lab.iter().any(|p| p == needed), "lab lacks {needed}: {lab:?}");
        assert!(!build.iter().any(|p| p == needed), "build installs {needed}: {build:?}");
    }
    // sshd in each guest, for --nodes 2 only.
    for needed in ["openssh-client", "openssh-server"] {
        assert!(!lab.iter().any(|p| p == needed), "lab installs {needed}: {lab:?}");
        assert!(nodes.iter().any(|p| p == needed), "lab-nodes lacks {needed}: {nodes:?}");
    }
    // The main job compares rdmabench's RDMA with its TCP: the reference tools are the
    // benchmarks' and the tests', as are Windows, the browser, packaging and MPI.
    for unused in [
        "perftest",
        "iperf3",
        "qperf",
        "rdma-core",
        "ibverbs-utils",
        "chromium",
        "wine",
        "gcc-mingw-w64-x86-64",
        "openmpi-bin",
        "slurm-wlm",
    ] {
        assert!(!nodes.iter().any(|p| p == unused), "lab-nodes installs {unused}: {nodes:?}");
        assert!(all.iter().any(|p| p == unused), "all lacks {unused}");
    }
    // ci/test's own: chrt (the idle class) and pgrep (its jobs' children).
    for tool in ["util-linux", "procps"] {
        assert!(all.iter().any(|p| p == tool), "all lacks {tool}: {all:?}");
    }
    // One list: each mode is the next one's start, and no package is listed twice.
    assert_eq!(lab[..build.len()], build[..]);
    assert_eq!(nodes[..lab.len()], lab[..]);
    assert_eq!(all[..nodes.len()], nodes[..]);
    let mut unique = all.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), all.len(), "{all:?}");
    // The main job asks for the build's group, builds, and sets up its lab meanwhile, at
    // the lowest CPU priority (the build is the longer).
    let script = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/lab")).unwrap();
    let at = |line: &str| script.lines().position(|l| l.trim() == line);
    let (setup_build, setup_lab, build_step) = (
        at("ci/setup build").expect("ci/lab runs `ci/setup build`"),
        at(r#"nice -n 19 ci/setup "$setup" > target/lab/setup.log 2>&1 &"#)
            .expect("ci/lab sets up its lab"),
        at("cargo build --release --locked || build_rc=$?").expect("ci/lab builds"),
    );
    assert!(setup_build < setup_lab && setup_lab < build_step, "{script}");
    assert!(script.contains("setup=lab-nodes"), "--nodes 2 sets up sshd: {script}");
}
