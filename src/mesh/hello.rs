//! The ranks' introduction: one all-gather of each rank's endpoint (its control
//! listener, and with `--pattern` its listener per sender), the mesh's parameters and
//! rank 0's seed, checked before anything is used.

use serde::{Deserialize, Serialize};

use super::bootstrap::Bootstrap;
use super::ranks::RankInfo;
use super::{Endpoint, MeshSpec};
use crate::error::{Error, ErrorKind};
use crate::session::connect::ControlListener;

/// One rank's introduction, all-gathered.
#[derive(Serialize, Deserialize)]
pub(super) struct Hello {
    pub(super) info: RankInfo,
    /// The mesh's parameters as JSON: every rank's must equal rank 0's.
    pub(super) params: String,
    /// Rank 0's is the mesh's seed.
    pub(super) seed: u64,
    /// With `--pattern`: the port of this rank's listener for each sender, and at its
    /// own place the latency probe's; else empty.
    #[serde(default)]
    pub(super) flow_ports: Vec<u16>,
}

/// What the ranks know of each other once introduced.
pub(super) struct Introduced {
    pub(super) ranks: Vec<RankInfo>,
    /// Rank 0's seed.
    pub(super) seed: u64,
    /// `flow_ports[to][from]`: where `from` connects to send to `to` in a pattern round
    /// (empty without `--pattern`).
    pub(super) flow_ports: Vec<Vec<u16>>,
}

/// Every rank's endpoint, and the seed (rank 0's), from one all-gather of hellos.
pub(super) fn introduce(
    boot: &dyn Bootstrap,
    mesh: &MeshSpec,
    endpoint: &Endpoint,
    listener: &ControlListener,
    flow_ports: Vec<u16>,
) -> Result<Introduced, Error> {
    let info = RankInfo {
        rank: boot.rank(),
        host: boot.host(),
        address: endpoint.address.to_string(),
        port: listener.local_addr().map_or(0, |a| a.port()),
        device: endpoint.device.clone(),
    };
    let params = serde_json::to_string(mesh).map_err(|e| Error::io(e.to_string()))?;
    let hello = Hello { info, params, seed: mesh.seed.unwrap_or_else(fresh_seed), flow_ports };
    let hello = serde_json::to_vec(&hello).map_err(|e| Error::io(e.to_string()))?;
    let hellos = read_hellos(&boot.all_gather(&hello), boot.size(), mesh.patterns.any())?;
    let seed = hellos[0].seed;
    let (ranks, flow_ports) = hellos.into_iter().map(|h| (h.info, h.flow_ports)).unzip();
    Ok(Introduced { ranks, seed, flow_ports })
}

/// The all-gathered hellos, checked: one per rank, each naming its rank, all with rank
/// 0's parameters; with `flows`, each with a listener port for every other rank and
/// one, at its own place, for the latency probe.
pub(super) fn read_hellos(raw: &[Vec<u8>], n: usize, flows: bool) -> Result<Vec<Hello>, Error> {
    let mut hellos = Vec::with_capacity(n);
    for (rank, bytes) in raw.iter().enumerate() {
        let h: Hello = serde_json::from_slice(bytes).map_err(|e| {
            Error::new(
                ErrorKind::Refused,
                format!("rank {rank}'s endpoint record is unreadable: {e}"),
            )
        })?;
        if h.info.rank != rank {
            return Err(Error::new(
                ErrorKind::Refused,
                format!("the endpoint in rank {rank}'s place says rank {}", h.info.rank),
            ));
        }
        hellos.push(h);
    }
    if hellos.len() != n {
        return Err(Error::new(
            ErrorKind::Refused,
            format!("{} endpoints for {n} ranks", hellos.len()),
        ));
    }
    let differ: Vec<String> =
        hellos.iter().filter(|h| h.params != hellos[0].params).map(|h| h.info.name()).collect();
    if !differ.is_empty() {
        return Err(Error::new(
            ErrorKind::Mismatch,
            format!(
                "every rank must run the same mesh: the parameters of {} differ from rank 0's",
                differ.join(", ")
            ),
        ));
    }
    for h in &hellos {
        let ports = &h.flow_ports;
        let fine = if flows {
            ports.len() == n && ports.iter().all(|&p| p != 0)
        } else {
            ports.is_empty()
        };
        if !fine {
            return Err(Error::new(
                ErrorKind::Refused,
                format!(
                    "{} sent {} pattern listener port(s) for {n} ranks (want {})",
                    h.info.name(),
                    ports.len(),
                    if flows {
                        "one per rank: each sender's, its own the latency probe's"
                    } else {
                        "none"
                    }
                ),
            ));
        }
    }
    Ok(hellos)
}

/// A seed for `random:K` and bisection when none is given: the clock's nanoseconds.
fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    t.as_nanos() as u64
}
