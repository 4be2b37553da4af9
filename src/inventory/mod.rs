//! The device inventory behind `rdmabench devices`: a backend-neutral model that the
//! verbs backend fills from the device and port queries, and NetworkDirect from its
//! adapter query.
//! The JSON form is documented in docs/json.md.

pub mod nd;
#[cfg(target_os = "linux")]
mod verbs;

use serde::Serialize;

pub use crate::facts::Pcie;
use crate::transport::Backend;

pub use crate::stamp::SCHEMA_VERSION;

/// Everything `devices` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Inventory {
    /// JSON schema version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The devices, in the verbs library's order.
    pub devices: Vec<DeviceInfo>,
}

/// One RDMA device.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    /// Kernel name (`mlx4_0`, `rxe0`).
    pub name: String,
    /// Node GUID, `xxxx:xxxx:xxxx:xxxx`.
    pub node_guid: String,
    /// System image GUID, same form.
    pub sys_image_guid: String,
    /// `InfiniBand`, `iWARP`, …
    pub transport: String,
    /// `CA`, `RNIC`, …
    pub node_type: String,
    /// Firmware version string as the driver reports it.
    pub fw_ver: String,
    /// IEEE vendor id (Mellanox: 0x02c9 = 713).
    pub vendor_id: u32,
    /// Vendor part id (ConnectX-3: 4099).
    pub vendor_part_id: u32,
    /// Hardware revision.
    pub hw_ver: u32,
    /// Adapter generation, where known (`ConnectX-3`, `Soft-RoCE (rxe)`).
    pub model: Option<String>,
    /// Resource limits and capabilities.
    pub limits: DeviceLimits,
    /// PCIe link of the device's PCI function, when sysfs shows one.
    pub pcie: Option<Pcie>,
    /// NUMA node of the PCI function, when known.
    pub numa_node: Option<u32>,
    /// The ports, numbered from 1.
    pub ports: Vec<PortInfo>,
    /// What only NetworkDirect adapters have (absent for verbs devices).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nd: Option<NdAdapter>,
}

/// A NetworkDirect adapter's own facts (`ND2_ADAPTER_INFO` beyond the common limits).
#[derive(Clone, Debug, Serialize)]
pub struct NdAdapter {
    /// The provider (Winsock catalog name and DLL).
    pub provider: String,
    /// Adapter id, as the provider resolved it.
    pub adapter_id: String,
    /// Local IP addresses it owns.
    pub addresses: Vec<String>,
    /// Largest inline payload, bytes.
    pub max_inline: u32,
    /// Largest transfer, bytes.
    pub max_transfer_length: u32,
    /// SGEs per RDMA read.
    pub max_read_sge: u32,
    /// Private data a connect may carry.
    pub max_caller_data: u32,
    /// Private data an accept may carry.
    pub max_callee_data: u32,
    /// Below this many bytes the provider prefers inline.
    pub inline_request_threshold: u32,
    /// From this many bytes the provider treats a request as large.
    pub large_request_threshold: u32,
    /// Adapter flags that are set.
    pub flags: Vec<String>,
}

/// Resource limits that decide what tests can run (`ibv_query_device`; -1 where
/// NetworkDirect does not say).
#[derive(Clone, Debug, Serialize)]
pub struct DeviceLimits {
    /// Maximum queue pairs.
    pub max_qp: i64,
    /// Maximum outstanding work requests per queue.
    pub max_qp_wr: i64,
    /// Maximum scatter/gather entries per work request.
    pub max_sge: i64,
    /// Maximum completion queues.
    pub max_cq: i64,
    /// Maximum entries per completion queue.
    pub max_cqe: i64,
    /// Maximum memory regions.
    pub max_mr: i64,
    /// Largest memory region, bytes.
    pub max_mr_size: u64,
    /// Maximum protection domains.
    pub max_pd: i64,
    /// Maximum outstanding RDMA reads/atomics a QP accepts as target.
    pub max_qp_rd_atom: i64,
    /// Maximum outstanding RDMA reads/atomics a QP initiates.
    pub max_qp_init_rd_atom: i64,
    /// Atomic capability: `NONE`, `HCA` or `GLOB`.
    pub atomic_cap: String,
}

/// One port.
#[derive(Clone, Debug, Serialize)]
pub struct PortInfo {
    /// Port number (1-based).
    pub port: u8,
    /// Logical state: `ACTIVE`, `DOWN`, …
    pub state: String,
    /// Physical state: `LinkUp`, `Polling`, `Disabled`, …
    pub phys_state: String,
    /// `InfiniBand` or `Ethernet` (RoCE).
    pub link_layer: String,
    /// Active MTU in bytes.
    pub active_mtu: Option<u32>,
    /// Largest MTU the port supports, bytes.
    pub max_mtu: Option<u32>,
    /// Width as the IB spec names it (`4X`), if known.
    pub width: Option<String>,
    /// Lane speed name (`QDR`, `FDR`), if known.
    pub speed: Option<String>,
    /// Nominal rate, Gb/s: what sysfs `rate` and `ibstat` print (4X FDR = 56).
    pub rate_gbps: Option<f64>,
    /// Rate after line encoding, Gb/s: the ceiling for payload (4X FDR = 54.5).
    pub data_rate_gbps: Option<f64>,
    /// LID, on InfiniBand.
    pub lid: Option<u16>,
    /// Subnet manager's LID, on InfiniBand.
    pub sm_lid: Option<u16>,
    /// Size of the GID table.
    pub gid_table_len: u32,
    /// The valid GID entries.
    pub gids: Vec<GidInfo>,
}

/// One valid GID table entry.
#[derive(Clone, Debug, Serialize)]
pub struct GidInfo {
    /// Index: what `-x` selects.
    pub index: u32,
    /// The GID in IPv6 text form (`::ffff:127.0.0.1`, `fe80::…`).
    pub gid: String,
    /// The GID in the colon form of ibv_devinfo and sysfs.
    pub raw: String,
    /// `IB`, `RoCE v1` or `RoCE v2`.
    #[serde(rename = "type")]
    pub gid_type: String,
    /// The network device it belongs to (RoCE).
    pub netdev: Option<String>,
}

/// Why there is no inventory to show.
#[derive(Debug)]
pub enum InventoryError {
    /// The machine has no RDMA stack (no kernel support, no verbs library, other OS).
    NoRdmaStack(String),
    /// The stack is there but lists no device.
    NoDevice,
    /// `-d NAME` names no device.
    UnknownDevice {
        /// What was asked for.
        name: String,
        /// What exists.
        available: Vec<String>,
    },
    /// A query on an existing device failed.
    Query(String),
}

impl std::fmt::Display for InventoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const LAB: &str = "to try rdmabench without hardware, run it in the soft-RoCE lab: \
                           ci/lab-vm target/release/rdmabench devices (see docs/lab.md)";
        match self {
            InventoryError::NoRdmaStack(why) => write!(f, "no RDMA stack on this machine ({why}); {LAB}"),
            InventoryError::NoDevice => write!(
                f,
                "no RDMA device found (the RDMA stack is loaded but lists no device; for soft-RoCE: \
                 modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE); {LAB}"
            ),
            InventoryError::UnknownDevice { name, available } => {
                write!(f, "no RDMA device named '{name}' (found: {})", available.join(", "))
            }
            InventoryError::Query(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for InventoryError {}

impl From<InventoryError> for crate::error::Error {
    fn from(e: InventoryError) -> Self {
        use crate::error::ErrorKind;
        let kind = match e {
            InventoryError::Query(_) => ErrorKind::Device,
            _ => ErrorKind::NoDevice,
        };
        crate::error::Error::new(kind, e.to_string())
    }
}

/// Collects the inventory of every device, or only of `only` (a device name).
pub fn collect(only: Option<&str>, backend: Backend) -> Result<Inventory, InventoryError> {
    let devices = match backend {
        Backend::Nd => nd::collect(only)?,
        Backend::Verbs => collect_devices(only)?,
    };
    Ok(Inventory { schema_version: SCHEMA_VERSION, devices })
}

/// Whether this machine has a verbs stack at all (a client's check before it reaches
/// for its server: `ibv_get_device_list` alone, no device queried). Only the missing
/// stack is an error here; a missing device is the device's open to report.
pub fn verbs_stack_present() -> Result<(), InventoryError> {
    match collect_stack() {
        Err(e @ InventoryError::NoRdmaStack(_)) => Err(e),
        _ => Ok(()),
    }
}

#[cfg(target_os = "linux")]
fn collect_stack() -> Result<(), InventoryError> {
    verbs::stack()
}

#[cfg(not(target_os = "linux"))]
fn collect_stack() -> Result<(), InventoryError> {
    collect_devices(None).map(drop)
}

#[cfg(target_os = "linux")]
fn collect_devices(only: Option<&str>) -> Result<Vec<DeviceInfo>, InventoryError> {
    verbs::collect(only)
}

#[cfg(not(target_os = "linux"))]
fn collect_devices(_only: Option<&str>) -> Result<Vec<DeviceInfo>, InventoryError> {
    Err(InventoryError::NoRdmaStack(
        "verbs is Linux's RDMA interface: on this platform use --backend nd (NetworkDirect)".into(),
    ))
}
