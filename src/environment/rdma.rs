//! The device part of an [`Environment`](super::Environment): what the inventory knows of a
//! device and port, plus its kernel driver (sysfs) and the rdma-core version.

use std::path::Path;

use super::{clean, DeviceEnvironment, Pcie};
use crate::facts::{device, system, SystemTree};
use crate::inventory::DeviceInfo;

impl DeviceEnvironment {
    /// Device `info`, port `port`, as the inventory describes it, with the kernel driver
    /// and rdma-core version read under `root` (`/` in production). A NetworkDirect
    /// adapter is described as [`DeviceEnvironment::from_nd`] does, on `port`. A port the
    /// device does not have gives link layer `unknown` and no rate or MTU.
    ///
    /// The board id (the PSID on Mellanox cards, where the driver provides one), the
    /// kernel driver and the rdma-core version are read in [`crate::facts`]:
    /// [`device::board_id`], [`device::driver`] (a soft device's module named by its
    /// vendor id) and [`system::rdma_core_version`].
    pub fn from_inventory(info: &DeviceInfo, port: u8, root: &Path) -> DeviceEnvironment {
        if info.nd.is_some() {
            return DeviceEnvironment { port, ..DeviceEnvironment::from_nd(info) };
        }
        let tree = SystemTree::new(root);
        DeviceEnvironment {
            board_id: device::board_id(&tree, &info.name),
            driver: device::driver(&tree, &info.name, info.vendor_id),
            rdma_core: system::rdma_core_version(root),
            ..DeviceEnvironment::common(info, port)
        }
    }

    /// A NetworkDirect adapter from its inventory entry, without sysfs: link layer
    /// `NetworkDirect`, the provider (Winsock catalog name and DLL) as driver, port 1 (ND
    /// adapters have no ports; 1 is what `-i` defaults to), no rate, MTU or rdma-core.
    pub fn from_nd(info: &DeviceInfo) -> DeviceEnvironment {
        DeviceEnvironment {
            link_layer: "NetworkDirect".to_string(),
            driver: info.nd.as_ref().map(|nd| clean(&nd.provider)),
            ..DeviceEnvironment::common(info, 1)
        }
    }

    /// The fields every backend takes from the inventory; no driver or rdma-core.
    fn common(info: &DeviceInfo, port: u8) -> DeviceEnvironment {
        let p = info.ports.iter().find(|p| p.port == port);
        DeviceEnvironment {
            name: clean(&info.name),
            model: info.model.as_deref().map(clean),
            firmware: clean(&info.fw_ver),
            board_id: None,
            link_layer: p.map_or_else(|| "unknown".to_string(), |p| clean(&p.link_layer)),
            rate_gbps: p.and_then(|p| p.rate_gbps),
            active_mtu: p.and_then(|p| p.active_mtu),
            pcie: info.pcie.as_ref().map(|l| Pcie {
                current_speed: l.current_speed.as_deref().map(clean),
                max_speed: l.max_speed.as_deref().map(clean),
                ..l.clone()
            }),
            numa_node: info.numa_node,
            driver: None,
            rdma_core: None,
            port,
        }
    }
}
