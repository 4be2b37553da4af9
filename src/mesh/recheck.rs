//! The suspects measured again alone: which pairs (the worst first, a slow host's own
//! first: [`rechecks`]), how many tries ([`TRIES`]), and how long each runs
//! (`--recheck-length`: [`times`], [`recheck_test`]). Rank 0's rounds alone and the
//! simulation ([`super::simulate`]) both call these.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::findings::{Finding, Thresholds};
use super::schedule::{Pair, AUTO_ALL_UP_TO};
use crate::spec::{RunLength, TestSpec};

/// A pair slow alone is measured alone up to this many times: a link is confirmed only
/// when its best figure alone is still outside the band (a busy host's pause passes; a
/// bad link stays slow).
pub const TRIES: usize = 3;

/// A recheck runs at least this many iterations, and never fewer than the first
/// measurement's (`-n 20` is rechecked with 100): its figure alone is no noisier than
/// the figures it left the band of.
pub const RECHECK_MIN_ITERATIONS: u64 = 100;

/// `--recheck-length`'s default beyond [`AUTO_ALL_UP_TO`] ranks: a recheck runs 4 times
/// the first measurement's iterations. Chosen with [`super::schedule::LARGE_JOB`] from
/// benches/mesh_sim.rs's table (docs/mesh.md#at-scale): among a thousand hosts the
/// noise makes many suspects, and a 0.7× host's link alone must fall below its band's
/// limit at its best of [`TRIES`]; a quieter figure alone does.
pub const LARGE_JOB_LENGTH: u32 = 4;

/// How many times the first measurement's iterations a recheck runs in a job of `ranks`
/// ranks: `--recheck-length` when given, else 1 up to [`AUTO_ALL_UP_TO`] ranks and
/// [`LARGE_JOB_LENGTH`] beyond (as `--pairs auto` turns `random:K`).
pub fn times(t: &Thresholds, ranks: usize) -> u32 {
    match t.recheck_length {
        Some(l) => l.max(1),
        None if ranks <= AUTO_ALL_UP_TO => 1,
        None => LARGE_JOB_LENGTH,
    }
}

/// A recheck's iterations after a first measurement of `first`: `times` as many, and at
/// least [`RECHECK_MIN_ITERATIONS`].
pub fn iterations(first: u64, times: u32) -> u64 {
    first.saturating_mul(u64::from(times.max(1))).max(RECHECK_MIN_ITERATIONS)
}

/// A recheck's test: `spec` run [`iterations`] (a `-D` run `times` as long, its margins
/// as they were).
pub fn recheck_test(spec: &TestSpec, times: u32) -> TestSpec {
    let run = match spec.run {
        RunLength::Iterations(n) => RunLength::Iterations(iterations(n, times)),
        RunLength::Duration { secs, margin_ms } => {
            RunLength::Duration { secs: secs.saturating_mul(u64::from(times.max(1))), margin_ms }
        }
    };
    TestSpec { run, ..spec.clone() }
}

/// A pair to measure again alone, and which of its tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recheck {
    /// The pair (both directions run).
    pub pair: Pair,
    /// Its bandwidth tests.
    pub bw: bool,
    /// Its latency tests.
    pub lat: bool,
}

/// A host slow with several partners gets this many of its worst pairs rechecked first.
pub const RECHECK_HOST_PAIRS: usize = 3;

/// The pairs to measure again alone, at most `--recheck` of them, the worst suspects
/// first. Which pairs make the cut: first, for each host slow with two partners or more
/// (most partners first), its [`RECHECK_HOST_PAIRS`] worst pairs; then the worst of the
/// rest. A bad host is slow
/// with every partner, a pause slows one link: without this, a large job's pauses
/// (worse than a host at 0.7×) used up `--recheck` and the bad host was never measured
/// alone (benches/mesh_sim.rs: `all` at 256 hosts found it in 20 % of jobs).
pub fn rechecks(suspects: &[Finding], t: Thresholds) -> Vec<Recheck> {
    let mut order: Vec<&Finding> = suspects.iter().filter(|f| f.check != "error").collect();
    let times = |f: &Finding| match (f.band, f.figure) {
        (Some(b), Some(v)) => b.times(v),
        // min_bw: lower first.
        (None, Some(v)) => 1e12 / v.max(1e-9),
        _ => 0.0,
    };
    order.sort_by(|a, b| times(b).total_cmp(&times(a)));
    let mut partners: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for f in &order {
        partners.entry(f.from).or_default().insert(f.to);
        partners.entry(f.to).or_default().insert(f.from);
    }
    let mut hosts: Vec<(usize, usize)> =
        partners.iter().map(|(&r, p)| (r, p.len())).filter(|&(_, n)| n >= 2).collect();
    hosts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let pair = |f: &Finding| Pair::new(f.from, f.to);
    let mut chosen: Vec<Pair> = Vec::new();
    let worst_of_host = hosts.iter().flat_map(|&(r, _)| {
        let mut own: Vec<Pair> = Vec::new();
        for f in order.iter().filter(|f| f.from == r || f.to == r) {
            if own.len() == RECHECK_HOST_PAIRS {
                break;
            }
            if !own.contains(&pair(f)) {
                own.push(pair(f));
            }
        }
        own
    });
    for p in worst_of_host.chain(order.iter().map(|f| pair(f))) {
        if chosen.len() >= t.recheck_max {
            break;
        }
        if !chosen.contains(&p) {
            chosen.push(p);
        }
    }
    // Measured worst first, each pair once with every kind of test it is suspect in.
    let mut plan: Vec<Recheck> = Vec::new();
    for f in order.iter().filter(|f| chosen.contains(&pair(f))) {
        let bw = f.check != "latency_outlier";
        match plan.iter_mut().find(|r| r.pair == pair(f)) {
            Some(r) => {
                r.bw |= bw;
                r.lat |= !bw;
            }
            None => plan.push(Recheck { pair: pair(f), bw, lat: !bw }),
        }
    }
    plan
}

/// A finding on `pair` is confirmed so far: slow at its best alone (rank 0 tries the pair
/// alone again while this holds, up to [`TRIES`] times).
pub fn slow_alone(findings: &[Finding], pair: Pair) -> bool {
    findings.iter().any(|f| f.confirmed && f.check != "error" && Pair::new(f.from, f.to) == pair)
}

#[cfg(test)]
mod tests {
    use super::super::schedule::{Pairs, LARGE_JOB};
    use super::*;

    #[test]
    fn a_large_job_defaults_to_what_the_benchs_table_chose() {
        // docs/mesh.md#at-scale: random:16 with rechecks 4 times as long is the row that
        // met the target at 1,024 hosts (≥ 99 % found, ≤ 1 false finding per 100 jobs).
        assert_eq!(LARGE_JOB, Pairs::Random(16));
        assert_eq!(LARGE_JOB_LENGTH, 4);
        let t = Thresholds::default();
        assert_eq!(Pairs::Auto.resolve(1024), Pairs::Random(16));
        assert_eq!(times(&t, 1024), 4);
        assert_eq!(times(&t, AUTO_ALL_UP_TO + 1), 4, "as soon as auto is no longer all");
        assert_eq!(Pairs::Auto.resolve(AUTO_ALL_UP_TO), Pairs::All);
        assert_eq!(times(&t, AUTO_ALL_UP_TO), 1, "a small job's recheck as long as its rounds");
        assert_eq!(times(&t, 3), 1);
        let given = Thresholds { recheck_length: Some(2), ..t };
        assert_eq!((times(&given, 3), times(&given, 1024)), (2, 2), "--recheck-length wins");
        assert_eq!(iterations(1000, times(&t, 1024)), 4000);
        assert_eq!(iterations(20, 1), RECHECK_MIN_ITERATIONS);
    }
}
