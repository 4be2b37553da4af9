//! The one-line forms of an [`Environment`] for report headers. Every value is
//! [`clean`]ed again here: an environment may come from the peer, and a line must stay
//! one line whatever it holds.

use super::{clean, DeviceEnvironment, Environment, InterfaceEnvironment, Pcie};

impl Environment {
    /// One line: host, kernel, distribution, CPUs, governor; then the device or interface.
    /// `node1: Linux 6.1.0-57-amd64, Debian GNU/Linux 12 (bookworm), 2 x Intel(R) Xeon(R)
    /// CPU E5-2680 v2 @ 2.80GHz, governor performance; rxe0 port 1, Soft-RoCE (rxe), fw
    /// 0.0.0, Ethernet 2.5 Gb/s, MTU 4096, driver rdma_rxe, rdma-core 44.0`. What is not
    /// known is left out.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.os == "Windows" {
            // The kernel field holds Windows' version (`10.0.19045`).
            parts.push(format!("Windows {}", clean(&self.kernel)).replace(" unknown", ""));
        } else {
            if self.kernel != "unknown" {
                parts.push(format!("Linux {}", clean(&self.kernel)));
            }
            parts.push(clean(&self.os));
        }
        parts.push(match clean(&self.cpu_model) {
            model if model.is_empty() || model == "unknown" => format!("{} CPUs", self.cpus),
            model => format!("{} x {model}", self.cpus),
        });
        parts.extend(self.governor.as_deref().map(|g| format!("governor {}", clean(g))));
        let mut sections = vec![format!("{}: {}", clean(&self.hostname), parts.join(", "))];
        sections.extend(self.device.as_ref().map(DeviceEnvironment::summary));
        sections.extend(self.interface.as_ref().map(InterfaceEnvironment::summary));
        sections.join("; ")
    }
}

impl DeviceEnvironment {
    /// One line: `mlx4_0 port 1, ConnectX-3, board MT_1090120019, fw 2.42.5000, InfiniBand 56 Gb/s, MTU 4096,
    /// PCIe 8.0 GT/s x8, NUMA node 0, driver mlx4_core, rdma-core 44.0`.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!("{} port {}", clean(&self.name), self.port)];
        parts.extend(self.model.as_deref().map(clean));
        parts.extend(self.board_id.as_deref().map(|b| format!("board {}", clean(b))));
        let firmware = clean(&self.firmware);
        if !firmware.is_empty() {
            parts.push(format!("fw {firmware}"));
        }
        let mut link = clean(&self.link_layer);
        if let Some(rate) = self.rate_gbps {
            link.push_str(&format!(" {} Gb/s", rounded(rate)));
        }
        parts.push(link);
        parts.extend(self.active_mtu.map(|m| format!("MTU {m}")));
        parts.extend(self.pcie.as_ref().and_then(pcie_text));
        parts.extend(self.numa_node.map(|n| format!("NUMA node {n}")));
        parts.extend(self.driver.as_deref().map(|d| format!("driver {}", clean(d))));
        parts.extend(self.rdma_core.as_deref().map(|v| format!("rdma-core {}", clean(v))));
        parts.join(", ")
    }
}

impl InterfaceEnvironment {
    /// One line: `interface eth2, MTU 9000, 10000 Mb/s`.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!("interface {}", clean(&self.name))];
        parts.extend(self.mtu.map(|m| format!("MTU {m}")));
        parts.extend(self.speed_mbps.map(|s| format!("{s} Mb/s")));
        parts.join(", ")
    }
}

/// `x` to at most three decimals, without trailing zeros (`56`, `2.5`, `54.545`).
pub(super) fn rounded(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `PCIe 8.0 GT/s x8`, and the maximum when the link runs below it:
/// `PCIe 5.0 GT/s x4 (max 8.0 GT/s x8)`.
pub(super) fn pcie_text(p: &Pcie) -> Option<String> {
    let link = |speed: &Option<String>, width: Option<u32>| {
        let speed = speed.as_deref().map(|s| clean(s.trim_end_matches("PCIe")));
        let width = width.map(|w| format!("x{w}"));
        let words: Vec<String> = speed.into_iter().chain(width).filter(|w| !w.is_empty()).collect();
        (!words.is_empty()).then(|| words.join(" "))
    };
    let current = link(&p.current_speed, p.current_width);
    let max = link(&p.max_speed, p.max_width);
    match (current, max) {
        (Some(c), Some(m)) if c != m => Some(format!("PCIe {c} (max {m})")),
        (Some(c), _) => Some(format!("PCIe {c}")),
        (None, Some(m)) => Some(format!("PCIe max {m}")),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_keep_three_decimals_at_most() {
        assert_eq!(format!("{}", rounded(56.0)), "56");
        assert_eq!(format!("{}", rounded(2.5)), "2.5");
        assert_eq!(format!("{}", rounded(54.545_454_545)), "54.545");
    }

    #[test]
    fn pcie_shows_a_degraded_link_against_its_maximum() {
        let pcie = |c: Option<&str>, cw, m: Option<&str>, mw| Pcie {
            current_speed: c.map(String::from),
            current_width: cw,
            max_speed: m.map(String::from),
            max_width: mw,
        };
        let full = pcie(Some("8.0 GT/s PCIe"), Some(8), Some("8.0 GT/s PCIe"), Some(8));
        assert_eq!(pcie_text(&full).as_deref(), Some("PCIe 8.0 GT/s x8"));
        let slow = pcie(Some("5.0 GT/s PCIe"), Some(4), Some("8.0 GT/s PCIe"), Some(8));
        assert_eq!(pcie_text(&slow).as_deref(), Some("PCIe 5.0 GT/s x4 (max 8.0 GT/s x8)"));
        assert_eq!(
            pcie_text(&pcie(None, None, Some("2.5 GT/s"), None)).as_deref(),
            Some("PCIe max 2.5 GT/s")
        );
        assert_eq!(pcie_text(&pcie(None, None, None, None)), None);
    }

    #[test]
    fn a_peers_text_cannot_break_the_line() {
        let mut env = Environment {
            hostname: "evil\nhost".into(),
            kernel: "6.1\r\n".into(),
            os: "OS\u{2028}X".into(),
            cpu_model: "\t".into(),
            cpus: 4,
            governor: Some("perf\u{1b}[2J".into()),
            rdmabench: "0.1.0".into(),
            device: None,
            interface: Some(InterfaceEnvironment {
                name: "eth\n0".into(),
                mtu: None,
                speed_mbps: None,
            }),
        };
        let line = env.summary();
        assert_eq!(line, "evil host: Linux 6.1, OS X, 4 CPUs, governor perf [2J; interface eth 0");
        env.interface = None;
        assert!(!env.summary().contains(|c: char| c.is_control()));
    }

    #[test]
    fn windows_names_itself_with_its_version() {
        let env = Environment {
            hostname: "MEDIA1".into(),
            kernel: "10.0.19045".into(),
            os: "Windows".into(),
            cpu_model: "Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz".into(),
            cpus: 2,
            governor: None,
            rdmabench: "0.1.0".into(),
            device: None,
            interface: None,
        };
        let line = env.summary();
        assert_eq!(
            line,
            "MEDIA1: Windows 10.0.19045, 2 x Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz"
        );
        let unknown = Environment { kernel: "unknown".into(), ..env };
        assert!(unknown.summary().starts_with("MEDIA1: Windows, 2 x "), "{}", unknown.summary());
    }
}
