//! Running a profile's points: each `repeats` times; against a baseline, again one run
//! at a time while the comparison is inconclusive (up to `max_repeats`); and a point
//! that then looks `worse` runs `repeats` more times after every other point, so that a
//! slow spell of the host (minutes long in a TCG lab) cannot make a regression out of
//! runs taken back to back. The verdict is judged on all of its runs.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::baseline::Baseline;
use super::profile::{Profile, ProfileTest};
use super::report::{Point, QualifyReport, Sides};
use super::threshold::{Bandwidth, Floor, LinkRate};
use super::verdict::{self, Median, Run};
use crate::compare::run_point;
use crate::engine::Side;
use crate::error::Error;
use crate::measure::MIB;
use crate::progress::Progress;
use crate::spec::{IntervalLines, Link, Local, TestSpec};
use crate::stats::Verdict;

/// What every run of the qualification shares.
struct Runner<'a> {
    side: Side,
    local: &'a Local,
    profile: &'a Profile,
    progress: Progress,
    /// Where a soak's runs append their interval records (`OUT/soak`).
    soak_dir: PathBuf,
}

/// Runs every point into `report.points` (see the module doc). A server that is gone
/// (closed, unreachable, refusing the key, busy) stops the run: its error comes back,
/// and the points so far are in the report.
pub(super) fn run_points(
    report: &mut QualifyReport,
    profile: &Profile,
    local: &Local,
    link_rate: &LinkRate,
    baseline: Option<&Baseline>,
    (out, quiet): (&Path, bool),
) -> Result<(), Error> {
    let total =
        profile.tests.iter().map(|t| t.specs.len()).sum::<usize>() * profile.repeats as usize;
    let runner = Runner {
        side: Side::Client { host: report.server.clone() },
        local,
        profile,
        progress: Progress::new(total, quiet),
        soak_dir: out.join("soak"),
    };
    let was = |id: &str| baseline.and_then(|b| b.report.points.iter().find(|q| q.id == id));
    let mut measured = Vec::new();
    for test in &profile.tests {
        for spec in &test.specs {
            let id = Point::id_for(&test.name, spec.sizes[0]);
            let mut link = link_rate.clone();
            let (min, max) = (profile.repeats as usize, profile.max_repeats as usize);
            let clock = Instant::now();
            let mut runs = Vec::with_capacity(min);
            let gone = runner.measure(
                (spec, test),
                &id,
                &mut runs,
                (min, max),
                was(&id).map(|w| &w.runs[..]),
                report,
                &mut link,
            );
            let mut point = point(test, &id, spec, runs, &link);
            point.seconds = clock.elapsed().as_secs_f64();
            report.points.push(point);
            if let Some(e) = gone {
                return Err(e);
            }
            measured.push((test, spec, link));
        }
    }
    for (i, (test, spec, mut link)) in measured.into_iter().enumerate() {
        let p = &report.points[i];
        let Some(w) = was(&p.id) else { continue };
        if !judged(&p.runs, &w.runs, profile, Verdict::Worse) {
            continue;
        }
        let (id, mut runs, seconds) = (p.id.clone(), p.runs.clone(), p.seconds);
        let target = runs.len() + profile.repeats as usize;
        let clock = Instant::now();
        let gone =
            runner.measure((spec, test), &id, &mut runs, (target, target), None, report, &mut link);
        let mut point = point(test, &id, spec, runs, &link);
        point.seconds = seconds + clock.elapsed().as_secs_f64();
        point.confirmation_runs = profile.repeats;
        report.points[i] = point;
        if let Some(e) = gone {
            return Err(e);
        }
    }
    Ok(())
}

impl Runner<'_> {
    /// Runs `spec` into `runs` until there are `min` runs and, against `was`, a
    /// comparison that is not inconclusive, or `max` runs. Notes the first environment
    /// with a peer in `report` and a TCP point's link speed in `link`. Returns the error
    /// of a server that is gone.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &self,
        (spec, test): (&TestSpec, &ProfileTest),
        id: &str,
        runs: &mut Vec<Run>,
        (min, max): (usize, usize),
        was: Option<&[Run]>,
        report: &mut QualifyReport,
        link: &mut LinkRate,
    ) -> Option<Error> {
        while runs.len() < max {
            if runs.len() >= min
                && !was.is_some_and(|w| judged(runs, w, self.profile, Verdict::Inconclusive))
            {
                break;
            }
            self.progress.running(id);
            let records = test.soak.then(|| self.soak_dir.join(soak_file(id, runs.len() + 1)));
            let outcome = match &records {
                Some(path) => {
                    // The point's floor holds each second too, where it is a figure here
                    // (a TCP point's link is known only after its first run).
                    let tcp = matches!(spec.link, Link::Tcp(_));
                    let floor = test.limits.min_bw.and_then(|b| match (b, b.floor(link)) {
                        (Bandwidth::OfLink(_), _) if tcp => None,
                        (_, Ok(Floor::Bytes(f))) => Some(f / MIB),
                        _ => None,
                    });
                    run_point(spec, &self.side, &soak_local(self.local, path, floor))
                }
                None => run_point(spec, &self.side, self.local),
            };
            self.progress.done_one();
            if let Some(env) = &outcome.report.environment {
                if matches!(spec.link, Link::Tcp(_)) {
                    *link = tcp_link(env.local.interface.as_ref());
                }
                if report.environment.is_none() && env.peer.is_some() {
                    report.environment =
                        Some(Sides { local: env.local.clone(), peer: env.peer.clone() });
                }
            }
            let gone = outcome.error.clone().filter(|e| e.kind.peer_unavailable());
            runs.push(Run {
                result: outcome.report.results.into_iter().next(),
                error: outcome.error,
                intervals: records.map_or_else(Vec::new, |path| soak_intervals(&path)),
            });
            if gone.is_some() {
                return gone;
            }
        }
        None
    }
}

/// `write_bw 64K`'s run 2: `write_bw_64K-2.jsonl`.
fn soak_file(id: &str, run: usize) -> String {
    let name: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    format!("{name}-{run}.jsonl")
}

/// `local` with `--json-lines` to `path`: every second's interval recorded and judged,
/// against `floor` MiB/s if given.
fn soak_local(local: &Local, path: &Path, floor: Option<f64>) -> Local {
    // Emptied first: an earlier qualification's records in the same --out are not this
    // run's. A folder or file that cannot be made loses the records only: the run goes on.
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = crate::files::create(path);
    let lines = IntervalLines {
        every: std::time::Duration::from_secs(1),
        text: false,
        json_lines: Some(path.to_path_buf()),
        gbits: false,
        to_stderr: false,
        min_bw: floor,
    };
    Local { interval_lines: Some(lines), ..local.clone() }
}

/// A soak's whole intervals (`stream` null) from its records: `[end_s, bytes_per_sec]`.
fn soak_intervals(path: &Path) -> Vec<[f64; 2]> {
    let Ok(text) = crate::files::read_text(path, crate::files::BASELINE_LIMIT) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["stream"].is_null())
        .filter_map(|r| Some([r["end_s"].as_f64()?, r["bytes_per_sec"].as_f64()?]))
        .collect()
}

/// Whether `runs` against the baseline's `was` come to `verdict`.
fn judged(runs: &[Run], was: &[Run], profile: &Profile, verdict: Verdict) -> bool {
    verdict::compare(runs, was, profile.tolerance).is_some_and(|c| c.stats.verdict == verdict)
}

/// One point judged on its thresholds.
fn point(test: &ProfileTest, id: &str, spec: &TestSpec, runs: Vec<Run>, link: &LinkRate) -> Point {
    let median = Median::of(&runs);
    let mut judgements = verdict::judge(&test.limits, &runs, &median, link);
    if test.soak {
        judgements.push(verdict::soak_intervals(&runs));
    }
    Point {
        id: id.to_string(),
        test: test.name.clone(),
        kind: spec.id().to_string(),
        size: spec.sizes[0],
        runs,
        median,
        judgements,
        regressions: Vec::new(),
        seconds: 0.0,
        comparison: None,
        confirmation_runs: 0,
    }
}

/// A TCP point's "link": the interface's speed; loopback (`lo`) has no physical link, so
/// a `% link` floor is n/a there, not unknown.
fn tcp_link(interface: Option<&crate::environment::InterfaceEnvironment>) -> LinkRate {
    match interface {
        Some(i) if i.name == "lo" => {
            LinkRate::NoPhysicalLink(format!("{}: loopback: no physical link", i.name))
        }
        i => i.and_then(|i| i.speed_mbps).map(|m| m as f64 / 1000.0).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::InterfaceEnvironment;
    use crate::qualify::threshold::{Bandwidth, Floor};

    #[test]
    fn a_tcp_points_link_is_its_interfaces_and_loopback_has_none() {
        let iface = |name: &str, speed| InterfaceEnvironment {
            name: name.into(),
            mtu: None,
            speed_mbps: speed,
        };
        let lo = tcp_link(Some(&iface("lo", None)));
        assert_eq!(
            Bandwidth::OfLink(90.0).floor(&lo),
            Ok(Floor::NotApplicable("n/a: lo: loopback: no physical link".into()))
        );
        assert_eq!(tcp_link(Some(&iface("eth0", Some(25_000)))), LinkRate::Gbps(25.0));
        assert_eq!(tcp_link(Some(&iface("eth0", None))), LinkRate::Unknown);
        assert_eq!(tcp_link(None), LinkRate::Unknown);
    }
}
