//! A failure whose cause is this side's own link. A cable pulled on this side shows first
//! as something else: soft-RoCE fails the work it cannot transmit with
//! `IBV_WC_LOC_QP_OP_ERR`, a NIC retries until `IBV_WC_RETRY_EXC_ERR`, and the control
//! channel goes silent. When the port the test ran on is no longer ACTIVE, that is the
//! cause to name; the status and the first symptom stay in the error.

use crate::error::{Error, ErrorKind};
use crate::facts::{self, port, SystemTree};
use crate::results::EffectiveParams;

/// `e`, or a `link_down` error when the port in `params` is down now.
pub fn name_the_cause(e: Error, params: Option<&EffectiveParams>) -> Error {
    let Some(p) = params else { return e };
    explain(e, p, &facts::live())
}

fn explain(e: Error, p: &EffectiveParams, root: &SystemTree) -> Error {
    let link_can_cause = matches!(
        e.kind,
        ErrorKind::Completion
            | ErrorKind::PeerSilent
            | ErrorKind::PeerClosed
            | ErrorKind::PeerUnreachable
            | ErrorKind::Device
    );
    if !link_can_cause {
        return e;
    }
    let Some((state, phys)) = port::state(root, &p.granted.device, p.granted.ib_port) else {
        return e;
    };
    if state.starts_with("ACTIVE") {
        return e;
    }
    let phys = phys.map(|w| format!(", physical state {w}")).unwrap_or_default();
    let message = format!(
        "{} port {} is {state}{phys}: this side's link went down ({e})",
        p.granted.device, p.granted.ib_port
    );
    Error { status: e.status, ..Error::new(ErrorKind::LinkDown, message) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn params(device: &str) -> EffectiveParams {
        serde_json::from_value(serde_json::json!({
            "device": device, "ib_port": 1, "link_layer": "Ethernet", "gid_index": 1,
            "mtu": 1024, "connection": "RC", "qps": 1, "sizes": [65536],
            "run": {"iterations": 10}, "tx_depth": 128, "rx_depth": 1, "cq_mod": 1,
            "post_list": 1, "inline_size": 0, "outs": 16, "events": false,
            "bidirectional": false, "rdma_cm": false, "validate": false,
            "atomic_type": null, "bw_unit": "MiB/s", "latency_is": "round trip"
        }))
        .unwrap()
    }

    fn port(root: &Path, device: &str, state: &str) {
        let dir = root.join(facts::paths::port_dir(device, 1));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("state"), state).unwrap();
        fs::write(dir.join("phys_state"), "3: Disabled\n").unwrap();
    }

    #[test]
    fn a_down_port_is_named_with_the_symptom_kept() {
        let root = std::env::temp_dir().join(format!("rdmabench-link-{}", std::process::id()));
        port(&root, "rxe0", "1: DOWN\n");
        port(&root, "rxe1", "4: ACTIVE\n");
        let tree = SystemTree::new(&root);
        let failed = Error {
            status: Some("IBV_WC_LOC_QP_OP_ERR".into()),
            ..Error::new(ErrorKind::Completion, "work on QP 0 failed: IBV_WC_LOC_QP_OP_ERR")
        };
        let e = explain(failed.clone(), &params("rxe0"), &tree);
        assert_eq!(e.kind, ErrorKind::LinkDown);
        assert_eq!(e.status.as_deref(), Some("IBV_WC_LOC_QP_OP_ERR"));
        assert!(
            e.message.starts_with("rxe0 port 1 is DOWN, physical state Disabled: this side's link")
                && e.message.ends_with("(work on QP 0 failed: IBV_WC_LOC_QP_OP_ERR)"),
            "{}",
            e.message
        );
        // An active port, an unknown device, or an error a link cannot cause: unchanged.
        assert_eq!(explain(failed.clone(), &params("rxe1"), &tree), failed);
        assert_eq!(explain(failed.clone(), &params("mlx4_0"), &tree), failed);
        let usage = Error::usage("-s 0");
        assert_eq!(explain(usage.clone(), &params("rxe0"), &tree), usage);
        fs::remove_dir_all(&root).unwrap();
    }
}
