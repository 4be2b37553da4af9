//! `health` across a job, one rank per host under mpirun or srun (cargo feature `mesh`):
//! every rank tests its own host at once ([`super::probe`]), then meets the next rank in
//! a ring — write_bw both ways and write_lat, in 2 or 3 rounds whatever the job's size
//! ([`job::ring_rounds`]) — and sends its record to rank 0, which judges the job
//! ([`job::judge`]: homogeneity, the peer-relative floor, the neighbours), prints every
//! host's line and tells the others the exit status. MPI carries the bootstrap only: the
//! endpoints, a barrier per round, the records; the tests run over the ports under test.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::codes::{self, Code, Finding};
use super::job::{self, RingPair};
use super::{probe, Floors, HealthOptions, HealthReport, HostHealth, Phases};
use crate::engine::{self, Side};
use crate::error::{Error, ErrorKind};
use crate::mesh::bootstrap::Bootstrap;
use crate::spec::rules;
use crate::spec::{Local, Measure, TestKind, Verb};

/// Where a rank meets its ring neighbours: its first ACTIVE port's address and device.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Endpoint {
    address: IpAddr,
    device: String,
    port: u8,
}

/// What a rank sends rank 0: its host's record and the ring pairs it led.
#[derive(Serialize, Deserialize)]
struct Record {
    host: HostHealth,
    ring: Vec<RingPair>,
}

/// The ring's control ports start this far above the loopbacks' base port.
const RING_PORT_OFFSET: u16 = 200;

/// Runs this rank's part of a job's health; the exit status is rank 0's verdict.
///
/// # Errors
/// Rank 0's outputs that cannot be written.
pub fn run(
    boot: &impl Bootstrap,
    o: &HealthOptions,
    floors: &Floors,
    out: &mut dyn std::io::Write,
) -> Result<u8, Error> {
    let (rank, n) = (boot.rank(), boot.size());
    // Rank 0's outputs only: the other hosts may not have its folders.
    if let (0, Some(path)) = (rank, &o.json) {
        if let Err(e) = crate::report::prepare_json(path) {
            eprintln!("rdmabench health: rank 0: {e}");
            boot.abort(2);
        }
    }
    if rank == 0 {
        if let Err(e) = super::check_store(o) {
            eprintln!("rdmabench health: rank 0: {e}");
            boot.abort(2);
        }
    }
    let started = crate::stamp::utc_now();
    let timeout = Duration::from_secs(o.timeout);
    let host = probe::this_host(o, floors, timeout).unwrap_or_else(|e| failed_host(boot, &e));
    let mine = endpoint(&host);
    let gathered = boot.all_gather(&serde_json::to_vec(&mine).unwrap_or_default());
    let endpoints: Vec<Option<Endpoint>> =
        gathered.iter().map(|b| serde_json::from_slice(b).ok().flatten()).collect();
    let clock = Instant::now();
    let mut led = Vec::new();
    for round in job::ring_rounds(n) {
        for &(a, b) in &round {
            if a == rank || b == rank {
                let pair = meet(a, b, rank, &endpoints, o, timeout);
                if a == rank {
                    led.push(pair);
                }
            }
        }
        // Every pair of the round ends before the next starts. (A byte each: an
        // all-gather of nothing at all is MPI_ERR_ARG in Open MPI's Allgatherv.)
        boot.all_gather(&[0]);
    }
    let mut host = host;
    host.phases.ring = clock.elapsed().as_secs_f64();
    let own_host = host.host.clone();
    let record = Record { host, ring: led };
    let payload = serde_json::to_vec(&record).unwrap_or_default();
    if rank != 0 {
        boot.send_done(&payload);
        return Ok(wait_go(boot, o, record.host));
    }
    let clock = Instant::now();
    let mut records: Vec<Option<Record>> = (0..n).map(|_| None).collect();
    records[0] = Some(record);
    let deadline = Instant::now() + timeout * 4 + Duration::from_secs(30);
    while records.iter().any(Option::is_none) && Instant::now() < deadline {
        match boot.poll_done() {
            Some((r, bytes)) if r < n => records[r] = serde_json::from_slice(&bytes).ok(),
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let gather = clock.elapsed().as_secs_f64();
    let mut hosts = Vec::with_capacity(n);
    let mut ring = Vec::new();
    for (r, rec) in records.into_iter().enumerate() {
        match rec {
            Some(rec) => {
                hosts.push(rec.host);
                ring.extend(rec.ring);
            }
            None => hosts.push(silent(r, floors)),
        }
    }
    for (i, f) in job::judge(&hosts, &ring, rule(o)) {
        hosts[i].findings.push(f);
    }
    for h in &mut hosts {
        h.findings = codes::sorted(std::mem::take(&mut h.findings));
        h.healthy = h.findings.is_empty();
        h.phases.gather = gather;
    }
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    let report = HealthReport {
        schema_version: crate::report::SCHEMA_VERSION,
        kind: "health".into(),
        started,
        hosts,
        ring,
    };
    let written = super::finish(&report, o, out);
    let code = if written.is_err() {
        crate::error::EXIT_ERROR
    } else if report.healthy() {
        0
    } else {
        crate::error::EXIT_VERDICT
    };
    // The status, and with --prometheus every host's findings: each rank writes its own.
    let mut go = vec![code];
    if o.prometheus.is_some() {
        let findings: Vec<(&str, &Vec<Finding>)> =
            report.hosts.iter().map(|h| (h.host.as_str(), &h.findings)).collect();
        go.extend(serde_json::to_vec(&findings).unwrap_or_default());
    }
    boot.send_go(&go);
    let mine = report.hosts.iter().find(|h| h.host == own_host);
    let prometheus = match (&o.prometheus, mine) {
        (Some(path), Some(h)) => super::write_prometheus(path, h),
        _ => Ok(()),
    };
    written.and(prometheus).map(|()| code)
}

/// The flags' peer-relative rule.
fn rule(o: &HealthOptions) -> job::PeerRule {
    job::PeerRule {
        fraction: o.peer_fraction,
        lat_ratio: o.lat_ratio,
        lat_floor_us: o.lat_floor_us,
    }
}

/// A rank's exit status from rank 0 (2 if it never says), and with --prometheus its
/// host's file, with the job's findings.
fn wait_go(boot: &impl Bootstrap, o: &HealthOptions, mut host: HostHealth) -> u8 {
    let go = loop {
        if let Some(go) = boot.poll_go() {
            break go;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let code = go.first().copied().unwrap_or(crate::error::EXIT_ERROR);
    if let Some(path) = &o.prometheus {
        let all: Vec<(String, Vec<Finding>)> =
            serde_json::from_slice(go.get(1..).unwrap_or_default()).unwrap_or_default();
        if let Some((_, findings)) = all.into_iter().find(|(h, _)| *h == host.host) {
            host.healthy = findings.is_empty();
            host.findings = findings;
        }
        if let Err(e) = super::write_prometheus(path, &host) {
            eprintln!("rdmabench health: rank {}: {e}", boot.rank());
            return crate::error::EXIT_ERROR;
        }
    }
    code
}

/// A host whose own test could not run: named with the error.
fn failed_host(boot: &impl Bootstrap, e: &Error) -> HostHealth {
    let env = crate::environment::Environment::host();
    HostHealth {
        host: env.hostname,
        kernel: env.kernel,
        healthy: false,
        findings: vec![Finding::new(Code::NotRun, "host", format!("rank {}: {e}", boot.rank()))],
        ports: Vec::new(),
        floors: Floors { min_bw: None, max_lat: None, source: String::new() },
        phases: Phases::default(),
    }
}

/// A rank that never reported.
fn silent(rank: usize, floors: &Floors) -> HostHealth {
    HostHealth {
        host: format!("rank {rank}"),
        kernel: String::new(),
        healthy: false,
        findings: vec![Finding::new(Code::NotRun, "host", "its record never reached rank 0")],
        ports: Vec::new(),
        floors: floors.clone(),
        phases: Phases::default(),
    }
}

/// The first ACTIVE port whose loopback found an address.
fn endpoint(host: &HostHealth) -> Option<Endpoint> {
    host.ports.iter().find(|p| p.before.state == "ACTIVE").and_then(|p| {
        let (device, port) = p.subject.split_once('/')?;
        Some(Endpoint { address: p.address?, device: device.into(), port: port.parse().ok()? })
    })
}

/// Ranks `a` and `b` meet: write_bw a→b, then b→a, then write_lat; `rank` is one of them.
fn meet(
    a: usize,
    b: usize,
    rank: usize,
    endpoints: &[Option<Endpoint>],
    o: &HealthOptions,
    timeout: Duration,
) -> RingPair {
    let mut pair = RingPair { a, b, ..RingPair::default() };
    let (Some(Some(ea)), Some(Some(eb))) = (endpoints.get(a), endpoints.get(b)) else {
        pair.error = Some("no ACTIVE port with an address on one end".into());
        return pair;
    };
    let me = if rank == a { ea } else { eb };
    let base = o.base_port.saturating_add(RING_PORT_OFFSET);
    let local = |control: u16| Local {
        device: Some(me.device.clone()),
        ib_port: me.port,
        port: control,
        bind: Some(me.address),
        timeout,
        quiet: true,
        ..Local::default()
    };
    let bw = TestKind { verb: Verb::Write, measure: Measure::Bw };
    let lat = TestKind { verb: Verb::Write, measure: Measure::Lat };
    let (bw_req, lat_req) = probe::requests(o);
    // (kind, request, control port offset, the client's rank, the server's endpoint)
    let tests = [(bw, &bw_req, 0, a, eb), (bw, &bw_req, 1, b, ea), (lat, &lat_req, 2, a, eb)];
    for (i, (kind, req, offset, client, server)) in tests.into_iter().enumerate() {
        let result = rules::rdma(kind, req).and_then(|spec| {
            let side = if rank == client {
                Side::Client { host: server.address.to_string() }
            } else {
                Side::Server
            };
            let outcome =
                engine::run(&spec, &side, &local(base + offset), false, &mut std::io::sink());
            if let Some(e) = outcome.error {
                return Err(e);
            }
            outcome
                .report
                .results
                .into_iter()
                .next()
                .ok_or_else(|| Error::new(ErrorKind::Device, "the ring test measured nothing"))
        });
        match result {
            Ok(r) if i < 2 => {
                pair.bw_gbps[i] =
                    r.bw.filter(|b| b.bytes > 0).map(|b| b.avg_bytes_per_sec * 8.0 / 1e9)
            }
            Ok(r) => pair.lat_us = [r.lat.as_ref().map(|l| l.t_typical_us); 2],
            Err(e) => {
                pair.error = Some(e.to_string());
                break;
            }
        }
    }
    pair
}
