//! Firmware minimums per adapter model. Below `minimum` a lab should not qualify the
//! card (FAIL); below `recommended` it works but misses fixes (WARN). The source of
//! each row is in docs/qualify.md#firmware.

use std::cmp::Ordering;

/// One model's firmware rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirmwareRule {
    /// The model as [`crate::facts::decode::model`] names it.
    pub model: &'static str,
    /// Oldest firmware that is acceptable.
    pub minimum: &'static str,
    /// The newest release the vendor published for the model.
    pub recommended: &'static str,
    /// Why the minimum (one line; docs/qualify.md has the references).
    pub why: &'static str,
}

/// The table. ConnectX-2: SMB Direct (RDMA for Windows file serving) needs 2.9.8350;
/// 2.10.720 is the last release. ConnectX-3 and -3 Pro: 2.42.5000 is the final release
/// and the only one NVIDIA's firmware updater (mlxup) still carries, so a lab qualifies
/// on it.
pub const RULES: &[FirmwareRule] = &[
    FirmwareRule {
        model: "ConnectX-2",
        minimum: "2.9.8350",
        recommended: "2.10.720",
        why: "RDMA for SMB Direct needs 2.9.8350 or later",
    },
    FirmwareRule {
        model: "ConnectX-3",
        minimum: "2.42.5000",
        recommended: "2.42.5000",
        why: "2.42.5000 is the final release, the only one NVIDIA still ships (mlxup)",
    },
    FirmwareRule {
        model: "ConnectX-3 Pro",
        minimum: "2.42.5000",
        recommended: "2.42.5000",
        why: "2.42.5000 is the final release, the only one NVIDIA still ships (mlxup)",
    },
];

/// The rule for `model`, if the table has one.
pub fn rule(model: &str) -> Option<&'static FirmwareRule> {
    RULES.iter().find(|r| r.model == model)
}

/// Compares dotted versions numerically (`2.9.8350` < `2.10.720`); `None` when either
/// is not dotted numbers.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    let parse =
        |v: &str| -> Option<Vec<u64>> { v.trim().split('.').map(|p| p.parse().ok()).collect() };
    Some(parse(a)?.cmp(&parse(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_number_not_text() {
        assert_eq!(compare("2.9.8350", "2.10.720"), Some(Ordering::Less));
        assert_eq!(compare("2.42.5000", "2.42.5000"), Some(Ordering::Equal));
        assert_eq!(compare("2.42.5000", "2.40.7000"), Some(Ordering::Greater));
        assert_eq!(compare("2.9", "2.9.0"), Some(Ordering::Less));
        assert_eq!(compare("v2.x", "2.9"), None);
    }

    #[test]
    fn every_rule_is_ordered() {
        for r in RULES {
            assert_ne!(compare(r.minimum, r.recommended), Some(Ordering::Greater), "{r:?}");
        }
        assert!(rule("ConnectX-3").is_some() && rule("Soft-RoCE (rxe)").is_none());
    }
}
