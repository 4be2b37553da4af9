//! After a size ran: each side's CPU window closes, the leading side's measurement
//! (the client's; the server's under `--reversed`) goes to the other, the target checks
//! the pattern, and both sides end with the same result to print (with `-b`, both
//! directions and their sum).

use crate::error::Error;
use crate::measure;
use crate::measure::cpu::{self, CpuSnapshot};
use crate::measure::stability::StabilityUnit;
use crate::results::{SizeResult, Validation};
use crate::session::protocol::{Channel, Message};
use crate::spec::{RunLength, Verb};
use crate::transport::Connection;

use crate::perf::payload::{check_pattern, check_sum, merge};
use crate::spec::role::Role;
use crate::spec::TestSpec;

/// What the exchange needs of this side's step: the test, this side's part in it, and
/// its CPU clock (MHz, for cycles per byte).
#[derive(Clone, Copy)]
pub struct ThisSide<'a> {
    /// The test.
    pub spec: &'a TestSpec,
    /// This side's part.
    pub role: Role,
    /// CPU clock, MHz.
    pub mhz: Option<f64>,
}

/// Exchanges this side's `local` result with the peer; returns what both print.
///
/// # Errors
/// The control channel failing, or the peer sending something else.
pub fn exchange<C: Connection>(
    s: &ThisSide<'_>,
    ch: &mut Channel,
    conns: &[C],
    mut local: SizeResult,
    cpu_before: &CpuSnapshot,
    slots: u32,
) -> Result<SizeResult, Error> {
    // Each side's CPU window ends here: the leader's with its loop, the other's when
    // the leader's result arrives. Each fills its own side's slot.
    let peers = if s.role.client { "the server's result" } else { "the client's result" };
    let mut shown = if s.role.leads {
        *local.cpu.side_mut(s.role.client) = Some(cpu_cost(cpu_before, &local, s.mhz));
        ch.send(&Message::Result { result: local.clone() })?;
        local.clone()
    } else {
        // The leader may measure alone for a long run, beating every second.
        let result = match ch.recv_while_peer_works(peers)? {
            Message::Result { result } => plausible(local.size, result)?,
            other => return Err(unexpected(&other)),
        };
        *local.cpu.side_mut(s.role.client) = Some(cpu_cost(cpu_before, &result, s.mhz));
        result
    };
    let validation =
        if s.role.pattern_target { validate(s, conns, local.size, slots) } else { None };
    if s.role.leads {
        let other = recv_result(ch, peers, local.size)?;
        shown.validation = match other.validation {
            Some(v) => merge(validation, v),
            None => validation,
        };
        *shown.cpu.side_mut(!s.role.client) = other.cpu.side(!s.role.client);
        if other.received_bytes.is_some() {
            shown.received_bytes = other.received_bytes;
        }
        if s.spec.bidirectional() {
            if let (Some(mine), Some(theirs)) = (local.bw, other.bw) {
                shown.directions = Some([mine, theirs]);
                shown.bw = Some(measure::aggregate(&[(mine, 0), (theirs, 0)]));
            }
        }
        ch.send(&Message::Result { result: shown.clone() })?;
        Ok(shown)
    } else {
        local.validation = validation;
        let size = local.size;
        ch.send(&Message::Result { result: local })?;
        // The leader's final view, so both sides print the same numbers.
        recv_result(ch, "the final result", size)
    }
}

fn recv_result(
    ch: &mut Channel,
    waiting_for: &'static str,
    size: u64,
) -> Result<SizeResult, Error> {
    match ch.recv(waiting_for)? {
        Message::Result { result } => plausible(size, result),
        other => Err(unexpected(&other)),
    }
}

/// Fastest rate a peer may claim, bytes/s: 10 TB/s, a hundred times any link's.
pub const MAX_PLAUSIBLE_RATE: f64 = 1e13;
/// Longest time a peer may claim for one operation, µs: a day.
pub const MAX_PLAUSIBLE_US: f64 = 86_400e6;
/// Longest CPU window a peer may claim, seconds: a day.
pub const MAX_PLAUSIBLE_WINDOW_S: f64 = 86_400.0;
/// Most CPU a peer may claim busy, percent of one CPU: every CPU a list may name
/// ([`MAX_CPUS`](crate::facts::cpus::MAX_CPUS)) busy.
pub const MAX_PLAUSIBLE_PERCENT: f64 = 100.0 * crate::facts::cpus::MAX_CPUS as f64;
/// Largest ratio of CPU to work a peer may claim (CPU seconds per GB, cycles per
/// byte, µs per message): a day of every CPU for one byte, rounded up.
pub const MAX_PLAUSIBLE_RATIO: f64 = 1e20;
/// Fastest CPU clock a peer may claim, MHz.
pub const MAX_PLAUSIBLE_MHZ: f64 = 1e5;

/// The peer's result, if it is one for `size` whose figures can be true: finite, not
/// negative, under [`MAX_PLAUSIBLE_RATE`] and [`MAX_PLAUSIBLE_US`]; its CPU figures
/// within a day's window, [`MAX_PLAUSIBLE_PERCENT`], [`MAX_PLAUSIBLE_RATIO`] and
/// [`MAX_PLAUSIBLE_MHZ`]. A server logs the client's figures, and qualify judges both
/// sides' CPU, so a forged one ends the test instead. Every limit on a peer's figures
/// is here.
///
/// # Errors
/// Kind `refused`, naming the figure refused and its value.
fn plausible(size: u64, r: SizeResult) -> Result<SizeResult, Error> {
    let bad = |what: &str| Err(Error::refused(format!("the peer's result: {what}")));
    if r.size != size {
        return bad(&format!("for {} B, not the {size} B just run", r.size));
    }
    if r.partial {
        // Only ever this side's own, kept when its run failed: never exchanged.
        return bad("marked partial, which an exchanged result never is");
    }
    let rates = r.bw.iter().chain(&r.per_qp).chain(&r.per_thread);
    let rates = rates.chain(r.directions.iter().flatten());
    for bw in rates {
        let figures = [
            ("avg_bytes_per_sec", Some(bw.avg_bytes_per_sec)),
            ("peak_bytes_per_sec", bw.peak_bytes_per_sec),
            ("min_bytes_per_sec", bw.min_bytes_per_sec),
        ];
        if let Some((name, f)) = outside(&figures, MAX_PLAUSIBLE_RATE) {
            return bad(&format!("a bandwidth out of range ({name} {} B/s)", shown(f)));
        }
        if !in_range(bw.msg_rate * size.max(1) as f64, MAX_PLAUSIBLE_RATE) {
            return bad(&format!(
                "a message rate out of range (msg_rate {} /s)",
                shown(bw.msg_rate)
            ));
        }
    }
    if let Some(lat) = &r.lat {
        let times = [
            ("t_min_us", Some(lat.t_min_us)),
            ("t_max_us", Some(lat.t_max_us)),
            ("t_typical_us", Some(lat.t_typical_us)),
            ("t_avg_us", Some(lat.t_avg_us)),
            ("t_stdev_us", Some(lat.t_stdev_us)),
            ("p99_us", Some(lat.p99_us)),
            ("p99_9_us", Some(lat.p99_9_us)),
            ("p99_99_us", Some(lat.p99_99_us)),
        ];
        if let Some((name, t)) = outside(&times, MAX_PLAUSIBLE_US) {
            return bad(&format!("a latency out of range ({name} {} usec)", shown(t)));
        }
    }
    if let Some(st) = &r.stability {
        let max = match st.unit {
            StabilityUnit::BytesPerSec => MAX_PLAUSIBLE_RATE,
            StabilityUnit::Us => MAX_PLAUSIBLE_US,
        };
        let figures = [
            ("lowest", Some(st.lowest)),
            ("median", Some(st.median)),
            ("highest", Some(st.highest)),
            ("p99", st.p99),
            ("p99_9", st.p99_9),
        ];
        let ratios = [("cv", Some(st.cv)), ("spike", Some(st.spike))];
        if let Some((name, f)) =
            outside(&figures, max).or_else(|| outside(&ratios, MAX_PLAUSIBLE_RATIO))
        {
            return bad(&format!("a stability figure out of range ({name} {})", shown(f)));
        }
    }
    for c in [r.cpu.client, r.cpu.server].iter().flatten() {
        let checks: [(Named<'_>, f64); 5] = [
            (&[("window_s", Some(c.window_s))], MAX_PLAUSIBLE_WINDOW_S),
            (&[("cores", Some(f64::from(c.cores)))], crate::facts::cpus::MAX_CPUS as f64),
            (
                &[
                    ("busy_percent", Some(c.busy_percent)),
                    ("user_percent", Some(c.user_percent)),
                    ("system_percent", Some(c.system_percent)),
                    ("irq_percent", Some(c.irq_percent)),
                    ("softirq_percent", Some(c.softirq_percent)),
                    ("process_percent", Some(c.process_percent)),
                ],
                MAX_PLAUSIBLE_PERCENT,
            ),
            (
                &[
                    ("process_user_s", Some(c.process_user_s)),
                    ("process_system_s", Some(c.process_system_s)),
                    ("cpu_s_per_gb", c.cpu_s_per_gb),
                    ("cycles_per_byte", c.cycles_per_byte),
                    ("cpu_us_per_message", c.cpu_us_per_message),
                ],
                MAX_PLAUSIBLE_RATIO,
            ),
            (&[("cpu_mhz", c.cpu_mhz)], MAX_PLAUSIBLE_MHZ),
        ];
        for (figures, max) in checks {
            if let Some((name, f)) = outside(figures, max) {
                return bad(&format!("a CPU figure out of range ({name} {})", shown(f)));
            }
        }
    }
    Ok(r)
}

/// Figures by name, a refusal's words.
type Named<'a> = &'a [(&'a str, Option<f64>)];

/// The first of the named `figures` that is present and not finite, negative or over
/// `max`.
fn outside<'a>(figures: &[(&'a str, Option<f64>)], max: f64) -> Option<(&'a str, f64)> {
    figures.iter().filter_map(|&(name, f)| Some((name, f?))).find(|&(_, f)| !in_range(f, max))
}

/// A refused figure in words: `-1`, `7.5`, `1e308` (not 309 digits).
fn shown(f: f64) -> String {
    if f.is_finite() && f != 0.0 && !(1e-6..1e15).contains(&f.abs()) {
        format!("{f:e}")
    } else {
        format!("{f}")
    }
}

fn in_range(f: f64, max: f64) -> bool {
    f.is_finite() && (0.0..=max).contains(&f)
}

fn unexpected(m: &Message) -> Error {
    Error::refused(format!("control channel: expected result, got {}", m.name()))
}

/// The target's check: the pattern in each QP's buffer, or the atomic counter's sum.
fn validate<C: Connection>(
    s: &ThisSide<'_>,
    conns: &[C],
    size: u64,
    slots: u32,
) -> Option<Validation> {
    let checked = match s.spec.run {
        RunLength::Iterations(n) => Some(n),
        RunLength::Duration { .. } => None,
    };
    let mut validation = None;
    for (q, c) in conns.iter().enumerate() {
        let v = if s.spec.kind.verb == Verb::Atomic {
            check_sum(c.local(), checked)
        } else {
            check_pattern(c.local(), q, size, checked.unwrap_or(0).min(u64::from(slots)))
        };
        validation = merge(validation, v);
    }
    validation
}

/// The CPU cost of this side's window, given what the size moved (the client's
/// figures: bandwidth × window, or the latency samples).
pub(crate) fn cpu_cost(before: &CpuSnapshot, moved: &SizeResult, mhz: Option<f64>) -> cpu::CpuCost {
    let after = CpuSnapshot::now();
    let window = after.secs_since(before);
    let (bytes, messages) = match (&moved.bw, &moved.lat) {
        (Some(bw), _) => ((bw.avg_bytes_per_sec * window) as u64, (bw.msg_rate * window) as u64),
        // Latency tests: a cost per message; per byte says nothing about 2-byte ping-pongs.
        (None, Some(lat)) => (0, lat.samples),
        (None, None) => (0, 0),
    };
    cpu::cost(before, &after, bytes, messages, mhz)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Stability;

    #[test]
    fn a_peers_stability_figures_are_checked_as_its_others() {
        let with =
            |st: Stability| SizeResult { size: 8, stability: Some(st), ..Default::default() };
        let steady = Stability {
            lowest: 4e9,
            median: 5e9,
            highest: 6e9,
            cv: 0.1,
            spike: 1.2,
            ..Default::default()
        };
        assert!(plausible(8, with(steady.clone())).is_ok());
        let forged = Stability { highest: f64::INFINITY, ..steady.clone() };
        let err = plausible(8, with(forged)).unwrap_err();
        assert!(err.message.contains("stability figure out of range (highest inf)"), "{err}");
        let negative = Stability { cv: -1.0, ..steady.clone() };
        assert!(plausible(8, with(negative)).is_err());
        // A latency's microseconds: a day at most.
        let slow = Stability { unit: StabilityUnit::Us, p99: Some(1e12), ..steady };
        assert!(plausible(8, with(slow)).unwrap_err().message.contains("p99"));
    }

    #[test]
    fn a_peers_result_marked_partial_is_refused() {
        let whole = SizeResult { size: 8, ..Default::default() };
        assert!(plausible(8, whole.clone()).is_ok());
        let err = plausible(8, SizeResult { partial: true, ..whole }).unwrap_err();
        assert!(err.message.contains("marked partial"), "{err}");
    }
}
