//! The fault codes of `rdmabench health`: stable names, one per kind of trouble, and a
//! finding: a code on a subject with the figure and what it was judged against
//! (docs/health.md lists the codes).

use std::fmt;

use serde::{Deserialize, Serialize};

/// What is wrong, as a name scripts may match on: the names never change meaning.
/// Ordered by how much else they explain (a port down explains a loopback that did
/// not run), so a host's line leads with its first cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Code {
    /// A port not ACTIVE / LinkUp.
    PortDown,
    /// A port's link trained below what its card can do (width or speed).
    RateLow,
    /// The card's PCIe link below its own capability (speed or width).
    PcieDegraded,
    /// Firmware below the model's minimum.
    FirmwareOld,
    /// The port's state, rate or PCIe link differed after the test from before it.
    LinkChanged,
    /// A counter of trouble (errors, discards, retries, NAKs) moved during the test.
    CountersMoved,
    /// A loopback figure beyond its absolute floor (bandwidth below, latency above).
    LoopbackLow,
    /// A loopback figure below a fraction of the job's median for the same model and rate.
    BelowMedian,
    /// Both ring links through this host slow: the host's own NIC or cable.
    NeighbourLow,
    /// Configured unlike the job's other hosts of the same model (MTU, firmware, …).
    ConfigUnlike,
    /// A test that should have run could not (its error named).
    NotRun,
}

impl Code {
    /// Every code, in order.
    pub const ALL: [Code; 11] = [
        Code::PortDown,
        Code::RateLow,
        Code::PcieDegraded,
        Code::FirmwareOld,
        Code::LinkChanged,
        Code::CountersMoved,
        Code::LoopbackLow,
        Code::BelowMedian,
        Code::NeighbourLow,
        Code::ConfigUnlike,
        Code::NotRun,
    ];

    /// `PORT_DOWN`: the name printed, in JSON and on each host's line.
    pub fn name(self) -> &'static str {
        match self {
            Code::PortDown => "PORT_DOWN",
            Code::RateLow => "RATE_LOW",
            Code::PcieDegraded => "PCIE_DEGRADED",
            Code::FirmwareOld => "FIRMWARE_OLD",
            Code::LinkChanged => "LINK_CHANGED",
            Code::CountersMoved => "COUNTERS_MOVED",
            Code::LoopbackLow => "LOOPBACK_LOW",
            Code::BelowMedian => "BELOW_MEDIAN",
            Code::NeighbourLow => "NEIGHBOUR_LOW",
            Code::ConfigUnlike => "CONFIG_UNLIKE",
            Code::NotRun => "NOT_RUN",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One thing wrong with a host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What kind.
    pub code: Code,
    /// Where: `mlx4_0/1` (a port), `mlx4_0` (a card), `host`.
    pub subject: String,
    /// The figure and what it was judged against: `write_bw 41.2 Gb/s < 90% link (49.1 Gb/s)`.
    pub detail: String,
}

impl Finding {
    /// A finding.
    pub fn new(code: Code, subject: &str, detail: impl Into<String>) -> Finding {
        Finding { code, subject: subject.to_string(), detail: detail.into() }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.subject, self.detail)
    }
}

/// The findings in the order a host's line shows them: by code, then subject.
pub fn sorted(mut findings: Vec<Finding>) -> Vec<Finding> {
    findings.sort_by(|a, b| (a.code, &a.subject).cmp(&(b.code, &b.subject)));
    findings.dedup();
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_json_names_and_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, code.name(), "{code:?}");
            assert!(seen.insert(code.name()));
        }
        assert_eq!(seen.len(), 11);
    }

    #[test]
    fn findings_sort_by_code_then_subject() {
        let f = sorted(vec![
            Finding::new(Code::NotRun, "rxe0/1", "x"),
            Finding::new(Code::PortDown, "rxe1/1", "y"),
            Finding::new(Code::PortDown, "rxe0/1", "z"),
        ]);
        let order: Vec<String> = f.iter().map(|f| format!("{} {}", f.code, f.subject)).collect();
        assert_eq!(order, ["PORT_DOWN rxe0/1", "PORT_DOWN rxe1/1", "NOT_RUN rxe0/1"]);
    }
}
