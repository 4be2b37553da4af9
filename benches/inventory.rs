//! Cost of the device queries behind `rdmabench devices`, through the safe layer.
//! Needs an RDMA device (RDMABENCH_DEVICE, default rxe0): run it in the lab with
//! `ci/lab-vm cargo bench --bench inventory`. Without a device it says so and exits 2.

use criterion::{criterion_group, Criterion};

#[cfg(target_os = "linux")]
fn queries(c: &mut Criterion) {
    use ffi::verbs::DeviceList;
    let name = std::env::var("RDMABENCH_DEVICE").unwrap_or_else(|_| "rxe0".into());
    let list = DeviceList::new().unwrap_or_else(|e| {
        eprintln!("bench inventory: {e}; run it in the lab (ci/lab-vm)");
        std::process::exit(2)
    });
    let Some(device) = list.find(&name) else {
        eprintln!("bench inventory: no RDMA device named {name}");
        std::process::exit(2)
    };
    let context = device.open().expect("ibv_open_device");
    let gid_tbl_len = context.query_port(1).expect("ibv_query_port").gid_tbl_len as usize;
    c.bench_function("ibv_query_device", |b| b.iter(|| context.query_device().unwrap()));
    c.bench_function("ibv_query_port", |b| b.iter(|| context.query_port(1).unwrap()));
    c.bench_function("ibv_query_gid_table", |b| {
        b.iter(|| context.query_gid_table(gid_tbl_len).unwrap())
    });
}

#[cfg(not(target_os = "linux"))]
fn queries(_: &mut Criterion) {
    eprintln!("bench inventory: verbs exist on Linux only");
    std::process::exit(2)
}

criterion_group!(benches, queries);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
