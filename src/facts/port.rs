//! A port as it stands now: its state and rate (a pulled cable, a soak's link re-read
//! each interval) and its counter files (`counters/`, `hw_counters/`). These are read
//! per interval or per size, never per operation.

use std::io::Read;
use std::path::PathBuf;

use super::device::word;
use super::{entries, paths, word_in, SystemTree};

/// Port `port` of RDMA device `name` as sysfs words it now: its state (`DOWN`,
/// `ACTIVE`, …) and physical state (`Disabled`, `LinkUp`, …), without the numeric
/// prefixes. `None` when sysfs has no such port.
pub fn state(root: &SystemTree, name: &str, port: u8) -> Option<(String, Option<String>)> {
    let dir = paths::port_dir(name, port);
    let read = |file: &str| word_in(root, dir.join(file)).map(word);
    Some((read("state")?, read("phys_state")))
}

/// Port `port`'s signalling rate as sysfs words it (`100 Gb/sec (4X EDR)`).
pub fn rate(root: &SystemTree, name: &str, port: u8) -> Option<String> {
    word_in(root, paths::port_dir(name, port).join("rate"))
}

/// Every counter file of port `port` of RDMA device `name` that reads as a number,
/// `folder/name` each with its path, sorted; at most [`super::MAX_ENTRIES`] a folder.
pub fn counter_files(root: &SystemTree, name: &str, port: u8) -> Vec<(String, PathBuf)> {
    let dir = paths::port_dir(name, port);
    let mut found = Vec::new();
    for folder in paths::COUNTER_FOLDERS {
        let Ok(real) = root.resolve(dir.join(folder)) else { continue };
        for file in entries(root, dir.join(folder)) {
            let path = real.join(&file);
            if read_counter(&path).is_some() {
                found.push((format!("{folder}/{file}"), path));
            }
        }
    }
    found.sort();
    found
}

/// How many times port `port` of RDMA device `name` has gone down since the driver
/// started: `counters/link_downed` (InfiniBand's LinkDownedCounter), else
/// `hw_counters/link_downed` (soft-RoCE counts its port's downs there). `None` when the
/// port has neither.
pub fn link_downed(root: &SystemTree, name: &str, port: u8) -> Option<u64> {
    let dir = paths::port_dir(name, port);
    paths::COUNTER_FOLDERS.iter().find_map(|folder| {
        let path = root.resolve(dir.join(folder)).ok()?.join("link_downed");
        read_counter(&path)
    })
}

/// A counter file's value: a decimal number (a few bytes; longer is not a counter).
pub fn read_counter(path: &std::path::Path) -> Option<u64> {
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(64).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_ports_state_rate_and_counters_in_words_and_numbers() {
        let root = std::env::temp_dir().join(format!("rdmabench-port-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let port = root.join(paths::port_dir("mlx4_0", 1));
        fs::create_dir_all(port.join("counters")).unwrap();
        fs::create_dir_all(port.join("hw_counters")).unwrap();
        fs::write(port.join("state"), "1: DOWN\n").unwrap();
        fs::write(port.join("phys_state"), "3: Disabled\n").unwrap();
        fs::write(port.join("rate"), "56 Gb/sec (4X FDR)\n").unwrap();
        fs::write(port.join("counters/port_rcv_packets"), "12\n").unwrap();
        fs::write(port.join("counters/port_xmit_wait"), "not a number\n").unwrap();
        fs::write(port.join("hw_counters/rnr_nak_retry_err"), "0\n").unwrap();
        fs::write(port.join("hw_counters/long"), "1".repeat(100)).unwrap();
        let tree = SystemTree::new(&root);
        assert_eq!(state(&tree, "mlx4_0", 1), Some(("DOWN".into(), Some("Disabled".into()))));
        assert_eq!(state(&tree, "mlx4_0", 2), None, "no such port");
        assert_eq!(rate(&tree, "mlx4_0", 1).as_deref(), Some("56 Gb/sec (4X FDR)"));
        let names: Vec<String> =
            counter_files(&tree, "mlx4_0", 1).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["counters/port_rcv_packets", "hw_counters/rnr_nak_retry_err"]);
        assert_eq!(counter_files(&tree, "mlx4_0", 2), Vec::new());
        fs::remove_file(port.join("phys_state")).unwrap();
        assert_eq!(state(&tree, "mlx4_0", 1), Some(("DOWN".into(), None)));
        let _ = fs::remove_dir_all(&root);
    }
}
