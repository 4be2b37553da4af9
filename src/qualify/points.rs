//! Running a profile's points: each `repeats` times; against a baseline, again one run
//! at a time while the comparison is inconclusive (up to `max_repeats`); and a point
//! that then looks `worse` runs `repeats` more times after every other point, so that a
//! slow spell of the host (minutes long in a TCG lab) cannot make a regression out of
//! runs taken back to back. The verdict is judged on all of its runs. A `sequential`
//! profile stops a point as soon as its verdict is decided ([`verdict::decided`], and
//! against a baseline a comparison that is not inconclusive), from two runs on.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::baseline::Baseline;
use super::profile::{Profile, ProfileTest, SEQUENTIAL_FLOOR};
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
            let count = Count {
                min: profile.repeats as usize,
                max: profile.max_repeats as usize,
                sequential: profile.sequential && !test.soak,
            };
            let clock = Instant::now();
            let mut runs = Vec::with_capacity(count.min);
            let gone = runner.measure(
                (spec, test),
                &id,
                &mut runs,
                count,
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
        let count = Count { min: target, max: target, sequential: false };
        let gone = runner.measure((spec, test), &id, &mut runs, count, None, report, &mut link);
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

/// How many runs a point takes: at least `min` (a sequential point: at least
/// [`SEQUENTIAL_FLOOR`], and `min` where its verdict is not yet decided), more against a
/// baseline while the comparison is inconclusive, never more than `max`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Count {
    pub min: usize,
    pub max: usize,
    pub sequential: bool,
}

impl Count {
    /// Whether `runs` are enough for `test`: its thresholds decided (as `min` runs would
    /// judge them) and, against `was`, a comparison that is not inconclusive.
    pub fn enough(
        &self,
        test: &ProfileTest,
        runs: &[Run],
        was: Option<&[Run]>,
        profile: &Profile,
        link: &LinkRate,
    ) -> bool {
        let k = runs.len();
        if k >= self.max {
            return true;
        }
        let floor = (SEQUENTIAL_FLOOR as usize).min(self.min);
        let thresholds = if self.sequential {
            k >= floor && verdict::decided(&test.limits, runs, self.min, link)
        } else {
            k >= self.min
        };
        thresholds && !was.is_some_and(|w| judged(runs, w, profile, Verdict::Inconclusive))
    }
}

impl Runner<'_> {
    /// Runs `spec` into `runs` until `count` says they are enough against `was`. Notes the first environment
    /// with a peer in `report` and a TCP point's link speed in `link`. Returns the error
    /// of a server that is gone.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &self,
        (spec, test): (&TestSpec, &ProfileTest),
        id: &str,
        runs: &mut Vec<Run>,
        count: Count,
        was: Option<&[Run]>,
        report: &mut QualifyReport,
        link: &mut LinkRate,
    ) -> Option<Error> {
        while !count.enough(test, runs, was, self.profile, link) {
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
                result: outcome.report.results.into_iter().next().filter(|r| !r.partial),
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
    use crate::measure::BwStats;
    use crate::qualify::profile;
    use crate::qualify::threshold::{Bandwidth, Floor};
    use crate::results::SizeResult;

    fn bw_run(mib: f64) -> Run {
        let bw = BwStats { avg_bytes_per_sec: mib * MIB, ..Default::default() };
        Run {
            result: Some(SizeResult { bw: Some(bw), ..Default::default() }),
            error: None,
            intervals: Vec::new(),
        }
    }

    fn one_point(limits: &str, sequential: bool) -> Profile {
        let text = format!(
            "repeats = 3\nsequential = {sequential}\n[[test]]\ntest = \"write_bw\"\nsizes = [\"64K\"]\n{limits}"
        );
        profile::parse(&text, "p.toml", "p").unwrap()
    }

    /// The runs the rule takes of `all` (offered one at a time), and its pass/fail of each
    /// threshold on them.
    pub(crate) fn replay(
        p: &Profile,
        all: &[Run],
        was: Option<&[Run]>,
        link: &LinkRate,
    ) -> (usize, Vec<(String, bool)>) {
        let t = &p.tests[0];
        let count = Count {
            min: p.repeats as usize,
            max: p.max_repeats as usize,
            sequential: p.sequential,
        };
        let mut runs = Vec::new();
        for r in all {
            if count.enough(t, &runs, was, p, link) {
                break;
            }
            runs.push(r.clone());
        }
        let m = Median::of(&runs);
        let verdicts = verdict::judge(&t.limits, &runs, &m, link);
        (runs.len(), verdicts.into_iter().map(|j| (j.threshold, j.pass)).collect())
    }

    #[test]
    fn a_sequential_point_stops_once_more_runs_cannot_change_its_verdict() {
        let link = LinkRate::Unknown;
        let floor = "min_bw = \"100 MiB/s\"\n";
        let (fixed, seq) = (one_point(floor, false), one_point(floor, true));
        // Two above the floor: a median of three is above it whatever the third does.
        let above = [bw_run(150.0), bw_run(120.0), bw_run(10.0)];
        assert_eq!(replay(&seq, &above, None, &link).0, 2);
        assert_eq!(replay(&fixed, &above, None, &link).0, 3);
        assert_eq!(replay(&seq, &above, None, &link).1, replay(&fixed, &above, None, &link).1);
        // One above, one below: the third decides, as it does for the fixed rule.
        let split = [bw_run(150.0), bw_run(50.0), bw_run(90.0)];
        let (n, v) = replay(&seq, &split, None, &link);
        assert_eq!((n, v.clone()), (3, replay(&fixed, &split, None, &link).1));
        assert_eq!(v[1], ("min_bw".to_string(), false), "median 90 MiB/s: {v:?}");
        // Nothing judged but that every run completes: the floor of two runs.
        let free = one_point("", true);
        assert_eq!(replay(&free, &above, None, &link).0, 2);
        // A soak is never cut short; nor is a profile of one run made longer.
        let once = profile::parse(
            "repeats = 1\nsequential = true\n[[test]]\ntest = \"write_bw\"\n",
            "p.toml",
            "p",
        )
        .unwrap();
        assert_eq!(replay(&once, &above, None, &link).0, 1);
    }

    /// A lab qualification's recorded runs (`qualify quick` in the soft-RoCE lab, three
    /// runs a point, clean and with lo shaped: docs/qualify.md), replayed through the
    /// fixed rule and the sequential one: with quick's own thresholds, and with a floor
    /// or ceiling just inside and just outside each point's spread, the hard cases.
    #[test]
    fn recorded_lab_runs_get_the_same_verdicts_from_both_rules() {
        let recorded: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/qualify/quick-lab-runs.json"))
                .unwrap();
        let link = LinkRate::NoPhysicalLink("rxe0/1: soft device: no physical link".into());
        let quick = profile::load("quick").unwrap();
        let (mut points, mut saved, mut failed) = (0, 0, 0);
        for rec in recorded["recordings"].as_array().unwrap() {
            for p in rec["points"].as_array().unwrap() {
                let runs: Vec<Run> = serde_json::from_value(p["runs"].clone()).unwrap();
                assert_eq!(runs.len(), 3, "{}", p["id"]);
                let test = quick.tests.iter().find(|t| t.name == p["test"]).unwrap();
                let median = Median::of(&runs);
                let mut limits = vec![String::new()];
                for f in [0.9, 0.99, 1.0, 1.01, 1.1] {
                    if let Some(bw) = median.bw_bytes_per_sec {
                        limits.push(format!("min_bw = \"{:.3} MiB/s\"\n", bw * f / MIB));
                    }
                    if let Some(us) = median.lat_typical_us {
                        limits.push(format!("max_lat_typical = \"{:.4} us\"\n", us * f));
                    }
                }
                for l in &limits {
                    let body = format!(
                        "repeats = 3\nsequential = SEQ\n[[test]]\ntest = \"{}\"\nsizes = [{}]\n{l}",
                        test.name, test.specs[0].sizes[0]
                    );
                    let rule = |seq: bool| {
                        let text = body.replace("SEQ", &seq.to_string());
                        replay(&profile::parse(&text, "p.toml", "p").unwrap(), &runs, None, &link)
                    };
                    let ((n_fixed, fixed), (n_seq, seq)) = (rule(false), rule(true));
                    assert_eq!(seq, fixed, "{} with {l:?}", p["id"]);
                    assert_eq!(n_fixed, 3);
                    points += 1;
                    saved += n_fixed - n_seq;
                    failed += usize::from(fixed.iter().any(|(_, pass)| !pass));
                }
            }
        }
        assert!(points >= 14 * 6, "{points} replays");
        // Neither vacuous nor trivial: runs saved, and some replays that fail a threshold
        // and some that needed the third run (a floor inside the runs' spread).
        assert!(saved > 0, "the sequential rule saved no run in {points} replays");
        assert!(failed > 0 && saved < points, "{failed} failed, {saved} of {points} saved");
    }

    #[test]
    fn against_a_baseline_a_sequential_point_also_waits_for_a_decided_comparison() {
        let link = LinkRate::Unknown;
        let seq = one_point("", true);
        let was = [bw_run(100.0), bw_run(101.0), bw_run(99.0)];
        // Two runs within 10 % of every baseline run: `same` at 80 % (crate::stats).
        let same = [bw_run(100.5), bw_run(99.5), bw_run(100.0)];
        assert_eq!(replay(&seq, &same, Some(&was), &link).0, 2);
        // Half the bandwidth: `worse` needs 95 %, more runs than two (up to max_repeats).
        let worse: Vec<Run> = (0..6).map(|i| bw_run(50.0 + f64::from(i))).collect();
        let (n, _) = replay(&seq, &worse, Some(&was), &link);
        assert!(n > 2, "{n}");
        let fixed = one_point("", false);
        let (m, _) = replay(&fixed, &worse, Some(&was), &link);
        let cmp = |n: usize| verdict::compare(&worse[..n], &was, seq.tolerance).unwrap();
        assert_eq!(cmp(n).stats.verdict, cmp(m).stats.verdict);
    }

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
