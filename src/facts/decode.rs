//! Pure decoding of the codes verbs reports: widths, speeds, MTUs, states, GID types,
//! and which adapter a vendor/part id is. Kept apart from the C calls so every table
//! is unit-tested on any host.

/// Lane count for an IB `active_width` code (1 = 1X, 2 = 4X, 4 = 8X, 8 = 12X, 16 = 2X).
pub fn width_lanes(code: u8) -> Option<u32> {
    match code {
        1 => Some(1),
        2 => Some(4),
        4 => Some(8),
        8 => Some(12),
        16 => Some(2),
        _ => None,
    }
}

/// An IB lane speed: its name, the nominal signalling rate per lane the kernel uses for
/// sysfs `rate`, and the data rate per lane once the line encoding is paid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaneSpeed {
    /// `SDR`, `DDR`, `QDR`, `FDR10`, `FDR`, `EDR`, `HDR`, `NDR`.
    pub name: &'static str,
    /// Nominal Gb/s per lane, as in sysfs `rate` (FDR counts 14, so 4X FDR is "56").
    pub nominal_gbps: f64,
    /// Gb/s per lane after 8b/10b (SDR–QDR) or 64b/66b (FDR10 and later) encoding.
    pub data_gbps: f64,
}

/// Decodes an IB `active_speed` code.
pub fn lane_speed(code: u8) -> Option<LaneSpeed> {
    let (name, nominal_gbps, data_gbps) = match code {
        1 => ("SDR", 2.5, 2.0),
        2 => ("DDR", 5.0, 4.0),
        4 => ("QDR", 10.0, 8.0),
        // FDR10 and FDR signal 10.3125 and 14.0625 GBd with 64b/66b.
        8 => ("FDR10", 10.0, 10.3125 * 64.0 / 66.0),
        16 => ("FDR", 14.0, 14.0625 * 64.0 / 66.0),
        32 => ("EDR", 25.0, 25.0),
        64 => ("HDR", 50.0, 50.0),
        128 => ("NDR", 100.0, 100.0),
        _ => return None,
    };
    Some(LaneSpeed { name, nominal_gbps, data_gbps })
}

/// Link rate in Gb/s from width and speed codes: (nominal, data). `None` if either code
/// is unknown.
pub fn link_rate_gbps(width: u8, speed: u8) -> Option<(f64, f64)> {
    let lanes = f64::from(width_lanes(width)?);
    let s = lane_speed(speed)?;
    Some((lanes * s.nominal_gbps, lanes * s.data_gbps))
}

/// MTU in bytes for an `enum ibv_mtu` code (1 = 256 … 5 = 4096).
pub fn mtu_bytes(code: u32) -> Option<u32> {
    (1..=5).contains(&code).then(|| 128 << code)
}

/// `enum ibv_port_state` name, as `ibv_devinfo` prints it without the `PORT_` prefix.
pub fn port_state(code: u32) -> &'static str {
    match code {
        0 => "NOP",
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "UNKNOWN",
    }
}

/// Physical port state name, as sysfs `phys_state` prints it.
pub fn phys_state(code: u8) -> &'static str {
    match code {
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "PhyTest",
        _ => "Unknown",
    }
}

/// Link layer name. Providers that leave it unspecified (0) are InfiniBand.
pub fn link_layer(code: u8) -> &'static str {
    match code {
        0 | 1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unknown",
    }
}

/// `enum ibv_transport_type` name.
pub fn transport(code: u32) -> &'static str {
    match code {
        0 => "InfiniBand",
        1 => "iWARP",
        2 => "usNIC",
        3 => "usNIC UDP",
        4 => "unspecified",
        _ => "unknown",
    }
}

/// `enum ibv_node_type` name.
pub fn node_type(code: u32) -> &'static str {
    match code {
        1 => "CA",
        2 => "Switch",
        3 => "Router",
        4 => "RNIC",
        5 => "usNIC",
        6 => "usNIC UDP",
        7 => "unspecified",
        _ => "unknown",
    }
}

/// `enum ibv_atomic_cap` name: whether RDMA atomics work, and how far they are atomic.
pub fn atomic_cap(code: u32) -> &'static str {
    match code {
        0 => "NONE",
        1 => "HCA",
        2 => "GLOB",
        _ => "UNKNOWN",
    }
}

/// GID type name. The verbs library reports type 0 for both IB GIDs and RoCE v1 on
/// some kernels, so the port's link layer decides.
pub fn gid_type(code: u32, link_layer_code: u8) -> &'static str {
    match (code, link_layer_code) {
        (0, 2) | (1, _) => "RoCE v1",
        (0, _) => "IB",
        (2, _) => "RoCE v2",
        _ => "unknown",
    }
}

/// IEEE OUI that Mellanox (now NVIDIA networking) adapters report as `vendor_id`.
pub const MELLANOX_VENDOR_ID: u32 = 0x02c9;
/// `vendor_id` of the soft-RoCE driver (rxe).
pub const RXE_VENDOR_ID: u32 = 0xff_ffff;
/// `vendor_id` of the soft-iWARP driver (siw): "bmt" in ASCII.
pub const SIW_VENDOR_ID: u32 = 0x62_6d74;

/// PCI vendor id of Mellanox (what NetworkDirect's `VendorId` reports).
pub const MELLANOX_PCI_VENDOR_ID: u32 = 0x15b3;

/// The adapter a PCI vendor/device id pair names (NetworkDirect reports PCI ids; for
/// Mellanox the PCI device id is the verbs part id).
pub fn pci_model(vendor_id: u32, device_id: u32) -> Option<String> {
    match vendor_id {
        MELLANOX_PCI_VENDOR_ID => mellanox_model(device_id),
        _ => None,
    }
}

/// The adapter a vendor/part id pair names, e.g. `ConnectX-3` or `ConnectX-3 Pro VF`.
pub fn model(vendor_id: u32, part_id: u32) -> Option<String> {
    match vendor_id {
        MELLANOX_VENDOR_ID => mellanox_model(part_id),
        RXE_VENDOR_ID => Some("Soft-RoCE (rxe)".into()),
        SIW_VENDOR_ID => Some("Soft-iWARP (siw)".into()),
        _ => None,
    }
}

fn mellanox_model(part: u32) -> Option<String> {
    let (name, vf) = match part {
        23108 => ("InfiniHost", false),
        25208 | 25218 => ("InfiniHost III Ex", false),
        24204 | 25204 => ("InfiniHost III Lx", false),
        25408 | 25418 | 25428 | 25448 => ("ConnectX", false),
        26418..=26478 => ("ConnectX-2", false),
        4099 => ("ConnectX-3", false),
        4100 => ("ConnectX-3", true),
        4103 => ("ConnectX-3 Pro", false),
        4104 => ("ConnectX-3 Pro", true),
        4113 => ("Connect-IB", false),
        4114 => ("Connect-IB", true),
        4115 => ("ConnectX-4", false),
        4116 => ("ConnectX-4", true),
        4117 => ("ConnectX-4 Lx", false),
        4118 => ("ConnectX-4 Lx", true),
        4119 => ("ConnectX-5", false),
        4120 => ("ConnectX-5", true),
        4121 => ("ConnectX-5 Ex", false),
        4122 => ("ConnectX-5 Ex", true),
        4123 => ("ConnectX-6", false),
        4124 => ("ConnectX-6", true),
        4125 => ("ConnectX-6 Dx", false),
        4126 => ("ConnectX family", true),
        4127 => ("ConnectX-6 Lx", false),
        4129 => ("ConnectX-7", false),
        4131 => ("ConnectX-8", false),
        41682 => ("BlueField", false),
        41683 => ("BlueField", true),
        41686 => ("BlueField-2", false),
        41692 => ("BlueField-3", false),
        _ => return None,
    };
    Some(if vf { format!("{name} VF") } else { name.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_match_the_kernels_sysfs_rate() {
        // (width code, speed code, sysfs "rate" text's number)
        let cases = [
            (1, 1, 2.5),   // 1X SDR
            (2, 4, 40.0),  // 4X QDR: ConnectX-2
            (2, 8, 40.0),  // 4X FDR10
            (2, 16, 56.0), // 4X FDR: ConnectX-3
            (2, 32, 100.0),
            (8, 4, 120.0),   // 12X QDR
            (16, 64, 100.0), // 2X HDR
        ];
        for (w, s, nominal) in cases {
            let (n, _) = link_rate_gbps(w, s).unwrap();
            assert_eq!(n, nominal, "width {w} speed {s}");
        }
    }

    #[test]
    fn data_rates_pay_the_line_encoding() {
        let (_, qdr) = link_rate_gbps(2, 4).unwrap();
        assert_eq!(qdr, 32.0);
        let (_, fdr) = link_rate_gbps(2, 16).unwrap();
        assert!((fdr - 54.545).abs() < 0.001, "{fdr}");
        let (_, fdr10) = link_rate_gbps(2, 8).unwrap();
        assert!((fdr10 - 40.0).abs() < 1e-9, "{fdr10}");
    }

    #[test]
    fn unknown_codes_give_no_rate() {
        assert_eq!(link_rate_gbps(3, 1), None);
        assert_eq!(link_rate_gbps(2, 3), None);
        assert_eq!(width_lanes(0), None);
    }

    #[test]
    fn mtu_codes() {
        assert_eq!(mtu_bytes(1), Some(256));
        assert_eq!(mtu_bytes(3), Some(1024));
        assert_eq!(mtu_bytes(5), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
    }

    #[test]
    fn mellanox_generations() {
        for part in [26418, 26428, 26438, 26448, 26458, 26468, 26478] {
            assert_eq!(model(0x02c9, part).as_deref(), Some("ConnectX-2"), "{part}");
        }
        assert_eq!(model(0x02c9, 26479), None);
        assert_eq!(model(0x02c9, 4099).as_deref(), Some("ConnectX-3"));
        assert_eq!(model(0x02c9, 4100).as_deref(), Some("ConnectX-3 VF"));
        assert_eq!(model(0x02c9, 4103).as_deref(), Some("ConnectX-3 Pro"));
        assert_eq!(model(0x02c9, 4104).as_deref(), Some("ConnectX-3 Pro VF"));
        assert_eq!(model(0x02c9, 4115).as_deref(), Some("ConnectX-4"));
        // The same part id from another vendor is not a ConnectX.
        assert_eq!(model(0x8086, 4099), None);
        assert_eq!(model(RXE_VENDOR_ID, 0).as_deref(), Some("Soft-RoCE (rxe)"));
    }

    #[test]
    fn gid_types_follow_link_layer() {
        assert_eq!(gid_type(0, 1), "IB");
        assert_eq!(gid_type(0, 0), "IB");
        assert_eq!(gid_type(0, 2), "RoCE v1");
        assert_eq!(gid_type(1, 2), "RoCE v1");
        assert_eq!(gid_type(2, 2), "RoCE v2");
        assert_eq!(gid_type(9, 2), "unknown");
    }

    #[test]
    fn state_names() {
        assert_eq!(port_state(4), "ACTIVE");
        assert_eq!(port_state(1), "DOWN");
        assert_eq!(phys_state(5), "LinkUp");
        assert_eq!(phys_state(3), "Disabled");
        assert_eq!(link_layer(0), "InfiniBand");
        assert_eq!(link_layer(2), "Ethernet");
        assert_eq!(transport(1), "iWARP");
        assert_eq!(node_type(1), "CA");
        assert_eq!(atomic_cap(1), "HCA");
        assert_eq!(atomic_cap(0), "NONE");
    }
}
