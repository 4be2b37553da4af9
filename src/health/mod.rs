//! `rdmabench health`: every RDMA port of this host at once, judged in seconds (issue
//! #58, docs/health.md). Per port: the facts before (doctor's checks), a loopback
//! write bandwidth and latency test pinned to the port's NUMA node, the counters of
//! trouble before and after, and the facts again after; each problem a [`Finding`]
//! with a stable [`Code`], and one line per host: `HOST | Healthy` or
//! `HOST | CODE …`. [`probe`] reads and measures, [`judge`] decides, [`output`] prints.

pub mod across;
pub mod codes;
pub mod formats;
pub mod job;
pub mod judge;
pub mod output;
pub mod probe;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use codes::{Code, Finding};

use crate::counters::CounterChanges;
use crate::error::Error;
use crate::qualify::threshold::{Bandwidth, Latency};

/// What `rdmabench health` is asked.
#[derive(Clone, Debug)]
pub struct HealthOptions {
    /// The ports to test: `DEVICE` (all its ports) or `DEVICE:PORT`; empty: every port
    /// of every device.
    pub ports: Vec<String>,
    /// The first control-channel TCP port of the loopbacks (two per RDMA port).
    pub base_port: u16,
    /// Seconds of loopback bandwidth per port.
    pub seconds: u64,
    /// The bandwidth tests' message size, bytes.
    pub size: u64,
    /// Round trips of loopback latency per port.
    pub lat_iters: u64,
    /// Seconds to wait at each step of a loopback.
    pub timeout: u64,
    /// A qualify profile (built-in name or file) whose `write_bw` `min_bw` and
    /// `write_lat` `max_lat_typical` are the absolute floors; `None`: the defaults.
    pub profile: Option<String>,
    /// Also write the report as JSON (`-`: stdout, the text then on stderr).
    pub json: Option<PathBuf>,
    /// JUnit XML (a testcase per host) to this file (`-`: stdout).
    pub junit: Option<PathBuf>,
    /// CSV (a row per finding) to this file (`-`: stdout).
    pub csv: Option<PathBuf>,
    /// The unhealthy hosts, a name a line, to this file (`-`: stdout).
    pub hostlist: Option<PathBuf>,
    /// Print Slurm's drain lines for the unhealthy hosts (never run).
    pub drain: bool,
    /// Each host's Prometheus text-format file, at this path on that host.
    pub prometheus: Option<PathBuf>,
    /// Record every host's result in this results store (`None`: `--no-store`).
    pub store: Option<PathBuf>,
    /// Across a job: a port below this fraction of its peers' median loopback, or a
    /// host both of whose ring pairs are, is named.
    pub peer_fraction: f64,
    /// Across a job: a ring pair's latency is slow past this many times its peers'
    /// median…
    pub lat_ratio: f64,
    /// …and this many µs above it.
    pub lat_floor_us: f64,
}

impl Default for HealthOptions {
    fn default() -> Self {
        HealthOptions {
            ports: Vec::new(),
            base_port: DEFAULT_BASE_PORT,
            seconds: 2,
            size: probe::BW_SIZE,
            lat_iters: 1000,
            timeout: 10,
            profile: None,
            json: None,
            junit: None,
            csv: None,
            hostlist: None,
            drain: false,
            prometheus: None,
            store: None,
            peer_fraction: DEFAULT_PEER_FRACTION,
            lat_ratio: DEFAULT_LAT_RATIO,
            lat_floor_us: DEFAULT_LAT_FLOOR_US,
        }
    }
}

/// The share of the job's median below which a port or a host is named.
pub const DEFAULT_PEER_FRACTION: f64 = 0.8;

/// How many times the job's median ring latency a pair must take to be slow: mesh's
/// `--lat-ratio` (docs/health.md#across-a-job-mpirun-srun).
pub const DEFAULT_LAT_RATIO: f64 = 3.0;

/// The µs above the job's median ring latency below which a pair is not slow, whatever
/// the ratio: mesh's `--lat-floor`.
pub const DEFAULT_LAT_FLOOR_US: f64 = 50.0;

/// The loopbacks' first control port, by default (beside `serve`'s 18520).
pub const DEFAULT_BASE_PORT: u16 = 18600;

/// The default floor: loopback write bandwidth at 90 % of the port's data rate (after
/// line encoding), as Azure's HPC checks hold a 200G port to 190 Gb/s.
pub const DEFAULT_MIN_BW: Bandwidth = Bandwidth::OfLink(90.0);

/// What `health --json` writes (docs/json.md#health).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HealthReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// Always `health`.
    pub kind: String,
    /// When the run started, UTC.
    pub started: String,
    /// Every host, sorted by name (one alone outside a job).
    pub hosts: Vec<HostHealth>,
    /// Across a job: the ring's pairs (host indices in the job's rank order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ring: Vec<job::RingPair>,
}

impl HealthReport {
    /// Whether every host is healthy.
    pub fn healthy(&self) -> bool {
        self.hosts.iter().all(|h| h.healthy)
    }
}

/// One host's verdict and what it rests on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostHealth {
    /// Host name.
    pub host: String,
    /// Kernel release (the homogeneity rule compares it).
    pub kernel: String,
    /// No finding.
    pub healthy: bool,
    /// What is wrong, first cause first.
    pub findings: Vec<Finding>,
    /// Every port tested.
    pub ports: Vec<PortHealth>,
    /// The floors the loopbacks were judged against.
    pub floors: Floors,
    /// Seconds each phase took on this host.
    pub phases: Phases,
}

/// Seconds per phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Reading the facts and counters before.
    pub facts_before: f64,
    /// Every port's loopbacks (at once).
    pub loopback: f64,
    /// Reading the counters and facts after.
    pub facts_after: f64,
    /// Across a job: the ring's rounds.
    #[serde(default)]
    pub ring: f64,
    /// Across a job: rank 0 gathering the records.
    #[serde(default)]
    pub gather: f64,
}

/// One port's record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PortHealth {
    /// `DEVICE/PORT`.
    pub subject: String,
    /// Adapter generation, where known.
    pub model: Option<String>,
    /// The NUMA node the loopback ran on (`None`: not pinned, the device has none).
    pub numa_node: Option<u32>,
    /// The address its loopback (and a job's ring) met at.
    pub address: Option<std::net::IpAddr>,
    /// The port before the test.
    pub before: LinkFacts,
    /// And after it.
    pub after: LinkFacts,
    /// The loopback's figures.
    pub loopback: Loopback,
    /// Every counter that moved over the test (`None`: the port keeps none).
    pub counters: Option<CounterChanges>,
}

/// What the port was, as the homogeneity and link-change rules compare it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkFacts {
    /// `ACTIVE`, `DOWN`, …
    pub state: String,
    /// `LinkUp`, `Disabled`, …
    pub phys_state: String,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: String,
    /// Nominal Gb/s.
    pub rate_gbps: Option<f64>,
    /// Data rate after line encoding, Gb/s (`None`: no physical link, or unknown).
    pub data_gbps: Option<f64>,
    /// Active MTU, bytes.
    pub active_mtu: Option<u32>,
    /// The card's PCIe link, `8 GT/s x8`.
    pub pcie: Option<String>,
    /// Firmware version.
    pub firmware: Option<String>,
    /// The kernel driver and the rdma-core (user-space provider) version, as a test's
    /// environment reports them: `rdma_rxe, rdma-core 44.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

/// A port's loopback figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Loopback {
    /// write_bw, 64 KiB messages, Gb/s.
    pub bw_gbps: Option<f64>,
    /// write_lat, 2 bytes, typical (median) one-way µs.
    pub lat_us: Option<f64>,
    /// Why it did not run or finish.
    pub error: Option<String>,
    /// Why it was not started (a port not ACTIVE: `port DOWN`).
    pub skipped: Option<String>,
    /// The bandwidth floor it was held to, Gb/s (`None`: none applied).
    pub min_bw_gbps: Option<f64>,
}

/// The absolute floors and where they came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Floors {
    /// Least loopback write bandwidth (64 KiB).
    pub min_bw: Option<Bandwidth>,
    /// Most loopback write latency, typical µs (2 bytes).
    pub max_lat: Option<Latency>,
    /// `defaults` or `profile NAME`.
    pub source: String,
}

impl Floors {
    /// The profile's floors, or the defaults.
    ///
    /// # Errors
    /// A profile that cannot be loaded, or one without a `write_bw` or `write_lat` test.
    pub fn load(profile: Option<&str>) -> Result<Floors, Error> {
        let Some(name) = profile else {
            return Ok(Floors {
                min_bw: Some(DEFAULT_MIN_BW),
                max_lat: None,
                source: "defaults".into(),
            });
        };
        let p = crate::qualify::profile::load(name)?;
        let limits = |id: &str| {
            p.tests
                .iter()
                .find(|t| t.specs.first().is_some_and(|s| s.kind.id() == id))
                .map(|t| &t.limits)
        };
        let (bw, lat) = (limits("write_bw"), limits("write_lat"));
        if bw.is_none() && lat.is_none() {
            return Err(Error::usage(format!(
                "--profile {name}: no write_bw or write_lat test, whose min_bw and max_lat_typical health takes"
            )));
        }
        Ok(Floors {
            min_bw: bw.and_then(|l| l.min_bw),
            max_lat: lat.and_then(|l| l.max_lat_typical),
            source: format!("profile {}", p.name),
        })
    }
}

/// `rdmabench health` on this host: measures, judges, prints; 0 healthy, 1 not.
///
/// # Errors
/// Bad options, no RDMA device, an output that cannot be written.
pub fn command(options: &HealthOptions, out: &mut dyn Write) -> Result<u8, Error> {
    let floors = Floors::load(options.profile.as_deref())?;
    let o = options;
    crate::files::one_stdout(&[
        ("--json", o.json.as_deref()),
        ("--junit", o.junit.as_deref()),
        ("--csv", o.csv.as_deref()),
        ("--hostlist", o.hostlist.as_deref()),
    ])?;
    if !(options.peer_fraction > 0.0 && options.peer_fraction < 1.0) {
        return Err(Error::usage("--peer-fraction: a fraction between 0 and 1 (0.8: 80 %)"));
    }
    if !(options.lat_ratio.is_finite() && options.lat_ratio >= 1.0) {
        return Err(Error::usage(format!(
            "--lat-ratio {}: times the median, 1 or more",
            options.lat_ratio
        )));
    }
    if !(options.lat_floor_us.is_finite() && options.lat_floor_us >= 0.0) {
        return Err(Error::usage(format!(
            "--lat-floor {}: microseconds, 0 or more",
            options.lat_floor_us
        )));
    }
    #[cfg(feature = "mesh")]
    if crate::mesh::bootstrap::Mpi::launched() {
        let boot = crate::mesh::bootstrap::Mpi::init()?;
        return across::run(&boot, options, &floors, out);
    }
    if let Some(path) = &options.json {
        crate::report::prepare_json(path)?;
    }
    check_store(options)?;
    let started = crate::stamp::utc_now();
    let host = probe::this_host(options, &floors, Duration::from_secs(options.timeout))?;
    let report = HealthReport {
        schema_version: crate::report::SCHEMA_VERSION,
        kind: "health".into(),
        started,
        hosts: vec![host],
        ring: Vec::new(),
    };
    finish(&report, options, out)?;
    if let Some(path) = &options.prometheus {
        write_prometheus(path, &report.hosts[0])?;
    }
    Ok(if report.healthy() { 0 } else { crate::error::EXIT_VERDICT })
}

/// The results store, opened before anything runs (as qualify does), so one that cannot
/// be written is refused at once rather than after the test.
///
/// # Errors
/// [`crate::store::Store::open`]'s refusal: one line naming the file and the way out.
pub fn check_store(o: &HealthOptions) -> Result<(), Error> {
    match &o.store {
        Some(path) => crate::store::Store::open(path).map(drop),
        None => Ok(()),
    }
}

/// The outputs of a finished report (rank 0's in a job): text, JSON, JUnit, CSV, the
/// hostlist, the drain lines, the store.
///
/// # Errors
/// An output that cannot be written, a store that refuses the runs.
pub fn finish(report: &HealthReport, o: &HealthOptions, out: &mut dyn Write) -> Result<(), Error> {
    output::write(report, o.json.as_deref(), out)?;
    let seconds = report
        .hosts
        .iter()
        .map(|h| {
            h.phases.facts_before
                + h.phases.loopback
                + h.phases.facts_after
                + h.phases.ring
                + h.phases.gather
        })
        .fold(0.0, f64::max);
    for (flag, path, text) in [
        ("--junit", &o.junit, formats::junit(report, seconds)),
        ("--csv", &o.csv, formats::csv(report)),
        ("--hostlist", &o.hostlist, formats::hostlist(report)),
    ] {
        if let Some(path) = path {
            crate::files::write_output(flag, path, &text)?;
        }
    }
    if o.drain {
        out.write_all(formats::drain(report).as_bytes())
            .map_err(|e| Error::io(format!("writing output: {e}")))?;
    }
    if let Some(path) = &o.store {
        let mut store = crate::store::Store::open(path)?;
        for h in &report.hosts {
            store.record(&stored(report, h))?;
        }
    }
    Ok(())
}

/// One host's run as the store keeps it: its own report, its loopback figures as points.
fn stored(report: &HealthReport, h: &HostHealth) -> crate::store::NewRun {
    let alone = HealthReport { hosts: vec![h.clone()], ring: Vec::new(), ..report.clone() };
    let first = h.ports.first();
    let mut points = Vec::new();
    for p in &h.ports {
        for (point, figure, unit, value) in [
            (format!("{} write_bw 64K", p.subject), "BW average", "Gb/s", p.loopback.bw_gbps),
            (format!("{} write_lat 2", p.subject), "t_typical", "us", p.loopback.lat_us),
        ] {
            points.push(crate::store::PointRow {
                point,
                figure: figure.into(),
                unit: unit.into(),
                median: value,
                runs: u32::from(value.is_some()),
            });
        }
    }
    crate::store::NewRun {
        kind: "health".into(),
        started: report.started.clone(),
        host: h.host.clone(),
        device: first.map(|p| p.subject.split('/').next().unwrap_or_default().to_string()),
        firmware: first.and_then(|p| p.before.firmware.clone()),
        profile: "health".into(),
        server: None,
        pass: h.healthy,
        report: crate::report::to_json(&alone),
        points,
    }
}

/// This host's Prometheus file, written whole (beside, then renamed: the collector
/// never reads half a file).
///
/// # Errors
/// The file cannot be written.
pub fn write_prometheus(path: &std::path::Path, h: &HostHealth) -> Result<(), Error> {
    crate::files::write_whole(path, formats::prometheus(h).as_bytes())
        .map_err(|e| Error::io(format!("--prometheus {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_come_from_a_profiles_write_tests_or_the_defaults() {
        let d = Floors::load(None).unwrap();
        assert_eq!(
            (d.min_bw, d.max_lat, d.source.as_str()),
            (Some(DEFAULT_MIN_BW), None, "defaults")
        );
        let q = Floors::load(Some("quick")).unwrap();
        assert_eq!(q.min_bw, Some(Bandwidth::OfLink(90.0)));
        assert_eq!(q.source, "profile quick");
        let dir =
            std::env::temp_dir().join(format!("rdmabench-health-floors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let own = dir.join("own.toml");
        std::fs::write(
            &own,
            "[[test]]\ntest = \"write_bw\"\nsizes = [\"64K\"]\nmin_bw = \"40 Gb/s\"\n\
             [[test]]\ntest = \"write_lat\"\nsizes = [2]\nmax_lat_typical = \"3 us\"\n",
        )
        .unwrap();
        let o = Floors::load(own.to_str()).unwrap();
        assert_eq!(o.min_bw, Some(Bandwidth::Absolute(40e9 / 8.0)));
        assert_eq!(o.max_lat, Some(Latency(3.0)));
        let tcp = dir.join("tcp.toml");
        std::fs::write(&tcp, "[[test]]\ntest = \"tcp_bw\"\nsizes = [\"128K\"]\n").unwrap();
        let e = Floors::load(tcp.to_str()).unwrap_err();
        assert!(e.message.contains("no write_bw or write_lat test"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
