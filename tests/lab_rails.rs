//! Multi-rail in the lab: `write-bw -d rxe0,rxe1` on both sides, rxe0 on lo and rxe1 on
//! the veth (each rail's control connection to its own address, so each has its GID):
//! every rail alone and together, the aggregate and its ratio, and the warning that the
//! rails differ (rxe0's active MTU is 4096, rxe1's 1024).

mod common;

use std::time::Duration;

use common::{err, finish, spawn, text};
use serde_json::Value;

#[test]
#[ignore = "lab: needs an RDMA device (ci/lab-vm)"]
fn lab_rails_two_devices_report_each_rail_and_the_aggregate() {
    let cm = std::env::var("RDMABENCH_CM_ADDR").unwrap_or_else(|_| "198.18.0.1".into());
    let dir = common::scratch("rdmabench-lab-rails");
    let (cj, sj) = (dir.join("client.json"), dir.join("server.json"));
    let server = spawn(
        true,
        &[
            "write-bw",
            "-d",
            "rxe0,rxe1",
            "-p",
            "19810",
            "-n",
            "300",
            "--json",
            sj.to_str().unwrap(),
        ],
    );
    let hosts = format!("127.0.0.1,{cm}");
    let client = finish(
        spawn(
            true,
            &[
                "write-bw",
                "-d",
                "rxe0,rxe1",
                "-p",
                "19810",
                "-n",
                "300",
                "--json",
                cj.to_str().unwrap(),
                &hosts,
            ],
        ),
        Duration::from_secs(180),
    );
    let server = finish(server, Duration::from_secs(60));
    assert!(client.status.success(), "client: {}\n{}", text(&client), err(&client));
    assert!(server.status.success(), "server: {}\n{}", text(&server), err(&server));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).unwrap();
    assert_eq!(doc["kind"], "multirail");
    let rails = doc["rails"].as_array().unwrap();
    let devices: Vec<&str> = rails.iter().map(|r| r["rail"]["device"].as_str().unwrap()).collect();
    assert_eq!(devices, ["rxe0", "rxe1"]);
    assert_eq!(
        (rails[0]["rail"]["port"].as_u64(), rails[1]["rail"]["port"].as_u64()),
        (Some(19810), Some(19811))
    );
    let bw = |r: &Value, phase: &str| {
        r[phase]["results"][0]["bw"]["avg_bytes_per_sec"].as_f64().unwrap()
    };
    for r in rails {
        assert!(bw(r, "alone") > 0.0 && bw(r, "together") > 0.0, "{r}");
        assert_eq!(
            r["together"]["params"]["device"], r["rail"]["device"],
            "each rail on its own device"
        );
    }
    let a = &doc["aggregate"][0];
    let sum: f64 = rails.iter().map(|r| bw(r, "alone")).sum();
    let together: f64 = rails.iter().map(|r| bw(r, "together")).sum();
    assert!((a["sum_alone"].as_f64().unwrap() - sum).abs() < 1.0, "{a}");
    assert!((a["together"].as_f64().unwrap() - together).abs() < 1.0, "{a}");
    assert!((a["ratio"].as_f64().unwrap() - together / sum).abs() < 1e-9, "{a}");
    let warnings: Vec<&str> =
        doc["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert!(
        warnings.iter().any(|w| w.contains("differ in active MTU (rxe0 4096, rxe1 1024)")),
        "{warnings:?}"
    );
    let table = text(&client);
    assert!(table.contains("Warning: the rails differ in active MTU"), "{table}");
    assert!(table.contains("aggregate / sum of single rails:"), "{table}");
    assert!(table.contains("rail 1: rxe1 to 198.18.0.1, port 19811"), "{table}");
    let sdoc: Value = serde_json::from_str(&std::fs::read_to_string(&sj).unwrap()).unwrap();
    assert_eq!(sdoc["rails"].as_array().unwrap().len(), 2, "the server ran both phases too");
}
