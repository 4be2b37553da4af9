//! A PCI function's PCIe link: the one type `devices`, a result's environment, doctor,
//! health and a soak's link read.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::files::SystemTree;

/// A PCIe link as sysfs states it, its words [`clean`](crate::text::clean)ed at read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pcie {
    /// Negotiated speed, e.g. `8.0 GT/s PCIe`.
    pub current_speed: Option<String>,
    /// Negotiated lane count.
    pub current_width: Option<u32>,
    /// Best speed the device and slot support.
    pub max_speed: Option<String>,
    /// Widest the device supports.
    pub max_width: Option<u32>,
}

impl Pcie {
    /// The link of the PCI function at `root/function` (a device's `device` folder);
    /// `None` when it states none of the four (a soft device has no PCI function).
    pub fn read(root: &SystemTree, function: &Path) -> Option<Pcie> {
        let word = |file: &str| super::word_in(root, function.join(file));
        let width = |file: &str| word(file).and_then(|w| w.parse().ok());
        let link = Pcie {
            current_speed: word("current_link_speed"),
            current_width: width("current_link_width"),
            max_speed: word("max_link_speed"),
            max_width: width("max_link_width"),
        };
        let any = link.current_speed.is_some()
            || link.current_width.is_some()
            || link.max_speed.is_some()
            || link.max_width.is_some();
        any.then_some(link)
    }

    /// Negotiated GT/s per lane.
    pub fn current_gts(&self) -> Option<f64> {
        self.current_speed.as_deref().and_then(gts)
    }

    /// Best GT/s per lane the device supports.
    pub fn max_gts(&self) -> Option<f64> {
        self.max_speed.as_deref().and_then(gts)
    }

    /// The negotiated link in words, `8.0 GT/s PCIe x16` (the speed alone without a
    /// width); `None` without a speed.
    pub fn words(&self) -> Option<String> {
        match (&self.current_speed, self.current_width) {
            (Some(speed), Some(width)) => Some(format!("{speed} x{width}")),
            (speed, _) => speed.clone(),
        }
    }
}

/// `8.0 GT/s PCIe` (or the older `8 GT/s`, `5.0 GT/s`) → 8.0.
pub fn gts(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok().filter(|&v: &f64| v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_pci_functions_link_is_read_as_words_and_numbers() {
        let root = std::env::temp_dir().join(format!("rdmabench-pcie-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let dev = root.join("f/device");
        fs::create_dir_all(&dev).unwrap();
        fs::create_dir_all(root.join("soft/device")).unwrap();
        fs::write(dev.join("current_link_speed"), "5.0 GT/s PCIe\n").unwrap();
        fs::write(dev.join("current_link_width"), "8\n").unwrap();
        fs::write(dev.join("max_link_speed"), "8.0 GT/s PCIe\n").unwrap();
        fs::write(dev.join("max_link_width"), "16\n").unwrap();
        let tree = SystemTree::new(&root);
        let link = Pcie::read(&tree, Path::new("f/device")).unwrap();
        assert_eq!(link.current_speed.as_deref(), Some("5.0 GT/s PCIe"));
        assert_eq!((link.current_width, link.max_width), (Some(8), Some(16)));
        assert_eq!((link.current_gts(), link.max_gts()), (Some(5.0), Some(8.0)));
        assert_eq!(link.words().as_deref(), Some("5.0 GT/s PCIe x8"));
        assert_eq!(Pcie::read(&tree, Path::new("soft/device")), None);
        let speed_only = Pcie { current_width: None, ..link };
        assert_eq!(speed_only.words().as_deref(), Some("5.0 GT/s PCIe"));
        assert_eq!(gts("garbage"), None);
        assert_eq!(gts("0 GT/s"), None);
        let _ = fs::remove_dir_all(&root);
    }
}
