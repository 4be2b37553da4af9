//! What to run, decided once: a [`TestSpec`] (the test, its sizes and length, and the
//! link it runs over: RDMA or TCP), and what each side decides for itself ([`Local`],
//! [`Output`]).
//!
//! The CLI ([`rules`] turns perftest's flags into a spec), `serve` (from the client's
//! hello), `compare` and the library API all build specs; the engine runs them after
//! one [`TestSpec::validate`]. The spec travels whole in the hello, so a served test
//! runs with exactly the client's parameters on both sides.

pub mod key;
mod local;
mod options;
pub mod plan;
pub mod role;
pub mod rules;
#[cfg(test)]
mod tests;
pub mod validate;

use serde::{Deserialize, Serialize};

/// The run's length and pacing: the result model's words, chosen here.
pub use crate::results::{RateLimit, RateUnits, RunLength};
pub use local::{names_rails, Figure, IntervalLines, Local, Output, SampleOrder, TestOptions};
pub use options::{INTERVAL_RANGE, MAX_LISTED_SAMPLES};
pub use rules::{parse_cpu_list, parse_size};

use crate::transport::{Backend, Service};

/// Default TCP port of the control channel (perftest uses 18515; ours differs so both
/// can run side by side, as the benchmark scripts do).
pub const DEFAULT_PORT: u16 = 18520;

/// The longest a test of iterations may run by default, seconds: a client's own limit
/// (`--max-time`) and `serve`'s on each client's test.
pub const DEFAULT_MAX_TIME: u64 = 3600;

/// Largest message of an `-a` sweep (2^23), as perftest.
pub const MAX_SWEEP_SIZE: u64 = 1 << 23;

/// The operation a test measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// RDMA write.
    Write,
    /// RDMA read.
    Read,
    /// Send/receive (over TCP: writes to a socket).
    Send,
    /// Atomics (fetch-and-add or compare-and-swap).
    Atomic,
}

/// Bandwidth or latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Bandwidth and message rate.
    Bw,
    /// Latency.
    Lat,
}

/// One of the eight perftest tests (the TCP tests are `send` over a TCP link).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct TestKind {
    /// Operation.
    pub verb: Verb,
    /// What is measured.
    pub measure: Measure,
}

impl TestKind {
    /// Identifier as perftest's binary without `ib_`: `write_bw`, `read_lat`, …
    pub fn id(&self) -> &'static str {
        match (self.verb, self.measure) {
            (Verb::Write, Measure::Bw) => "write_bw",
            (Verb::Read, Measure::Bw) => "read_bw",
            (Verb::Send, Measure::Bw) => "send_bw",
            (Verb::Atomic, Measure::Bw) => "atomic_bw",
            (Verb::Write, Measure::Lat) => "write_lat",
            (Verb::Read, Measure::Lat) => "read_lat",
            (Verb::Send, Measure::Lat) => "send_lat",
            (Verb::Atomic, Measure::Lat) => "atomic_lat",
        }
    }

    /// Latency samples are half a round trip for write and send (ping-pong), a full
    /// one for read and atomics.
    pub fn rtt_factor(&self) -> u32 {
        match self.verb {
            Verb::Write | Verb::Send => 2,
            Verb::Read | Verb::Atomic => 1,
        }
    }

    /// Whether the receiving side posts receives (send/recv, TCP streams).
    pub fn receives(&self) -> bool {
        self.verb == Verb::Send
    }
}

/// perftest's `-A`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AtomicType {
    /// Fetch-and-add (default).
    #[default]
    FetchAndAdd,
    /// Compare-and-swap.
    CmpAndSwap,
}

impl AtomicType {
    /// The report's word (params `atomic_type`, the header's `Atomic type`).
    pub fn label(self) -> &'static str {
        match self {
            AtomicType::FetchAndAdd => "FetchAndAdd",
            AtomicType::CmpAndSwap => "CmpAndSwap",
        }
    }
}

/// Milliseconds as seconds for a line: `2`, `2.5`, `0.75`.
pub fn secs_text(ms: u64) -> String {
    if ms % 1000 == 0 {
        format!("{}", ms / 1000)
    } else {
        let t = format!("{:.3}", ms as f64 / 1000.0);
        t.trim_end_matches('0').to_string()
    }
}

/// One test, as both sides run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    /// The operation and what is measured.
    pub kind: TestKind,
    /// Message sizes, in order.
    pub sizes: Vec<u64>,
    /// Iterations or duration, per size.
    pub run: RunLength,
    /// The receiver checks a per-message pattern after each size (`--validate`).
    pub validate: bool,
    /// What carries the messages.
    pub link: Link,
}

/// The link a test runs over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum Link {
    /// RDMA queue pairs (verbs or NetworkDirect).
    Rdma(RdmaSpec),
    /// TCP streams.
    Tcp(TcpSpec),
}

/// The RDMA part of a spec: perftest's queue-pair flags after its defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RdmaSpec {
    /// verbs or NetworkDirect.
    pub backend: Backend,
    /// RC, UC or UD (`-c`).
    pub service: Service,
    /// Queue pairs (`-q`).
    pub qps: u32,
    /// Both sides send (`-b`).
    pub bidirectional: bool,
    /// Connect through rdma_cm (`-R`).
    pub rdma_cm: bool,
    /// Atomic operation (`-A`; atomic tests only).
    pub atomic_type: AtomicType,
    /// Send queue depth (`-t`).
    pub tx_depth: u32,
    /// Receive queue depth (`-r`).
    pub rx_depth: u32,
    /// Largest inline message (`-I`).
    pub inline_size: u32,
    /// One signaled completion per this many requests (`-Q`).
    pub cq_mod: u32,
    /// Requests per post call (`-l`).
    pub post_list: u32,
    /// Outstanding reads/atomics (`-o`; None: the device's maximum, at most 16).
    pub outs: Option<u32>,
    /// Sleep on completion events (`-e`).
    pub events: bool,
    /// Path MTU (`-m`; None: the port's active MTU).
    pub mtu: Option<u32>,
    /// RC local ACK timeout exponent (`-u`): 4.096 µs × 2^n.
    #[serde(default = "default_qp_timeout")]
    pub qp_timeout: u8,
    /// RC transport retries before `IBV_WC_RETRY_EXC_ERR` (`--retry_count`).
    #[serde(default = "default_retry_count")]
    pub retry_count: u8,
    /// Service level (`-S`).
    #[serde(default)]
    pub sl: u8,
    /// GRH traffic class (`--tclass`; RoCE v2: the IP header's DSCP and ECN).
    #[serde(default)]
    pub traffic_class: u8,
    /// GRH flow label (`--flow_label`).
    #[serde(default)]
    pub flow_label: u32,
    /// The sender's software pacing (`--rate_limit`; None: as fast as it goes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// A full send queue on each QP, unmeasured, before each size (`--perform_warm_up`).
    #[serde(default)]
    pub warm_up: bool,
    /// Buffers registered for on-demand paging, not pinned (`--odp`).
    #[serde(default)]
    pub odp: bool,
    /// Buffers in huge pages (`--use_hugepages`).
    #[serde(default)]
    pub hugepages: bool,
    /// Each side's queue pairs take receives from one shared receive queue of
    /// `rx_depth` entries (`--use-srq`).
    #[serde(default)]
    pub shared_receives: bool,
    /// Writes or sends carry immediate data (`--write_with_imm`, `--send_with_imm`): a
    /// write then consumes a receive at the peer, as a send does.
    #[serde(default)]
    pub immediate: bool,
    /// The server sends and measures, the client receives (`--reversed`).
    #[serde(default)]
    pub reversed: bool,
    /// One size in `-D`-second intervals, each printed, until a signal
    /// (`--run_infinitely`).
    #[serde(default)]
    pub run_infinitely: bool,
}

/// perftest's `-u` default: 4.096 µs × 2^14 ≈ 67 ms.
pub const DEFAULT_QP_TIMEOUT: u8 = 14;
/// perftest's `--retry_count` default (the most the 3-bit field holds; soft-RoCE
/// retries for ever at 7).
pub const DEFAULT_RETRY_COUNT: u8 = 7;

fn default_qp_timeout() -> u8 {
    DEFAULT_QP_TIMEOUT
}

fn default_retry_count() -> u8 {
    DEFAULT_RETRY_COUNT
}

/// The TCP part of a spec: iperf3's stream flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpSpec {
    /// Parallel streams, a thread each (`-P`).
    pub streams: u32,
    /// SO_SNDBUF/SO_RCVBUF asked for, bytes (`-w`; None: autotuning).
    pub window: Option<u32>,
    /// TCP_NODELAY on the data sockets (`-N`; always for tcp-lat).
    pub nodelay: bool,
}

/// The queue sizes and posting modes the loops use, whatever the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queues {
    /// Outstanding sends per connection.
    pub tx_depth: u32,
    /// Receives kept posted.
    pub rx_depth: u32,
    /// One signaled completion per this many.
    pub cq_mod: u32,
    /// Requests per post.
    pub post_list: u32,
    /// Largest inline message.
    pub inline_size: u32,
    /// Completion events instead of polling.
    pub events: bool,
    /// The receives are one pool of `rx_depth` shared by every queue pair (`--use-srq`).
    pub shared_receives: bool,
}

impl Queues {
    /// Receives to put up on each of `connections` before a size of `iters` messages
    /// per connection: `rx_depth` each, or with a shared receive queue an equal part of
    /// its `rx_depth` (perftest's split; the rules keep `-r` at least `-q`).
    pub fn receives_per_connection(&self, connections: usize, iters: u64) -> u64 {
        let depth = u64::from(self.rx_depth);
        let each = if self.shared_receives { depth / (connections.max(1) as u64) } else { depth };
        each.max(1).min(iters)
    }
}

impl TestSpec {
    /// `write_bw`, …, `tcp_bw`, `tcp_lat`.
    pub fn id(&self) -> &'static str {
        match (&self.link, self.kind.measure) {
            (Link::Tcp(_), Measure::Bw) => "tcp_bw",
            (Link::Tcp(_), Measure::Lat) => "tcp_lat",
            (Link::Rdma(_), _) => self.kind.id(),
        }
    }

    /// perftest's title line: `RDMA_Write BW Test`, `TCP Latency Test`.
    pub fn title(&self) -> String {
        let imm = self.rdma().is_some_and(|r| r.immediate);
        let verb = match (&self.link, self.kind.verb) {
            (Link::Tcp(_), _) => "TCP",
            (_, Verb::Write) if imm => "RDMA_Write_imm",
            (_, Verb::Write) => "RDMA_Write",
            (_, Verb::Read) => "RDMA_Read",
            (_, Verb::Send) if imm => "Send_imm",
            (_, Verb::Send) => "Send",
            (_, Verb::Atomic) => "Atomic",
        };
        let measure = match self.kind.measure {
            Measure::Bw => "BW",
            Measure::Lat => "Latency",
        };
        format!("{verb} {measure} Test")
    }

    /// Whether the receiving side posts receives: send tests (and TCP's streams), and
    /// writes with immediate data, each of which consumes one.
    pub fn receives(&self) -> bool {
        self.kind.receives() || self.rdma().is_some_and(|r| r.immediate)
    }

    /// The RDMA part, if this is an RDMA test.
    pub fn rdma(&self) -> Option<&RdmaSpec> {
        match &self.link {
            Link::Rdma(r) => Some(r),
            Link::Tcp(_) => None,
        }
    }

    /// Queue pairs or streams.
    pub fn connections(&self) -> u32 {
        match &self.link {
            Link::Rdma(r) => r.qps,
            Link::Tcp(t) => t.streams,
        }
    }

    /// Whether both sides send (`-b`).
    pub fn bidirectional(&self) -> bool {
        self.rdma().is_some_and(|r| r.bidirectional)
    }

    /// The largest size.
    pub fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(8)
    }

    /// The queues the loops run with. TCP writes complete when the kernel has the
    /// data: its depth only sets how many go out between two looks at completions.
    pub fn queues(&self) -> Queues {
        match &self.link {
            Link::Rdma(r) => Queues {
                tx_depth: r.tx_depth,
                rx_depth: r.rx_depth,
                cq_mod: r.cq_mod,
                post_list: r.post_list,
                inline_size: r.inline_size,
                events: r.events,
                shared_receives: r.shared_receives,
            },
            Link::Tcp(_) => {
                let iters = self.run.iterations();
                let at_most = |v: u64| u32::try_from(v.min(iters)).unwrap_or(1).max(1);
                // A TCP write is done when it returns, and its completion is stamped when
                // the loop next polls: one write in flight, each one signaled, so every
                // completion carries its own time. (With 128 queued a stream wrote 16 MiB
                // between polls: a duration window on a slow link counted nothing.)
                Queues {
                    tx_depth: 1,
                    rx_depth: at_most(16),
                    cq_mod: 1,
                    post_list: 1,
                    inline_size: 0,
                    events: false,
                    shared_receives: false,
                }
            }
        }
    }

    /// What the two sides of a one-shot test must agree on, by name: a server
    /// started by hand compares these with the client's and names each difference.
    /// (Depths, inline size and the like are each side's own, as in perftest.)
    pub fn agreement(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: serde_json::Value| {
            m.insert(k.to_string(), v);
        };
        put("test", self.id().into());
        put("sizes", serde_json::json!(self.sizes));
        put("run", serde_json::to_value(self.run).unwrap_or_default());
        put("validate", self.validate.into());
        match &self.link {
            Link::Rdma(r) => {
                put("backend", serde_json::to_value(r.backend).unwrap_or_default());
                put("service", serde_json::to_value(r.service).unwrap_or_default());
                put("qps", r.qps.into());
                put("bidirectional", r.bidirectional.into());
                put("rdma_cm", r.rdma_cm.into());
                put("atomic_type", serde_json::to_value(r.atomic_type).unwrap_or_default());
                put("run_infinitely", r.run_infinitely.into());
                put("immediate", r.immediate.into());
                put("reversed", r.reversed.into());
            }
            Link::Tcp(t) => {
                put("streams", t.streams.into());
                put("window", serde_json::json!(t.window));
                put("nodelay", t.nodelay.into());
            }
        }
        m
    }
}
