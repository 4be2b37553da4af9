//! The pattern rounds on one rank (`--pattern`): each of its flows at once, a thread
//! each, the bandwidth test only, then the same "done" and "go" as a round of pairs.
//!
//! A rank receives on a listener of its own per sender (bound before the introduction,
//! its port all-gathered): a one-shot server takes the first client to say hello on its
//! listener and drops the others, so several servers cannot share one.

use std::collections::HashSet;
use std::io::Write;
use std::net::IpAddr;
use std::time::Instant;

use super::pattern::{Flow, PatternRound, PatternSpec};
use super::ranks::LinkResult;
use super::report::MeshReport;
use super::window::FlowSpan;
use super::{Rank, Round};
use crate::engine::{self, Side};
use crate::environment::Environment;
use crate::error::Error;
use crate::measure::MIB;
use crate::session::connect::ControlListener;
use crate::spec::Local;

/// This rank's listener for each sender of a pattern round, and at its own place the
/// latency probe's (none without `--pattern`).
pub struct FlowListeners(Vec<Option<ControlListener>>);

impl FlowListeners {
    /// One listener per other rank and one for the probe on `address` (the system picks
    /// the ports), when `patterns` has any pattern besides pairs.
    ///
    /// # Errors
    /// A listener cannot be bound (kind `io`: out of ports or descriptors).
    pub fn bind(address: IpAddr, n: usize, patterns: &PatternSpec) -> Result<FlowListeners, Error> {
        if !patterns.any() {
            return Ok(FlowListeners(Vec::new()));
        }
        let listeners = (0..n)
            .map(|_| ControlListener::bind(Some(address), 0).map(Some))
            .collect::<Result<_, _>>()?;
        Ok(FlowListeners(listeners))
    }

    /// Each listener's port, the probe's at this rank's own place (empty without
    /// patterns).
    pub fn ports(&self) -> Vec<u16> {
        let port = |l: &ControlListener| l.local_addr().map_or(0, |a| a.port());
        self.0.iter().map(|l| l.as_ref().map_or(0, port)).collect()
    }
}

/// What a rank plays its flows with.
pub(super) struct Flows<'a> {
    pub(super) listeners: &'a FlowListeners,
    /// `ports[to][from]`, all-gathered (checked: one per rank; `ports[to][to]` is the
    /// probe's).
    pub(super) ports: &'a [Vec<u16>],
    /// The pair tests' local settings (this rank's address bound, quiet).
    pub(super) local: &'a Local,
}

impl Round<'_> {
    /// A link in `links` (rank `rank`'s report) that is not its to report this round: not
    /// its own, of another round, between ranks that did not meet, or one it already
    /// reported. Refused, never indexed by (a rank number past the end, above all).
    pub(super) fn stranger<'l>(
        &self,
        rank: usize,
        links: &'l [LinkResult],
    ) -> Option<&'l LinkResult> {
        let partner = self.pairs.iter().find_map(|p| p.partner(rank));
        let mut seen = HashSet::new();
        links.iter().find(|l| {
            let met = match self.pattern {
                // Sorted: an all-to-all's N·(N−1) flows are searched, not scanned.
                Some(p) => p.flows.binary_search(&Flow { from: l.from, to: l.to }).is_ok(),
                None => Some(l.to) == partner,
            };
            let twice = !seen.insert((l.from, l.to));
            l.from != rank || l.round != self.k || !met || twice
        })
    }

    /// A flow in `links` whose span does not hold together, and why (a peer's figures
    /// are checked before rank 0 counts them).
    pub(super) fn bad_span(links: &[LinkResult]) -> Option<String> {
        links.iter().find_map(|l| {
            let why = l.span.as_ref()?.check().err()?;
            Some(format!("its flow {} -> {} has {why}", l.from, l.to))
        })
    }
}

impl Rank<'_> {
    /// The pattern rounds, numbered from `k` among all rounds: each rank plays its
    /// flows, rank 0 collects every rank's and says go, as for a round of pairs.
    pub(super) fn play_patterns(
        &self,
        rounds: &[PatternRound],
        k: usize,
        flows: &Flows<'_>,
        report: &mut Option<MeshReport>,
        progress: &mut dyn FnMut(&MeshReport),
        out: &mut dyn Write,
    ) -> Result<(), Error> {
        for (i, planned) in rounds.iter().enumerate() {
            let round = Round {
                k: k + i,
                label: i + 1,
                of: rounds.len(),
                pairs: &[],
                started: Instant::now(),
                alone: None,
                pattern: Some(planned),
            };
            let (links, env) = self.play_flows(&round, planned, flows);
            match report {
                Some(r) => {
                    let mut all = links;
                    r.add_environment(0, env);
                    all.extend(self.collect(&round, r)?);
                    let line = r.add_pattern_round(planned, all);
                    let took = round.started.elapsed().as_secs_f64();
                    let (i, of) = (round.label, round.of);
                    let _ = writeln!(out, " pattern round {i}/{of}: {line} ({took:.1} s)");
                    progress(r);
                    self.boot.send_go(&[]);
                }
                None => {
                    self.report(&round, links, env)?;
                }
            }
        }
        Ok(())
    }

    /// This rank's flows of a pattern round, all at once: a server thread per flow into
    /// it, a client thread per flow out of it (the bandwidth test). Returns the links it
    /// was the client of, with their figures or errors, and its environment.
    fn play_flows(
        &self,
        round: &Round<'_>,
        planned: &PatternRound,
        flows: &Flows<'_>,
    ) -> (Vec<LinkResult>, Option<Environment>) {
        let me = self.boot.rank();
        let (sends, receives) = planned.flows_of(me);
        if sends.is_empty() && receives.is_empty() {
            self.status.set(format!("{}: idle", round.name()));
            return (Vec::new(), None);
        }
        self.status.set(format!(
            "{}: sending {} flow(s), receiving {}",
            round.name(),
            sends.len(),
            receives.len()
        ));
        // The pairs' own test, for long enough that the round's flows all overlap.
        let spec = &self.mesh.patterns.flow_test(&self.mesh.bw);
        // Beside them, the latency test on the round's first flow, as long.
        let lat = &self.mesh.patterns.flow_test(&self.mesh.lat);
        let probe = planned.probe();
        let local = flows.local;
        std::thread::scope(|s| {
            let probe_server = probe.filter(|p| p.to == me).and_then(|_| {
                let listener = flows.listeners.0.get(me)?.as_ref()?;
                Some(s.spawn(move || {
                    if let Some(e) =
                        engine::serve_on(listener, lat, local, &mut std::io::sink()).error
                    {
                        eprintln!("rdmabench mesh: rank {me}: as server of the latency probe: {e}");
                    }
                }))
            });
            let probe_client = probe.filter(|p| p.from == me).map(|p| {
                let peer = &self.ranks[p.to];
                let port = flows.ports.get(p.to).and_then(|q| q.get(p.to)).copied();
                s.spawn(move || -> Result<Option<f64>, String> {
                    let port = port.ok_or_else(|| format!("no probe port of rank {}", p.to))?;
                    let side = Side::Client { host: peer.address.clone() };
                    let here = Local { port, ..local.clone() };
                    let outcome = engine::run(lat, &side, &here, false, &mut std::io::sink());
                    if let Some(e) = outcome.error {
                        return Err(format!("the latency probe, {}: {e}", lat.id()));
                    }
                    let first = outcome.report.results.first();
                    Ok(first.and_then(|r| r.lat.as_ref()).map(|l| l.t_typical_us))
                })
            });
            let servers: Vec<_> = receives
                .iter()
                .filter_map(|f| {
                    let listener = flows.listeners.0.get(f.from)?.as_ref()?;
                    Some(s.spawn(move || {
                        let outcome = engine::serve_on(listener, spec, local, &mut std::io::sink());
                        if let Some(e) = outcome.error {
                            eprintln!(
                                "rdmabench mesh: rank {me}: as server of {} for rank {}: {e}",
                                spec.id(),
                                f.from
                            );
                        }
                    }))
                })
                .collect();
            let clients: Vec<_> = sends
                .iter()
                .map(|&f| {
                    let peer = &self.ranks[f.to];
                    let port = flows.ports.get(f.to).and_then(|p| p.get(me)).copied();
                    s.spawn(move || {
                        let mut link = LinkResult {
                            from: me,
                            to: f.to,
                            round: round.k,
                            bw_mb_per_sec: None,
                            t_typical_usec: None,
                            error: None,
                            span: None,
                        };
                        let Some(port) = port else {
                            link.error = Some(format!("no listener port of rank {}", f.to));
                            return (link, None);
                        };
                        let side = Side::Client { host: peer.address.clone() };
                        let here = Local { port, ..local.clone() };
                        let outcome = engine::run(spec, &side, &here, false, &mut std::io::sink());
                        // A failed flow's window until the failure is not a flow's figure.
                        let first =
                            outcome.report.results.first().filter(|_| outcome.error.is_none());
                        link.bw_mb_per_sec =
                            first.and_then(|r| r.bw.as_ref()).map(|b| b.avg_bytes_per_sec / MIB);
                        // Its bytes as it ran, from when this rank started the round.
                        link.span = first.and_then(|r| r.progress.as_ref()).map(|p| {
                            let offset = p.started.saturating_duration_since(round.started);
                            FlowSpan::of(p, u64::try_from(offset.as_micros()).unwrap_or(u64::MAX))
                        });
                        link.error = outcome.error.map(|e| format!("{}: {e}", spec.id()));
                        let env = outcome.report.environment.map(|e| e.local);
                        (link, env)
                    })
                })
                .collect();
            for server in servers {
                let _ = server.join();
            }
            let mut environment = None;
            let mut links = Vec::new();
            for client in clients {
                // A client thread that panicked sends nothing: rank 0 marks the flow
                // as unreported.
                if let Ok((link, env)) = client.join() {
                    environment = environment.or(env);
                    links.push(link);
                }
            }
            if let Some(server) = probe_server {
                let _ = server.join();
            }
            // The probe's figure goes with its flow's (this rank sends both).
            let probed =
                probe.and_then(|p| links.iter_mut().find(|l| l.to == p.to && p.from == me));
            match (probe_client.map(|c| c.join()), probed) {
                (Some(Ok(Ok(t))), Some(link)) => link.t_typical_usec = t,
                (Some(Ok(Err(e))), Some(link)) => {
                    link.error = Some(link.error.take().map_or(e.clone(), |b| format!("{b}; {e}")));
                }
                _ => {}
            }
            (links, environment)
        })
    }
}
