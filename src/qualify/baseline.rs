//! A qualification and the results store: the baseline it compares with (a qualify.json
//! file or a stored run), its record in the store, and the trends its report draws.

use std::path::Path;

use super::report::{QualifyReport, Sides};
use super::verdict::Figure;
use crate::error::Error;
use crate::store::{NewRun, PointRow, Store};

/// How many earlier runs a trend shows at most.
pub const TREND_RUNS: u32 = 20;

/// An earlier qualification to compare with.
pub struct Baseline {
    /// The file, or `run N in STORE`.
    pub file: String,
    /// Its report.
    pub report: QualifyReport,
}

impl Baseline {
    /// `--baseline ARG`: a qualify JSON file, or (a number naming no file) a stored run
    /// of `store`. Its profile must be `profile`.
    ///
    /// # Errors
    /// One line: the file or run cannot be read, is not a qualification, or is another
    /// profile's.
    pub fn load(arg: &str, store: Option<&Store>, profile: &str) -> Result<Baseline, Error> {
        let stored_id = arg.parse::<i64>().ok().filter(|_| !Path::new(arg).exists());
        let baseline = match (stored_id, store) {
            (Some(id), Some(store)) => Baseline::stored(store, id)?,
            (Some(id), None) => {
                return Err(Error::usage(format!(
                    "--baseline {id}: no such file, and with --no-store no stored run {id} to read"
                )))
            }
            (None, _) => Baseline::file(Path::new(arg))?,
        };
        let theirs = &baseline.report.profile.name;
        if theirs != profile {
            return Err(Error::usage(format!(
                "--baseline {}: a qualification of profile '{theirs}', this one runs '{profile}': a baseline is the same profile's earlier run",
                baseline.file
            )));
        }
        Ok(baseline)
    }

    fn file(path: &Path) -> Result<Baseline, Error> {
        let file = path.display().to_string();
        let text = crate::files::read_text(path, crate::files::BASELINE_LIMIT)
            .map_err(|e| Error::usage(format!("--baseline {e}")))?;
        let report =
            parse(&text).map_err(|why| Error::usage(format!("--baseline {file}: {why}")))?;
        Ok(Baseline { file, report })
    }

    /// A qualify JSON document read from `file` (a path, or `run N in STORE`).
    ///
    /// # Errors
    /// Not a qualification: one line naming `file`.
    pub fn parsed(file: String, text: &str) -> Result<Baseline, Error> {
        let report = parse(text).map_err(|why| Error::usage(format!("{file}: {why}")))?;
        Ok(Baseline { file, report })
    }

    /// Stored run `id` of `store`.
    ///
    /// # Errors
    /// No such run, or not a qualification.
    pub fn stored(store: &Store, id: i64) -> Result<Baseline, Error> {
        let (_, text) = store.run(id)?;
        let file = format!("run {id} in {}", store.path().display());
        let report = parse(&text).map_err(|why| Error::usage(format!("{file}: {why}")))?;
        Ok(Baseline { file, report })
    }
}

/// A qualify JSON document, its environments made inert.
fn parse(text: &str) -> Result<QualifyReport, String> {
    let mut report: QualifyReport =
        serde_json::from_str(text).map_err(|e| format!("not a qualify JSON ({e})"))?;
    if report.kind != "qualify" {
        return Err(format!("a '{}' report, not a qualify one", report.kind));
    }
    // Its names and environments are shown beside this run's: as inert as a peer's.
    let clean = crate::text::clean;
    report.profile.name = clean(&report.profile.name);
    for p in &mut report.points {
        (p.id, p.test, p.kind) = (clean(&p.id), clean(&p.test), clean(&p.kind));
    }
    report.environment = report.environment.map(|s| Sides {
        local: s.local.cleaned(),
        peer: s.peer.map(crate::environment::Environment::cleaned),
    });
    Ok(report)
}

/// Records `report` in `store` (its id into `report.run_id`), then reads the trend of
/// its profile on this host into `report.trend`.
///
/// # Errors
/// The store refused the write or the read.
pub fn record(store: &mut Store, report: &mut QualifyReport) -> Result<(), Error> {
    let local = report.environment.as_ref().map(|s| &s.local);
    let host =
        local.map_or_else(|| report.doctor.environment.hostname.clone(), |l| l.hostname.clone());
    let device = local.and_then(|l| l.device.as_ref());
    let points = report
        .points
        .iter()
        .filter_map(|p| {
            let figure = Figure::of(&p.runs)?;
            Some(PointRow {
                point: p.id.clone(),
                figure: figure.name().into(),
                unit: figure.unit().into(),
                median: crate::stats::median(&figure.values(&p.runs)),
                runs: p.runs.len() as u32,
            })
        })
        .collect();
    let run = NewRun {
        kind: "qualify".into(),
        started: report.started.clone(),
        host: host.clone(),
        device: device.map(|d| d.name.clone()),
        firmware: device.map(|d| d.firmware.clone()),
        profile: report.profile.name.clone(),
        server: Some(report.server.clone()),
        pass: report.verdict.pass,
        report: crate::report::to_json(&*report),
        points,
    };
    report.run_id = Some(store.record(&run)?);
    report.trend = store.trend(&report.profile.name, &host, TREND_RUNS)?;
    Ok(())
}
