//! One set-up path per backend behind one interface: each [`Backend`] opens its
//! adapter from the spec and this side's settings, then establishes its connections
//! with the peer over the control channel, from this side's [`SidePlan`] (built once,
//! in [`SetupContext::new`]). What they share is written here once: the endpoint
//! exchange and the parameters the report shows.
//!
//! - `Verbs`: Linux verbs, endpoints swapped as perftest does (or rdma_cm with `-R`);
//! - [`Nd`]: NetworkDirect, the client's connector to the server's listener;
//! - [`Tcp`]: TCP streams to a data listener the server announces.

mod nd;
mod tcp;
#[cfg(target_os = "linux")]
mod verbs;

pub use nd::Nd;
pub use tcp::Tcp;
#[cfg(target_os = "linux")]
pub use verbs::Verbs;
// perftest's driver opens and finishes a verbs set-up around its own exchange.
#[cfg(target_os = "linux")]
pub(crate) use verbs::{finish as finish_verbs, open as open_verbs};

use std::net::IpAddr;

use serde::{de::DeserializeOwned, Serialize};

use crate::error::Error;
use crate::results::{EffectiveParams, Granted, QueueParams, TestParams};
use crate::session::protocol::{Channel, Message};
use crate::spec::plan::SidePlan;
use crate::spec::{Local, TestSpec, Verb};
use crate::transport::{Connection, Transport};

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
    /// This side's plan: its role, queues and buffers, decided once.
    pub plan: SidePlan,
}

impl<'a> SetupContext<'a> {
    /// The context of `spec` (validated) on the client of `host`, or the server
    /// (`None`): its plan is made here, once.
    pub fn new(
        spec: &'a TestSpec,
        local: &'a Local,
        host: Option<&'a str>,
        gbits: bool,
    ) -> SetupContext<'a> {
        let plan = SidePlan::new(spec, host.is_some());
        SetupContext { spec, local, host, gbits, ending: None, plan }
    }

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

/// Prepares `qps` connections as `plan` says on `t`: the resources, and the records
/// for the peer.
///
/// # Errors
/// Resource allocation failing (limits, memory lock limit).
pub fn prepare_all<T: Transport>(t: &T, plan: &SidePlan, qps: u32) -> Result<Prepared<T>, Error> {
    let cfg = plan.connection();
    let qps = qps as usize;
    let (mut prepared, mut mine) = (Vec::with_capacity(qps), Vec::with_capacity(qps));
    for _ in 0..qps {
        let (p, ep) = t.prepare(&cfg)?;
        prepared.push(p);
        mine.push(ep);
    }
    Ok((prepared, mine))
}

/// The parameters in effect on this side: the test as the spec asks it, the queues as
/// the plan created them, and what the backend's set-up `granted` (its inline size as
/// the queue pairs accepted it, reported at most `-I`).
pub fn params(ctx: &SetupContext<'_>, granted: Granted) -> EffectiveParams {
    let inline_size = granted.inline_size.min(ctx.plan.queues.inline_size);
    EffectiveParams {
        granted: Granted { inline_size, ..granted },
        queues: queues_as_created(&ctx.plan),
        test: test_as_asked(ctx.spec, ctx.gbits),
        cpu_affinity: None,
        tcp: None,
    }
}

/// The plan's queues, as each connection was created with them.
fn queues_as_created(plan: &SidePlan) -> QueueParams {
    let q = plan.queues;
    QueueParams {
        tx_depth: plan.send_queue,
        rx_depth: q.rx_depth,
        cq_mod: q.cq_mod,
        post_list: q.post_list,
        shared_receives: q.shared_receives,
        events: q.events,
    }
}

/// The spec's test, as the report's parameters say it.
fn test_as_asked(spec: &TestSpec, gbits: bool) -> TestParams {
    let rdma = spec.rdma();
    TestParams {
        connection: rdma.map_or("TCP", |r| r.service.name()).to_string(),
        qps: spec.connections(),
        sizes: spec.sizes.clone(),
        run: spec.run,
        rate_limit: rdma.and_then(|r| r.rate_limit),
        warm_up: rdma.is_some_and(|r| r.warm_up),
        odp: rdma.is_some_and(|r| r.odp),
        hugepages: rdma.is_some_and(|r| r.hugepages),
        immediate: rdma.is_some_and(|r| r.immediate),
        reversed: rdma.is_some_and(|r| r.reversed),
        bidirectional: spec.bidirectional(),
        rdma_cm: rdma.is_some_and(|r| r.rdma_cm),
        atomic_type: rdma
            .filter(|_| spec.kind.verb == Verb::Atomic)
            .map(|r| r.atomic_type.label().to_string()),
        bw_unit: if gbits { "Gb/s" } else { "MiB/s" }.into(),
        latency_is: if spec.kind.rtt_factor() == 2 {
            "one-way (half round trip)"
        } else {
            "round trip"
        }
        .into(),
        validate: spec.validate,
    }
}

/// ` local address: …` / ` remote address: …` lines, one per connection.
pub fn address_lines<E>(side: &str, eps: &[E], line: impl Fn(&E) -> String) -> Vec<String> {
    eps.iter().map(|e| format!(" {side}{}", line(e))).collect()
}
