//! The test flags turned into one test on this side ([`TestArgs`]): perftest's
//! request to `spec::rules`, this side's settings, the output and its thresholds.

use std::time::Duration;

use super::args::{AtomicArg, FigureArg, PerfArgs, RateUnitsArg, ReportArgs, TcpArgs, TestArgs};
use crate::counters::CounterSelection;
use crate::error::Error;
use crate::spec::rules::{self, RdmaRequest, TcpRequest};
use crate::spec::{
    parse_cpu_list, AtomicType, Figure, IntervalLines, Local, Measure, Output, RateUnits,
    RunLength, SampleOrder, TestKind, TestSpec, DEFAULT_PORT,
};
use crate::transport::Backend;

/// `--timeout`'s default, seconds: also each step's bound under a server's `--timeout 0`.
const DEFAULT_TIMEOUT: u64 = 30;

/// Most samples `-H`/`-U` keep: 64 MiB of them.
const MAX_LISTED_SAMPLES: u64 = 1 << 23;

impl ReportArgs {
    /// The output and thresholds, checked against what the test measures.
    fn output(&self, bw: bool, client: bool) -> Result<Output, Error> {
        if self.min_bw.is_some() && !bw {
            return Err(Error::usage("--min-bw: only bandwidth tests have a bandwidth"));
        }
        if self.max_lat.is_some() && bw {
            return Err(Error::usage("--max-lat: only latency tests have a latency"));
        }
        for (flag, v) in [("--min-bw", self.min_bw), ("--max-lat", self.max_lat)] {
            if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
                return Err(Error::usage(format!("{flag}: a number, 0 or more")));
            }
        }
        Ok(Output {
            report_gbits: self.report_gbits,
            json: self.json.clone(),
            min_bw: self.min_bw,
            max_lat: self.max_lat,
            min_msg_rate: None,
            only: None,
            samples: None,
            cpu: self.cpu_util,
            verbose: self.verbose,
            store: self.store.clone().map(|p| super::history::test_store(p, client)).transpose()?,
        })
    }

    /// The per-step timeout. A server's `--timeout 0` waits for ever for its first client
    /// (`Local::wait_forever`), each step then bounded by the default 30 s.
    pub fn timeout(&self, server: bool) -> Result<(Duration, bool), Error> {
        match self.timeout {
            0 if server => Ok((Duration::from_secs(DEFAULT_TIMEOUT), true)),
            0 => Err(Error::usage(
                "--timeout 0: a client waits at least 1 second (0 is a server's: wait for ever)",
            )),
            secs => Ok((crate::spec::rules::timeout(secs)?, false)),
        }
    }

    /// `--interval SECS` (or TCP's `-i`, `short`) and `--json-lines FILE` (every second
    /// without an interval): bandwidth tests only, 0.1 s to an hour.
    fn interval_lines(&self, bw: bool, short: Option<f64>) -> Result<Option<IntervalLines>, Error> {
        let asked = self.interval.or(short);
        if asked.is_none() && self.json_lines.is_none() {
            return Ok(None);
        }
        if !bw {
            let flag = if asked.is_some() { "--interval" } else { "--json-lines" };
            return Err(Error::usage(format!("{flag}: only bandwidth tests have intervals")));
        }
        if self.json_lines.as_deref().is_some_and(crate::files::is_stdout) {
            return Err(Error::usage("--json-lines: a file (stdout carries the table)"));
        }
        let secs = asked.unwrap_or(1.0);
        if !(0.1..=3600.0).contains(&secs) {
            return Err(Error::usage(format!("--interval {secs}: from 0.1 to 3600 seconds")));
        }
        Ok(Some(IntervalLines {
            every: Duration::from_secs_f64(secs),
            text: asked.is_some(),
            json_lines: self.json_lines.clone(),
            gbits: self.report_gbits,
            to_stderr: self.json.as_deref().is_some_and(|j| j.as_os_str() == "-"),
            min_bw: self.min_bw,
        }))
    }
}

impl PerfArgs {
    /// The flags as a spec request (what `compare` builds directly, too).
    pub fn request(&self) -> RdmaRequest {
        let r = &self.run;
        RdmaRequest {
            size: r.size,
            all: r.all,
            iters: r.iters,
            duration: r.duration,
            margin: r.margin,
            tx_depth: self.tx_depth,
            rx_depth: self.rx_depth,
            qps: self.qps,
            service: self.connection.map(Into::into),
            mtu: self.mtu,
            inline_size: self.inline_size,
            cq_mod: self.cq_mod,
            post_list: self.post_list,
            bidirectional: self.bidirectional,
            rdma_cm: self.rdma_cm,
            events: self.events,
            outs: self.outs,
            qp_timeout: self.qp_timeout,
            retry_count: self.retry_count,
            sl: self.sl,
            traffic_class: self.traffic_class,
            flow_label: self.flow_label,
            rate_limit: self.rate_limit,
            rate_units: self.rate_units.map(|u| match u {
                RateUnitsArg::M => RateUnits::MibPerSec,
                RateUnitsArg::G => RateUnits::GbitPerSec,
                RateUnitsArg::P => RateUnits::MsgPerSec,
            }),
            burst_size: self.burst_size,
            warm_up: self.warm_up,
            odp: self.odp,
            hugepages: self.hugepages,
            shared_receives: self.shared_receives,
            write_with_imm: self.write_with_imm,
            send_with_imm: self.send_with_imm,
            reversed: self.reversed,
            run_infinitely: self.run_infinitely,
            atomic_type: self.atomic_type.map(|a| match a {
                AtomicArg::FetchAndAdd => AtomicType::FetchAndAdd,
                AtomicArg::CmpAndSwap => AtomicType::CmpAndSwap,
            }),
            validate: self.validate,
            backend: self.backend.map(Backend::from),
        }
    }

    /// The spec, this side's settings and output for `kind`.
    ///
    /// # Errors
    /// One line naming the flag (kind `usage`).
    pub fn to_test(&self, kind: TestKind) -> Result<TestArgs, Error> {
        let spec = rules::rdma(kind, &self.request())?;
        if self.perftest {
            crate::perftest::conveyable(&spec)?;
            if self.access.auth_key.is_some() {
                return Err(Error::usage("--perftest: perftest has no --auth-key"));
            }
            if self.rails() {
                return Err(Error::usage("--perftest: one device (perftest runs one rail)"));
            }
        }
        if self.run_infinitely && (self.output.is_some() || self.rails()) {
            return Err(Error::usage(
                "--run_infinitely: prints its table as it goes (not with --output or several devices)",
            ));
        }
        if self.report_both && !self.bidirectional {
            return Err(Error::usage("--report-both: reports the two directions of a -b run"));
        }
        if self.rate_limit_type.is_some() && self.rate_limit.is_none() {
            return Err(Error::usage("--rate_limit_type SW: only with --rate_limit"));
        }
        if self.report_counters.is_some() && self.rails() {
            return Err(Error::usage("-W: one device (rails print no per-size table)"));
        }
        if self.report.store.is_some() && self.rails() {
            return Err(Error::usage(
                "--store: one device (a multi-rail run is not recorded in the results store): record each rail's own run (-d DEVICE --store), or keep the rails' --json FILE",
            ));
        }
        if self.rdma_cm && self.host.as_deref().is_some_and(str::is_empty) {
            return Err(Error::usage("-R: HOST must be the RDMA interface's IP address"));
        }
        let default_port =
            if self.perftest { crate::perftest::PERFTEST_PORT } else { DEFAULT_PORT };
        let mut local = Local {
            device: self.device.clone(),
            ib_port: self.ib_port.unwrap_or(1),
            gid_index: self.gid_index,
            port: self.port.unwrap_or(default_port),
            timeout: self.report.timeout(self.host.is_none())?.0,
            connect_window: self.report.timeout(self.host.is_none())?.0,
            wait_forever: self.report.timeout(self.host.is_none())?.1,
            max_time: self.report.max_time.map(crate::spec::rules::max_time).transpose()?,
            quiet: self.report.quiet,
            counters: self.report_counters.as_deref().map(CounterSelection::parse).transpose()?,
            ..Local::default()
        };
        self.access.apply(self.host.is_some(), &mut local)?;
        (local.pin, local.numa_node) = self.affinity()?;
        local.threads = self.threads(&spec)?;
        local.interval_lines = self.report.interval_lines(kind.measure == Measure::Bw, None)?;
        if spec.rdma().is_some_and(|r| r.backend == Backend::Nd) {
            crate::spec::validate::nd_local_rules(&local)?;
        }
        let mut output = self
            .limits(self.report.output(kind.measure == Measure::Bw, self.host.is_some())?, kind)?;
        output.samples = self.sample_order(&spec)?;
        local.keep_samples = output.samples.is_some();
        if let Some(lines) = &mut local.interval_lines {
            // -w/--limit_bw is the same floor.
            lines.min_bw = output.min_bw;
        }
        Ok(TestArgs { spec, host: self.host.clone(), local, output, perftest: self.perftest })
    }

    /// `-H`/`-U`: every latency sample listed, for a run whose samples can all be kept.
    fn sample_order(&self, spec: &TestSpec) -> Result<Option<SampleOrder>, Error> {
        let order = match (self.unsorted, self.histogram) {
            (true, _) => SampleOrder::Unsorted,
            (false, true) => SampleOrder::Sorted,
            (false, false) => return Ok(None),
        };
        if spec.kind.measure != Measure::Lat {
            return Err(Error::usage("-H/-U: only latency tests have samples to list"));
        }
        match spec.run {
            RunLength::Duration { .. } => {
                Err(Error::usage("-H/-U: a -D run keeps no samples (use -n)"))
            }
            RunLength::Iterations(n) if n > MAX_LISTED_SAMPLES => Err(Error::usage(format!(
                "-H/-U: at most {MAX_LISTED_SAMPLES} iterations (every sample is kept)"
            ))),
            RunLength::Iterations(_) => Ok(Some(order)),
        }
    }

    /// `--pin_cores` or `--numa_node` (one of them).
    fn affinity(&self) -> Result<(Vec<usize>, Option<u32>), Error> {
        match (&self.pin_cores, self.numa_node) {
            (Some(_), Some(_)) => {
                Err(Error::usage("--pin_cores and --numa_node: one of them says where to run"))
            }
            (Some(list), None) => parse_cpu_list(list)
                .map(|cpus| (cpus, None))
                .map_err(|_| Error::usage(format!("--pin_cores '{list}': a CPU list like 0,2-3"))),
            (None, node) => Ok((Vec::new(), node)),
        }
    }

    /// `--threads T`: a bandwidth test's queue pairs over T threads, at most one a QP.
    fn threads(&self, spec: &TestSpec) -> Result<u32, Error> {
        let Some(t) = self.threads else { return Ok(1) };
        let qps = spec.connections();
        let refuse = |why: String| Err(Error::usage(format!("--threads {t}: {why}")));
        if t == 0 {
            return refuse("at least 1".into());
        }
        if t == 1 {
            return Ok(1);
        }
        if spec.kind.measure != Measure::Bw {
            return refuse("only bandwidth tests (a latency test runs one QP)".into());
        }
        if t > qps {
            return refuse(format!("more threads than queue pairs (-q {qps})"));
        }
        let why = if self.bidirectional {
            "not with -b (each QP both sends and receives on one thread)"
        } else if self.run_infinitely {
            "not with --run_infinitely"
        } else if self.perftest {
            "not with --perftest (perftest runs its QPs on one thread)"
        } else if self.shared_receives {
            "not with --use-srq (the QPs share one receive queue)"
        } else if self.rails() {
            "one device"
        } else {
            return Ok(t);
        };
        refuse(why.into())
    }

    /// Whether `-d` names several devices: a multi-rail run ([`crate::rails`]).
    fn rails(&self) -> bool {
        crate::rails::several(self.device.as_deref())
    }

    /// perftest's verifier limits (`-w`, `-y`) onto the output's thresholds.
    fn limits(&self, mut output: Output, kind: TestKind) -> Result<Output, Error> {
        let bw = kind.measure == Measure::Bw;
        for (flag, v) in
            [("-w/--limit_bw", self.limit_bw), ("-y/--limit_msgrate", self.limit_msgrate)]
        {
            match v {
                Some(_) if !bw => {
                    return Err(Error::usage(format!("{flag}: only bandwidth tests have one")))
                }
                Some(v) if !v.is_finite() || v < 0.0 => {
                    return Err(Error::usage(format!("{flag}: a number, 0 or more")))
                }
                _ => {}
            }
        }
        match (output.min_bw, self.limit_bw) {
            (Some(a), Some(b)) if a != b => {
                return Err(Error::usage(format!(
                    "--min-bw {a} and -w/--limit_bw {b}: one limit (they are the same flag)"
                )))
            }
            (None, b) => output.min_bw = b,
            _ => {}
        }
        output.min_msg_rate = self.limit_msgrate;
        if self.output.is_some() && self.rails() {
            return Err(Error::usage("--output: one device (rails print their own table)"));
        }
        output.only = match (self.output, bw) {
            (None, _) => None,
            (Some(FigureArg::Bandwidth), true) => Some(Figure::Bandwidth),
            (Some(FigureArg::MessageRate), true) => Some(Figure::MessageRate),
            (Some(FigureArg::Latency), false) => Some(Figure::Latency),
            (Some(_), true) => {
                return Err(Error::usage(
                    "--output: a bandwidth test gives bandwidth or message_rate",
                ))
            }
            (Some(_), false) => return Err(Error::usage("--output: a latency test gives latency")),
        };
        Ok(output)
    }
}

impl TcpArgs {
    /// The spec, this side's settings and output.
    ///
    /// # Errors
    /// One line naming the flag (kind `usage`).
    pub fn to_test(&self, measure: Measure) -> Result<TestArgs, Error> {
        let r = &self.run;
        let request = TcpRequest {
            size: r.size,
            all: r.all,
            iters: r.iters,
            duration: r.duration,
            margin: r.margin,
            streams: self.streams,
            window: self.window,
            nodelay: self.nodelay,
        };
        let spec = rules::tcp(measure, &request)?;
        let test_flags = r.size.is_some()
            || r.all
            || r.iters.is_some()
            || r.duration.is_some()
            || r.margin.is_some()
            || self.streams.is_some()
            || self.window.is_some()
            || self.nodelay;
        let mut local = Local {
            follows_client: self.host.is_none() && !test_flags,
            port: self.port.unwrap_or(DEFAULT_PORT),
            timeout: self.report.timeout(self.host.is_none())?.0,
            connect_window: self.report.timeout(self.host.is_none())?.0,
            wait_forever: self.report.timeout(self.host.is_none())?.1,
            max_time: self.report.max_time.map(crate::spec::rules::max_time).transpose()?,
            pin: self.cpus.as_deref().map(parse_cpu_list).transpose()?.unwrap_or_default(),
            quiet: self.report.quiet,
            interval_lines: self
                .report
                .interval_lines(measure == Measure::Bw, self.interval_short)?,
            ..Local::default()
        };
        self.access.apply(self.host.is_some(), &mut local)?;
        let output = self.report.output(measure == Measure::Bw, self.host.is_some())?;
        Ok(TestArgs { spec, host: self.host.clone(), local, output, perftest: false })
    }
}
