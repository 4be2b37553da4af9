//! Thresholds as a profile writes them: `"5000 MiB/s"`, `"40 Gb/s"`, `"90% link"`,
//! `"3 us"`, `"10%"`. Parsed once into numbers; a malformed one is refused while the
//! profile loads, with its line.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::measure::MIB;

/// A bandwidth floor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Bandwidth {
    /// Bytes per second.
    Absolute(f64),
    /// Percent of the port's data rate (after line encoding: 4X FDR = 54.5 Gb/s).
    OfLink(f64),
}

/// What a `% link` floor is a share of.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkRate {
    /// The port's data rate, Gb/s (after line encoding; on Ethernet the link speed).
    Gbps(f64),
    /// Not known here.
    Unknown,
    /// No physical link to take a share of, and why (`rxe0/1: soft device: no physical
    /// link`): soft-RoCE's 2.5 Gb/s is nominal, not a line the data crosses.
    NoPhysicalLink(String),
}

impl From<Option<f64>> for LinkRate {
    fn from(gbps: Option<f64>) -> LinkRate {
        gbps.map_or(LinkRate::Unknown, LinkRate::Gbps)
    }
}

/// A bandwidth floor as it applies to one link.
#[derive(Clone, Debug, PartialEq)]
pub enum Floor {
    /// Bytes per second.
    Bytes(f64),
    /// Not applicable here, and why: a `% link` floor where there is no physical link.
    NotApplicable(String),
}

impl Bandwidth {
    /// The floor in bytes/s, given the link's data rate in Gb/s (`None`: unknown).
    ///
    /// # Errors
    /// A `% link` floor on a link whose rate is unknown.
    pub fn bytes_per_sec(self, link_gbps: Option<f64>) -> Result<f64, String> {
        match self.floor(&link_gbps.into())? {
            Floor::Bytes(b) => Ok(b),
            Floor::NotApplicable(why) => Err(why),
        }
    }

    /// The floor on `link`: an absolute floor everywhere; a `% link` floor taken of the
    /// link's rate, not applicable without a physical link.
    ///
    /// # Errors
    /// A `% link` floor on a link whose rate is unknown.
    pub fn floor(self, link: &LinkRate) -> Result<Floor, String> {
        match (self, link) {
            (Bandwidth::Absolute(b), _) => Ok(Floor::Bytes(b)),
            (Bandwidth::OfLink(pct), LinkRate::Gbps(g)) => {
                Ok(Floor::Bytes(g * 1e9 / 8.0 * pct / 100.0))
            }
            (Bandwidth::OfLink(_), LinkRate::NoPhysicalLink(why)) => {
                Ok(Floor::NotApplicable(format!("n/a: {why}")))
            }
            (Bandwidth::OfLink(_), LinkRate::Unknown) => {
                Err(format!("{self}: the link's data rate is unknown here"))
            }
        }
    }
}

impl TryFrom<String> for Bandwidth {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        let bad = || {
            format!(
                "'{text}' is not a bandwidth (like \"5000 MiB/s\", \"40 Gb/s\" or \"90% link\")"
            )
        };
        let t = text.trim();
        if let Some(pct) = t.strip_suffix("link").map(str::trim).and_then(|p| p.strip_suffix('%')) {
            let pct: f64 = pct.trim().parse().map_err(|_| bad())?;
            return (pct > 0.0 && pct <= 100.0).then_some(Bandwidth::OfLink(pct)).ok_or_else(bad);
        }
        let (value, unit) = split_unit(t).ok_or_else(bad)?;
        let scale = match unit {
            "B/s" => 1.0,
            "KiB/s" => 1024.0,
            "MiB/s" => MIB,
            "GiB/s" => MIB * 1024.0,
            "KB/s" => 1e3,
            "MB/s" => 1e6,
            "GB/s" => 1e9,
            "Mb/s" => 1e6 / 8.0,
            "Gb/s" => 1e9 / 8.0,
            _ => return Err(bad()),
        };
        Ok(Bandwidth::Absolute(value * scale))
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bandwidth::Absolute(b) => write!(f, "{:.2} MiB/s", b / MIB),
            Bandwidth::OfLink(p) => write!(f, "{p}% link"),
        }
    }
}

impl From<Bandwidth> for String {
    fn from(b: Bandwidth) -> String {
        b.to_string()
    }
}

/// A latency ceiling, µs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Latency(pub f64);

impl TryFrom<String> for Latency {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        let bad = || format!("'{text}' is not a latency (like \"3 us\", \"800 ns\" or \"1.5 ms\")");
        let (value, unit) = split_unit(text.trim()).ok_or_else(bad)?;
        let us = match unit {
            "ns" => value / 1e3,
            "us" | "µs" | "usec" => value,
            "ms" => value * 1e3,
            "s" => value * 1e6,
            _ => return Err(bad()),
        };
        Ok(Latency(us))
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2} us", self.0)
    }
}

impl From<Latency> for String {
    fn from(l: Latency) -> String {
        l.to_string()
    }
}

/// A percentage (`"10%"`), 0 to 100.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Percent(pub f64);

impl TryFrom<String> for Percent {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        let v: f64 = text
            .trim()
            .strip_suffix('%')
            .and_then(|v| v.trim().parse().ok())
            .filter(|v: &f64| (0.0..=100.0).contains(v))
            .ok_or_else(|| format!("'{text}' is not a percentage from 0% to 100%"))?;
        Ok(Percent(v))
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

impl From<Percent> for String {
    fn from(p: Percent) -> String {
        p.to_string()
    }
}

/// `5000 MiB/s` → (5000, "MiB/s"); the number must be positive and finite.
fn split_unit(text: &str) -> Option<(f64, &str)> {
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let value: f64 = text[..end].parse().ok()?;
    (value > 0.0 && value.is_finite()).then(|| (value, text[end..].trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bw(t: &str) -> Result<Bandwidth, String> {
        Bandwidth::try_from(t.to_string())
    }

    #[test]
    fn bandwidths_in_every_unit_labs_write() {
        assert_eq!(bw("5000 MiB/s"), Ok(Bandwidth::Absolute(5000.0 * MIB)));
        assert_eq!(bw("40 Gb/s"), Ok(Bandwidth::Absolute(5e9)));
        assert_eq!(bw("1.5GB/s"), Ok(Bandwidth::Absolute(1.5e9)));
        assert_eq!(bw("90% link"), Ok(Bandwidth::OfLink(90.0)));
        assert_eq!(bw("90 % link"), Ok(Bandwidth::OfLink(90.0)));
        for bad in ["fast", "5000", "-1 MiB/s", "0 MiB/s", "150% link", "5 furlongs/s", ""] {
            assert!(bw(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn percent_of_link_needs_the_link_rate() {
        // 4X FDR: 54.545 Gb/s of data; 90 % of it.
        let b = Bandwidth::OfLink(90.0).bytes_per_sec(Some(54.545)).unwrap();
        assert!((b - 54.545e9 / 8.0 * 0.9).abs() < 1.0);
        assert!(Bandwidth::OfLink(90.0).bytes_per_sec(None).unwrap_err().contains("unknown"));
        assert_eq!(Bandwidth::Absolute(10.0).bytes_per_sec(None), Ok(10.0));
    }

    #[test]
    fn percent_of_link_is_not_applicable_without_a_physical_link() {
        let soft = LinkRate::NoPhysicalLink("rxe0/1: soft device: no physical link".into());
        assert_eq!(
            Bandwidth::OfLink(90.0).floor(&soft),
            Ok(Floor::NotApplicable("n/a: rxe0/1: soft device: no physical link".into()))
        );
        // An absolute floor still holds there.
        assert_eq!(Bandwidth::Absolute(10.0).floor(&soft), Ok(Floor::Bytes(10.0)));
        assert_eq!(Bandwidth::OfLink(50.0).floor(&LinkRate::Gbps(8.0)), Ok(Floor::Bytes(5e8)));
        assert!(Bandwidth::OfLink(50.0).floor(&LinkRate::Unknown).is_err());
    }

    #[test]
    fn latencies_and_percentages() {
        assert_eq!(Latency::try_from("3 us".to_string()), Ok(Latency(3.0)));
        assert_eq!(Latency::try_from("800ns".to_string()), Ok(Latency(0.8)));
        assert_eq!(Latency::try_from("1.5 ms".to_string()), Ok(Latency(1500.0)));
        assert!(Latency::try_from("3".to_string()).is_err());
        assert_eq!(Percent::try_from("10%".to_string()), Ok(Percent(10.0)));
        assert!(Percent::try_from("10".to_string()).is_err());
        assert!(Percent::try_from("101%".to_string()).is_err());
    }
}
