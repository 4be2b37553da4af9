//! `rdmabench mesh`: every pair of ranks of an MPI job (or the pairs `--pairs` names)
//! measured in both directions, a bandwidth and a latency test each, through the same
//! engine and loops as the pair tests (docs/mesh.md).
//!
//! The launcher carries the bootstrap only ([`bootstrap`]): each rank opens its control
//! listener, the ranks all-gather their endpoints, then round after round ([`schedule`])
//! each pair runs its four tests over its own control connection while rank 0 waits for
//! every rank's "done" (with its figures) before it says "go". Rank 0 analyses the links
//! ([`analysis`]); its last "go" names the suspects' pairs ([`findings`]), and each is
//! measured again alone, one recheck round per pair. Then the traffic patterns
//! (`--pattern`: [`pattern`], run by [`flows`]), before the reports ([`report`]).

pub mod analysis;
pub mod bootstrap;
pub mod findings;
pub mod flows;
mod hello;
pub mod html;
pub mod launch;
pub mod pattern;
pub mod pattern_report;
pub mod ranks;
pub mod recheck;
pub mod report;
pub mod schedule;
pub mod simulate;
pub mod window;

use std::io::Write;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::{self, Side};
use crate::environment::Environment;
use crate::error::{Error, ErrorKind};
use crate::measure::MIB;
use crate::session::connect::ControlListener;
use crate::spec::{Local, TestSpec};

use bootstrap::Bootstrap;
use findings::Thresholds;
use flows::FlowListeners;
use hello::introduce;
#[cfg(test)]
use hello::{read_hellos, Hello};
use pattern::{PatternRound, PatternSpec};
use ranks::{LinkResult, RankInfo};
use recheck::{recheck_test, Recheck};
use report::MeshReport;
use schedule::{Pair, Pairs};

/// What every rank of a mesh runs; all ranks must be given the same.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeshSpec {
    /// The bandwidth test of each direction of each pair.
    pub bw: TestSpec,
    /// The latency test of each direction of each pair.
    pub lat: TestSpec,
    /// Which pairs.
    pub pairs: Pairs,
    /// The seed of `random:K` (None: rank 0 picks one and prints it).
    pub seed: Option<u64>,
    /// How long rank 0 waits for a round to end before it names the ranks that did not.
    pub round_timeout: Duration,
    /// What a link is judged by.
    pub thresholds: Thresholds,
    /// The traffic patterns run after the pairs (`--pattern`).
    pub patterns: PatternSpec,
}

/// Where this rank is reached and what it tests with.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The control listener's address (its port is `Local::port`; 0: the system's pick).
    pub address: IpAddr,
    /// The device's name (`tcp` for TCP meshes).
    pub device: String,
}

/// What a rank is doing now, for the line printed when the launcher ends the job.
#[derive(Clone, Default)]
pub struct Status(Arc<Mutex<String>>);

impl Status {
    fn set(&self, text: String) {
        if let Ok(mut s) = self.0.lock() {
            *s = text;
        }
    }

    /// The last thing set.
    pub fn get(&self) -> String {
        self.0.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// A rank's results of one round, to rank 0.
#[derive(Serialize, Deserialize)]
struct Done {
    round: usize,
    links: Vec<LinkResult>,
    /// This rank's host and device, as its client test described them.
    environment: Option<Environment>,
}

/// Rank 0's "go" after a recheck that is to be run again.
const AGAIN: &[u8] = b"again";

/// Rank 0's "go" after the schedule's last round: the pairs to measure again alone.
#[derive(Serialize, Deserialize)]
struct Plan {
    rechecks: Vec<Recheck>,
}

/// Runs this rank's part of the mesh. Rank 0 returns the report (also when a link
/// failed: see [`MeshReport::verdict`]) and hands it to `progress` before the first
/// round and after each; the other ranks return None.
///
/// # Errors
/// This rank cannot listen, the ranks disagree on the parameters, or a round did not
/// end in time (rank 0 names the ranks it waited for). The caller ends the job: the
/// other ranks may be waiting.
pub fn run(
    boot: &dyn Bootstrap,
    mesh: &MeshSpec,
    local: &Local,
    endpoint: &Endpoint,
    status: &Status,
    progress: &mut dyn FnMut(&MeshReport),
    out: &mut dyn Write,
) -> Result<Option<MeshReport>, Error> {
    if boot.size() < 2 {
        return Err(Error::usage(
            "a mesh needs at least 2 ranks: start it with mpirun -np N or srun -n N (N ≥ 2)",
        ));
    }
    mesh.patterns.check(boot.size()).map_err(Error::usage)?;
    let listener = ControlListener::bind(Some(endpoint.address), local.port)?;
    let flow_listeners = FlowListeners::bind(endpoint.address, boot.size(), &mesh.patterns)?;
    status.set("exchanging endpoints (MPI all-gather)".into());
    let hello::Introduced { ranks, seed, flow_ports } =
        introduce(boot, mesh, endpoint, &listener, flow_listeners.ports())?;
    let rounds = schedule::rounds(ranks.len(), mesh.pairs, seed);
    let rank = Rank { boot, mesh, ranks, status };
    let mut report =
        (boot.rank() == 0).then(|| MeshReport::new(mesh, &rank.ranks, seed, rounds.len()));
    if let Some(r) = &report {
        let _ = writeln!(out, "{}", r.header());
        // From here on a stopped mesh leaves a report that says so.
        progress(r);
    }
    // A client connects from this rank's address: its traffic (on RoCE, its GID) is its own.
    let pair_local = Local { bind: Some(endpoint.address), quiet: true, ..local.clone() };
    let mut plan = Vec::new();
    for (k, pairs) in rounds.iter().enumerate() {
        let round = Round {
            k,
            label: k + 1,
            of: rounds.len(),
            pairs,
            started: Instant::now(),
            alone: None,
            pattern: None,
        };
        let last = k + 1 == rounds.len();
        let (links, env) = rank.play(&round, &pair_local, &listener);
        match &mut report {
            Some(r) => {
                let mut all = links;
                r.add_environment(0, env);
                all.extend(rank.collect(&round, r)?);
                r.add_round(all);
                let _ = writeln!(
                    out,
                    "{}",
                    r.round_line(&round.name(), k, pairs, round.started.elapsed())
                );
                progress(r);
                let go = if last {
                    plan = r.plan_rechecks();
                    serde_json::to_vec(&Plan { rechecks: plan.clone() })
                        .map_err(|e| Error::io(e.to_string()))?
                } else {
                    Vec::new()
                };
                boot.send_go(&go);
            }
            None => {
                let go = rank.report(&round, links, env)?;
                if last {
                    plan = serde_json::from_slice::<Plan>(&go)
                        .map_err(|e| {
                            Error::new(
                                ErrorKind::Refused,
                                format!("rank 0's list of rechecks is unreadable: {e}"),
                            )
                        })?
                        .rechecks;
                }
            }
        }
    }
    // Each suspect pair again, alone: no other pair runs meanwhile.
    let n = rank.ranks.len();
    if let Some(p) = plan.iter().find(|c| c.pair.1 >= n) {
        return Err(Error::new(
            ErrorKind::Refused,
            format!("rank 0 asked for a recheck of ranks {} and {} of {n}", p.pair.0, p.pair.1),
        ));
    }
    // A pair still slow is measured again, up to `recheck::TRIES` times: only a link
    // slow at its best alone is confirmed.
    let (mut k, mut i, mut tries) = (rounds.len(), 0, 0);
    while let Some(check) = plan.get(i).copied() {
        tries += 1;
        let pairs = [check.pair];
        let round = Round {
            k,
            label: i + 1,
            of: plan.len(),
            pairs: &pairs,
            started: Instant::now(),
            alone: Some(check),
            pattern: None,
        };
        let (links, env) = rank.play(&round, &pair_local, &listener);
        let again = match &mut report {
            Some(r) => {
                let mut all = links;
                r.add_environment(0, env);
                all.extend(rank.collect(&round, r)?);
                r.add_rerun(all);
                let again = tries < recheck::TRIES && r.slow_alone(check.pair);
                if !again {
                    r.rechecks_done += 1;
                }
                let name = format!("{} (try {tries})", round.name());
                let _ =
                    writeln!(out, "{}", r.round_line(&name, k, &pairs, round.started.elapsed()));
                progress(r);
                boot.send_go(if again { AGAIN } else { &[] });
                again
            }
            None => rank.report(&round, links, env)? == AGAIN && tries < recheck::TRIES,
        };
        k += 1;
        if !again {
            (i, tries) = (i + 1, 0);
        }
    }
    // The patterns last: their links alone are the pairs' figures, final by now.
    let patterns = pattern::plan(n, &mesh.patterns, seed);
    let flows = flows::Flows { listeners: &flow_listeners, ports: &flow_ports, local: &pair_local };
    rank.play_patterns(&patterns, k, &flows, &mut report, progress, out)?;
    Ok(report.map(|mut r| {
        r.finish();
        r
    }))
}

/// One round: which, of how many, its pairs, when it started; a recheck's pair and
/// tests.
struct Round<'a> {
    /// Its index among the schedule's rounds and then the rechecks.
    k: usize,
    /// Its number among its kind (round or recheck), from 1.
    label: usize,
    of: usize,
    pairs: &'a [Pair],
    started: Instant,
    alone: Option<Recheck>,
    /// A pattern round: its flows (its `pairs` are empty).
    pattern: Option<&'a PatternRound>,
}

impl Round<'_> {
    /// `round 2/3`, `recheck 1/2`.
    fn name(&self) -> String {
        match (self.alone, self.pattern) {
            (_, Some(p)) => format!("pattern round {}/{} ({})", self.label, self.of, p.describe()),
            (None, None) => format!("round {}/{}", self.label, self.of),
            (Some(_), None) => format!("recheck {}/{}", self.label, self.of),
        }
    }
}

/// This rank once the ranks know each other.
struct Rank<'a> {
    boot: &'a dyn Bootstrap,
    mesh: &'a MeshSpec,
    ranks: Vec<RankInfo>,
    status: &'a Status,
}

impl Rank<'_> {
    /// This rank's pair's four tests (a recheck: those it names), in the same order on
    /// both ranks: bandwidth lower→higher, higher→lower, then latency the same way.
    /// Returns the link this rank was the client of, with its figures or its error (none
    /// when it idles), and this rank's environment as its client tests described it.
    fn play(
        &self,
        round: &Round<'_>,
        local: &Local,
        listener: &ControlListener,
    ) -> (Vec<LinkResult>, Option<Environment>) {
        let me = self.boot.rank();
        let Some(pair) = round.pairs.iter().copied().find(|p| p.partner(me).is_some()) else {
            self.status.set(format!("{}: idle", round.name()));
            return (Vec::new(), None);
        };
        self.status.set(format!("{}: testing {}", round.name(), self.pair_name(pair)));
        let partner = &self.ranks[pair.partner(me).unwrap_or(me)];
        let mut mine = LinkResult {
            from: me,
            to: partner.rank,
            round: round.k,
            bw_mb_per_sec: None,
            t_typical_usec: None,
            error: None,
            span: None,
        };
        let mesh = self.mesh;
        let (run_bw, run_lat) = round.alone.map_or((true, true), |c| (c.bw, c.lat));
        // A recheck's figure alone comes from at least as many iterations as the first
        // (`--recheck-length` times as many).
        let (bw_test, lat_test) = match round.alone {
            Some(_) => {
                let times = recheck::times(&mesh.thresholds, self.ranks.len());
                (recheck_test(&mesh.bw, times), recheck_test(&mesh.lat, times))
            }
            None => (mesh.bw.clone(), mesh.lat.clone()),
        };
        let mut environment = None;
        for (spec, client, bw) in [
            (&bw_test, pair.0, true),
            (&bw_test, pair.1, true),
            (&lat_test, pair.0, false),
            (&lat_test, pair.1, false),
        ] {
            if (bw && !run_bw) || (!bw && !run_lat) {
                continue;
            }
            let sink = &mut std::io::sink();
            if client != me {
                if let Some(e) = engine::serve_on(listener, spec, local, sink).error {
                    // Named here too: the client's report may not get through.
                    eprintln!(
                        "rdmabench mesh: rank {me}: as server of {} for rank {}: {e}",
                        spec.id(),
                        partner.rank
                    );
                }
                continue;
            }
            let side = Side::Client { host: partner.address.clone() };
            let outcome = engine::run(
                spec,
                &side,
                &Local { port: partner.port, ..local.clone() },
                false,
                sink,
            );
            if environment.is_none() {
                environment = outcome.report.environment.as_ref().map(|e| e.local.clone());
            }
            // A failed test's window until the failure is not a link's figure.
            let first = outcome.report.results.first().filter(|_| outcome.error.is_none());
            if bw {
                mine.bw_mb_per_sec =
                    first.and_then(|r| r.bw.as_ref()).map(|b| b.avg_bytes_per_sec / MIB);
            } else {
                mine.t_typical_usec = first.and_then(|r| r.lat.as_ref()).map(|l| l.t_typical_us);
            }
            if let Some(e) = outcome.error {
                let line = format!("{}: {e}", spec.id());
                mine.error = Some(match mine.error.take() {
                    Some(before) => format!("{before}; {line}"),
                    None => line,
                });
            }
        }
        (vec![mine], environment)
    }

    /// At rank 0: every other rank's "done" for the round, until its deadline (at least
    /// a second from now). A rank that does not report is named with its partner.
    fn collect(
        &self,
        round: &Round<'_>,
        report: &mut MeshReport,
    ) -> Result<Vec<LinkResult>, Error> {
        let limit = self.mesh.round_timeout;
        let deadline = (round.started + limit).max(Instant::now() + Duration::from_secs(1));
        let mut waiting: Vec<usize> = (1..self.ranks.len()).collect();
        let mut links = Vec::new();
        let mut noted = 0;
        while !waiting.is_empty() {
            if noted != waiting.len() {
                noted = waiting.len();
                self.status.set(format!(
                    "{}: rank 0 was waiting for {} to report",
                    round.name(),
                    self.waiting_names(round, &waiting)
                ));
            }
            let Some((rank, bytes)) = self.boot.poll_done() else {
                if Instant::now() > deadline {
                    return Err(Error::new(
                        ErrorKind::PeerSilent,
                        format!(
                            "{} did not end within {} s (--round-timeout): no report from {}",
                            round.name(),
                            limit.as_secs(),
                            self.waiting_names(round, &waiting)
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let done: Done = serde_json::from_slice(&bytes).map_err(|e| {
                Error::new(ErrorKind::Refused, format!("rank {rank}'s results are unreadable: {e}"))
            })?;
            if done.round != round.k || !waiting.contains(&rank) {
                return Err(Error::new(
                    ErrorKind::Refused,
                    format!(
                        "rank {rank} reported round {} while {} ran",
                        done.round + 1,
                        round.name()
                    ),
                ));
            }
            if let Some(l) = round.stranger(rank, &done.links) {
                return Err(Error::new(
                    ErrorKind::Refused,
                    format!(
                        "rank {rank} reported a link {} -> {} of round {} it was not in",
                        l.from,
                        l.to,
                        l.round + 1
                    ),
                ));
            }
            if let Some(why) = Round::bad_span(&done.links) {
                return Err(Error::new(ErrorKind::Refused, format!("rank {rank}: {why}")));
            }
            waiting.retain(|&r| r != rank);
            links.extend(done.links);
            report.add_environment(rank, done.environment.map(Environment::cleaned));
        }
        Ok(links)
    }

    /// At the other ranks: the round's links to rank 0, then its go for the next round
    /// (its payload), within twice the round's time limit (rank 0 itself gives up after
    /// one).
    fn report(
        &self,
        round: &Round<'_>,
        links: Vec<LinkResult>,
        environment: Option<Environment>,
    ) -> Result<Vec<u8>, Error> {
        let done = serde_json::to_vec(&Done { round: round.k, links, environment })
            .map_err(|e| Error::io(e.to_string()))?;
        self.boot.send_done(&done);
        self.status.set(format!("{}: waiting for rank 0's go", round.name()));
        let limit = self.mesh.round_timeout * 2;
        let deadline = Instant::now() + limit + Duration::from_secs(1);
        loop {
            if let Some(go) = self.boot.poll_go() {
                return Ok(go);
            }
            if Instant::now() > deadline {
                return Err(Error::new(
                    ErrorKind::PeerSilent,
                    format!(
                        "{} did not end {} within {} s",
                        self.ranks[0].name(),
                        round.name(),
                        limit.as_secs()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `rank 2 (node1 rxe0) [paired with rank 1 (node1 rxe0)], rank 3 (…) [idle this round]`.
    fn waiting_names(&self, round: &Round<'_>, waiting: &[usize]) -> String {
        let name = |r: usize| self.ranks[r].name();
        waiting
            .iter()
            .map(|&r| match (round.pattern, round.pairs.iter().find_map(|p| p.partner(r))) {
                (Some(p), _) => format!("{} [in {}]", name(r), p.describe()),
                (None, Some(p)) => format!("{} [paired with {}]", name(r), name(p)),
                (None, None) => format!("{} [idle this round]", name(r)),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn pair_name(&self, p: Pair) -> String {
        format!("{} <-> {}", self.ranks[p.0].name(), self.ranks[p.1].name())
    }
}

#[cfg(test)]
mod tests;
