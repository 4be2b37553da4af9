//! The Debian package `ci/package` builds: what it holds, and that what it installs runs
//! (the binary, its man pages, its bash completion). ci/test builds the package, then
//! runs these with RDMABENCH_DEB naming it (`cargo test --test package -- --ignored`).

use std::path::PathBuf;
use std::process::{Command, Output};

/// The package under test; a run without it is a failure, not a skip.
fn deb() -> PathBuf {
    let path = std::env::var_os("RDMABENCH_DEB")
        .expect("RDMABENCH_DEB is not set: run ci/package, then these tests with its path");
    let path = PathBuf::from(path);
    assert!(path.is_file(), "RDMABENCH_DEB={} is not a file", path.display());
    path
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// `man -l PAGE` as text, 100 columns wide.
fn man(page: &std::path::Path) -> Output {
    run(Command::new("man").env("MANWIDTH", "100").args(["-P", "cat", "-l"]).arg(page))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The package unpacked (`dpkg-deb -x`) into a scratch directory of this test's own.
fn unpacked(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rdmabench-deb-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = run(Command::new("dpkg-deb").arg("-x").arg(deb()).arg(&dir));
    assert!(out.status.success(), "dpkg-deb -x: {}", text(&out.stderr));
    dir
}

const TESTS: [&str; 10] = [
    "write-bw",
    "read-bw",
    "send-bw",
    "atomic-bw",
    "write-lat",
    "read-lat",
    "send-lat",
    "atomic-lat",
    "tcp-bw",
    "tcp-lat",
];

#[test]
#[ignore = "needs the package: ci/test builds it with ci/package"]
fn package_holds_the_binary_man_pages_completions_and_docs() {
    let out = run(Command::new("dpkg-deb").arg("--contents").arg(deb()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    let entry = |path: &str| listing.lines().find(|l| l.ends_with(&format!(" ./{path}")));
    let binary = entry("usr/bin/rdmabench").unwrap_or_else(|| panic!("no binary in\n{listing}"));
    assert!(binary.starts_with("-rwxr-xr-x"), "{binary}");
    let mut want = vec![
        "usr/share/man/man1/rdmabench.1.gz".to_string(),
        "usr/share/bash-completion/completions/rdmabench".into(),
        "usr/share/zsh/vendor-completions/_rdmabench".into(),
        "usr/share/fish/vendor_completions.d/rdmabench.fish".into(),
        "usr/share/doc/rdmabench/README.md".into(),
        "usr/share/doc/rdmabench/copyright".into(),
        "usr/share/doc/rdmabench/docs/lab.md".into(),
        "usr/share/doc/rdmabench/examples/rdmabench-memlock.conf".into(),
        "usr/share/doc/rdmabench/examples/qualify-profile.toml".into(),
        "usr/share/doc/rdmabench/examples/qualify-quick.toml".into(),
        "usr/share/doc/rdmabench/examples/qualify-sweep.toml".into(),
        "lib/systemd/system/rdmabench-serve.service".into(),
        "etc/rdmabench/serve.conf".into(),
    ];
    for cmd in TESTS.iter().chain(&[
        "serve",
        "compare",
        "doctor",
        "health",
        "qualify",
        "devices",
        "completions",
    ]) {
        want.push(format!("usr/share/man/man1/rdmabench-{cmd}.1.gz"));
    }
    for path in &want {
        assert!(entry(path).is_some(), "{path} is not in the package:\n{listing}");
    }
    // The example profiles are the built-ins, as `qualify --print-profile` prints them.
    let dir = unpacked("profiles");
    for (name, built_in) in [
        ("quick", include_str!("../src/qualify/quick.toml")),
        ("sweep", include_str!("../src/qualify/sweep.toml")),
    ] {
        let example = dir.join(format!("usr/share/doc/rdmabench/examples/qualify-{name}.toml"));
        assert_eq!(std::fs::read_to_string(&example).unwrap(), built_in, "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let fields =
        run(Command::new("dpkg-deb").arg("--field").arg(deb()).arg("Package").arg("Depends"));
    let fields = text(&fields.stdout);
    // libopenmpi3: the package's binary has the mesh (ci/package builds it so);
    // libsqlite3-0: the results history links the system's SQLite.
    for dep in
        ["libibverbs1", "librdmacm1", "ibverbs-providers", "libc6", "libopenmpi3", "libsqlite3-0"]
    {
        assert!(fields.contains(dep), "Depends lacks {dep}: {fields}");
    }
}

#[test]
#[ignore = "needs the package: ci/test builds it with ci/package"]
fn package_binary_runs_from_the_unpacked_tree() {
    let root = unpacked("run");
    let bin = root.join("usr/bin/rdmabench");
    let out = run(Command::new(&bin).arg("--version"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let version = text(&out.stdout);
    let head = run(Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR")));
    let head = text(&head.stdout).trim().to_string();
    assert!(!head.is_empty(), "this test runs in the git checkout it was built from");
    assert!(
        version.starts_with(&format!("rdmabench {} (commit {head})\n", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert!(version.contains("built against libibverbs "), "{version}");
    assert!(version.contains("running with ") && version.contains("libibverbs.so"), "{version}");

    // `devices`: the inventory where there are devices, else its one-line error and 2.
    let out = run(Command::new(&bin).arg("devices"));
    let have_devices =
        std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
    if have_devices {
        assert!(out.status.success(), "{}", text(&out.stderr));
    } else {
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "stdout {} stderr {err}", text(&out.stdout));
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("rdmabench: ") && err.contains("RDMA"), "{err}");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
#[ignore = "needs the package: ci/test builds it with ci/package"]
fn package_man_pages_render_with_man() {
    let root = unpacked("man");
    let dir = root.join("usr/share/man/man1");
    let mut pages: Vec<PathBuf> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    pages.sort();
    assert!(pages.len() > TESTS.len(), "{pages:?}");
    for page in &pages {
        let out = man(page);
        let shown = text(&out.stdout);
        let name =
            page.file_name().unwrap().to_string_lossy().trim_end_matches(".1.gz").to_string();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "man -l {}: {}",
            page.display(),
            text(&out.stderr)
        );
        assert!(shown.contains("NAME") && shown.contains(&name), "{}:\n{shown}", page.display());
    }
    let top = text(&man(&dir.join("rdmabench.1.gz")).stdout);
    assert!(
        top.contains("rdmabench-write-bw(1)"),
        "the main page lists the subcommands' pages:\n{top}"
    );
    let write_bw = text(&man(&dir.join("rdmabench-write-bw.1.gz")).stdout);
    assert!(write_bw.contains("--report_gbits") && write_bw.contains("--gid-index"), "{write_bw}");
    // The docs' commands as EXAMPLES, then what the status means and where to read on.
    let sections: Vec<&str> = write_bw.lines().filter(|l| !l.starts_with(' ')).collect();
    for section in ["EXAMPLES", "EXIT STATUS", "SEE ALSO"] {
        assert!(sections.contains(&section), "no {section} in {sections:?}");
    }
    let examples = write_bw.split("EXAMPLES").nth(1).unwrap();
    assert!(examples.contains("rdmabench write-bw -d mlx4_0 192.168.1.10"), "{examples}");
    assert!(write_bw.contains("/usr/share/doc/rdmabench/"), "{write_bw}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
#[ignore = "needs the package: ci/test builds it with ci/package"]
fn package_completions_load_and_bash_completes_subcommands_and_flags() {
    let root = unpacked("bash");
    let script = root.join("usr/share/bash-completion/completions/rdmabench");
    let complete = |words: &str| -> Vec<String> {
        // What bash does on TAB: COMP_WORDS/COMP_CWORD set, the function called.
        let probe = format!(
            "source '{}' || exit 9; complete -p rdmabench >/dev/null || exit 8; \
             COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; \
             _rdmabench rdmabench \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let out = run(Command::new("bash").args(["--norc", "--noprofile", "-c", &probe]));
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "bash: {:?} {}",
            out.status,
            text(&out.stderr)
        );
        text(&out.stdout).lines().map(str::to_string).collect()
    };
    assert_eq!(complete("rdmabench wri"), ["write-bw", "write-lat"]);
    let flags = complete("rdmabench write-bw --report");
    assert!(flags.iter().any(|f| f == "--report_gbits"), "{flags:?}");
    // zsh and fish parse theirs without running it (`-n`; ci/setup installs both).
    for (shell, file, marker) in [
        ("zsh", "usr/share/zsh/vendor-completions/_rdmabench", "#compdef rdmabench"),
        ("fish", "usr/share/fish/vendor_completions.d/rdmabench.fish", "complete -c rdmabench"),
    ] {
        let path = root.join(file);
        let body = std::fs::read_to_string(&path).unwrap();
        assert!(body.contains(marker) && body.contains("write-bw"), "{file}");
        let out = run(Command::new(shell).arg("-n").arg(&path));
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{shell} -n {file}: {}",
            text(&out.stderr)
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
#[ignore = "needs the package: ci/test builds it with ci/package"]
fn package_binary_is_stripped_and_its_help_names_installed_docs() {
    let root = unpacked("strip");
    let bin = root.join("usr/bin/rdmabench");
    let out = run(Command::new("readelf").args(["-S", "--wide"]).arg(&bin));
    assert!(out.status.success(), "readelf: {}", text(&out.stderr));
    let sections = text(&out.stdout);
    assert!(sections.contains(".text"), "{sections}");
    // (.debug_gdb_scripts stays: a loaded section naming gdb's pretty-printers, no symbols.)
    for gone in [".debug_info", ".debug_line", ".debug_str", ".symtab"] {
        assert!(!sections.contains(gone), "{gone} is still in the binary:\n{sections}");
    }
    let help = text(&run(Command::new(&bin).args(["serve", "--help"])).stdout);
    assert!(help.contains("/usr/share/doc/rdmabench/docs/security.md"), "{help}");
    // `| head -1`: the reader goes away; the command ends quietly, status 0.
    let probe = format!(
        "'{}' completions bash | head -1; echo \"status ${{PIPESTATUS[0]}}\"",
        bin.display()
    );
    let out = run(Command::new("bash").args(["--norc", "--noprofile", "-c", &probe]));
    assert_eq!(text(&out.stdout), "_rdmabench() {\nstatus 0\n");
    assert_eq!(text(&out.stderr), "");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
#[ignore = "needs the package: ci/test builds it with ci/package"]
fn package_serve_unit_verifies_and_its_settings_are_in_the_config() {
    let root = unpacked("unit");
    let unit =
        std::fs::read_to_string(root.join("lib/systemd/system/rdmabench-serve.service")).unwrap();
    let config = std::fs::read_to_string(root.join("etc/rdmabench/serve.conf")).unwrap();
    // Every ${VARIABLE} ExecStart expands is set in the config (but systemd's own).
    let exec = unit.lines().find(|l| l.starts_with("ExecStart=")).expect("ExecStart");
    let used: Vec<&str> = exec
        .split("${")
        .skip(1)
        .filter_map(|s| s.split('}').next())
        .filter(|v| *v != "CREDENTIALS_DIRECTORY")
        .collect();
    assert!(used.contains(&"PORT") && used.contains(&"BIND"), "{exec}");
    for var in used {
        assert!(
            config.lines().any(|l| l.starts_with(&format!("{var}="))),
            "{var} not in serve.conf"
        );
    }
    for hardening in [
        "DynamicUser=yes",
        "LimitMEMLOCK=infinity",
        "CapabilityBoundingSet=\n",
        "LoadCredential=auth-key:/etc/rdmabench/serve.key",
    ] {
        assert!(unit.contains(hardening), "the unit lacks {hardening:?}");
    }
    // systemd-analyze verify, with ExecStart's binary the unpacked one (verify checks it).
    let bin = root.join("usr/bin/rdmabench");
    let copy = root.join("rdmabench-serve.service");
    std::fs::write(&copy, unit.replace("/usr/bin/rdmabench", &bin.display().to_string())).unwrap();
    let out = run(Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&copy));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    std::fs::remove_dir_all(&root).unwrap();
}
