//! `rdmabench qualify PROFILE --server HOST`: doctor first, then every test point of the
//! profile `repeats` times against a `serve`, judged by medians against the profile's
//! thresholds and, with `--baseline`, against an earlier qualification (crate::stats:
//! a point is `worse` only when its interval is beyond the tolerance). Writes
//! qualify.json, junit.xml and report.html, and records the run in the results store;
//! exit 0 pass, 1 fail or regression, 2 error. docs/qualify.md walks a firmware upgrade
//! with it.

pub mod baseline;
pub mod comparison;
pub mod junit;
mod model;
mod points;
pub mod profile;
pub mod report;
pub mod threshold;
pub mod verdict;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::compare::reach_server;
use crate::doctor::{self, Status};
use crate::engine::tool;
use crate::error::Error;
use crate::files;
use crate::inventory;
use crate::spec::Local;
use crate::store;
use crate::transport::Backend;

use baseline::Baseline;
use report::{BaselineSummary, ProfileSummary, QualifyReport, QualifyVerdict};
use threshold::LinkRate;

/// What a qualification is asked to do (the command line builds it).
#[derive(Debug)]
pub struct Options {
    /// A built-in profile's name or a profile file.
    pub profile: String,
    /// The host running `rdmabench serve`.
    pub server: String,
    /// An earlier qualify JSON, or a stored run's id.
    pub baseline: Option<String>,
    /// Also write qualify.json here.
    pub json: Option<PathBuf>,
    /// Also write junit.xml here.
    pub junit: Option<PathBuf>,
    /// Where qualify.json, junit.xml and report.html go.
    pub out: PathBuf,
    /// No progress bar.
    pub quiet: bool,
    /// How this side reaches the server (its device is the one doctor checks).
    pub local: Local,
    /// Where the run is recorded.
    pub store: store::Choice,
    /// Print the built-in profile as TOML instead of running it.
    pub print_profile: bool,
    /// Take a baseline: doctor's firmware check is recorded, not judged.
    pub baseline_only: bool,
}

/// Runs the qualification and writes its files. Returns the exit status: 0 when
/// everything passed, 1 on a failure or a regression.
///
/// # Errors
/// A bad profile, baseline or store, files that cannot be written, a server that cannot
/// be reached (each writing a junit.xml that says why), or a server that is gone (the
/// partial report is written first).
pub fn qualify(args: &Options, out: &mut dyn Write) -> Result<u8, Error> {
    if args.print_profile {
        return profile::print_built_in(&args.profile, out);
    }
    let started = crate::stamp::utc_now();
    let mut ran = Ran::default();
    let (mut profile, mut store, baseline, doctor) =
        start(args, &mut ran).inspect_err(|e| write_not_started(args, e, &ran, &started))?;
    // A baseline is taken whole: later runs are compared with all of its runs.
    profile.sequential &= !args.baseline_only;
    let local = &args.local;
    let mut report = new_report(args, &profile, doctor);
    let link = match report.doctor.no_physical_link(local.device.as_deref()) {
        Some(why) => LinkRate::NoPhysicalLink(why),
        None => rdma_link_gbps(local.device.as_deref()).into(),
    };
    let stopped = points::run_points(
        &mut report,
        &profile,
        local,
        &link,
        baseline.as_ref(),
        (&args.out, args.quiet),
    );
    finish(&mut report, profile.tolerance, baseline.as_ref());
    let stored = store.as_mut().map(|s| baseline::record(s, &mut report));
    write_files(args, &report)?;
    if let Err(e) = stopped {
        let partial =
            format!("the qualification stopped: {e}; partial results in {}", args.out.display());
        return Err(Error::new(e.kind, partial));
    }
    let mut text = report::table(&report);
    text.push_str(&format!(" report: {}\n", args.out.join("report.html").display()));
    if let (Some(s), Some(id)) = (&store, report.run_id) {
        text.push_str(&format!(" stored: run {id} in {}\n", s.path().display()));
    }
    // `--json -` or `--junit -` has stdout: the table goes to stderr.
    let dashed = [&args.json, &args.junit].into_iter().flatten().any(|p| files::is_stdout(p));
    let out: &mut dyn Write = if dashed { &mut std::io::stderr() } else { out };
    out.write_all(text.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    let _ = out.flush();
    stored.transpose()?;
    Ok(if report.verdict.pass { 0 } else { crate::error::EXIT_VERDICT })
}

/// What a start got to before it failed: the profile's name and waivers, doctor's report
/// (the JUnit of a start that fails names the profile and skips what it waives).
#[derive(Default)]
struct Ran {
    profile: Option<(String, Vec<String>)>,
    doctor: Option<doctor::DoctorReport>,
}

/// Everything before the first point: the profile (`--baseline-only` recording the
/// firmware check), the store and the baseline (a damaged store or a wrong baseline is
/// found before anything runs), the outputs, doctor (into `ran` for the JUnit of a
/// start that fails later) and the server reached.
fn start(
    args: &Options,
    ran: &mut Ran,
) -> Result<(profile::Profile, Option<store::Store>, Option<Baseline>, doctor::DoctorReport), Error>
{
    let mut profile = profile::load(&args.profile)?;
    if args.baseline_only {
        profile.record_firmware();
    }
    ran.profile = Some((profile.name.clone(), profile.waive.clone()));
    let store = match &args.store {
        store::Choice::At(path) => Some(store::Store::open(path)?),
        store::Choice::Nowhere => None,
    };
    let baseline = args
        .baseline
        .as_deref()
        .map(|b| Baseline::load(b, store.as_ref(), &profile.name))
        .transpose()?;
    prepare_outputs(args)?;
    let root = PathBuf::from("/");
    let local = &args.local;
    let target =
        doctor::Target { device: local.device.as_deref(), root: &root, backend: Backend::native() };
    let doctor = doctor::diagnose(&target)?;
    ran.doctor = Some(doctor.clone());
    reach_server(&args.server, local)?;
    Ok((profile, store, baseline, doctor))
}

/// `--out` created, `--json` and `--junit` checked (and emptied) before anything runs:
/// a verdict is never lost to a bad path at the end.
fn prepare_outputs(args: &Options) -> Result<(), Error> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Error::io(format!("cannot create --out {}: {e}", args.out.display())))?;
    files::one_stdout(&[("--json", args.json.as_deref()), ("--junit", args.junit.as_deref())])?;
    for path in [&args.json, &args.junit].into_iter().flatten().filter(|p| !files::is_stdout(p)) {
        std::fs::write(path, "").map_err(|e| Error::io(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// The report before any point has run.
fn new_report(
    args: &Options,
    profile: &profile::Profile,
    doctor: doctor::DoctorReport,
) -> QualifyReport {
    QualifyReport {
        schema_version: crate::report::SCHEMA_VERSION,
        kind: "qualify".into(),
        tool: tool(),
        profile: ProfileSummary {
            name: profile.name.clone(),
            source: profile.source.clone(),
            repeats: profile.repeats,
            sequential: profile.sequential,
            tolerance_percent: profile.tolerance.0,
            waive: profile.waive.clone(),
        },
        server: args.server.clone(),
        started: crate::stamp::utc_now(),
        verdict: QualifyVerdict::default(),
        waived: Vec::new(),
        doctor,
        points: Vec::new(),
        environment: None,
        baseline: None,
        run_id: None,
        trend: Vec::new(),
    }
}

/// Waivers, the comparison with the baseline, and the verdict.
pub(crate) fn finish(
    report: &mut QualifyReport,
    tolerance: threshold::Percent,
    baseline: Option<&Baseline>,
) {
    let waived =
        |c: &doctor::Check| report.profile.waive.iter().any(|w| *w == c.id || *w == c.name());
    let failing: Vec<&doctor::Check> =
        report.doctor.checks.iter().filter(|c| c.status == Status::Fail).collect();
    let waived_now: Vec<String> = failing.iter().filter(|c| waived(c)).map(|c| c.name()).collect();
    let doctor_failures: Vec<String> =
        failing.iter().filter(|c| !waived(c)).map(|c| c.name()).collect();
    report.waived = waived_now;
    if let Some(b) = baseline {
        for p in &mut report.points {
            let was = b.report.points.iter().find(|q| q.id == p.id);
            p.comparison = was.and_then(|w| verdict::compare(&p.runs, &w.runs, tolerance));
            let confirmed = |line: String| match p.confirmation_runs {
                0 => line,
                n => format!("{line}; worse again with {n} more runs after every other point"),
            };
            p.regressions =
                p.comparison.iter().filter_map(|c| c.regression(&p.id)).map(confirmed).collect();
        }
        report.baseline = Some(BaselineSummary {
            file: b.file.clone(),
            started: b.report.started.clone(),
            environment: b.report.environment.clone(),
            differences: report::differences(
                b.report.environment.as_ref(),
                report.environment.as_ref(),
            ),
        });
    }
    let failed_points: Vec<String> =
        report.points.iter().filter(|p| !p.pass()).map(|p| p.id.clone()).collect();
    let regressions: Vec<String> =
        report.points.iter().flat_map(|p| p.regressions.clone()).collect();
    report.verdict = QualifyVerdict {
        pass: doctor_failures.is_empty() && failed_points.is_empty() && regressions.is_empty(),
        doctor_failures,
        failed_points,
        regressions,
    };
}

/// The data rate of this side's port (Gb/s after line encoding; on Ethernet the link
/// speed itself): what `% link` floors are taken of.
fn rdma_link_gbps(device: Option<&str>) -> Option<f64> {
    let inv = inventory::collect(device, Backend::native()).ok()?;
    let port = inv.devices.first()?.ports.first()?;
    if port.link_layer == "Ethernet" {
        port.rate_gbps
    } else {
        port.data_rate_gbps
    }
}

/// The JUnit of a qualification that could not start, into `--out` and `--junit`, so CI
/// shows why. Best effort: the error that stopped it is what the command reports.
fn write_not_started(args: &Options, e: &Error, ran: &Ran, started: &str) {
    let profile = match &ran.profile {
        Some((name, waive)) => Ok((name.as_str(), &waive[..])),
        None => Err(args.profile.as_str()),
    };
    let xml = junit::not_started(profile, &e.message, ran.doctor.as_ref(), started);
    let _ = std::fs::create_dir_all(&args.out);
    let _ = std::fs::write(args.out.join("junit.xml"), &xml);
    if let Some(path) = &args.junit {
        let _ = files::write_output("--junit", path, &xml);
    }
}

/// qualify.json, junit.xml and report.html into `--out`, and `--json`/`--junit`.
fn write_files(args: &Options, report: &QualifyReport) -> Result<(), Error> {
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text)
            .map_err(|e| Error::io(format!("cannot write {}: {e}", path.display())))
    };
    let json = crate::report::to_json(report);
    let junit = junit::document(report);
    write(&args.out.join("qualify.json"), &json)?;
    write(&args.out.join("junit.xml"), &junit)?;
    write(&args.out.join("report.html"), &report::html(report))?;
    if let Some(p) = &args.json {
        files::write_output("--json", p, &json)?;
    }
    if let Some(p) = &args.junit {
        files::write_output("--junit", p, &junit)?;
    }
    Ok(())
}
