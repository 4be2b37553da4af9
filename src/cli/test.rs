//! The test flags turned into one test on this side ([`TestArgs`]): perftest's
//! request to `spec::rules`, this side's settings, the output and its thresholds.

use std::time::Duration;

use super::args::{AtomicArg, FigureArg, PerfArgs, RateUnitsArg, ReportArgs, TcpArgs, TestArgs};
use crate::counters::CounterSelection;
use crate::error::Error;
use crate::spec::rules::{self, RdmaRequest, TcpRequest};
use crate::spec::{
    parse_cpu_list, AtomicType, Figure, IntervalLines, Local, Measure, Output, RateUnits,
    SampleOrder, TestKind, DEFAULT_PORT,
};
use crate::transport::Backend;

/// `--timeout`'s default, seconds: also each step's bound under a server's `--timeout 0`.
const DEFAULT_TIMEOUT: u64 = 30;

impl ReportArgs {
    /// The output and thresholds (checked against the test by [`TestArgs::validate`]).
    fn output(&self, client: bool) -> Result<Output, Error> {
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
    /// without an interval); their rules are [`TestArgs::validate`]'s.
    fn interval_lines(&self, short: Option<f64>) -> Result<Option<IntervalLines>, Error> {
        let asked = self.interval.or(short);
        if asked.is_none() && self.json_lines.is_none() {
            return Ok(None);
        }
        let secs = asked.unwrap_or(1.0);
        // Only what cannot be a Duration (negative, NaN, huge) is refused here.
        let every = Duration::try_from_secs_f64(secs).map_err(|_| {
            let (low, high) = crate::spec::INTERVAL_RANGE;
            let range = format!("from {} to {} seconds", low.as_secs_f64(), high.as_secs_f64());
            Error::usage(format!("--interval {secs}: {range}"))
        })?;
        Ok(Some(IntervalLines {
            every,
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
        }
        if self.report_both && !self.bidirectional {
            return Err(Error::usage("--report-both: reports the two directions of a -b run"));
        }
        if self.rate_limit_type.is_some() && self.rate_limit.is_none() {
            return Err(Error::usage("--rate_limit_type SW: only with --rate_limit"));
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
        local.pin = match &self.pin_cores {
            Some(list) => parse_cpu_list(list).map_err(|_| {
                Error::usage(format!("--pin_cores '{list}': a CPU list like 0,2-3"))
            })?,
            None => Vec::new(),
        };
        local.numa_node = self.numa_node;
        local.threads = self.threads.unwrap_or(1);
        local.interval_lines = self.report.interval_lines(None)?;
        let mut output = self.limits(self.report.output(self.host.is_some())?)?;
        output.samples = match (self.unsorted, self.histogram) {
            (true, _) => Some(SampleOrder::Unsorted),
            (false, true) => Some(SampleOrder::Sorted),
            (false, false) => None,
        };
        local.keep_samples = output.samples.is_some();
        if let Some(lines) = &mut local.interval_lines {
            // -w/--limit_bw is the same floor.
            lines.min_bw = output.min_bw;
        }
        let test =
            TestArgs { spec, host: self.host.clone(), local, output, perftest: self.perftest };
        test.validate()?;
        Ok(test)
    }

    /// perftest's verifier limits (`-w`, `-y`) onto the output's thresholds.
    fn limits(&self, mut output: Output) -> Result<Output, Error> {
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
        output.only = self.output.map(|f| match f {
            FigureArg::Bandwidth => Figure::Bandwidth,
            FigureArg::MessageRate => Figure::MessageRate,
            FigureArg::Latency => Figure::Latency,
        });
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
            interval_lines: self.report.interval_lines(self.interval_short)?,
            ..Local::default()
        };
        self.access.apply(self.host.is_some(), &mut local)?;
        let output = self.report.output(self.host.is_some())?;
        let test = TestArgs { spec, host: self.host.clone(), local, output, perftest: false };
        test.validate()?;
        Ok(test)
    }
}
