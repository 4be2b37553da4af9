//! What this binary is: its version, the commit it was built from (build.rs), and the
//! RDMA libraries it was built against and runs with. `rdmabench --version` prints it all;
//! every result's `tool` carries the version and commit.

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit built, abbreviated; `unknown` outside a checkout or package.
pub const COMMIT: &str = env!("RDMABENCH_COMMIT");

/// `rdmabench 0.1.0 (abc123456789)`: the `tool` of every report and hello.
pub fn tool() -> String {
    format!("rdmabench {VERSION} ({COMMIT})")
}

/// `--version`: the version and commit, then the libraries, one per line.
pub fn long() -> String {
    let mut text = format!("rdmabench {VERSION} (commit {COMMIT})\n");
    for line in libraries() {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

#[cfg(target_os = "linux")]
fn libraries() -> Vec<String> {
    let built = |name: &str, version: &str| match version {
        "" => format!("{name} (version unknown: pkg-config had none)"),
        v => format!(
            "{name} {v}{}",
            rdma_core_release(v).map_or(String::new(), |r| format!(" (rdma-core {r})"))
        ),
    };
    let mut lines = vec![format!(
        "built against {}, {}",
        built("libibverbs", env!("RDMABENCH_LIBIBVERBS")),
        built("librdmacm", env!("RDMABENCH_LIBRDMACM"))
    )];
    lines.push(match loaded_library(&crate::facts::system::mapped_files(), "libibverbs.so") {
        Some(path) => {
            let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone().into());
            let file = real.file_name().map_or(String::new(), |f| f.to_string_lossy().into_owned());
            let release = file
                .strip_prefix("libibverbs.so.")
                .and_then(rdma_core_release)
                .map_or(String::new(), |r| format!(" (rdma-core {r})"));
            format!("running with {}{release}", real.display())
        }
        None => "running with no libibverbs loaded".into(),
    });
    lines
}

#[cfg(not(target_os = "linux"))]
fn libraries() -> Vec<String> {
    #[cfg(windows)]
    let rdma = "RDMA through NetworkDirect (NDSPI v2) providers in the Winsock catalog";
    #[cfg(not(windows))]
    let rdma = "no RDMA backend on this platform (TCP tests only)";
    vec![rdma.into()]
}

/// rdma-core's release from a library version: libibverbs `1.14.44.0` and librdmacm
/// `1.3.44.0` both come from rdma-core 44 (its third number).
pub fn rdma_core_release(library_version: &str) -> Option<&str> {
    let release = library_version.split('.').nth(2)?;
    (!release.is_empty() && release.bytes().all(|b| b.is_ascii_digit())).then_some(release)
}

/// The first of the files `mapped` ([`crate::facts::system::mapped_files`]) whose file
/// name starts with `prefix`.
pub fn loaded_library(mapped: &[String], prefix: &str) -> Option<String> {
    mapped
        .iter()
        .find(|path| path.rsplit('/').next().is_some_and(|f| f.starts_with(prefix)))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_core_release_is_the_third_number() {
        assert_eq!(rdma_core_release("1.14.44.0"), Some("44"));
        assert_eq!(rdma_core_release("1.3.50.0"), Some("50"));
        assert_eq!(rdma_core_release("1.14"), None);
        assert_eq!(rdma_core_release("1.x.y"), None);
    }

    #[test]
    fn the_loaded_library_is_found_by_its_file_name() {
        let maps = "\
7f00-7f01 r--p 00000000 fe:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6
7f10-7f11 r-xp 00000000 fe:01 2 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0
7f20-7f21 rw-p 00000000 00:00 0
7f30-7f31 r--p 00000000 fe:01 3 /opt/libibverbs.so.extra/libc.so";
        let maps = crate::facts::system::mapped(maps);
        assert_eq!(
            loaded_library(&maps, "libibverbs.so").as_deref(),
            Some("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0")
        );
        assert_eq!(loaded_library(&maps, "librdmacm.so"), None);
    }

    #[test]
    fn the_long_version_names_the_commit_and_the_libraries() {
        let text = long();
        assert!(text.starts_with(&format!("rdmabench {VERSION} (commit {COMMIT})\n")), "{text}");
        #[cfg(target_os = "linux")]
        {
            assert!(text.contains("built against libibverbs "), "{text}");
            // This test binary links libibverbs through the ffi crate.
            assert!(text.contains("running with /"), "{text}");
        }
    }
}
