//! This side's plan for a test: every per-side decision the spec leaves open, made
//! once from the validated spec and the side (its role, the operation it posts, its
//! queues as created, where messages sit in its buffers). The backend, the engine,
//! perftest's driver and the header read it and never work it out again; the loops
//! get plain values from it, once per size.

use crate::error::Error;
use crate::spec::role::Role;
use crate::spec::{AtomicType, Link, Measure, Queues, TestSpec, Verb};
use crate::transport::{ConnectionConfig, Op, Service, DATA_IMM};

/// Where messages sit in a connection's buffer: the one slot formula, for
/// rdmabench's exchange, perftest's and TCP's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotLayout {
    /// The bytes a size's slots span when its messages are smaller.
    span: u64,
    /// Slots at least (a ping-pong sends from one and receives into the other).
    min: u32,
    /// Bytes a slot takes at least (an atomic's 8).
    min_bytes: u64,
}

impl SlotLayout {
    /// Slots at most, whatever the size.
    pub const MAX_SLOTS: u32 = 64;

    /// A blocking poll (TCP): one slot, the working set in cache, as iperf3's one
    /// buffer (TCP tests have no `--validate` to rotate for).
    pub const ONE: SlotLayout = SlotLayout { span: 0, min: 1, min_bytes: 1 };

    /// rdmabench's RDMA slots: at least two; with `--validate` enough that the check
    /// sees many distinct messages, within 1 MiB; without, a page of them, as
    /// perftest's cycle buffer (a 64 KiB test registers and pins 128 KiB, not 1 MiB).
    pub fn rotating(validate: bool) -> SlotLayout {
        SlotLayout { span: if validate { 1 << 20 } else { 4096 }, min: 2, min_bytes: 8 }
    }

    /// perftest's: its bandwidth posts cycle through the larger page size of the two
    /// sides (`cycle_buffer`), a message at a time when the message is larger.
    pub fn cycle(cycle: u64) -> SlotLayout {
        SlotLayout { span: cycle, min: 1, min_bytes: 8 }
    }

    /// The layout of `spec`'s connections in rdmabench's exchange.
    pub fn of(spec: &TestSpec) -> SlotLayout {
        match spec.link {
            Link::Tcp(_) => SlotLayout::ONE,
            Link::Rdma(_) => SlotLayout::rotating(spec.validate),
        }
    }

    /// What a buffer holds from its start for messages of `size` (perftest's peer
    /// reaches this far).
    pub fn region(&self, size: u64) -> u64 {
        size.max(self.span)
    }

    /// Buffer slots messages of `size` rotate through.
    pub fn slots(&self, size: u64) -> u32 {
        let n = (self.region(size) / size.max(1)).clamp(u64::from(self.min), 64);
        u32::try_from(n).unwrap_or(self.min)
    }

    /// One connection's buffer for `spec`'s sizes: every size's slots. The largest
    /// size's slots do not always cover a smaller size's: 52 slots of 20000 B are
    /// less than 64 of 16 KiB.
    pub fn buffer_len(&self, spec: &TestSpec) -> u64 {
        spec.sizes
            .iter()
            .chain([&spec.max_size()])
            .map(|&s| s.max(self.min_bytes).saturating_mul(u64::from(self.slots(s))))
            .max()
            .unwrap_or(0)
    }
}

impl TestSpec {
    /// The buffer memory a test holds on each side, all connections together, in
    /// rdmabench's exchange: each connection's buffer ([`SlotLayout::buffer_len`]).
    /// [`crate::spec::rules::MAX_BUFFERS`] bounds it.
    pub fn buffer_bytes(&self) -> u64 {
        SlotLayout::of(self).buffer_len(self).saturating_mul(u64::from(self.connections()))
    }
}

/// This side's part in a test, decided once.
#[derive(Clone, Debug, PartialEq)]
pub struct SidePlan {
    /// What this side does in every size (the one [`Role::new`] outside tests).
    pub role: Role,
    /// The operation a sender posts.
    pub op: Op,
    /// The queues and posting modes the loops use.
    pub queues: Queues,
    /// The send queue each connection is created with: `-t`, and for an RDMA latency
    /// test at least 16 (its unsignaled posts need room). The report says this depth.
    pub send_queue: u32,
    /// The receive queue each connection is created with (at least 1).
    pub receive_queue: u32,
    /// Where messages sit in a buffer.
    pub slots: SlotLayout,
    /// One connection's buffer, bytes.
    pub buffer_len: u64,
    /// RC, UC or UD (RDMA); RC stands for TCP's stream.
    pub service: Service,
    /// `--use-srq` on a side that posts receives: the shared queue's depth.
    pub shared_receives: Option<u32>,
}

impl SidePlan {
    /// The plan of the client (`client`) or the server for `spec` (validated).
    pub fn new(spec: &TestSpec, client: bool) -> SidePlan {
        let role = Role::new(spec, client);
        let queues = spec.queues();
        let rdma = spec.rdma();
        let imm = rdma.is_some_and(|r| r.immediate);
        let op = match spec.kind.verb {
            Verb::Write if imm => Op::WriteImm(DATA_IMM),
            Verb::Write => Op::Write,
            Verb::Read => Op::Read,
            Verb::Send if imm => Op::SendImm(DATA_IMM),
            Verb::Send => Op::Send,
            Verb::Atomic => match rdma.map(|r| r.atomic_type).unwrap_or_default() {
                AtomicType::FetchAndAdd => Op::FetchAdd(1),
                AtomicType::CmpAndSwap => Op::CompareSwap { compare: 0, swap: 0 },
            },
        };
        let latency = spec.kind.measure == Measure::Lat;
        let slots = SlotLayout::of(spec);
        SidePlan {
            role,
            op,
            send_queue: if latency && rdma.is_some() {
                queues.tx_depth.max(16)
            } else {
                queues.tx_depth
            },
            receive_queue: queues.rx_depth.max(1),
            slots,
            buffer_len: slots.buffer_len(spec),
            service: rdma.map_or(Service::Rc, |r| r.service),
            shared_receives: (queues.shared_receives && role.posts_receives)
                .then_some(queues.rx_depth),
            queues,
        }
    }

    /// The same plan on perftest's cycle buffer of `cycle` bytes: its slots, and a
    /// buffer of the largest size's region and as much again for the write
    /// ping-pong's outgoing messages.
    pub fn with_cycle(&self, spec: &TestSpec, cycle: u64) -> SidePlan {
        let slots = SlotLayout::cycle(cycle);
        let buffer_len = (slots.region(spec.max_size()).saturating_mul(2)).max(self.buffer_len);
        SidePlan { slots, buffer_len, ..self.clone() }
    }

    /// What each connection is created with.
    pub fn connection(&self) -> ConnectionConfig {
        ConnectionConfig {
            buf_len: usize::try_from(self.buffer_len).unwrap_or(usize::MAX),
            service: self.service,
            tx_depth: self.send_queue,
            rx_depth: self.receive_queue,
            max_inline: self.queues.inline_size,
            events: self.queues.events,
        }
    }

    /// Whether messages of `size` go inline: they fit `-I`, and the operation carries
    /// a payload from this side (not a read or an atomic).
    pub fn inline_for(&self, size: u64) -> bool {
        let carries = !matches!(self.op, Op::Read | Op::FetchAdd(_) | Op::CompareSwap { .. });
        carries && u64::from(self.queues.inline_size) >= size
    }

    /// A size as the loops take it.
    ///
    /// # Errors
    /// Kind `usage` for a size over 4 GiB (validation bounds sizes well below).
    pub fn size32(size: u64) -> Result<u32, Error> {
        u32::try_from(size)
            .map_err(|_| Error::usage(format!("{size} bytes is over the message limit")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::rules::{self, RdmaRequest};
    use crate::spec::TestKind;
    use crate::transport::Backend;

    fn spec(verb: Verb, measure: Measure, r: RdmaRequest) -> TestSpec {
        let r = RdmaRequest { backend: Some(Backend::Verbs), ..r };
        rules::rdma(TestKind { verb, measure }, &r).unwrap()
    }

    #[test]
    fn the_buffer_holds_every_slot_of_every_size() {
        let mut spec = spec(Verb::Write, Measure::Bw, RdmaRequest::default());
        // Found by tests/fuzz_protocol.rs: 33 slots of the largest (31252 B) were sized,
        // 55 slots of 19019 B (1046045 B) written.
        spec.sizes = vec![19019, 16384, 30, 31252];
        spec.validate().unwrap();
        for validate in [true, false] {
            spec.validate = validate;
            let plan = SidePlan::new(&spec, true);
            let buf = plan.connection().buf_len as u64;
            for &s in &spec.sizes {
                let slots = plan.slots.slots(s);
                assert!(s * u64::from(slots) <= buf, "{s} B x {slots} slots > {buf} B");
            }
        }
        // One size: the largest's slots; a page of them unless the test validates.
        let buf = |spec: &TestSpec| SidePlan::new(spec, true).connection().buf_len;
        spec.sizes = vec![4096];
        spec.validate = false;
        assert_eq!(buf(&spec), 4096 * 2);
        spec.validate = true;
        assert_eq!(buf(&spec), 4096 * 64);
        spec.sizes = vec![8 << 20];
        assert_eq!(buf(&spec), 16 << 20);
    }

    #[test]
    fn slots_rotate_through_a_page_or_a_mebibyte_and_perftests_cycle() {
        let (page, mib) = (SlotLayout::rotating(false), SlotLayout::rotating(true));
        assert_eq!((page.slots(2), page.slots(1024), page.slots(65536)), (64, 4, 2));
        assert_eq!((mib.slots(2), mib.slots(1 << 20), mib.slots(8 << 20)), (64, 2, 2));
        assert_eq!(mib.slots(65536), 16);
        let cycle = SlotLayout::cycle(4096);
        assert_eq!((cycle.slots(65536), cycle.slots(2048), cycle.region(2048)), (1, 2, 4096));
        assert_eq!((SlotLayout::ONE.slots(1), SlotLayout::ONE.slots(1 << 20)), (1, 1));
    }

    #[test]
    fn a_latency_queue_pair_is_created_and_reported_at_least_16_deep() {
        let t4 = || RdmaRequest { tx_depth: Some(4), ..RdmaRequest::default() };
        for verb in [Verb::Write, Verb::Read, Verb::Send] {
            let plan = SidePlan::new(&spec(verb, Measure::Lat, t4()), true);
            assert_eq!((plan.send_queue, plan.connection().tx_depth), (16, 16), "{verb:?}");
            assert_eq!(plan.queues.tx_depth, 4, "the loops' own bound stays -t");
        }
        let bw = SidePlan::new(&spec(Verb::Write, Measure::Bw, t4()), true);
        assert_eq!(bw.send_queue, 4);
    }

    #[test]
    fn role_is_the_specs_one_truth() {
        let rev = RdmaRequest { reversed: true, ..RdmaRequest::default() };
        for s in
            [spec(Verb::Write, Measure::Bw, rev), spec(Verb::Send, Measure::Lat, <_>::default())]
        {
            for client in [true, false] {
                assert_eq!(SidePlan::new(&s, client).role, Role::new(&s, client));
            }
            assert_eq!(crate::spec::role::server_leads(&s), Role::new(&s, false).leads);
        }
        let read = SidePlan::new(&spec(Verb::Read, Measure::Bw, RdmaRequest::default()), true);
        assert!(!read.inline_for(0), "a read carries no payload from this side");
    }
}
