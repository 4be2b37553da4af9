//! How long a test runs and how fast its sender may post: the spec's choice, and the
//! result's record of what ran (`params.run`, `params.rate_limit`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long each size runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunLength {
    /// A number of iterations per connection.
    Iterations(u64),
    /// A duration with warm-up and cool-down margins; only the middle is measured.
    Duration {
        /// Whole run, seconds.
        secs: u64,
        /// Margin at each end, milliseconds (D/4 unless `-f`: 2.5 s of `-D 10`); in the
        /// JSON `margin`, seconds (`2`, `2.5`).
        #[serde(rename = "margin", with = "margin_secs")]
        margin_ms: u64,
    },
}

/// A margin's milliseconds as seconds in JSON: whole seconds as an integer (`2`, as
/// before sub-second margins), else a fraction (`2.5`, `0.75`).
mod margin_secs {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ms: &u64, s: S) -> Result<S::Ok, S::Error> {
        if ms % 1000 == 0 {
            s.serialize_u64(ms / 1000)
        } else {
            s.serialize_f64(*ms as f64 / 1000.0)
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Secs {
        Whole(u64),
        Fraction(f64),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let bad =
            |what: String| serde::de::Error::custom(format!("margin {what}: seconds, 0 to 10^12"));
        match Secs::deserialize(d)? {
            Secs::Whole(secs) if secs <= 1_000_000_000_000 => Ok(secs * 1000),
            Secs::Fraction(secs) if (0.0..=1e12).contains(&secs) => {
                Ok((secs * 1000.0).round() as u64)
            }
            Secs::Whole(secs) => Err(bad(secs.to_string())),
            Secs::Fraction(secs) => Err(bad(secs.to_string())),
        }
    }
}

impl RunLength {
    /// The measured window of a duration run.
    pub fn window(&self) -> Option<Duration> {
        match *self {
            RunLength::Iterations(_) => None,
            RunLength::Duration { secs, margin_ms } => {
                Some(Duration::from_secs(secs).saturating_sub(Duration::from_millis(2 * margin_ms)))
            }
        }
    }

    /// Iterations per connection; `u64::MAX` in a duration run (it ends by the clock).
    pub fn iterations(&self) -> u64 {
        match *self {
            RunLength::Iterations(n) => n,
            RunLength::Duration { .. } => u64::MAX,
        }
    }

    /// `(total, margin)` of a duration run.
    pub fn duration(&self) -> Option<(Duration, Duration)> {
        match *self {
            RunLength::Duration { secs, margin_ms } => {
                Some((Duration::from_secs(secs), Duration::from_millis(margin_ms)))
            }
            RunLength::Iterations(_) => None,
        }
    }
}

/// perftest's software rate limiter (`--rate_limit`, `--rate_units`, `--burst_size`):
/// the sender posts `burst` messages back to back, then waits for the next burst's
/// time, so the average meets `rate`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    /// The limit, in `units`.
    pub rate: f64,
    /// What `rate` counts.
    pub units: RateUnits,
    /// Messages per burst (perftest's default: the send queue depth).
    pub burst: u32,
}

/// `--rate_units`: perftest's `M`, `g`, `p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateUnits {
    /// MiB/s (2^20 B/s), perftest's `M`.
    MibPerSec,
    /// Gb/s (10^9 bit/s), perftest's `g` and default.
    GbitPerSec,
    /// Messages per second, perftest's `p`.
    MsgPerSec,
}

impl RateLimit {
    /// Messages per second at `size` bytes.
    pub fn messages_per_sec(&self, size: u64) -> f64 {
        let size = size.max(1) as f64;
        match self.units {
            RateUnits::MibPerSec => self.rate * 1_048_576.0 / size,
            RateUnits::GbitPerSec => self.rate * 1e9 / (8.0 * size),
            RateUnits::MsgPerSec => self.rate,
        }
    }

    /// Time from one burst's start to the next at `size` bytes, ns (saturating).
    pub fn gap_ns(&self, size: u64) -> u64 {
        (f64::from(self.burst) / self.messages_per_sec(size) * 1e9) as u64
    }

    /// `4 MiB/s`, `10 Gb/s`, `1000 msg/s`.
    pub fn describe(&self) -> String {
        let unit = match self.units {
            RateUnits::MibPerSec => "MiB/s",
            RateUnits::GbitPerSec => "Gb/s",
            RateUnits::MsgPerSec => "msg/s",
        };
        format!("{} {unit}", self.rate)
    }
}
