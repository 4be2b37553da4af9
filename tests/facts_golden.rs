//! What the host facts become, byte for byte: over one fake `/sys` and `/proc` tree (a
//! ConnectX-3 on a PCIe function in a narrower slot, its IPoIB and RoCE netdevs, a
//! soft-RoCE device, CPUs, NUMA nodes and the process's files), the JSON of `devices`
//! (the inventory a verbs query fills, its PCIe link and NUMA node read from the tree),
//! of a result's environment, of the wire's `describe` message, of `doctor` and of
//! `health`'s link facts. The golden file was written by this same test on main before
//! the facts moved to `src/facts/` (RDMABENCH_GOLDEN_WRITE=1 writes it): what the move
//! must not change.
#![cfg(unix)]

use std::path::{Path, PathBuf};

use rdmabench::doctor::{self, Target};
use rdmabench::environment::{DeviceEnvironment, Environment, InterfaceEnvironment};
use rdmabench::inventory::{DeviceInfo, DeviceLimits, GidInfo, Inventory, Pcie, PortInfo};
use rdmabench::results::EffectiveParams;
use rdmabench::session::protocol::Message;
use rdmabench::transport::Backend;
use serde_json::{json, Value};

const GOLDEN: &str = "tests/fixtures/facts/golden.json";
const PCI: &str = "sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0";

/// What the branch reads of a device's PCI function: its PCIe link and NUMA node.
fn pcie_and_numa(root: &Path, name: &str) -> (Option<Pcie>, Option<u32>) {
    let tree = rdmabench::facts::SystemTree::new(root);
    let function = rdmabench::facts::paths::device_dir(name).join("device");
    (Pcie::read(&tree, &function), rdmabench::facts::device::numa_node(&tree, name))
}

struct Tree(PathBuf);

impl Tree {
    fn new() -> Tree {
        let root = std::env::temp_dir().join(format!("rdmabench-golden-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Tree(root)
    }

    fn file(&self, rel: &str, text: &str) {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// `rel` → `to`, relative to `rel`'s folder as sysfs links are.
    fn link(&self, rel: &str, to: &str) {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let ups = Path::new(rel).components().count() - 1;
        let target: PathBuf = (0..ups).map(|_| "..").collect::<PathBuf>().join(to);
        std::os::unix::fs::symlink(target, path).unwrap();
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The host: one CX3 (IB port 1, RoCE port 2), rxe0 over eth1, four CPUs on two nodes.
fn host() -> Tree {
    let t = Tree::new();
    for (file, text) in [
        ("vendor", "0x15b3\n"),
        ("device", "0x1003\n"),
        ("current_link_speed", "5.0 GT/s PCIe\n"),
        ("current_link_width", "8\n"),
        ("max_link_speed", "8.0 GT/s PCIe\n"),
        ("max_link_width", "8\n"),
        ("numa_node", "1\n"),
    ] {
        t.file(&format!("{PCI}/{file}"), text);
    }
    t.file("sys/bus/pci/drivers/mlx4_core/bind", "");
    t.link(&format!("{PCI}/driver"), "sys/bus/pci/drivers/mlx4_core");
    let ib = "sys/class/infiniband/mlx4_0";
    t.link(&format!("{ib}/device"), PCI);
    t.file(&format!("{ib}/fw_ver"), "2.42.5000\n");
    t.file(&format!("{ib}/node_type"), "1: CA\n");
    t.file(&format!("{ib}/board_id"), "MT_1090120019\n");
    let ports = [
        (
            "1",
            "InfiniBand",
            "56 Gb/sec (4X FDR)",
            "fe80:0000:0000:0000:0002:c903:0001:0001",
            "IB",
            "",
        ),
        (
            "2",
            "Ethernet",
            "40 Gb/sec (4X QDR)",
            "0000:0000:0000:0000:0000:ffff:c612:0001",
            "RoCE v2",
            "eth2",
        ),
    ];
    for (p, layer, rate, gid, kind, ndev) in ports {
        let dir = format!("{ib}/ports/{p}");
        t.file(&format!("{dir}/state"), "4: ACTIVE\n");
        t.file(&format!("{dir}/phys_state"), "5: LinkUp\n");
        t.file(&format!("{dir}/rate"), &format!("{rate}\n"));
        t.file(&format!("{dir}/link_layer"), &format!("{layer}\n"));
        t.file(&format!("{dir}/gids/0"), &format!("{gid}\n"));
        t.file(&format!("{dir}/gids/1"), "0000:0000:0000:0000:0000:0000:0000:0000\n");
        t.file(&format!("{dir}/gid_attrs/types/0"), &format!("{kind}\n"));
        if !ndev.is_empty() {
            t.file(&format!("{dir}/gid_attrs/ndevs/0"), &format!("{ndev}\n"));
        }
        t.file(&format!("{dir}/counters/port_rcv_packets"), "12\n");
    }
    let rxe = "sys/class/infiniband/rxe0";
    t.file(&format!("{rxe}/parent"), "eth1\n");
    t.file(&format!("{rxe}/fw_ver"), "0.0.0\n");
    t.file(&format!("{rxe}/node_type"), "1: CA\n");
    t.file(&format!("{rxe}/ports/1/state"), "4: ACTIVE\n");
    t.file(&format!("{rxe}/ports/1/phys_state"), "5: LinkUp\n");
    t.file(&format!("{rxe}/ports/1/rate"), "2.5 Gb/sec (1X SDR)\n");
    t.file(&format!("{rxe}/ports/1/link_layer"), "Ethernet\n");
    t.link("sys/class/net/ib0/device", PCI);
    for (net, files) in [
        ("ib0", &[("type", "32"), ("mtu", "2044"), ("mode", "datagram"), ("dev_port", "0")][..]),
        ("eth1", &[("type", "1"), ("mtu", "1500"), ("speed", "-1")][..]),
        ("eth2", &[("type", "1"), ("mtu", "9000"), ("speed", "40000")][..]),
        ("lo", &[("type", "772"), ("mtu", "65536")][..]),
    ] {
        for (file, text) in files {
            t.file(&format!("sys/class/net/{net}/{file}"), &format!("{text}\n"));
        }
    }
    for cpu in 0..4 {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}");
        t.file(&format!("{dir}/cpufreq/scaling_governor"), "performance\n");
        for (s, name, latency) in [(0, "POLL", 0), (1, "C1", 2), (2, "C6", 133)] {
            t.file(&format!("{dir}/cpuidle/state{s}/name"), &format!("{name}\n"));
            t.file(&format!("{dir}/cpuidle/state{s}/latency"), &format!("{latency}\n"));
            t.file(&format!("{dir}/cpuidle/state{s}/disable"), "0\n");
        }
    }
    t.file("sys/devices/system/node/node0/cpulist", "0-1\n");
    t.file("sys/devices/system/node/node1/cpulist", "2-3\n");
    t.file(
        "proc/self/status",
        "Name:\trdmabench\nCpus_allowed_list:\t0-3\nCapEff:\t0000000000000000\n",
    );
    t.file(
        "proc/self/limits",
        "Limit                     Soft Limit           Hard Limit           Units     \n\
         Max locked memory         8388608              8388608              bytes     \n",
    );
    t.file("proc/meminfo", "MemTotal:       16318128 kB\nHugePages_Total:       0\nHugePages_Free:        0\nHugepagesize:       2048 kB\n");
    t.file(
        "proc/cpuinfo",
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz\n\n\
         processor\t: 1\n\nprocessor\t: 2\n\nprocessor\t: 3\n",
    );
    t.file("proc/sys/kernel/hostname", "node1\n");
    t.file("proc/sys/kernel/osrelease", "6.1.0-57-amd64\n");
    t.file("etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=Debian\n");
    t.file(
        "proc/self/maps",
        "7f10-7f11 r-xp 00000000 fe:01 2 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0\n",
    );
    t
}

/// mlx4_0 as `ibv_query_device` and `ibv_query_port` would give it.
fn cx3(root: &Path) -> DeviceInfo {
    let port = |port: u8, link_layer: &str, mtu: u32, rate: f64, gid: &str, kind: &str| PortInfo {
        port,
        state: "ACTIVE".into(),
        phys_state: "LinkUp".into(),
        link_layer: link_layer.into(),
        active_mtu: Some(mtu),
        max_mtu: Some(4096),
        width: Some("4X".into()),
        speed: Some("FDR".into()),
        rate_gbps: Some(rate),
        data_rate_gbps: Some(54.545),
        lid: Some(1),
        sm_lid: Some(1),
        gid_table_len: 128,
        gids: vec![GidInfo {
            index: 0,
            gid: gid.into(),
            raw: gid.into(),
            gid_type: kind.into(),
            netdev: None,
        }],
    };
    let (pcie, numa_node) = pcie_and_numa(root, "mlx4_0");
    DeviceInfo {
        name: "mlx4_0".into(),
        node_guid: "0002:c903:0001:0000".into(),
        sys_image_guid: "0002:c903:0001:0003".into(),
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
        pcie,
        numa_node,
        ports: vec![
            port(1, "InfiniBand", 4096, 56.0, "fe80::2:c903:1:1", "IB"),
            port(2, "Ethernet", 1024, 40.0, "::ffff:198.18.0.1", "RoCE v2"),
        ],
        nd: None,
    }
}

fn params() -> EffectiveParams {
    serde_json::from_value(json!({
        "device": "mlx4_0", "ib_port": 1, "link_layer": "InfiniBand", "gid_index": 0,
        "mtu": 4096, "connection": "RC", "qps": 1, "sizes": [65536],
        "run": {"iterations": 10}, "tx_depth": 128, "rx_depth": 1, "cq_mod": 1,
        "post_list": 1, "inline_size": 0, "outs": 16, "events": false,
        "bidirectional": false, "rdma_cm": false, "validate": false,
        "atomic_type": null, "bw_unit": "MiB/s", "latency_is": "round trip"
    }))
    .unwrap()
}

/// Everything the facts become, as one JSON text.
fn outputs(root: &Path) -> String {
    let info = cx3(root);
    let inventory = Inventory {
        schema_version: rdmabench::inventory::SCHEMA_VERSION,
        devices: vec![info.clone()],
    };
    let mut environment = Environment::host_at(root);
    environment.device = Some(DeviceEnvironment::from_inventory(&info, 1, root));
    environment.interface = Some(InterfaceEnvironment::named("eth2", root));
    let lo = InterfaceEnvironment::named("lo", root);
    // The wire's own form, the parameters (not host facts) left out.
    let params_json = serde_json::to_string(&params()).unwrap();
    let describe = Message::Describe { environment: environment.clone(), params: params() };
    let describe = serde_json::to_string(&describe).unwrap().replace(&params_json, "\"PARAMS\"");
    // doctor's checks, less the two whose yardstick is a test's buffers (the spec's).
    let doctor = doctor::diagnose(&Target { device: None, root, backend: Backend::Verbs }).unwrap();
    let mut doctor = serde_json::to_value(&doctor).unwrap();
    let checks = doctor["checks"].as_array_mut().unwrap();
    checks.retain(|c| c["id"] != "memlock" && c["id"] != "hugepages");
    let facts = doctor_facts(root);
    let mut text = String::new();
    for (name, json) in [
        ("devices", serde_json::to_string(&inventory).unwrap()),
        ("environment", serde_json::to_string(&environment).unwrap()),
        ("interface lo", serde_json::to_string(&lo).unwrap()),
        ("describe", describe),
        ("doctor", serde_json::to_string(&doctor).unwrap()),
        ("health link facts", facts),
    ] {
        text.push_str(&format!("{name}: {json}\n"));
    }
    // A release's version is no host fact.
    let version = format!("\"rdmabench\":\"{}\"", env!("CARGO_PKG_VERSION"));
    text.replace(&version, "\"rdmabench\":\"VERSION\"")
}

/// `health`'s link facts of each port doctor's facts show.
fn doctor_facts(root: &Path) -> String {
    let tree = rdmabench::facts::SystemTree::new(root);
    let host = rdmabench::facts::HostFacts::read(&tree);
    let rdma_core = rdmabench::facts::system::rdma_core_version(root);
    let links: Vec<Value> = host
        .nics
        .iter()
        .flat_map(|n| n.ports.iter().map(move |p| (n, p)))
        .map(|(n, p)| {
            serde_json::to_value(rdmabench::health::probe::link_facts(n, p, rdma_core.as_deref()))
                .unwrap()
        })
        .collect();
    serde_json::to_string(&links).unwrap()
}

#[test]
fn the_facts_print_as_they_did_before_they_moved() {
    let t = host();
    let now = outputs(&t.0);
    if std::env::var_os("RDMABENCH_GOLDEN_WRITE").is_some() {
        std::fs::create_dir_all(Path::new(GOLDEN).parent().unwrap()).unwrap();
        std::fs::write(GOLDEN, &now).unwrap();
    }
    let golden = std::fs::read_to_string(GOLDEN).unwrap();
    for (line, (a, b)) in now.lines().zip(golden.lines()).enumerate() {
        assert_eq!(a, b, "line {} differs from {GOLDEN}", line + 1);
    }
    assert_eq!(now.lines().count(), golden.lines().count());
    // The golden is no empty shell: the slot's PCIe link, the node, the board, the driver.
    for seen in [
        "\"current_speed\":\"5.0 GT/s PCIe\"",
        "\"numa_node\":1",
        "\"board_id\":\"MT_1090120019\"",
        "\"driver\":\"mlx4_core\"",
        "\"rdma_core\":\"44.0\"",
        "\"pcie\":\"5 GT/s x8\"",
        "\"speed_mbps\":40000",
    ] {
        assert!(now.contains(seen), "{seen} missing from\n{now}");
    }
}
