//! Whole environments over fixture trees of two hosts: the soft-RoCE lab (rxe0 over lo,
//! no PCI, no cpufreq) and a ConnectX-3 node (mlx4_0 on PCI, driver mlx4_core, NUMA node
//! 0, governor powersave); the JSON form; and, in the lab, rxe0 itself.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::inventory::{DeviceInfo, DeviceLimits, NdAdapter, Pcie, PortInfo};

/// A fixture root in the temp folder, removed when dropped.
struct Tree(PathBuf);

impl Tree {
    /// A fresh tree: tests run in parallel, so each call has its own folder.
    fn new(name: &str) -> Tree {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("rdmabench-env-{}-{name}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Tree(dir)
    }

    fn file(&self, rel: &str, text: &str) -> &Tree {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
        self
    }

    /// A relative symlink, as sysfs has them.
    fn link(&self, rel: &str, target: &str) -> &Tree {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
        self
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const CPUINFO_QEMU: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: QEMU TCG CPU version 2.5+\n\n\
                            processor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: QEMU TCG CPU version 2.5+\n";
const CPUINFO_XEON: &str = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz\n\n\
                            processor\t: 1\nmodel name\t: Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz\n";

/// The lab: Debian 12, two QEMU CPUs, no cpufreq, rxe0 on lo (1X SDR, MTU 4096, as the
/// lab's rxe0 reports), libibverbs in multiarch.
fn lab_tree() -> Tree {
    let t = Tree::new("lab");
    t.file("proc/sys/kernel/hostname", "virtme-ng\n")
        .file("proc/sys/kernel/osrelease", "6.1.0-57-amd64\n")
        .file(
            "etc/os-release",
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n",
        )
        .file("proc/cpuinfo", CPUINFO_QEMU)
        .file("sys/class/infiniband/rxe0/parent", "lo\n")
        .file("sys/class/infiniband/rxe0/fw_ver", "0.0.0\n")
        .file("sys/module/rdma_rxe/refcnt", "1\n")
        .file("usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", "")
        .file("usr/lib/x86_64-linux-gnu/libibverbs.so.1", "")
        .file("sys/class/net/lo/mtu", "65536\n");
    t
}

/// A ConnectX-3 node: Debian 11 without os-release in /etc, a PCI function with its
/// driver link, governor powersave, rdma-core only in the dpkg status, eth2 at 10 Gb/s.
fn cx3_tree() -> Tree {
    let t = Tree::new("cx3");
    let pci = "sys/devices/pci0000:00/0000:00:03.0/0000:04:00.0";
    t.file("proc/sys/kernel/hostname", "node1\n")
        .file("proc/sys/kernel/osrelease", "5.10.0-30-amd64\n")
        .file("usr/lib/os-release", "NAME='Debian GNU/Linux'\nVERSION_ID=\"11\"\n")
        .file("proc/cpuinfo", CPUINFO_XEON)
        .file("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave\n")
        .file(&format!("{pci}/numa_node"), "0\n")
        .file("sys/class/infiniband/mlx4_0/board_id", "MT_1090120019\n")
        .file(&format!("{pci}/current_link_speed"), "8.0 GT/s PCIe\n")
        .link(&format!("{pci}/driver"), "../../../../bus/pci/drivers/mlx4_core")
        .link(
            "sys/class/infiniband/mlx4_0/device",
            "../../../devices/pci0000:00/0000:00:03.0/0000:04:00.0",
        )
        .file(
            "var/lib/dpkg/status",
            "Package: ibverbs-providers\nStatus: install ok installed\nVersion: 33.2-1\n",
        )
        .file("sys/class/net/eth2/mtu", "9000\n")
        .file("sys/class/net/eth2/speed", "10000\n")
        .file("sys/class/net/ib0/mtu", "2044\n")
        .file("sys/class/net/ib0/speed", "-1\n");
    t
}

fn limits() -> DeviceLimits {
    DeviceLimits {
        max_qp: 1,
        max_qp_wr: 1,
        max_sge: 1,
        max_cq: 1,
        max_cqe: 1,
        max_mr: 1,
        max_mr_size: 1,
        max_pd: 1,
        max_qp_rd_atom: 1,
        max_qp_init_rd_atom: 1,
        atomic_cap: "NONE".into(),
    }
}

fn port(port: u8, link_layer: &str, mtu: u32, rate: f64) -> PortInfo {
    PortInfo {
        port,
        state: "ACTIVE".into(),
        phys_state: "LinkUp".into(),
        link_layer: link_layer.into(),
        active_mtu: Some(mtu),
        max_mtu: Some(4096),
        width: None,
        speed: None,
        rate_gbps: Some(rate),
        data_rate_gbps: None,
        lid: None,
        sm_lid: None,
        gid_table_len: 0,
        gids: Vec::new(),
    }
}

fn device(name: &str, vendor_id: u32, fw: &str, model: &str, ports: Vec<PortInfo>) -> DeviceInfo {
    DeviceInfo {
        name: name.into(),
        node_guid: "-".into(),
        sys_image_guid: "-".into(),
        transport: "InfiniBand".into(),
        node_type: "CA".into(),
        fw_ver: fw.into(),
        vendor_id,
        vendor_part_id: 4099,
        hw_ver: 0,
        model: Some(model.into()),
        limits: limits(),
        pcie: None,
        numa_node: None,
        ports,
        nd: None,
    }
}

fn rxe0() -> DeviceInfo {
    device("rxe0", 0xff_ffff, "0.0.0", "Soft-RoCE (rxe)", vec![port(1, "Ethernet", 4096, 2.5)])
}

fn mlx4_0() -> DeviceInfo {
    let ports = vec![port(1, "InfiniBand", 4096, 56.0), port(2, "Ethernet", 1024, 40.0)];
    DeviceInfo {
        pcie: Some(Pcie {
            current_speed: Some("8.0 GT/s PCIe".into()),
            current_width: Some(8),
            max_speed: Some("8.0 GT/s PCIe".into()),
            max_width: Some(8),
        }),
        numa_node: Some(0),
        ..device("mlx4_0", 0x02c9, "2.42.5000", "ConnectX-3", ports)
    }
}

#[test]
fn lab_host_with_rxe0() {
    let t = lab_tree();
    let mut env = Environment::host_at(&t.0);
    env.device = Some(DeviceEnvironment::from_inventory(&rxe0(), 1, &t.0));
    let expected = Environment {
        hostname: "virtme-ng".into(),
        kernel: "6.1.0-57-amd64".into(),
        os: "Debian GNU/Linux 12 (bookworm)".into(),
        cpu_model: "QEMU TCG CPU version 2.5+".into(),
        cpus: 2,
        governor: None,
        rdmabench: env!("CARGO_PKG_VERSION").into(),
        device: Some(DeviceEnvironment {
            name: "rxe0".into(),
            model: Some("Soft-RoCE (rxe)".into()),
            firmware: "0.0.0".into(),
            board_id: None,
            link_layer: "Ethernet".into(),
            rate_gbps: Some(2.5),
            active_mtu: Some(4096),
            pcie: None,
            numa_node: None,
            driver: Some("rdma_rxe".into()),
            rdma_core: Some("44.0".into()),
            port: 1,
        }),
        interface: None,
    };
    assert_eq!(env, expected);
    assert_eq!(
        env.summary(),
        "virtme-ng: Linux 6.1.0-57-amd64, Debian GNU/Linux 12 (bookworm), 2 x QEMU TCG CPU version \
         2.5+; rxe0 port 1, Soft-RoCE (rxe), fw 0.0.0, Ethernet 2.5 Gb/s, MTU 4096, driver rdma_rxe, \
         rdma-core 44.0"
    );
    let lo = InterfaceEnvironment::named("lo", &t.0);
    assert_eq!(lo, InterfaceEnvironment { name: "lo".into(), mtu: Some(65536), speed_mbps: None });
}

#[test]
fn connectx3_host_with_mlx4_0() {
    let t = cx3_tree();
    let mut env = Environment::host_at(&t.0);
    env.device = Some(DeviceEnvironment::from_inventory(&mlx4_0(), 1, &t.0));
    let pcie = Pcie {
        current_speed: Some("8.0 GT/s PCIe".into()),
        current_width: Some(8),
        max_speed: Some("8.0 GT/s PCIe".into()),
        max_width: Some(8),
    };
    let expected = Environment {
        hostname: "node1".into(),
        kernel: "5.10.0-30-amd64".into(),
        os: "Debian GNU/Linux".into(),
        cpu_model: "Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz".into(),
        cpus: 2,
        governor: Some("powersave".into()),
        rdmabench: env!("CARGO_PKG_VERSION").into(),
        device: Some(DeviceEnvironment {
            name: "mlx4_0".into(),
            model: Some("ConnectX-3".into()),
            firmware: "2.42.5000".into(),
            board_id: Some("MT_1090120019".into()),
            link_layer: "InfiniBand".into(),
            rate_gbps: Some(56.0),
            active_mtu: Some(4096),
            pcie: Some(pcie),
            numa_node: Some(0),
            driver: Some("mlx4_core".into()),
            rdma_core: Some("33.2".into()),
            port: 1,
        }),
        interface: None,
    };
    assert_eq!(env, expected);
    assert_eq!(
        env.summary(),
        "node1: Linux 5.10.0-30-amd64, Debian GNU/Linux, 2 x Intel(R) Xeon(R) CPU E5-2680 v2 @ \
         2.80GHz, governor powersave; mlx4_0 port 1, ConnectX-3, board MT_1090120019, fw 2.42.5000, InfiniBand 56 Gb/s, \
         MTU 4096, PCIe 8.0 GT/s x8, NUMA node 0, driver mlx4_core, rdma-core 33.2"
    );
    let port2 = DeviceEnvironment::from_inventory(&mlx4_0(), 2, &t.0);
    assert_eq!(
        (port2.port, port2.link_layer.as_str(), port2.rate_gbps),
        (2, "Ethernet", Some(40.0))
    );
    let port3 = DeviceEnvironment::from_inventory(&mlx4_0(), 3, &t.0);
    assert_eq!(
        (port3.link_layer.as_str(), port3.rate_gbps, port3.active_mtu),
        ("unknown", None, None)
    );
}

#[test]
fn connectx3_host_over_tcp() {
    let t = cx3_tree();
    let mut env = Environment::host_at(&t.0);
    env.interface = Some(InterfaceEnvironment::named("eth2", &t.0));
    let eth2 =
        InterfaceEnvironment { name: "eth2".into(), mtu: Some(9000), speed_mbps: Some(10000) };
    assert_eq!(env.interface.as_ref(), Some(&eth2));
    assert!(env.summary().ends_with("governor powersave; interface eth2, MTU 9000, 10000 Mb/s"));
    let ib0 = InterfaceEnvironment::named("ib0", &t.0);
    assert_eq!((ib0.mtu, ib0.speed_mbps), (Some(2044), None), "speed -1 is unknown");
    let missing = InterfaceEnvironment::named("../../etc", &t.0);
    assert_eq!((missing.mtu, missing.speed_mbps), (None, None));
}

#[test]
fn an_empty_root_gives_unknowns() {
    let t = Tree::new("empty");
    let env = Environment::host_at(&t.0);
    assert_eq!(
        (env.hostname.as_str(), env.kernel.as_str(), env.os.as_str()),
        ("unknown", "unknown", "unknown")
    );
    assert_eq!((env.cpu_model.as_str(), env.governor.as_deref()), ("unknown", None));
    assert!(env.cpus >= 1, "falls back to std's count");
    let mut unknown = rxe0();
    unknown.vendor_id = 0x1234;
    let dev = DeviceEnvironment::from_inventory(&unknown, 1, &t.0);
    assert_eq!((dev.driver, dev.rdma_core), (None, None));
}

#[test]
fn networkdirect_adapters_need_no_sysfs() {
    let mut info = device("192.168.1.11", 0x15b3, "", "ConnectX-3", Vec::new());
    info.transport = "NetworkDirect".into();
    info.nd = Some(NdAdapter {
        provider: "Mellanox ND2 (mlx4nd2.dll)".into(),
        adapter_id: "0x1".into(),
        addresses: vec!["192.168.1.11".into()],
        max_inline: 0,
        max_transfer_length: 0,
        max_read_sge: 0,
        max_caller_data: 0,
        max_callee_data: 0,
        inline_request_threshold: 0,
        large_request_threshold: 0,
        flags: Vec::new(),
    });
    let nd = DeviceEnvironment::from_nd(&info);
    assert_eq!(nd, DeviceEnvironment::from_inventory(&info, 1, Path::new("/nonexistent")));
    assert_eq!(
        nd.summary(),
        "192.168.1.11 port 1, ConnectX-3, NetworkDirect, driver Mellanox ND2 (mlx4nd2.dll)"
    );
    assert_eq!((nd.rdma_core, nd.pcie, nd.active_mtu), (None, None, None));
}

#[test]
fn json_keeps_governor_null_and_leaves_out_what_a_test_lacks() {
    let t = lab_tree();
    let mut env = Environment::host_at(&t.0);
    env.device = Some(DeviceEnvironment::from_inventory(&rxe0(), 1, &t.0));
    let json: serde_json::Value = serde_json::to_value(&env).unwrap();
    let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    let want = ["cpu_model", "cpus", "device", "governor", "hostname", "kernel", "os", "rdmabench"];
    assert_eq!(keys, want);
    assert!(json["governor"].is_null());
    assert!(json["device"]["pcie"].is_null() && json["device"]["numa_node"].is_null());
    assert_eq!(json["device"]["rate_gbps"], 2.5);
    let back: Environment = serde_json::from_value(json).unwrap();
    assert_eq!(back, env);
    let tcp = Environment {
        device: None,
        interface: Some(InterfaceEnvironment::named("lo", &t.0)),
        ..env
    };
    let text = serde_json::to_string(&tcp).unwrap();
    assert!(text.contains(r#""interface":{"name":"lo","mtu":65536,"speed_mbps":null}"#), "{text}");
    assert_eq!(serde_json::from_str::<Environment>(&text).unwrap(), tcp);
}

#[test]
#[ignore = "lab: needs soft-RoCE rxe0 (run inside ci/lab-vm)"]
fn lab_environment_describes_rxe0() {
    let name = std::env::var("RDMABENCH_DEVICE").expect("RDMABENCH_DEVICE names the lab device");
    let inventory =
        crate::inventory::collect(Some(&name), crate::transport::Backend::Verbs).unwrap();
    let root = Path::new("/");
    let mut env = Environment::host();
    env.device = Some(DeviceEnvironment::from_inventory(&inventory.devices[0], 1, root));
    let dev = env.device.as_ref().unwrap();
    assert_eq!(dev.model.as_deref(), Some("Soft-RoCE (rxe)"));
    assert!(!dev.firmware.is_empty());
    assert_eq!(dev.link_layer, "Ethernet");
    assert!(dev.active_mtu.is_some());
    assert_eq!(dev.driver.as_deref(), Some("rdma_rxe"));
    assert!(dev.rdma_core.is_some());
    assert_eq!((dev.pcie.as_ref(), dev.numa_node), (None, None));
    println!("environment: {}", env.summary());
    let lo = InterfaceEnvironment::for_ip("127.0.0.1".parse().unwrap(), root).unwrap();
    assert_eq!((lo.name.as_str(), lo.mtu), ("lo", Some(65536)));
    let veth = InterfaceEnvironment::for_ip("198.18.0.1".parse().unwrap(), root).unwrap();
    println!(
        "environment: {}",
        Environment { device: None, interface: Some(veth), ..env }.summary()
    );
}
