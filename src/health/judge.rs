//! One host's verdict, judged from what was read and measured: pure functions of the
//! report's own data, so each code is tested without a device. The facts are judged
//! by doctor's own checks ([`crate::doctor::checks`]), mapped to codes; the loopback
//! by the floors (a qualify profile's form); the counters by `-W`'s rule of trouble.

use crate::counters::CounterChanges;
use crate::doctor::{Check, Status};
use crate::qualify::threshold::{Bandwidth, Floor, Latency, LinkRate};

use super::codes::{Code, Finding};
use super::{Floors, LinkFacts, Loopback};

/// Doctor's checks of a port, a card or the host as findings: a port not up, a link or
/// PCIe link below the card's, firmware below the minimum, memlock too low to test.
pub fn facts(checks: &[Check]) -> Vec<Finding> {
    checks
        .iter()
        .filter_map(|c| {
            let code = match (c.id.as_str(), c.status) {
                ("port.state", Status::Fail) => Code::PortDown,
                ("port.rate", Status::Fail | Status::Warn) => Code::RateLow,
                ("pcie.link", Status::Fail | Status::Warn) => Code::PcieDegraded,
                ("firmware", Status::Fail) => Code::FirmwareOld,
                ("memlock" | "rdma.device", Status::Fail) => Code::NotRun,
                _ => return None,
            };
            Some(Finding::new(code, &c.subject, format!("{} [{}]", c.observed, c.expected)))
        })
        .collect()
}

/// The port's link after the test against before it: state, rate and PCIe link.
pub fn link_change(subject: &str, before: &LinkFacts, after: &LinkFacts) -> Option<Finding> {
    let show = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
    let rate = |r: Option<f64>| r.map_or_else(|| "unknown".into(), |r| format!("{r} Gb/s"));
    let mut parts = Vec::new();
    if (&before.state, &before.phys_state) != (&after.state, &after.phys_state) {
        parts.push(format!(
            "state {} / {} → {} / {}",
            before.state, before.phys_state, after.state, after.phys_state
        ));
    }
    if before.rate_gbps != after.rate_gbps {
        parts.push(format!("rate {} → {}", rate(before.rate_gbps), rate(after.rate_gbps)));
    }
    if before.pcie != after.pcie {
        parts.push(format!("PCIe {} → {}", show(&before.pcie), show(&after.pcie)));
    }
    (!parts.is_empty()).then(|| {
        Finding::new(Code::LinkChanged, subject, format!("{} during the test", parts.join(", ")))
    })
}

/// The counters of trouble that moved over the test, as one finding. On a soft device
/// (`soft`: rxe, siw: no physical link) the transport's recoveries — retries,
/// duplicates, packets out of sequence, RNR — are its timers under load, not a link's
/// fault (soft-RoCE in the lab moves `completer_retry_err` and `duplicate_request` in
/// every healthy 64 KiB write_bw): recorded, not judged. Every other counter of
/// trouble, and every one on a physical port, is.
pub fn counters(subject: &str, moved: &CounterChanges, soft: bool) -> Option<Finding> {
    let troubles: Vec<String> = moved
        .troubles()
        .filter(|(n, _)| !(soft && recovery(n)))
        .map(|(n, v)| format!("{n} +{v}"))
        .collect();
    (!troubles.is_empty()).then(|| {
        Finding::new(
            Code::CountersMoved,
            subject,
            format!("{} during the test [none]", troubles.join(", ")),
        )
    })
}

/// A counter of the transport's recoveries (retry, duplicate, sequence, RNR).
fn recovery(name: &str) -> bool {
    let n = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    n.split('_').any(|w| w.starts_with("retr") || w == "duplicate" || w == "seq" || w == "rnr")
}

/// The loopback's figures against the floors: an error is `NOT_RUN`; bandwidth below
/// `min_bw` (of `link` for a `% link` floor) or latency above `max_lat` is `LOOPBACK_LOW`.
pub fn loopback(subject: &str, lb: &Loopback, floors: &Floors, link: &LinkRate) -> Vec<Finding> {
    let mut found = Vec::new();
    if let Some(e) = &lb.error {
        found.push(Finding::new(Code::NotRun, subject, format!("loopback: {e}")));
    }
    if let (Some(bw), Some(min)) = (lb.bw_gbps, floors.min_bw) {
        if let Some(floor) = bw_floor_gbps(min, link) {
            if bw < floor {
                let of = match min {
                    Bandwidth::OfLink(p) => format!("{p}% link ({floor:.2} Gb/s)"),
                    Bandwidth::Absolute(_) => format!("{floor:.2} Gb/s"),
                };
                let detail = format!("loopback write_bw {bw:.2} Gb/s < {of} ({})", floors.source);
                found.push(Finding::new(Code::LoopbackLow, subject, detail));
            }
        }
    }
    if let (Some(lat), Some(Latency(max))) = (lb.lat_us, floors.max_lat) {
        if lat > max {
            let detail =
                format!("loopback write_lat {lat:.2} µs > {max:.2} µs ({})", floors.source);
            found.push(Finding::new(Code::LoopbackLow, subject, detail));
        }
    }
    found
}

/// A bandwidth floor in Gb/s on `link`; `None` where it does not apply (a `% link`
/// floor without a physical link or a known rate).
pub fn bw_floor_gbps(min: Bandwidth, link: &LinkRate) -> Option<f64> {
    match min.floor(link) {
        Ok(Floor::Bytes(b)) => Some(b * 8.0 / 1e9),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks;
    use crate::facts::{Device, HostFacts, Pcie, Port};

    fn port(state: &str, phys: &str, rate: f64, lanes: u32, speed: &str) -> Port {
        Port {
            port: 1,
            state: state.into(),
            phys_state: phys.into(),
            link_layer: "InfiniBand".into(),
            rate_gbps: Some(rate),
            lanes: Some(lanes),
            speed: Some(speed.into()),
            ..Port::default()
        }
    }

    fn cx3(fw: &str, pcie: (f64, u32), p: Port) -> HostFacts {
        let nic = Device {
            name: "mlx4_0".into(),
            model: Some("ConnectX-3".into()),
            fw_ver: Some(fw.into()),
            pcie: Some(Pcie {
                current_speed: Some(format!("{} GT/s PCIe", pcie.0)),
                current_width: Some(pcie.1),
                max_speed: Some("8.0 GT/s PCIe".into()),
                max_width: Some(8),
            }),
            ports: vec![p],
            ..Device::default()
        };
        HostFacts { nics: vec![nic], memlock_known: true, ..HostFacts::default() }
    }

    fn codes(h: &HostFacts) -> Vec<(Code, String)> {
        let checks = checks::all(h, None, crate::doctor::registration());
        facts(&checks).into_iter().map(|f| (f.code, f.subject)).collect()
    }

    #[test]
    fn a_healthy_card_has_no_finding() {
        let h = cx3("2.42.5000", (8.0, 8), port("ACTIVE", "LinkUp", 56.0, 4, "FDR"));
        assert_eq!(codes(&h), []);
    }

    #[test]
    fn port_down_is_named_with_what_it_was_judged_against() {
        let h = cx3("2.42.5000", (8.0, 8), port("DOWN", "Disabled", 56.0, 4, "FDR"));
        let checks = checks::all(&h, None, crate::doctor::registration());
        let f = facts(&checks);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].to_string(), "PORT_DOWN mlx4_0/1: DOWN / Disabled [ACTIVE / LinkUp]");
    }

    #[test]
    fn a_link_below_the_cards_is_rate_low() {
        // A lane down (1X), and a speed below FDR (QDR) on a ConnectX-3.
        let h = cx3("2.42.5000", (8.0, 8), port("ACTIVE", "LinkUp", 14.0, 1, "FDR"));
        assert_eq!(codes(&h), [(Code::RateLow, "mlx4_0/1".to_string())]);
        let h = cx3("2.42.5000", (8.0, 8), port("ACTIVE", "LinkUp", 40.0, 4, "QDR"));
        assert_eq!(codes(&h), [(Code::RateLow, "mlx4_0/1".to_string())]);
    }

    #[test]
    fn a_pcie_link_below_its_capability_is_pcie_degraded() {
        let h = cx3("2.42.5000", (8.0, 4), port("ACTIVE", "LinkUp", 56.0, 4, "FDR"));
        assert_eq!(codes(&h), [(Code::PcieDegraded, "mlx4_0".to_string())]);
    }

    #[test]
    fn firmware_below_the_minimum_is_firmware_old() {
        let h = cx3("2.40.7000", (8.0, 8), port("ACTIVE", "LinkUp", 56.0, 4, "FDR"));
        let checks = checks::all(&h, None, crate::doctor::registration());
        let f = facts(&checks);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, Code::FirmwareOld);
        assert!(
            f[0].detail.starts_with("ConnectX-3 2.40.7000") && f[0].detail.contains("≥ 2.42.5000")
        );
    }

    fn link(state: &str, rate: f64, pcie: &str) -> LinkFacts {
        LinkFacts {
            state: state.into(),
            phys_state: if state == "ACTIVE" { "LinkUp" } else { "Disabled" }.into(),
            rate_gbps: Some(rate),
            pcie: Some(pcie.into()),
            ..LinkFacts::default()
        }
    }

    #[test]
    fn a_link_that_fell_or_trained_down_during_the_test_is_link_changed() {
        let before = link("ACTIVE", 56.0, "8.0 GT/s x8");
        assert_eq!(link_change("mlx4_0/1", &before, &before.clone()), None);
        let fell = link_change("mlx4_0/1", &before, &link("DOWN", 56.0, "8.0 GT/s x8")).unwrap();
        assert_eq!(fell.code, Code::LinkChanged);
        assert_eq!(fell.detail, "state ACTIVE / LinkUp → DOWN / Disabled during the test");
        let down = link_change("mlx4_0/1", &before, &link("ACTIVE", 40.0, "8.0 GT/s x4")).unwrap();
        assert_eq!(
            down.detail,
            "rate 56 Gb/s → 40 Gb/s, PCIe 8.0 GT/s x8 → 8.0 GT/s x4 during the test"
        );
    }

    #[test]
    fn counters_of_trouble_moved_and_only_those() {
        let mut moved = CounterChanges { port: "rxe0/1".into(), ..Default::default() };
        moved.changes.insert("hw_counters/sent_pkts".into(), 5000);
        moved.changes.insert("hw_counters/ack_deferred".into(), 3);
        assert_eq!(counters("rxe0/1", &moved, false), None);
        moved.changes.insert("counters/port_rcv_errors".into(), 2);
        let f = counters("rxe0/1", &moved, false).unwrap();
        assert_eq!(
            f.to_string(),
            "COUNTERS_MOVED rxe0/1: counters/port_rcv_errors +2 during the test [none]"
        );
    }

    #[test]
    fn a_soft_devices_recoveries_are_recorded_not_judged() {
        // What a healthy 64 KiB write_bw moved on rxe0 in the lab.
        let mut moved = CounterChanges { port: "rxe0/1".into(), ..Default::default() };
        for (n, v) in [("completer_retry_err", 25), ("duplicate_request", 228), ("rcvd_seq_err", 1)]
        {
            moved.changes.insert(format!("hw_counters/{n}"), v);
        }
        assert_eq!(counters("rxe0/1", &moved, true), None);
        // On a physical port they are trouble; on any port a link downed is.
        let f = counters("mlx5_0/1", &moved, false).unwrap();
        assert!(f.detail.starts_with(
            "hw_counters/completer_retry_err +25, hw_counters/duplicate_request +228"
        ));
        moved.changes.insert("hw_counters/link_downed".into(), 1);
        let f = counters("rxe0/1", &moved, true).unwrap();
        assert_eq!(f.detail, "hw_counters/link_downed +1 during the test [none]");
    }

    fn floors(min_bw: Option<&str>, max_lat: Option<f64>) -> Floors {
        Floors {
            min_bw: min_bw.map(|b| Bandwidth::try_from(b.to_string()).unwrap()),
            max_lat: max_lat.map(Latency),
            source: "defaults".into(),
        }
    }

    fn lb(bw: f64, lat: f64) -> Loopback {
        Loopback { bw_gbps: Some(bw), lat_us: Some(lat), ..Loopback::default() }
    }

    #[test]
    fn loopback_below_its_floor_is_loopback_low_with_the_floor_named() {
        let fdr = LinkRate::Gbps(54.54);
        let f = floors(Some("90% link"), Some(5.0));
        assert_eq!(loopback("mlx4_0/1", &lb(50.0, 1.5), &f, &fdr), []);
        let low = loopback("mlx4_0/1", &lb(41.2, 1.5), &f, &fdr);
        assert_eq!(low.len(), 1);
        assert_eq!(
            low[0].to_string(),
            "LOOPBACK_LOW mlx4_0/1: loopback write_bw 41.20 Gb/s < 90% link (49.09 Gb/s) (defaults)"
        );
        let slow = loopback("mlx4_0/1", &lb(50.0, 7.25), &f, &fdr);
        assert_eq!(slow[0].detail, "loopback write_lat 7.25 µs > 5.00 µs (defaults)");
        // An absolute floor applies anywhere; a share of the link only where there is one.
        let soft = LinkRate::NoPhysicalLink("rxe0/1: soft device: no physical link".into());
        assert_eq!(loopback("rxe0/1", &lb(0.1, 90.0), &floors(Some("90% link"), None), &soft), []);
        let abs = loopback("rxe0/1", &lb(0.1, 90.0), &floors(Some("1 Gb/s"), None), &soft);
        assert_eq!(abs[0].detail, "loopback write_bw 0.10 Gb/s < 1.00 Gb/s (defaults)");
    }

    #[test]
    fn a_loopback_that_failed_is_not_run() {
        let failed = Loopback { error: Some("rxe0: no such device".into()), ..Loopback::default() };
        let f = loopback("rxe0/1", &failed, &floors(Some("90% link"), None), &LinkRate::Unknown);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].to_string(), "NOT_RUN rxe0/1: loopback: rxe0: no such device");
    }
}
