//! Judging a test point: the median of its runs against the profile's thresholds, and
//! its runs against the baseline's (crate::stats). Pure arithmetic on results; nothing
//! here runs a test.

use serde::{Deserialize, Serialize};

use super::profile::Limits;
use super::threshold::{Floor, LinkRate, Percent};
use crate::error::Error;
use crate::measure::MIB;
use crate::results::SizeResult;
use crate::stats::{self, Comparison, Direction, Verdict};

/// One run of a point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// What the client measured (absent when the run failed before a result).
    pub result: Option<SizeResult>,
    /// Why the run failed, if it did.
    pub error: Option<Error>,
    /// A soak's whole intervals as it recorded them: `[end_s, bytes_per_sec]` each
    /// (empty for a point that is no soak).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<[f64; 2]>,
}

/// The medians of a point's successful runs (`None`: no run measured it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Median {
    /// BW average, bytes/s.
    pub bw_bytes_per_sec: Option<f64>,
    /// Messages/s.
    pub msg_rate: Option<f64>,
    /// t_typical, µs.
    pub lat_typical_us: Option<f64>,
    /// t_avg, µs.
    pub lat_avg_us: Option<f64>,
    /// 99th percentile, µs.
    pub lat_p99_us: Option<f64>,
    /// Client CPU-seconds per GB.
    pub cpu_client_s_per_gb: Option<f64>,
    /// Server CPU-seconds per GB.
    pub cpu_server_s_per_gb: Option<f64>,
    /// The runs' coefficient of variation (their `stability`'s `cv`: 0.05 is 5 %).
    #[serde(default)]
    pub cv: Option<f64>,
    /// The runs' lowest interval over their median interval (bandwidth).
    #[serde(default)]
    pub low_ratio: Option<f64>,
    /// The runs' highest interval or slowest iteration over the median (`spike`).
    #[serde(default)]
    pub spike: Option<f64>,
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: Vec<f64>) -> Option<f64> {
    stats::median(&values)
}

impl Median {
    /// The medians over `runs`' results.
    pub fn of(runs: &[Run]) -> Median {
        Median::padded(runs, 0, 0.0)
    }

    /// The medians over `runs`' results and `extra` more runs that each measured `value`
    /// for every figure the runs measured: with `f64::MIN` and `f64::MAX`, the lowest and
    /// highest medians any `extra` further runs could bring.
    pub fn padded(runs: &[Run], extra: usize, value: f64) -> Median {
        let results: Vec<&SizeResult> = runs.iter().filter_map(|r| r.result.as_ref()).collect();
        let m = |f: &dyn Fn(&SizeResult) -> Option<f64>| {
            let mut v: Vec<f64> = results.iter().filter_map(|r| f(r)).collect();
            if !v.is_empty() {
                v.extend(std::iter::repeat_n(value, extra));
            }
            median(v)
        };
        Median {
            bw_bytes_per_sec: m(&|r| r.bw.as_ref().map(|b| b.avg_bytes_per_sec)),
            msg_rate: m(&|r| r.bw.as_ref().map(|b| b.msg_rate)),
            lat_typical_us: m(&|r| r.lat.as_ref().map(|l| l.t_typical_us)),
            lat_avg_us: m(&|r| r.lat.as_ref().map(|l| l.t_avg_us)),
            lat_p99_us: m(&|r| r.lat.as_ref().map(|l| l.p99_us)),
            cpu_client_s_per_gb: m(&|r| r.cpu.client.and_then(|c| c.cpu_s_per_gb)),
            cpu_server_s_per_gb: m(&|r| r.cpu.server.and_then(|c| c.cpu_s_per_gb)),
            cv: m(&|r| r.stability.as_ref().map(|s| s.cv)),
            low_ratio: m(&|r| {
                let bandwidth = r.bw.is_some();
                r.stability
                    .as_ref()
                    .filter(|s| bandwidth && s.median > 0.0)
                    .map(|s| s.lowest / s.median)
            }),
            spike: m(&|r| r.stability.as_ref().map(|s| s.spike)),
        }
    }
}

/// One threshold judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// `min_bw`, `max_lat_p99`, …, or `runs` (every run must complete).
    pub threshold: String,
    /// The limit as the profile wrote it, and in numbers.
    pub limit: String,
    /// What the median was.
    pub observed: String,
    /// Whether it held.
    pub pass: bool,
}

impl Judgement {
    /// A threshold that does not apply here (`n/a: …`, see [`judge`]): it passes, and
    /// reports show it as n/a.
    pub fn not_applicable(&self) -> bool {
        self.observed.starts_with("n/a: ")
    }
}

fn mib(b: f64) -> String {
    format!("{:.2} MiB/s", b / MIB)
}

/// Every threshold of `limits` judged on `median`; `link` is what `% link` floors take
/// their share of (without a physical link they are not applicable: they pass, saying
/// `n/a: why`). A failed run fails the point on its own.
pub fn judge(limits: &Limits, runs: &[Run], median: &Median, link: &LinkRate) -> Vec<Judgement> {
    let mut out = Vec::new();
    let failed: Vec<&Error> = runs.iter().filter_map(|r| r.error.as_ref()).collect();
    out.push(Judgement {
        threshold: "runs".into(),
        limit: format!("{} of {} complete", runs.len(), runs.len()),
        observed: match failed.first() {
            None => format!("{} of {} complete", runs.len(), runs.len()),
            Some(e) => format!("{} of {} failed: {e}", failed.len(), runs.len()),
        },
        pass: failed.is_empty(),
    });
    let missing = || "not measured".to_string();
    if let Some(floor) = limits.min_bw {
        let j = match (floor.floor(link), median.bw_bytes_per_sec) {
            (Err(why), _) => Judgement {
                threshold: "min_bw".into(),
                limit: floor.to_string(),
                observed: why,
                pass: false,
            },
            (Ok(Floor::NotApplicable(why)), bw) => Judgement {
                threshold: "min_bw".into(),
                limit: floor.to_string(),
                observed: format!("{why} (measured {})", bw.map_or_else(missing, mib)),
                pass: true,
            },
            (Ok(Floor::Bytes(f)), bw) => Judgement {
                threshold: "min_bw".into(),
                limit: match floor {
                    super::threshold::Bandwidth::OfLink(_) => format!("{floor} = {}", mib(f)),
                    _ => mib(f),
                },
                observed: bw.map_or_else(missing, mib),
                pass: bw.is_some_and(|b| b >= f),
            },
        };
        out.push(j);
    }
    for (name, limit, value) in [
        ("max_lat_typical", limits.max_lat_typical, median.lat_typical_us),
        ("max_lat_avg", limits.max_lat_avg, median.lat_avg_us),
        ("max_lat_p99", limits.max_lat_p99, median.lat_p99_us),
    ] {
        if let Some(l) = limit {
            out.push(Judgement {
                threshold: name.into(),
                limit: l.to_string(),
                observed: value.map_or_else(missing, |v| format!("{v:.2} us")),
                pass: value.is_some_and(|v| v <= l.0),
            });
        }
    }
    if let Some(max) = limits.max_cpu_per_gb {
        let sides =
            [("client", median.cpu_client_s_per_gb), ("server", median.cpu_server_s_per_gb)];
        let seen: Vec<String> = sides
            .iter()
            .map(|(s, v)| format!("{s} {}", v.map_or_else(missing, |v| format!("{v:.3}"))))
            .collect();
        out.push(Judgement {
            threshold: "max_cpu_per_gb".into(),
            limit: format!("{max} CPU-s/GB"),
            observed: seen.join(", "),
            pass: sides.iter().all(|(_, v)| v.is_some_and(|v| v <= max)),
        });
    }
    out.extend(judge_stability(limits, median));
    out
}

/// Whether `runs` already have the verdict `n` runs would: every threshold of `limits`
/// holds (or fails) alike on the lowest and the highest medians that `n - runs.len()`
/// more runs could give. Each judgement is monotone in its figures, so those two ends
/// bound every outcome: the sequential rule's verdict on these runs is the fixed rule's
/// on any `n` that begin with them (a run that would fail is the one thing unforeseen).
pub fn decided(limits: &Limits, runs: &[Run], n: usize, link: &LinkRate) -> bool {
    let Some(extra) = n.checked_sub(runs.len()).filter(|e| *e > 0) else { return true };
    let verdicts = |value: f64| -> Vec<bool> {
        let median = Median::padded(runs, extra, value);
        judge(limits, runs, &median, link).iter().map(|j| j.pass).collect()
    };
    verdicts(f64::MIN) == verdicts(f64::MAX)
}

/// A soak's `intervals` judgement: every run's every interval passed its verdict
/// (`--json-lines`': no counter of trouble moved, the link held).
pub fn soak_intervals(runs: &[Run]) -> Judgement {
    let verdicts = runs.iter().filter_map(|r| r.result.as_ref()?.interval_verdicts);
    let (judged, failed) = verdicts.fold((0, 0), |(j, f), v| (j + v.judged, f + v.failed));
    Judgement {
        threshold: "intervals".into(),
        limit: "every interval passes".into(),
        observed: if judged == 0 {
            "not measured (no interval judged)".into()
        } else {
            format!("{failed} of {judged} failed")
        },
        pass: judged > 0 && failed == 0,
    }
}

/// The stability limits judged on the runs' median `stability` figures: a run too short
/// for a spread (fewer than two intervals) has none, and fails as not measured.
fn judge_stability(limits: &Limits, median: &Median) -> Vec<Judgement> {
    let missing = || "not measured (no stability: fewer than two intervals)".to_string();
    let mut out = Vec::new();
    if let Some(max) = limits.max_cv {
        out.push(Judgement {
            threshold: "max_cv".into(),
            limit: max.to_string(),
            observed: median.cv.map_or_else(missing, |cv| format!("{:.2}%", cv * 100.0)),
            pass: median.cv.is_some_and(|cv| cv * 100.0 <= max.0),
        });
    }
    if let Some(min) = limits.min_low_ratio {
        out.push(Judgement {
            threshold: "min_low_ratio".into(),
            limit: format!("{min} of the median interval"),
            observed: median.low_ratio.map_or_else(missing, |r| format!("{r:.3}")),
            pass: median.low_ratio.is_some_and(|r| r >= min),
        });
    }
    if let Some(max) = limits.max_spike {
        out.push(Judgement {
            threshold: "max_spike".into(),
            limit: format!("{max}× the median"),
            observed: median.spike.map_or_else(missing, |s| format!("{s:.3}×")),
            pass: median.spike.is_some_and(|s| s <= max),
        });
    }
    out
}

/// The figure a point is compared with its baseline on: BW average (MiB/s) where the
/// runs measured bandwidth, else t_typical (µs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// BW average, MiB/s; higher is better.
    Bandwidth,
    /// t_typical, µs; lower is better.
    Latency,
}

impl Figure {
    /// The figure `runs` measured (bandwidth first), if any.
    pub fn of(runs: &[Run]) -> Option<Figure> {
        let results = || runs.iter().filter_map(|r| r.result.as_ref());
        if results().any(|r| r.bw.is_some()) {
            Some(Figure::Bandwidth)
        } else if results().any(|r| r.lat.is_some()) {
            Some(Figure::Latency)
        } else {
            None
        }
    }

    /// Each successful run's value, in the figure's unit.
    pub fn values(self, runs: &[Run]) -> Vec<f64> {
        let results = runs.iter().filter(|r| r.error.is_none()).filter_map(|r| r.result.as_ref());
        match self {
            Figure::Bandwidth => {
                results.filter_map(|r| r.bw.as_ref()).map(|b| b.avg_bytes_per_sec / MIB).collect()
            }
            Figure::Latency => {
                results.filter_map(|r| r.lat.as_ref()).map(|l| l.t_typical_us).collect()
            }
        }
    }

    /// `BW average`, `t_typical`.
    pub fn name(self) -> &'static str {
        match self {
            Figure::Bandwidth => "BW average",
            Figure::Latency => "t_typical",
        }
    }

    /// `MiB/s`, `us`.
    pub fn unit(self) -> &'static str {
        match self {
            Figure::Bandwidth => "MiB/s",
            Figure::Latency => "us",
        }
    }

    fn direction(self) -> Direction {
        match self {
            Figure::Bandwidth => Direction::HigherIsBetter,
            Figure::Latency => Direction::LowerIsBetter,
        }
    }
}

/// A point against the same point of the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointComparison {
    /// `BW average` or `t_typical`.
    pub figure: String,
    /// `MiB/s` or `us`.
    pub unit: String,
    /// The baseline's runs, in `unit`.
    pub baseline_runs: Vec<f64>,
    /// This qualification's runs, in `unit`.
    pub runs: Vec<f64>,
    /// Medians, change, interval, verdict.
    #[serde(flatten)]
    pub stats: Comparison,
}

impl PointComparison {
    /// A `worse` comparison as one line naming the point, both medians, the interval and
    /// the tolerance; `None` for any other verdict.
    pub fn regression(&self, id: &str) -> Option<String> {
        let s = &self.stats;
        (s.verdict == Verdict::Worse).then(|| {
            format!(
                "{id}: {} {:.2} {u} against the baseline's {:.2} {u} ({:+.1} %, {:.0} % interval {}, tolerance {}%)",
                self.figure,
                s.median,
                s.baseline_median,
                s.delta_percent,
                s.confidence * 100.0,
                s.interval_text(),
                s.tolerance_percent,
                u = self.unit,
            )
        })
    }
}

/// `now`'s runs against `was`'s on the figure both measured; `None` when they share no
/// figure with a value on each side.
pub fn compare(now: &[Run], was: &[Run], tolerance: Percent) -> Option<PointComparison> {
    let figure = Figure::of(now)?;
    if Figure::of(was) != Some(figure) {
        return None;
    }
    let (runs, baseline_runs) = (figure.values(now), figure.values(was));
    let stats = stats::compare(&baseline_runs, &runs, figure.direction(), tolerance.0)?;
    Some(PointComparison {
        figure: figure.name().into(),
        unit: figure.unit().into(),
        baseline_runs,
        runs,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::measure::{BwStats, LatStats};
    use crate::qualify::threshold::{Bandwidth, Latency};

    fn bw_run(mib: f64) -> Run {
        let bw = BwStats { avg_bytes_per_sec: mib * MIB, msg_rate: mib, ..Default::default() };
        Run {
            result: Some(SizeResult { bw: Some(bw), ..Default::default() }),
            error: None,
            intervals: Vec::new(),
        }
    }

    fn lat_run(us: f64) -> Run {
        let lat = LatStats { t_typical_us: us, p99_us: us * 2.0, ..Default::default() };
        Run {
            result: Some(SizeResult { lat: Some(lat), ..Default::default() }),
            error: None,
            intervals: Vec::new(),
        }
    }

    /// A bandwidth run whose intervals spread by `cv`, the lowest `low` and the highest
    /// `high` of a median of 100.
    fn steady_run(cv: f64, low: f64, high: f64) -> Run {
        let mut run = bw_run(100.0);
        let stability = crate::measure::Stability {
            samples: 10,
            cv,
            lowest: low,
            median: 100.0,
            highest: high,
            spike: high / 100.0,
            ..Default::default()
        };
        run.result.as_mut().unwrap().stability = Some(stability);
        run
    }

    fn failed(j: &[Judgement]) -> Vec<&str> {
        j.iter().filter(|j| !j.pass).map(|j| j.threshold.as_str()).collect()
    }

    #[test]
    fn stability_limits_judge_the_runs_median_spread() {
        let runs = [
            steady_run(0.02, 90.0, 104.0),
            steady_run(0.08, 40.0, 180.0),
            steady_run(0.03, 85.0, 110.0),
        ];
        let m = Median::of(&runs);
        // Medians: CV 3 %, lowest/median 0.85, spike 1.10.
        assert_eq!((m.cv, m.low_ratio, m.spike), (Some(0.03), Some(0.85), Some(1.1)));
        let limits = Limits {
            max_cv: Some(Percent(5.0)),
            min_low_ratio: Some(0.8),
            max_spike: Some(1.2),
            ..Default::default()
        };
        let j = judge(&limits, &runs, &m, &LinkRate::Unknown);
        assert!(failed(&j).is_empty(), "{j:?}");
        let tight = Limits {
            max_cv: Some(Percent(2.5)),
            min_low_ratio: Some(0.9),
            max_spike: Some(1.05),
            ..Default::default()
        };
        let j = judge(&tight, &runs, &m, &LinkRate::Unknown);
        assert_eq!(failed(&j), ["max_cv", "min_low_ratio", "max_spike"]);
        let seen: Vec<String> = j[1..]
            .iter()
            .map(|j| format!("{}: {} (limit {})", j.threshold, j.observed, j.limit))
            .collect();
        assert_eq!(
            seen,
            [
                "max_cv: 3.00% (limit 2.5%)",
                "min_low_ratio: 0.850 (limit 0.9 of the median interval)",
                "max_spike: 1.100× (limit 1.05× the median)"
            ]
        );
    }

    #[test]
    fn a_run_without_a_spread_fails_a_stability_limit_as_not_measured() {
        let runs = [bw_run(100.0), bw_run(110.0)];
        let limits = Limits { max_cv: Some(Percent(5.0)), ..Default::default() };
        let j = judge(&limits, &runs, &Median::of(&runs), &LinkRate::Unknown);
        assert_eq!(failed(&j), ["max_cv"]);
        assert!(j[1].observed.starts_with("not measured"), "{j:?}");
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![f64::NAN, 1.0]), Some(1.0));
        let m = Median::of(&[bw_run(100.0), bw_run(300.0), bw_run(200.0)]);
        assert_eq!(m.bw_bytes_per_sec, Some(200.0 * MIB));
        assert_eq!(m.lat_typical_us, None);
    }

    #[test]
    fn thresholds_judge_the_median() {
        let runs = [bw_run(100.0), bw_run(900.0), bw_run(300.0)];
        let m = Median::of(&runs);
        let limits =
            Limits { min_bw: Some(Bandwidth::Absolute(250.0 * MIB)), ..Default::default() };
        let j = judge(&limits, &runs, &m, &LinkRate::Unknown);
        assert!(j.iter().all(|j| j.pass), "{j:?}");
        let limits =
            Limits { min_bw: Some(Bandwidth::Absolute(400.0 * MIB)), ..Default::default() };
        let j = judge(&limits, &runs, &m, &LinkRate::Unknown);
        assert_eq!(
            j.iter().filter(|j| !j.pass).map(|j| j.threshold.as_str()).collect::<Vec<_>>(),
            ["min_bw"]
        );
        assert_eq!(j[1].observed, "300.00 MiB/s");
        // 90 % of a 1X SDR link (2 Gb/s of data) is 225 MB/s: 300 MiB/s passes.
        let limits = Limits { min_bw: Some(Bandwidth::OfLink(90.0)), ..Default::default() };
        let j = judge(&limits, &runs, &m, &LinkRate::Gbps(2.0));
        assert!(j[1].pass && j[1].limit.starts_with("90% link = 214.58 MiB/s"), "{:?}", j[1]);
        assert!(
            !judge(&limits, &runs, &m, &LinkRate::Unknown)[1].pass,
            "an unknown link rate fails a % link floor"
        );
        let soft = LinkRate::NoPhysicalLink("rxe0/1: soft device: no physical link".into());
        let j = &judge(&limits, &runs, &m, &soft)[1];
        assert!(j.pass && j.not_applicable(), "{j:?}");
        assert_eq!(
            j.observed,
            "n/a: rxe0/1: soft device: no physical link (measured 300.00 MiB/s)"
        );
    }

    #[test]
    fn latency_ceilings_and_failed_runs() {
        let runs = [
            lat_run(2.0),
            lat_run(3.0),
            Run {
                result: None,
                error: Some(Error::new(ErrorKind::PeerSilent, "the peer went quiet")),
                intervals: Vec::new(),
            },
        ];
        let m = Median::of(&runs);
        assert_eq!(m.lat_typical_us, Some(2.5));
        let limits = Limits {
            max_lat_typical: Some(Latency(3.0)),
            max_lat_p99: Some(Latency(4.0)),
            ..Default::default()
        };
        let j = judge(&limits, &runs, &m, &LinkRate::Unknown);
        let failing: Vec<&str> =
            j.iter().filter(|j| !j.pass).map(|j| j.threshold.as_str()).collect();
        assert_eq!(failing, ["runs", "max_lat_p99"]);
        assert!(j[0].observed.contains("1 of 3 failed: the peer went quiet"));
    }

    #[test]
    fn a_point_is_compared_on_its_runs_and_named_when_worse() {
        let was = [bw_run(1000.0), bw_run(1010.0), bw_run(990.0)];
        let now = [bw_run(600.0), bw_run(610.0), bw_run(590.0), bw_run(605.0), bw_run(595.0)];
        // Three runs against three say no more than "inconclusive" about a change.
        let c = compare(&now[..3], &was, Percent(10.0)).unwrap();
        assert_eq!(c.stats.verdict, Verdict::Inconclusive);
        assert!(c.regression("write_bw 64K").is_none());
        let c = compare(&now, &was, Percent(10.0)).unwrap();
        assert_eq!((c.figure.as_str(), c.unit.as_str()), ("BW average", "MiB/s"));
        assert_eq!((c.stats.verdict, c.runs.len(), c.baseline_runs.len()), (Verdict::Worse, 5, 3));
        let line = c.regression("write_bw 64K").unwrap();
        assert!(
            line.starts_with("write_bw 64K: BW average 600.00 MiB/s against the baseline's 1000.00 MiB/s (-40.0 %, 96 % interval 0.58× .. 0.62×, tolerance 10%)"),
            "{line}"
        );
        // A failed run is not a value; latency is judged the other way.
        let mut slower = vec![lat_run(2.0), lat_run(2.02), lat_run(1.98)];
        let faster = [lat_run(1.0), lat_run(1.01), lat_run(0.99), lat_run(1.005), lat_run(0.995)];
        let c = compare(&faster, &slower, Percent(10.0)).unwrap();
        assert_eq!(c.stats.verdict, Verdict::Better);
        assert!(c.regression("write_lat 2").is_none());
        slower.push(Run {
            result: None,
            error: Some(Error::new(ErrorKind::PeerSilent, "x")),
            intervals: Vec::new(),
        });
        assert_eq!(compare(&slower, &faster, Percent(10.0)).unwrap().runs.len(), 3);
        // Bandwidth against latency: nothing to compare.
        assert!(compare(&now, &faster, Percent(10.0)).is_none());
    }
}
