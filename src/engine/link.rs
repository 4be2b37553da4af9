//! A failure whose cause is this side's own link. A cable pulled on this side shows first
//! as something else: soft-RoCE fails the work it cannot transmit with
//! `IBV_WC_LOC_QP_OP_ERR`, a NIC retries until `IBV_WC_RETRY_EXC_ERR`, and the control
//! channel goes silent. When the port the test ran on is no longer ACTIVE, that is the
//! cause to name; the status and the first symptom stay in the error. A link that went
//! down and came back before the failure was noticed (a guest stalled past the cut, a
//! flapping cable) is named too: its port's `link_downed` count moved since the start.

use crate::error::{Error, ErrorKind};
use crate::facts::{self, paths, port, SystemTree};
use crate::results::EffectiveParams;

/// Each port's `link_downed` count as a run starts (a few sysfs reads, once a run).
pub struct LinkWatch {
    downs: Vec<(String, u8, u64)>,
}

impl LinkWatch {
    /// The counts of every port of every RDMA device of this host now.
    pub fn start() -> LinkWatch {
        LinkWatch::read(&facts::live())
    }

    fn read(root: &SystemTree) -> LinkWatch {
        let mut downs = Vec::new();
        for device in facts::entries(root, paths::CLASS_INFINIBAND) {
            for p in facts::entries(root, paths::device_dir(&device).join("ports")) {
                let Ok(p) = p.parse::<u8>() else { continue };
                if let Some(n) = port::link_downed(root, &device, p) {
                    downs.push((device.clone(), p, n));
                }
            }
        }
        LinkWatch { downs }
    }

    /// How many times the port has gone down since the start (`None`: not counted).
    fn downs_since(&self, root: &SystemTree, device: &str, p: u8) -> Option<u64> {
        let (_, _, before) = self.downs.iter().find(|(d, n, _)| d == device && *n == p)?;
        Some(port::link_downed(root, device, p)?.saturating_sub(*before))
    }

    /// `e`, or a `link_down` error when the port in `params` is down now or went down
    /// during the run.
    pub fn name_the_cause(&self, e: Error, params: Option<&EffectiveParams>) -> Error {
        let Some(p) = params else { return e };
        self.explain(e, p, &facts::live())
    }

    fn explain(&self, e: Error, p: &EffectiveParams, root: &SystemTree) -> Error {
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
        let (device, ib_port) = (&p.granted.device, p.granted.ib_port);
        let Some((state, phys)) = port::state(root, device, ib_port) else {
            return e;
        };
        let what = if state.starts_with("ACTIVE") {
            match self.downs_since(root, device, ib_port) {
                Some(n @ 1..) => format!(
                    "went down {} during the run (link_downed +{n}) and is {state} again: \
                     this side's link flapped",
                    if n == 1 { "once".to_string() } else { format!("{n} times") }
                ),
                _ => return e,
            }
        } else {
            let phys = phys.map(|w| format!(", physical state {w}")).unwrap_or_default();
            format!("is {state}{phys}: this side's link went down")
        };
        let message = format!("{device} port {ib_port} {what} ({e})");
        Error { status: e.status, ..Error::new(ErrorKind::LinkDown, message) }
    }
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
        fs::create_dir_all(dir.join("hw_counters")).unwrap();
        fs::write(dir.join("state"), state).unwrap();
        fs::write(dir.join("phys_state"), "3: Disabled\n").unwrap();
        fs::write(dir.join("hw_counters/link_downed"), "2\n").unwrap();
    }

    fn completion_error() -> Error {
        Error {
            status: Some("IBV_WC_LOC_QP_OP_ERR".into()),
            ..Error::new(ErrorKind::Completion, "work on QP 0 failed: IBV_WC_LOC_QP_OP_ERR")
        }
    }

    #[test]
    fn a_down_port_is_named_with_the_symptom_kept() {
        let root = std::env::temp_dir().join(format!("rdmabench-link-{}", std::process::id()));
        port(&root, "rxe0", "1: DOWN\n");
        port(&root, "rxe1", "4: ACTIVE\n");
        let tree = SystemTree::new(&root);
        let watch = LinkWatch::read(&tree);
        let failed = completion_error();
        let e = watch.explain(failed.clone(), &params("rxe0"), &tree);
        assert_eq!(e.kind, ErrorKind::LinkDown);
        assert_eq!(e.status.as_deref(), Some("IBV_WC_LOC_QP_OP_ERR"));
        assert!(
            e.message.starts_with("rxe0 port 1 is DOWN, physical state Disabled: this side's link")
                && e.message.ends_with("(work on QP 0 failed: IBV_WC_LOC_QP_OP_ERR)"),
            "{}",
            e.message
        );
        // An active port that stayed up, an unknown device, or an error a link cannot
        // cause: unchanged.
        assert_eq!(watch.explain(failed.clone(), &params("rxe1"), &tree), failed);
        assert_eq!(watch.explain(failed.clone(), &params("mlx4_0"), &tree), failed);
        let usage = Error::usage("-s 0");
        assert_eq!(watch.explain(usage.clone(), &params("rxe0"), &tree), usage);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_link_that_went_down_and_came_back_during_the_run_is_named() {
        let root = std::env::temp_dir().join(format!("rdmabench-flap-{}", std::process::id()));
        port(&root, "rxe0", "4: ACTIVE\n");
        let tree = SystemTree::new(&root);
        let watch = LinkWatch::read(&tree);
        let counter = root.join(facts::paths::port_dir("rxe0", 1)).join("hw_counters/link_downed");
        let silent = Error::new(ErrorKind::PeerSilent, "the peer sent no whole message for 10 s");
        assert_eq!(watch.explain(silent.clone(), &params("rxe0"), &tree), silent, "no down yet");
        fs::write(&counter, "3\n").unwrap();
        let e = watch.explain(silent.clone(), &params("rxe0"), &tree);
        assert_eq!(e.kind, ErrorKind::LinkDown);
        assert_eq!(
            e.message,
            "rxe0 port 1 went down once during the run (link_downed +1) and is ACTIVE again: \
             this side's link flapped (the peer sent no whole message for 10 s)"
        );
        fs::write(&counter, "5\n").unwrap();
        let e = watch.explain(completion_error(), &params("rxe0"), &tree);
        assert!(e.message.contains("went down 3 times during the run (link_downed +3)"), "{e:?}");
        assert_eq!(e.status.as_deref(), Some("IBV_WC_LOC_QP_OP_ERR"));
        fs::remove_dir_all(&root).unwrap();
    }
}
