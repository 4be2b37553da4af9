//! The NetworkDirect checks (`doctor --backend nd`, the default on Windows): a provider
//! in the Winsock catalog, NetworkDirect handing out adapters, each adapter's link
//! speed, and whether the adapters match (SMB Multichannel pairs alike NICs). The facts
//! come from the same discovery `devices --backend nd` uses; the judging is pure, so
//! recorded facts test it on any host.

use std::net::IpAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::check::{Check, Status};
use crate::environment::{DeviceEnvironment, Environment, InterfaceEnvironment};
use crate::error::Error;
use crate::inventory::{self, InventoryError};

/// What NetworkDirect shows of this host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NdFacts {
    /// Providers found in the Winsock catalog (name and DLL).
    pub providers: Vec<String>,
    /// Why catalog entries were passed over (DLL missing, no `DllGetClassObject`, …).
    pub problems: Vec<String>,
    /// The adapters the providers opened.
    pub adapters: Vec<NdAdapterFacts>,
}

/// One adapter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NdAdapterFacts {
    /// Its first IP address (what `-d` takes with `--backend nd`).
    pub name: String,
    /// The provider that opened it.
    pub provider: String,
    /// Adapter generation from its PCI ids, where known.
    pub model: Option<String>,
    /// The interface's link speed, Gb/s, where the OS reports it.
    pub link_gbps: Option<f64>,
}

/// Every NetworkDirect check; adapter checks only for `only` (an IP) when given.
pub fn checks(f: &NdFacts, only: Option<&str>) -> Vec<Check> {
    let mut out = Vec::new();
    let listed = if f.providers.is_empty() { "none".to_string() } else { f.providers.join("; ") };
    out.push(if f.providers.is_empty() {
        let seen = if f.problems.is_empty() { "no NetworkDirect provider in the Winsock catalog".into() } else { f.problems.join("; ") };
        Check::new(
            "nd.provider",
            "host",
            Status::Fail,
            seen,
            "a NetworkDirect v2 provider",
            "install the adapter's driver with NetworkDirect (WinOF for ConnectX-2/3, WinOF-2 later), then Get-NetAdapterRdma",
        )
    } else {
        Check::new("nd.provider", "host", Status::Pass, listed, "a NetworkDirect v2 provider", "")
    });
    out.push(match (f.providers.is_empty(), f.adapters.is_empty()) {
        (true, _) => Check::na("nd.enabled", "host", "no provider to ask"),
        (false, true) => Check::new(
            "nd.enabled",
            "host",
            Status::Fail,
            "the providers open no adapter",
            "NetworkDirect enabled, RDMA on at least one adapter",
            "Set-NetOffloadGlobalSetting -NetworkDirect Enabled; Enable-NetAdapterRdma -Name ADAPTER",
        ),
        (false, false) => Check::new(
            "nd.enabled",
            "host",
            Status::Pass,
            format!("{} adapter(s) with RDMA", f.adapters.len()),
            "NetworkDirect enabled, RDMA on at least one adapter",
            "",
        ),
    });
    for a in f.adapters.iter().filter(|a| only.is_none_or(|o| o == a.name)) {
        let model = a.model.as_deref().unwrap_or("adapter");
        out.push(match a.link_gbps {
            None => Check::na("nd.link", &a.name, format!("{model}: link speed not reported")),
            Some(g) => Check::new(
                "nd.link",
                &a.name,
                Status::Pass,
                format!("{model} at {g} Gb/s"),
                "link up",
                "",
            ),
        });
    }
    out.push(homogeneity(&f.adapters));
    out
}

fn homogeneity(adapters: &[NdAdapterFacts]) -> Check {
    const ID: &str = "nic.homogeneity";
    if adapters.len() < 2 {
        return Check::na(ID, "host", format!("{} adapter(s): nothing to compare", adapters.len()));
    }
    let describe = |a: &NdAdapterFacts| {
        format!(
            "{}: {} {}",
            a.name,
            a.model.as_deref().unwrap_or("?"),
            a.link_gbps.map_or("? Gb/s".into(), |g| format!("{g} Gb/s"))
        )
    };
    let all: Vec<String> = adapters.iter().map(describe).collect();
    let expected =
        "the same model and link speed on every RDMA adapter (SMB Multichannel pairs alike NICs)";
    let first = &adapters[0];
    let mut differ = Vec::new();
    if adapters.iter().any(|a| a.link_gbps != first.link_gbps) {
        differ.push("link speed");
    }
    if adapters.iter().any(|a| a.model != first.model) {
        differ.push("model");
    }
    if differ.is_empty() {
        return Check::new(ID, "host", Status::Pass, all.join("; "), expected, "");
    }
    Check::new(
        ID,
        "host",
        Status::Warn,
        format!("{} differ: {}", differ.join(", "), all.join("; ")),
        expected,
        "use alike adapters for multichannel, or expect it to favour the faster ones",
    )
}

/// The facts from NetworkDirect discovery on this host.
pub fn collect() -> NdFacts {
    let d = ffi::nd::discover();
    let mut facts = NdFacts {
        providers: d.providers.iter().map(|p| p.name().to_string()).collect(),
        problems: d.problems.iter().map(ToString::to_string).collect(),
        adapters: Vec::new(),
    };
    if facts.providers.is_empty() {
        return facts;
    }
    if let Ok(devices) = inventory::nd::collect(None) {
        for dev in devices {
            let ip: Option<IpAddr> = dev.name.parse().ok();
            facts.adapters.push(NdAdapterFacts {
                link_gbps: ip.and_then(link_gbps),
                provider: dev.nd.as_ref().map_or_else(String::new, |n| n.provider.clone()),
                model: dev.model.clone(),
                name: dev.name,
            });
        }
    }
    facts
}

/// The link speed of the interface holding `ip`, Gb/s: Windows' adapter list, or on
/// other systems (the software provider in tests) `sys/class/net/IF/speed`.
fn link_gbps(ip: IpAddr) -> Option<f64> {
    let mbps = InterfaceEnvironment::for_ip(ip, Path::new("/"))?.speed_mbps?;
    Some(mbps as f64 / 1000.0)
}

/// `doctor --backend nd`: the checks and the environment (the first adapter's).
///
/// # Errors
/// `-d` naming no adapter.
pub fn diagnose(only: Option<&str>) -> Result<(Vec<Check>, Environment), Error> {
    let facts = collect();
    if let Some(name) = only {
        if !facts.adapters.iter().any(|a| a.name == name) {
            let available = facts.adapters.iter().map(|a| a.name.clone()).collect();
            return Err(InventoryError::UnknownDevice { name: name.into(), available }.into());
        }
    }
    let mut environment = Environment::host();
    if let Ok(devices) = inventory::nd::collect(only) {
        environment.device = devices.first().map(DeviceEnvironment::from_nd);
    }
    Ok((checks(&facts, only), environment))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a Windows Server with two ConnectX-3 ports reported (recorded as NdFacts).
    const TWO_PORTS: &str = r#"{
        "providers": ["Mellanox NetworkDirect2 provider (mlx4nd2.dll)"],
        "problems": [],
        "adapters": [
            {"name": "198.18.1.1", "provider": "mlx4nd2", "model": "ConnectX-3", "link_gbps": 40.0},
            {"name": "198.18.2.1", "provider": "mlx4nd2", "model": "ConnectX-3", "link_gbps": 10.0}
        ]
    }"#;

    fn by_name(checks: &[Check]) -> std::collections::BTreeMap<String, Status> {
        checks.iter().map(|c| (c.name(), c.status)).collect()
    }

    #[test]
    fn recorded_adapters_that_differ_warn() {
        let facts: NdFacts = serde_json::from_str(TWO_PORTS).unwrap();
        let checks = checks(&facts, None);
        let s = by_name(&checks);
        assert_eq!(s["nd.provider host"], Status::Pass);
        assert_eq!(s["nd.enabled host"], Status::Pass);
        assert_eq!(s["nd.link 198.18.1.1"], Status::Pass);
        assert_eq!(s["nic.homogeneity host"], Status::Warn);
        let h = checks.iter().find(|c| c.id == "nic.homogeneity").unwrap();
        assert!(
            h.observed.starts_with("link speed differ:")
                && h.observed.contains("198.18.2.1: ConnectX-3 10 Gb/s"),
            "{}",
            h.observed
        );
        // -d keeps the adapter checks to one adapter.
        assert_eq!(checks_for(&facts, "198.18.2.1"), ["nd.link 198.18.2.1"]);
    }

    fn checks_for(facts: &NdFacts, only: &str) -> Vec<String> {
        checks(facts, Some(only)).iter().filter(|c| c.id == "nd.link").map(Check::name).collect()
    }

    #[test]
    fn no_provider_or_nd_disabled_fail_with_the_fix() {
        let none =
            NdFacts { problems: vec!["mlx4nd2.dll: not found".into()], ..Default::default() };
        let s = by_name(&checks(&none, None));
        assert_eq!((s["nd.provider host"], s["nd.enabled host"]), (Status::Fail, Status::Na));
        let off = NdFacts { providers: vec!["mlx4nd2".into()], ..Default::default() };
        let c = checks(&off, None);
        let enabled = c.iter().find(|c| c.id == "nd.enabled").unwrap();
        assert_eq!(enabled.status, Status::Fail);
        assert!(enabled.fix.contains("Set-NetOffloadGlobalSetting -NetworkDirect Enabled"));
    }
}
