//! The result model: what a run measured, the parameters it ran with, where it ran and
//! whether it held — the JSON document of a run, read by the transports' set-up, the
//! control session, the engine and every printer (the printing is theirs:
//! `perf::header`, `perf::table`, `report/`). Data only, and the few facts about it that
//! are not a choice of layout.

mod environment;
mod run;

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind};
use crate::measure::clock::ClockInfo;
use crate::measure::cpu::CpuSides;
use crate::measure::{BwStats, LatStats};

pub use crate::facts::cpus::cpu_ranges;
pub use environment::{DeviceEnvironment, Environment, InterfaceEnvironment};
pub use run::{RateLimit, RateUnits, RunLength};

/// What one side measured for one message size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    /// Message size, bytes.
    pub size: u64,
    /// perftest's `#iterations`: messages per QP (in a duration run, those completed
    /// inside the window).
    pub iterations: u64,
    /// Bandwidth, all QPs together (both directions summed with -b).
    pub bw: Option<BwStats>,
    /// Bandwidth per QP, when there are several.
    pub per_qp: Vec<BwStats>,
    /// `--threads T` (T > 1): each thread's share of `bw`, its QPs together, in thread
    /// order (thread k runs a contiguous run of the QPs, the first runs one QP longer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_thread: Vec<BwStats>,
    /// With -b: `[this side → peer, peer → this side]` as the client sees them.
    pub directions: Option<[BwStats; 2]>,
    /// Latency.
    pub lat: Option<LatStats>,
    /// Pattern check (`--validate`).
    pub validation: Option<Validation>,
    /// Bytes the receiving side counted (send and TCP tests, writes with immediate
    /// data): what really arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bytes: Option<u64>,
    /// CPU cost of the measured window on each side.
    #[serde(default)]
    pub cpu: CpuSides,
    /// This side's port counters over the size (`-W`); never the peer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::counters::CounterChanges>,
    /// How steady the run was: its intervals' (bandwidth) or iterations' (latency)
    /// spread, from the measuring side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stability: Option<crate::measure::Stability>,
    /// `--run_infinitely`: the intervals this summary adds up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<u64>,
    /// `--json-lines`: this side's verdicts of the size's intervals; never the peer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_verdicts: Option<IntervalVerdicts>,
    /// The size that was running when the run failed (a `-D` run's sender: its window
    /// until its last completion, this side's figures alone): what was measured, never
    /// a figure to judge or compare as a whole run's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Every latency sample in run order, ns (`-H`, `-U`, on the measuring side): printed,
    /// never sent or written (JSON keeps the histogram).
    #[serde(skip)]
    pub samples_ns: Option<Vec<u64>>,
    /// A bandwidth sender's bytes as its run of iterations went (never sent or written):
    /// what the mesh's patterns count over a window all their flows share.
    #[serde(skip)]
    pub progress: Option<Progress>,
}

/// One QP's first post, ns, and its completion stamps (ns, messages done by then).
pub type QpStamps<'a> = (Option<u64>, &'a [(u64, u64)]);

/// A sender's bytes over its run: when its loop's clock started, and at most
/// [`Progress::POINTS`] stamps of the bytes done by then, every QP's together.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// The loop's clock's start.
    pub started: std::time::Instant,
    /// (ns since `started`, bytes done by then), in order: the first post with 0 bytes,
    /// then completions, the last one the run's end.
    pub stamps: Vec<(u64, u64)>,
}

impl Progress {
    /// Most stamps kept: evenly spaced among the completions, the first and last kept.
    pub const POINTS: usize = 64;

    /// From each QP's (first post, completion stamps), messages of `size` bytes, all on
    /// the clock that started at `started`; None when no QP completed anything.
    pub fn of(started: std::time::Instant, size: u64, qps: &[QpStamps<'_>]) -> Option<Progress> {
        let first = qps.iter().filter_map(|(p, _)| *p).min()?;
        // Every QP's completions merged in time, the total done kept as each moves.
        let mut events: Vec<(u64, usize, u64)> = qps
            .iter()
            .enumerate()
            .flat_map(|(q, (_, c))| c.iter().map(move |&(t, done)| (t, q, done)))
            .collect();
        if events.is_empty() {
            return None;
        }
        events.sort_unstable();
        let mut done = vec![0u64; qps.len()];
        let mut all = Vec::with_capacity(events.len() + 1);
        all.push((first, 0));
        for (t, q, d) in events {
            done[q] = d;
            all.push((t.max(first), done.iter().sum::<u64>().saturating_mul(size)));
        }
        Some(Progress::thinned(started, &all))
    }

    /// A duration run's window: from `start_ns`, each QP's cumulative messages at the
    /// end of each `interval_ns`; None without a whole interval.
    pub fn of_window(
        started: std::time::Instant,
        size: u64,
        start_ns: u64,
        interval_ns: u64,
        qps: &[&[u64]],
    ) -> Option<Progress> {
        let n = qps.iter().map(|b| b.len()).min()?;
        if n == 0 {
            return None;
        }
        let mut all = Vec::with_capacity(n + 1);
        all.push((start_ns, 0));
        for k in 0..n {
            let done: u64 = qps.iter().map(|b| b[k]).sum();
            let at = start_ns.saturating_add(interval_ns.saturating_mul(k as u64 + 1));
            all.push((at, done.saturating_mul(size)));
        }
        Some(Progress::thinned(started, &all))
    }

    /// At most [`Self::POINTS`] of `all` (not empty), evenly by index, its first and
    /// last kept.
    fn thinned(started: std::time::Instant, all: &[(u64, u64)]) -> Progress {
        let keep = Self::POINTS.min(all.len());
        let last = all.len() - 1;
        let at = |i: usize| all[if keep == 1 { last } else { i * last / (keep - 1) }];
        Progress { started, stamps: (0..keep).map(at).collect() }
    }
}

/// How many of a size's intervals `--json-lines` judged, and how many of them failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalVerdicts {
    /// Intervals judged (the whole run's, not each stream's).
    pub judged: u64,
    /// Of those, the ones whose verdict failed.
    pub failed: u64,
}

/// The outcome of `--validate` for one size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    /// Bytes compared with the expected pattern.
    pub checked_bytes: u64,
    /// Bytes that differed.
    pub corrupted_bytes: u64,
    /// Offset of the first difference in the receiver's buffer.
    pub first_corrupted_offset: Option<u64>,
}

/// The whole run: printed by both sides, and written with `--json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// Always `perf`.
    pub kind: &'static str,
    /// `write_bw`, …
    pub test: &'static str,
    /// `client` or `server`.
    pub role: &'static str,
    /// `rdmabench 0.1.0`.
    pub tool: String,
    /// The clock that timed the samples: its source, a read's cost, any warning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockInfo>,
    /// This side's host and device (or interface), and the peer's under `peer`.
    pub environment: Option<EnvironmentReport>,
    /// What actually ran on this side (null if the run stopped before set-up).
    pub params: Option<EffectiveParams>,
    /// What ran on the peer's side.
    pub peer_params: Option<EffectiveParams>,
    /// This side's queue pairs (streams), as the peer was told them.
    pub local: Vec<Endpoint>,
    /// The peer's.
    pub remote: Vec<Endpoint>,
    /// The peer's control-connection address, `ip:port` (null until connected).
    pub peer_address: Option<String>,
    /// One entry per size that completed, in order.
    pub results: Vec<SizeResult>,
    /// Thresholds and validation.
    pub verdict: Verdict,
    /// What ended the run before its end, if anything did: a signal, the peer's
    /// leaving, the server's `--max-time`. Its results are what was measured until then.
    pub stopped: Option<Stopped>,
    /// Why the run stopped early (or failed its verdict): kind and message.
    pub error: Option<Error>,
}

/// What stopped a run before its end (`stopped` in the JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// SIGINT (Ctrl-C).
    Interrupted,
    /// SIGTERM.
    Terminated,
    /// SIGHUP (the terminal closed).
    Hangup,
    /// The peer closed its connections or went silent.
    PeerGone,
    /// The server's `serve --max-time` ended the test.
    MaxTime,
    /// The document written as the run starts, in place until its end replaces it: a
    /// process killed outright (SIGKILL, a second Ctrl-C) leaves this.
    Unfinished,
}

impl Stopped {
    /// What a run that received termination signal `signal` and ended with `error`
    /// was stopped by, if anything.
    pub fn of(signal: Option<i32>, error: Option<&Error>) -> Option<Stopped> {
        match (signal, error) {
            (Some(2), _) => Some(Stopped::Interrupted),
            (Some(1), _) => Some(Stopped::Hangup),
            (Some(_), _) => Some(Stopped::Terminated),
            (None, Some(e)) if e.message.contains(crate::error::OVERTIME) => Some(Stopped::MaxTime),
            (None, Some(e)) if matches!(e.kind, ErrorKind::PeerClosed | ErrorKind::PeerSilent) => {
                Some(Stopped::PeerGone)
            }
            (None, _) => None,
        }
    }

    /// Whether a termination signal stopped the run.
    pub fn by_signal(self) -> bool {
        matches!(self, Stopped::Interrupted | Stopped::Terminated | Stopped::Hangup)
    }

    /// Its name in the JSON and the text: `interrupted`, …
    pub fn name(self) -> &'static str {
        match self {
            Stopped::Interrupted => "interrupted",
            Stopped::Terminated => "terminated",
            Stopped::Hangup => "hangup",
            Stopped::PeerGone => "peer_gone",
            Stopped::MaxTime => "max_time",
            Stopped::Unfinished => "unfinished",
        }
    }
}

impl RunReport {
    /// An empty report of `test` on `role`'s side.
    pub fn new(test: &'static str, role: &'static str, tool: String) -> Self {
        RunReport {
            schema_version: crate::stamp::SCHEMA_VERSION,
            kind: "perf",
            test,
            role,
            tool,
            clock: None,
            environment: None,
            params: None,
            peer_params: None,
            local: Vec::new(),
            remote: Vec::new(),
            peer_address: None,
            results: Vec::new(),
            verdict: Verdict { pass: true, failures: Vec::new() },
            stopped: None,
            error: None,
        }
    }
}

/// One queue pair's (or TCP stream's) address, as the two sides exchanged it; a field
/// the transport has no such thing for is null.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Queue pair number (verbs).
    pub qpn: Option<u32>,
    /// First packet sequence number (verbs).
    pub psn: Option<u32>,
    /// Remote key of its buffer (verbs; NetworkDirect: the token), where the peer
    /// reads or writes it.
    pub rkey: Option<u32>,
    /// Address of its buffer, with `rkey`.
    pub vaddr: Option<u64>,
    /// GID, IPv6 text form (verbs over RoCE, or IB with a GRH).
    pub gid: Option<String>,
    /// LID (verbs over InfiniBand; 0 on RoCE).
    pub lid: Option<u16>,
    /// IP address, with the port where there is one (TCP streams, NetworkDirect).
    pub address: Option<String>,
}

/// `environment` in a result: this side's, with the peer's under `peer`.
#[derive(Clone, Debug, Serialize)]
pub struct EnvironmentReport {
    /// This side.
    #[serde(flatten)]
    pub local: Environment,
    /// The peer (null until the two sides described themselves).
    pub peer: Option<Environment>,
}

/// The parameters in effect after every default and adjustment: the test as the spec
/// asks it, the queues as this side's plan created them, and what the set-up found and
/// the device granted, each made by the room that decides it (`spec`, `spec::plan`,
/// the backend), side by side in one JSON object (docs/json.md#params).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EffectiveParams {
    /// What the set-up found and the device granted.
    #[serde(flatten)]
    pub granted: Granted,
    /// The queues as this side created them.
    #[serde(flatten)]
    pub queues: QueueParams,
    /// The test as the spec asks it.
    #[serde(flatten)]
    pub test: TestParams,
    /// Where the measuring thread runs (RDMA tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_affinity: Option<CpuAffinity>,
    /// TCP tests: streams, the socket buffer granted (null: autotuning), TCP_NODELAY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpEffective>,
}

/// What a backend's set-up found and the device granted (`params`' device half).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Granted {
    /// Device.
    pub device: String,
    /// Port.
    pub ib_port: u8,
    /// `InfiniBand`, `Ethernet`, `NetworkDirect` or `TCP`.
    pub link_layer: String,
    /// GID index (null: LID routing).
    pub gid_index: Option<u8>,
    /// Path MTU, bytes (0: none).
    pub mtu: u32,
    /// Inline size the QP accepted, bytes (at most `-I`).
    pub inline_size: u32,
    /// Outstanding reads/atomics.
    pub outs: u32,
    /// RC ACK timeout exponent and retries (verbs RC; null otherwise).
    #[serde(default)]
    pub qp_timeout: Option<u8>,
    /// See `qp_timeout`.
    #[serde(default)]
    pub retry_count: Option<u8>,
    /// The path's class (verbs; null otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathParams>,
}

/// The queues and posting modes as this side's plan created them
/// (`spec::plan::SidePlan`; `backend::params` reads them off it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueParams {
    /// Send queue depth, as created (a latency QP's at least 16).
    pub tx_depth: u32,
    /// Receive queue depth.
    pub rx_depth: u32,
    /// CQ moderation.
    pub cq_mod: u32,
    /// Post list.
    pub post_list: u32,
    /// One shared receive queue per side (`--use-srq`).
    #[serde(default)]
    pub shared_receives: bool,
    /// Event mode.
    pub events: bool,
}

/// The test as its spec asks it, and the unit this side prints bandwidth in
/// (`backend::params` reads them off the spec and the header's units).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestParams {
    /// `RC`, `UC`, `UD`, `TCP`.
    pub connection: String,
    /// Queue pairs (TCP: streams).
    pub qps: u32,
    /// Sizes.
    pub sizes: Vec<u64>,
    /// Iterations or duration.
    pub run: RunLength,
    /// The sender's software pacing (`--rate_limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// A full send queue, unmeasured, before each size (`--perform_warm_up`).
    #[serde(default)]
    pub warm_up: bool,
    /// Buffers registered for on-demand paging (`--odp`).
    #[serde(default)]
    pub odp: bool,
    /// Buffers in huge pages (`--use_hugepages`).
    #[serde(default)]
    pub hugepages: bool,
    /// Writes or sends with immediate data (`--write_with_imm`, `--send_with_imm`).
    #[serde(default)]
    pub immediate: bool,
    /// The server sends and measures (`--reversed`).
    #[serde(default)]
    pub reversed: bool,
    /// Both directions.
    pub bidirectional: bool,
    /// rdma_cm.
    pub rdma_cm: bool,
    /// Atomic operation (atomic tests).
    pub atomic_type: Option<String>,
    /// `MiB/s` or `Gb/s`.
    pub bw_unit: String,
    /// `one-way (half round trip)` or `round trip`.
    pub latency_is: String,
    /// Pattern checking.
    pub validate: bool,
}

/// Where the measuring thread may run (RDMA tests): the CPUs the kernel allows it after
/// pinning, and why those.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuAffinity {
    /// The CPUs, as `sched_getaffinity` reads them (empty: not pinned).
    pub cpus: Vec<usize>,
    /// `--numa_node 0`, `mlx4_0's NUMA node 1`, `not pinned: rxe0 reports no NUMA node`.
    pub source: String,
}

/// The class of a verbs path as the queue pair holds it after connecting (read back
/// with `ibv_query_qp`; set, for UD, whose QPs have no path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathParams {
    /// Service level (`-S`).
    pub sl: u8,
    /// GRH traffic class (`--tclass`).
    pub traffic_class: u8,
    /// GRH flow label (`--flow_label`).
    pub flow_label: u32,
}

/// A TCP test's socket set-up as it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TcpEffective {
    /// Parallel streams.
    pub streams: u32,
    /// SO_RCVBUF the kernel granted for -w, bytes (null: autotuning).
    pub socket_buffer: Option<u32>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// CPUs the stream threads were pinned to (empty: not pinned).
    pub pinned_cpus: Option<Vec<usize>>,
}

/// Pass/fail against the thresholds and the pattern check.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Verdict {
    /// Whether everything held.
    pub pass: bool,
    /// Why not, one line each.
    pub failures: Vec<String>,
}

/// What a run ended with: the report (every size that completed) and, if the run
/// stopped early, why.
#[derive(Debug)]
pub struct Outcome {
    /// What was measured.
    pub report: RunReport,
    /// Why the run stopped early, if it did.
    pub error: Option<Error>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_one_flat_object_as_the_wire_and_older_runs_have_them() {
        // A write_lat client's params as a build before the three parts wrote them.
        let flat = serde_json::json!({
            "device": "rxe0", "ib_port": 1, "link_layer": "Ethernet", "gid_index": 1,
            "mtu": 1024, "connection": "RC", "qps": 1, "sizes": [2],
            "run": {"iterations": 1000}, "tx_depth": 16, "rx_depth": 1, "cq_mod": 1,
            "post_list": 1, "inline_size": 0, "outs": 16, "qp_timeout": 14,
            "retry_count": 7, "path": {"sl": 0, "traffic_class": 0, "flow_label": 0},
            "warm_up": false, "odp": false, "hugepages": false, "shared_receives": false,
            "immediate": false, "reversed": false, "events": false, "bidirectional": false,
            "rdma_cm": false, "atomic_type": null, "bw_unit": "MiB/s",
            "latency_is": "one-way (half round trip)", "validate": false,
            "cpu_affinity": {"cpus": [0], "source": "--pin_cores"}
        });
        let p: EffectiveParams = serde_json::from_value(flat.clone()).unwrap();
        assert_eq!(
            (p.granted.device.as_str(), p.granted.qp_timeout, p.queues.tx_depth),
            ("rxe0", Some(14), 16)
        );
        assert_eq!(
            (p.test.latency_is.as_str(), p.test.sizes.as_slice()),
            ("one-way (half round trip)", &[2][..])
        );
        assert_eq!(serde_json::to_value(&p).unwrap(), flat, "the same keys, none nested");
    }

    #[test]
    fn a_run_is_stopped_by_its_signal_before_its_error() {
        let gone = Error::new(ErrorKind::PeerClosed, "TCP send: the peer closed");
        let limit =
            crate::error::RunLimit { after: std::time::Duration::from_secs(2), serve: true };
        let overtime =
            Error::refused(format!("the peer stopped: {} {limit}", crate::error::OVERTIME));
        let own = crate::error::RunLimit { serve: false, ..limit };
        let own = Error::refused(format!("{} {own}", crate::error::OVERTIME));
        assert_eq!(Stopped::of(None, Some(&own)), Some(Stopped::MaxTime), "its own --max-time");
        assert_eq!(Stopped::of(Some(2), Some(&gone)), Some(Stopped::Interrupted));
        assert_eq!(Stopped::of(Some(15), None), Some(Stopped::Terminated));
        assert_eq!(Stopped::of(Some(1), None), Some(Stopped::Hangup));
        assert_eq!(Stopped::of(None, Some(&gone)), Some(Stopped::PeerGone));
        assert_eq!(Stopped::of(None, Some(&overtime)), Some(Stopped::MaxTime));
        assert_eq!(Stopped::of(None, Some(&Error::usage("bad flag"))), None);
        assert_eq!(Stopped::of(None, None), None);
    }
}
