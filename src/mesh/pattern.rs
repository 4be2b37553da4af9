//! Traffic patterns beyond disjoint pairs (`--pattern`): who sends to whom at once.
//!
//! - `incast`: every other rank into one receiver at once (N−1 flows), each rank in turn
//!   or the one `--incast-root` names;
//! - `all-to-all`: every rank to every other at once (N·(N−1) flows), one round;
//! - `bisection`: the ranks cut into two random halves, each sender of one half paired
//!   with a receiver of the other, all at once; `--bisection-rounds` cuts, drawn from the
//!   mesh's seed so a run can be replayed. With an odd N the rank the draw leaves over
//!   sits the round out (another one, most likely, in the next round).
//!
//! Pure functions: every rank computes the same rounds from N, the flags and the seed.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::schedule::splitmix64;
use crate::spec::{RunLength, TestSpec};

/// One traffic pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pattern {
    /// Rounds of disjoint pairs: the mesh's matrix (always measured: the patterns'
    /// links alone).
    Pairs,
    /// N−1 senders into one receiver.
    Incast,
    /// Everyone to everyone.
    AllToAll,
    /// Half the ranks to the other half.
    Bisection,
}

impl Pattern {
    const NAMES: [(&'static str, Pattern); 4] = [
        ("pairs", Pattern::Pairs),
        ("incast", Pattern::Incast),
        ("all-to-all", Pattern::AllToAll),
        ("bisection", Pattern::Bisection),
    ];
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = Pattern::NAMES.iter().find(|(_, p)| p == self).map_or("?", |(n, _)| n);
        f.write_str(name)
    }
}

impl Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `--pattern`'s list: comma-separated names, each once, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PatternList(pub Vec<Pattern>);

impl FromStr for PatternList {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut list = Vec::new();
        for word in text.split(',').map(str::trim) {
            let Some(&(_, p)) = Pattern::NAMES.iter().find(|(n, _)| *n == word) else {
                return Err(format!(
                    "'{word}' is not a pattern: pairs, incast, all-to-all or bisection (a comma-separated list)"
                ));
            };
            if list.contains(&p) {
                return Err(format!("'{word}' is named twice"));
            }
            list.push(p);
        }
        Ok(PatternList(list))
    }
}

/// The patterns a mesh runs after its pairs, and how.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PatternSpec {
    /// The patterns besides pairs, in the order given.
    pub patterns: Vec<Pattern>,
    /// Incast into this rank only (None: every rank in turn).
    pub incast_root: Option<usize>,
    /// Bisection's random cuts.
    pub bisection_rounds: usize,
    /// A pattern round whose aggregate ÷ alone-sum is below this fails the run.
    pub min_ratio: Option<f64>,
    /// Each flow of a pattern round runs this long (a `-D` run of the pairs' bandwidth
    /// test, a quarter of it margin at each end), so that all of a round's flows overlap.
    pub secs: u64,
}

impl Default for PatternSpec {
    fn default() -> PatternSpec {
        PatternSpec {
            patterns: Vec::new(),
            incast_root: None,
            bisection_rounds: 4,
            min_ratio: None,
            secs: 2,
        }
    }
}

impl PatternSpec {
    /// Any pattern besides pairs: the ranks need a listener per sender.
    pub fn any(&self) -> bool {
        !self.patterns.is_empty()
    }

    /// A flow's test: `bw`, the pairs' bandwidth test, run for [`Self::secs`].
    pub fn flow_test(&self, bw: &TestSpec) -> TestSpec {
        let run = RunLength::Duration { secs: self.secs, margin_ms: self.secs.saturating_mul(250) };
        TestSpec { run, ..bw.clone() }
    }

    /// The flags against the mesh's `n` ranks.
    ///
    /// # Errors
    /// `--incast-root` past the last rank.
    pub fn check(&self, n: usize) -> Result<(), String> {
        match self.incast_root {
            Some(r) if r >= n && self.patterns.contains(&Pattern::Incast) => Err(format!(
                "--incast-root {r}: the mesh has {n} ranks (0 to {})",
                n.saturating_sub(1)
            )),
            _ => Ok(()),
        }
    }
}

/// One directed flow of a pattern round: `from` is the client (the writer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Flow {
    /// The sender's rank.
    pub from: usize,
    /// The receiver's rank.
    pub to: usize,
}

/// One round of a pattern: its flows run at once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PatternRound {
    /// Which pattern.
    pub pattern: Pattern,
    /// Incast: the receiver.
    pub root: Option<usize>,
    /// Bisection: the sending half (sorted).
    pub senders: Vec<usize>,
    /// Bisection: the receiving half (sorted).
    pub receivers: Vec<usize>,
    /// Bisection with an odd N: the rank left over, which sits the round out.
    pub idle: Option<usize>,
    /// The flows, sorted.
    pub flows: Vec<Flow>,
}

impl PatternRound {
    fn new(pattern: Pattern, mut flows: Vec<Flow>) -> PatternRound {
        flows.sort();
        PatternRound {
            pattern,
            root: None,
            senders: Vec::new(),
            receivers: Vec::new(),
            idle: None,
            flows,
        }
    }

    /// `incast into 2`, `all-to-all`, `bisection 0,3 -> 1,2`.
    pub fn describe(&self) -> String {
        let list = |v: &[usize]| v.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        match (self.pattern, self.root) {
            (Pattern::Incast, Some(r)) => format!("incast into {r}"),
            (Pattern::Bisection, _) => {
                let idle = self.idle.map_or_else(String::new, |r| format!(" ({r} idle)"));
                format!("bisection {} -> {}{idle}", list(&self.senders), list(&self.receivers))
            }
            (p, _) => p.to_string(),
        }
    }

    /// The flow the latency probe runs beside the others on: the first (incast: the
    /// lowest sender into the receiver; bisection: the lowest sender's).
    pub fn probe(&self) -> Option<Flow> {
        self.flows.first().copied()
    }

    /// `rank`'s flows in this round: those it sends and those it receives.
    pub fn flows_of(&self, rank: usize) -> (Vec<Flow>, Vec<Flow>) {
        let out = self.flows.iter().filter(|f| f.from == rank).copied().collect();
        let inn = self.flows.iter().filter(|f| f.to == rank).copied().collect();
        (out, inn)
    }
}

/// Every pattern round for `n` ranks, in the order of `spec.patterns`; `seed` draws
/// bisection's halves.
pub fn plan(n: usize, spec: &PatternSpec, seed: u64) -> Vec<PatternRound> {
    if n < 2 {
        return Vec::new();
    }
    let mut rounds = Vec::new();
    for p in &spec.patterns {
        match p {
            Pattern::Pairs => {}
            Pattern::Incast => rounds.extend(incast(n, spec.incast_root)),
            Pattern::AllToAll => rounds.push(all_to_all(n)),
            Pattern::Bisection => rounds.extend(bisection(n, spec.bisection_rounds, seed)),
        }
    }
    rounds
}

/// N−1 senders into `root`, or into each rank in turn; a root past the end gives none.
pub fn incast(n: usize, root: Option<usize>) -> Vec<PatternRound> {
    let roots: Vec<usize> = match root {
        Some(r) if r < n => vec![r],
        Some(_) => Vec::new(),
        None => (0..n).collect(),
    };
    roots
        .into_iter()
        .map(|r| {
            let flows = (0..n).filter(|&s| s != r).map(|s| Flow { from: s, to: r }).collect();
            PatternRound { root: Some(r), ..PatternRound::new(Pattern::Incast, flows) }
        })
        .collect()
}

/// Every rank to every other, at once.
pub fn all_to_all(n: usize) -> PatternRound {
    let flows = (0..n)
        .flat_map(|from| (0..n).filter(move |&to| to != from).map(move |to| Flow { from, to }))
        .collect();
    PatternRound::new(Pattern::AllToAll, flows)
}

/// `rounds` random cuts: a Fisher–Yates shuffle of the ranks by splitmix64 from `seed`
/// (the same on every rank), its first half sending to its second, i-th to i-th; with
/// an odd `n` the shuffle's last rank idles.
pub fn bisection(n: usize, rounds: usize, seed: u64) -> Vec<PatternRound> {
    let mut state = seed ^ 0xB15E_C710_0000_0000; // not the stream random:K draws from
    (0..rounds)
        .map(|_| {
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
            let half = n / 2;
            let flows = (0..half).map(|i| Flow { from: order[i], to: order[half + i] }).collect();
            let mut senders = order[..half].to_vec();
            let mut receivers = order[half..2 * half].to_vec();
            senders.sort_unstable();
            receivers.sort_unstable();
            PatternRound {
                senders,
                receivers,
                idle: (n % 2 == 1).then(|| order[n - 1]),
                ..PatternRound::new(Pattern::Bisection, flows)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// How many flows each rank sends and receives in `round`.
    fn counts(n: usize, round: &PatternRound) -> (Vec<usize>, Vec<usize>) {
        let (mut out, mut inn) = (vec![0; n], vec![0; n]);
        for f in &round.flows {
            assert!(f.from < n && f.to < n && f.from != f.to, "{f:?} for {n} ranks");
            out[f.from] += 1;
            inn[f.to] += 1;
        }
        let distinct: BTreeSet<_> = round.flows.iter().collect();
        assert_eq!(distinct.len(), round.flows.len(), "a flow twice: {round:?}");
        (out, inn)
    }

    #[test]
    fn incast_gives_its_receiver_n_minus_1_senders_each_rank_in_turn() {
        for n in 2..=9 {
            let rounds = incast(n, None);
            assert_eq!(rounds.len(), n, "every rank in turn for {n}");
            for (r, round) in rounds.iter().enumerate() {
                assert_eq!(round.root, Some(r));
                let (out, inn) = counts(n, round);
                assert_eq!(inn[r], n - 1, "the receiver hears everyone: {round:?}");
                assert_eq!(inn.iter().sum::<usize>(), n - 1, "no one else receives");
                assert!((0..n).all(|s| out[s] == usize::from(s != r)), "{out:?}");
            }
        }
        let one = incast(5, Some(3));
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].describe(), "incast into 3");
        assert_eq!(counts(5, &one[0]).1, vec![0, 0, 0, 4, 0]);
        assert!(incast(5, Some(5)).is_empty(), "no rank 5 of 5");
    }

    #[test]
    fn all_to_all_sends_every_rank_to_every_other_once() {
        for n in 2..=8 {
            let round = all_to_all(n);
            assert_eq!(round.flows.len(), n * (n - 1));
            let (out, inn) = counts(n, &round);
            assert!(out.iter().chain(&inn).all(|&c| c == n - 1), "{n}: {out:?} {inn:?}");
        }
    }

    #[test]
    fn bisection_halves_are_disjoint_and_each_rank_in_one_role_per_round() {
        for n in 2..=11 {
            let rounds = bisection(n, 6, 99);
            assert_eq!(rounds.len(), 6);
            for round in &rounds {
                let (out, inn) = counts(n, round);
                assert_eq!(round.flows.len(), n / 2, "{n}: {round:?}");
                assert_eq!(round.senders.len(), n / 2);
                assert_eq!(round.receivers.len(), n / 2);
                for r in 0..n {
                    let roles = usize::from(round.senders.contains(&r))
                        + usize::from(round.receivers.contains(&r))
                        + usize::from(round.idle == Some(r));
                    assert_eq!(roles, 1, "rank {r} of {n} in one role: {round:?}");
                    assert!(out[r] + inn[r] <= 1, "rank {r} both sends and receives");
                    assert_eq!(out[r], usize::from(round.senders.contains(&r)));
                    assert_eq!(inn[r], usize::from(round.receivers.contains(&r)));
                }
                assert_eq!(round.idle.is_some(), n % 2 == 1, "the odd rank out: {round:?}");
            }
        }
    }

    #[test]
    fn bisection_halves_are_random_and_the_seed_replays_them() {
        let a = bisection(8, 5, 42);
        assert_eq!(a, bisection(8, 5, 42), "same seed, same halves");
        let cuts: BTreeSet<&Vec<usize>> = a.iter().map(|r| &r.senders).collect();
        assert!(cuts.len() > 1, "the rounds cut differently: {a:?}");
        let others = (0..20).filter(|&s| bisection(8, 5, s) != a).count();
        assert!(others >= 19, "other seeds draw other halves");
        // Over many rounds every rank sends, receives and (odd N) sits out at some point.
        let many = bisection(7, 200, 1);
        for r in 0..7 {
            assert!(many.iter().any(|x| x.senders.contains(&r)), "{r} never sends");
            assert!(many.iter().any(|x| x.receivers.contains(&r)), "{r} never receives");
            assert!(many.iter().any(|x| x.idle == Some(r)), "{r} never idles");
        }
        assert_eq!(bisection(2, 1, 0)[0].flows.len(), 1, "N = 2: one flow");
    }

    #[test]
    fn plan_follows_the_list_and_parsing_refuses_what_is_not_a_pattern() {
        let list: PatternList = "bisection, incast".parse().unwrap();
        assert_eq!(list.0, [Pattern::Bisection, Pattern::Incast]);
        let spec = PatternSpec {
            patterns: list.0,
            incast_root: Some(1),
            bisection_rounds: 2,
            ..PatternSpec::default()
        };
        let rounds = plan(4, &spec, 7);
        let kinds: Vec<Pattern> = rounds.iter().map(|r| r.pattern).collect();
        assert_eq!(kinds, [Pattern::Bisection, Pattern::Bisection, Pattern::Incast]);
        assert!(plan(1, &spec, 7).is_empty());
        assert!(spec.check(2).is_ok());
        let e = spec.check(1).unwrap_err();
        assert_eq!(e, "--incast-root 1: the mesh has 1 ranks (0 to 0)");
        for bad in ["", "incast,", "ring", "incast,incast", "all_to_all"] {
            assert!(bad.parse::<PatternList>().is_err(), "{bad}");
        }
        assert!("pairs,all-to-all".parse::<PatternList>().is_ok());
        assert_eq!(Pattern::AllToAll.to_string(), "all-to-all");
        assert_eq!(all_to_all(3).describe(), "all-to-all");
        let b = &bisection(5, 1, 3)[0];
        assert!(b.describe().starts_with("bisection ") && b.describe().ends_with(" idle)"));
    }
}
