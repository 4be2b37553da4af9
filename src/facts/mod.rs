//! Host facts: the one room that reads `/sys` and `/proc`. Each path is named once
//! ([`paths`]), relative to a root directory (`/` on a live host: [`live`]; a tree
//! `doctor --capture` copied, or a test fixture), and every read is bounded: a file
//! through [`SystemTree::read`] ([`crate::files::SYSTEM_FILE_LIMIT`], confined to the
//! root), a folder's listing to [`MAX_ENTRIES`] names, a counter to 64 bytes.
//!
//! - [`device`]: an RDMA device as sysfs shows it ([`Device`]: adapter, firmware, PCI
//!   function, PCIe, NUMA node, ports, GIDs) and a network interface ([`Netdev`]);
//! - [`host`]: what the host's checks judge ([`HostFacts`]) and who the host is
//!   ([`Identity`]: name, kernel, distribution, CPU model, governor);
//! - [`port`]: a port's state, rate and counter files as they stand now;
//! - [`system`]: the fixed files others read (`/proc/stat` per size, `cpu MHz`, huge
//!   pages, the clock source, mounts, the libibverbs mapped and rdma-core's version);
//! - [`cpus`]: the one CPU-list parser and its limits; [`pcie`]: the one PCIe type;
//!   [`decode`]: the codes verbs reports and which adapter a PCI id is.

pub mod cpus;
pub mod decode;
pub mod device;
pub mod host;
pub mod paths;
pub mod pcie;
pub mod port;
pub mod system;

use std::path::Path;

pub use crate::files::SystemTree;
pub use device::{Device, Gid, Netdev, Port, HW_TYPE_INFINIBAND};
pub use host::{HostFacts, HugePages, Identity, IdleState};
pub use pcie::Pcie;

use crate::text::clean;

/// No folder is listed past this many names (a real `/sys` folder has far fewer; a
/// hostile tree cannot make a listing grow without end).
pub const MAX_ENTRIES: usize = 4096;

/// This host's tree, rooted at `/`.
pub fn live() -> SystemTree {
    SystemTree::new(Path::new("/"))
}

/// The names in `root/rel`, sorted naturally (`cpu10` after `cpu9`), at most
/// [`MAX_ENTRIES`] of them; none when it is not a folder or resolves out of the tree.
/// Names are shown, so they are [`clean`]ed too (a name that needed it then reads as
/// having no files).
pub fn entries(root: &SystemTree, rel: impl AsRef<Path>) -> Vec<String> {
    let Ok(dir) = root.resolve(rel) else { return Vec::new() };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten().take(MAX_ENTRIES).map(|e| clean(&e.file_name().to_string_lossy())).collect()
        })
        .unwrap_or_default();
    names.sort_by_key(|a| natural(a));
    names
}

/// Sort key: `cpu10` after `cpu9`.
fn natural(name: &str) -> (String, u64) {
    let digits = name.trim_start_matches(|c: char| !c.is_ascii_digit());
    let prefix = &name[..name.len() - digits.len()];
    (prefix.to_string(), digits.parse().unwrap_or(0))
}

/// A file's text, trimmed, to parse; `None` when unreadable or empty.
fn trimmed(root: &SystemTree, rel: impl AsRef<Path>) -> Option<String> {
    let text = root.read(rel)?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// A file's text to show: [`clean`]ed, so whatever the file holds prints inert; `None`
/// when unreadable or empty.
fn word_in(root: &SystemTree, rel: impl AsRef<Path>) -> Option<String> {
    let text = clean(&root.read(rel)?);
    (!text.is_empty()).then_some(text)
}

/// A file's number.
fn number<T: std::str::FromStr>(root: &SystemTree, rel: impl AsRef<Path>) -> Option<T> {
    trimmed(root, rel)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_sorted_naturally_and_bounded() {
        let root = std::env::temp_dir().join(format!("rdmabench-facts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("many");
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..MAX_ENTRIES + 10 {
            std::fs::write(dir.join(format!("cpu{i}")), "").unwrap();
        }
        std::fs::write(root.join("file"), " 42 \n").unwrap();
        let tree = SystemTree::new(&root);
        let names = entries(&tree, "many");
        assert_eq!(names.len(), MAX_ENTRIES);
        assert!(names.windows(2).all(|w| natural(&w[0]) < natural(&w[1])), "natural order");
        assert_eq!(entries(&tree, "absent"), Vec::<String>::new());
        assert_eq!(entries(&tree, "file"), Vec::<String>::new(), "not a folder");
        assert_eq!(number::<u32>(&tree, "file"), Some(42));
        assert_eq!(word_in(&tree, "file").as_deref(), Some("42"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_file_past_the_limit_is_refused_not_read() {
        let root = std::env::temp_dir().join(format!("rdmabench-facts-big-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let big = std::fs::File::create(root.join("big")).unwrap();
        big.set_len(crate::files::SYSTEM_FILE_LIMIT + 1).unwrap();
        let tree = SystemTree::new(&root);
        assert_eq!(trimmed(&tree, "big"), None);
        assert!(tree.refused().is_some_and(|e| e.refused()), "kept as refused");
        let _ = std::fs::remove_dir_all(&root);
    }
}
