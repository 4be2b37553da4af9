//! The mesh's judging tried on modelled jobs, to know before a 1,000-host job whether a
//! schedule finds a bad host and how often it cries wolf (docs/mesh.md#at-scale).
//!
//! A model is N hosts of one rank each, every link measuring a healthy figure drawn with
//! noise (and, now and then, a pause: a test that a busy host slowed once), and a few bad
//! hosts whose every link is slower. Nothing here judges: the mesh's own schedule
//! ([`schedule::rounds`]), bands ([`Bands::of`]), suspects, rechecks (up to
//! [`recheck::TRIES`] tries of a pair alone, as rank 0 runs them, each as long as
//! [`recheck::iterations`] makes it) and confirmation decide, the same functions a real
//! job calls; only the figures are drawn instead of measured.

use super::findings::{self, Bands, Finding, Thresholds};
use super::ranks::{LinkResult, RankInfo};
use super::recheck;
use super::schedule::{self, splitmix64, Pair, Pairs};

/// How a link's figures scatter from test to test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Noise {
    /// Bandwidth's coefficient of variation (normal, relative to the figure).
    pub bw_cv: f64,
    /// Latency's coefficient of variation.
    pub lat_cv: f64,
    /// The chance that a test is paused once (another process, a scheduler tick):
    /// its bandwidth falls to 30–90 % and its latency gains 1–10 ms.
    pub pause: f64,
}

impl Noise {
    /// A quiet fabric: 2 % bandwidth and 5 % latency, a pause in one test of 1,000.
    pub const QUIET: Noise = Noise { bw_cv: 0.02, lat_cv: 0.05, pause: 0.001 };
    /// The lab's guests under TCG (docs/mesh.md#in-the-lab): healthy links 3.6–5.9 MB/s
    /// apart in one run (CV ~0.2), latencies bimodal, a pause in one test of 20.
    pub const LAB: Noise = Noise { bw_cv: 0.2, lat_cv: 0.2, pause: 0.05 };
}

/// A job to judge.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Hosts, one rank each.
    pub hosts: usize,
    /// A healthy link's bandwidth, MB/s.
    pub bw_mb_per_sec: f64,
    /// A healthy link's t_typical, µs.
    pub t_typical_usec: f64,
    /// How figures scatter.
    pub noise: Noise,
    /// The bad hosts and their links' bandwidth as a fraction of a healthy link's.
    pub bad: Vec<(usize, f64)>,
    /// The first measurement's iterations. A recheck runs [`recheck::iterations`] of
    /// them (`--recheck-length`, or its default for the job's size): its figure's CV is
    /// the noise's ÷ √(that ÷ these) (a pause as likely).
    pub iterations: u64,
}

/// What one modelled job came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Every bad host is an end of a confirmed finding.
    pub found: bool,
    /// Confirmed findings with no bad host at either end.
    pub false_findings: usize,
    /// Links suspect after the rounds.
    pub suspects: usize,
    /// The schedule's rounds.
    pub rounds: usize,
    /// Rounds of one pair alone (every try of every recheck).
    pub alone_rounds: usize,
}

/// Runs `model` through the mesh's schedule and judging once; `seed` draws the figures
/// and `random:K`'s rounds.
pub fn run(model: &Model, pairs: Pairs, t: Thresholds, seed: u64) -> Outcome {
    let ranks: Vec<RankInfo> = (0..model.hosts)
        .map(|rank| RankInfo {
            rank,
            host: format!("host{rank}"),
            address: String::new(),
            port: 0,
            device: "mlx4_0".into(),
        })
        .collect();
    let mut draw = Draw(seed ^ 0x6d65_7368);
    let rounds = schedule::rounds(model.hosts, pairs, seed);
    let mut links = Vec::new();
    for (k, round) in rounds.iter().enumerate() {
        for &pair in round {
            links.extend(measure(model, &mut draw, pair, k, (true, true), 1.0));
        }
    }
    let bands = Bands::of(&ranks, &links, t);
    let mut found = findings::suspects(&ranks, &links, &bands, t);
    let suspects = found.len();
    let mut reruns = Vec::new();
    let mut alone_rounds = 0;
    let first = model.iterations.max(1);
    let length = recheck::iterations(first, recheck::times(&t, model.hosts)) as f64 / first as f64;
    for check in recheck::rechecks(&found, t) {
        for _ in 0..recheck::TRIES {
            alone_rounds += 1;
            let k = rounds.len() + alone_rounds;
            reruns.extend(measure(model, &mut draw, check.pair, k, (check.bw, check.lat), length));
            findings::confirm(&ranks, &mut found, &reruns, t);
            if !recheck::slow_alone(&found, check.pair) {
                break;
            }
        }
    }
    let bad = |r: usize| model.bad.iter().any(|&(h, _)| h == r);
    let confirmed: Vec<&Finding> = found.iter().filter(|f| f.confirmed).collect();
    Outcome {
        found: model.bad.iter().all(|&(h, _)| confirmed.iter().any(|f| f.from == h || f.to == h)),
        false_findings: confirmed.iter().filter(|f| !bad(f.from) && !bad(f.to)).count(),
        suspects,
        rounds: rounds.len(),
        alone_rounds,
    }
}

/// Both directions of `pair` measured once: the bandwidth test, the latency test or both
/// (`tests`), `length` times the first measurement's iterations.
fn measure(
    model: &Model,
    draw: &mut Draw,
    pair: Pair,
    round: usize,
    (bw, lat): (bool, bool),
    length: f64,
) -> [LinkResult; 2] {
    let factor = |r: usize| model.bad.iter().find(|&&(h, _)| h == r).map_or(1.0, |&(_, f)| f);
    let quieter = length.sqrt();
    let n = Noise {
        bw_cv: model.noise.bw_cv / quieter,
        lat_cv: model.noise.lat_cv / quieter,
        ..model.noise
    };
    let mut one = |from: usize, to: usize| {
        let paused = draw.uniform() < n.pause;
        let bw = bw.then(|| {
            let slow = if paused { 0.3 + 0.6 * draw.uniform() } else { 1.0 };
            let v = model.bw_mb_per_sec * factor(from).min(factor(to)) * slow;
            (v * (1.0 + n.bw_cv * draw.normal())).max(v * 0.05)
        });
        let lat = lat.then(|| {
            let v = model.t_typical_usec * (1.0 + n.lat_cv * draw.normal()).max(0.2);
            if paused {
                v + 1000.0 + 9000.0 * draw.uniform()
            } else {
                v
            }
        });
        LinkResult {
            from,
            to,
            round,
            bw_mb_per_sec: bw,
            t_typical_usec: lat,
            error: None,
            span: None,
        }
    };
    [one(pair.0, pair.1), one(pair.1, pair.0)]
}

/// The figures' random numbers: splitmix64, as the schedule's shuffle.
struct Draw(u64);

impl Draw {
    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (splitmix64(&mut self.0) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// Many jobs of one model and schedule, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    /// Jobs run.
    pub runs: usize,
    /// Jobs in which every bad host was found.
    pub found: usize,
    /// Confirmed findings on good hosts, over all jobs.
    pub false_findings: usize,
    /// Suspect links, over all jobs.
    pub suspects: usize,
    /// The schedule's rounds (the same every job).
    pub rounds: usize,
    /// Rounds of a pair alone, over all jobs.
    pub alone_rounds: usize,
}

impl Tally {
    /// `runs` jobs, seeds `seed`, `seed + 1`, ….
    pub fn of(model: &Model, pairs: Pairs, t: Thresholds, runs: usize, seed: u64) -> Tally {
        let mut tally = Tally { runs, ..Tally::default() };
        for i in 0..runs {
            let o = run(model, pairs, t, seed.wrapping_add(i as u64));
            tally.found += usize::from(o.found);
            tally.false_findings += o.false_findings;
            tally.suspects += o.suspects;
            tally.rounds = o.rounds;
            tally.alone_rounds += o.alone_rounds;
        }
        tally
    }

    /// The share of jobs that found every bad host.
    pub fn detection(&self) -> f64 {
        self.found as f64 / self.runs.max(1) as f64
    }

    /// Confirmed findings on good hosts per 100 jobs.
    pub fn false_per_100(&self) -> f64 {
        100.0 * self.false_findings as f64 / self.runs.max(1) as f64
    }

    /// A job's modelled wall time: each round and each round alone `per_round` seconds.
    pub fn seconds(&self, per_round: f64) -> f64 {
        let alone = self.alone_rounds as f64 / self.runs.max(1) as f64;
        (self.rounds as f64 + alone) * per_round
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(hosts: usize, noise: Noise, bad: Vec<(usize, f64)>) -> Model {
        Model { hosts, bw_mb_per_sec: 3000.0, t_typical_usec: 2.0, noise, bad, iterations: 1000 }
    }

    #[test]
    fn a_draw_is_uniform_and_normal_enough() {
        let mut d = Draw(7);
        let u: Vec<f64> = (0..20_000).map(|_| d.uniform()).collect();
        assert!(u.iter().all(|v| (0.0..1.0).contains(v)));
        let mean = u.iter().sum::<f64>() / u.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "uniform mean {mean}");
        let z: Vec<f64> = (0..20_000).map(|_| d.normal()).collect();
        let mean = z.iter().sum::<f64>() / z.len() as f64;
        let var = z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / z.len() as f64;
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "normal {mean} {var}");
    }

    #[test]
    fn a_healthy_job_has_no_confirmed_finding() {
        for pairs in [Pairs::All, Pairs::Ring, Pairs::Random(4)] {
            let t =
                Tally::of(&model(16, Noise::QUIET, vec![]), pairs, Thresholds::default(), 200, 1);
            assert_eq!(t.false_findings, 0, "{pairs}: {t:?}");
        }
    }

    #[test]
    fn a_host_at_half_bandwidth_is_found_by_every_schedule() {
        let m = model(16, Noise::QUIET, vec![(5, 0.5)]);
        for pairs in [Pairs::All, Pairs::Ring, Pairs::Random(4)] {
            let t = Tally::of(&m, pairs, Thresholds::default(), 200, 11);
            assert_eq!(t.found, 200, "{pairs}: {t:?}");
            assert_eq!(t.false_findings, 0, "{pairs}: {t:?}");
        }
    }

    #[test]
    fn three_hosts_find_a_slow_one_by_bandwidth_under_the_labs_noise() {
        // The three guests' delayed node ran at about a third of the others' bandwidth.
        let m = model(3, Noise::LAB, vec![(2, 0.35)]);
        let t = Thresholds { judge: super::super::findings::Judge::Bw, ..Thresholds::default() };
        let tally = Tally::of(&m, Pairs::All, t, 200, 5);
        assert!(tally.detection() >= 0.9, "{tally:?}");
        assert!(tally.false_per_100() <= 2.0, "{tally:?}");
    }

    #[test]
    fn rounds_are_the_schedules() {
        let m = model(16, Noise::QUIET, vec![]);
        let t = Thresholds::default();
        assert_eq!(run(&m, Pairs::All, t, 1).rounds, 15);
        assert_eq!(run(&m, Pairs::Ring, t, 1).rounds, 2);
        assert_eq!(run(&m, Pairs::Random(4), t, 1).rounds, 4);
    }

    #[test]
    fn a_longer_recheck_is_quieter() {
        let m = model(8, Noise { pause: 0.0, ..Noise::LAB }, vec![]);
        let mut d = Draw(3);
        let figures = |d: &mut Draw, length| -> Vec<f64> {
            (0..400)
                .flat_map(|_| measure(&m, d, Pair::new(0, 1), 0, (true, false), length))
                .filter_map(|l| l.bw_mb_per_sec)
                .collect()
        };
        let cv = |v: &[f64]| {
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt() / mean
        };
        let (first, long) = (cv(&figures(&mut d, 1.0)), cv(&figures(&mut d, 16.0)));
        assert!((first - 0.2).abs() < 0.02 && (long - 0.05).abs() < 0.01, "CV {first}, {long}");
    }

    #[test]
    fn a_bad_host_is_only_found_past_the_noise() {
        // 0.9× of a healthy link is inside the 25 % the band allows: never confirmed.
        let t = Tally::of(
            &model(16, Noise::QUIET, vec![(3, 0.9)]),
            Pairs::Ring,
            Thresholds::default(),
            100,
            3,
        );
        assert_eq!((t.found, t.false_findings), (0, 0), "{t:?}");
    }
}
