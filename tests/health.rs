//! `health`'s refusals, on any host (its lab tests are tests/lab_health.rs): a profile
//! that cannot give floors stops it before anything is read or run, with one line and
//! exit 2.

use std::process::Command;

#[test]
fn a_profile_without_floors_or_file_is_one_line_and_exit_2() {
    let dir = std::env::temp_dir().join(format!("rdmabench-health-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tcp = dir.join("tcp.toml");
    std::fs::write(&tcp, "[[test]]\ntest = \"tcp_bw\"\nsizes = [\"128K\"]\n").unwrap();
    let missing = dir.join("missing.toml");
    for (profile, says) in [
        (tcp.to_str().unwrap(), "no write_bw or write_lat test"),
        (missing.to_str().unwrap(), "missing.toml"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
            .args(["health", "--profile", profile])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("rdmabench: ") && stderr.contains(says), "{stderr}");
        assert!(o.stdout.is_empty());
    }
    // Two outputs on stdout cannot be told apart.
    let o = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["health", "--json", "-", "--csv", "-"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("only one output can be stdout"));
    // Flags out of range are usage errors too.
    let o =
        Command::new(env!("CARGO_BIN_EXE_rdmabench")).args(["health", "-D", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The results store is on by default, as qualify's: opened (created) before anything is
/// read or run, so one that cannot be written stops health at once; `--no-store` opts out.
#[cfg(unix)]
#[test]
fn the_default_store_is_opened_first_and_no_store_opts_out() {
    let dir = std::env::temp_dir().join(format!("rdmabench-health-store-{}", std::process::id()));
    let (data, other) = (dir.join("data"), dir.join("other"));
    std::fs::create_dir_all(&dir).unwrap();
    // No such device: health stops after reading the facts, before any loopback.
    let health = |data: &std::path::Path, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rdmabench"))
            .env("XDG_DATA_HOME", data)
            .args(["health", "-d", "nosuch0"])
            .args(args)
            .output()
            .unwrap()
    };
    let o = health(&data, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(data.join("rdmabench/results.db").is_file(), "the default store, opened first");
    let o = health(&other, &["--no-store"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!other.exists(), "--no-store: nothing created");
    // A store that cannot be written: one line naming it, before the device is looked for.
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let bad = file.join("results.db");
    let o = health(&other, &["--store", bad.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("results store {}: cannot create", bad.display())),
        "{stderr}"
    );
    assert!(!stderr.contains("nosuch0"), "{stderr}");
    // Both at once is a usage error.
    let o = health(&other, &["--store", bad.to_str().unwrap(), "--no-store"]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}
