//! A soak's verdict per interval (`--json-lines`, #54): each whole interval's record also
//! carries this side's port counters that moved since the last record, its link as it
//! stands (state, rate, PCIe link: re-read each interval, a change named with its time)
//! and a verdict, failed below `--min-bw`, when a counter of a fault moved, or when the
//! link changed. The reads are a few dozen sysfs files once an interval, on the thread
//! that prints the intervals (a verbs loop's own, between two polls): never per operation.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::counters::{CounterChanges, CounterSelection, PortCounters, Snapshot};
use crate::facts::{paths, port, Pcie, SystemTree};
use crate::results::IntervalVerdicts;
use crate::spec::IntervalLines;

/// What judges a run's intervals on this side, and how many failed so far.
#[derive(Debug)]
pub(crate) struct SoakWatch {
    /// `--min-bw`, in the report's unit.
    floor: Option<f64>,
    gbits: bool,
    /// This side's verbs port (None: TCP, or a port sysfs does not show).
    port: Option<PortWatch>,
    /// The current size's intervals judged and failed.
    tally: IntervalVerdicts,
}

#[derive(Debug)]
struct PortWatch {
    /// The counters and their values at the last record (None: the port keeps none).
    counters: Option<(PortCounters, Snapshot)>,
    /// The system tree (`/`).
    root: PathBuf,
    /// The device's name.
    device: String,
    port: u8,
    /// The link at the last record.
    link: LinkState,
}

/// A port's link as sysfs words it (None: unreadable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkState {
    /// `ACTIVE`, `DOWN`, …
    pub state: Option<String>,
    /// `100 Gb/sec (4X EDR)`.
    pub rate: Option<String>,
    /// `8.0 GT/s PCIe x16` (soft devices have none).
    pub pcie: Option<String>,
}

impl SoakWatch {
    /// For a run writing `--json-lines` (None without).
    pub(crate) fn new(lines: &IntervalLines) -> Option<Self> {
        lines.json_lines.as_ref()?;
        Some(SoakWatch {
            floor: lines.min_bw,
            gbits: lines.gbits,
            port: None,
            tally: IntervalVerdicts::default(),
        })
    }

    /// Watches `device`'s `port` too: `selection`'s counters (`-W`'s, else all of them),
    /// its link.
    pub(crate) fn watch_port(&mut self, device: &str, port: u8, selection: &CounterSelection) {
        self.watch_port_at(Path::new("/"), device, port, selection);
    }

    /// As [`watch_port`](Self::watch_port), the system tree under `root`.
    fn watch_port_at(&mut self, root: &Path, device: &str, port: u8, selection: &CounterSelection) {
        let counters = PortCounters::open_at(root, device, port, selection).ok().map(|c| {
            let now = c.snapshot();
            (c, now)
        });
        let link = LinkState::read(root, device, port);
        let (root, device) = (root.to_path_buf(), device.to_string());
        self.port = Some(PortWatch { counters, root, device, port, link });
    }

    /// Judges one whole interval of `bytes_per_sec` ending at `time`: adds its counters,
    /// link and verdict to `record`.
    pub(crate) fn judge(
        &mut self,
        record: &mut Map<String, Value>,
        bytes_per_sec: f64,
        time: &str,
    ) {
        let (moved, link_changed) = match &mut self.port {
            Some(p) => {
                let moved = p.counters.as_mut().map(|(c, last)| {
                    let now = c.snapshot();
                    let moved = c.changes(last, &now);
                    *last = now;
                    moved
                });
                let link = LinkState::read(&p.root, &p.device, p.port);
                let changed = p.link.change_to(&link, time);
                record.insert("counters".into(), json!(moved));
                record.insert("link".into(), link.to_json(changed.as_deref()));
                p.link = link;
                (moved, changed)
            }
            None => (None, None),
        };
        let rate = crate::measure::bw_in_unit(bytes_per_sec, self.gbits);
        let reasons = interval_reasons(rate, self.floor, self.gbits, moved.as_ref(), link_changed);
        self.tally.judged += 1;
        self.tally.failed += u64::from(!reasons.is_empty());
        record.insert("verdict".into(), json!({ "pass": reasons.is_empty(), "reasons": reasons }));
    }

    /// The current size's intervals judged and failed (None: none judged, as on a side
    /// that only receives); the next size counts afresh.
    pub(crate) fn take_tally(&mut self) -> Option<IntervalVerdicts> {
        let tally = std::mem::take(&mut self.tally);
        (tally.judged > 0).then_some(tally)
    }
}

/// Why an interval fails: its bandwidth (`rate`, in the report's unit) below `floor`,
/// a counter of a fault that `moved` ([`CounterChanges::faults`]: RC's retries and
/// duplicates alone fail nothing), its link `changed`. Empty: it passes.
pub(crate) fn interval_reasons(
    rate: f64,
    floor: Option<f64>,
    gbits: bool,
    moved: Option<&CounterChanges>,
    changed: Option<String>,
) -> Vec<String> {
    let unit = if gbits { "Gb/sec" } else { "MiB/sec" };
    let mut reasons = Vec::new();
    if let Some(min) = floor.filter(|&min| rate < min) {
        reasons.push(format!("bandwidth {rate:.2} {unit} is below --min-bw {min}"));
    }
    if let Some(moved) = moved {
        let troubles: Vec<String> = moved.faults().map(|(n, v)| format!("{n} +{v}")).collect();
        if !troubles.is_empty() {
            reasons.push(format!(
                "error counters moved on {}: {}",
                moved.port,
                troubles.join(", ")
            ));
        }
    }
    if let Some(changed) = changed {
        reasons.push(format!("link changed: {changed}"));
    }
    reasons
}

impl LinkState {
    /// Port `port` of RDMA device `device` under `root` now.
    fn read(root: &Path, device: &str, port: u8) -> Self {
        let tree = SystemTree::new(root);
        let function = paths::device_dir(device).join("device");
        LinkState {
            state: port::state(&tree, device, port).map(|(state, _)| state),
            rate: port::rate(&tree, device, port),
            pcie: Pcie::read(&tree, &function).and_then(|l| l.words()),
        }
    }

    /// What changed from `self` to `now`, at `time`: `state ACTIVE → DOWN at TIME`;
    /// None when nothing did.
    pub(crate) fn change_to(&self, now: &LinkState, time: &str) -> Option<String> {
        let named = |o: &Option<String>| o.clone().unwrap_or_else(|| "unreadable".into());
        let parts: Vec<String> = [
            ("state", &self.state, &now.state),
            ("rate", &self.rate, &now.rate),
            ("PCIe", &self.pcie, &now.pcie),
        ]
        .into_iter()
        .filter(|(_, was, is)| was != is)
        .map(|(what, was, is)| format!("{what} {} → {}", named(was), named(is)))
        .collect();
        (!parts.is_empty()).then(|| format!("{} at {time}", parts.join(", ")))
    }

    fn to_json(&self, changed: Option<&str>) -> Value {
        json!({ "state": self.state, "rate": self.rate, "pcie": self.pcie, "changed": changed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(counters: &[(&str, u64)]) -> CounterChanges {
        CounterChanges {
            port: "rxe0/1".into(),
            changes: counters.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        }
    }

    #[test]
    fn an_interval_passes_above_its_floor_with_calm_counters_and_a_steady_link() {
        let calm = moved(&[("hw_counters/sent_pkts", 9000), ("hw_counters/rcvd_pkts", 4500)]);
        assert!(interval_reasons(150.0, Some(100.0), false, Some(&calm), None).is_empty());
        assert!(interval_reasons(150.0, None, false, None, None).is_empty());
        // The floor itself passes: below it fails.
        assert!(interval_reasons(100.0, Some(100.0), false, None, None).is_empty());
    }

    #[test]
    fn an_interval_below_the_floor_fails_in_the_reports_unit() {
        let r = interval_reasons(99.5, Some(100.0), false, None, None);
        assert_eq!(r, ["bandwidth 99.50 MiB/sec is below --min-bw 100"]);
        let r = interval_reasons(7.25, Some(8.0), true, None, None);
        assert_eq!(r, ["bandwidth 7.25 Gb/sec is below --min-bw 8"]);
    }

    #[test]
    fn counters_of_trouble_fail_an_interval_and_are_named() {
        let c = moved(&[
            ("hw_counters/sent_pkts", 9000),
            ("hw_counters/out_of_seq_request", 3),
            ("hw_counters/retransmits", 0),
            ("hw_counters/seq_naks", 2),
        ]);
        let r = interval_reasons(500.0, Some(100.0), false, Some(&c), None);
        assert_eq!(
            r,
            ["error counters moved on rxe0/1: hw_counters/out_of_seq_request +3, \
              hw_counters/seq_naks +2"]
        );
    }

    #[test]
    fn retries_and_duplicates_alone_fail_no_interval() {
        // A clean second of the lab's soft-RoCE: the ACK timer fired, nothing was lost.
        let c = moved(&[
            ("hw_counters/completer_retry_err", 26),
            ("hw_counters/duplicate_request", 208),
            ("hw_counters/sent_pkts", 19456),
        ]);
        assert!(interval_reasons(500.0, None, false, Some(&c), None).is_empty());
        let c = moved(&[("hw_counters/completer_retry_err", 26), ("hw_counters/rcvd_seq_err", 1)]);
        let r = interval_reasons(500.0, None, false, Some(&c), None);
        assert_eq!(r, ["error counters moved on rxe0/1: hw_counters/rcvd_seq_err +1"]);
    }

    #[test]
    fn a_link_change_fails_an_interval_with_its_time() {
        let up = LinkState {
            state: Some("ACTIVE".into()),
            rate: Some("100 Gb/sec (4X EDR)".into()),
            pcie: Some("8.0 GT/s PCIe x16".into()),
        };
        assert_eq!(up.change_to(&up.clone(), "t"), None);
        let down = LinkState { state: Some("DOWN".into()), rate: None, ..up.clone() };
        let changed = up.change_to(&down, "2026-12-05T14:00:01.000Z");
        assert_eq!(
            changed.as_deref(),
            Some("state ACTIVE → DOWN, rate 100 Gb/sec (4X EDR) → unreadable at 2026-12-05T14:00:01.000Z")
        );
        let narrower = LinkState { pcie: Some("8.0 GT/s PCIe x8".into()), ..up.clone() };
        let r = interval_reasons(500.0, None, false, None, up.change_to(&narrower, "T"));
        assert_eq!(r, ["link changed: PCIe 8.0 GT/s PCIe x16 → 8.0 GT/s PCIe x8 at T"]);
    }

    #[test]
    fn every_reason_is_given_and_the_watch_counts_the_failed_intervals() {
        let lines = IntervalLines {
            every: std::time::Duration::from_secs(1),
            text: false,
            json_lines: Some("f.jsonl".into()),
            gbits: false,
            to_stderr: false,
            min_bw: Some(100.0),
        };
        let mut watch = SoakWatch::new(&lines).unwrap();
        let mib = crate::measure::MIB;
        for rate in [150.0 * mib, 50.0 * mib, 120.0 * mib, 10.0 * mib] {
            let mut record = Map::new();
            watch.judge(&mut record, rate, "t");
            let verdict = &record["verdict"];
            assert_eq!(verdict["pass"], rate >= 100.0 * mib, "{record:?}");
            assert!(record.get("link").is_none(), "no port watched: {record:?}");
        }
        assert_eq!(watch.take_tally(), Some(IntervalVerdicts { judged: 4, failed: 2 }));
        assert_eq!(watch.take_tally(), None, "the next size counts afresh");
        let r = interval_reasons(
            50.0,
            Some(100.0),
            false,
            Some(&moved(&[("counters/symbol_error", 1)])),
            Some("state ACTIVE → INIT at T".into()),
        );
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(SoakWatch::new(&IntervalLines { json_lines: None, ..lines }).is_none());
    }

    #[test]
    fn a_watched_port_gives_its_moved_counters_and_a_link_change() {
        let root = std::env::temp_dir().join(format!("rdmabench-soak-{}", std::process::id()));
        let port = root.join(paths::port_dir("rxe0", 1));
        let write = |name: &str, text: &str| {
            let path = port.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("hw_counters/sent_pkts", "100\n");
        write("hw_counters/out_of_seq_request", "0\n");
        write("state", "4: ACTIVE\n");
        write("rate", "10 Gb/sec (1X QDR)\n");
        let lines = IntervalLines {
            every: std::time::Duration::from_secs(1),
            text: false,
            json_lines: Some("f.jsonl".into()),
            gbits: false,
            to_stderr: false,
            min_bw: None,
        };
        let mut watch = SoakWatch::new(&lines).unwrap();
        watch.watch_port_at(&root, "rxe0", 1, &CounterSelection::All);
        let mut calm = Map::new();
        write("hw_counters/sent_pkts", "1100\n");
        watch.judge(&mut calm, 1e9, "T1");
        assert_eq!(calm["verdict"]["pass"], true, "{calm:?}");
        assert_eq!(calm["counters"]["changes"], json!({ "hw_counters/sent_pkts": 1000 }));
        assert_eq!(
            calm["link"],
            json!({ "state": "ACTIVE", "rate": "10 Gb/sec (1X QDR)", "pcie": null, "changed": null })
        );
        write("hw_counters/out_of_seq_request", "4\n");
        write("state", "1: DOWN\n");
        let mut troubled = Map::new();
        watch.judge(&mut troubled, 1e9, "T2");
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(troubled["counters"]["changes"], json!({ "hw_counters/out_of_seq_request": 4 }));
        assert_eq!(troubled["link"]["changed"], "state ACTIVE → DOWN at T2");
        assert_eq!(
            troubled["verdict"]["reasons"],
            json!([
                "error counters moved on rxe0/1: hw_counters/out_of_seq_request +4",
                "link changed: state ACTIVE → DOWN at T2"
            ])
        );
        assert_eq!(watch.take_tally(), Some(IntervalVerdicts { judged: 2, failed: 1 }));
    }
}
