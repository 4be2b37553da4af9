//! The invariants every spec must hold before it runs ([`TestSpec::validate`]), whoever
//! built it, within the limits of [`super::rules`]; and what NetworkDirect cannot do.
//! Messages name the flag, as a user knows it.

use super::rules::{
    window_error, MAX_BUFFERS, MAX_DURATION, MAX_MESSAGE, MAX_QPS, MAX_SIZES, MAX_STREAMS,
};
use super::{AtomicType, Link, Measure, RdmaSpec, RunLength, TcpSpec, TestKind, TestSpec, Verb};
use crate::error::Error;
use crate::transport::{Backend, Service};

fn check(ok: bool, message: impl FnOnce() -> String) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::usage(message()))
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
        check(buffers <= MAX_BUFFERS, || {
            let flag = if self.rdma().is_some() { "-q" } else { "-P" };
            format!(
                "-s {} {flag} {}: {buffers} bytes of buffers, over the {} GiB one side may hold",
                self.max_size(),
                self.connections(),
                MAX_BUFFERS >> 30
            )
        })
    }

    fn validate_common(&self) -> Result<(), Error> {
        check(!self.sizes.is_empty() && self.sizes.len() <= MAX_SIZES, || {
            format!("a run has 1 to {MAX_SIZES} sizes, not {}", self.sizes.len())
        })?;
        check(self.sizes.iter().all(|&s| s > 0), || "-s 0: a message has at least 1 byte".into())?;
        check(self.max_size() <= MAX_MESSAGE, || {
            format!("-s {}: the largest message is {MAX_MESSAGE} bytes", self.max_size())
        })?;
        match self.run {
            RunLength::Iterations(n) => check(n >= 5, || format!("-n {n}: at least 5 iterations")),
            RunLength::Duration { secs, margin_ms } => {
                check(secs > 0, || "-D 0: the duration must be at least 1 second".into())?;
                check(secs <= MAX_DURATION, || {
                    format!("-D {secs}: at most {MAX_DURATION} seconds")
                })?;
                check(secs.saturating_mul(1000) > margin_ms.saturating_mul(2), || {
                    let margin = super::secs_text(margin_ms);
                    format!("-D {secs} -f {margin}: the duration must exceed twice the margin (nothing left to measure)")
                })?;
                check(self.sizes.len() == 1, || {
                    "-D cannot be combined with -a (a sweep runs each size for -n iterations)"
                        .into()
                })?;
                check(!self.validate, || {
                    "--validate needs -n: a duration run has no known final pattern".into()
                })
            }
        }
    }

    fn validate_tcp(&self, t: &TcpSpec) -> Result<(), Error> {
        check(self.kind.verb == Verb::Send, || {
            "TCP tests send; they have no RDMA operations".into()
        })?;
        check((1..=MAX_STREAMS).contains(&t.streams), || {
            format!("-P {}: between 1 and {MAX_STREAMS} streams", t.streams)
        })?;
        check(self.kind.measure == Measure::Bw || t.streams == 1, || {
            "-P: tcp_lat is one ping-pong stream".into()
        })?;
        if let Some(w) = t.window {
            check((4096..=1 << 30).contains(&w), || window_error(u64::from(w)).message)?;
        }
        check(!self.validate, || "--validate: TCP tests have no pattern check".into())
    }

    fn validate_rdma(&self, r: &RdmaSpec) -> Result<(), Error> {
        let (id, verb, bw) = (self.kind.id(), self.kind.verb, self.kind.measure == Measure::Bw);
        let allowed = match verb {
            Verb::Write => &[Service::Rc, Service::Uc][..],
            Verb::Send => &[Service::Rc, Service::Uc, Service::Ud][..],
            Verb::Read | Verb::Atomic => &[Service::Rc][..],
        };
        check(allowed.contains(&r.service), || {
            let names = match verb {
                Verb::Write => "RC or UC",
                Verb::Send => "RC, UC or UD",
                _ => "RC",
            };
            format!("-c {}: {id} runs over {names} only", r.service.name())
        })?;
        check(verb != Verb::Atomic || self.sizes == [8], || {
            "-s: atomics are always 8 bytes".into()
        })?;
        check((1..=MAX_QPS).contains(&r.qps), || {
            format!("-q {}: between 1 and {MAX_QPS} QPs", r.qps)
        })?;
        check(bw || r.qps == 1, || "-q: latency tests use one QP".into())?;
        check(bw || !r.bidirectional, || "-b: only bandwidth tests are bidirectional".into())?;
        check(
            self.kind != (TestKind { verb: Verb::Write, measure: Measure::Lat })
                || !r.events
                || r.immediate,
            || {
                "-e: write_lat polls memory, it has no completions to wait for \
                 (--write_with_imm has)"
                    .into()
            },
        )?;
        if let Some(m) = r.mtu {
            check(matches!(m, 256 | 512 | 1024 | 2048 | 4096), || {
                format!("-m {m}: the MTU is one of 256, 512, 1024, 2048, 4096")
            })?;
            check(r.service != Service::Ud || self.max_size() <= u64::from(m), || {
                format!("-s {}: a UD message must fit the MTU ({m} bytes)", self.max_size())
            })?;
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
        check(t > 0, || "-t 0: the send queue needs at least one entry".into())?;
        check(t <= 15000, || format!("-t {t}: at most 15000"))?;
        check(r.rx_depth > 0, || "-r 0: the receive queue needs at least one entry".into())?;
        check(r.rx_depth <= 16384, || format!("-r {}: at most 16384", r.rx_depth))?;
        check(self.receives() || r.rx_depth == 1, || {
            format!("-r {}: {id} posts no receives", r.rx_depth)
        })?;
        check(r.inline_size <= 1024, || format!("-I {}: at most 1024 bytes", r.inline_size))?;
        check(matches!(self.kind.verb, Verb::Write | Verb::Send) || r.inline_size == 0, || {
            format!("-I {}: {id} has no payload to inline", r.inline_size)
        })?;
        check(r.cq_mod > 0, || "-Q 0: at least one completion per 1 work request".into())?;
        check(r.cq_mod <= 1024, || format!("-Q {}: at most 1024", r.cq_mod))?;
        check(r.cq_mod <= t, || format!("-Q {}: more than the send queue (-t {t})", r.cq_mod))?;
        check(r.qp_timeout <= 31, || format!("-u {}: between 0 and 31", r.qp_timeout))?;
        check(r.retry_count <= 7, || format!("--retry_count {}: between 0 and 7", r.retry_count))?;
        check(r.sl <= 15, || format!("-S {}: a service level is 0 to 15", r.sl))?;
        check(r.flow_label <= 0xF_FFFF, || {
            format!("--flow_label {}: a flow label is 20 bits (at most 1048575)", r.flow_label)
        })?;
        check(r.outs.is_none_or(|o| (1..=255).contains(&o)), || {
            format!("-o {}: between 1 and 255", r.outs.unwrap_or(0))
        })?;
        let l = r.post_list;
        check(l >= 1, || "-l 0: at least one request per post".into())?;
        if l > 1 {
            let iters = self.run.iterations();
            check(bw, || "-l: post lists are for bandwidth tests".into())?;
            check(l <= t, || format!("-l {l}: longer than the send queue (-t {t})"))?;
            check(iters == u64::MAX || iters % u64::from(l) == 0, || {
                format!("-l {l}: -n {iters} must be a multiple of the post list")
            })?;
        }
        Ok(())
    }

    fn validate_modes(&self, r: &RdmaSpec) -> Result<(), Error> {
        let duration = matches!(self.run, RunLength::Duration { .. });
        check(!(duration && r.bidirectional && self.receives()), || {
            format!(
                "-b with {}{} needs -n: each side must know how many messages to expect",
                self.kind.id(),
                if r.immediate && self.kind.verb == Verb::Write { " --write_with_imm" } else { "" }
            )
        })?;
        check(!(duration && r.events), || "-D cannot be combined with -e".into())?;
        check(self.kind.verb == Verb::Atomic || r.atomic_type == AtomicType::FetchAndAdd, || {
            format!("-A: only the atomic tests take an atomic type, not {}", self.kind.id())
        })?;
        if self.validate {
            check(
                r.atomic_type != AtomicType::CmpAndSwap || self.kind.verb != Verb::Atomic,
                || "--validate: only fetch-and-add leaves a checkable sum".into(),
            )?;
            check(r.service != Service::Ud, || {
                "--validate: UD receives carry a 40-byte GRH in front of each message; use RC or UC"
                    .into()
            })?;
        }
        check(!(r.rdma_cm && r.service == Service::Ud), || {
            "-R: rdma_cm connects RC or UC queue pairs".into()
        })?;
        if r.shared_receives {
            check(self.kind.verb == Verb::Send, || {
                format!("--use-srq: {} posts no receives; the send tests do", self.kind.id())
            })?;
            check(r.rx_depth >= r.qps, || {
                format!(
                    "--use-srq: -r {} is less than -q {}: each QP starts with an equal part of \
                     the shared receive queue",
                    r.rx_depth, r.qps
                )
            })?;
            check(!self.validate, || {
                "--validate: with --use-srq a message lands in whichever QP's receive came \
                 first, not in its own QP's buffer"
                    .into()
            })?;
        }
        if r.reversed {
            check(self.kind.measure == Measure::Bw, || {
                format!(
                    "--reversed: turns a bandwidth test around; {}'s traffic goes both ways",
                    self.kind.id()
                )
            })?;
            check(!r.bidirectional, || "--reversed with -b: -b already sends both ways".into())?;
        }
        if let Some(l) = r.rate_limit {
            check(l.rate.is_finite() && l.rate > 0.0, || {
                format!("--rate_limit {}: a rate above 0", l.rate)
            })?;
            check((1..=1 << 20).contains(&l.burst), || {
                format!("--burst_size {}: between 1 and 1048576 messages", l.burst)
            })?;
            check(self.kind.measure == Measure::Bw, || {
                "--rate_limit: paces a bandwidth test's sends".into()
            })?;
        }
        if r.warm_up {
            check(self.kind.measure == Measure::Bw && !self.receives(), || {
                "--perform_warm_up: write, read and atomic bandwidth tests warm up (as perftest), \
                 without immediate data (its messages would take the measured run's receives)"
                    .into()
            })?;
            check(!(self.validate && self.kind.verb == Verb::Atomic), || {
                "--perform_warm_up with --validate: the warm-up's adds would join the checked sum"
                    .into()
            })?;
        }
        let classed = r.sl != 0 || r.traffic_class != 0 || r.flow_label != 0;
        check(!(r.rdma_cm && classed), || {
            "-S, --tclass, --flow_label: not with -R yet (rdma_cm resolves the path itself)".into()
        })
    }
}

/// What NetworkDirect cannot do, refused before anything starts.
fn nd_rules(kind: TestKind, r: &RdmaSpec) -> Result<(), Error> {
    check(kind.verb != Verb::Atomic, || {
        format!("{}: atomics are not supported by NetworkDirect", kind.id())
    })?;
    check(r.service == Service::Rc, || {
        format!(
            "-c {}: not supported by NetworkDirect (it connects RC queue pairs only)",
            r.service.name()
        )
    })?;
    check(!r.rdma_cm, || "-R: NetworkDirect connects through its own connector; drop -R".into())?;
    check(r.mtu.is_none(), || "-m: NetworkDirect does not set the path MTU".into())?;
    check(r.sl == 0 && r.traffic_class == 0 && r.flow_label == 0, || {
        "-S, --tclass, --flow_label: NetworkDirect does not set a path's class".into()
    })?;
    check(!r.odp, || "--odp: NetworkDirect registers memory its own way (pinned)".into())?;
    check(!r.hugepages, || "--use_hugepages: not with NetworkDirect (Linux's MAP_HUGETLB)".into())?;
    check(!r.shared_receives, || "--use-srq: not implemented for NetworkDirect".into())?;
    check(!r.immediate, || {
        "--write_with_imm, --send_with_imm: immediate data is not supported by NetworkDirect".into()
    })
}

/// What NetworkDirect cannot take from this side's own flags.
///
/// # Errors
/// `-x`, `-i` other than 1, or a `-d` that is not an IP address.
pub fn nd_local_rules(local: &super::Local) -> Result<(), Error> {
    check(local.gid_index.is_none(), || {
        "-x: NetworkDirect has no GID table; it addresses adapters by IP".into()
    })?;
    check(local.ib_port == 1, || "-i: NetworkDirect adapters have no ports to choose".into())?;
    check(local.counters.is_none(), || {
        "-W: reads a verbs port's counters in sysfs; NetworkDirect adapters have none".into()
    })?;
    match &local.device {
        Some(d) if d.parse::<std::net::IpAddr>().is_err() => Err(Error::usage(format!(
            "-d {d}: with NetworkDirect, name the adapter by one of its IP addresses"
        ))),
        _ => Ok(()),
    }
}
