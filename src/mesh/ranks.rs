//! Who is in a mesh and what each link measured: a rank as the others reach it
//! ([`RankInfo`]), one directed link's figures ([`LinkResult`]) and which host each rank
//! is on ([`host_of`]). The analysis, the findings and the rounds all speak of these.

use serde::{Deserialize, Serialize};

use super::window::FlowSpan;

/// One rank as the others reach it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankInfo {
    /// MPI rank.
    pub rank: usize,
    /// Host name (MPI's processor name).
    pub host: String,
    /// Where its control listener is.
    pub address: String,
    /// Its control listener's port.
    pub port: u16,
    /// The device its tests use (`tcp` for `--tcp`).
    pub device: String,
}

impl RankInfo {
    /// `rank 2 (node2 rxe0)`.
    pub fn name(&self) -> String {
        format!("rank {} ({} {})", self.rank, self.host, self.device)
    }
}

/// One directed link's figures: `from` was the client (the writer, the pinger).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkResult {
    /// The client's rank.
    pub from: usize,
    /// The server's rank.
    pub to: usize,
    /// The round it was measured in (0-based).
    pub round: usize,
    /// Bandwidth test: BW average, MB/s (2^20 bytes, perftest's MB).
    pub bw_mb_per_sec: Option<f64>,
    /// Latency test: t_typical (the median), µs.
    pub t_typical_usec: Option<f64>,
    /// Why a test of this link failed, if one did.
    pub error: Option<String>,
    /// A pattern round's flow: its bytes as it ran (the round's shared window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<FlowSpan>,
}

/// The hosts (a name and a device: one NIC) in order of their first rank, and each
/// rank's index among them.
pub fn host_of(ranks: &[RankInfo]) -> (Vec<(String, String)>, Vec<usize>) {
    let mut hosts: Vec<(String, String)> = Vec::new();
    let index = ranks
        .iter()
        .map(|r| {
            let key = (r.host.clone(), r.device.clone());
            hosts.iter().position(|h| *h == key).unwrap_or_else(|| {
                hosts.push(key);
                hosts.len() - 1
            })
        })
        .collect();
    (hosts, index)
}
