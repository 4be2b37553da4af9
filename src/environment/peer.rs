//! A peer's [`Environment`] made as safe to show as this side's own: every text through
//! the one sanitiser, [`clean`].

use super::{DeviceEnvironment, Environment, InterfaceEnvironment, Pcie};
use crate::text::clean;

impl Environment {
    /// A peer's environment with every text [`clean`]ed, as this side's own reads are:
    /// what a peer sends is shown and stored as it would be from sysfs.
    pub fn cleaned(self) -> Environment {
        let opt = |o: Option<String>| o.map(|t| clean(&t));
        Environment {
            hostname: clean(&self.hostname),
            kernel: clean(&self.kernel),
            os: clean(&self.os),
            cpu_model: clean(&self.cpu_model),
            governor: opt(self.governor),
            rdmabench: clean(&self.rdmabench),
            device: self.device.map(|d| DeviceEnvironment {
                name: clean(&d.name),
                model: opt(d.model),
                firmware: clean(&d.firmware),
                board_id: opt(d.board_id),
                link_layer: clean(&d.link_layer),
                pcie: d.pcie.map(|p| Pcie {
                    current_speed: opt(p.current_speed),
                    max_speed: opt(p.max_speed),
                    ..p
                }),
                driver: opt(d.driver),
                rdma_core: opt(d.rdma_core),
                ..d
            }),
            interface: self.interface.map(|i| InterfaceEnvironment { name: clean(&i.name), ..i }),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::MAX_TEXT_CHARS;

    #[test]
    fn a_peers_environment_is_cleaned_and_capped() {
        let mut env = Environment::host_at(std::path::Path::new("/nonexistent"));
        env.hostname = format!("\u{1b}]0;x\u{7}{}", "h".repeat(100_000));
        env.os = "Debian\u{1b}[2J\nPASS".into();
        let env = env.cleaned();
        assert_eq!(env.hostname.chars().count(), MAX_TEXT_CHARS);
        assert!(env.hostname.starts_with("]0;x h") && env.hostname.ends_with('…'));
        assert_eq!(env.os, "Debian [2J PASS");
    }
}
