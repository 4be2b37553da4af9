//! The invariants every spec must hold before it runs ([`TestSpec::validate`]), whoever
//! built it, within the limits of [`super::rules`]; and what NetworkDirect cannot do.
//! Messages name the flag, as a user knows it.

use super::rules::{
    window_error, MAX_BUFFERS, MAX_DURATION, MAX_MESSAGE, MAX_QPS, MAX_SIZES, MAX_STREAMS,
};
use super::{AtomicType, Link, Measure, RdmaSpec, RunLength, TcpSpec, TestKind, TestSpec, Verb};
use crate::error::{Error, Refusal};

/// NetworkDirect, as its refusals name it.
const ND: &str = "NetworkDirect";
use crate::transport::{Backend, Service};

/// Holds, or refuses by rule `rule` with `message`.
fn check(
    ok: bool,
    rule: impl FnOnce() -> Refusal,
    message: impl FnOnce() -> String,
) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::refusal(rule(), message()))
    }
}

impl TestSpec {
    /// Checks every rule a spec must hold, whoever built it: the CLI, `compare`, or a
    /// peer's hello (every number a peer sends is bounded here before anything is
    /// allocated).
    ///
    /// # Errors
    /// The first rule broken, naming the flag (kind `usage`).
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_common()?;
        match &self.link {
            Link::Rdma(r) => self.validate_rdma(r)?,
            Link::Tcp(t) => self.validate_tcp(t)?,
        }
        let buffers = self.buffer_bytes();
        check(
            buffers <= MAX_BUFFERS,
            || Refusal::range(if self.rdma().is_some() { "-q" } else { "-P" }),
            || {
                let flag = if self.rdma().is_some() { "-q" } else { "-P" };
                format!(
                "-s {} {flag} {}: {buffers} bytes of buffers, over the {} GiB one side may hold",
                self.max_size(),
                self.connections(),
                MAX_BUFFERS >> 30
            )
            },
        )
    }

    fn validate_common(&self) -> Result<(), Error> {
        check(
            !self.sizes.is_empty() && self.sizes.len() <= MAX_SIZES,
            || Refusal::range("-s"),
            || format!("a run has 1 to {MAX_SIZES} sizes, not {}", self.sizes.len()),
        )?;
        check(
            self.sizes.iter().all(|&s| s > 0),
            || Refusal::range("-s"),
            || "-s 0: a message has at least 1 byte".into(),
        )?;
        check(
            self.max_size() <= MAX_MESSAGE,
            || Refusal::range("-s"),
            || format!("-s {}: the largest message is {MAX_MESSAGE} bytes", self.max_size()),
        )?;
        match self.run {
            RunLength::Iterations(n) => {
                check(n >= 5, || Refusal::range("-n"), || format!("-n {n}: at least 5 iterations"))
            }
            RunLength::Duration { secs, margin_ms } => {
                check(
                    secs > 0,
                    || Refusal::range("-D"),
                    || "-D 0: the duration must be at least 1 second".into(),
                )?;
                check(
                    secs <= MAX_DURATION,
                    || Refusal::range("-D"),
                    || format!("-D {secs}: at most {MAX_DURATION} seconds"),
                )?;
                check(
                    secs.saturating_mul(1000) > margin_ms.saturating_mul(2),
                    || Refusal::range("-f"),
                    || {
                        let margin = super::secs_text(margin_ms);
                        format!("-D {secs} -f {margin}: the duration must exceed twice the margin (nothing left to measure)")
                    },
                )?;
                check(
                    self.sizes.len() == 1,
                    || Refusal::exclusive("-D", "-a"),
                    || {
                        "-D cannot be combined with -a (a sweep runs each size for -n iterations)"
                            .into()
                    },
                )?;
                check(
                    !self.validate,
                    || Refusal::needs("--validate", "-n"),
                    || "--validate needs -n: a duration run has no known final pattern".into(),
                )
            }
        }
    }

    fn validate_tcp(&self, t: &TcpSpec) -> Result<(), Error> {
        check(
            self.kind.verb == Verb::Send,
            || Refusal::not_this_test("--tcp", self.kind.id()),
            || "TCP tests send; they have no RDMA operations".into(),
        )?;
        check(
            (1..=MAX_STREAMS).contains(&t.streams),
            || Refusal::range("-P"),
            || format!("-P {}: between 1 and {MAX_STREAMS} streams", t.streams),
        )?;
        check(
            self.kind.measure == Measure::Bw || t.streams == 1,
            || Refusal::not_this_test("-P", "tcp_lat"),
            || "-P: tcp_lat is one ping-pong stream".into(),
        )?;
        if let Some(w) = t.window {
            check(
                (4096..=1 << 30).contains(&w),
                || Refusal::range("-w"),
                || window_error(u64::from(w)).message,
            )?;
        }
        check(
            !self.validate,
            || Refusal::not_this_test("--validate", self.id()),
            || "--validate: TCP tests have no pattern check".into(),
        )
    }

    fn validate_rdma(&self, r: &RdmaSpec) -> Result<(), Error> {
        let (id, verb, bw) = (self.kind.id(), self.kind.verb, self.kind.measure == Measure::Bw);
        let allowed = match verb {
            Verb::Write => &[Service::Rc, Service::Uc][..],
            Verb::Send => &[Service::Rc, Service::Uc, Service::Ud][..],
            Verb::Read | Verb::Atomic => &[Service::Rc][..],
        };
        check(
            allowed.contains(&r.service),
            || Refusal::not_this_test("-c", id),
            || {
                let names = match verb {
                    Verb::Write => "RC or UC",
                    Verb::Send => "RC, UC or UD",
                    _ => "RC",
                };
                format!("-c {}: {id} runs over {names} only", r.service.name())
            },
        )?;
        check(
            verb != Verb::Atomic || self.sizes == [8],
            || Refusal::range("-s"),
            || "-s: atomics are always 8 bytes".into(),
        )?;
        check(
            (1..=MAX_QPS).contains(&r.qps),
            || Refusal::range("-q"),
            || format!("-q {}: between 1 and {MAX_QPS} QPs", r.qps),
        )?;
        check(
            bw || r.qps == 1,
            || Refusal::not_this_test("-q", id),
            || "-q: latency tests use one QP".into(),
        )?;
        check(
            bw || !r.bidirectional,
            || Refusal::not_this_test("-b", id),
            || "-b: only bandwidth tests are bidirectional".into(),
        )?;
        check(
            self.kind != (TestKind { verb: Verb::Write, measure: Measure::Lat })
                || !r.events
                || r.immediate,
            || Refusal::not_this_test("-e", id),
            || {
                "-e: write_lat polls memory, it has no completions to wait for \
                 (--write_with_imm has)"
                    .into()
            },
        )?;
        if let Some(m) = r.mtu {
            check(
                matches!(m, 256 | 512 | 1024 | 2048 | 4096),
                || Refusal::range("-m"),
                || format!("-m {m}: the MTU is one of 256, 512, 1024, 2048, 4096"),
            )?;
            check(
                r.service != Service::Ud || self.max_size() <= u64::from(m),
                || Refusal::range("-s"),
                || format!("-s {}: a UD message must fit the MTU ({m} bytes)", self.max_size()),
            )?;
        }
        self.validate_queues(r, id, bw)?;
        self.validate_modes(r)?;
        if r.backend == Backend::Nd {
            nd_rules(self.kind, r)?;
        }
        Ok(())
    }

    fn validate_queues(&self, r: &RdmaSpec, id: &str, bw: bool) -> Result<(), Error> {
        let t = r.tx_depth;
        check(
            t > 0,
            || Refusal::range("-t"),
            || "-t 0: the send queue needs at least one entry".into(),
        )?;
        check(t <= 15000, || Refusal::range("-t"), || format!("-t {t}: at most 15000"))?;
        check(
            r.rx_depth > 0,
            || Refusal::range("-r"),
            || "-r 0: the receive queue needs at least one entry".into(),
        )?;
        check(
            r.rx_depth <= 16384,
            || Refusal::range("-r"),
            || format!("-r {}: at most 16384", r.rx_depth),
        )?;
        check(
            self.receives() || r.rx_depth == 1,
            || Refusal::not_this_test("-r", id),
            || format!("-r {}: {id} posts no receives", r.rx_depth),
        )?;
        check(
            r.inline_size <= 1024,
            || Refusal::range("-I"),
            || format!("-I {}: at most 1024 bytes", r.inline_size),
        )?;
        check(
            matches!(self.kind.verb, Verb::Write | Verb::Send) || r.inline_size == 0,
            || Refusal::not_this_test("-I", id),
            || format!("-I {}: {id} has no payload to inline", r.inline_size),
        )?;
        check(
            r.cq_mod > 0,
            || Refusal::range("-Q"),
            || "-Q 0: at least one completion per 1 work request".into(),
        )?;
        check(
            r.cq_mod <= 1024,
            || Refusal::range("-Q"),
            || format!("-Q {}: at most 1024", r.cq_mod),
        )?;
        check(
            r.cq_mod <= t,
            || Refusal::range("-Q"),
            || format!("-Q {}: more than the send queue (-t {t})", r.cq_mod),
        )?;
        check(
            r.qp_timeout <= 31,
            || Refusal::range("-u"),
            || format!("-u {}: between 0 and 31", r.qp_timeout),
        )?;
        check(
            r.retry_count <= 7,
            || Refusal::range("--retry_count"),
            || format!("--retry_count {}: between 0 and 7", r.retry_count),
        )?;
        check(
            r.sl <= 15,
            || Refusal::range("-S"),
            || format!("-S {}: a service level is 0 to 15", r.sl),
        )?;
        check(
            r.flow_label <= 0xF_FFFF,
            || Refusal::range("--flow_label"),
            || format!("--flow_label {}: a flow label is 20 bits (at most 1048575)", r.flow_label),
        )?;
        check(
            r.outs.is_none_or(|o| (1..=255).contains(&o)),
            || Refusal::range("-o"),
            || format!("-o {}: between 1 and 255", r.outs.unwrap_or(0)),
        )?;
        let l = r.post_list;
        check(l >= 1, || Refusal::range("-l"), || "-l 0: at least one request per post".into())?;
        if l > 1 {
            let iters = self.run.iterations();
            check(
                bw,
                || Refusal::not_this_test("-l", id),
                || "-l: post lists are for bandwidth tests".into(),
            )?;
            check(
                l <= t,
                || Refusal::range("-l"),
                || format!("-l {l}: longer than the send queue (-t {t})"),
            )?;
            check(
                iters == u64::MAX || iters % u64::from(l) == 0,
                || Refusal::range("-l"),
                || format!("-l {l}: -n {iters} must be a multiple of the post list"),
            )?;
        }
        Ok(())
    }

    fn validate_modes(&self, r: &RdmaSpec) -> Result<(), Error> {
        let duration = matches!(self.run, RunLength::Duration { .. });
        if r.run_infinitely {
            let (flag, id) = ("--run_infinitely", self.kind.id());
            check(
                self.kind.measure == Measure::Bw,
                || Refusal::not_this_test(flag, id),
                || "--run_infinitely: bandwidth tests print a figure per interval".into(),
            )?;
            check(
                duration,
                || Refusal::needs(flag, "-D"),
                || "--run_infinitely: give -D SECS, the interval between figures".into(),
            )?;
            check(
                !matches!(self.run, RunLength::Duration { margin_ms: 1.., .. }),
                || Refusal::exclusive("-f", flag),
                || "-f: --run_infinitely measures each -D interval whole".into(),
            )?;
        }
        check(
            !(duration && r.bidirectional && self.receives()),
            || Refusal::needs("-b", "-n"),
            || {
                format!(
                    "-b with {}{} needs -n: each side must know how many messages to expect",
                    self.kind.id(),
                    if r.immediate && self.kind.verb == Verb::Write {
                        " --write_with_imm"
                    } else {
                        ""
                    }
                )
            },
        )?;
        check(
            !(duration && r.events),
            || Refusal::exclusive("-D", "-e"),
            || "-D cannot be combined with -e".into(),
        )?;
        check(
            self.kind.verb == Verb::Atomic || r.atomic_type == AtomicType::FetchAndAdd,
            || Refusal::not_this_test("-A", self.kind.id()),
            || format!("-A: only the atomic tests take an atomic type, not {}", self.kind.id()),
        )?;
        if self.validate {
            check(
                r.atomic_type != AtomicType::CmpAndSwap || self.kind.verb != Verb::Atomic,
                || Refusal::exclusive("--validate", "-A"),
                || "--validate: only fetch-and-add leaves a checkable sum".into(),
            )?;
            check(
                r.service != Service::Ud,
                || Refusal::not_with("--validate", "UD"),
                || {
                    "--validate: UD receives carry a 40-byte GRH in front of each message; use RC or UC"
                    .into()
                },
            )?;
        }
        check(
            !(r.rdma_cm && r.service == Service::Ud),
            || Refusal::not_with("-R", "UD"),
            || "-R: rdma_cm connects RC or UC queue pairs".into(),
        )?;
        if r.shared_receives {
            check(
                self.kind.verb == Verb::Send,
                || Refusal::not_this_test("--use-srq", self.kind.id()),
                || format!("--use-srq: {} posts no receives; the send tests do", self.kind.id()),
            )?;
            check(
                r.rx_depth >= r.qps,
                || Refusal::range("-r"),
                || {
                    format!(
                    "--use-srq: -r {} is less than -q {}: each QP starts with an equal part of \
                     the shared receive queue",
                    r.rx_depth, r.qps
                )
                },
            )?;
            check(
                !self.validate,
                || Refusal::exclusive("--validate", "--use-srq"),
                || {
                    "--validate: with --use-srq a message lands in whichever QP's receive came \
                 first, not in its own QP's buffer"
                        .into()
                },
            )?;
        }
        if r.reversed {
            check(
                self.kind.measure == Measure::Bw,
                || Refusal::not_this_test("--reversed", self.kind.id()),
                || {
                    format!(
                        "--reversed: turns a bandwidth test around; {}'s traffic goes both ways",
                        self.kind.id()
                    )
                },
            )?;
            check(
                !r.bidirectional,
                || Refusal::exclusive("--reversed", "-b"),
                || "--reversed with -b: -b already sends both ways".into(),
            )?;
        }
        if let Some(l) = r.rate_limit {
            check(
                l.rate.is_finite() && l.rate > 0.0,
                || Refusal::range("--rate_limit"),
                || format!("--rate_limit {}: a rate above 0", l.rate),
            )?;
            check(
                (1..=1 << 20).contains(&l.burst),
                || Refusal::range("--burst_size"),
                || format!("--burst_size {}: between 1 and 1048576 messages", l.burst),
            )?;
            check(
                self.kind.measure == Measure::Bw,
                || Refusal::not_this_test("--rate_limit", self.kind.id()),
                || "--rate_limit: paces a bandwidth test's sends".into(),
            )?;
        }
        if r.warm_up {
            check(
                self.kind.measure == Measure::Bw && !self.receives(),
                || Refusal::not_this_test("--perform_warm_up", self.kind.id()),
                || {
                    "--perform_warm_up: write, read and atomic bandwidth tests warm up (as perftest), \
                 without immediate data (its messages would take the measured run's receives)"
                    .into()
                },
            )?;
            check(
                !(self.validate && self.kind.verb == Verb::Atomic),
                || Refusal::exclusive("--perform_warm_up", "--validate"),
                || {
                    "--perform_warm_up with --validate: the warm-up's adds would join the checked sum"
                    .into()
                },
            )?;
        }
        let classed = r.sl != 0 || r.traffic_class != 0 || r.flow_label != 0;
        check(
            !(r.rdma_cm && classed),
            || Refusal::not_with("-S", "-R"),
            || {
                "-S, --tclass, --flow_label: not with -R yet (rdma_cm resolves the path itself)"
                    .into()
            },
        )
    }
}

/// What NetworkDirect cannot do, refused before anything starts.
fn nd_rules(kind: TestKind, r: &RdmaSpec) -> Result<(), Error> {
    check(
        kind.verb != Verb::Atomic,
        || Refusal::not_with(kind.id(), ND),
        || format!("{}: atomics are not supported by NetworkDirect", kind.id()),
    )?;
    check(
        r.service == Service::Rc,
        || Refusal::not_with("-c", ND),
        || {
            format!(
                "-c {}: not supported by NetworkDirect (it connects RC queue pairs only)",
                r.service.name()
            )
        },
    )?;
    check(
        !r.rdma_cm,
        || Refusal::not_with("-R", ND),
        || "-R: NetworkDirect connects through its own connector; drop -R".into(),
    )?;
    check(
        r.mtu.is_none(),
        || Refusal::not_with("-m", ND),
        || "-m: NetworkDirect does not set the path MTU".into(),
    )?;
    check(
        r.sl == 0 && r.traffic_class == 0 && r.flow_label == 0,
        || Refusal::not_with("-S", ND),
        || "-S, --tclass, --flow_label: NetworkDirect does not set a path's class".into(),
    )?;
    check(
        !r.odp,
        || Refusal::not_with("--odp", ND),
        || "--odp: NetworkDirect registers memory its own way (pinned)".into(),
    )?;
    check(
        !r.hugepages,
        || Refusal::not_with("--use_hugepages", ND),
        || "--use_hugepages: not with NetworkDirect (Linux's MAP_HUGETLB)".into(),
    )?;
    check(
        !r.shared_receives,
        || Refusal::not_with("--use-srq", ND),
        || "--use-srq: not implemented for NetworkDirect".into(),
    )?;
    check(
        !r.immediate,
        || Refusal::not_with("--write_with_imm", ND),
        || {
            "--write_with_imm, --send_with_imm: immediate data is not supported by NetworkDirect"
                .into()
        },
    )
}

/// What NetworkDirect cannot take from this side's own flags.
///
/// # Errors
/// `-x`, `-i` other than 1, or a `-d` that is not an IP address.
pub fn nd_local_rules(local: &super::Local) -> Result<(), Error> {
    check(
        local.gid_index.is_none(),
        || Refusal::not_with("-x", ND),
        || "-x: NetworkDirect has no GID table; it addresses adapters by IP".into(),
    )?;
    check(
        local.ib_port == 1,
        || Refusal::not_with("-i", ND),
        || "-i: NetworkDirect adapters have no ports to choose".into(),
    )?;
    check(
        local.counters.is_none(),
        || Refusal::not_with("-W", ND),
        || "-W: reads a verbs port's counters in sysfs; NetworkDirect adapters have none".into(),
    )?;
    match &local.device {
        Some(d) if d.parse::<std::net::IpAddr>().is_err() => Err(Error::refusal(
            Refusal::not_with("-d", ND),
            format!("-d {d}: with NetworkDirect, name the adapter by one of its IP addresses"),
        )),
        _ => Ok(()),
    }
}
