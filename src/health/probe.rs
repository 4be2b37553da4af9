//! What `health` reads and measures on this host: doctor's facts of every port asked
//! for, their counters, and a loopback write_bw and write_lat per port — server and
//! client in this process, over the port's own address, pinned to its NUMA node, every
//! port at once — then the counters and facts again. [`super::judge`] decides.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::counters::{CounterChanges, CounterSelection, PortCounters, Snapshot};
use crate::doctor::checks::{self, NO_PHYSICAL_LINK};
use crate::doctor::{self, Check};
use crate::engine::{self, Side};
use crate::environment::Environment;
use crate::error::{Error, ErrorKind};
use crate::facts::device::roce_mtu_for;
use crate::facts::{self, paths, Device, HostFacts, Port};
use crate::files::SystemTree;
use crate::inventory;
use crate::qualify::threshold::LinkRate;
use crate::spec::rules::{self, RdmaRequest};
use crate::spec::{Local, Measure, TestKind, TestSpec, Verb};
use crate::transport::Backend;

use super::codes::{self, Finding};
use super::{judge, Floors, HealthOptions, HostHealth, LinkFacts, Loopback, Phases, PortHealth};

/// The bandwidth tests' message size by default: a bandwidth figure, not a message rate.
pub const BW_SIZE: u64 = 65536;
/// The loopback latency test's message size.
pub const LAT_SIZE: u64 = 2;

/// One port to test, as found before the test.
struct Target {
    nic: Device,
    port: Port,
    /// Where its loopback's control channel meets (the port's own address).
    address: Result<IpAddr, String>,
    /// Its two control ports (bandwidth, latency).
    control: u16,
    counters: Option<(PortCounters, Snapshot)>,
}

impl Target {
    fn subject(&self) -> String {
        format!("{}/{}", self.nic.name, self.port.port)
    }
}

/// This host's facts as doctor reads them, and each port's active MTU: a RoCE port's
/// from its netdev's MTU, as the kernel derives it; the verbs query's only where an
/// InfiniBand port needs it (it opens every device: 15 s under the lab's TCG, where
/// sysfs alone takes a few).
fn read_facts() -> HostFacts {
    let mut facts = HostFacts::read(&SystemTree::new(Path::new("/")));
    let netdev_mtu = |p: &Port| {
        let name = p.gids.iter().find_map(|g| g.netdev.as_deref())?;
        facts.netdev(name)?.mtu
    };
    let derived: Vec<Vec<Option<u32>>> = facts
        .nics
        .iter()
        .map(|n| n.ports.iter().map(|p| netdev_mtu(p).and_then(roce_mtu_for)).collect())
        .collect();
    for (nic, mtus) in facts.nics.iter_mut().zip(derived) {
        for (p, mtu) in nic.ports.iter_mut().zip(mtus) {
            if p.link_layer == "Ethernet" {
                p.active_mtu = mtu;
            }
        }
    }
    let infiniband = facts.nics.iter().flat_map(|n| &n.ports).any(|p| p.link_layer != "Ethernet");
    if infiniband {
        if let Ok(inv) = inventory::collect(None, Backend::Verbs) {
            doctor::overlay(&mut facts, &inv);
        }
    }
    facts
}

/// Measures and judges this host.
///
/// # Errors
/// No RDMA device, or `ports` naming one that is not here.
pub fn this_host(
    o: &HealthOptions,
    floors: &Floors,
    timeout: Duration,
) -> Result<HostHealth, Error> {
    let clock = Instant::now();
    let facts = read_facts();
    if facts.nics.is_empty() {
        return Err(Error::new(
            ErrorKind::NoDevice,
            format!(
                "health: no RDMA device in {} (rdmabench doctor says why)",
                paths::shown(paths::CLASS_INFINIBAND)
            ),
        ));
    }
    let mut targets = select(&facts, &o.ports)?;
    for (i, t) in targets.iter_mut().enumerate() {
        t.control = o.base_port.saturating_add(u16::try_from(i * 2).unwrap_or(u16::MAX));
        t.counters =
            PortCounters::open(&t.nic.name, t.port.port, &CounterSelection::All).ok().map(|c| {
                let now = c.snapshot();
                (c, now)
            });
    }
    let checks: Vec<Check> = checks::all(&facts, None, doctor::registration())
        .into_iter()
        .filter(|c| c.subject == "host" || targets.iter().any(|t| covers(t, &c.subject)))
        .collect();
    let mut findings = judge::facts(&checks);
    let facts_before = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let loopbacks: Vec<Loopback> = std::thread::scope(|s| {
        let runs: Vec<_> =
            targets.iter().map(|t| s.spawn(move || loopback(t, o, timeout))).collect();
        runs.into_iter()
            .map(|r| {
                r.join().unwrap_or_else(|_| Loopback {
                    error: Some("its thread panicked".into()),
                    ..Loopback::default()
                })
            })
            .collect()
    });
    let loopback_s = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let moved: Vec<Option<CounterChanges>> = targets
        .iter()
        .map(|t| t.counters.as_ref().map(|(c, before)| c.changes(before, &c.snapshot())))
        .collect();
    let after = read_facts();
    let rdma_core = facts::system::rdma_core_version(Path::new("/"));
    let mut ports = Vec::new();
    for ((t, mut lb), moved) in targets.iter().zip(loopbacks).zip(moved) {
        let subject = t.subject();
        let rdma_core = rdma_core.as_deref();
        let before = link_facts(&t.nic, &t.port, rdma_core);
        let after = after
            .nics
            .iter()
            .find(|n| n.name == t.nic.name)
            .and_then(|n| {
                Some(link_facts(n, n.ports.iter().find(|p| p.port == t.port.port)?, rdma_core))
            })
            .unwrap_or_else(|| LinkFacts { state: "GONE".into(), ..LinkFacts::default() });
        let link = link_rate(&t.nic, &t.port);
        lb.min_bw_gbps = floors.min_bw.and_then(|m| judge::bw_floor_gbps(m, &link));
        findings.extend(judge::link_change(&subject, &before, &after));
        findings.extend(moved.as_ref().and_then(|m| judge::counters(&subject, m, t.nic.soft)));
        findings.extend(judge::loopback(&subject, &lb, floors, &link));
        ports.push(PortHealth {
            subject,
            model: t.nic.model.clone(),
            numa_node: t.nic.numa_node,
            address: t.address.as_ref().ok().copied(),
            before,
            after,
            loopback: lb,
            counters: moved,
        });
    }
    let findings: Vec<Finding> = codes::sorted(findings);
    let env = Environment::host();
    Ok(HostHealth {
        host: env.hostname,
        kernel: env.kernel,
        healthy: findings.is_empty(),
        findings,
        ports,
        floors: floors.clone(),
        phases: Phases {
            facts_before,
            loopback: loopback_s,
            facts_after: clock.elapsed().as_secs_f64(),
            ..Phases::default()
        },
    })
}

/// Whether a check's subject (`rxe0/1`, `rxe0`) is the target's port or card.
fn covers(t: &Target, subject: &str) -> bool {
    subject == t.nic.name || subject == t.subject()
}

/// The ports `wanted` names (`DEV` or `DEV:PORT`), each once, in the host's order;
/// every port when none is named.
fn select(facts: &HostFacts, wanted: &[String]) -> Result<Vec<Target>, Error> {
    let mut picked: Vec<(usize, usize)> = Vec::new();
    for w in wanted {
        let (dev, port) = match w.split_once(':') {
            Some((d, p)) => {
                let p: u8 = p.parse().map_err(|_| {
                    Error::usage(format!("-d {w}: the port after ':' is a number (mlx4_0:2)"))
                })?;
                (d, Some(p))
            }
            None => (w.as_str(), None),
        };
        let Some(n) = facts.nics.iter().position(|n| n.name == dev) else {
            let have: Vec<&str> = facts.nics.iter().map(|n| n.name.as_str()).collect();
            return Err(Error::usage(format!(
                "-d {dev}: no such RDMA device (have {})",
                have.join(", ")
            )));
        };
        let ports = &facts.nics[n].ports;
        let found: Vec<usize> =
            (0..ports.len()).filter(|&i| port.is_none_or(|p| ports[i].port == p)).collect();
        if found.is_empty() {
            return Err(Error::usage(format!("-d {w}: {dev} has no such port")));
        }
        picked.extend(found.into_iter().map(|i| (n, i)));
    }
    if wanted.is_empty() {
        for (n, nic) in facts.nics.iter().enumerate() {
            picked.extend((0..nic.ports.len()).map(|i| (n, i)));
        }
    }
    picked.sort_unstable();
    picked.dedup();
    Ok(picked
        .into_iter()
        .map(|(n, i)| {
            let (nic, port) = (&facts.nics[n], &facts.nics[n].ports[i]);
            Target {
                nic: nic.clone(),
                port: port.clone(),
                address: address(port),
                control: 0,
                counters: None,
            }
        })
        .collect())
}

/// The address a port's loopback meets at: InfiniBand's loopback address (the queue
/// pairs find each other by LID); a RoCE port's own IPv4 address, of its RoCE v2 GID.
fn address(p: &Port) -> Result<IpAddr, String> {
    if p.link_layer != "Ethernet" {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let v2 = p.gids.iter().filter(|g| g.gid_type == "RoCE v2").find_map(|g| g.ipv4());
    v2.map(IpAddr::V4)
        .ok_or_else(|| "no IPv4 RoCE v2 GID to loop back over (see doctor's roce.gid)".into())
}

/// The facts a port's record keeps; `rdma_core`: the host's rdma-core version, which
/// the driver's label carries (`rdma_rxe, rdma-core 44.0`: what the homogeneity rule
/// compares).
pub fn link_facts(nic: &Device, p: &Port, rdma_core: Option<&str>) -> LinkFacts {
    let pcie = nic
        .pcie
        .as_ref()
        .and_then(|l| Some(format!("{} GT/s x{}", l.current_gts()?, l.current_width?)));
    let driver = nic.driver.as_ref().map(|d| match rdma_core {
        Some(v) => format!("{d}, rdma-core {v}"),
        None => d.clone(),
    });
    LinkFacts {
        state: p.state.clone(),
        phys_state: p.phys_state.clone(),
        link_layer: p.link_layer.clone(),
        rate_gbps: p.rate_gbps,
        data_gbps: if nic.soft { None } else { checks::data_gbps(p) },
        active_mtu: p.active_mtu,
        pcie,
        firmware: nic.fw_ver.clone(),
        driver,
    }
}

/// What a `% link` floor is a share of on this port.
fn link_rate(nic: &Device, p: &Port) -> LinkRate {
    if nic.soft {
        return LinkRate::NoPhysicalLink(format!("{}/{}: {NO_PHYSICAL_LINK}", nic.name, p.port));
    }
    checks::data_gbps(p).into()
}

/// The port's loopback: write_bw for `seconds`, then write_lat; skipped on a port that
/// is not ACTIVE (`PORT_DOWN` says why).
fn loopback(t: &Target, o: &HealthOptions, timeout: Duration) -> Loopback {
    if t.port.state != "ACTIVE" {
        return Loopback { skipped: Some(format!("port {}", t.port.state)), ..Loopback::default() };
    }
    let address = match &t.address {
        Ok(a) => *a,
        Err(e) => return Loopback { error: Some(e.clone()), ..Loopback::default() },
    };
    let local = |control: u16| Local {
        device: Some(t.nic.name.clone()),
        ib_port: t.port.port,
        port: control,
        bind: Some(address),
        timeout,
        quiet: true,
        numa_node: t.nic.numa_node,
        ..Local::default()
    };
    let write = |measure| TestKind { verb: Verb::Write, measure };
    let (bw_req, lat_req) = requests(o);
    let mut lb = Loopback::default();
    let bw_once = || {
        rules::rdma(write(Measure::Bw), &bw_req).and_then(|s| pair(&s, &local(t.control), address))
    };
    // A port's first connection can stall past the window (soft-RoCE under emulation
    // waited out its ACK timer: the first health of a lab boot completed nothing); a
    // second run tells a stall from a port that cannot move data.
    let bw = match bw_once() {
        Ok(r) if r.bw.is_none_or(|b| b.bytes == 0) => bw_once(),
        first => first,
    };
    match bw {
        Ok(r) if r.bw.is_some_and(|b| b.bytes > 0) => {
            lb.bw_gbps = r.bw.map(|b| b.avg_bytes_per_sec * 8.0 / 1e9);
        }
        Ok(_) => {
            lb.error = Some("write_bw: no message completed in the measured window".into());
            return lb;
        }
        Err(e) => {
            lb.error = Some(format!("write_bw: {e}"));
            return lb;
        }
    }
    let lat = rules::rdma(write(Measure::Lat), &lat_req)
        .and_then(|s| pair(&s, &local(t.control.saturating_add(1)), address));
    match lat {
        Ok(r) => lb.lat_us = r.lat.map(|l| l.t_typical_us),
        Err(e) => lb.error = Some(format!("write_lat: {e}")),
    }
    lb
}

/// The write_bw and write_lat every health test runs (a port's loopback, a ring pair).
/// A completion per message (perftest's moderation is 100): `-D`'s window counts the
/// messages completed within it, and a slow port must still complete some.
pub(super) fn requests(o: &HealthOptions) -> (RdmaRequest, RdmaRequest) {
    let bw = RdmaRequest {
        size: Some(o.size),
        duration: Some(o.seconds),
        cq_mod: Some(1),
        ..Default::default()
    };
    let lat = RdmaRequest { size: Some(LAT_SIZE), iters: Some(o.lat_iters), ..Default::default() };
    (bw, lat)
}

/// One test, server and client in two threads of this process; the client's one size.
fn pair(
    spec: &TestSpec,
    local: &Local,
    address: IpAddr,
) -> Result<crate::results::SizeResult, Error> {
    std::thread::scope(|s| {
        let server =
            s.spawn(|| engine::run(spec, &Side::Server, local, false, &mut std::io::sink()));
        let host = Side::Client { host: address.to_string() };
        let client = engine::run(spec, &host, local, false, &mut std::io::sink());
        let server = server
            .join()
            .map_err(|_| Error::new(ErrorKind::Device, "the loopback's server thread panicked"))?;
        if let Some(e) = client.error.or(server.error) {
            return Err(e);
        }
        client
            .report
            .results
            .into_iter()
            .next()
            .ok_or_else(|| Error::new(ErrorKind::Device, "the loopback measured nothing"))
    })
}
