//! One set-up path per backend behind one interface: each [`Backend`] opens its
//! adapter from the spec and this side's settings, then establishes its connections
//! with the peer over the control channel. What they share is written here once: the
//! endpoint exchange, a connection's sizes, the parameters the report shows.
//!
//! - [`verbs`]: Linux verbs, endpoints swapped as perftest does (or rdma_cm with `-R`);
//! - [`nd`]: NetworkDirect, the client's connector to the server's listener;
//! - [`tcp`]: TCP streams to a data listener the server announces.

pub mod nd;
pub mod tcp;
#[cfg(target_os = "linux")]
pub mod verbs;

use std::net::IpAddr;

use serde::{de::DeserializeOwned, Serialize};

use crate::error::Error;
use crate::perf::pattern::slots_for;
use crate::results::EffectiveParams;
use crate::session::protocol::{Channel, Message};
use crate::spec::{Local, Measure, TestSpec, Verb};
use crate::transport::{Connection, ConnectionConfig, Transport};

/// What a backend set-up works from.
pub struct SetupContext<'a> {
    /// The test.
    pub spec: &'a TestSpec,
    /// This side's device, port, timeout.
    pub local: &'a Local,
    /// The client's host (None on the server).
    pub host: Option<&'a str>,
    /// Report bandwidth in Gb/s (the header names the unit).
    pub gbits: bool,
    /// Called once the measuring is over, before this side's done: `serve`'s test slot then
    /// lets a waiting client in as soon as the test is gone (None: nobody asks).
    pub ending: Option<&'a (dyn Fn() + Sync)>,
}

impl SetupContext<'_> {
    /// Whether this side is the client.
    pub fn client(&self) -> bool {
        self.host.is_some()
    }
}

/// What a set-up ran on, for the environment of the result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attachment {
    /// A verbs device and port.
    Device {
        /// `rxe0`, `mlx4_0`.
        name: String,
        /// 1-based.
        port: u8,
    },
    /// A NetworkDirect adapter, by one of its addresses.
    Adapter(IpAddr),
    /// The network interface holding this address (TCP).
    Interface(IpAddr),
}

/// A backend's connections, ready to run, and what the report says about them.
pub struct Setup<C> {
    /// One per QP or stream.
    pub conns: Vec<C>,
    /// The parameters in effect.
    pub params: EffectiveParams,
    /// This side's address lines.
    pub local: Vec<String>,
    /// The peer's.
    pub remote: Vec<String>,
    /// This side's endpoints and the peer's, for JSON.
    pub endpoints: [Vec<crate::results::Endpoint>; 2],
    /// What it ran on.
    pub attachment: Attachment,
}

/// An RDMA interface or TCP, as the engine drives it.
pub trait Backend: Sized {
    /// The connections it makes.
    type Conn: Connection + Send;

    /// Opens this side's adapter; a server also opens what the client will connect to
    /// (a listener), before the client is told to go on.
    ///
    /// # Errors
    /// No device, or a failed verb or socket call.
    fn open(ctx: &SetupContext<'_>, ch: &Channel) -> Result<Self, Error>;

    /// Makes the connections with the peer, exchanging endpoints over `ch`.
    ///
    /// # Errors
    /// A failed verb, a peer that does not fit, a control channel that fails.
    fn establish(
        self,
        ctx: &SetupContext<'_>,
        ch: &mut Channel,
    ) -> Result<Setup<Self::Conn>, Error>;
}

/// Swaps the endpoint records over the control channel, the client first as perftest
/// does; returns the peer's records and the MTU it announced. `expect`: how many the
/// peer must send (None: any number).
///
/// # Errors
/// The channel failing, or records that are not what this backend expects.
pub fn exchange_endpoints<E: Serialize + DeserializeOwned>(
    ch: &mut Channel,
    client: bool,
    mtu: u32,
    mine: &[E],
    expect: Option<usize>,
) -> Result<(Vec<E>, u32), Error> {
    let qps = mine
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::io(format!("encoding an endpoint: {e}")))?;
    let mine = Message::Endpoints { mtu, qps };
    let theirs = if client {
        ch.send(&mine)?;
        ch.recv("endpoints")?
    } else {
        let m = ch.recv("endpoints")?;
        ch.send(&mine)?;
        m
    };
    let Message::Endpoints { mtu: peer_mtu, qps } = theirs else {
        return Err(Error::refused(format!(
            "control channel: expected endpoints, got {}",
            theirs.name()
        )));
    };
    if let Some(n) = expect {
        if qps.len() != n {
            return Err(Error::refused(format!("the peer has {} QPs, this side {n}", qps.len())));
        }
    }
    let peers = qps
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()
        .map_err(|e| Error::refused(format!("control channel: malformed endpoint: {e}")))?;
    Ok((peers, peer_mtu))
}

/// Connections prepared on a transport, and the records the peer gets for them.
pub type Prepared<T> = (Vec<<T as Transport>::Prepared>, Vec<<T as Transport>::Endpoint>);

/// Prepares one connection per QP of the spec on `t`: the resources, and the records
/// for the peer.
///
/// # Errors
/// Resource allocation failing (limits, memory lock limit).
pub fn prepare_all<T: Transport>(t: &T, spec: &TestSpec) -> Result<Prepared<T>, Error> {
    let cfg = rdma_connection(spec);
    let qps = spec.connections() as usize;
    let (mut prepared, mut mine) = (Vec::with_capacity(qps), Vec::with_capacity(qps));
    for _ in 0..qps {
        let (p, ep) = t.prepare(&cfg)?;
        prepared.push(p);
        mine.push(ep);
    }
    Ok((prepared, mine))
}

/// One RDMA connection's sizes, whatever the backend: a buffer that holds the
/// `slots_for` messages of each size, and latency tests' send queues deep enough for
/// their unsignaled posts.
pub fn rdma_connection(spec: &TestSpec) -> ConnectionConfig {
    let q = spec.queues();
    let service = spec.rdma().map_or(crate::transport::Service::Rc, |r| r.service);
    // The largest size's slots do not always cover a smaller size's: 52 slots of
    // 20000 B are less than 64 of 16 KiB.
    let buf_len = spec
        .sizes
        .iter()
        .chain([&spec.max_size()])
        .map(|&s| s.max(8).saturating_mul(u64::from(slots_for(s, spec.validate))))
        .max()
        .unwrap_or(0);
    ConnectionConfig {
        buf_len: usize::try_from(buf_len).unwrap_or(usize::MAX),
        service,
        tx_depth: if spec.kind.measure == Measure::Lat { q.tx_depth.max(16) } else { q.tx_depth },
        rx_depth: q.rx_depth.max(1),
        max_inline: q.inline_size,
        events: q.events,
    }
}

/// What an RDMA set-up found, for the report's parameters.
pub struct Found {
    /// Device as the report names it.
    pub device: String,
    /// `InfiniBand`, `Ethernet`, `NetworkDirect`.
    pub link_layer: String,
    /// GID index in use.
    pub gid_index: Option<u8>,
    /// Path MTU in use, bytes (0: none).
    pub mtu: u32,
    /// Inline size the queue pairs accepted.
    pub inline: u32,
    /// Outstanding reads/atomics.
    pub outs: u32,
    /// RC ACK timeout exponent and retry count set on the queue pairs (verbs).
    pub retries: Option<(u8, u8)>,
    /// The path's class (verbs).
    pub path: Option<crate::results::PathParams>,
}

/// The parameters in effect on this side, after every default and what the device
/// granted.
pub fn params(ctx: &SetupContext<'_>, found: Found) -> EffectiveParams {
    let spec = ctx.spec;
    let q = spec.queues();
    let rdma = spec.rdma();
    EffectiveParams {
        device: found.device,
        ib_port: ctx.local.ib_port,
        link_layer: found.link_layer,
        gid_index: found.gid_index,
        mtu: found.mtu,
        connection: rdma.map_or("TCP", |r| r.service.name()).to_string(),
        qps: spec.connections(),
        sizes: spec.sizes.clone(),
        run: spec.run,
        tx_depth: q.tx_depth,
        rx_depth: q.rx_depth,
        cq_mod: q.cq_mod,
        post_list: q.post_list,
        inline_size: found.inline,
        outs: found.outs,
        qp_timeout: found.retries.map(|(timeout, _)| timeout),
        retry_count: found.retries.map(|(_, count)| count),
        path: found.path,
        rate_limit: rdma.and_then(|r| r.rate_limit),
        cpu_affinity: None,
        warm_up: rdma.is_some_and(|r| r.warm_up),
        odp: rdma.is_some_and(|r| r.odp),
        hugepages: rdma.is_some_and(|r| r.hugepages),
        shared_receives: q.shared_receives,
        immediate: rdma.is_some_and(|r| r.immediate),
        reversed: rdma.is_some_and(|r| r.reversed),
        events: q.events,
        bidirectional: spec.bidirectional(),
        rdma_cm: rdma.is_some_and(|r| r.rdma_cm),
        atomic_type: rdma
            .filter(|_| spec.kind.verb == Verb::Atomic)
            .map(|r| format!("{:?}", r.atomic_type)),
        bw_unit: if ctx.gbits { "Gb/s" } else { "MiB/s" }.into(),
        latency_is: if spec.kind.rtt_factor() == 2 {
            "one-way (half round trip)"
        } else {
            "round trip"
        }
        .into(),
        validate: spec.validate,
        tcp: None,
    }
}

/// ` local address: …` / ` remote address: …` lines, one per connection.
pub fn address_lines<E>(side: &str, eps: &[E], line: impl Fn(&E) -> String) -> Vec<String> {
    eps.iter().map(|e| format!(" {side}{}", line(e))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::rules::{self, RdmaRequest};
    use crate::spec::TestKind;

    #[test]
    fn the_buffer_holds_every_slot_of_every_size() {
        let write_bw = TestKind { verb: Verb::Write, measure: Measure::Bw };
        let mut spec = rules::rdma(write_bw, &RdmaRequest::default()).unwrap();
        // Found by tests/fuzz_protocol.rs: 33 slots of the largest (31252 B) were sized,
        // 55 slots of 19019 B (1046045 B) written.
        spec.sizes = vec![19019, 16384, 30, 31252];
        spec.validate().unwrap();
        for validate in [true, false] {
            spec.validate = validate;
            let buf = rdma_connection(&spec).buf_len as u64;
            for &s in &spec.sizes {
                let slots = slots_for(s, validate);
                assert!(s * u64::from(slots) <= buf, "{s} B x {slots} slots > {buf} B");
            }
        }
        // One size: the largest's slots; a page of them unless the test validates.
        spec.sizes = vec![4096];
        assert_eq!(rdma_connection(&spec).buf_len, 4096 * 2);
        spec.validate = true;
        assert_eq!(rdma_connection(&spec).buf_len, 4096 * 64);
        spec.sizes = vec![8 << 20];
        assert_eq!(rdma_connection(&spec).buf_len, 16 << 20);
    }
}
