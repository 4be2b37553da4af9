//! One test against a perftest peer, in the order perftest's mains exchange their
//! records (docs/protocol.md, "Talking to perftest"): the device opens, the page
//! sizes and MTU are agreed, the queue pair records go back and forth (first to
//! connect, then as barriers), the loops run, and the end is perftest's: the
//! bandwidth report for write and read, `"done"`, or (write_lat) nothing at all.

use std::io::Write;
use std::time::Instant;

use ffi::types::{Gid, QpEndpoint, RemoteBuffer};
use ffi::verbs::Mtu;

use super::records::{report_of, result_of, BwReport, Key};
use super::wire::Wire;
use crate::backend::{self, SetupContext};
use crate::counters::{PortCounters, Snapshot};
use crate::engine::{
    apply_affinity, bw_result, cpu_cost, port_counters, print_header, IntervalPrinter, Step,
};
use crate::error::Error;
use crate::measure::cpu::CpuSnapshot;
use crate::measure::BwStats;
use crate::perf::loops::{
    self, Clock, CountedSampler, NoPulse, NoRecv, PingPong, RecvPlan, Sampler,
};
use crate::results::{RunReport, SizeResult};
use crate::spec::plan::{SidePlan, SlotLayout};
use crate::spec::{Measure, TestSpec, Verb};
use crate::transport::verbs::{VerbsConnection, VerbsEndpoint, VerbsTransport};
use crate::transport::{Connection, Op, Service};

/// The test, once the versions are in: `version` is the peer's.
pub(super) fn run(
    ctx: &SetupContext<'_>,
    mut wire: Wire,
    version: &str,
    report: &mut RunReport,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let spec = ctx.spec;
    let t = backend::open_verbs(ctx, ctx.local.device.clone(), wire.local_ipv4())?;
    let agreed = wire.agree(t.mtu().code() as u8, version)?;
    let mtu = Mtu::from_code(u32::from(agreed.mtu_code)).unwrap_or(t.mtu());
    // perftest's cycle buffer: its slots, and a buffer its peer's loops reach into.
    let plan = ctx.plan.with_cycle(spec, u64::from(agreed.cycle_buffer));
    let (mut prepared, mine_eps) = backend::prepare_all(&t, &plan, spec.connections())?;
    let reads = if spec.kind.verb == Verb::Read { u16::from(t.max_rd_atomic()) } else { 1 };
    let gid_form = t.gid_index().is_some();
    let mine: Vec<Key> = mine_eps.iter().map(|e| key_of(e, reads, gid_form)).collect();

    let peers = handshake(spec, &mut wire, &mine, |peers| {
        check_gids(&mine[0], &peers[0])?;
        let eps: Vec<VerbsEndpoint> =
            peers.iter().map(|k| endpoint_of(k, &plan.slots, spec)).collect();
        let mut conns = prepared
            .drain(..)
            .zip(eps.iter().zip(peers))
            .map(|(p, (ep, k))| t.connect_with_peer_reads(p, ep, mtu, k.out_reads))
            .collect::<Result<Vec<_>, _>>()?;
        // Zeroed here, before the records that follow: perftest's write_lat server
        // writes its first message as soon as it has the last one, and a buffer zeroed
        // after that erased it (both sides then waited: a stall under load).
        for c in &mut conns {
            c.local_mut().fill(0);
        }
        Ok((conns, eps))
    })?;
    let (conns, peer_eps) = peers;
    let mut setup = backend::finish_verbs(ctx, &t, conns, &mine_eps, &peer_eps, mtu.bytes());
    let conns = std::mem::take(&mut setup.conns);
    let counters = port_counters(ctx, &setup.attachment)?;
    setup.params.cpu_affinity = Some(apply_affinity(ctx.local, &setup.attachment)?);
    setup.remote.push(format!(
        " remote: perftest {} (its exchange; -p {})",
        agreed.version, ctx.local.port
    ));
    report.params = Some(setup.params.clone());
    [report.local, report.remote] = setup.endpoints.clone();
    report.peer_address = Some(wire.peer().to_string());
    print_header(ctx, report, &setup, out)?;
    let mut step = Step::new(spec, ctx.local, &plan);
    step.counters = counters;
    for c in &conns {
        step.check(c.capabilities())?;
    }
    let test = Test { ctx, step, wire, mine, conns, t: &t, report, out };
    match (spec.kind.verb, spec.kind.measure) {
        (Verb::Write | Verb::Read | Verb::Send, Measure::Bw) if spec.bidirectional() => {
            test.duplex_bw()
        }
        (Verb::Write | Verb::Read, Measure::Bw) => test.one_sided_bw(),
        (Verb::Send, Measure::Bw) => test.send_bw(),
        (Verb::Write, Measure::Lat) => test.write_lat(),
        (Verb::Read, Measure::Lat) => test.read_lat(),
        (Verb::Send, Measure::Lat) => test.send_lat(),
        (Verb::Atomic, _) => {
            Err(Error::usage("--perftest: atomics are not run against perftest yet"))
        }
    }
}

/// The records exchanged until the queue pairs are connected and both sides are
/// ready, in each perftest main's order; `connect` runs where perftest connects.
/// Returns what `connect` made. Every record after the first of a queue pair must be
/// the same (perftest rereads the peer's from each).
fn handshake<T>(
    spec: &TestSpec,
    wire: &mut Wire,
    mine: &[Key],
    connect: impl FnOnce(&[Key]) -> Result<T, Error>,
) -> Result<T, Error> {
    let each = |wire: &mut Wire, peers: Option<&[Key]>| -> Result<Vec<Key>, Error> {
        let mut got = Vec::with_capacity(mine.len());
        for (i, k) in mine.iter().enumerate() {
            let theirs = wire.keys(k, "the peer's queue pair record")?;
            same(peers.map(|p| &p[i]), &theirs)?;
            got.push(theirs);
        }
        Ok(got)
    };
    let one = |wire: &mut Wire, peers: &[Key]| -> Result<(), Error> {
        let theirs = wire.keys(&mine[0], "a barrier")?;
        same(Some(&peers[0]), &theirs)
    };
    let made;
    match (spec.kind.verb, spec.kind.measure) {
        (Verb::Send, _) => {
            let peers = each(wire, None)?;
            made = connect(&peers)?;
            one(wire, &peers)?;
            each(wire, Some(&peers))?;
        }
        (_, Measure::Lat) => {
            // write_lat and read_lat send one record more first.
            let first = each(wire, None)?;
            let peers = each(wire, Some(&first))?;
            made = connect(&peers)?;
            each(wire, Some(&peers))?;
            one(wire, &peers)?;
        }
        (_, Measure::Bw) => {
            let peers = each(wire, None)?;
            made = connect(&peers)?;
            each(wire, Some(&peers))?;
            one(wire, &peers)?;
        }
    }
    Ok(made)
}

fn same(expected: Option<&Key>, got: &Key) -> Result<(), Error> {
    match expected {
        Some(k) if k != got => Err(Error::refused(format!(
            "the perftest peer's queue pair record changed between handshakes ({k:?}, then {got:?})"
        ))),
        _ => Ok(()),
    }
}

/// perftest stops when one GID is IPv4-mapped and the other is not; so does this side,
/// naming the fix.
fn check_gids(mine: &Key, theirs: &Key) -> Result<(), Error> {
    let mapped = |g: &[u8; 16]| g[..10].iter().all(|&b| b == 0) && g[10..12] == [0xff, 0xff];
    match (&mine.gid, &theirs.gid) {
        (Some(a), Some(b)) if mapped(a) != mapped(b) => Err(Error::refused(format!(
            "this side's GID {} and the perftest peer's {} are of different kinds (IPv4-mapped or not): give -x of the same kind on both sides",
            Gid(*a).to_ipv6(),
            Gid(*b).to_ipv6()
        ))),
        _ => Ok(()),
    }
}

fn key_of(e: &VerbsEndpoint, out_reads: u16, gid_form: bool) -> Key {
    Key {
        lid: e.qp.lid,
        out_reads,
        qpn: e.qp.qpn,
        psn: e.qp.psn & 0xff_ffff,
        rkey: e.buffer.rkey,
        vaddr: e.buffer.addr,
        gid: gid_form.then_some(e.qp.gid.0),
        srqn: 0,
    }
}

fn endpoint_of(k: &Key, layout: &SlotLayout, spec: &TestSpec) -> VerbsEndpoint {
    VerbsEndpoint {
        qp: QpEndpoint { lid: k.lid, gid: Gid(k.gid.unwrap_or_default()), qpn: k.qpn, psn: k.psn },
        buffer: RemoteBuffer { addr: k.vaddr, len: layout.region(spec.max_size()), rkey: k.rkey },
        service: spec.rdma().map_or(Service::Rc, |r| r.service),
    }
}

/// Where a size's window opened.
struct Window {
    cpu: CpuSnapshot,
    counters: Option<Snapshot>,
}

/// A connected test, running.
struct Test<'a, 'o> {
    ctx: &'a SetupContext<'a>,
    step: Step<'a>,
    wire: Wire,
    mine: Vec<Key>,
    conns: Vec<VerbsConnection>,
    t: &'a VerbsTransport,
    report: &'a mut RunReport,
    out: &'o mut dyn Write,
}

/// `--interval`'s lines for a bandwidth loop at `size`, as rdmabench's own exchange
/// prints them (nothing without `--interval`).
fn printing(local: &crate::spec::Local, size: u64) -> IntervalPrinter<'_, NoPulse> {
    IntervalPrinter::new(NoPulse, local.interval_lines.as_ref(), size, None)
}

impl Test<'_, '_> {
    /// A record each way as a barrier.
    fn barrier(&mut self, what: &str) -> Result<(), Error> {
        self.wire.keys(&self.mine[0], what).map(drop)
    }

    /// perftest's close: a barrier, then `"done"`.
    fn close(mut self) -> Result<(), Error> {
        self.barrier("the closing barrier")?;
        self.wire.close();
        Ok(())
    }

    /// A wait while the peer runs alone and says nothing: alive while this port's
    /// packet counters move.
    fn alive(&self) -> impl FnMut() -> bool {
        let packets = PortCounters::packets(self.t.context().name(), self.ctx.local.ib_port);
        let sum = move || packets.as_ref().and_then(|p| p.snapshot().sum());
        let mut last = sum();
        move || {
            let now = sum();
            let moved = now.is_some() && now != last;
            last = now;
            moved
        }
    }

    /// write_bw and read_bw: the client runs every size alone; the server waits in a
    /// barrier, then prints the client's report of the last size.
    fn one_sided_bw(mut self) -> Result<(), Error> {
        let spec = self.ctx.spec;
        if !self.ctx.client() {
            let whole_run = self.window();
            let mut alive = self.alive();
            self.wire.keys_after_run(&self.mine[0], "the client's end of run", &mut alive)?;
            let size = spec.max_size();
            let fields = self.wire.reports(&BwReport::default())?;
            let theirs = BwReport::from_fields(&fields, size)?;
            self.push(result_of(&theirs, spec, self.ctx.gbits), &whole_run);
            return self.close();
        }
        let mut last = BwReport::default();
        for &size in &spec.sizes {
            let before = self.window();
            let (size32, slots) = (SidePlan::size32(size)?, self.step.plan.slots.slots(size));
            if spec.rdma().is_some_and(|r| r.warm_up) {
                self.step.warm_up(&mut self.conns, size32, slots)?;
            }
            let plan = self.step.bw_plan(size32, slots, false);
            let outcome = loops::bw_send(
                &mut self.conns,
                &plan,
                Clock::start(),
                &mut NoRecv,
                printing(self.step.local, size),
            )?;
            let (total, per_qp, iterations) = bw_result(size, &outcome, &spec.run);
            let mut r = SizeResult { size, iterations, bw: Some(total), ..Default::default() };
            if per_qp.len() > 1 {
                r.per_qp = per_qp;
            }
            r.cpu.client = Some(cpu_cost(&before.cpu, &r, self.step.mhz));
            last = report_of(size, &total, self.ctx.gbits);
            self.push(r, &before);
        }
        self.barrier("the end-of-run barrier")?;
        // The server's report is not its own measurement (perftest sends whatever its
        // buffer held): read, not used.
        self.wire.reports(&last)?;
        self.close()
    }

    /// The bandwidth tests with `-b`: per size both sides meet at a barrier, both run
    /// (in a sweep, another barrier ends the size), and they swap reports; each side
    /// prints both directions and their sum, perftest's one full row.
    fn duplex_bw(mut self) -> Result<(), Error> {
        let spec = self.ctx.spec;
        let client = self.ctx.client();
        let sweep = spec.sizes.len() > 1;
        // send_bw -b: each side's receives go up before the start barrier, both send
        // and receive, and a sweep's end-of-size barrier comes after the reports.
        let sends = spec.kind.verb == Verb::Send;
        for &size in &spec.sizes {
            let (size32, slots) = (SidePlan::size32(size)?, self.step.plan.slots.slots(size));
            let plan = self.step.bw_plan(size32, slots, false);
            let posted =
                self.step.plan.queues.receives_per_connection(self.conns.len(), plan.iters);
            if sends {
                loops::post_receives(&mut self.conns, size32, posted, slots)?;
            }
            if spec.rdma().is_some_and(|r| r.warm_up) {
                self.step.warm_up(&mut self.conns, size32, slots)?;
            }
            self.barrier("the start barrier")?;
            let before = self.window();
            let outcome = if sends {
                let n = self.conns.len();
                let mut recv = loops::Reposting::new(n, plan.iters, posted, size32, slots);
                loops::bw_send(
                    &mut self.conns,
                    &plan,
                    Clock::start(),
                    &mut recv,
                    printing(self.step.local, size),
                )?
            } else {
                loops::bw_send(
                    &mut self.conns,
                    &plan,
                    Clock::start(),
                    &mut NoRecv,
                    printing(self.step.local, size),
                )?
            };
            let (mine, per_qp, iterations) = bw_result(size, &outcome, &spec.run);
            if sweep && !sends {
                self.barrier("the end-of-size barrier")?;
            }
            let fields = self.wire.reports(&report_of(size, &mine, self.ctx.gbits))?;
            let theirs = result_of(&BwReport::from_fields(&fields, size)?, spec, self.ctx.gbits);
            let theirs = theirs.bw.unwrap_or_default();
            let mut r = SizeResult { size, iterations, ..Default::default() };
            // perftest's sum: the two averages added (each over its own window).
            r.bw = Some(BwStats {
                avg_bytes_per_sec: mine.avg_bytes_per_sec + theirs.avg_bytes_per_sec,
                msg_rate: mine.msg_rate + theirs.msg_rate,
                peak_bytes_per_sec: None,
                ..crate::measure::aggregate(&[(mine, 0), (theirs, 0)])
            });
            // Client to server first, as rdmabench's own -b shows them.
            r.directions = Some(if client { [mine, theirs] } else { [theirs, mine] });
            if per_qp.len() > 1 {
                r.per_qp = per_qp;
            }
            *r.cpu.side_mut(client) = Some(cpu_cost(&before.cpu, &r, self.step.mhz));
            self.push(r, &before);
            if sweep && sends {
                self.barrier("the end-of-size barrier")?;
            }
        }
        self.close()
    }

    /// send_bw: per size the receiver posts its receives, a barrier starts the run
    /// (and, in a sweep, another ends it); each side prints its own figures.
    fn send_bw(mut self) -> Result<(), Error> {
        let spec = self.ctx.spec;
        let sweep = spec.sizes.len() > 1;
        for &size in &spec.sizes {
            let size32 = SidePlan::size32(size)?;
            let slots = self.step.plan.slots.slots(size);
            let plan = self.step.bw_plan(size32, slots, false);
            let posted =
                self.step.plan.queues.receives_per_connection(self.conns.len(), plan.iters);
            if !self.ctx.client() {
                loops::post_receives(&mut self.conns, size32, posted, slots)?;
            }
            self.barrier("the start barrier")?;
            let before = self.window();
            let mut r = SizeResult { size, ..Default::default() };
            if self.ctx.client() {
                let outcome = loops::bw_send(
                    &mut self.conns,
                    &plan,
                    Clock::start(),
                    &mut NoRecv,
                    printing(self.step.local, size),
                )?;
                let (total, per_qp, iterations) = bw_result(size, &outcome, &spec.run);
                (r.bw, r.iterations) = (Some(total), iterations);
                if per_qp.len() > 1 {
                    r.per_qp = per_qp;
                }
                r.cpu.client = Some(cpu_cost(&before.cpu, &r, self.step.mhz));
            } else {
                let recv = RecvPlan {
                    size: size32,
                    iters: plan.iters,
                    posted,
                    slots,
                    timeout: self.ctx.local.timeout,
                    events: plan.events,
                };
                let start = Instant::now();
                let counts = loops::bw_recv(&mut self.conns, &recv, || false)?;
                let window = start.elapsed();
                let messages: u64 = counts.iter().sum();
                r.iterations = counts.first().copied().unwrap_or(0);
                r.received_bytes = Some(messages * size);
                r.bw = Some(received_stats(size, messages, window));
                r.cpu.server = Some(cpu_cost(&before.cpu, &r, self.step.mhz));
            }
            self.push(r, &before);
            if sweep {
                self.barrier("the end-of-size barrier")?;
            }
        }
        self.close()
    }

    /// write_lat: the server writes first (perftest's order), both sides measure, and
    /// nothing is exchanged after the start: perftest's write_lat just exits.
    fn write_lat(mut self) -> Result<(), Error> {
        let spec = self.ctx.spec;
        let part = PingPong {
            writes_first: !self.ctx.client(),
            measures: true,
            source: usize::try_from(self.step.plan.slots.region(spec.max_size()))
                .unwrap_or(usize::MAX),
        };
        for &size in &spec.sizes {
            let plan = self.step.lat_plan(SidePlan::size32(size)?);
            let before = self.window();
            let conn = &mut self.conns[0];
            let samples = CountedSampler::new(&plan);
            let rec = if part.writes_first {
                loops::lat_write_pingpong(conn, part, &plan, AfterTheFirst(samples), || false)
            } else {
                loops::lat_write_pingpong(conn, part, &plan, samples, || false)
            }?;
            self.push_latency(size, rec, &before);
        }
        Ok(())
    }

    /// read_lat: the client reads alone; the server waits in the closing barrier.
    fn read_lat(mut self) -> Result<(), Error> {
        if !self.ctx.client() {
            let mut alive = self.alive();
            self.wire.keys_after_run(&self.mine[0], "the client's end of run", &mut alive)?;
            self.say_the_client_measures()?;
            self.wire.close();
            return Ok(());
        }
        for &size in &self.ctx.spec.sizes {
            let plan = self.step.lat_plan(SidePlan::size32(size)?);
            let before = self.window();
            let rec = loops::lat_round_trip(
                &mut self.conns[0],
                Op::Read,
                &plan,
                CountedSampler::new(&plan),
                NoPulse,
            )?;
            self.push_latency(size, rec, &before);
        }
        self.close()
    }

    /// send_lat: per size both sides post their receives and meet at a barrier; the
    /// client sends first and measures.
    fn send_lat(mut self) -> Result<(), Error> {
        let client = self.ctx.client();
        for &size in &self.ctx.spec.sizes {
            let size32 = SidePlan::size32(size)?;
            let mut plan = self.step.lat_plan(size32);
            // Exactly the run's receives in all: none is left over for the next size.
            plan.recv_posted = plan.recv_posted.min(plan.iters);
            loops::post_receives(&mut self.conns[..1], size32, plan.recv_posted, 1)?;
            self.barrier("the start barrier")?;
            let before = self.window();
            let rec = loops::lat_send_pingpong(
                &mut self.conns[0],
                client,
                self.step.plan.op,
                &plan,
                CountedSampler::new(&plan),
                || false,
            )?;
            if client {
                self.push_latency(size, rec, &before);
            }
        }
        if !client {
            self.say_the_client_measures()?;
        }
        self.close()
    }

    fn push_latency(
        &mut self,
        size: u64,
        mut rec: crate::measure::LatencyRecorder,
        before: &Window,
    ) {
        let mut r = SizeResult {
            size,
            iterations: rec.count(),
            lat: Some(rec.stats()),
            samples_ns: rec.take_samples(),
            ..Default::default()
        };
        let cost = Some(cpu_cost(&before.cpu, &r, self.step.mhz));
        if self.ctx.client() {
            r.cpu.client = cost;
        } else {
            r.cpu.server = cost;
        }
        self.push(r, before);
    }

    /// The start of a size's window: the CPU's, and the port's counters with `-W`.
    fn window(&self) -> Window {
        let counters = self.step.counters.as_ref().map(PortCounters::snapshot);
        Window { cpu: CpuSnapshot::now(), counters }
    }

    /// A size's result into the report, with what the port's counters did over `w`.
    fn push(&mut self, mut r: SizeResult, w: &Window) {
        r.counters = (self.step.counters.as_ref().zip(w.counters.as_ref()))
            .map(|(c, before)| c.changes(before, &c.snapshot()));
        self.report.results.push(r);
    }

    fn say_the_client_measures(&mut self) -> Result<(), Error> {
        writeln!(self.out, " The perftest client measures this test: its figures are on its side.")
            .map_err(|e| Error::io(format!("writing output: {e}")))
    }
}

/// The samples of the side that writes first, from its second round trip on: it starts
/// right after the last barrier; perftest's side then still prepares its
/// work requests and prints its header before it answers, so the first round trip
/// measures perftest's set-up, not the link. Both sides then report `-n` − 1 round
/// trips.
struct AfterTheFirst<S>(S);

impl<S: Sampler> Sampler for AfterTheFirst<S> {
    #[inline]
    fn tick(&mut self, i: u64) -> bool {
        // The first tick, before the first post, is left out: the sample it would open
        // is the set-up's.
        i == 0 || self.0.tick(i)
    }

    fn finish(self) -> crate::measure::LatencyRecorder {
        self.0.finish()
    }
}

/// What a receiver counted, over its window (from the start barrier to the last
/// message: perftest's starts at the first message, a barrier's round trip later).
fn received_stats(size: u64, messages: u64, window: std::time::Duration) -> BwStats {
    let secs = window.as_secs_f64().max(1e-9);
    BwStats {
        messages,
        bytes: messages * size,
        window_ns: window.as_nanos() as u64,
        avg_bytes_per_sec: (messages * size) as f64 / secs,
        peak_bytes_per_sec: None,
        min_bytes_per_sec: None,
        interval_ns: None,
        msg_rate: messages as f64 / secs,
    }
}

#[cfg(test)]
mod tests;
