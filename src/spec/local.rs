//! This side's own part of a test, never exchanged: its settings ([`Local`]: device,
//! addresses, waits, pinning, key), how it shows and judges results ([`Output`]), and
//! the whole of one test as this side runs it ([`TestOptions`]).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{RunLength, TestSpec, DEFAULT_MAX_TIME, DEFAULT_PORT};
use crate::error::RunLimit;

/// What one side decides for itself: which device, where to listen or connect, how
/// long to wait. Not exchanged.
#[derive(Clone, Debug, PartialEq)]
pub struct Local {
    /// RDMA device (`-d`; None: the first), or a NetworkDirect adapter's IP.
    pub device: Option<String>,
    /// Device port (`-i`).
    pub ib_port: u8,
    /// GID index (`-x`; None: the RoCE v2 GID of the control connection's address).
    pub gid_index: Option<u8>,
    /// Control-channel TCP port (`-p`).
    pub port: u16,
    /// Address a server listens on (None: every address).
    pub bind: Option<IpAddr>,
    /// How long to wait for the peer at each step.
    pub timeout: Duration,
    /// How long a client retries a refused connection (a server still starting).
    pub connect_window: Duration,
    /// CPUs the measuring threads are pinned to, one per connection in turn (`--cpus`).
    pub pin: Vec<usize>,
    /// The shared secret both sides must hold (`--auth-key`; None: no authentication).
    pub auth: Option<crate::spec::key::AuthKey>,
    /// No progress bar on stderr during a sweep or a timed run (`--quiet`; also where a
    /// caller draws its own: compare, qualify, serve).
    pub quiet: bool,
    /// The port counters read around each size (`-W`; None: none).
    pub counters: Option<crate::counters::CounterSelection>,
    /// Keep every latency sample, in order, for `-H`/`-U` to print.
    pub keep_samples: bool,
    /// RDMA tests: run the measuring thread on this NUMA node's CPUs (`--numa_node`).
    pub numa_node: Option<u32>,
    /// RDMA bandwidth tests: the threads the queue pairs are spread over (`--threads`;
    /// 1: one measuring thread, the path perftest runs).
    pub threads: u32,
    /// Bandwidth tests: a line per interval as the run goes (`--interval`; None: none).
    pub interval_lines: Option<IntervalLines>,
    /// A one-shot TCP server given no test flags: it runs what its client asks (iperf3's
    /// habit). Otherwise (false, the default) a client whose test differs is refused.
    pub follows_client: bool,
    /// A one-shot server's `--timeout 0`: it waits for ever for its first client (each
    /// step once connected still bounded by `timeout`).
    pub wait_forever: bool,
    /// The longest this side lets one test run once connected (`--max-time`; None: as
    /// [`Local::run_limit`] says).
    pub max_time: Option<Duration>,
}

/// `--interval SECS` (iperf3's `-i`): the sender prints each interval's bytes and
/// bandwidth as the run goes; `--json-lines FILE`: and appends each as a JSON record.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalLines {
    /// The interval.
    pub every: Duration,
    /// Print a text line per interval (`--interval`; not with `--json-lines` alone).
    pub text: bool,
    /// `--json-lines FILE`: one JSON record per interval, appended as it ends.
    pub json_lines: Option<std::path::PathBuf>,
    /// Gb/s instead of MiB/s (`--report_gbits`).
    pub gbits: bool,
    /// On stderr (stdout carries the JSON: `--json -`).
    pub to_stderr: bool,
    /// `--min-bw` (the report's unit): each `--json-lines` record's floor.
    pub min_bw: Option<f64>,
}

/// Whether `-d` names several devices (comma-separated), a rail each: a multi-rail
/// run (`rdmabench::rails`).
pub fn names_rails(device: Option<&str>) -> bool {
    device.is_some_and(|d| d.contains(','))
}

impl Local {
    /// Whether this side's device names several: a multi-rail run.
    pub fn rails(&self) -> bool {
        names_rails(self.device.as_deref())
    }
}

impl Default for Local {
    fn default() -> Self {
        Local {
            device: None,
            ib_port: 1,
            gid_index: None,
            port: DEFAULT_PORT,
            bind: None,
            timeout: Duration::from_secs(30),
            connect_window: Duration::from_secs(30),
            pin: Vec::new(),
            auth: None,
            quiet: false,
            counters: None,
            keep_samples: false,
            numa_node: None,
            threads: 1,
            interval_lines: None,
            follows_client: false,
            wait_forever: false,
            max_time: None,
        }
    }
}

impl Local {
    /// How long this side lets `spec` run once its peer has said hello, whatever the peer
    /// does: a peer that trickles, beats without end or stops mid-way cannot hold it
    /// longer. `--max-time` if given; else a `-D` run's seconds and `timeout` for each of
    /// its steps (set-up and each size: a peer that answers at all answers in far less),
    /// or [`DEFAULT_MAX_TIME`] for a run of iterations, whose length nothing foretells. A
    /// `--run_infinitely` run has no limit unless one is given.
    pub fn run_limit(&self, spec: &TestSpec) -> Option<RunLimit> {
        let points = spec.sizes.len().max(1) as u32;
        let after = match (self.max_time, spec.run) {
            (Some(given), _) => given,
            _ if spec.rdma().is_some_and(|r| r.run_infinitely) => return None,
            (None, RunLength::Duration { secs, .. }) => {
                Duration::from_secs(secs).saturating_mul(points)
                    + self.timeout.saturating_mul(points + 1)
            }
            (None, RunLength::Iterations(_)) => Duration::from_secs(DEFAULT_MAX_TIME),
        };
        Some(RunLimit { after, serve: false })
    }
}

/// How results are shown and judged on this side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Output {
    /// Gb/s instead of MiB/s.
    pub report_gbits: bool,
    /// Write the run as one JSON document here.
    pub json: Option<PathBuf>,
    /// Fail below this average bandwidth (report units).
    pub min_bw: Option<f64>,
    /// Fail above this typical latency, µs.
    pub max_lat: Option<f64>,
    /// Fail below this message rate, millions per second (perftest's `-y`).
    pub min_msg_rate: Option<f64>,
    /// Print only this figure, one line per size (perftest's `--output`).
    pub only: Option<Figure>,
    /// Print every latency sample before the table (`-H` sorted, `-U` in run order).
    pub samples: Option<SampleOrder>,
    /// Print each side's CPU cost under each size (`--cpu_util`).
    pub cpu: bool,
    /// Print a row per QP or stream under each size (`--verbose`).
    pub verbose: bool,
    /// Record the run in this results store (`--store`).
    pub store: Option<PathBuf>,
}

impl Output {
    /// `--json -`: the document goes to stdout (and the table to stderr).
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_deref().is_some_and(|p| p.as_os_str() == "-")
    }
}

/// How `-H` and `-U` list a size's latency samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleOrder {
    /// `-H`: smallest first.
    Sorted,
    /// `-U`: as they came.
    Unsorted,
}

/// The one figure `--output` prints per size, as perftest's `%lf`, for scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// BW average, in the report's unit.
    Bandwidth,
    /// Messages per second, millions.
    MessageRate,
    /// Average latency, µs (perftest prints its average, not t_typical).
    Latency,
}

impl Figure {
    /// Whether a bandwidth test gives it (bandwidth, message rate), not a latency test.
    pub fn is_bandwidth(self) -> bool {
        matches!(self, Figure::Bandwidth | Figure::MessageRate)
    }
}

/// One test on this side, as the command line (or code) gives it: the spec, which side
/// this is, this side's own settings and its output.
#[derive(Clone, Debug)]
pub struct TestOptions {
    /// What both sides run.
    pub spec: TestSpec,
    /// The server to connect to (None: this side is the server).
    pub host: Option<String>,
    /// Device, port, timeout.
    pub local: Local,
    /// Output and thresholds.
    pub output: Output,
    /// The peer is perftest, spoken to in its own exchange (`--perftest`).
    pub perftest: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::rules::{tcp, TcpRequest};
    use crate::spec::{Measure, TestSpec};

    fn limit(local: &Local, spec: &TestSpec) -> Option<Duration> {
        local.run_limit(spec).map(|l| {
            assert!(!l.serve, "a side's own limit names --max-time, not serve's");
            l.after
        })
    }

    #[test]
    fn a_tests_limit_is_the_given_one_or_its_plan_and_a_timeout_a_step() {
        let local = Local { timeout: Duration::from_secs(5), ..Local::default() };
        let mut spec = tcp(Measure::Bw, &TcpRequest::default()).unwrap();
        spec.run = RunLength::Duration { secs: 10, margin_ms: 2500 };
        spec.sizes = vec![1, 2, 4];
        // 3 sizes of 10 s, and 5 s for the set-up and for each size.
        assert_eq!(limit(&local, &spec), Some(Duration::from_secs(30 + 20)));
        spec.run = RunLength::Iterations(1000);
        assert_eq!(limit(&local, &spec), Some(Duration::from_secs(DEFAULT_MAX_TIME)));
        let given = Local { max_time: Some(Duration::from_secs(7)), ..local };
        assert_eq!(limit(&given, &spec), Some(Duration::from_secs(7)));
    }
}
