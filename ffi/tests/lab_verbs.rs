//! The device layer against a real verbs device. These run in the soft-RoCE lab
//! (ci/lab-vm, which sets RDMABENCH_DEVICE=rxe0) and fail when the device is missing.
#![cfg(target_os = "linux")]

use std::net::Ipv4Addr;

use rdmabench_ffi::verbs::{Context, DeviceList};

fn lab_context() -> (DeviceList, Context) {
    let name = std::env::var("RDMABENCH_DEVICE").unwrap_or_else(|_| "rxe0".into());
    let list = DeviceList::new().unwrap_or_else(|e| panic!("lab test: {e}; run inside ci/lab-vm"));
    let context = {
        let device = list.find(&name).unwrap_or_else(|| {
            panic!("lab test: RDMA device {name} not found; run inside ci/lab-vm")
        });
        device.open().expect("ibv_open_device")
    };
    (list, context)
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_device_list_names_and_guids_agree_with_sysfs() {
    let (list, context) = lab_context();
    assert!(!list.is_empty());
    let device = list.find(context.name()).unwrap();
    let sysfs = device.ibdev_path();
    assert_eq!(sysfs, std::path::Path::new("/sys/class/infiniband").join(context.name()));
    let node_guid = std::fs::read_to_string(sysfs.join("node_guid")).unwrap();
    assert_eq!(device.guid().to_string(), node_guid.trim());
    assert_eq!(context.query_device().unwrap().node_guid, device.guid());
    assert_eq!(device.transport_type(), 0, "rxe is an InfiniBand-transport device");
    assert_eq!(device.node_type(), 1, "rxe is a CA");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_context_outlives_the_device_list() {
    let (list, context) = lab_context();
    drop(list);
    let attr = context.query_device().expect("query after the list is freed");
    assert!(attr.phys_port_cnt >= 1);
    let clone = context.clone();
    drop(context);
    assert_eq!(clone.query_port(1).unwrap().state, 4, "port 1 ACTIVE");
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_gid_1_is_ipv4_mapped_loopback_roce_v2() {
    let (_list, context) = lab_context();
    let gid = context.query_gid(1, 1).unwrap();
    assert_eq!(gid.to_ipv4_mapped(), Some(Ipv4Addr::LOCALHOST));
    let port = context.query_port(1).unwrap();
    let table = context.query_gid_table(port.gid_tbl_len as usize).unwrap();
    let entry = table.iter().find(|e| e.port == 1 && e.index == 1).expect("GID 1 in the table");
    assert_eq!(entry.gid, gid);
    assert_eq!(entry.gid_type, 2, "RoCE v2");
    assert_eq!(entry.netdev.as_deref(), Some("lo"));
    // Every table entry agrees with the one-at-a-time query.
    for e in &table {
        assert_eq!(context.query_gid(e.port, e.index).unwrap(), e.gid, "GID {}", e.index);
    }
}

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_bad_port_errors_name_the_verb_and_errno() {
    let (_list, context) = lab_context();
    let attr = context.query_device().unwrap();
    let bad = attr.phys_port_cnt + 1;
    let err = context.query_port(bad).unwrap_err();
    assert_eq!(err.verb(), "ibv_query_port");
    assert_eq!(err.errno(), libc::EINVAL);
    assert!(err.to_string().contains(&format!("port {bad}")), "{err}");
    let err = context.query_gid(1, 1 << 20).unwrap_err();
    assert_eq!(err.verb(), "ibv_query_gid");
    assert_ne!(err.errno(), 0, "{err}");
}
