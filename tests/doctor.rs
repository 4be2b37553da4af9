//! `rdmabench doctor --root` over fixture trees: the lab's soft-RoCE host as
//! `doctor --capture` copied it (tests/fixtures/doctor/lab-rxe), and ConnectX-3 FDR and
//! ConnectX-2 QDR hosts written here in the kernel's sysfs layout
//! (Documentation/ABI/stable/sysfs-class-infiniband, sysfs-class-net,
//! sysfs-devices-system-cpu): healthy, PCIe degraded, old firmware, MTU 1500, powersave.
#![cfg(unix)] // the trees use symbolic links, as sysfs does

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A host tree under a scratch directory.
struct Host {
    root: PathBuf,
}

/// A PCIe link: (current GT/s, current width, max GT/s, max width).
type Pcie = (&'static str, u32, &'static str, u32);

impl Host {
    fn new(name: &str) -> Host {
        let root =
            std::env::temp_dir().join(format!("rdmabench-doctor-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        let h = Host { root };
        // A two-socket host, 16 CPUs, tests allowed on node 0's CPUs, root-less user
        // with an unlimited memlock.
        h.cpus(16, "performance", &[("POLL", 0, false), ("C1", 2, false), ("C6", 133, true)]);
        h.file("sys/devices/system/node/node0/cpulist", "0-7");
        h.file("sys/devices/system/node/node1/cpulist", "8-15");
        h.process("unlimited", "0000000000000000", "0-7");
        h.file("proc/sys/kernel/hostname", name);
        h.file("proc/sys/kernel/osrelease", "6.1.0-57-amd64");
        h
    }

    fn file(&self, rel: &str, text: &str) {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{text}\n")).unwrap();
    }

    fn link(&self, rel: &str, to: &str) {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        let target = pathdiff(&self.root.join(to), p.parent().unwrap());
        let _ = fs::remove_file(&p);
        std::os::unix::fs::symlink(target, p).unwrap();
    }

    fn cpus(&self, n: usize, governor: &str, idle: &[(&str, u64, bool)]) {
        for c in 0..n {
            self.file(&format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"), governor);
        }
        for (i, (name, latency, disabled)) in idle.iter().enumerate() {
            let d = format!("sys/devices/system/cpu/cpu0/cpuidle/state{i}");
            self.file(&format!("{d}/name"), name);
            self.file(&format!("{d}/latency"), &latency.to_string());
            self.file(&format!("{d}/disable"), if *disabled { "1" } else { "0" });
        }
    }

    fn process(&self, memlock: &str, cap_eff: &str, allowed: &str) {
        self.file(
            "proc/self/limits",
            &format!("Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         {memlock:<20} {memlock:<20} bytes"),
        );
        self.file(
            "proc/self/status",
            &format!("Name:\trdmabench\nCapEff:\t{cap_eff}\nCpus_allowed_list:\t{allowed}"),
        );
    }

    /// A Mellanox HCA at PCI `addr`: `device` is the PCI device id (ConnectX-3 1003).
    fn hca(&self, name: &str, addr: &str, device: &str, fw: &str, numa: i32, pcie: Pcie) {
        let pci = format!("sys/devices/pci0000:00/0000:00:02.0/{addr}");
        self.file(&format!("{pci}/vendor"), "0x15b3");
        self.file(&format!("{pci}/device"), &format!("0x{device}"));
        self.file(&format!("{pci}/numa_node"), &numa.to_string());
        self.file(&format!("{pci}/current_link_speed"), &format!("{} GT/s PCIe", pcie.0));
        self.file(&format!("{pci}/current_link_width"), &pcie.1.to_string());
        self.file(&format!("{pci}/max_link_speed"), &format!("{} GT/s PCIe", pcie.2));
        self.file(&format!("{pci}/max_link_width"), &pcie.3.to_string());
        let ib = format!("{pci}/infiniband/{name}");
        self.file(&format!("{ib}/fw_ver"), fw);
        self.file(&format!("{ib}/node_type"), "1: CA");
        self.link(&format!("{ib}/device"), &pci);
        self.link(&format!("sys/class/infiniband/{name}"), &ib);
    }

    fn port(
        &self,
        dev: &str,
        port: u8,
        state: &str,
        rate: &str,
        layer: &str,
        gids: &[(u32, &str, &str, &str)],
    ) {
        let d = format!("sys/class/infiniband/{dev}/ports/{port}");
        let (s, ps) = match state {
            "ACTIVE" => ("4: ACTIVE", "5: LinkUp"),
            "INIT" => ("2: INIT", "5: LinkUp"),
            _ => ("1: DOWN", "2: Polling"),
        };
        self.file(&format!("{d}/state"), s);
        self.file(&format!("{d}/phys_state"), ps);
        self.file(&format!("{d}/rate"), rate);
        self.file(&format!("{d}/link_layer"), layer);
        for (i, gid, ty, ndev) in gids {
            self.file(&format!("{d}/gids/{i}"), gid);
            self.file(&format!("{d}/gid_attrs/types/{i}"), ty);
            if !ndev.is_empty() {
                self.file(&format!("{d}/gid_attrs/ndevs/{i}"), ndev);
            }
        }
    }

    /// A netdev of PCI function `addr` (empty: virtual).
    fn netdev(&self, name: &str, addr: &str, hw_type: u32, mtu: u32, extra: &[(&str, &str)]) {
        let dir = if addr.is_empty() {
            format!("sys/devices/virtual/net/{name}")
        } else {
            let pci = format!("sys/devices/pci0000:00/0000:00:02.0/{addr}");
            self.link(&format!("{pci}/net/{name}/device"), &pci);
            format!("{pci}/net/{name}")
        };
        self.file(&format!("{dir}/type"), &hw_type.to_string());
        self.file(&format!("{dir}/mtu"), &mtu.to_string());
        for (k, v) in extra {
            self.file(&format!("{dir}/{k}"), v);
        }
        self.link(&format!("sys/class/net/{name}"), &dir);
    }

    /// ConnectX-3 FDR on InfiniBand with IPoIB in connected mode: everything right.
    fn cx3_fdr(name: &str, pcie: Pcie) -> Host {
        let h = Host::new(name);
        h.hca("mlx4_0", "0000:03:00.0", "1003", "2.42.5000", 0, pcie);
        let gid = "fe80:0000:0000:0000:0002:c903:00a1:b2c1";
        h.port(
            "mlx4_0",
            1,
            "ACTIVE",
            "56 Gb/sec (4X FDR)",
            "InfiniBand",
            &[(0, gid, "IB/RoCE v1", "")],
        );
        h.netdev("ib0", "0000:03:00.0", 32, 65520, &[("mode", "connected"), ("dev_port", "0")]);
        h
    }

    fn doctor(&self, extra: &[&str]) -> (Output, BTreeMap<String, Value>) {
        let json = self.root.with_extension("json");
        let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
            .args(["doctor", "--root"])
            .arg(&self.root)
            .arg("--json")
            .arg(&json)
            .args(extra)
            .output()
            .unwrap();
        let mut checks = BTreeMap::new();
        if let Ok(text) = fs::read_to_string(&json) {
            let v: Value = serde_json::from_str(&text).unwrap();
            for c in v["checks"].as_array().unwrap() {
                let name =
                    format!("{} {}", c["id"].as_str().unwrap(), c["subject"].as_str().unwrap());
                for key in ["id", "status", "observed", "expected", "fix"] {
                    assert!(c.get(key).is_some(), "{name}: no {key}");
                }
                checks.insert(name, c.clone());
            }
            assert_eq!(v["kind"], "doctor");
            assert!(v["environment"]["hostname"].is_string());
        }
        (out, checks)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
        let _ = fs::remove_file(self.root.with_extension("json"));
    }
}

/// `to` relative to directory `from` (both under the same root).
fn pathdiff(to: &Path, from: &Path) -> PathBuf {
    let to: Vec<_> = to.components().collect();
    let from: Vec<_> = from.components().collect();
    let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut p = PathBuf::new();
    for _ in common..from.len() {
        p.push("..");
    }
    for c in &to[common..] {
        p.push(c);
    }
    p
}

fn status<'a>(checks: &'a BTreeMap<String, Value>, name: &str) -> &'a str {
    checks.get(name).unwrap_or_else(|| panic!("no check {name}: {:?}", checks.keys()))["status"]
        .as_str()
        .unwrap()
}

fn text(checks: &BTreeMap<String, Value>, name: &str, key: &str) -> String {
    checks[name][key].as_str().unwrap().to_string()
}

const GEN3_X8: Pcie = ("8.0", 8, "8.0", 8);

#[test]
fn a_healthy_connectx3_fdr_host_passes() {
    let h = Host::cx3_fdr("cx3-healthy", GEN3_X8);
    let (out, c) = h.doctor(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    for name in [
        "port.state mlx4_0/1",
        "port.rate mlx4_0/1",
        "ipoib mlx4_0/1",
        "pcie.link mlx4_0",
        "numa.locality mlx4_0",
        "firmware mlx4_0",
        "cpu.governor host",
        "cpu.cstates host",
        "memlock host",
    ] {
        assert_eq!(status(&c, name), "pass", "{name}: {:?}", c[name]);
    }
    for name in ["roce.mtu mlx4_0/1", "roce.gid mlx4_0/1", "nic.homogeneity host"] {
        assert_eq!(status(&c, name), "na", "{name}");
    }
    assert!(text(&c, "port.rate mlx4_0/1", "observed").contains("4X FDR"));
    assert!(text(&c, "firmware mlx4_0", "observed").contains("ConnectX-3 2.42.5000"));
    // The terminal table: one line per check, a count at the end.
    assert!(stdout.lines().any(|l| l.starts_with("PASS") && l.contains("pcie.link")), "{stdout}");
    assert!(stdout.contains("doctor: 9 pass, 0 warn, 0 fail, 4 n/a"), "{stdout}");
    assert_eq!(status(&c, "hugepages host"), "na", "no /proc/meminfo in the tree");
}

#[test]
fn a_connectx3_in_a_gen2_slot_fails_pcie_with_the_numbers() {
    let h = Host::cx3_fdr("cx3-gen2", ("5.0", 8, "8.0", 8));
    let (out, c) = h.doctor(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(status(&c, "pcie.link mlx4_0"), "fail");
    let observed = text(&c, "pcie.link mlx4_0", "observed");
    // Gen2 x8: 5 GT/s × 8 × 8b/10b = 32 Gb/s, under 4X FDR's 54.5 Gb/s of data.
    assert!(observed.contains("5 GT/s x8 (32.0 Gb/s)") && observed.contains("54.5"), "{observed}");
    assert!(text(&c, "pcie.link mlx4_0", "fix").contains("slot"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("fix: move the card")), "{stdout}");
    // A narrower link that still carries the port is a warning, not a failure.
    let h = Host::cx3_fdr("cx3-x4-gen3", ("8.0", 4, "8.0", 8));
    let (_, c) = h.doctor(&[]);
    assert_eq!(status(&c, "pcie.link mlx4_0"), "fail", "x4 Gen3 = 31.5 Gb/s < 54.5");
    let h = Host::cx3_fdr("cx3-x16", ("8.0", 8, "8.0", 16));
    let (_, c) = h.doctor(&[]);
    assert_eq!(status(&c, "pcie.link mlx4_0"), "warn", "x8 Gen3 = 63 Gb/s carries FDR");
}

#[test]
fn a_connectx2_qdr_with_old_firmware_fails_on_firmware_only() {
    let h = Host::new("cx2-oldfw");
    h.hca("mlx4_0", "0000:04:00.0", "673c", "2.7.700", 0, ("5.0", 8, "5.0", 8));
    let gid = "fe80:0000:0000:0000:0002:c903:000a:0b01";
    h.port(
        "mlx4_0",
        1,
        "ACTIVE",
        "40 Gb/sec (4X QDR)",
        "InfiniBand",
        &[(0, gid, "IB/RoCE v1", "")],
    );
    h.netdev("ib0", "0000:04:00.0", 32, 2044, &[("mode", "datagram"), ("dev_port", "0")]);
    let (out, c) = h.doctor(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(status(&c, "firmware mlx4_0"), "fail");
    assert!(text(&c, "firmware mlx4_0", "observed").contains("ConnectX-2 2.7.700"));
    assert!(text(&c, "firmware mlx4_0", "expected").contains("2.9.8350"));
    assert_eq!(status(&c, "pcie.link mlx4_0"), "pass", "Gen2 x8 is a ConnectX-2's full link");
    assert_eq!(status(&c, "port.rate mlx4_0/1"), "pass");
    assert_eq!(status(&c, "ipoib mlx4_0/1"), "warn", "datagram mode caps TCP over IPoIB");
    assert!(text(&c, "ipoib mlx4_0/1", "fix").contains("connected > /sys/class/net/ib0/mode"));
    let fails: Vec<&String> =
        c.iter().filter(|(_, v)| v["status"] == "fail").map(|(k, _)| k).collect();
    assert_eq!(fails, ["firmware mlx4_0"]);
    // Between the minimum and the last release: a warning.
    let h = Host::new("cx2-mid");
    h.hca("mlx4_0", "0000:04:00.0", "673c", "2.9.8350", 0, ("5.0", 8, "5.0", 8));
    h.port("mlx4_0", 1, "ACTIVE", "40 Gb/sec (4X QDR)", "InfiniBand", &[]);
    assert_eq!(status(&h.doctor(&[]).1, "firmware mlx4_0"), "warn");
}

#[test]
fn degraded_links_and_ports_without_a_subnet_manager_fail() {
    let h = Host::cx3_fdr("cx3-links", GEN3_X8);
    h.port("mlx4_0", 1, "ACTIVE", "14 Gb/sec (1X FDR)", "InfiniBand", &[]);
    h.port("mlx4_0", 2, "INIT", "40 Gb/sec (4X QDR)", "InfiniBand", &[]);
    let (out, c) = h.doctor(&["-d", "mlx4_0"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(status(&c, "port.rate mlx4_0/1"), "fail", "1X of 4X");
    assert!(text(&c, "port.rate mlx4_0/1", "observed").contains("width degraded"));
    assert_eq!(status(&c, "port.rate mlx4_0/2"), "warn", "QDR on an FDR card");
    assert_eq!(status(&c, "port.state mlx4_0/2"), "fail");
    assert!(text(&c, "port.state mlx4_0/2", "fix").contains("opensm"));
    assert_eq!(status(&c, "ipoib mlx4_0/2"), "warn", "no IPoIB interface on port 2");
}

#[test]
fn roce_at_mtu_1500_warns_about_jumbo_frames() {
    let h = Host::new("cx3pro-roce");
    h.hca("mlx4_0", "0000:05:00.0", "1007", "2.42.5000", 1, GEN3_X8);
    let v2 = "0000:0000:0000:0000:0000:ffff:c612:0101";
    let gids = [
        (0, "fe80:0000:0000:0000:0202:c9ff:fe00:0001", "IB/RoCE v1", "eth2"),
        (3, v2, "RoCE v2", "eth2"),
    ];
    h.port("mlx4_0", 1, "ACTIVE", "40 Gb/sec (4X QDR)", "Ethernet", &gids);
    h.netdev("eth2", "0000:05:00.0", 1, 1500, &[("speed", "40000")]);
    let (out, c) = h.doctor(&[]);
    assert_eq!(out.status.code(), Some(0), "warnings alone pass");
    assert_eq!(status(&c, "roce.mtu mlx4_0/1"), "warn");
    assert!(text(&c, "roce.mtu mlx4_0/1", "observed").contains("eth2 MTU 1500 → RoCE MTU 1024"));
    assert!(text(&c, "roce.mtu mlx4_0/1", "fix").contains("ip link set eth2 mtu 9000"));
    assert_eq!(status(&c, "roce.gid mlx4_0/1"), "pass");
    assert!(text(&c, "roce.gid mlx4_0/1", "observed").contains("index 3 = 198.18.1.1"));
    assert_eq!(status(&c, "port.rate mlx4_0/1"), "pass");
    // The device is on node 1, tests may run on node 0: a warning with the fix.
    assert_eq!(status(&c, "numa.locality mlx4_0"), "warn");
    assert!(text(&c, "numa.locality mlx4_0", "fix").contains("--cpunodebind=1"));
    assert_eq!(status(&c, "ipoib mlx4_0/1"), "na");
    h.file("sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0/net/eth2/mtu", "9000");
    let (_, c) = h.doctor(&[]);
    assert_eq!(status(&c, "roce.mtu mlx4_0/1"), "pass");
}

#[test]
fn a_powersave_host_without_memlock_is_told_how_to_fix_it() {
    let h = Host::cx3_fdr("cx3-powersave", GEN3_X8);
    h.cpus(
        16,
        "powersave",
        &[("POLL", 0, false), ("C1", 2, false), ("C1E", 10, false), ("C6", 133, false)],
    );
    h.process("65536", "0000000000000000", "0-7");
    let (out, c) = h.doctor(&[]);
    assert_eq!(out.status.code(), Some(1), "memlock fails");
    assert_eq!(status(&c, "cpu.governor host"), "warn");
    assert!(text(&c, "cpu.governor host", "observed").contains("powersave on CPUs 0-15 of 16"));
    assert_eq!(status(&c, "cpu.cstates host"), "warn");
    assert_eq!(text(&c, "cpu.cstates host", "observed"), "enabled: C6 (133 µs)");
    assert_eq!(status(&c, "memlock host"), "fail");
    assert!(text(&c, "memlock host", "fix").contains("memlock unlimited"));
    // CAP_IPC_LOCK (bit 14) lifts the limit.
    h.process("65536", "0000000000004000", "0-7");
    assert_eq!(status(&h.doctor(&[]).1, "memlock host"), "pass");
}

#[test]
fn unlike_nics_are_reported_as_multichannel_would_see_them() {
    let h = Host::cx3_fdr("cx3-pair", GEN3_X8);
    h.hca("mlx4_1", "0000:82:00.0", "1003", "2.40.7000", 0, GEN3_X8);
    h.port("mlx4_1", 1, "ACTIVE", "40 Gb/sec (4X QDR)", "InfiniBand", &[]);
    let (_, c) = h.doctor(&[]);
    assert_eq!(status(&c, "nic.homogeneity host"), "warn");
    let observed = text(&c, "nic.homogeneity host", "observed");
    assert!(observed.starts_with("firmware, rate differ:"), "{observed}");
    assert!(observed.contains("mlx4_1/1: ConnectX-3 InfiniBand, 40 Gb/s"), "{observed}");
}

#[test]
fn the_lab_rxe_tree_judges_like_the_lab() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor/lab-rxe");
    let json =
        std::env::temp_dir().join(format!("rdmabench-doctor-lab-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["doctor", "--root"])
        .arg(&root)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    fs::remove_file(&json).unwrap();
    let c: BTreeMap<String, &Value> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (format!("{} {}", c["id"].as_str().unwrap(), c["subject"].as_str().unwrap()), c))
        .collect();
    let s = |n: &str| c[n]["status"].as_str().unwrap();
    assert_eq!(s("port.state rxe0/1"), "pass");
    assert_eq!(s("port.rate rxe0/1"), "na", "soft device");
    assert_eq!(s("pcie.link rxe0"), "na");
    assert_eq!(s("firmware rxe0"), "na");
    assert_eq!(s("roce.mtu rxe0/1"), "pass", "lo's MTU is 65536");
    assert_eq!(s("roce.mtu rxe1/1"), "warn", "the veth has 1500");
    assert_eq!(s("roce.gid rxe0/1"), "pass");
    assert_eq!(s("memlock host"), "pass", "root in the lab");
    assert_eq!(s("nic.homogeneity host"), "warn", "rxe0 on lo and rxe1 on a veth differ");
    assert_eq!(s("cpu.governor host"), "na", "a TCG guest has no cpufreq");
}

/// The testsuites of a JUnit file as Python's XML parser reads them: for each, its
/// attributes, properties and testcases (attributes, and the tag of each child).
fn junit(path: &Path) -> Value {
    let script = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
print(json.dumps([{"attrs": s.attrib,
    "properties": {p.get("name"): p.get("value") for p in s.iter("property")},
    "cases": [{"attrs": c.attrib, "children": [x.tag for x in c],
               "failure": (c.find("failure").get("message") if c.find("failure") is not None else None),
               "out": c.findtext("system-out")} for c in s.iter("testcase")]}
    for s in root.iter("testsuite")]))
"#;
    let out = Command::new("python3").args(["-c", script]).arg(path).output().unwrap();
    assert!(out.status.success(), "not JUnit XML: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_host_without_rdma_runs_its_host_checks_and_fails_the_device_checks_by_name() {
    let h = Host::new("no-rdma");
    h.cpus(16, "powersave", &[("POLL", 0, false), ("C6", 133, false)]);
    h.file("proc/meminfo", "MemTotal:       16384000 kB\nHugePages_Total:       0\nHugePages_Free:        0\nHugepagesize:       2048 kB");
    let xml = h.root.with_extension("xml");
    let (out, c) = h.doctor(&["--junit", xml.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(status(&c, "rdma.device host"), "fail");
    let why = text(&c, "rdma.device host", "observed");
    assert!(why.starts_with("no RDMA stack (no "), "{why}");
    for check in ["port.state", "port.rate", "pcie.link", "firmware", "roce.mtu", "numa.locality"] {
        assert!(why.contains(check), "{check} not named: {why}");
    }
    assert_eq!(status(&c, "memlock host"), "pass");
    assert_eq!(status(&c, "cpu.governor host"), "warn");
    assert_eq!(status(&c, "cpu.cstates host"), "warn");
    assert_eq!(status(&c, "hugepages host"), "na");
    assert_eq!(c.len(), 6, "rdma.device and five host checks: {:?}", c.keys());
    assert!(stdout.starts_with("STATUS") && stdout.contains("FAIL   rdma.device"), "{stdout}");
    // The same in JUnit: a failure naming the device checks, warnings visible.
    let suites = junit(&xml);
    let _ = fs::remove_file(&xml);
    let doctor = &suites[0];
    assert_eq!(doctor["attrs"]["name"], "doctor");
    assert_eq!(doctor["attrs"]["tests"], "6");
    assert_eq!(doctor["attrs"]["failures"], "1");
    assert_eq!(doctor["attrs"]["skipped"], "2");
    assert_eq!(doctor["attrs"]["hostname"], "no-rdma");
    assert!(doctor["attrs"]["timestamp"].as_str().unwrap().starts_with("20"), "{doctor}");
    assert_eq!(doctor["properties"]["local.kernel"], "6.1.0-57-amd64");
    assert_eq!(doctor["properties"]["doctor.warnings"], "cpu.governor host, cpu.cstates host");
    let cases = doctor["cases"].as_array().unwrap();
    assert!(cases.iter().all(|c| c["attrs"]["time"].is_string()), "{cases:?}");
    let device = &cases[0];
    assert_eq!(device["attrs"]["name"], "rdma.device host");
    assert!(device["failure"].as_str().unwrap().contains("port.state, port.rate"), "{device}");
    let governor = cases.iter().find(|c| c["attrs"]["name"] == "cpu.governor host").unwrap();
    assert_eq!(governor["children"], serde_json::json!(["system-out"]));
    assert!(governor["out"].as_str().unwrap().starts_with("WARN: "), "{governor}");
    let hugepages = cases.iter().find(|c| c["attrs"]["name"] == "hugepages host").unwrap();
    assert_eq!(hugepages["children"], serde_json::json!(["skipped", "system-out"]));
}

#[test]
fn huge_pages_are_judged_against_a_default_tests_buffers() {
    let h = Host::cx3_fdr("cx3-hugepages", GEN3_X8);
    let meminfo = |total: u32, free: u32| {
        format!(
            "HugePages_Total:    {total}\nHugePages_Free:     {free}\nHugepagesize:       2048 kB"
        )
    };
    h.file("proc/meminfo", &meminfo(1024, 1000));
    let (_, c) = h.doctor(&[]);
    assert_eq!(status(&c, "hugepages host"), "pass", "{:?}", c["hugepages host"]);
    assert!(
        text(&c, "hugepages host", "observed").starts_with("1000 of 1024 pages of 2048 KiB free")
    );
    h.file("proc/meminfo", &meminfo(1, 0));
    let (out, c) = h.doctor(&[]);
    assert_eq!(out.status.code(), Some(0), "a warning passes");
    assert_eq!(status(&c, "hugepages host"), "warn");
    assert!(text(&c, "hugepages host", "fix").starts_with("sysctl vm.nr_hugepages="));
}

#[test]
fn this_host_is_judged_with_or_without_rdma() {
    let dir = std::env::temp_dir().join(format!("rdmabench-doctor-live-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let (json, xml) = (dir.join("doctor.json"), dir.join("doctor.xml"));
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["doctor", "--backend", "verbs", "--json"])
        .arg(&json)
        .arg("--junit")
        .arg(&xml)
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let suites = junit(&xml);
    fs::remove_dir_all(&dir).unwrap();
    let ids: Vec<&str> =
        v["checks"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    for host_check in ["cpu.governor", "cpu.cstates", "memlock", "hugepages"] {
        assert!(ids.contains(&host_check), "{host_check}: {ids:?}");
    }
    let has_rdma =
        Path::new("/sys/class/infiniband").read_dir().is_ok_and(|mut d| d.next().is_some());
    // This host has no RDMA; a lab guest (or a developer's RDMA host) has a device.
    assert_eq!(ids.contains(&"rdma.device"), !has_rdma, "{ids:?}");
    assert_eq!(ids.contains(&"port.state"), has_rdma, "{ids:?}");
    if !has_rdma {
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(suites[0]["attrs"]["tests"], ids.len().to_string());
}

#[test]
fn bad_roots_and_devices_are_one_line_errors() {
    let h = Host::new("empty");
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["doctor", "--root"])
        .arg(&h.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "host checks run, the device check fails");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("no RDMA stack"), "{stdout}");
    let h = Host::cx3_fdr("cx3-baddev", GEN3_X8);
    let (out, _) = h.doctor(&["-d", "mlx5_0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("no RDMA device named 'mlx5_0' (found: mlx4_0)"));
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["doctor", "--root", "/nonexistent"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// One error line naming the file, exit 2, at once (a FIFO hung for ever, /dev/zero took
/// all memory and then passed).
fn refused_quickly(extra: &[&str], root: &Path, why: &str) {
    let start = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["doctor", "--root"])
        .arg(root)
        .args(extra)
        .output()
        .unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(10), "{:?}", start.elapsed());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(why), "{err}");
    assert!(out.stdout.is_empty(), "no verdicts: {}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_device_or_fifo_in_the_tree_is_one_line_error() {
    let h = Host::cx3_fdr("cx3-zero", GEN3_X8);
    let cpuinfo = h.root.join("proc/cpuinfo");
    std::os::unix::fs::symlink("/dev/zero", &cpuinfo).unwrap();
    // A link out of the tree is refused as such, before what it points at is opened.
    let out_of = format!("{}: a link out of the tree {}", cpuinfo.display(), h.root.display());
    refused_quickly(&[], &h.root, &out_of);
    let h = Host::cx3_fdr("cx3-fifo", GEN3_X8);
    let fw = h.root.join("sys/class/infiniband/mlx4_0/fw_ver");
    fs::remove_file(&fw).unwrap();
    assert!(Command::new("mkfifo").arg(&fw).status().unwrap().success());
    refused_quickly(&[], &h.root, &format!("{}: not a regular file", fw.display()));
    let big = h.root.join("proc/self/status");
    fs::remove_file(&fw).unwrap();
    fs::write(&big, "x".repeat((16 << 20) + 1)).unwrap();
    refused_quickly(&[], &h.root, &format!("{}: larger than 16777216 bytes", big.display()));
}

#[test]
fn sysfs_text_full_of_escapes_prints_inert() {
    let h = Host::cx3_fdr("cx3-escapes", GEN3_X8);
    let forged =
        "\u{1b}[2J\u{1b}]0;owned\u{7}2.42.5000\nPASS   firmware         mlx4_0 ok\u{202e}\u{2066}";
    h.file("sys/class/infiniband/mlx4_0/fw_ver", forged);
    h.file("sys/class/infiniband/mlx4_0/ports/1/link_layer", "InfiniBand\r\u{1b}[1A");
    let (out, checks) = h.doctor(&[]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let bad = |c: char| (c.is_control() && c != '\n') || ('\u{2066}'..='\u{2069}').contains(&c);
    assert!(!stdout.contains(bad), "{stdout:?}");
    assert!(!stdout.contains('\u{202e}'), "{stdout:?}");
    let rows = stdout.lines().filter(|l| l.starts_with("PASS") && l.contains("ok")).count();
    assert_eq!(rows, 0, "no forged row: {stdout}");
    let fw = text(&checks, "firmware mlx4_0", "observed");
    assert!(fw.contains("[2J ]0;owned 2.42.5000 PASS firmware mlx4_0 ok"), "{fw}");
}

#[test]
fn a_huge_cpulist_is_refused_not_expanded() {
    let h = Host::cx3_fdr("cx3-cpulist", GEN3_X8);
    // 12 KB of ranges gave 755 MB of CPUs; 48 KB aborted.
    h.file("sys/devices/system/node/node1/cpulist", &vec!["0-65535"; 4000].join(","));
    h.process("unlimited", "0000000000000000", &vec!["0-65535"; 4000].join(","));
    // Refused with one line naming the file (the first list past the bounds).
    let node1 = h.root.join("sys/devices/system/node/node1/cpulist");
    let why = format!("{}: CPU 65535: CPUs are numbered below 8192", node1.display());
    refused_quickly(&[], &h.root, &why);
    // Each list within bounds, but too many CPUs in all the nodes' lists together.
    h.file("sys/devices/system/node/node1/cpulist", "0-8191");
    h.process("unlimited", "0000000000000000", "0-3");
    let why = format!("{}: more than 8192 CPUs listed in all", node1.display());
    refused_quickly(&[], &h.root, &why);
}

#[test]
fn a_capture_is_judged_as_its_host() {
    let h = Host::cx3_fdr("cx3-capture", GEN3_X8);
    h.netdev("eth1", "0000:04:00.0", 1, 1500, &[]);
    let (_, original) = h.doctor(&[]);
    let copy = Host { root: h.root.with_extension("copy") };
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["doctor", "--root"])
        .arg(&h.root)
        .arg("--capture")
        .arg(&copy.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
    let link = fs::read_link(copy.root.join("sys/class/net/ib0/device")).unwrap();
    assert_eq!(link, Path::new("../../../../sys/devices/pci/0000:03:00.0"));
    let (_, captured) = copy.doctor(&[]);
    assert!(original.len() > 10, "{original:?}");
    assert_eq!(captured, original);
    // The lab's tree, captured again, is the same tree.
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor/lab-rxe");
    let again = Host { root: h.root.with_extension("lab") };
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["doctor", "--root"])
        .arg(&lab)
        .arg("--capture")
        .arg(&again.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(tree(&again.root), tree(&lab));
}

/// Every file and link under `dir`: its path and what it holds or points to.
fn tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let (path, kind) = (e.path(), e.file_type().unwrap());
            let rel = path.strip_prefix(dir).unwrap().to_path_buf();
            if kind.is_symlink() {
                out.insert(rel, format!("-> {}", fs::read_link(&path).unwrap().display()));
            } else if kind.is_dir() {
                todo.push(path);
            } else {
                out.insert(rel, fs::read_to_string(&path).unwrap());
            }
        }
    }
    out
}

/// `rdmabench ARGS`, to its end.
fn rdmabench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdmabench")).args(args).output().unwrap()
}

/// qualify on this host, which has no RDMA: without a server and with a bad profile it
/// cannot start, and its junit.xml says why; against a `serve` here, a TCP profile (the
/// missing device waived) runs, and its JUnit, page and table say what was tested.
#[test]
fn qualify_without_rdma_writes_its_junit_whatever_stops_it() {
    assert!(
        !Path::new("/sys/class/infiniband").read_dir().is_ok_and(|mut d| d.next().is_some()),
        "this host has RDMA devices: this test needs a host without (--skip qualify_without_rdma)"
    );
    let dir = std::env::temp_dir().join(format!("rdmabench-qualify-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    // No server: doctor's suite (the device check failing) and the reason.
    let out = rdmabench(&[
        "qualify",
        "quick",
        "--server",
        "127.0.0.1",
        "-p",
        "19761",
        "--quiet",
        "--out",
        &path("none"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot reach") && stderr(&out).lines().count() == 1,
        "{}",
        stderr(&out)
    );
    let suites = junit(&dir.join("none/junit.xml"));
    assert_eq!(suites[0]["attrs"]["name"], "doctor");
    assert_eq!(suites[0]["cases"][0]["attrs"]["name"], "rdma.device host");
    let start = &suites[1]["cases"][0];
    assert_eq!(
        (suites[1]["attrs"]["name"].as_str(), start["attrs"]["name"].as_str()),
        (Some("qualify.quick"), Some("start"))
    );
    assert!(start["failure"].as_str().unwrap().contains("cannot reach"), "{start}");

    // A bad profile: the same file in --out and --junit, naming the mistake.
    fs::write(dir.join("bad.toml"), "[[test]]\ntest = \"write_bww\"\n").unwrap();
    let out = rdmabench(&[
        "qualify",
        &path("bad.toml"),
        "--server",
        "127.0.0.1",
        "--out",
        &path("bad"),
        "--junit",
        &path("bad.xml"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        fs::read(dir.join("bad.xml")).unwrap(),
        fs::read(dir.join("bad/junit.xml")).unwrap()
    );
    let suites = junit(&dir.join("bad.xml"));
    assert_eq!(suites.as_array().unwrap().len(), 1, "doctor never ran: {suites}");
    assert_eq!(suites[0]["attrs"]["name"], "qualify.bad", "named as the profile would be");
    let why = suites[0]["cases"][0]["failure"].as_str().unwrap();
    assert!(why.contains("bad.toml line 1") && why.contains("write_bww"), "{why}");

    // --print-profile: the built-in, as it loads.
    let out = rdmabench(&["qualify", "--print-profile", "quick"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), include_str!("../src/qualify/quick.toml"));

    // Against a serve on this host: TCP only, the missing device waived.
    let mut serve = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["serve", "-p", "19762", "--timeout", "10"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect("127.0.0.1:19762").is_err() {
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "serve never listened");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    fs::write(
        dir.join("tcp.toml"),
        "name = \"tcp\"\nrepeats = 1\nwaive = [\"rdma.device\"]\n\n[[test]]\ntest = \"tcp_bw\"\nsizes = [\"64K\"]\niters = 200\nmin_bw = \"1 MiB/s\"\n\n[[test]]\ntest = \"tcp_lat\"\nsizes = [2]\niters = 200\nmax_lat_typical = \"1 s\"\n",
    )
    .unwrap();
    let out = rdmabench(&[
        "qualify",
        &path("tcp.toml"),
        "--server",
        "127.0.0.1",
        "-p",
        "19762",
        "--quiet",
        "--out",
        &path("tcp"),
    ]);
    let _ = serve.kill();
    let _ = serve.wait();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", stderr(&out));
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap().trim().to_string();
    assert!(stdout.lines().nth(1).unwrap().starts_with(" this host: "), "{stdout}");
    assert!(stdout.contains(&format!("Linux {kernel}")), "{stdout}");
    let suites = junit(&dir.join("tcp/junit.xml"));
    let points = &suites[1];
    assert_eq!(points["attrs"]["name"], "qualify.tcp");
    assert_eq!(points["attrs"]["failures"], "0");
    assert!(points["attrs"]["hostname"].as_str().is_some_and(|h| !h.is_empty()), "{points}");
    for suite in suites.as_array().unwrap() {
        for case in suite["cases"].as_array().unwrap() {
            assert!(case["attrs"]["time"].as_str().unwrap().parse::<f64>().is_ok(), "{case}");
        }
    }
    let time =
        |i: usize| points["cases"][i]["attrs"]["time"].as_str().unwrap().parse::<f64>().unwrap();
    assert!(time(0) > 0.0 && time(1) > 0.0, "{points}");
    assert_eq!(points["properties"]["local.kernel"], kernel.as_str());
    assert_eq!(points["properties"]["server.kernel"], kernel.as_str());
    assert_eq!(points["properties"]["local.interface"], "lo");
    let page = fs::read_to_string(dir.join("tcp/report.html")).unwrap();
    assert!(page.contains("<table id=\"environment\">"), "{page}");
    assert!(
        page.contains(&format!(
            "<tr data-field=\"kernel\"><th>kernel</th><td>{kernel}</td><td>{kernel}</td></tr>"
        )),
        "{page}"
    );
    fs::remove_dir_all(&dir).unwrap();
}
