//! Which ranks meet in which round: rounds of disjoint pairs, so no rank is in two
//! tests at once and every pair's figures are its own.
//!
//! `all` is the round-robin tournament (the circle method): N−1 rounds of N/2 pairs
//! for even N, N rounds of (N−1)/2 pairs for odd N (one rank idles each round). `ring`
//! pairs each rank with the next (2 rounds, 3 when N is odd). `random:K` takes K of the
//! tournament's rounds, chosen by a seed, so each rank meets K others. `auto` (the
//! default) is `all` up to [`AUTO_ALL_UP_TO`] ranks and [`LARGE_JOB`] beyond, chosen from
//! benches/mesh_sim.rs's table (docs/mesh.md#at-scale).

use std::fmt;
use std::str::FromStr;

/// `auto` measures every pair up to this many ranks (63 rounds, ~1.5 min at 1.5 s a round).
pub const AUTO_ALL_UP_TO: usize = 64;

/// `auto`'s schedule beyond [`AUTO_ALL_UP_TO`] ranks: 16 rounds whatever N. With rechecks
/// 4 times as long (`recheck::LARGE_JOB_LENGTH`), the row of benches/mesh_sim.rs's table
/// that finds a host at 0.7× among 1,024 under the lab's noise (docs/mesh.md#at-scale).
pub const LARGE_JOB: Pairs = Pairs::Random(16);

/// Which pairs a mesh measures (`--pairs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairs {
    /// `All` for a small job, [`LARGE_JOB`] for a large one.
    Auto,
    /// Every pair.
    All,
    /// Each rank with the next, the last with the first.
    Ring,
    /// K rounds of the tournament, chosen at random: K partners per rank.
    Random(usize),
}

impl FromStr for Pairs {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Pairs::Auto),
            "all" => Ok(Pairs::All),
            "ring" => Ok(Pairs::Ring),
            _ => match text.strip_prefix("random:").map(str::parse::<usize>) {
                Some(Ok(k)) if k > 0 => Ok(Pairs::Random(k)),
                _ => Err(format!(
                    "'{text}' is not auto, all, ring or random:K (K ≥ 1 partners per rank)"
                )),
            },
        }
    }
}

impl serde::Serialize for Pairs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Pairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pairs::Auto => f.write_str("auto"),
            Pairs::All => f.write_str("all"),
            Pairs::Ring => f.write_str("ring"),
            Pairs::Random(k) => write!(f, "random:{k}"),
        }
    }
}

/// Two ranks that meet, the lower first.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Pair(pub usize, pub usize);

impl Pair {
    /// The pair of `a` and `b`, whichever is lower first.
    pub fn new(a: usize, b: usize) -> Pair {
        Pair(a.min(b), a.max(b))
    }

    /// The other rank of the pair, if `rank` is in it.
    pub fn partner(self, rank: usize) -> Option<usize> {
        match rank {
            r if r == self.0 => Some(self.1),
            r if r == self.1 => Some(self.0),
            _ => None,
        }
    }
}

impl Pairs {
    /// What `auto` is for `n` ranks; any other set is itself.
    pub fn resolve(self, n: usize) -> Pairs {
        match self {
            Pairs::Auto if n <= AUTO_ALL_UP_TO => Pairs::All,
            Pairs::Auto => LARGE_JOB,
            other => other,
        }
    }

    /// `random:16 (auto)` for `auto`, else the set's name: what a report's header shows.
    pub fn describe(self, n: usize) -> String {
        match self {
            Pairs::Auto => format!("{} (auto)", self.resolve(n)),
            other => other.to_string(),
        }
    }
}

/// The rounds for `n` ranks: each a list of disjoint pairs. `seed` chooses the rounds of
/// `random:K`.
pub fn rounds(n: usize, pairs: Pairs, seed: u64) -> Vec<Vec<Pair>> {
    if n < 2 {
        return Vec::new();
    }
    match pairs.resolve(n) {
        // (`resolve` never gives `Auto`.)
        Pairs::All | Pairs::Auto => tournament(n),
        Pairs::Ring => ring(n),
        Pairs::Random(k) => {
            let mut all = tournament(n);
            if k >= all.len() {
                return all;
            }
            // A Fisher–Yates shuffle by splitmix64: the same seed gives every rank the same
            // rounds, and prints so a run can be repeated (`--seed`).
            let mut state = seed;
            for i in (1..all.len()).rev() {
                let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
                all.swap(i, j);
            }
            all.truncate(k);
            all
        }
    }
}

/// The circle method: rank n−1 (or an idle slot for odd n) stays put, the others turn.
fn tournament(n: usize) -> Vec<Vec<Pair>> {
    let slots = n + n % 2; // an odd n gets an idle slot: whoever meets it sits out
    let turning = slots - 1;
    (0..turning)
        .map(|r| {
            let mut round = Vec::with_capacity(slots / 2);
            for i in 0..slots / 2 {
                let (a, b) = if i == 0 {
                    (r, slots - 1)
                } else {
                    ((r + i) % turning, (r + turning - i) % turning)
                };
                if a < n && b < n {
                    round.push(Pair::new(a, b));
                }
            }
            round.sort();
            round
        })
        .collect()
}

/// Rank i with i+1: the even links, then the odd ones, then (odd n) the closing one.
fn ring(n: usize) -> Vec<Vec<Pair>> {
    if n == 2 {
        return vec![vec![Pair(0, 1)]];
    }
    let link = |i: usize| Pair::new(i, (i + 1) % n);
    let mut rounds = vec![
        (0..n).step_by(2).filter(|&i| n % 2 == 0 || i + 1 < n).map(link).collect::<Vec<_>>(),
        (1..n).step_by(2).map(link).collect(),
    ];
    if n % 2 == 1 {
        rounds.push(vec![link(n - 1)]);
    }
    rounds
}

pub(super) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every round's pairs are disjoint; returns every pair met, each once.
    fn check(n: usize, rounds: &[Vec<Pair>]) -> BTreeSet<Pair> {
        let mut met = BTreeSet::new();
        for round in rounds {
            let mut busy = BTreeSet::new();
            for p in round {
                assert!(p.0 < p.1 && p.1 < n, "{p:?} for {n} ranks");
                assert!(busy.insert(p.0) && busy.insert(p.1), "rank twice in {round:?}");
                assert!(met.insert(*p), "{p:?} met twice");
            }
        }
        met
    }

    #[test]
    fn all_meets_every_pair_once_in_n_minus_1_rounds_or_n_for_odd_n() {
        for n in 2..=17 {
            let r = rounds(n, Pairs::All, 0);
            assert_eq!(r.len(), if n % 2 == 0 { n - 1 } else { n }, "rounds for {n}");
            assert!(r.iter().all(|round| round.len() == n / 2), "{n}: {r:?}");
            assert_eq!(check(n, &r).len(), n * (n - 1) / 2, "every pair for {n}");
        }
        assert_eq!(
            rounds(4, Pairs::All, 0),
            vec![
                vec![Pair(0, 3), Pair(1, 2)],
                vec![Pair(0, 2), Pair(1, 3)],
                vec![Pair(0, 1), Pair(2, 3)]
            ]
        );
    }

    #[test]
    fn ring_meets_each_rank_and_the_next() {
        for n in 2..=9 {
            let r = rounds(n, Pairs::Ring, 0);
            let met = check(n, &r);
            let want: BTreeSet<_> = (0..n).map(|i| Pair::new(i, (i + 1) % n)).collect();
            assert_eq!(met, want, "ring of {n}");
            assert!(r.len() <= 3);
        }
    }

    #[test]
    fn random_k_gives_each_rank_k_partners_and_the_seed_decides_which() {
        let r = rounds(8, Pairs::Random(3), 42);
        assert_eq!(r.len(), 3);
        let met = check(8, &r);
        for rank in 0..8 {
            assert_eq!(met.iter().filter(|p| p.partner(rank).is_some()).count(), 3);
        }
        assert_eq!(r, rounds(8, Pairs::Random(3), 42), "same seed, same rounds");
        let others = (0..20).filter(|s| rounds(8, Pairs::Random(3), *s) != r).count();
        assert!(others > 15, "other seeds choose other rounds");
        assert_eq!(rounds(4, Pairs::Random(9), 1).len(), 3, "more than all is all");
    }

    #[test]
    fn auto_is_all_for_a_small_job_and_the_large_jobs_schedule_beyond() {
        assert_eq!(Pairs::Auto.resolve(AUTO_ALL_UP_TO), Pairs::All);
        assert_eq!(Pairs::Auto.resolve(AUTO_ALL_UP_TO + 1), LARGE_JOB);
        assert_eq!(rounds(16, Pairs::Auto, 1).len(), 15);
        assert_eq!(rounds(1024, Pairs::Auto, 1), rounds(1024, LARGE_JOB, 1));
        assert_eq!(rounds(1024, Pairs::Auto, 1).len(), 16);
        assert_eq!(Pairs::Auto.describe(1024), "random:16 (auto)");
        assert_eq!(Pairs::Ring.describe(1024), "ring");
        assert_eq!("auto".parse::<Pairs>(), Ok(Pairs::Auto));
    }

    #[test]
    fn pairs_parse_and_print() {
        for text in ["all", "ring", "random:4"] {
            assert_eq!(text.parse::<Pairs>().unwrap().to_string(), text);
        }
        for bad in ["", "some", "random:", "random:0", "random:-1", "random:x"] {
            let e = bad.parse::<Pairs>().unwrap_err();
            assert!(e.contains("all, ring or random:K"), "{e}");
        }
        assert_eq!(Pair(2, 5).partner(5), Some(2));
        assert_eq!(Pair(2, 5).partner(3), None);
        assert!(rounds(1, Pairs::All, 0).is_empty());
    }
}
