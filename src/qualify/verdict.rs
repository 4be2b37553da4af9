//! Judging a test point: the median of its runs against the profile's thresholds, and
//! against the baseline's median. Pure arithmetic on results; nothing here runs a test.

use serde::{Deserialize, Serialize};

use super::profile::Limits;
use super::threshold::{Floor, LinkRate, Percent};
use crate::error::Error;
use crate::measure::MIB;
use crate::results::SizeResult;

/// One run of a point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// What the client measured (absent when the run failed before a result).
    pub result: Option<SizeResult>,
    /// Why the run failed, if it did.
    pub error: Option<Error>,
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
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 })
}

impl Median {
    /// The medians over `runs`' results.
    pub fn of(runs: &[Run]) -> Median {
        let results: Vec<&SizeResult> = runs.iter().filter_map(|r| r.result.as_ref()).collect();
        let m = |f: &dyn Fn(&SizeResult) -> Option<f64>| {
            median(results.iter().filter_map(|r| f(r)).collect())
        };
        Median {
            bw_bytes_per_sec: m(&|r| r.bw.as_ref().map(|b| b.avg_bytes_per_sec)),
            msg_rate: m(&|r| r.bw.as_ref().map(|b| b.msg_rate)),
            lat_typical_us: m(&|r| r.lat.as_ref().map(|l| l.t_typical_us)),
            lat_avg_us: m(&|r| r.lat.as_ref().map(|l| l.t_avg_us)),
            lat_p99_us: m(&|r| r.lat.as_ref().map(|l| l.p99_us)),
            cpu_client_s_per_gb: m(&|r| r.cpu.client.and_then(|c| c.cpu_s_per_gb)),
            cpu_server_s_per_gb: m(&|r| r.cpu.server.and_then(|c| c.cpu_s_per_gb)),
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
    out
}

/// How `now` compares with the baseline's median `was`: a line for each figure worse
/// by more than `tolerance` (bandwidth lower, latency higher).
pub fn regressions(id: &str, now: &Median, was: &Median, tolerance: Percent) -> Vec<String> {
    let tol = tolerance.0 / 100.0;
    let mut out = Vec::new();
    let change = |n: f64, w: f64| (n - w) / w * 100.0;
    if let (Some(n), Some(w)) = (now.bw_bytes_per_sec, was.bw_bytes_per_sec) {
        if w > 0.0 && n < w * (1.0 - tol) {
            out.push(format!(
                "{id}: BW average {} against the baseline's {} ({:+.1} %, tolerance {tolerance})",
                mib(n),
                mib(w),
                change(n, w)
            ));
        }
    }
    if let (Some(n), Some(w)) = (now.lat_typical_us, was.lat_typical_us) {
        if w > 0.0 && n > w * (1.0 + tol) {
            out.push(format!(
                "{id}: t_typical {n:.2} us against the baseline's {w:.2} us ({:+.1} %, tolerance {tolerance})",
                change(n, w)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::measure::{BwStats, LatStats};
    use crate::qualify::threshold::{Bandwidth, Latency};

    fn bw_run(mib: f64) -> Run {
        let bw = BwStats { avg_bytes_per_sec: mib * MIB, msg_rate: mib, ..Default::default() };
        Run { result: Some(SizeResult { bw: Some(bw), ..Default::default() }), error: None }
    }

    fn lat_run(us: f64) -> Run {
        let lat = LatStats { t_typical_us: us, p99_us: us * 2.0, ..Default::default() };
        Run { result: Some(SizeResult { lat: Some(lat), ..Default::default() }), error: None }
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
    fn regressions_beyond_the_tolerance_are_named() {
        let was = Median {
            bw_bytes_per_sec: Some(1000.0 * MIB),
            lat_typical_us: Some(2.0),
            ..Default::default()
        };
        let now = Median {
            bw_bytes_per_sec: Some(950.0 * MIB),
            lat_typical_us: Some(2.1),
            ..Default::default()
        };
        assert!(regressions("write_bw 64K", &now, &was, Percent(10.0)).is_empty());
        let now = Median {
            bw_bytes_per_sec: Some(500.0 * MIB),
            lat_typical_us: Some(3.0),
            ..Default::default()
        };
        let r = regressions("write_bw 64K", &now, &was, Percent(10.0));
        assert_eq!(r.len(), 2);
        assert!(r[0].starts_with("write_bw 64K: BW average 500.00 MiB/s against the baseline's 1000.00 MiB/s (-50.0 %"), "{}", r[0]);
        assert!(r[1].contains("t_typical 3.00 us"), "{}", r[1]);
    }
}
