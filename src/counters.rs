//! `-W/--report-counters`: a verbs port's own counters, read from sysfs
//! (`counters/`, the InfiniBand performance counters; `hw_counters/`, the driver's)
//! before and after each size's run. The changes are shown with the size's result,
//! and a warning names any counter of trouble (errors, discards, retries, NAKs) that
//! moved. Each side reads its own port: the figures are not exchanged.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::facts::paths::COUNTER_FOLDERS;
use crate::facts::port::{counter_files, read_counter};
use crate::facts::SystemTree;
/// At most this many names in a `-W` list, and this long each (a port has a few dozen).
const MAX_NAMES: usize = 256;
const MAX_NAME_LEN: usize = 64;

/// The counters `-W` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CounterSelection {
    /// `all`: every readable counter of the port; only those that moved are shown.
    All,
    /// A list: these, each shown even when it did not move.
    Named(Vec<String>),
}

impl CounterSelection {
    /// `all`, or a comma-separated list of names: `NAME`, `counters/NAME` or
    /// `hw_counters/NAME`, NAME of letters, digits and `_` (it becomes a path).
    ///
    /// # Errors
    /// Kind `usage`, naming the bad entry.
    pub fn parse(list: &str) -> Result<Self, Error> {
        if list.trim() == "all" {
            return Ok(CounterSelection::All);
        }
        let names: Vec<String> = list.split(',').map(|n| n.trim().to_string()).collect();
        if names.len() > MAX_NAMES {
            return Err(Error::usage(format!("-W: at most {MAX_NAMES} counters")));
        }
        for n in &names {
            let bare =
                COUNTER_FOLDERS.iter().find_map(|f| n.strip_prefix(&format!("{f}/"))).unwrap_or(n);
            let ok = !bare.is_empty()
                && bare.len() <= MAX_NAME_LEN
                && bare.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !ok {
                return Err(Error::usage(format!(
                    "-W {n:?}: a counter is `all` or names like port_xmit_wait, \
                     counters/port_rcv_errors, hw_counters/rcvd_pkts"
                )));
            }
        }
        Ok(CounterSelection::Named(names))
    }
}

/// One port's counters, the files found once so each read is the files alone.
#[derive(Debug)]
pub struct PortCounters {
    /// `rxe0/1`: device and port.
    port: String,
    /// `hw_counters/rcvd_pkts` and the file it is read from.
    files: Vec<(String, PathBuf)>,
    /// Shown even when unmoved (a `-W` list).
    named: bool,
}

/// The values of a port's counters at one moment, in [`PortCounters`]'s order (None:
/// unreadable this time).
#[derive(Clone, Debug)]
pub struct Snapshot(Vec<Option<u64>>);

/// What a port's counters did over one size: shown with its result and kept in JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterChanges {
    /// `DEVICE/PORT`, this side's.
    pub port: String,
    /// Counter (`counters/…`, `hw_counters/…`) → how much it grew. With `-W all`, only
    /// those that moved; with a list, each named.
    pub changes: BTreeMap<String, u64>,
}

impl PortCounters {
    /// The counters of `device`'s `port` that `selection` names.
    ///
    /// # Errors
    /// Kind `usage`: the port keeps no counters, or lacks a named one (the line lists
    /// those it has).
    pub fn open(device: &str, port: u8, selection: &CounterSelection) -> Result<Self, Error> {
        Self::open_at(Path::new("/"), device, port, selection)
    }

    /// As [`open`](Self::open), the system tree under `root` instead of `/`.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_at(
        root: &Path,
        device: &str,
        port: u8,
        selection: &CounterSelection,
    ) -> Result<Self, Error> {
        let name = format!("{device}/{port}");
        let have = counter_files(&SystemTree::new(root), device, port);
        if have.is_empty() {
            return Err(Error::usage(format!(
                "-W: port {name} keeps no counters (no readable counters/ or hw_counters/ in sysfs)"
            )));
        }
        let files = match selection {
            CounterSelection::All => have,
            CounterSelection::Named(names) => {
                names.iter().map(|n| find(&have, n, &name)).collect::<Result<_, _>>()?
            }
        };
        let named = matches!(selection, CounterSelection::Named(_));
        Ok(PortCounters { port: name, files, named })
    }

    /// The packet counters of a port, both directions (InfiniBand's or soft-RoCE's);
    /// None when it keeps neither pair.
    pub fn packets(device: &str, port: u8) -> Option<Self> {
        let pairs = [
            "counters/port_rcv_packets,counters/port_xmit_packets",
            "hw_counters/rcvd_pkts,hw_counters/sent_pkts",
        ];
        pairs.iter().find_map(|p| {
            let names = p.split(',').map(String::from).collect();
            Self::open(device, port, &CounterSelection::Named(names)).ok()
        })
    }

    /// Every counter's value now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot(self.files.iter().map(|(_, path)| read_counter(path)).collect())
    }

    /// What moved from `before` to `after`. A counter that went back was reset during
    /// the size: its change is its count since.
    pub fn changes(&self, before: &Snapshot, after: &Snapshot) -> CounterChanges {
        let mut changes = BTreeMap::new();
        for (((name, _), b), a) in self.files.iter().zip(&before.0).zip(&after.0) {
            let (Some(b), Some(a)) = (b, a) else { continue };
            let grew = a.checked_sub(*b).unwrap_or(*a);
            if grew > 0 || self.named {
                changes.insert(name.clone(), grew);
            }
        }
        CounterChanges { port: self.port.clone(), changes }
    }
}

impl Snapshot {
    /// Every counter added up (liveness: whether anything moved).
    pub fn sum(&self) -> Option<u64> {
        self.0.iter().flatten().copied().reduce(u64::wrapping_add)
    }
}

impl CounterChanges {
    /// The counters of trouble that moved.
    pub fn troubles(&self) -> impl Iterator<Item = (&str, u64)> {
        self.changes
            .iter()
            .filter(|(n, v)| **v > 0 && counts_trouble(n))
            .map(|(n, v)| (n.as_str(), *v))
    }

    /// The counters of trouble that moved and show a fault, not only RC's recovery
    /// ([`counts_recovery`]): what fails a soak's interval.
    pub fn faults(&self) -> impl Iterator<Item = (&str, u64)> {
        self.troubles().filter(|(n, _)| !counts_recovery(n))
    }

    /// The lines under a size's result: the changes, and a warning when trouble moved.
    pub fn lines(&self) -> String {
        let mut o = format!("   counters {}:", self.port);
        if self.changes.is_empty() {
            o.push_str(" none moved");
        }
        for (n, v) in &self.changes {
            let _ = write!(o, " {n} +{v}");
        }
        o.push('\n');
        let troubles: Vec<String> = self.troubles().map(|(n, v)| format!("{n} +{v}")).collect();
        if !troubles.is_empty() {
            let _ = writeln!(
                o,
                "   WARNING: error counters moved on {}: {}",
                self.port,
                troubles.join(", ")
            );
        }
        o
    }
}

/// Whether a counter counts trouble: a word of its name is an error, a discard or
/// drop, a retry or retransmission, a NAK, a duplicate, a link downed; or it counts
/// packets out of sequence or out of buffer. By word: `ack_deferred` is no error.
pub fn counts_trouble(name: &str) -> bool {
    let n = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    let words = ["err", "discard", "drop", "retr", "nak", "duplicate", "downed"];
    n.split('_').any(|w| words.iter().any(|t| w.starts_with(t)))
        || n.contains("out_of_seq")
        || n.contains("out_of_buffer")
}

/// Whether a counter of trouble counts RC recovering rather than a fault: retries and
/// retransmissions (soft-RoCE's `completer_retry_err`, mlx5's `local_ack_timeout_err`,
/// `roce_adp_retrans`), requests seen twice (`duplicate_request`), and receiver-not-ready
/// NAKs (`rcvd_rnr_err`, `rnr_nak_retry_err`), unless the retries ran out (`exceeded`).
/// A retry by the ACK timer fires whenever an ACK is later than the timeout, lost or only
/// slow: under the lab's emulation soft-RoCE retries 10–40 times a second on a link that
/// loses nothing, and the responder counts each retransmitted request as a duplicate. A
/// lost packet that the receiver sees shows in the counters of faults: out-of-sequence
/// requests and sequence NAKs (`out_of_seq_request`, `rcvd_seq_err`, mlx5's
/// `out_of_sequence`, `packet_seq_err`); so do errors, discards and a link downed.
pub fn counts_recovery(name: &str) -> bool {
    let n = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    let words = ["retr", "duplicate", "rnr"];
    !n.contains("exceed")
        && (n.split('_').any(|w| words.iter().any(|t| w.starts_with(t)))
            || n.contains("ack_timeout"))
}

/// The counter `wanted` names (with or without its folder) among those a port `have`s.
fn find(have: &[(String, PathBuf)], wanted: &str, port: &str) -> Result<(String, PathBuf), Error> {
    let matches: Vec<&(String, PathBuf)> =
        have.iter().filter(|(n, _)| n == wanted || n.rsplit('/').next() == Some(wanted)).collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let names: Vec<&str> = have.iter().map(|(n, _)| n.as_str()).collect();
            Err(Error::usage(format!(
                "-W {wanted}: port {port} has no such counter; it has: {}",
                names.join(", ")
            )))
        }
        several => Err(Error::usage(format!(
            "-W {wanted}: port {port} has it twice ({}): name the folder",
            several.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port's sysfs folder with these `folder/name` counters.
    fn port(counters: &[(&str, &str)]) -> (PathBuf, Tempdir) {
        let dir = Tempdir::new();
        let ports = dir.0.join(crate::facts::paths::port_dir("rxe0", 1));
        for (name, value) in counters {
            let path = ports.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, value).unwrap();
        }
        (dir.0.clone(), dir)
    }

    struct Tempdir(PathBuf);
    impl Tempdir {
        fn new() -> Self {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p =
                std::env::temp_dir().join(format!("rdmabench-counters-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Tempdir(p)
        }
    }
    impl Drop for Tempdir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn set(root: &Path, name: &str, value: u64) {
        let ports = root.join(crate::facts::paths::port_dir("rxe0", 1));
        std::fs::write(ports.join(name), format!("{value}\n")).unwrap();
    }

    #[test]
    fn all_shows_what_moved_and_warns_of_trouble() {
        let (root, _d) = port(&[
            ("hw_counters/sent_pkts", "100\n"),
            ("hw_counters/rcvd_pkts", "7\n"),
            ("hw_counters/completer_retry_err", "0\n"),
            ("hw_counters/lifespan", "not a number\n"),
        ]);
        let c = PortCounters::open_at(&root, "rxe0", 1, &CounterSelection::All).unwrap();
        let before = c.snapshot();
        set(&root, "hw_counters/sent_pkts", 1_100);
        set(&root, "hw_counters/completer_retry_err", 5);
        let changes = c.changes(&before, &c.snapshot());
        assert_eq!(changes.port, "rxe0/1");
        let moved: Vec<(&str, u64)> =
            changes.changes.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        assert_eq!(
            moved,
            [("hw_counters/completer_retry_err", 5), ("hw_counters/sent_pkts", 1_000)]
        );
        let lines = changes.lines();
        assert!(
            lines.contains(
                "counters rxe0/1: hw_counters/completer_retry_err +5 hw_counters/sent_pkts +1000\n"
            ),
            "{lines}"
        );
        assert!(
            lines.contains(
                "WARNING: error counters moved on rxe0/1: hw_counters/completer_retry_err +5"
            ),
            "{lines}"
        );
    }

    #[test]
    fn a_list_shows_each_named_even_unmoved_and_no_warning_when_calm() {
        let (root, _d) = port(&[
            ("counters/port_xmit_packets", "10"),
            ("counters/port_rcv_errors", "3"),
            ("hw_counters/rcvd_pkts", "1"),
        ]);
        let sel = CounterSelection::parse("port_xmit_packets, counters/port_rcv_errors").unwrap();
        let c = PortCounters::open_at(&root, "rxe0", 1, &sel).unwrap();
        let before = c.snapshot();
        set(&root, "counters/port_xmit_packets", 25);
        let changes = c.changes(&before, &c.snapshot());
        assert_eq!(changes.changes.len(), 2);
        assert_eq!(changes.changes["counters/port_xmit_packets"], 15);
        assert_eq!(changes.changes["counters/port_rcv_errors"], 0);
        assert!(!changes.lines().contains("WARNING"), "{}", changes.lines());
    }

    #[test]
    fn a_counter_reset_during_the_size_counts_from_its_reset() {
        let (root, _d) = port(&[("hw_counters/sent_pkts", "500")]);
        let c = PortCounters::open_at(&root, "rxe0", 1, &CounterSelection::All).unwrap();
        let before = c.snapshot();
        set(&root, "hw_counters/sent_pkts", 20);
        assert_eq!(c.changes(&before, &c.snapshot()).changes["hw_counters/sent_pkts"], 20);
    }

    #[test]
    fn an_absent_counter_is_refused_with_those_the_port_has() {
        let (root, _d) = port(&[("hw_counters/sent_pkts", "1"), ("hw_counters/rcvd_pkts", "1")]);
        let sel = CounterSelection::parse("port_rcv_errors").unwrap();
        let e = PortCounters::open_at(&root, "rxe0", 1, &sel).unwrap_err();
        assert_eq!(
            e.message,
            "-W port_rcv_errors: port rxe0/1 has no such counter; it has: \
             hw_counters/rcvd_pkts, hw_counters/sent_pkts"
        );
        let e = PortCounters::open_at(&root, "rxe1", 1, &CounterSelection::All).unwrap_err();
        assert!(e.message.contains("port rxe1/1 keeps no counters"), "{}", e.message);
    }

    #[test]
    fn a_name_in_both_folders_must_say_which() {
        let (root, _d) = port(&[("counters/link_downed", "0"), ("hw_counters/link_downed", "0")]);
        let sel = CounterSelection::parse("link_downed").unwrap();
        let e = PortCounters::open_at(&root, "rxe0", 1, &sel).unwrap_err();
        assert!(e.message.contains("name the folder"), "{}", e.message);
        let sel = CounterSelection::parse("hw_counters/link_downed").unwrap();
        assert!(PortCounters::open_at(&root, "rxe0", 1, &sel).is_ok());
    }

    #[test]
    fn names_that_would_leave_the_folder_are_refused() {
        for bad in ["../../../etc/passwd", "counters/../x", "a b", "", "x,", "hw_counters/"] {
            let e = CounterSelection::parse(bad).unwrap_err();
            assert!(e.message.starts_with("-W "), "{bad}: {}", e.message);
        }
        assert_eq!(CounterSelection::parse("all").unwrap(), CounterSelection::All);
        let many = vec!["x"; MAX_NAMES + 1].join(",");
        assert!(CounterSelection::parse(&many).is_err());
    }

    #[test]
    fn trouble_is_errors_discards_retries_and_naks() {
        for n in [
            "counters/port_rcv_errors",
            "counters/port_xmit_discards",
            "hw_counters/completer_retry_err",
            "hw_counters/seq_naks",
            "hw_counters/duplicate_request",
            "hw_counters/out_of_seq_request",
            "counters/link_downed",
            "counters/VL15_dropped",
            "counters/symbol_error",
            "counters/link_error_recovery",
            "hw_counters/rnr_nak_retry_err",
            "hw_counters/out_of_buffer",
            "hw_counters/retransmits",
        ] {
            assert!(counts_trouble(n), "{n}");
        }
        for n in [
            "counters/port_xmit_packets",
            "hw_counters/rcvd_pkts",
            "counters/port_xmit_wait",
            "hw_counters/ack_deferred",
            "hw_counters/rdma_sends",
        ] {
            assert!(!counts_trouble(n), "{n}");
        }
    }

    #[test]
    fn retries_and_duplicates_are_recovery_and_gaps_and_errors_are_faults() {
        for n in [
            "hw_counters/completer_retry_err",
            "hw_counters/duplicate_request",
            "hw_counters/rcvd_rnr_err",
            "hw_counters/send_rnr_err",
            "hw_counters/local_ack_timeout_err",
            "hw_counters/rnr_nak_retry_err",
            "hw_counters/roce_adp_retrans",
            "hw_counters/retransmits",
        ] {
            assert!(counts_trouble(n) && counts_recovery(n), "{n}");
        }
        for n in [
            "hw_counters/out_of_seq_request",
            "hw_counters/rcvd_seq_err",
            "hw_counters/out_of_sequence",
            "hw_counters/packet_seq_err",
            "hw_counters/implied_nak_seq_err",
            "hw_counters/retry_exceeded_err",
            "hw_counters/retry_rnr_exceeded_err",
            "hw_counters/send_err",
            "counters/link_downed",
            "counters/symbol_error",
            "counters/port_rcv_errors",
            "counters/port_xmit_discards",
        ] {
            assert!(counts_trouble(n) && !counts_recovery(n), "{n}");
        }
        // What the lab's soft-RoCE moved in a clean second: retries and duplicates only,
        // so no fault; a lossy second adds the gaps.
        let clean = CounterChanges {
            port: "rxe0/1".into(),
            changes: [
                ("hw_counters/ack_deferred", 1),
                ("hw_counters/completer_retry_err", 26),
                ("hw_counters/duplicate_request", 208),
                ("hw_counters/sent_pkts", 19456),
            ]
            .map(|(n, v)| (n.to_string(), v))
            .into(),
        };
        assert_eq!(clean.troubles().count(), 2);
        assert_eq!(clean.faults().count(), 0);
        let mut lossy = clean.clone();
        lossy.changes.insert("hw_counters/out_of_seq_request".into(), 4);
        lossy.changes.insert("hw_counters/rcvd_seq_err".into(), 3);
        let faults: Vec<_> = lossy.faults().collect();
        assert_eq!(
            faults,
            [("hw_counters/out_of_seq_request", 4), ("hw_counters/rcvd_seq_err", 3)]
        );
    }
}
