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
