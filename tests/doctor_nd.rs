//! `doctor --backend nd` (Windows' checks) on Linux: the software NetworkDirect provider
//! stands in for a vendor's, through the same discovery and `run` as the binary.

use serde_json::Value;

#[test]
fn doctor_over_networkdirect_finds_the_provider_and_its_adapter() {
    nd_soft::install();
    let json =
        std::env::temp_dir().join(format!("rdmabench-doctor-nd-{}.json", std::process::id()));
    let args = ["rdmabench", "doctor", "--backend", "nd", "--json", json.to_str().unwrap()];
    let cli = rdmabench::cli::parse(args).unwrap().unwrap();
    let mut out = Vec::new();
    let code = rdmabench::run(cli, &mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    assert_eq!(code, 0, "{text}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    let status = |id: &str, subject: &str| {
        let c = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id && c["subject"] == subject);
        c.unwrap_or_else(|| panic!("no {id} {subject}: {v}"))["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(status("nd.provider", "host"), "pass");
    assert_eq!(status("nd.enabled", "host"), "pass");
    // 127.0.0.1 is lo's: the OS reports no link speed for it.
    assert_eq!(status("nd.link", &nd_soft::ADDRESS.to_string()), "na");
    assert_eq!(status("nic.homogeneity", "host"), "na", "one adapter");
    assert_eq!(v["environment"]["device"]["link_layer"], "NetworkDirect");
    assert!(text.contains("PASS   nd.provider"), "{text}");
    // -d names an adapter by its address, as devices --backend nd does.
    let cli = rdmabench::cli::parse(["rdmabench", "doctor", "--backend", "nd", "-d", "10.9.9.9"])
        .unwrap()
        .unwrap();
    let e = rdmabench::run(cli, &mut Vec::new()).unwrap_err();
    assert!(e.message.contains("no RDMA device named '10.9.9.9' (found: 127.0.0.1)"), "{e}");
}
