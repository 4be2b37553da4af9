//! One doctor verdict: what was checked, on what, what it saw, what it expected, and
//! the one-line fix.

use serde::{Deserialize, Serialize};

/// A check's verdict. Ordered from best to worst, so the worst of several is `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to judge here (a soft device has no PCIe link).
    Na,
    /// As it should be.
    Pass,
    /// Works, but costs performance or will surprise.
    Warn,
    /// Results on this host would not be what the hardware can do.
    Fail,
}

impl Status {
    /// `PASS`, `WARN`, `FAIL`, `N/A`: what the terminal table prints.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Na => "N/A",
        }
    }
}

/// One check on one subject.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What kind of check (`port.state`, `cpu.governor`): what a profile waives.
    pub id: String,
    /// What it was run on: `mlx4_0/1` (device/port), `mlx4_0`, `host`.
    pub subject: String,
    /// The verdict.
    pub status: Status,
    /// What doctor saw.
    pub observed: String,
    /// What it should be.
    pub expected: String,
    /// How to fix it, in one line; empty when nothing is to be fixed.
    pub fix: String,
}

impl Check {
    /// A check with its verdict; `fix` is kept only for WARN and FAIL.
    pub fn new(
        id: &str,
        subject: &str,
        status: Status,
        observed: impl Into<String>,
        expected: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        let fix =
            if matches!(status, Status::Warn | Status::Fail) { fix.into() } else { String::new() };
        Check {
            id: id.to_string(),
            subject: subject.to_string(),
            status,
            observed: observed.into(),
            expected: expected.into(),
            fix,
        }
    }

    /// Nothing to judge: `why` says what is missing.
    pub fn na(id: &str, subject: &str, why: impl Into<String>) -> Check {
        Check::new(id, subject, Status::Na, why, "-", "")
    }

    /// `id subject`, e.g. `port.state mlx4_0/1`: a name for JUnit and waivers.
    pub fn name(&self) -> String {
        format!("{} {}", self.id, self.subject)
    }
}
