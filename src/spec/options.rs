//! What one side's own settings ([`Local`]) and output ([`Output`]) may be for the
//! test it runs, checked once: the command line's flags and a program's hand-built
//! [`TestOptions`] meet the same rules and get the same typed errors. (What both sides
//! agree on is [`TestSpec::validate`]'s.)

use std::time::Duration;

use super::{Local, Measure, Output, RunLength, TestOptions, TestSpec};
use crate::error::{Error, Refusal};

/// Most samples `-H`/`-U` keep: 64 MiB of them.
pub const MAX_LISTED_SAMPLES: u64 = 1 << 23;

/// The shortest and longest interval of `--interval` and `--json-lines`.
pub const INTERVAL_RANGE: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(3600));

impl TestOptions {
    /// The spec, this side's settings and its output, each against the others.
    ///
    /// # Errors
    /// The first rule broken, naming its flag (kind `usage`).
    pub fn validate(&self) -> Result<(), Error> {
        self.spec.validate()?;
        self.local.validate_for(&self.spec)?;
        self.output.validate_for(&self.spec)?;
        self.check_rails()?;
        if self.spec.rdma().is_some_and(|r| r.run_infinitely)
            && (self.output.only.is_some() || self.local.rails())
        {
            let with = if self.local.rails() { "several devices (-d A,B)" } else { "--output" };
            return Err(Error::refusal(
                Refusal::not_with("--run_infinitely", with),
                "--run_infinitely: prints its table as it goes (not with --output or several devices)",
            ));
        }
        if self.perftest {
            if self.local.auth.is_some() {
                let why = "--perftest: perftest has no --auth-key";
                return Err(Error::refusal(Refusal::not_with("--auth-key", "--perftest"), why));
            }
            if self.local.rails() {
                let why = "--perftest: one device (perftest runs one rail)";
                return Err(Error::refusal(Refusal::not_with("-d", "--perftest"), why));
            }
            if self.local.threads > 1 {
                let why = format!(
                    "--threads {}: not with --perftest (perftest runs its QPs on one thread)",
                    self.local.threads
                );
                return Err(Error::refusal(Refusal::not_with("--threads", "--perftest"), why));
            }
        }
        Ok(())
    }

    /// What a multi-rail run (`-d` naming several devices) cannot give: a per-size
    /// table of its own (`-W`, `--output`) or one run to store.
    fn check_rails(&self) -> Result<(), Error> {
        if !self.local.rails() {
            return Ok(());
        }
        let (flag, why) = if self.local.counters.is_some() {
            ("-W", "-W: one device (rails print no per-size table)")
        } else if self.output.only.is_some() {
            ("--output", "--output: one device (rails print their own table)")
        } else if self.output.store.is_some() {
            (
                "--store",
                "--store: one device (a multi-rail run is not recorded in the results store): record each rail's own run (-d DEVICE --store), or keep the rails' --json FILE",
            )
        } else {
            return Ok(());
        };
        Err(Error::refusal(Refusal::not_with(flag, "several devices (-d A,B)"), why))
    }
}

impl Local {
    /// This side's settings against the test: pinning, threads, intervals, samples, and
    /// what NetworkDirect cannot take.
    ///
    /// # Errors
    /// The first rule broken, naming its flag.
    pub fn validate_for(&self, spec: &TestSpec) -> Result<(), Error> {
        if !self.pin.is_empty() && self.numa_node.is_some() {
            return Err(Error::refusal(
                Refusal::exclusive("--pin_cores", "--numa_node"),
                "--pin_cores and --numa_node: one of them says where to run",
            ));
        }
        self.check_threads(spec)?;
        self.check_intervals(spec)?;
        if self.keep_samples {
            check_samples(spec)?;
        }
        if spec.rdma().is_some_and(|r| r.backend == crate::transport::Backend::Nd) {
            super::validate::nd_local_rules(self)?;
        }
        Ok(())
    }

    /// `--threads T`: a bandwidth test's queue pairs over T threads, at most one a QP.
    fn check_threads(&self, spec: &TestSpec) -> Result<(), Error> {
        let t = self.threads;
        if t == 1 {
            return Ok(());
        }
        let flag = "--threads";
        let refused =
            |rule: Refusal, why: &str| Err(Error::refusal(rule, format!("{flag} {t}: {why}")));
        let rdma = spec.rdma();
        if t == 0 {
            return refused(Refusal::range(flag), "at least 1");
        }
        if spec.kind.measure != Measure::Bw {
            let why = "only bandwidth tests (a latency test runs one QP)";
            return refused(Refusal::not_this_test(flag, spec.kind.id()), why);
        }
        if rdma.is_none() {
            let why = "only RDMA tests (TCP's streams each have a thread: -P)";
            return refused(Refusal::not_this_test(flag, spec.kind.id()), why);
        }
        let qps = spec.connections();
        if t > qps {
            return refused(
                Refusal::range(flag),
                &format!("more threads than queue pairs (-q {qps})"),
            );
        }
        let r = rdma.expect("checked above");
        let (with, why) = if spec.bidirectional() {
            ("-b", "not with -b (each QP both sends and receives on one thread)")
        } else if r.run_infinitely {
            ("--run_infinitely", "not with --run_infinitely")
        } else if r.shared_receives {
            ("--use-srq", "not with --use-srq (the QPs share one receive queue)")
        } else if self.rails() {
            ("-d", "one device")
        } else {
            return Ok(());
        };
        refused(Refusal::not_with(flag, with), why)
    }

    /// `--interval` and `--json-lines`: bandwidth tests only, 0.1 s to an hour, a file.
    fn check_intervals(&self, spec: &TestSpec) -> Result<(), Error> {
        let Some(lines) = &self.interval_lines else { return Ok(()) };
        let flag = if lines.text { "--interval" } else { "--json-lines" };
        if spec.kind.measure != Measure::Bw {
            return Err(Error::refusal(
                Refusal::not_this_test(flag, spec.kind.id()),
                format!("{flag}: only bandwidth tests have intervals"),
            ));
        }
        if lines.json_lines.as_deref().is_some_and(crate::files::is_stdout) {
            return Err(Error::refusal(
                Refusal::range("--json-lines"),
                "--json-lines: a file (stdout carries the table)",
            ));
        }
        let (low, high) = INTERVAL_RANGE;
        if !(low..=high).contains(&lines.every) {
            return Err(Error::refusal(
                Refusal::range("--interval"),
                format!("--interval {}: from 0.1 to 3600 seconds", lines.every.as_secs_f64()),
            ));
        }
        Ok(())
    }
}

/// `-H`/`-U` (every latency sample kept): a latency test of at most
/// [`MAX_LISTED_SAMPLES`] iterations.
fn check_samples(spec: &TestSpec) -> Result<(), Error> {
    let flag = "-H/-U";
    if spec.kind.measure != Measure::Lat {
        return Err(Error::refusal(
            Refusal::not_this_test(flag, spec.kind.id()),
            "-H/-U: only latency tests have samples to list",
        ));
    }
    match spec.run {
        RunLength::Duration { .. } => Err(Error::refusal(
            Refusal::not_with(flag, "-D"),
            "-H/-U: a -D run keeps no samples (use -n)",
        )),
        RunLength::Iterations(n) if n > MAX_LISTED_SAMPLES => Err(Error::refusal(
            Refusal::range("-n"),
            format!("-H/-U: at most {MAX_LISTED_SAMPLES} iterations (every sample is kept)"),
        )),
        RunLength::Iterations(_) => Ok(()),
    }
}

impl Output {
    /// The thresholds and the one figure against what the test measures.
    ///
    /// # Errors
    /// The first rule broken, naming its flag.
    pub fn validate_for(&self, spec: &TestSpec) -> Result<(), Error> {
        let bw = spec.kind.measure == Measure::Bw;
        let test = spec.kind.id();
        // Each threshold, whether it needs a bandwidth test, and why it does not fit.
        for (flag, v, needs_bw, only) in [
            (
                "--min-bw (-w/--limit_bw)",
                self.min_bw,
                true,
                "only bandwidth tests have a bandwidth",
            ),
            ("--max-lat", self.max_lat, false, "only latency tests have a latency"),
            ("-y/--limit_msgrate", self.min_msg_rate, true, "only bandwidth tests have one"),
        ] {
            let Some(v) = v else { continue };
            if needs_bw != bw {
                return Err(Error::refusal(
                    Refusal::not_this_test(flag, test),
                    format!("{flag}: {only}"),
                ));
            }
            if !v.is_finite() || v < 0.0 {
                return Err(Error::refusal(
                    Refusal::range(flag),
                    format!("{flag}: a number, 0 or more"),
                ));
            }
        }
        if self.samples.is_some() {
            check_samples(spec)?;
        }
        match self.only {
            Some(f) if f.is_bandwidth() != bw => {
                let why = if bw {
                    "--output: a bandwidth test gives bandwidth or message_rate"
                } else {
                    "--output: a latency test gives latency"
                };
                Err(Error::refusal(Refusal::not_this_test("--output", test), why))
            }
            _ => Ok(()),
        }
    }
}
