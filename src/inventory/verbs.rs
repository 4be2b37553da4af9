//! Fills the inventory from libibverbs (through `ffi::verbs`) and sysfs.

use ffi::verbs::{Context, Device, DeviceList, Error as VerbsError, GidEntry, PortAttr};

use super::{DeviceInfo, DeviceLimits, GidInfo, InventoryError, PortInfo};
use crate::facts::{self, decode, Pcie};

/// The device list, or why there is none.
fn device_list() -> Result<DeviceList, InventoryError> {
    DeviceList::new().map_err(|e| {
        if e.is_no_rdma_stack() {
            InventoryError::NoRdmaStack(e.to_string())
        } else {
            InventoryError::Query(e.to_string())
        }
    })
}

/// The verbs stack answers (`ibv_get_device_list` succeeds), whatever it lists.
pub fn stack() -> Result<(), InventoryError> {
    device_list().map(drop)
}

pub fn collect(only: Option<&str>) -> Result<Vec<DeviceInfo>, InventoryError> {
    let list = device_list()?;
    if list.is_empty() {
        return Err(InventoryError::NoDevice);
    }
    let selected: Vec<Device<'_>> = match only {
        None => list.iter().collect(),
        Some(name) => match list.find(name) {
            Some(d) => vec![d],
            None => {
                return Err(InventoryError::UnknownDevice {
                    name: name.to_string(),
                    available: list.iter().map(|d| d.name()).collect(),
                })
            }
        },
    };
    selected
        .into_iter()
        .map(|d| describe(d).map_err(|e| InventoryError::Query(e.to_string())))
        .collect()
}

fn describe(device: Device<'_>) -> Result<DeviceInfo, VerbsError> {
    let context = device.open()?;
    let attr = context.query_device()?;
    let ports: Vec<(u8, PortAttr)> = (1..=attr.phys_port_cnt)
        .map(|p| context.query_port(p).map(|a| (p, a)))
        .collect::<Result<_, _>>()?;
    let gids = gid_table(&context, &ports)?;
    let live = facts::live();
    let name = device.name();
    Ok(DeviceInfo {
        name: name.clone(),
        node_guid: attr.node_guid.to_string(),
        sys_image_guid: attr.sys_image_guid.to_string(),
        transport: decode::transport(device.transport_type()).to_string(),
        node_type: decode::node_type(device.node_type()).to_string(),
        fw_ver: crate::text::clean(&attr.fw_ver),
        vendor_id: attr.vendor_id,
        vendor_part_id: attr.vendor_part_id,
        hw_ver: attr.hw_ver,
        model: decode::model(attr.vendor_id, attr.vendor_part_id),
        limits: DeviceLimits {
            max_qp: attr.max_qp.into(),
            max_qp_wr: attr.max_qp_wr.into(),
            max_sge: attr.max_sge.into(),
            max_cq: attr.max_cq.into(),
            max_cqe: attr.max_cqe.into(),
            max_mr: attr.max_mr.into(),
            max_mr_size: attr.max_mr_size,
            max_pd: attr.max_pd.into(),
            max_qp_rd_atom: attr.max_qp_rd_atom.into(),
            max_qp_init_rd_atom: attr.max_qp_init_rd_atom.into(),
            atomic_cap: decode::atomic_cap(attr.atomic_cap).to_string(),
        },
        pcie: Pcie::read(&live, &facts::paths::device_dir(&name).join("device")),
        numa_node: facts::device::numa_node(&live, &name),
        ports: ports.iter().map(|(p, a)| port_info(*p, a, &gids)).collect(),
        nd: None,
    })
}

/// The valid GIDs of all ports in one call; a port with an empty table adds nothing.
fn gid_table(context: &Context, ports: &[(u8, PortAttr)]) -> Result<Vec<GidEntry>, VerbsError> {
    let capacity: usize =
        ports.iter().map(|(_, a)| usize::try_from(a.gid_tbl_len).unwrap_or(0)).sum();
    if capacity == 0 {
        return Ok(Vec::new());
    }
    context.query_gid_table(capacity)
}

fn port_info(port: u8, a: &PortAttr, gids: &[GidEntry]) -> PortInfo {
    let ib = a.link_layer != 2;
    let rate = decode::link_rate_gbps(a.active_width, a.active_speed);
    let mut port_gids: Vec<GidInfo> = gids
        .iter()
        .filter(|g| g.port == port && !g.gid.is_zero())
        .map(|g| GidInfo {
            index: g.index,
            gid: g.gid.to_string(),
            raw: g.gid.to_raw_string(),
            gid_type: decode::gid_type(g.gid_type, a.link_layer).to_string(),
            netdev: g.netdev.clone(),
        })
        .collect();
    port_gids.sort_by_key(|g| g.index);
    PortInfo {
        port,
        state: decode::port_state(a.state).to_string(),
        phys_state: decode::phys_state(a.phys_state).to_string(),
        link_layer: decode::link_layer(a.link_layer).to_string(),
        active_mtu: decode::mtu_bytes(a.active_mtu),
        max_mtu: decode::mtu_bytes(a.max_mtu),
        width: decode::width_lanes(a.active_width).map(|l| format!("{l}X")),
        speed: decode::lane_speed(a.active_speed).map(|s| s.name.to_string()),
        rate_gbps: rate.map(|(nominal, _)| nominal),
        data_rate_gbps: rate.map(|(_, data)| (data * 1000.0).round() / 1000.0),
        lid: ib.then_some(a.lid),
        sm_lid: ib.then_some(a.sm_lid),
        gid_table_len: u32::try_from(a.gid_tbl_len).unwrap_or(0),
        gids: port_gids,
    }
}
