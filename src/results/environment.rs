//! What a result ran on, as the result model holds it: the host, and its RDMA device
//! and port or its network interface. Data only: `environment/` reads them (docs/json.md,
//! "environment").

use serde::{Deserialize, Serialize};

use crate::facts::Pcie;

/// The host a side ran on, and its RDMA device or network interface.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Host name (`/proc/sys/kernel/hostname`).
    pub hostname: String,
    /// Linux kernel release (`/proc/sys/kernel/osrelease`); `unknown` elsewhere.
    pub kernel: String,
    /// Distribution (`PRETTY_NAME` of `/etc/os-release`), or the platform's name.
    pub os: String,
    /// CPU model (`model name` of `/proc/cpuinfo`); `unknown` where it says none.
    pub cpu_model: String,
    /// Logical CPUs (`processor` entries of `/proc/cpuinfo`).
    pub cpus: u32,
    /// cpufreq governor of CPU 0; `None` without cpufreq (VMs, `intel_idle` only).
    pub governor: Option<String>,
    /// rdmabench's version, e.g. `0.1.0`.
    pub rdmabench: String,
    /// The RDMA device and port (RDMA tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceEnvironment>,
    /// The network interface of the test's local address (TCP tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<InterfaceEnvironment>,
}

/// The RDMA device and port a test ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceEnvironment {
    /// Device name (`mlx4_0`, `rxe0`; a NetworkDirect adapter's IP address).
    pub name: String,
    /// Adapter generation (`ConnectX-3`, `Soft-RoCE (rxe)`), where known.
    pub model: Option<String>,
    /// Firmware version (`2.42.5000`; rxe `0.0.0`; empty for NetworkDirect).
    pub firmware: String,
    /// Board id (`board_id` in sysfs: Mellanox's PSID, `MT_1090120019`); soft devices
    /// and NetworkDirect have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_id: Option<String>,
    /// Link layer of the port: `InfiniBand`, `Ethernet`, or `NetworkDirect`.
    pub link_layer: String,
    /// Nominal rate of the port, Gb/s (4X FDR = 56).
    pub rate_gbps: Option<f64>,
    /// Active MTU of the port, bytes.
    pub active_mtu: Option<u32>,
    /// PCIe link of the device's PCI function; `None` for soft devices.
    pub pcie: Option<Pcie>,
    /// NUMA node of the PCI function.
    pub numa_node: Option<u32>,
    /// Kernel driver (`mlx4_core`, `rdma_rxe`); for NetworkDirect, the provider.
    pub driver: Option<String>,
    /// rdma-core (libibverbs) version, e.g. `44.0`.
    pub rdma_core: Option<String>,
    /// Port number, from 1.
    pub port: u8,
}

/// The network interface that holds a test's local IP address.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InterfaceEnvironment {
    /// Interface name (`lo`, `eth0`).
    pub name: String,
    /// MTU, bytes (`/sys/class/net/<if>/mtu`).
    pub mtu: Option<u32>,
    /// Link speed, Mb/s (`/sys/class/net/<if>/speed`); `None` when unknown (-1, `lo`).
    pub speed_mbps: Option<u64>,
}
