//! `rdmabench qualify PROFILE --server HOST`: doctor first, then every test point of the
//! profile `repeats` times against a `serve`, judged by medians against the profile's
//! thresholds and, with `--baseline`, against an earlier qualification. Writes
//! qualify.json, junit.xml and report.html; exit 0 pass, 1 fail or regression, 2 error.
//! docs/qualify.md walks a firmware upgrade with it.

pub mod junit;
pub mod profile;
pub mod report;
pub mod threshold;
pub mod verdict;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli::QualifyArgs;
use crate::compare::{reach_server, run_point};
use crate::doctor::{self, Status};
use crate::engine::{tool, Side};
use crate::error::Error;
use crate::inventory;
use crate::spec::{Link, Local};
use crate::transport::Backend;

use report::{BaselineSummary, Point, ProfileSummary, QualifyReport, QualifyVerdict, Sides};
use threshold::LinkRate;
use verdict::{Median, Run};

/// Runs the qualification and writes its files. Returns the exit status: 0 when
/// everything passed, 1 on a failure or a regression.
///
/// # Errors
/// A bad profile or baseline, files that cannot be written, a server that cannot be
/// reached (each writing a junit.xml that says why), or a server that is gone (the
/// partial report is written first).
pub fn qualify(args: &QualifyArgs, out: &mut dyn Write) -> Result<u8, Error> {
    if args.print_profile {
        return profile::print_built_in(&args.profile, out);
    }
    let started = crate::stamp::utc_now();
    let mut doctor_ran = None;
    let (profile, baseline, local, doctor) = start(args, &mut doctor_ran)
        .inspect_err(|e| write_not_started(args, e, doctor_ran.as_ref(), &started))?;
    let mut report = new_report(args, &profile, doctor);
    let link = match report.doctor.no_physical_link(args.client.device.as_deref()) {
        Some(why) => LinkRate::NoPhysicalLink(why),
        None => rdma_link_gbps(args.client.device.as_deref()).into(),
    };
    let stopped = run_points(&mut report, &profile, &local, &link, args.quiet);
    finish(&mut report, &profile, baseline.as_ref());
    write_files(args, &report)?;
    if let Err(e) = stopped {
        let partial =
            format!("the qualification stopped: {e}; partial results in {}", args.out.display());
        return Err(Error::new(e.kind, partial));
    }
    let mut text = report::table(&report);
    text.push_str(&format!(" report: {}\n", args.out.join("report.html").display()));
    out.write_all(text.as_bytes()).map_err(|e| Error::io(format!("writing output: {e}")))?;
    let _ = out.flush();
    Ok(if report.verdict.pass { 0 } else { crate::EXIT_VERDICT })
}

/// Everything before the first point: the profile (`--baseline-only` recording the
/// firmware check), the baseline, the outputs, doctor (into `doctor_ran` for the JUnit
/// of a start that fails later) and the server reached.
fn start(
    args: &QualifyArgs,
    doctor_ran: &mut Option<doctor::DoctorReport>,
) -> Result<(profile::Profile, Option<Baseline>, Local, doctor::DoctorReport), Error> {
    let mut profile = profile::load(&args.profile)?;
    if args.baseline_only {
        profile.record_firmware();
    }
    let baseline = args.baseline.as_deref().map(Baseline::load).transpose()?;
    let local = args.client.local()?;
    prepare_outputs(args)?;
    let root = PathBuf::from("/");
    let target = doctor::Target {
        device: args.client.device.as_deref(),
        root: &root,
        backend: Backend::native(),
    };
    let doctor = doctor::diagnose(&target)?;
    *doctor_ran = Some(doctor.clone());
    reach_server(&args.server, &local)?;
    Ok((profile, baseline, local, doctor))
}

/// `--out` created, `--json` and `--junit` checked (and emptied) before anything runs:
/// a verdict is never lost to a bad path at the end.
fn prepare_outputs(args: &QualifyArgs) -> Result<(), Error> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Error::io(format!("cannot create --out {}: {e}", args.out.display())))?;
    for path in [&args.json, &args.junit].into_iter().flatten() {
        std::fs::write(path, "").map_err(|e| Error::io(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// The report before any point has run.
fn new_report(
    args: &QualifyArgs,
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
    }
}

/// Runs every point `repeats` times into `report.points`. A server that is gone
/// (closed, unreachable, refusing the key, busy) stops the run: its error comes back,
/// and the points so far are in the report.
fn run_points(
    report: &mut QualifyReport,
    profile: &profile::Profile,
    local: &Local,
    link_rate: &LinkRate,
    quiet: bool,
) -> Result<(), Error> {
    let side = Side::Client { host: report.server.clone() };
    let total =
        profile.tests.iter().map(|t| t.specs.len()).sum::<usize>() * profile.repeats as usize;
    let progress = crate::progress::Progress::new(total, quiet);
    for test in &profile.tests {
        for spec in &test.specs {
            let id = Point::id_for(&test.name, spec.sizes[0]);
            let mut runs = Vec::with_capacity(profile.repeats as usize);
            let mut link = link_rate.clone();
            let mut gone = None;
            let clock = std::time::Instant::now();
            for _ in 0..profile.repeats {
                progress.running(&id);
                let outcome = run_point(spec, &side, local);
                progress.done_one();
                if let Some(env) = &outcome.report.environment {
                    if matches!(spec.link, Link::Tcp(_)) {
                        // A TCP point's "link" is the interface's speed.
                        let speed = env.local.interface.as_ref().and_then(|i| i.speed_mbps);
                        link = speed.map(|m| m as f64 / 1000.0).into();
                    }
                    if report.environment.is_none() && env.peer.is_some() {
                        report.environment =
                            Some(Sides { local: env.local.clone(), peer: env.peer.clone() });
                    }
                }
                gone = outcome.error.clone().filter(|e| e.kind.peer_unavailable());
                runs.push(Run {
                    result: outcome.report.results.into_iter().next(),
                    error: outcome.error,
                });
                if gone.is_some() {
                    break;
                }
            }
            let mut point = point(test, &id, spec.id(), spec.sizes[0], runs, &link);
            point.seconds = clock.elapsed().as_secs_f64();
            report.points.push(point);
            if let Some(e) = gone {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// One point judged on its thresholds.
fn point(
    test: &profile::ProfileTest,
    id: &str,
    kind: &str,
    size: u64,
    runs: Vec<Run>,
    link: &LinkRate,
) -> Point {
    let median = Median::of(&runs);
    let judgements = verdict::judge(&test.limits, &runs, &median, link);
    Point {
        id: id.to_string(),
        test: test.name.clone(),
        kind: kind.to_string(),
        size,
        runs,
        median,
        judgements,
        regressions: Vec::new(),
        seconds: 0.0,
    }
}

/// Waivers, regressions against the baseline, and the verdict.
fn finish(report: &mut QualifyReport, profile: &profile::Profile, baseline: Option<&Baseline>) {
    let waived = |c: &doctor::Check| profile.waive.iter().any(|w| *w == c.id || *w == c.name());
    let failing: Vec<&doctor::Check> =
        report.doctor.checks.iter().filter(|c| c.status == Status::Fail).collect();
    report.waived = failing.iter().filter(|c| waived(c)).map(|c| c.name()).collect();
    let doctor_failures: Vec<String> =
        failing.iter().filter(|c| !waived(c)).map(|c| c.name()).collect();
    if let Some(b) = baseline {
        for p in &mut report.points {
            if let Some(was) = b.report.points.iter().find(|q| q.id == p.id) {
                p.regressions =
                    verdict::regressions(&p.id, &p.median, &was.median, profile.tolerance);
            }
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

/// An earlier qualify.json.
struct Baseline {
    file: String,
    report: QualifyReport,
}

impl Baseline {
    fn load(path: &Path) -> Result<Baseline, Error> {
        let file = path.display().to_string();
        let bad = |why: String| Error::usage(format!("--baseline {file}: {why}"));
        let text = crate::files::read_text(path, crate::files::BASELINE_LIMIT)
            .map_err(|e| Error::usage(format!("--baseline {e}")))?;
        let mut report: QualifyReport =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a qualify JSON ({e})")))?;
        if report.kind != "qualify" {
            return Err(bad(format!("a '{}' report, not a qualify one", report.kind)));
        }
        // Its environments are shown beside this run's: as inert as a peer's.
        report.environment = report.environment.map(|s| Sides {
            local: s.local.cleaned(),
            peer: s.peer.map(crate::environment::Environment::cleaned),
        });
        Ok(Baseline { file, report })
    }
}

/// The JUnit of a qualification that could not start, into `--out` and `--junit`, so CI
/// shows why. Best effort: the error that stopped it is what the command reports.
fn write_not_started(
    args: &QualifyArgs,
    e: &Error,
    doctor: Option<&doctor::DoctorReport>,
    started: &str,
) {
    let xml = junit::not_started(&args.profile, &e.message, doctor, started);
    let _ = std::fs::create_dir_all(&args.out);
    for path in [Some(args.out.join("junit.xml")), args.junit.clone()].into_iter().flatten() {
        let _ = std::fs::write(path, &xml);
    }
}

/// qualify.json, junit.xml and report.html into `--out`, and `--json`/`--junit`.
fn write_files(args: &QualifyArgs, report: &QualifyReport) -> Result<(), Error> {
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
        write(p, &json)?;
    }
    if let Some(p) = &args.junit {
        write(p, &junit)?;
    }
    Ok(())
}
