//! CPU lists: the one parser (`--cpus`, sysfs's `cpulist`, `Cpus_allowed_list`) with one
//! set of limits, their compact printing, and the NUMA nodes' CPUs.

use std::path::Path;

use crate::files::SystemTree;

use super::paths;

/// CPUs are numbered below this, and no list names more than this many — nor a
/// tree's lists all together ([`cpu_list_within`]): Linux's NR_CPUS is at most 8192.
pub const MAX_CPUS: usize = 8192;

/// `0,2-3` → `[0, 2, 3]` (white space around the list is trimmed; an empty list is
/// empty), taking at most `left` CPUs and leaving `left` that many fewer: the one CPU
/// list parser, for `--cpus`, sysfs's `cpulist` and `Cpus_allowed_list`, whose callers
/// share one `left` across the lists of one tree. Nothing is expanded before it is
/// counted.
///
/// # Errors
/// Malformed, a CPU at or over [`MAX_CPUS`], or more CPUs than `left`: why, in words.
pub fn cpu_list_within(text: &str, left: &mut usize) -> Result<Vec<usize>, String> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Ok(cpus);
    }
    let bad = || "a CPU list like 0,2-3".to_string();
    for part in text.split(',') {
        let number = |t: &str| t.trim().parse::<usize>().map_err(|_| bad());
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let v = number(part)?;
                (v, v)
            }
        };
        if a > b {
            return Err(bad());
        }
        if b >= MAX_CPUS {
            return Err(format!("CPU {b}: CPUs are numbered below {MAX_CPUS}"));
        }
        if b - a >= *left {
            return Err(format!("more than {MAX_CPUS} CPUs listed in all"));
        }
        *left -= b - a + 1;
        cpus.extend(a..=b);
    }
    Ok(cpus)
}

/// Compact form of a CPU list: `[0,1,2,3,8]` → `0-3,8` (sorted, each CPU once).
pub fn cpu_ranges(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        parts.push(if sorted[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", sorted[i])
        });
        i += 1;
    }
    parts.join(",")
}

/// The CPUs of NUMA node `n` under `root`; `None` when the node is unknown, lists no
/// CPUs or a list past the limits.
pub fn node_cpus(root: &SystemTree, n: u32) -> Option<Vec<usize>> {
    let text = root.read(paths::node_cpulist(n))?;
    cpu_list_within(&text, &mut MAX_CPUS.clone()).ok().filter(|c| !c.is_empty())
}

/// The NUMA nodes and their CPUs: at most [`MAX_CPUS`] CPUs in all the nodes' lists
/// together (a host's nodes list each CPU once); the first list past it is refused (the
/// tree keeps it), and the nodes are read no further.
pub fn numa_nodes(root: &SystemTree) -> Vec<(u32, Vec<usize>)> {
    let mut left = MAX_CPUS;
    let mut nodes = Vec::new();
    for n in super::entries(root, Path::new(paths::SYSTEM_NODE)) {
        let Some(id) = n.strip_prefix("node").and_then(|i| i.parse::<u32>().ok()) else {
            continue;
        };
        let rel = paths::node_cpulist(id);
        let Some(text) = root.read(&rel) else { continue };
        let Some(cpus) = refused_unless_within(root, &rel, &text, &mut left) else { break };
        nodes.push((id, cpus));
    }
    nodes
}

/// `text`, the CPU list of `root/rel`, taken from `left` ([`cpu_list_within`]); `None`
/// when over the limits or malformed, which the tree then keeps as refused.
pub(super) fn refused_unless_within(
    root: &SystemTree,
    rel: &Path,
    text: &str,
    left: &mut usize,
) -> Option<Vec<usize>> {
    match cpu_list_within(text, left) {
        Ok(cpus) => Some(cpus),
        Err(why) => {
            root.refuse(rel, why);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print_back() {
        assert_eq!(cpu_list_within("0-3,8,10-11\n", &mut 64), Ok(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_ranges(&[11, 10, 3, 3, 5]), "3,5,10-11", "sorted, each once");
        assert_eq!(cpu_ranges(&[5]), "5");
        assert_eq!(cpu_ranges(&[]), "");
        assert_eq!(cpu_list_within("  ", &mut 1), Ok(vec![]));
    }

    #[test]
    fn one_budget_and_one_ceiling_bound_every_list() {
        let mut left = MAX_CPUS;
        assert_eq!(cpu_list_within("0-4095", &mut left).map(|c| c.len()), Ok(4096));
        assert_eq!(left, 4096);
        assert_eq!(cpu_list_within("0-4095", &mut left).map(|c| c.len()), Ok(4096));
        assert_eq!(left, 0);
        let e = cpu_list_within("0", &mut left).unwrap_err();
        assert_eq!(e, "more than 8192 CPUs listed in all");
        let e = cpu_list_within("8192", &mut 10).unwrap_err();
        assert_eq!(e, "CPU 8192: CPUs are numbered below 8192");
        // A range is counted before it is expanded: no 2^64-element list.
        let e = cpu_list_within("0-18446744073709551615", &mut 10).unwrap_err();
        assert!(e.starts_with("CPU 18446744073709551615"), "{e}");
        for bad in ["3-1", "a", "1,,2", "-1", "1-"] {
            assert_eq!(cpu_list_within(bad, &mut 10), Err("a CPU list like 0,2-3".into()), "{bad}");
        }
    }

    #[test]
    fn a_nodes_cpus_come_from_its_cpulist_and_a_huge_one_is_refused() {
        let root =
            std::env::temp_dir().join(format!("rdmabench-facts-cpus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (n, list) in [(0, "0-3\n"), (1, "8-11,24\n"), (2, ""), (3, "0-8191,0")] {
            let p = root.join(paths::node_cpulist(n));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, list).unwrap();
        }
        let tree = SystemTree::new(&root);
        assert_eq!(node_cpus(&tree, 1), Some(vec![8, 9, 10, 11, 24]));
        assert_eq!(node_cpus(&tree, 2), None, "lists no CPUs");
        assert_eq!(node_cpus(&tree, 3), None, "past the limit");
        assert_eq!(node_cpus(&tree, 9), None, "no such node");
        let nodes = numa_nodes(&tree);
        assert_eq!(
            nodes.iter().map(|(n, c)| (*n, c.len())).collect::<Vec<_>>(),
            [(0, 4), (1, 5), (2, 0)]
        );
        assert!(tree.refused().is_some(), "node3's list is kept as refused");
        let _ = std::fs::remove_dir_all(&root);
    }
}
