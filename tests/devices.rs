//! `rdmabench devices` as a user meets it. The host tests run everywhere; the `lab_`
//! tests need the soft-RoCE lab (ci/lab-vm) and fail when its device is missing.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn rdmabench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdmabench")).args(args).output().expect("rdmabench runs")
}

fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr).lines().map(str::to_string).collect()
}

/// What `devices` says on a host without RDMA: on Windows (these tests run under wine
/// too, ci/wine/run) an empty Winsock catalog of NetworkDirect providers.
const NO_ND_PROVIDER: &str = "rdmabench: no NetworkDirect provider is installed: install the adapter's driver with NetworkDirect (WinOF / WinOF-2 for ConnectX) and enable it (Set-NetOffloadGlobalSetting -NetworkDirect Enabled)";

fn host_has_rdma_devices() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

#[test]
fn unknown_device_is_one_error_line_and_exit_2() {
    let out = rdmabench(&["devices", "-d", "no-such-dev0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(line.starts_with("rdmabench: "), "{line}");
    if host_has_rdma_devices() {
        assert!(line.contains("no RDMA device named 'no-such-dev0' (found: "), "{line}");
    } else if cfg!(windows) {
        assert_eq!(line, NO_ND_PROVIDER);
    } else {
        assert!(line.contains("no RDMA stack on this machine"), "{line}");
    }
}

#[test]
fn devices_on_this_host_lists_or_explains() {
    let out = rdmabench(&["devices"]);
    if host_has_rdma_devices() {
        assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
        assert!(!out.stdout.is_empty());
    } else {
        // No RDMA here: one line that says so and how to start the lab.
        assert_eq!(out.status.code(), Some(2));
        let lines = stderr_lines(&out);
        assert_eq!(lines.len(), 1, "{lines:?}");
        if cfg!(windows) {
            assert_eq!(lines[0], NO_ND_PROVIDER);
            assert!(out.stdout.is_empty());
            return;
        }
        assert!(lines[0].contains("no RDMA stack"), "{}", lines[0]);
        assert!(lines[0].contains("ci/lab-vm"), "{}", lines[0]);
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn bad_flag_is_one_line_and_exit_2() {
    let out = rdmabench(&["devices", "--frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("--frobnicate"), "{}", lines[0]);
}

// ---- lab tests -------------------------------------------------------------------

/// The lab's device: RDMABENCH_DEVICE (ci/lab-vm sets rxe0). Panics when it is missing,
/// so a lab run without a device fails instead of passing vacuously.
fn lab_device() -> String {
    let dev = std::env::var("RDMABENCH_DEVICE").unwrap_or_else(|_| "rxe0".into());
    assert!(
        Path::new("/sys/class/infiniband").join(&dev).exists(),
        "lab test: RDMA device {dev} not found; run inside the lab (ci/lab-vm)"
    );
    dev
}

fn sysfs(dev: &str, rel: &str) -> String {
    let path = Path::new("/sys/class/infiniband").join(dev).join(rel);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// `ibv_devinfo -v -d DEV`: device-level `key: value` pairs, port 1's pairs, and the
/// GID lines (`GID[  1]: ::ffff:127.0.0.1, RoCE v2`) as index → (gid, type).
struct DevInfo {
    device: HashMap<String, String>,
    port1: HashMap<String, String>,
    gids: HashMap<u32, (String, String)>,
}

fn ibv_devinfo(dev: &str) -> DevInfo {
    let out =
        Command::new("ibv_devinfo").args(["-v", "-d", dev]).output().expect("ibv_devinfo runs");
    assert!(out.status.success(), "ibv_devinfo failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut info = DevInfo { device: HashMap::new(), port1: HashMap::new(), gids: HashMap::new() };
    let mut in_port = false;
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if key == "port" {
            in_port = value == "1";
            continue;
        }
        if let Some(idx) = key.strip_prefix("GID[").and_then(|k| k.strip_suffix(']')) {
            let (gid, kind) = value.split_once(", ").unwrap_or((value, ""));
            info.gids.insert(idx.trim().parse().unwrap(), (gid.to_string(), kind.to_string()));
            continue;
        }
        let map = if in_port { &mut info.port1 } else { &mut info.device };
        map.entry(key.to_string()).or_insert_with(|| value.to_string());
    }
    info
}

fn devices_json(dev: &str) -> Value {
    let out = rdmabench(&["devices", "--json", "-d", dev]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    serde_json::from_slice(&out.stdout).expect("devices --json is valid JSON")
}

/// First number in an `ibv_devinfo` value: `4096 (5)` → 4096, `0xffffff` → 16777215.
fn number(value: &str) -> u64 {
    let word = value.split_whitespace().next().unwrap_or("");
    match word.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => word.parse().unwrap_or_else(|_| panic!("not a number: {value}")),
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_devices_json_matches_ibv_devinfo() {
    let dev = lab_device();
    let json = devices_json(&dev);
    assert_eq!(json["schema_version"], 2);
    let devices = json["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "-d selects one device");
    let d = &devices[0];
    let info = ibv_devinfo(&dev);

    assert_eq!(d["name"], dev.as_str());
    assert_eq!(d["node_guid"], info.device["node_guid"].as_str());
    assert_eq!(d["sys_image_guid"], info.device["sys_image_guid"].as_str());
    assert_eq!(d["fw_ver"], info.device["fw_ver"].as_str());
    assert_eq!(d["vendor_id"].as_u64().unwrap(), number(&info.device["vendor_id"]));
    assert_eq!(d["vendor_part_id"].as_u64().unwrap(), number(&info.device["vendor_part_id"]));
    assert_eq!(d["limits"]["max_qp"].as_u64().unwrap(), number(&info.device["max_qp"]));
    assert_eq!(d["limits"]["max_mr"].as_u64().unwrap(), number(&info.device["max_mr"]));
    assert_eq!(d["limits"]["max_cqe"].as_u64().unwrap(), number(&info.device["max_cqe"]));
    // "ATOMIC_HCA (1)" → "HCA"
    let atomic = info.device["atomic_cap"].split_whitespace().next().unwrap();
    assert_eq!(format!("ATOMIC_{}", d["limits"]["atomic_cap"].as_str().unwrap()), atomic);
    assert_eq!(d["transport"], "InfiniBand");

    let ports = d["ports"].as_array().unwrap();
    assert_eq!(ports.len() as u64, number(&info.device["phys_port_cnt"]));
    let p = &ports[0];
    assert_eq!(p["port"], 1);
    assert_eq!(format!("PORT_{} (4)", p["state"].as_str().unwrap()), info.port1["state"]);
    assert_eq!(p["active_mtu"].as_u64().unwrap(), number(&info.port1["active_mtu"]));
    assert_eq!(p["max_mtu"].as_u64().unwrap(), number(&info.port1["max_mtu"]));
    assert_eq!(p["link_layer"], info.port1["link_layer"].as_str());
    assert_eq!(p["gid_table_len"].as_u64().unwrap(), number(&info.port1["gid_tbl_len"]));
    assert_eq!(info.port1["phys_state"], "LINK_UP (5)");
    assert_eq!(p["phys_state"], "LinkUp");

    // Every GID ibv_devinfo lists, with its type, and nothing else.
    let gids = p["gids"].as_array().unwrap();
    assert_eq!(gids.len(), info.gids.len(), "{gids:?} vs {:?}", info.gids);
    for g in gids {
        let (gid, kind) = &info.gids[&(g["index"].as_u64().unwrap() as u32)];
        assert_eq!(g["gid"], gid.as_str());
        assert_eq!(g["type"], kind.as_str());
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_devices_json_matches_sysfs() {
    let dev = lab_device();
    let json = devices_json(&dev);
    let d = &json["devices"][0];
    assert_eq!(d["node_guid"], sysfs(&dev, "node_guid").as_str());
    assert_eq!(d["sys_image_guid"], sysfs(&dev, "sys_image_guid").as_str());
    let fw_ver = sysfs(&dev, "fw_ver");
    if fw_ver.is_empty() {
        // rxe has no firmware string in sysfs; verbs reports "0.0.0" (checked against
        // ibv_devinfo in lab_devices_json_matches_ibv_devinfo).
        assert_eq!(d["model"], "Soft-RoCE (rxe)", "only rxe lacks a sysfs fw_ver");
    } else {
        assert_eq!(d["fw_ver"], fw_ver.as_str());
    }
    let p = &d["ports"][0];
    assert_eq!(sysfs(&dev, "ports/1/state"), format!("4: {}", p["state"].as_str().unwrap()));
    assert_eq!(
        sysfs(&dev, "ports/1/phys_state"),
        format!("5: {}", p["phys_state"].as_str().unwrap())
    );
    // sysfs rate reads "2.5 Gb/sec (1X SDR)".
    let rate = sysfs(&dev, "ports/1/rate");
    let expect = format!(
        "{} Gb/sec ({} {})",
        p["rate_gbps"].as_f64().unwrap(),
        p["width"].as_str().unwrap(),
        p["speed"].as_str().unwrap()
    );
    assert_eq!(rate, expect);

    // GID 1 is the IPv4-mapped loopback address, RoCE v2, on lo.
    let gid1 = p["gids"].as_array().unwrap().iter().find(|g| g["index"] == 1).expect("GID 1");
    assert_eq!(gid1["gid"], "::ffff:127.0.0.1");
    assert_eq!(gid1["raw"], sysfs(&dev, "ports/1/gids/1").as_str());
    assert_eq!(gid1["type"], "RoCE v2");
    assert_eq!(gid1["type"], sysfs(&dev, "ports/1/gid_attrs/types/1").as_str());
    assert_eq!(gid1["netdev"], sysfs(&dev, "ports/1/gid_attrs/ndevs/1").as_str());
    assert_eq!(gid1["netdev"], "lo");
    // rxe has no PCI function of its own.
    assert!(d["pcie"].is_null());
    assert_eq!(d["model"], "Soft-RoCE (rxe)");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_devices_human_output() {
    let dev = lab_device();
    let out = rdmabench(&["devices"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.starts_with(&format!("{dev}: Soft-RoCE (rxe)")), "{text}");
    assert!(text.contains("  port 1: ACTIVE LinkUp Ethernet, MTU"), "{text}");
    let gid1 = text.lines().find(|l| l.trim_start().starts_with("GID 1 ")).expect("GID 1 line");
    let words: Vec<&str> = gid1.split_whitespace().collect();
    assert_eq!(words, ["GID", "1", "::ffff:127.0.0.1", "RoCE", "v2", "lo"], "{gid1}");

    let verbose = String::from_utf8(rdmabench(&["devices", "-v", "-d", &dev]).stdout).unwrap();
    assert!(verbose.contains("  atomics              HCA"), "{verbose}");
    assert!(verbose.contains("  PCIe link            none (not a PCI function)"), "{verbose}");
    let info = ibv_devinfo(&dev);
    let table = format!(
        "    GID table          {} valid of {}",
        info.gids.len(),
        number(&info.port1["gid_tbl_len"])
    );
    assert!(verbose.contains(&table), "{table:?} not in\n{verbose}");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_unknown_device_names_the_real_ones() {
    let dev = lab_device();
    let out = rdmabench(&["devices", "-d", "mlx9_9"]);
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let prefix = "rdmabench: no RDMA device named 'mlx9_9' (found: ";
    assert!(lines[0].starts_with(prefix), "{}", lines[0]);
    let mut found: Vec<String> =
        lines[0][prefix.len()..].trim_end_matches(')').split(", ").map(str::to_string).collect();
    assert!(found.contains(&dev), "{found:?}");
    let mut in_sysfs: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    in_sysfs.sort();
    assert_eq!(found, in_sysfs, "the message lists every device");
}

#[test]
fn networkdirect_without_a_provider_is_one_line_naming_what_is_missing() {
    // The binary has no software provider: on Linux NetworkDirect has nothing to find;
    // on Windows (wine) the Winsock catalog lists none.
    let out = rdmabench(&["devices", "--backend", "nd"]);
    assert_eq!(out.status.code(), Some(2));
    let expected = if cfg!(windows) {
        NO_ND_PROVIDER
    } else {
        "rdmabench: no NetworkDirect provider: NetworkDirect is Windows' RDMA interface; on Linux use verbs"
    };
    assert_eq!(stderr_lines(&out), [expected]);
    // A test over ND: the server fails to open the adapter after the client's hello,
    // and both sides say why in one line.
    let port = "19590";
    let server = Command::new(env!("CARGO_BIN_EXE_rdmabench"))
        .args(["write-bw", "--backend", "nd", "-p", port, "--timeout", "10"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client =
        rdmabench(&["write-bw", "--backend", "nd", "-p", port, "--timeout", "10", "127.0.0.1"]);
    let server = server.wait_with_output().unwrap();
    for (side, o) in [("client", &client), ("server", &server)] {
        assert_eq!(o.status.code(), Some(2), "{side}");
        let lines = stderr_lines(o);
        assert_eq!(lines.len(), 1, "{side}: {lines:?}");
        assert!(lines[0].contains("no NetworkDirect provider"), "{side}: {}", lines[0]);
    }
}
