//! What this side does in a test, worked out once from the spec and the side: the
//! per-size step reads these answers and never asks "which verb, which side" again.

use crate::spec::{Measure, TestSpec, Verb};

/// This side's part in every size of a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Role {
    /// The client (it connects, and initiates latency loops).
    pub client: bool,
    /// It measures, sends its result first and composes the one both print: the
    /// client, or under `--reversed` the server.
    pub leads: bool,
    /// Bandwidth: posts the measured operation (the leading side; both with `-b`).
    pub sends: bool,
    /// Bandwidth: posts receives and counts what arrives (send tests and writes with
    /// immediate data: the other side; both with `-b`).
    pub receives: bool,
    /// Latency: drives the ping-pong or the round trips and records the samples.
    pub initiates: bool,
    /// Latency: answers the initiator's messages (write and send ping-pongs).
    pub responds: bool,
    /// Posts receives at all: a send test's receiver, or either side of its ping-pong
    /// (where `--use-srq` puts a shared receive queue).
    pub posts_receives: bool,
    /// `--validate`: fills its buffer with the pattern before the size runs.
    pub pattern_source: bool,
    /// `--validate`: checks the pattern in its buffer after the size ran.
    pub pattern_target: bool,
    /// The other side has nothing to do but wait on the control channel while this one
    /// works alone (one-sided tests): this one tells it every second it is alive.
    pub heartbeat: bool,
}

/// Whether the server leads `spec` (measures, and sends its result first): a
/// bandwidth test under `--reversed`.
pub fn server_leads(spec: &TestSpec) -> bool {
    spec.kind.measure == Measure::Bw && spec.rdma().is_some_and(|r| r.reversed)
}

impl Role {
    /// The role of the client (`client`) or the server in `spec`. Outside tests only
    /// [`crate::spec::plan::SidePlan::new`] asks: everything else reads the plan.
    pub fn new(spec: &TestSpec, client: bool) -> Role {
        let both = spec.bidirectional();
        let verb = spec.kind.verb;
        let bw = spec.kind.measure == Measure::Bw;
        let one_sided = matches!(verb, Verb::Read | Verb::Atomic);
        // --reversed turns a bandwidth test around: the server leads.
        let leads = client != server_leads(spec);
        // Read moves data from the target's buffer to the initiator's: the pattern
        // starts on the side that does not lead and is checked on the one that does.
        let (source, target) = match verb {
            Verb::Read => (!leads || both, leads || both),
            _ => (leads || both, !leads || both),
        };
        let peer_idles = if bw { !spec.receives() && !both } else { one_sided };
        Role {
            client,
            leads,
            sends: bw && (leads || both),
            receives: bw && spec.receives() && (!leads || both),
            initiates: !bw && client,
            responds: !bw && !client && !one_sided,
            posts_receives: spec.receives() && (!bw || !leads || both),
            pattern_source: spec.validate && verb != Verb::Atomic && source,
            pattern_target: spec.validate && target,
            heartbeat: leads && peer_idles,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::rules::{self, RdmaRequest};
    use crate::spec::TestKind;

    fn role(verb: Verb, measure: Measure, r: RdmaRequest, client: bool) -> Role {
        // Verbs, whose tests include atomics, also where NetworkDirect is the default.
        let r = RdmaRequest { backend: Some(crate::transport::Backend::Verbs), ..r };
        Role::new(&rules::rdma(TestKind { verb, measure }, &r).unwrap(), client)
    }

    #[test]
    fn each_side_of_each_test_has_one_part() {
        let d = RdmaRequest::default;
        let c = role(Verb::Write, Measure::Bw, d(), true);
        assert!(c.sends && !c.receives && c.heartbeat);
        let s = role(Verb::Write, Measure::Bw, d(), false);
        assert!(!s.sends && !s.receives && !s.heartbeat);
        let s = role(Verb::Send, Measure::Bw, d(), false);
        assert!(s.receives && !s.sends);
        assert!(s.posts_receives && !role(Verb::Send, Measure::Bw, d(), true).posts_receives);
        assert!(role(Verb::Send, Measure::Lat, d(), true).posts_receives);
        assert!(role(Verb::Send, Measure::Lat, d(), false).posts_receives);
        assert!(!role(Verb::Write, Measure::Lat, d(), false).posts_receives);
        // --reversed: the server sends, measures and leads; the client waits.
        let rev = || RdmaRequest { reversed: true, ..d() };
        let s = role(Verb::Write, Measure::Bw, rev(), false);
        assert!(s.leads && s.sends && s.heartbeat && !s.client);
        let c = role(Verb::Write, Measure::Bw, rev(), true);
        assert!(!c.leads && !c.sends && !c.heartbeat);
        let c = role(Verb::Send, Measure::Bw, rev(), true);
        assert!(c.receives && c.posts_receives && !c.sends);
        let v = RdmaRequest { reversed: true, validate: true, ..d() };
        let c = role(Verb::Read, Measure::Bw, v.clone(), true);
        assert!(c.pattern_source && !c.pattern_target, "the server reads the client's buffer");
        assert!(role(Verb::Write, Measure::Bw, v, true).pattern_target);
        assert!(!role(Verb::Send, Measure::Bw, d(), true).heartbeat, "the receiver is busy too");
        let both = || RdmaRequest { bidirectional: true, ..d() };
        let s = role(Verb::Send, Measure::Bw, both(), false);
        assert!(s.sends && s.receives);
        let s = role(Verb::Read, Measure::Lat, d(), false);
        assert!(!s.initiates && !s.responds, "a read target only waits");
        assert!(role(Verb::Read, Measure::Lat, d(), true).heartbeat);
        let s = role(Verb::Send, Measure::Lat, d(), false);
        assert!(s.responds && !s.initiates);
    }

    #[test]
    fn the_pattern_flows_with_the_data() {
        let v = || RdmaRequest { validate: true, ..Default::default() };
        let c = role(Verb::Read, Measure::Bw, v(), true);
        assert!(c.pattern_target && !c.pattern_source, "a read lands on the client");
        let s = role(Verb::Write, Measure::Bw, v(), false);
        assert!(s.pattern_target && !s.pattern_source);
        let c = role(Verb::Atomic, Measure::Bw, v(), true);
        assert!(!c.pattern_source, "atomics check a sum, not a pattern");
        let s = role(Verb::Atomic, Measure::Bw, v(), false);
        assert!(s.pattern_target);
        let c = role(Verb::Write, Measure::Bw, RdmaRequest::default(), true);
        assert!(!c.pattern_source && !c.pattern_target, "only with --validate");
    }
}
