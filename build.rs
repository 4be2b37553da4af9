//! Records what this binary was built from, for `rdmabench --version` and every result's
//! `tool`: the git commit (or the one `cargo package` noted in `.cargo_vcs_info.json`, or
//! `RDMABENCH_COMMIT` for a build from a source tarball) and the libibverbs and librdmacm
//! versions pkg-config reports (the headers and libraries it was linked against). Also
//! lays out the binary's code with what a test client runs first (`order_text`).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=RDMABENCH_COMMIT");
    // HEAD names the branch; a commit moves the branch's ref, not HEAD.
    let mut watched =
        vec![".git/HEAD".to_string(), ".git/packed-refs".into(), ".cargo_vcs_info.json".into()];
    if let Ok(head) = std::fs::read_to_string(".git/HEAD") {
        if let Some(branch) = head.trim().strip_prefix("ref: ") {
            watched.push(format!(".git/{branch}"));
        }
    }
    for path in watched.iter().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    let commit = std::env::var("RDMABENCH_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .or_else(packaged_commit)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RDMABENCH_COMMIT={commit}");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    for (lib, var) in [("libibverbs", "RDMABENCH_LIBIBVERBS"), ("librdmacm", "RDMABENCH_LIBRDMACM")]
    {
        let version = if linux { pkg_config_version(lib) } else { None };
        println!("cargo:rustc-env={var}={}", version.unwrap_or_default());
    }
    order_text();
    pack_relocations();
}

/// Links the functions a test client runs (src/text-order.txt, written by ci/text-order)
/// first and together in `.text`. The kernel maps a binary's code 64 KiB around each page
/// fault, so the ~800 KB a run executes, scattered over 3.7 MB, kept 2 MB resident; laid
/// out together they keep about 1 MB (docs/results.md, peak RSS). Only where the linker
/// is rustc's own lld (x86_64 Linux from Rust 1.90, no linker chosen): GNU ld has no
/// such option. A name the build does not have (another toolchain, other features) is
/// skipped silently; ci/bench-instructions reports how many were found.
fn order_text() {
    println!("cargo:rerun-if-changed=src/text-order.txt");
    println!("cargo:rerun-if-env-changed=RDMABENCH_TEXT_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let own_lld = var("TARGET") == "x86_64-unknown-linux-gnu"
        && std::env::var_os("RUSTC_LINKER").is_none()
        && !["linker", "fuse-ld", "link-self-contained"].iter().any(|f| flags.contains(f))
        && rustc_minor().is_some_and(|minor| minor >= 90);
    if !own_lld || var("RDMABENCH_TEXT_ORDER") == "0" {
        return;
    }
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join("src/text-order.txt");
    if list.exists() {
        let list = list.display();
        println!("cargo:rustc-link-arg-bin=rdmabench=-Wl,--symbol-ordering-file={list}");
        println!("cargo:rustc-link-arg-bin=rdmabench=-Wl,--no-warn-symbol-ordering");
    }
}

/// Packs the binary's relative relocations (DT_RELR, `-z pack-relative-relocs`): a
/// position-independent binary's ~4,300 pointers into itself are fixed up at start from
/// a bitmap of a few KiB instead of a 100 KiB table of 24-byte entries, which the loader
/// reads whole, so it stays resident (docs/results.md, peak RSS). Only where the C
/// library building it loads such binaries (glibc 2.36 on); the binary then names that
/// need, and an older glibc refuses it at start with a clear message. Any linker that
/// knows the option (lld, GNU ld from 2.38) packs; an older one ignores it with a warning.
fn pack_relocations() {
    println!("cargo:rerun-if-env-changed=RDMABENCH_PACK_RELOCS");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("RDMABENCH_PACK_RELOCS") == "0"
        || !glibc_at_least(2, 36)
    {
        return;
    }
    println!("cargo:rustc-link-arg-bin=rdmabench=-Wl,-z,pack-relative-relocs");
}

/// Whether the C library of this build (`getconf GNU_LIBC_VERSION`: `glibc 2.36`) is at
/// least `major.minor`; not for a cross build, whose target's C library is not this one.
fn glibc_at_least(major: u32, minor: u32) -> bool {
    if std::env::var("HOST").ok() != std::env::var("TARGET").ok() {
        return false;
    }
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut version = text.trim().trim_start_matches("glibc ").split('.');
    let mut next = || version.next().and_then(|v| v.parse::<u32>().ok());
    matches!((next(), next()), (Some(a), Some(b)) if (a, b) >= (major, minor))
}

/// The minor version of the rustc building this crate (`rustc 1.95.0 (…)` → 95).
fn rustc_minor() -> Option<u32> {
    let out = Command::new(std::env::var_os("RUSTC")?).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace().nth(1)?.split('.').nth(1)?.parse().ok()
}

/// The checked-out commit, abbreviated (uncommitted changes are not marked: the build
/// script runs again only when the branch moves).
fn git_commit() -> Option<String> {
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    let head = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !head.is_empty()).then_some(head)
}

/// The commit `cargo package` recorded (`{"git": {"sha1": "…"}}`), for a build from a
/// published crate, without a JSON parser in the build script.
fn packaged_commit() -> Option<String> {
    let text = std::fs::read_to_string(".cargo_vcs_info.json").ok()?;
    let after = &text[text.find("\"sha1\"")? + 6..];
    let start = after.find('"')? + 1;
    let sha: String = after[start..].chars().take_while(char::is_ascii_hexdigit).collect();
    (sha.len() >= 12).then(|| sha[..12].to_string())
}

fn pkg_config_version(lib: &str) -> Option<String> {
    let out = Command::new("pkg-config").args(["--modversion", lib]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
