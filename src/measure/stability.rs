//! How steady a run was: its per-interval bandwidths (or per-iteration latencies) as
//! one spread — coefficient of variation, lowest, median and highest, the highest over
//! the median (a spike), the tail percentiles — nccl-tests' and OSU's figures of a
//! run's stability. Pure arithmetic; docs/metrics.md defines each.

use serde::{Deserialize, Serialize};

use super::LatStats;

/// What a [`Stability`]'s lowest, median, highest and percentiles are in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StabilityUnit {
    /// Bandwidth intervals, bytes per second.
    #[default]
    BytesPerSec,
    /// Latency iterations, microseconds.
    Us,
}

/// The spread of a run's intervals (bandwidth) or iterations (latency).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    /// Intervals (bandwidth) or iterations (latency) it is over.
    pub samples: u64,
    /// A bandwidth interval's length, ns (null for latency: each iteration is one).
    pub interval_ns: Option<u64>,
    /// What `lowest`, `median`, `highest`, `p99` and `p99_9` are in.
    pub unit: StabilityUnit,
    /// Coefficient of variation: the standard deviation over the mean (0.05 is 5 %).
    pub cv: f64,
    /// The lowest interval, or the fastest iteration.
    pub lowest: f64,
    /// The median.
    pub median: f64,
    /// The highest interval, or the slowest iteration.
    pub highest: f64,
    /// `highest / median`: a burst (bandwidth) or a stall (latency) against the usual.
    pub spike: f64,
    /// 99th percentile (latency).
    pub p99: Option<f64>,
    /// 99.9th percentile (latency).
    pub p99_9: Option<f64>,
    /// Intervals of warm-up not counted (a duration run's leading margin); null where
    /// the run counts no intervals before its first (latency, counted runs: 0).
    pub warm_up_dropped: Option<u64>,
}

impl Stability {
    /// Of bandwidth `rates` (bytes/s), one per `interval_ns` interval, after
    /// `warm_up_dropped` intervals of warm-up; None for fewer than two intervals (no
    /// spread to speak of).
    pub fn of_intervals(rates: &[f64], interval_ns: u64, warm_up_dropped: u64) -> Option<Self> {
        if rates.len() < 2 {
            return None;
        }
        let mut sorted = rates.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = median(&sorted);
        let highest = sorted[sorted.len() - 1];
        Some(Stability {
            samples: rates.len() as u64,
            interval_ns: Some(interval_ns),
            unit: StabilityUnit::BytesPerSec,
            cv: cv(rates),
            lowest: sorted[0],
            median,
            highest,
            spike: ratio(highest, median),
            p99: None,
            p99_9: None,
            warm_up_dropped: Some(warm_up_dropped),
        })
    }

    /// Of a latency run's iterations, from its statistics; None without samples.
    pub fn of_latency(lat: &LatStats) -> Option<Self> {
        if lat.samples == 0 {
            return None;
        }
        Some(Stability {
            samples: lat.samples,
            interval_ns: None,
            unit: StabilityUnit::Us,
            cv: ratio(lat.t_stdev_us, lat.t_avg_us),
            lowest: lat.t_min_us,
            median: lat.t_typical_us,
            highest: lat.t_max_us,
            spike: ratio(lat.t_max_us, lat.t_typical_us),
            p99: Some(lat.p99_us),
            p99_9: Some(lat.p99_9_us),
            warm_up_dropped: None,
        })
    }
}

/// The population standard deviation of `values` over their mean; 0 for a mean of 0.
pub fn cv(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    ratio(variance.sqrt(), mean)
}

/// The middle of `sorted` (the mean of the two middles of an even count).
pub fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The `q`-th percentile (0 < q ≤ 100) of `sorted` by nearest rank: the smallest value
/// with at least q % of the values at or below it.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    // Less a hair: 99.9 % of 1000 is 999, not the 999.0000000000001 of f64.
    let rank = ((q / 100.0) * n as f64 - 1e-9).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// `a / b`, 0 when `b` is 0 (an empty or all-zero run has no spread).
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn the_cv_is_the_population_deviation_over_the_mean() {
        // Mean 5, squared deviations 9+1+1+1+0+0+4+16 = 32, variance 4, deviation 2.
        assert!(close(cv(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 0.4));
        assert!(close(cv(&[3.0, 3.0, 3.0]), 0.0));
        assert!(close(cv(&[]), 0.0) && close(cv(&[0.0, 0.0]), 0.0));
    }

    #[test]
    fn medians_and_percentiles_by_hand() {
        assert!(close(median(&[1.0, 2.0, 10.0]), 2.0));
        assert!(close(median(&[1.0, 2.0, 4.0, 10.0]), 3.0));
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 50.0), Some(50.0));
        assert_eq!(percentile(&hundred, 99.0), Some(99.0));
        assert_eq!(percentile(&hundred, 99.9), Some(100.0));
        let thousand: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(percentile(&thousand, 99.9), Some(999.0));
        assert_eq!(percentile(&[7.0], 1.0), Some(7.0));
        assert_eq!(percentile(&[], 99.0), None);
    }

    #[test]
    fn intervals_give_their_spread_and_spike() {
        // Rates of 4, 5, 5, 6 and 10 GB/s: median 5, highest 10 (a spike of 2×), mean 6,
        // squared deviations 4+1+1+0+16 = 22, variance 4.4.
        let rates = [5e9, 4e9, 10e9, 5e9, 6e9];
        let s = Stability::of_intervals(&rates, 1_000_000_000, 5).unwrap();
        assert_eq!(
            (s.samples, s.interval_ns, s.warm_up_dropped),
            (5, Some(1_000_000_000), Some(5))
        );
        assert_eq!((s.lowest, s.median, s.highest), (4e9, 5e9, 10e9));
        assert!(close(s.spike, 2.0));
        assert!(close(s.cv, 4.4f64.sqrt() / 6.0));
        assert_eq!((s.p99, s.p99_9, s.unit), (None, None, StabilityUnit::BytesPerSec));
        assert!(Stability::of_intervals(&[5e9], 1, 0).is_none(), "one interval: no spread");
    }

    #[test]
    fn latency_gives_its_spread_from_its_statistics() {
        let lat = LatStats {
            samples: 1000,
            t_min_us: 1.0,
            t_max_us: 30.0,
            t_typical_us: 1.5,
            t_avg_us: 2.0,
            t_stdev_us: 0.5,
            p99_us: 4.0,
            p99_9_us: 20.0,
            ..LatStats::default()
        };
        let s = Stability::of_latency(&lat).unwrap();
        assert!(close(s.cv, 0.25) && close(s.spike, 20.0));
        assert_eq!((s.lowest, s.median, s.highest), (1.0, 1.5, 30.0));
        assert_eq!((s.p99, s.p99_9, s.warm_up_dropped), (Some(4.0), Some(20.0), None));
        assert!(Stability::of_latency(&LatStats::default()).is_none());
    }
}
