//! Comparing a figure's runs with a baseline's: both medians, the change, a confidence
//! interval for the shift and a verdict. Pure arithmetic, no I/O.
//!
//! The shift is the Hodges–Lehmann estimate (the median of every difference
//! `now_j − was_i`) and its interval the Mann–Whitney one: order statistics of those
//! differences, chosen from the exact rank-sum distribution (docs/qualify.md#statistics
//! says why this and not a bootstrap). Distribution-free, deterministic (the same runs
//! always give the same verdict), and its coverage is computed, not assumed: with few
//! runs the widest interval covers less than 95 %, and the report says how much.

use serde::{Deserialize, Serialize};

/// The coverage aimed at.
pub const CONFIDENCE: f64 = 0.95;

/// Below this coverage (one run against one, two against two) nothing is judged:
/// the point is inconclusive until it has more runs.
pub const MIN_CONFIDENCE: f64 = 0.8;

// `same` may be said from MIN_CONFIDENCE up (every difference of three runs against
// three within the tolerance is already strong evidence), but a change, `better` or
// `worse`, needs the full CONFIDENCE: three against three cannot say more than 90 %
// (one arrangement in ten is wholly apart by chance), and a qualification of ten
// points judged at 90 % would call one of them changed every other run on noise alone.
// Five runs against three reach 96 %.

/// Up to this many runs a side, the rank-sum distribution is counted exactly; beyond,
/// its normal approximation.
const EXACT_UP_TO: usize = 50;

/// Which way is good.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Bandwidth, message rate.
    HigherIsBetter,
    /// Latency, CPU cost.
    LowerIsBetter,
}

/// A comparison's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval is beyond the tolerance, in the good direction.
    Better,
    /// The whole interval is within the tolerance.
    Same,
    /// The whole interval is beyond the tolerance, in the bad direction.
    Worse,
    /// The interval crosses the tolerance, or there are too few runs to say.
    Inconclusive,
}

impl Verdict {
    /// `better`, `same`, `worse`, `inconclusive`.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Same => "same",
            Verdict::Worse => "worse",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// Runs now against the baseline's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The baseline's median.
    pub baseline_median: f64,
    /// This run's median.
    pub median: f64,
    /// `(median − baseline_median) / baseline_median`, percent.
    pub delta_percent: f64,
    /// Hodges–Lehmann estimate of the shift `now − was`, in the figure's unit.
    pub shift: f64,
    /// The interval of the shift, in the figure's unit: `[low, high]`.
    pub interval: [f64; 2],
    /// The same interval as percent of the baseline's median.
    pub interval_percent: [f64; 2],
    /// The interval of the ratio `now / was` (the same ranks of every ratio
    /// `now_j / was_i`): never below 0, where a shift's interval can reach past −100 %
    /// when a baseline run lies far above its median. What the verdict judges; null
    /// when a value is not positive (then the shift's percent is judged).
    #[serde(default)]
    pub interval_ratio: Option<[f64; 2]>,
    /// The interval's coverage (0–1): 0.95, or less when the runs are too few for it.
    pub confidence: f64,
    /// The tolerance judged against, percent.
    pub tolerance_percent: f64,
    /// better, same, worse or inconclusive.
    pub verdict: Verdict,
}

impl Comparison {
    /// The interval as it prints: as a ratio (`0.45× .. 0.88×`), or as percent of the
    /// baseline's median where there is no ratio (`-12.0 % .. +3.0 %`).
    pub fn interval_text(&self) -> String {
        match self.interval_ratio {
            Some([low, high]) => format!("{low:.2}× .. {high:.2}×"),
            None => {
                format!("{:+.1} % .. {:+.1} %", self.interval_percent[0], self.interval_percent[1])
            }
        }
    }
}

/// The median of the finite `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Compares `now` with `was` (the baseline's runs): `None` when either side has no
/// finite value or the baseline's median is not positive.
pub fn compare(
    was: &[f64],
    now: &[f64],
    direction: Direction,
    tolerance_percent: f64,
) -> Option<Comparison> {
    let was: Vec<f64> = was.iter().copied().filter(|v| v.is_finite()).collect();
    let now: Vec<f64> = now.iter().copied().filter(|v| v.is_finite()).collect();
    let (base, med) = (median(&was)?, median(&now)?);
    if base <= 0.0 {
        return None;
    }
    let mut diffs: Vec<f64> = now.iter().flat_map(|n| was.iter().map(move |w| n - w)).collect();
    diffs.sort_by(f64::total_cmp);
    let shift = median(&diffs)?;
    let (k, confidence) = rank(was.len(), now.len());
    let interval = [diffs[k - 1], diffs[diffs.len() - k]];
    let pct = |v: f64| v / base * 100.0;
    let interval_percent = [pct(interval[0]), pct(interval[1])];
    let interval_ratio = ratio_interval(&was, &now, k);
    let judged = interval_ratio.map_or(interval_percent, |r| r.map(|r| (r - 1.0) * 100.0));
    // In "good" terms: positive is better, whichever way the figure goes.
    let (good_low, good_high) = match direction {
        Direction::HigherIsBetter => (judged[0], judged[1]),
        Direction::LowerIsBetter => (-judged[1], -judged[0]),
    };
    let tol = tolerance_percent;
    let verdict = if confidence < MIN_CONFIDENCE {
        Verdict::Inconclusive
    } else if good_high < -tol && confidence >= CONFIDENCE {
        Verdict::Worse
    } else if good_low > tol && confidence >= CONFIDENCE {
        Verdict::Better
    } else if good_low >= -tol && good_high <= tol {
        Verdict::Same
    } else {
        Verdict::Inconclusive
    };
    Some(Comparison {
        baseline_median: base,
        median: med,
        delta_percent: pct(med - base),
        shift,
        interval,
        interval_percent,
        interval_ratio,
        confidence,
        tolerance_percent,
        verdict,
    })
}

/// The interval of `now / was`: the `k`-th smallest and largest of every ratio
/// `now_j / was_i` (the shift's interval on a log scale); `None` unless every value is
/// positive.
fn ratio_interval(was: &[f64], now: &[f64], k: usize) -> Option<[f64; 2]> {
    if was.iter().chain(now).any(|v| *v <= 0.0) {
        return None;
    }
    let mut ratios: Vec<f64> = now.iter().flat_map(|n| was.iter().map(move |w| n / w)).collect();
    ratios.sort_by(f64::total_cmp);
    Some([ratios[k - 1], ratios[ratios.len() - k]])
}

/// For `m` and `n` runs: the rank `k` (1-based) of the differences bounding the
/// interval (`[d_k, d_{mn+1−k}]`), and that interval's coverage. The largest `k` whose
/// coverage is at least [`CONFIDENCE`]; `k = 1` (the widest) when none is.
fn rank(m: usize, n: usize) -> (usize, f64) {
    let mn = m * n;
    let coverage = |k: usize| 1.0 - 2.0 * lower_tail(m, n, k - 1);
    let mut k = 1;
    while k < mn.div_ceil(2) && coverage(k + 1) >= CONFIDENCE {
        k += 1;
    }
    (k, coverage(k).max(0.0))
}

/// P(U ≤ u) for the Mann–Whitney U of samples of `m` and `n` under the null.
fn lower_tail(m: usize, n: usize, u: usize) -> f64 {
    if m.max(n) <= EXACT_UP_TO {
        let counts = rank_sum_counts(m, n);
        let total: f64 = counts.iter().sum();
        return counts.iter().take(u + 1).sum::<f64>() / total;
    }
    let (mf, nf) = (m as f64, n as f64);
    let mean = mf * nf / 2.0;
    let sd = (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
    normal_cdf((u as f64 + 0.5 - mean) / sd)
}

/// How many arrangements of `m` and `n` runs give U = 0, 1, …, mn: the coefficients of
/// the Gaussian binomial [m+n choose m]_q, built as ∏ (1 − q^(n+i)) / (1 − q^i).
fn rank_sum_counts(m: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n + 1];
    c[0] = 1.0;
    for i in 1..=m {
        // × (1 − q^(n+i)), from the top so each term reads the old coefficient.
        let a = n + i;
        for d in (a..c.len()).rev() {
            c[d] -= c[d - a];
        }
        // ÷ (1 − q^i): a running sum with stride i.
        for d in i..c.len() {
            c[d] += c[d - i];
        }
    }
    c
}

/// The standard normal CDF (Abramowitz and Stegun 7.1.26 for erf; error under 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 1.0]), Some(1.0));
    }

    #[test]
    fn rank_sum_counts_are_the_exact_distribution() {
        // 2 against 2: U = 0..4 in 1, 1, 2, 1, 1 of the six arrangements.
        assert_eq!(rank_sum_counts(2, 2), [1.0, 1.0, 2.0, 1.0, 1.0]);
        let c = rank_sum_counts(5, 5);
        assert_eq!(c.iter().sum::<f64>(), 252.0);
        assert_eq!(&c[..4], [1.0, 1.0, 2.0, 3.0]);
        // 3 against 3: the widest interval (min..max) covers 1 − 2/20.
        assert_eq!(rank(3, 3), (1, 0.9));
        // 5 against 5: d_3 .. d_23 covers 1 − 2·4/252 = 96.8 %; d_4 would be 94.4 %.
        let (k, c) = rank(5, 5);
        assert_eq!(k, 3);
        assert!((c - (1.0 - 8.0 / 252.0)).abs() < 1e-12, "{c}");
        // The normal approximation beyond the exact range agrees with it at the edge.
        let exact = lower_tail(50, 50, 900);
        let (mf, sd) = (50.0_f64, (2500.0_f64 * 101.0 / 12.0).sqrt());
        let approx = normal_cdf((900.5 - mf * mf / 2.0) / sd);
        assert!((exact - approx).abs() < 0.005, "{exact} {approx}");
    }

    const BASE: [f64; 5] = [1000.0, 1010.0, 990.0, 1005.0, 995.0];

    #[test]
    fn the_same_within_the_tolerance() {
        let now = [1002.0, 996.0, 1008.0, 993.0, 1001.0];
        let c = compare(&BASE, &now, Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!(c.verdict, Verdict::Same, "{c:?}");
        assert_eq!((c.baseline_median, c.median), (1000.0, 1001.0));
        assert!((c.delta_percent - 0.1).abs() < 1e-9);
        assert!(c.interval[0] < 0.0 && c.interval[1] > 0.0, "{c:?}");
        assert!(c.confidence >= CONFIDENCE);
    }

    #[test]
    fn an_interval_past_minus_100_percent_prints_as_a_ratio_above_0() {
        // A baseline run far above its median: the shift's interval reaches −120 %, a
        // change no bandwidth can make; the ratio's interval stays above 0.
        let was = [1000.0, 1010.0, 2200.0, 1005.0, 995.0];
        let now = [600.0, 610.0, 590.0, 605.0, 1000.0];
        let c = compare(&was, &now, Direction::HigherIsBetter, 10.0).unwrap();
        assert!(c.interval_percent[0] < -100.0, "{c:?}");
        let [low, high] = c.interval_ratio.unwrap();
        assert!(low > 0.0 && low < high && high < 1.0, "{c:?}");
        let text = c.interval_text();
        assert!(text.ends_with('×') && text.contains("× .. ") && !text.contains('%'), "{text}");
        // Without a ratio (a value not positive), the percent as before.
        let c = compare(&[0.0, 1.0, 2.0], &[1.0, 2.0, 3.0], Direction::HigherIsBetter, 10.0);
        let c = c.unwrap();
        assert_eq!(c.interval_ratio, None);
        assert_eq!(
            c.interval_text(),
            format!("{:+.1} % .. {:+.1} %", c.interval_percent[0], c.interval_percent[1])
        );
    }

    #[test]
    fn better_and_worse_beyond_the_tolerance() {
        let faster = [1300.0, 1310.0, 1290.0, 1305.0, 1295.0];
        let c = compare(&BASE, &faster, Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!(c.verdict, Verdict::Better, "{c:?}");
        assert_eq!(c.shift, 300.0);
        let slower = [700.0, 710.0, 690.0, 705.0, 695.0];
        let c = compare(&BASE, &slower, Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
        assert!((c.delta_percent + 30.0).abs() < 1e-9);
        assert!(c.interval_percent[1] < -10.0, "{c:?}");
        // Latency: higher is the bad direction.
        let c = compare(&BASE, &faster, Direction::LowerIsBetter, 10.0).unwrap();
        assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
        let c = compare(&BASE, &slower, Direction::LowerIsBetter, 10.0).unwrap();
        assert_eq!(c.verdict, Verdict::Better, "{c:?}");
    }

    #[test]
    fn inconclusive_when_the_interval_crosses_the_tolerance_or_runs_are_too_few() {
        // A median 12 % down, but runs spread from −25 % to +1 %.
        let noisy = [750.0, 1010.0, 880.0, 800.0, 950.0];
        let c = compare(&BASE, &noisy, Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        assert!(c.delta_percent < -10.0, "the median alone would call it worse: {c:?}");
        // One run against one: a single difference says nothing of the noise.
        let c = compare(&[1000.0], &[500.0], Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!((c.verdict, c.confidence), (Verdict::Inconclusive, 0.0));
        // Three against three (90 % coverage at most) may say `same`, not a change:
        // the whole range beyond the tolerance is one arrangement in ten by chance.
        let three = [1000.0, 1010.0, 990.0];
        let c = compare(&three, &[500.0, 520.0, 480.0], Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!((c.verdict, c.confidence), (Verdict::Inconclusive, 0.9));
        assert_eq!(c.interval, [-530.0, -470.0]);
        let c = compare(&three, &[1001.0, 995.0, 1004.0], Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!((c.verdict, c.confidence), (Verdict::Same, 0.9));
        // Five against three reach 96 %: now it is worse.
        let five = [500.0, 520.0, 480.0, 510.0, 490.0];
        let c = compare(&three, &five, Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
        assert!((c.confidence - (1.0 - 2.0 / 56.0)).abs() < 1e-12, "{c:?}");
        // Four against three (94 %) are not enough for a change.
        let c = compare(&three, &five[..4], Direction::HigherIsBetter, 10.0).unwrap();
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        assert!(compare(&[], &[1.0], Direction::HigherIsBetter, 10.0).is_none());
        assert!(compare(&[0.0], &[1.0], Direction::HigherIsBetter, 10.0).is_none());
    }

    #[test]
    fn the_same_runs_give_the_same_verdict() {
        let now = [920.0, 1001.0, 870.0, 1050.0];
        let a = compare(&BASE, &now, Direction::HigherIsBetter, 10.0);
        assert_eq!(a, compare(&BASE, &now, Direction::HigherIsBetter, 10.0));
    }
}
