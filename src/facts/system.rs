//! The fixed system files other rooms need, each read bounded: `/proc/stat` (per size,
//! straight from its path: no resolving, so a size costs the system calls it always
//! did), `/proc/cpuinfo`'s clock, `/proc/meminfo`'s huge page size, the clock source, the
//! mounts, and the libibverbs this process runs with (`/proc/self/maps`) or has
//! installed: rdma-core's version.

use std::path::{Path, PathBuf};

use super::{entries, paths, SystemTree};
use crate::files::{read_text, SYSTEM_FILE_LIMIT};
use crate::text::clean;

/// A live fixed file's text, at most [`SYSTEM_FILE_LIMIT`] bytes.
fn live_text(rel: &str) -> Option<String> {
    read_text(&paths::live(rel), SYSTEM_FILE_LIMIT).ok()
}

/// `/proc/stat`'s text now (the machine's CPU times).
pub fn proc_stat() -> Option<String> {
    live_text(paths::PROC_STAT)
}

/// `/proc/cpuinfo`'s text now.
pub fn cpuinfo() -> Option<String> {
    live_text(paths::PROC_CPUINFO)
}

/// A number of `/proc/meminfo` now (`Hugepagesize` gives 2048 for `2048 kB`).
pub fn meminfo(key: &str) -> Option<u64> {
    super::host::meminfo_field(&live_text(paths::PROC_MEMINFO)?, key)
}

/// `/proc/self/mountinfo`'s text now; empty when it cannot be read.
pub fn mountinfo() -> String {
    live_text(paths::SELF_MOUNTINFO).unwrap_or_default()
}

/// Linux's current clock source, as sysfs names it.
pub fn clocksource() -> Option<String> {
    let text = read_text(&paths::live(paths::CLOCKSOURCE), 256).ok()?;
    Some(clean(&text)).filter(|c| !c.is_empty())
}

/// The files this process has mapped, as `/proc/self/maps` names them, in its order.
pub fn mapped_files() -> Vec<String> {
    live_text(paths::SELF_MAPS).map_or_else(Vec::new, |maps| mapped(&maps))
}

/// The file of each mapping of a `/proc/PID/maps` text that maps one: the one maps
/// parser.
pub fn mapped(maps: &str) -> Vec<String> {
    maps.lines().filter_map(|line| line.split_whitespace().nth(5)).map(str::to_string).collect()
}

/// The rdma-core version (`44.0`) under `root`, from the first of:
/// 1. the libibverbs this process has mapped (`proc/self/maps`): its file name is
///    `libibverbs.so.1.<api>.<rdma-core version>` (`libibverbs.so.1.14.44.0`);
/// 2. such a file in the library folders: `usr/lib/<multiarch>/`, `lib/<multiarch>/`
///    (folders named `*-linux-*`), `usr/lib64/`, `lib64/`, `usr/lib/`, `lib/`;
/// 3. the dpkg status (`var/lib/dpkg/status`) of `ibverbs-providers` or `libibverbs1`,
///    without epoch and Debian revision (`44.0-2` → `44.0`).
///
/// `None` when none of them says.
pub fn rdma_core_version(root: &Path) -> Option<String> {
    let tree = SystemTree::new(root);
    tree.read(paths::SELF_MAPS)
        .and_then(|maps| mapped_libibverbs(&maps))
        .or_else(|| installed_libibverbs(&tree))
        .or_else(|| dpkg_version(&tree.read(paths::DPKG_STATUS)?))
}

/// The rdma-core version a libibverbs file name carries.
fn libibverbs_version(file_name: &str) -> Option<String> {
    let (_api, version) = file_name.strip_prefix("libibverbs.so.1.")?.split_once('.')?;
    version.starts_with(|c: char| c.is_ascii_digit()).then(|| clean(version))
}

/// The version of the libibverbs in a `/proc/PID/maps` text.
fn mapped_libibverbs(maps: &str) -> Option<String> {
    mapped(maps).iter().find_map(|path| libibverbs_version(path.rsplit('/').next()?))
}

/// The version of the first libibverbs file found in the library folders (each
/// listing bounded, sorted).
fn installed_libibverbs(tree: &SystemTree) -> Option<String> {
    let sorted = |dir: &Path| {
        let mut names = entries(tree, dir);
        names.sort();
        names
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    for base in paths::MULTIARCH_BASES {
        let arch = sorted(Path::new(base)).into_iter().filter(|n| n.contains("-linux-"));
        dirs.extend(arch.map(|n| Path::new(base).join(n)));
    }
    dirs.extend(paths::LIB_DIRS.iter().map(PathBuf::from));
    dirs.iter().find_map(|dir| sorted(dir).iter().find_map(|n| libibverbs_version(n)))
}

/// The upstream version of the first installed rdma-core library package in a dpkg
/// status file.
fn dpkg_version(status: &str) -> Option<String> {
    let stanzas: Vec<&str> = status.split("\n\n").collect();
    ["ibverbs-providers", "libibverbs1"].iter().find_map(|package| {
        stanzas.iter().find_map(|stanza| {
            let field = |name: &str| {
                stanza.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
            };
            let package_name = field("Package")?;
            let installed = field("Status").is_some_and(|s| s.ends_with(" installed"));
            if package_name != *package || !installed {
                return None;
            }
            let version = field("Version")?;
            let version = version.split_once(':').map_or(version, |(_epoch, v)| v);
            let upstream = version.rsplit_once('-').map_or(version, |(u, _revision)| u);
            (!upstream.is_empty()).then(|| clean(upstream))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_file_names_carry_the_rdma_core_version() {
        assert_eq!(libibverbs_version("libibverbs.so.1.14.44.0").as_deref(), Some("44.0"));
        assert_eq!(libibverbs_version("libibverbs.so.1.1.17.1").as_deref(), Some("17.1"));
        assert_eq!(libibverbs_version("libibverbs.so.1"), None);
        assert_eq!(libibverbs_version("libibverbs.so.1.14"), None);
        assert_eq!(libibverbs_version("libibverbs.so"), None);
        assert_eq!(libibverbs_version("libmlx4-rdmav34.so"), None);
    }

    #[test]
    fn maps_name_the_loaded_library() {
        let maps = "7f1c2a000000-7f1c2a00d000 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7f1c2b000000-7f1c2b00d000 r-xp 00004000 08:01 5678 /opt/ofed/lib/libibverbs.so.1.14.2307.0 (deleted)\n\
                    7ffd4c000000-7ffd4c021000 rw-p 00000000 00:00 0 [stack]\n";
        assert_eq!(mapped(maps).len(), 3);
        assert_eq!(mapped(maps)[1], "/opt/ofed/lib/libibverbs.so.1.14.2307.0");
        assert_eq!(mapped_libibverbs(maps).as_deref(), Some("2307.0"));
        assert_eq!(mapped_libibverbs("7ffd4c000000-7ffd4c021000 rw-p 00000000 00:00 0\n"), None);
    }

    #[test]
    fn dpkg_status_gives_the_upstream_version_of_an_installed_package() {
        let status = "Package: libibverbs1\nStatus: install ok installed\nVersion: 1:50.0-1\n\n\
                      Package: ibverbs-providers\nStatus: deinstall ok config-files\nVersion: 39.0-1\n\n\
                      Package: ibverbs-providers\nArchitecture: amd64\nStatus: install ok installed\n\
                      Version: 44.0-2\n";
        assert_eq!(dpkg_version(status).as_deref(), Some("44.0"));
        let only_lib = "Package: libibverbs1\nStatus: install ok installed\nVersion: 1:50.0-1\n";
        assert_eq!(dpkg_version(only_lib).as_deref(), Some("50.0"));
        assert_eq!(
            dpkg_version("Package: bash\nStatus: install ok installed\nVersion: 5.2-1\n"),
            None
        );
    }

    #[test]
    fn this_process_reads_its_fixed_files() {
        if cfg!(target_os = "linux") {
            // Linux builds link libibverbs, so the test binary has it mapped.
            let version = rdma_core_version(Path::new("/")).expect("libibverbs is linked");
            assert!(version.starts_with(|c: char| c.is_ascii_digit()), "{version}");
            assert!(proc_stat().is_some_and(|s| s.starts_with("cpu ")));
            assert!(mapped_files().iter().any(|f| f.contains("libibverbs")));
            assert!(!mountinfo().is_empty());
            assert!(meminfo("MemTotal").is_some_and(|kib| kib > 0));
        }
    }
}
