//! The inventory over NetworkDirect: each adapter of each provider, queried with
//! `IND2Adapter::Query`, in the same model as verbs devices. ND adapters have no name,
//! ports or GUIDs: an adapter is named by its first IP address (what `-d` takes with
//! `--backend nd`), and the ND-only facts are in [`NdAdapter`].

use std::net::IpAddr;

use ffi::nd::{self, Adapter};

use super::{DeviceInfo, DeviceLimits, InventoryError, NdAdapter};

/// Every ND adapter (only the one owning address `only`, if given).
pub fn collect(only: Option<&str>) -> Result<Vec<DeviceInfo>, InventoryError> {
    let d = nd::discover();
    if d.providers.is_empty() {
        return Err(InventoryError::Query(nd::OpenError::NoProvider(d.problems).to_string()));
    }
    let mut devices = Vec::new();
    for p in &d.providers {
        let addrs = p.addresses().map_err(|e| InventoryError::Query(e.to_string()))?;
        // One adapter may own several addresses: group them by adapter id.
        let mut adapters: Vec<(u64, Vec<IpAddr>)> = Vec::new();
        for a in addrs {
            let id = p.resolve(a.ip()).map_err(|e| InventoryError::Query(e.to_string()))?;
            match adapters.iter_mut().find(|(i, _)| *i == id) {
                Some((_, ips)) => ips.push(a.ip()),
                None => adapters.push((id, vec![a.ip()])),
            }
        }
        for (id, ips) in adapters {
            let adapter = p.open(id).map_err(|e| InventoryError::Query(e.to_string()))?;
            devices.push(describe(&adapter, &ips));
        }
    }
    match only {
        None => Ok(devices),
        Some(want) => {
            let available: Vec<String> = devices.iter().map(|d| d.name.clone()).collect();
            let found: Vec<DeviceInfo> = devices
                .into_iter()
                .filter(|d| d.nd.as_ref().is_some_and(|n| n.addresses.iter().any(|a| a == want)))
                .collect();
            if found.is_empty() {
                return Err(InventoryError::UnknownDevice { name: want.to_string(), available });
            }
            Ok(found)
        }
    }
}

/// One adapter in the inventory model.
pub fn describe(adapter: &Adapter, ips: &[IpAddr]) -> DeviceInfo {
    let i = adapter.info();
    let vendor = u32::from(i.VendorId);
    let part = u32::from(i.DeviceId);
    DeviceInfo {
        name: ips.first().map_or_else(|| format!("nd-{:#x}", i.AdapterId), |a| a.to_string()),
        node_guid: "-".into(),
        sys_image_guid: "-".into(),
        transport: "NetworkDirect".into(),
        node_type: "ND adapter".into(),
        fw_ver: String::new(),
        vendor_id: vendor,
        vendor_part_id: part,
        hw_ver: 0,
        model: crate::facts::decode::pci_model(vendor, part),
        limits: DeviceLimits {
            max_qp: -1,
            max_qp_wr: i64::from(i.MaxInitiatorQueueDepth.min(i.MaxReceiveQueueDepth)),
            max_sge: i64::from(i.MaxInitiatorSge.min(i.MaxReceiveSge)),
            max_cq: -1,
            max_cqe: i64::from(i.MaxCompletionQueueDepth),
            max_mr: -1,
            max_mr_size: i.MaxRegistrationSize as u64,
            max_pd: -1,
            max_qp_rd_atom: i64::from(i.MaxInboundReadLimit),
            max_qp_init_rd_atom: i64::from(i.MaxOutboundReadLimit),
            atomic_cap: "NONE".into(),
        },
        pcie: None,
        numa_node: None,
        ports: Vec::new(),
        nd: Some(NdAdapter {
            provider: adapter.provider().name().to_string(),
            adapter_id: format!("{:#x}", i.AdapterId),
            addresses: ips.iter().map(|a| a.to_string()).collect(),
            max_inline: i.MaxInlineDataSize,
            max_transfer_length: i.MaxTransferLength,
            max_read_sge: i.MaxReadSge,
            max_caller_data: i.MaxCallerData,
            max_callee_data: i.MaxCalleeData,
            inline_request_threshold: i.InlineRequestThreshold,
            large_request_threshold: i.LargeRequestThreshold,
            flags: adapter.flag_names().iter().map(|s| s.to_string()).collect(),
        }),
    }
}
