//! qualify's report as data: qualify.json's model (docs/json.md#qualify). The table,
//! the HTML page, the comparison and JUnit are functions of it (`report.rs`,
//! `comparison.rs`, `junit.rs`).

use serde::{Deserialize, Serialize};

use super::verdict::{Judgement, Median, PointComparison, Run};
use crate::doctor::DoctorReport;
use crate::environment::Environment;
use crate::report::svg::size_label;

/// qualify.json (docs/json.md#qualify).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QualifyReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// Always `qualify`.
    pub kind: String,
    /// `rdmabench 0.1.0`.
    pub tool: String,
    /// The profile's name, where it came from, repeats, tolerance and waivers.
    pub profile: ProfileSummary,
    /// The server.
    pub server: String,
    /// When the qualification started, UTC.
    pub started: String,
    /// The verdict.
    pub verdict: QualifyVerdict,
    /// doctor on this host, run first.
    pub doctor: DoctorReport,
    /// Doctor checks (`id subject`) that failed but were waived by the profile.
    pub waived: Vec<String>,
    /// Every test point: its runs, medians and judgements.
    pub points: Vec<Point>,
    /// This host and the server, from the first run that reached the server.
    pub environment: Option<Sides>,
    /// The baseline compared with, if any.
    pub baseline: Option<BaselineSummary>,
    /// The run's id in the results store, once recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// Earlier runs' medians of the same profile on this host (report.html's trends).
    #[serde(skip)]
    pub trend: Vec<crate::store::query::TrendRow>,
}

/// The profile, as the report records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProfileSummary {
    /// Name.
    pub name: String,
    /// `built-in quick` or a path.
    pub source: String,
    /// Runs per point (a `sequential` profile's most, without a baseline).
    pub repeats: u32,
    /// Each point stopped once its verdict was decided (its `runs` say how many).
    #[serde(default)]
    pub sequential: bool,
    /// Regression tolerance, percent.
    pub tolerance_percent: f64,
    /// Waived doctor checks.
    pub waive: Vec<String>,
}

/// Pass or fail, and why.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QualifyVerdict {
    /// Everything passed and nothing regressed.
    pub pass: bool,
    /// Doctor checks that failed and were not waived.
    pub doctor_failures: Vec<String>,
    /// Test points that failed a threshold or a run.
    pub failed_points: Vec<String>,
    /// Every regression against the baseline.
    pub regressions: Vec<String>,
}

/// Both ends' environments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sides {
    /// This host.
    pub local: Environment,
    /// The server.
    pub peer: Option<Environment>,
}

/// One test at one size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// `write_bw 64K`: the profile test's name and the size.
    pub id: String,
    /// The profile test's name.
    pub test: String,
    /// The test run (`write_bw`, `tcp_lat`).
    pub kind: String,
    /// Message size, bytes.
    pub size: u64,
    /// Every run.
    pub runs: Vec<Run>,
    /// Medians of the runs.
    pub median: Median,
    /// The thresholds judged.
    pub judgements: Vec<Judgement>,
    /// Regressions against the baseline.
    pub regressions: Vec<String>,
    /// Wall-clock seconds its runs took (JUnit's `time`).
    #[serde(default)]
    pub seconds: f64,
    /// The runs against the baseline's (crate::stats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<PointComparison>,
    /// Runs taken after every other point to confirm a `worse` comparison (0: none
    /// were needed); they are among `runs`.
    #[serde(default)]
    pub confirmation_runs: u32,
}

impl Point {
    /// `write_bw 64K`.
    pub fn id_for(test: &str, size: u64) -> String {
        format!("{test} {}", size_label(size))
    }

    /// Every threshold held and nothing regressed.
    pub fn pass(&self) -> bool {
        self.judgements.iter().all(|j| j.pass) && self.regressions.is_empty()
    }
}

/// The baseline, as the report records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BaselineSummary {
    /// The file.
    pub file: String,
    /// When the baseline ran.
    pub started: String,
    /// Its environments.
    pub environment: Option<Sides>,
    /// What differs between the two environments: `local firmware: 2.9.8350 → 2.10.720`.
    pub differences: Vec<String>,
}
