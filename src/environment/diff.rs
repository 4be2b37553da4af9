//! An [`Environment`] as named values, the one list every report shows (the HTML
//! environment table, JUnit's `<properties>`), and what changed between two of them:
//! `firmware 2.40.7000 → 2.42.5000`, the first thing a firmware qualification reads.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::summary::{pcie_text, rounded};
use super::{clean, Environment};

/// What an unknown or absent value shows.
pub const ABSENT: &str = "-";

impl Environment {
    /// Every value a report shows, named, in order: the host's, then the device's (all
    /// `-` without a device), then the interface's (all `-` without one). Text is
    /// [`clean`]ed: a peer's or a baseline's environment stays one value per field.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let text = |t: &str| if t.is_empty() { ABSENT.to_string() } else { clean(t) };
        let opt = |t: Option<&str>| t.map_or_else(|| ABSENT.to_string(), text);
        let num = |n: Option<String>| n.unwrap_or_else(|| ABSENT.to_string());
        let mut f = vec![
            ("host", text(&self.hostname)),
            ("kernel", text(&self.kernel)),
            ("os", text(&self.os)),
            ("cpu", format!("{} x {}", self.cpus, text(&self.cpu_model))),
            ("governor", opt(self.governor.as_deref())),
            ("rdmabench", text(&self.rdmabench)),
        ];
        let d = self.device.as_ref();
        f.extend([
            ("device", opt(d.map(|d| format!("{} port {}", d.name, d.port)).as_deref())),
            ("model", opt(d.and_then(|d| d.model.as_deref()))),
            ("board id", opt(d.and_then(|d| d.board_id.as_deref()))),
            ("firmware", opt(d.map(|d| d.firmware.as_str()))),
            ("driver", opt(d.and_then(|d| d.driver.as_deref()))),
            ("rdma-core", opt(d.and_then(|d| d.rdma_core.as_deref()))),
            ("link layer", opt(d.map(|d| d.link_layer.as_str()))),
            ("rate", num(d.and_then(|d| d.rate_gbps).map(|r| format!("{} Gb/s", rounded(r))))),
            ("active MTU", num(d.and_then(|d| d.active_mtu).map(|m| m.to_string()))),
            ("PCIe", num(d.and_then(|d| d.pcie.as_ref()).and_then(pcie_text))),
            ("NUMA node", num(d.and_then(|d| d.numa_node).map(|n| n.to_string()))),
        ]);
        let i = self.interface.as_ref();
        f.extend([
            ("interface", opt(i.map(|i| i.name.as_str()))),
            ("interface MTU", num(i.and_then(|i| i.mtu).map(|m| m.to_string()))),
            ("interface speed", num(i.and_then(|i| i.speed_mbps).map(|s| format!("{s} Mb/s")))),
        ]);
        f
    }
}

/// One value that differs between two environments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The field's name, as [`Environment::fields`] gives it (`firmware`).
    pub field: String,
    /// Its value in the earlier environment (`-`: unknown or absent).
    pub was: String,
    /// Its value now.
    pub now: String,
}

impl fmt::Display for Change {
    /// `firmware 2.40.7000 → 2.42.5000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} → {}", self.field, self.was, self.now)
    }
}

/// What changed from `was` to `now`, field by field in [`Environment::fields`]' order;
/// empty when they are the same. The rdmabench version counts: a new build can move a
/// figure as a new firmware can.
pub fn diff(was: &Environment, now: &Environment) -> Vec<Change> {
    was.fields()
        .into_iter()
        .zip(now.fields())
        .filter(|((_, a), (_, b))| a != b)
        .map(|((field, a), (_, b))| Change { field: field.to_string(), was: a, now: b })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::{DeviceEnvironment, InterfaceEnvironment, Pcie};

    fn cx3(firmware: &str) -> Environment {
        Environment {
            hostname: "node1".into(),
            kernel: "6.1.0-57-amd64".into(),
            os: "Debian GNU/Linux 12 (bookworm)".into(),
            cpu_model: "Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz".into(),
            cpus: 2,
            governor: Some("performance".into()),
            rdmabench: "0.1.0".into(),
            device: Some(DeviceEnvironment {
                name: "mlx4_0".into(),
                model: Some("ConnectX-3".into()),
                firmware: firmware.into(),
                board_id: Some("MT_1090120019".into()),
                link_layer: "InfiniBand".into(),
                rate_gbps: Some(56.0),
                active_mtu: Some(4096),
                pcie: Some(Pcie {
                    current_speed: Some("8.0 GT/s PCIe".into()),
                    current_width: Some(8),
                    max_speed: Some("8.0 GT/s PCIe".into()),
                    max_width: Some(8),
                }),
                numa_node: Some(0),
                driver: Some("mlx4_core".into()),
                rdma_core: Some("44.0".into()),
                port: 1,
            }),
            interface: None,
        }
    }

    fn texts(changes: &[Change]) -> Vec<String> {
        changes.iter().map(Change::to_string).collect()
    }

    #[test]
    fn the_same_environment_has_no_change() {
        assert!(diff(&cx3("2.42.5000"), &cx3("2.42.5000")).is_empty());
    }

    #[test]
    fn a_firmware_upgrade_is_one_change() {
        let changes = diff(&cx3("2.40.7000"), &cx3("2.42.5000"));
        assert_eq!(texts(&changes), ["firmware 2.40.7000 → 2.42.5000"]);
        assert_eq!(
            changes[0],
            Change { field: "firmware".into(), was: "2.40.7000".into(), now: "2.42.5000".into() }
        );
    }

    #[test]
    fn every_changed_field_is_named_in_order() {
        let was = cx3("2.42.5000");
        let mut now = cx3("2.42.5000");
        now.kernel = "6.12.0-1-amd64".into();
        now.governor = None;
        let d = now.device.as_mut().unwrap();
        d.rate_gbps = Some(40.0);
        d.pcie.as_mut().unwrap().current_width = Some(4);
        d.rdma_core = Some("50.0".into());
        assert_eq!(
            texts(&diff(&was, &now)),
            [
                "kernel 6.1.0-57-amd64 → 6.12.0-1-amd64",
                "governor performance → -",
                "rdma-core 44.0 → 50.0",
                "rate 56 Gb/s → 40 Gb/s",
                "PCIe PCIe 8.0 GT/s x8 → PCIe 8.0 GT/s x4 (max 8.0 GT/s x8)",
            ]
        );
    }

    #[test]
    fn a_device_against_an_interface_shows_both_sides_absent_values() {
        let was = cx3("2.42.5000");
        let mut now = was.clone();
        now.device = None;
        now.interface =
            Some(InterfaceEnvironment { name: "eth2".into(), mtu: Some(9000), speed_mbps: None });
        let changes = texts(&diff(&was, &now));
        assert!(changes.contains(&"firmware 2.42.5000 → -".to_string()), "{changes:?}");
        assert!(changes.contains(&"interface - → eth2".to_string()), "{changes:?}");
        assert!(changes.contains(&"interface MTU - → 9000".to_string()), "{changes:?}");
        assert!(!changes.iter().any(|c| c.starts_with("interface speed")), "{changes:?}");
    }

    #[test]
    fn a_hostile_value_stays_one_inert_value() {
        let was = cx3("2.42.5000");
        let now = cx3("2.42.5000\n\u{1b}[2Jkernel 0 → 1");
        let changes = texts(&diff(&was, &now));
        assert_eq!(changes.len(), 1);
        assert!(!changes[0].contains(|c: char| c.is_control()), "{changes:?}");
    }
}
