//! Human output of `rdmabench devices`: a compact block per device, or with `-v`
//! everything the inventory holds.

use std::fmt::Write;

use crate::inventory::{DeviceInfo, Inventory, NdAdapter, PortInfo};

/// Renders the inventory for a terminal.
pub fn render(inventory: &Inventory, verbose: bool) -> String {
    let mut out = String::new();
    for (i, device) in inventory.devices.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if verbose {
            verbose_device(&mut out, device);
        } else {
            brief_device(&mut out, device);
        }
    }
    out
}

fn model_text(d: &DeviceInfo) -> String {
    let ids = format!("vendor 0x{:04x} part {}", d.vendor_id, d.vendor_part_id);
    match &d.model {
        Some(m) => format!("{m} ({ids})"),
        None => ids,
    }
}

fn link_text(p: &PortInfo) -> String {
    match (&p.width, &p.speed, p.rate_gbps) {
        (Some(w), Some(s), Some(r)) => format!("{w} {s} = {r} Gb/s"),
        _ => "rate unknown".to_string(),
    }
}

fn mtu_text(mtu: Option<u32>) -> String {
    mtu.map_or_else(|| "?".to_string(), |m| m.to_string())
}

/// An ND adapter has no firmware string, GUIDs or ports: its provider and addresses.
fn nd_lines(out: &mut String, d: &DeviceInfo, nd: &NdAdapter) {
    let _ = writeln!(out, "{}: {}, NetworkDirect adapter {}", d.name, model_text(d), nd.adapter_id);
    let _ = writeln!(out, "  provider: {}", nd.provider);
    let _ = writeln!(out, "  addresses: {}", nd.addresses.join(", "));
    let _ = writeln!(
        out,
        "  inline {} B, max transfer {} B, read limits in/out {} / {}, flags: {}",
        nd.max_inline,
        nd.max_transfer_length,
        d.limits.max_qp_rd_atom,
        d.limits.max_qp_init_rd_atom,
        if nd.flags.is_empty() { "none".to_string() } else { nd.flags.join(", ") }
    );
}

fn brief_device(out: &mut String, d: &DeviceInfo) {
    if let Some(nd) = &d.nd {
        return nd_lines(out, d, nd);
    }
    let _ = writeln!(
        out,
        "{}: {}, fw {}, node GUID {}",
        d.name,
        model_text(d),
        if d.fw_ver.is_empty() { "-" } else { &d.fw_ver },
        d.node_guid
    );
    for p in &d.ports {
        let _ = writeln!(
            out,
            "  port {}: {} {} {}, MTU {} (max {}), {}",
            p.port,
            p.state,
            p.phys_state,
            p.link_layer,
            mtu_text(p.active_mtu),
            mtu_text(p.max_mtu),
            link_text(p)
        );
        gid_lines(out, p, "    ");
    }
}

fn gid_lines(out: &mut String, p: &PortInfo, indent: &str) {
    let width = p.gids.iter().map(|g| g.gid.len()).max().unwrap_or(0);
    for g in &p.gids {
        let _ = writeln!(
            out,
            "{indent}GID {:<3} {:<width$}  {:<7}  {}",
            g.index,
            g.gid,
            g.gid_type,
            g.netdev.as_deref().unwrap_or("-")
        );
    }
}

fn field(out: &mut String, name: &str, value: &dyn std::fmt::Display) {
    let _ = writeln!(out, "  {name:<20} {value}");
}

fn verbose_device(out: &mut String, d: &DeviceInfo) {
    if let Some(nd) = &d.nd {
        verbose_nd(out, d, nd);
        return;
    }
    let _ = writeln!(out, "{}", d.name);
    field(out, "model", &model_text(d));
    field(out, "transport", &format!("{} (node type {})", d.transport, d.node_type));
    field(out, "firmware", &d.fw_ver);
    field(out, "hw version", &d.hw_ver);
    field(out, "node GUID", &d.node_guid);
    field(out, "sys image GUID", &d.sys_image_guid);
    let l = &d.limits;
    field(out, "max QPs", &l.max_qp);
    field(out, "max WRs per QP", &l.max_qp_wr);
    field(out, "max SGEs", &l.max_sge);
    field(out, "max CQs", &l.max_cq);
    field(out, "max CQEs", &l.max_cqe);
    field(out, "max MRs", &l.max_mr);
    field(out, "max MR size", &l.max_mr_size);
    field(out, "max PDs", &l.max_pd);
    field(
        out,
        "max RD atomic in/out",
        &format!("{} / {}", l.max_qp_rd_atom, l.max_qp_init_rd_atom),
    );
    field(out, "atomics", &l.atomic_cap);
    field(out, "PCIe link", &pcie_text(d));
    field(out, "NUMA node", &d.numa_node.map_or_else(|| "-".to_string(), |n| n.to_string()));
    for p in &d.ports {
        verbose_port(out, p);
    }
}

fn verbose_nd(out: &mut String, d: &DeviceInfo, nd: &crate::inventory::NdAdapter) {
    nd_lines(out, d, nd);
    let l = &d.limits;
    field(out, "max WRs per QP", &l.max_qp_wr);
    field(out, "max SGEs", &l.max_sge);
    field(out, "max read SGEs", &nd.max_read_sge);
    field(out, "max CQEs", &l.max_cqe);
    field(out, "max MR size", &l.max_mr_size);
    field(
        out,
        "private data",
        &format!("connect {} / accept {} B", nd.max_caller_data, nd.max_callee_data),
    );
    field(out, "inline threshold", &nd.inline_request_threshold);
    field(out, "large threshold", &nd.large_request_threshold);
    field(out, "atomics", &l.atomic_cap);
}

/// `8.0 GT/s PCIe x8 (max 8.0 GT/s PCIe x8)`, or why there is none.
fn pcie_text(d: &DeviceInfo) -> String {
    let Some(pcie) = &d.pcie else { return "none (not a PCI function)".into() };
    let link = |speed: &Option<String>, width: Option<u32>| {
        format!(
            "{} x{}",
            speed.as_deref().unwrap_or("?"),
            width.map_or_else(|| "?".to_string(), |w| w.to_string())
        )
    };
    format!(
        "{} (max {})",
        link(&pcie.current_speed, pcie.current_width),
        link(&pcie.max_speed, pcie.max_width)
    )
}

fn verbose_port(out: &mut String, p: &crate::inventory::PortInfo) {
    let _ = writeln!(out, "  port {}", p.port);
    let pf = |out: &mut String, name: &str, value: &dyn std::fmt::Display| {
        let _ = writeln!(out, "    {name:<18} {value}");
    };
    pf(out, "state", &p.state);
    pf(out, "physical state", &p.phys_state);
    pf(out, "link layer", &p.link_layer);
    pf(out, "active MTU", &format!("{} (max {})", mtu_text(p.active_mtu), mtu_text(p.max_mtu)));
    pf(out, "link", &link_text(p));
    if let Some(data) = p.data_rate_gbps {
        pf(out, "data rate", &format!("{data} Gb/s after encoding"));
    }
    if let (Some(lid), Some(sm_lid)) = (p.lid, p.sm_lid) {
        pf(out, "LID / SM LID", &format!("{lid} / {sm_lid}"));
    }
    pf(out, "GID table", &format!("{} valid of {}", p.gids.len(), p.gid_table_len));
    gid_lines(out, p, "      ");
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::inventory::{DeviceLimits, GidInfo, Pcie, SCHEMA_VERSION};

    /// A ConnectX-3 on FDR InfiniBand, as a real one would report.
    pub(crate) fn sample() -> Inventory {
        Inventory {
            schema_version: SCHEMA_VERSION,
            devices: vec![DeviceInfo {
                name: "mlx4_0".into(),
                node_guid: "0002:c903:0011:2233".into(),
                sys_image_guid: "0002:c903:0011:2236".into(),
                transport: "InfiniBand".into(),
                node_type: "CA".into(),
                fw_ver: "2.42.5000".into(),
                vendor_id: 0x02c9,
                vendor_part_id: 4099,
                hw_ver: 1,
                model: Some("ConnectX-3".into()),
                limits: DeviceLimits {
                    max_qp: 131000,
                    max_qp_wr: 16351,
                    max_sge: 32,
                    max_cq: 65408,
                    max_cqe: 4194303,
                    max_mr: 524032,
                    max_mr_size: u64::MAX,
                    max_pd: 32764,
                    max_qp_rd_atom: 16,
                    max_qp_init_rd_atom: 128,
                    atomic_cap: "HCA".into(),
                },
                pcie: Some(Pcie {
                    current_speed: Some("8.0 GT/s PCIe".into()),
                    current_width: Some(8),
                    max_speed: Some("8.0 GT/s PCIe".into()),
                    max_width: Some(8),
                }),
                numa_node: Some(0),
                ports: vec![PortInfo {
                    port: 1,
                    state: "ACTIVE".into(),
                    phys_state: "LinkUp".into(),
                    link_layer: "InfiniBand".into(),
                    active_mtu: Some(2048),
                    max_mtu: Some(4096),
                    width: Some("4X".into()),
                    speed: Some("FDR".into()),
                    rate_gbps: Some(56.0),
                    data_rate_gbps: Some(54.545),
                    lid: Some(3),
                    sm_lid: Some(1),
                    gid_table_len: 128,
                    gids: vec![GidInfo {
                        index: 0,
                        gid: "fe80::2:c903:11:2234".into(),
                        raw: "fe80:0000:0000:0000:0002:c903:0011:2234".into(),
                        gid_type: "IB".into(),
                        netdev: None,
                    }],
                }],
                nd: None,
            }],
        }
    }

    #[test]
    fn brief_names_model_port_rate_and_gids() {
        let text = render(&sample(), false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            lines[0],
            "mlx4_0: ConnectX-3 (vendor 0x02c9 part 4099), fw 2.42.5000, node GUID 0002:c903:0011:2233"
        );
        assert_eq!(
            lines[1],
            "  port 1: ACTIVE LinkUp InfiniBand, MTU 2048 (max 4096), 4X FDR = 56 Gb/s"
        );
        assert_eq!(lines[2], "    GID 0   fe80::2:c903:11:2234  IB       -");
    }

    #[test]
    fn verbose_adds_limits_pcie_and_lids() {
        let text = render(&sample(), true);
        for needle in [
            "  max QPs              131000",
            "  atomics              HCA",
            "  PCIe link            8.0 GT/s PCIe x8 (max 8.0 GT/s PCIe x8)",
            "  NUMA node            0",
            "    LID / SM LID       3 / 1",
            "    data rate          54.545 Gb/s after encoding",
            "    GID table          1 valid of 128",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }

    #[test]
    fn json_has_the_documented_shape() {
        let value: serde_json::Value =
            serde_json::from_str(&crate::report::to_json(&sample())).unwrap();
        assert_eq!(value["schema_version"], 2);
        let dev = &value["devices"][0];
        assert_eq!(dev["name"], "mlx4_0");
        assert_eq!(dev["model"], "ConnectX-3");
        assert_eq!(dev["limits"]["atomic_cap"], "HCA");
        assert_eq!(dev["pcie"]["current_width"], 8);
        let port = &dev["ports"][0];
        assert_eq!(port["rate_gbps"], 56.0);
        assert_eq!(port["lid"], 3);
        assert_eq!(port["gids"][0]["type"], "IB");
        assert!(port["gids"][0]["netdev"].is_null());
    }
}
