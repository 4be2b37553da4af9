//! The Linux checks: pure judgements of [`HostFacts`]. Each check reads one screen: what
//! it looks at, the verdict, the one-line fix. docs/qualify.md lists them with the
//! reasoning behind each threshold.

use super::check::{Check, Status};
use super::firmware;
use crate::facts::cpus::cpu_ranges;
use crate::facts::decode;
use crate::facts::device::roce_mtu_for;
use crate::facts::{paths, Device, HostFacts, Port, HW_TYPE_INFINIBAND};

/// Idle states with an exit latency above this (µs) count as deep: C1E and shallower
/// wake in a few µs, C3/C6 in tens to hundreds, each time a core waits for a completion.
pub const DEEP_IDLE_US: u64 = 10;

/// What a test registers, for the memlock check: (default test, `-a` sweep), bytes.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    /// The largest default RDMA test's buffers.
    pub default: u64,
    /// A full `-a` sweep's.
    pub sweep: u64,
}

/// What `port.rate` observes on a soft device (rxe, siw): its rate is nominal.
pub const NO_PHYSICAL_LINK: &str = "soft device: no physical link";

/// The ids of the checks run per device or port, in their order.
pub const DEVICE_CHECKS: [&str; 8] = [
    "port.state",
    "port.rate",
    "roce.mtu",
    "roce.gid",
    "ipoib",
    "pcie.link",
    "numa.locality",
    "firmware",
];

/// Every Linux check; device checks only for `only` when given.
pub fn all(h: &HostFacts, only: Option<&str>, reg: Registration) -> Vec<Check> {
    let mut checks = Vec::new();
    for nic in h.nics.iter().filter(|n| only.is_none_or(|o| o == n.name)) {
        for p in &nic.ports {
            let subject = format!("{}/{}", nic.name, p.port);
            checks.push(port_state(&subject, p));
            checks.push(port_rate(&subject, nic, p));
            checks.push(roce_mtu(&subject, h, p));
            checks.push(roce_gid(&subject, p));
            checks.push(ipoib(&subject, h, nic, p));
        }
        checks.push(pcie(nic));
        checks.push(numa(h, nic));
        checks.push(firmware_check(nic));
    }
    checks.push(governor(h));
    checks.push(cstates(h));
    checks.push(memlock(h, reg));
    checks.push(hugepages(h, reg));
    checks.push(homogeneity(h));
    checks
}

fn port_state(subject: &str, p: &Port) -> Check {
    let observed = format!("{} / {}", p.state, p.phys_state);
    let expected = "ACTIVE / LinkUp";
    let ok = p.state == "ACTIVE" && p.phys_state == "LinkUp";
    let fix = match (p.state.as_str(), p.phys_state.as_str()) {
        (_, "Disabled") => {
            "the port is disabled: enable it (ibportstate … enable, or ip link set IF up for RoCE)"
        }
        ("INIT" | "ARMED", _) => {
            "no subnet manager has brought the port up: run opensm on one node of the fabric"
        }
        _ => "no link: check the cable, the transceiver and the switch port (ibstat, ethtool IF)",
    };
    let status = if ok { Status::Pass } else { Status::Fail };
    Check::new("port.state", subject, status, observed, expected, fix)
}

/// The fastest link a model's port trains at: (lanes, lane speed, Gb/s) on
/// InfiniBand; Gb/s on Ethernet.
fn capability(model: &str, link_layer: &str) -> Option<(u32, &'static str, f64)> {
    match (model, link_layer) {
        ("ConnectX-2", "InfiniBand") => Some((4, "QDR", 40.0)),
        ("ConnectX-2", "Ethernet") => Some((1, "", 10.0)),
        ("ConnectX-3" | "ConnectX-3 Pro", "InfiniBand") => Some((4, "FDR", 56.0)),
        ("ConnectX-3" | "ConnectX-3 Pro", "Ethernet") => Some((4, "", 40.0)),
        _ => None,
    }
}

fn port_rate(subject: &str, nic: &Device, p: &Port) -> Check {
    const ID: &str = "port.rate";
    if nic.soft {
        return Check::na(ID, subject, NO_PHYSICAL_LINK);
    }
    let rate = p.rate_gbps.map_or("unknown".into(), |r| format!("{r} Gb/s"));
    let observed = match (p.lanes, &p.speed) {
        (Some(l), Some(s)) if p.link_layer == "InfiniBand" => format!("{rate} ({l}X {s})"),
        _ => rate,
    };
    let Some((lanes, speed, gbps)) =
        nic.model.as_deref().and_then(|m| capability(m, &p.link_layer))
    else {
        return Check::na(ID, subject, format!("{observed}; no capability known for this model"));
    };
    if p.link_layer == "InfiniBand" {
        let expected = format!("{gbps} Gb/s ({lanes}X {speed})");
        if p.lanes.is_some_and(|l| l < lanes) {
            let fix = "a lane is down: reseat or replace the cable, then check the switch port";
            return Check::new(
                ID,
                subject,
                Status::Fail,
                format!("{observed}: width degraded"),
                expected,
                fix,
            );
        }
        if p.rate_gbps.is_some_and(|r| r < gbps) {
            let fix = format!(
                "trained below {speed}: use a {speed}-rated cable and a {speed} switch port (ibportstate, iblinkinfo)"
            );
            return Check::new(
                ID,
                subject,
                Status::Warn,
                format!("{observed}: speed degraded"),
                expected,
                fix,
            );
        }
        return Check::new(ID, subject, Status::Pass, observed, expected, "");
    }
    let expected = format!("{gbps} Gb/s Ethernet");
    match p.rate_gbps {
        Some(r) if r < gbps => Check::new(
            ID,
            subject,
            Status::Warn,
            format!("{observed}: below the card's {gbps} GbE"),
            expected,
            "check the transceiver, the cable and the switch port's speed (ethtool IF)",
        ),
        _ => Check::new(ID, subject, Status::Pass, observed, expected, ""),
    }
}

/// The netdev that carries a RoCE port (the one its GIDs name).
fn port_netdev<'a>(h: &'a HostFacts, p: &Port) -> Option<&'a crate::facts::Netdev> {
    p.gids.iter().find_map(|g| g.netdev.as_deref()).and_then(|n| h.netdev(n))
}

fn roce_mtu(subject: &str, h: &HostFacts, p: &Port) -> Check {
    const ID: &str = "roce.mtu";
    if p.link_layer != "Ethernet" {
        return Check::na(
            ID,
            subject,
            format!("{} link: the subnet manager sets the MTU", p.link_layer),
        );
    }
    let Some(nd) = port_netdev(h, p) else {
        return Check::na(ID, subject, "no netdev behind the port's GIDs");
    };
    let Some(mtu) = nd.mtu else {
        return Check::na(ID, subject, format!("{}: MTU unknown", nd.name));
    };
    let active = p.active_mtu.or_else(|| roce_mtu_for(mtu));
    let observed = format!(
        "{} MTU {mtu} → RoCE MTU {}",
        nd.name,
        active.map_or("unknown".into(), |a| a.to_string())
    );
    let expected = "RoCE MTU 4096 (netdev MTU ≥ 4200: jumbo frames)";
    if active.is_some_and(|a| a >= 4096) {
        return Check::new(ID, subject, Status::Pass, observed, expected, "");
    }
    let fix = format!("ip link set {} mtu 9000, and jumbo frames on the switch ports", nd.name);
    Check::new(ID, subject, Status::Warn, observed, expected, fix)
}

fn roce_gid(subject: &str, p: &Port) -> Check {
    const ID: &str = "roce.gid";
    if p.link_layer != "Ethernet" {
        return Check::na(
            ID,
            subject,
            format!("{} link: GIDs come from the subnet manager", p.link_layer),
        );
    }
    let v4: Vec<_> = p.gids.iter().filter_map(|g| Some((g.ipv4()?, g))).collect();
    let expected = "a RoCE v2 GID for an IPv4 address";
    if let Some((ip, g)) = v4.iter().find(|(_, g)| g.gid_type == "RoCE v2") {
        return Check::new(
            ID,
            subject,
            Status::Pass,
            format!("index {} = {ip} (RoCE v2)", g.index),
            expected,
            "",
        );
    }
    if let Some((ip, g)) = v4.first() {
        let observed = format!("index {} = {ip} ({}) only", g.index, g.gid_type);
        let fix = "RoCE v1 only is not routable: RoCE v2 needs ConnectX-3 Pro or later (mlx4_core roce_v2 support)";
        return Check::new(ID, subject, Status::Warn, observed, expected, fix);
    }
    let fix = "give the port's netdev an IPv4 address (ip addr add A.B.C.D/N dev IF)";
    Check::new(ID, subject, Status::Fail, "no IPv4 GID", expected, fix)
}

fn ipoib(subject: &str, h: &HostFacts, nic: &Device, p: &Port) -> Check {
    const ID: &str = "ipoib";
    if p.link_layer != "InfiniBand" || nic.soft {
        return Check::na(ID, subject, "not an InfiniBand port");
    }
    let expected = "connected mode, MTU 65520 (the TCP baseline over InfiniBand)";
    let found = h.netdevs.iter().find(|n| {
        n.hw_type == Some(HW_TYPE_INFINIBAND)
            && n.pci.is_some()
            && n.pci == nic.pci
            && n.dev_port.unwrap_or(0) == u32::from(p.port) - 1
    });
    let Some(n) = found else {
        let fix = "load ib_ipoib (modprobe ib_ipoib) for TCP tests over this port";
        return Check::new(ID, subject, Status::Warn, "no IPoIB interface", expected, fix);
    };
    let mode = n.mode.as_deref().unwrap_or("unknown");
    let mtu = n.mtu.unwrap_or(0);
    let observed = format!("{}: {mode} mode, MTU {mtu}", n.name);
    if mode == "connected" && mtu >= 65520 {
        return Check::new(ID, subject, Status::Pass, observed, expected, "");
    }
    let fix = format!(
        "echo connected > {}; ip link set {} mtu 65520",
        paths::shown(paths::netdev_dir(&n.name).join("mode")),
        n.name
    );
    Check::new(ID, subject, Status::Warn, observed, expected, fix)
}

/// Usable Gb/s of a PCIe link after line encoding (8b/10b up to 5 GT/s, 128b/130b from
/// 8 GT/s); transaction overhead takes a further ~15–20 %.
pub fn pcie_gbps(gts: f64, lanes: u32) -> f64 {
    let encoding = if gts < 8.0 { 0.8 } else { 128.0 / 130.0 };
    gts * f64::from(lanes) * encoding
}

/// A port's data rate, Gb/s: its lanes at their speed after line encoding (4X FDR =
/// 54.5), on Ethernet the link speed; `None` when `rate` did not say.
pub fn data_gbps(p: &Port) -> Option<f64> {
    let from_lanes = p.lanes.and_then(|lanes| {
        let lane = (1..=128u8)
            .filter_map(decode::lane_speed)
            .find(|s| Some(s.name) == p.speed.as_deref())?;
        Some(f64::from(lanes) * lane.data_gbps)
    });
    if p.link_layer == "Ethernet" {
        p.rate_gbps.or(from_lanes)
    } else {
        from_lanes
    }
}

/// The port data rate the PCIe link must carry (the fastest port).
fn port_data_gbps(nic: &Device) -> Option<f64> {
    nic.ports
        .iter()
        .filter_map(|p| {
            let lanes = p.lanes?;
            let lane = (1..=128u8)
                .filter_map(decode::lane_speed)
                .find(|s| Some(s.name) == p.speed.as_deref())?;
            let data = f64::from(lanes) * lane.data_gbps;
            Some(if p.link_layer == "Ethernet" { p.rate_gbps.unwrap_or(data) } else { data })
        })
        .max_by(f64::total_cmp)
}

fn pcie(nic: &Device) -> Check {
    const ID: &str = "pcie.link";
    let subject = &nic.name;
    let Some(l) = &nic.pcie else {
        return Check::na(
            ID,
            subject,
            if nic.soft { "soft device: no PCIe link" } else { "no PCIe link in sysfs" },
        );
    };
    let (Some(cg), Some(cw), Some(mg), Some(mw)) =
        (l.current_gts(), l.current_width, l.max_gts(), l.max_width)
    else {
        return Check::na(ID, subject, "PCIe link speed or width unreadable");
    };
    let observed = format!("{cg} GT/s x{cw} ({:.1} Gb/s)", pcie_gbps(cg, cw));
    let expected = format!("{mg} GT/s x{mw} ({:.1} Gb/s)", pcie_gbps(mg, mw));
    if cg >= mg && cw >= mw {
        return Check::new(ID, subject, Status::Pass, observed, expected, "");
    }
    let slot = pcie_gbps(cg, cw);
    let need = port_data_gbps(nic);
    let (status, why) = match need {
        Some(need) if slot < need => (Status::Fail, format!(": below the port's {need:.1} Gb/s")),
        _ => (Status::Warn, String::new()),
    };
    let fix = format!("move the card to a slot that gives {mg} GT/s x{mw} (lspci -vv: LnkSta vs LnkCap), or check the BIOS link settings");
    Check::new(ID, subject, status, format!("{observed}: degraded{why}"), expected, fix)
}

fn numa(h: &HostFacts, nic: &Device) -> Check {
    const ID: &str = "numa.locality";
    let subject = &nic.name;
    let Some(node) = nic.numa_node else {
        return Check::na(
            ID,
            subject,
            "no NUMA node for the device (soft device or one-node machine)",
        );
    };
    let Some(local) = h.numa_nodes.iter().find(|(n, _)| *n == node).map(|(_, c)| c) else {
        return Check::na(ID, subject, format!("node {node}: its CPUs are not listed"));
    };
    let Some(allowed) = &h.allowed_cpus else {
        return Check::na(ID, subject, "CPU affinity unknown");
    };
    let observed = format!(
        "device on node {node} (CPUs {}); tests may run on CPUs {}",
        cpu_ranges(local),
        cpu_ranges(allowed)
    );
    let expected = format!("tests on node {node}'s CPUs");
    let remote: Vec<usize> = allowed.iter().copied().filter(|c| !local.contains(c)).collect();
    if h.numa_nodes.len() <= 1 || remote.is_empty() {
        return Check::new(ID, subject, Status::Pass, observed, expected, "");
    }
    let fix = format!("run tests near the device: numactl --cpunodebind={node} --membind={node} rdmabench … (or taskset -c {})", cpu_ranges(local));
    Check::new(ID, subject, Status::Warn, observed, expected, fix)
}

fn firmware_check(nic: &Device) -> Check {
    const ID: &str = "firmware";
    let subject = &nic.name;
    let Some(fw) = &nic.fw_ver else {
        return Check::na(ID, subject, "no firmware version (soft device)");
    };
    let Some(model) = &nic.model else {
        return Check::na(ID, subject, format!("{fw}: model unknown"));
    };
    let Some(rule) = firmware::rule(model) else {
        return Check::na(ID, subject, format!("{model} {fw}: no minimum on record"));
    };
    let observed = format!("{model} {fw}");
    let expected = format!("≥ {} (recommended {})", rule.minimum, rule.recommended);
    let fix =
        format!("flash {} or later (mstflint / mlxup; docs/qualify.md#firmware)", rule.recommended);
    use std::cmp::Ordering::Less;
    match (firmware::compare(fw, rule.minimum), firmware::compare(fw, rule.recommended)) {
        (Some(Less), _) => Check::new(
            ID,
            subject,
            Status::Fail,
            format!("{observed}: {}", rule.why),
            expected,
            fix,
        ),
        (_, Some(Less)) => Check::new(
            ID,
            subject,
            Status::Warn,
            format!("{observed}: not the last release"),
            expected,
            fix,
        ),
        (None, _) | (_, None) => Check::new(
            ID,
            subject,
            Status::Warn,
            format!("{observed}: not a version doctor can compare"),
            expected,
            fix,
        ),
        _ => Check::new(ID, subject, Status::Pass, observed, expected, ""),
    }
}

fn governor(h: &HostFacts) -> Check {
    const ID: &str = "cpu.governor";
    if h.governors.is_empty() {
        return Check::na(ID, "host", "no cpufreq (a VM, or the BIOS owns the clock)");
    }
    let slow: Vec<&(usize, String)> =
        h.governors.iter().filter(|(_, g)| g != "performance").collect();
    let expected = "performance on every CPU";
    if slow.is_empty() {
        return Check::new(
            ID,
            "host",
            Status::Pass,
            format!("performance on {} CPUs", h.governors.len()),
            expected,
            "",
        );
    }
    let mut names: Vec<&str> = slow.iter().map(|(_, g)| g.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let cpus: Vec<usize> = slow.iter().map(|(c, _)| *c).collect();
    let observed =
        format!("{} on CPUs {} of {}", names.join("/"), cpu_ranges(&cpus), h.governors.len());
    Check::new(
        ID,
        "host",
        Status::Warn,
        observed,
        expected,
        "cpupower frequency-set -g performance (and the BIOS power profile to maximum performance)",
    )
}

fn cstates(h: &HostFacts) -> Check {
    const ID: &str = "cpu.cstates";
    if h.idle_states.is_empty() {
        return Check::na(ID, "host", "no cpuidle states (a VM, or idle=poll)");
    }
    let deep: Vec<String> = h
        .idle_states
        .iter()
        .filter(|s| s.latency_us > DEEP_IDLE_US && !s.disabled)
        .map(|s| format!("{} ({} µs)", s.name, s.latency_us))
        .collect();
    let expected = format!("no idle state deeper than {DEEP_IDLE_US} µs exit latency enabled");
    if deep.is_empty() {
        let names: Vec<&str> =
            h.idle_states.iter().filter(|s| !s.disabled).map(|s| s.name.as_str()).collect();
        return Check::new(
            ID,
            "host",
            Status::Pass,
            format!("enabled: {}", names.join(", ")),
            expected,
            "",
        );
    }
    let fix = format!("cpupower idle-set -D {DEEP_IDLE_US} (or boot with intel_idle.max_cstate=1 processor.max_cstate=1)");
    Check::new(ID, "host", Status::Warn, format!("enabled: {}", deep.join(", ")), expected, fix)
}

fn memlock(h: &HostFacts, reg: Registration) -> Check {
    const ID: &str = "memlock";
    let kib = |b: u64| format!("{} KiB", b.div_ceil(1024));
    let expected =
        format!("≥ {} (a default test), ≥ {} (a -a sweep)", kib(reg.default), kib(reg.sweep));
    if h.cap_ipc_lock {
        return Check::new(
            ID,
            "host",
            Status::Pass,
            "CAP_IPC_LOCK: registration is not limited",
            expected,
            "",
        );
    }
    if !h.memlock_known {
        let why = format!("no locked-memory limit in {}", paths::shown(paths::SELF_LIMITS));
        return Check::na(ID, "host", why);
    }
    let Some(limit) = h.memlock else {
        return Check::new(ID, "host", Status::Pass, "unlimited", expected, "");
    };
    let observed = kib(limit);
    let fix = "ulimit -l unlimited, or for every login: echo '* - memlock unlimited' > /etc/security/limits.d/rdma.conf";
    let status = if limit < reg.default {
        Status::Fail
    } else if limit < reg.sweep {
        Status::Warn
    } else {
        Status::Pass
    };
    Check::new(ID, "host", status, observed, expected, fix)
}

/// Huge pages matter only to `--use_hugepages`: none reserved is N/A, too few free for
/// a default test's buffers a warning.
fn hugepages(h: &HostFacts, reg: Registration) -> Check {
    const ID: &str = "hugepages";
    let Some(hp) = h.hugepages else {
        let why = format!("no HugePages_Total in {}", paths::shown(paths::PROC_MEMINFO));
        return Check::na(ID, "host", why);
    };
    let mib = |b: u64| format!("{} MiB", b.div_ceil(1 << 20));
    if hp.total == 0 {
        return Check::na(ID, "host", "none reserved (only --use_hugepages uses them)");
    }
    let free = hp.free.saturating_mul(hp.size);
    let observed =
        format!("{} of {} pages of {} KiB free ({})", hp.free, hp.total, hp.size / 1024, mib(free));
    let expected = format!("≥ {} free for --use_hugepages (a default test)", mib(reg.default));
    if free >= reg.default {
        return Check::new(ID, "host", Status::Pass, observed, expected, "");
    }
    let pages = reg.default.div_ceil(hp.size.max(1)) + hp.total - hp.free;
    let fix = format!("sysctl vm.nr_hugepages={pages}");
    Check::new(ID, "host", Status::Warn, observed, expected, fix)
}

fn homogeneity(h: &HostFacts) -> Check {
    const ID: &str = "nic.homogeneity";
    // The active ports of physical NICs, as SMB Multichannel would pair them.
    let ports: Vec<(String, &Device, &Port)> = h
        .nics
        .iter()
        .flat_map(|n| n.ports.iter().map(move |p| (format!("{}/{}", n.name, p.port), n, p)))
        .filter(|(_, _, p)| p.state == "ACTIVE")
        .collect();
    if ports.len() < 2 {
        return Check::na(
            ID,
            "host",
            format!("{} active RDMA port(s): nothing to compare", ports.len()),
        );
    }
    let mtu = |p: &Port| {
        p.active_mtu.or_else(|| {
            port_netdev(h, p)
                .and_then(|n| n.mtu)
                .and_then(roce_mtu_for)
                .filter(|_| p.link_layer == "Ethernet")
        })
    };
    let describe = |(name, n, p): &(String, &Device, &Port)| {
        format!(
            "{name}: {} {}, {} Gb/s, MTU {}, fw {}",
            n.model.as_deref().unwrap_or("?"),
            p.link_layer,
            p.rate_gbps.map_or("?".into(), |r| r.to_string()),
            mtu(p).map_or("?".into(), |m| m.to_string()),
            n.fw_ver.as_deref().unwrap_or("-")
        )
    };
    let first = &ports[0];
    let mut differ: Vec<&str> = Vec::new();
    for other in &ports[1..] {
        if other.2.rate_gbps != first.2.rate_gbps {
            differ.push("rate");
        }
        if mtu(other.2) != mtu(first.2) {
            differ.push("MTU");
        }
        if other.1.model == first.1.model && other.1.fw_ver != first.1.fw_ver {
            differ.push("firmware");
        }
        if other.2.link_layer != first.2.link_layer || other.1.node_type != first.1.node_type {
            differ.push("RDMA capability (link layer, transport)");
        }
    }
    differ.sort_unstable();
    differ.dedup();
    let observed: Vec<String> = ports.iter().map(describe).collect();
    let expected = "the same rate, MTU, firmware and RDMA capability on every port (SMB Multichannel pairs alike NICs)";
    if differ.is_empty() {
        return Check::new(ID, "host", Status::Pass, observed.join("; "), expected, "");
    }
    let observed = format!("{} differ: {}", differ.join(", "), observed.join("; "));
    let fix =
        "match the ports' speed, MTU and firmware, or run multi-rail tests only over alike ports";
    Check::new(ID, "host", Status::Warn, observed, expected, fix)
}
