//! perftest's records on the wire, encoded and checked: the 16-byte version, the
//! queue pair record ("keys": 59 bytes, or 108 with the GID) and the bandwidth report
//! (five big-endian 8-byte fields). Pure functions: the socket is [`super::wire`]'s.

use crate::error::Error;
#[cfg(target_os = "linux")]
use crate::{measure::BwStats, results::SizeResult, spec::TestSpec};

/// What rdmabench announces: perftest 5.70 and later accept it (older ones use other
/// formats), and 6.28 and later, seeing it, skip their parameter negotiation, whose
/// record carries a build-dependent `struct ibv_device_attr`.
pub const ANNOUNCED_VERSION: &str = "6.06";
/// The oldest perftest whose exchange this is.
pub const OLDEST: (u32, u32) = (5, 70);
/// `char version[16]`, NUL-padded.
pub const VERSION_LEN: usize = 16;
/// The record without a GID (InfiniBand without `-x`).
pub const KEY_LEN: usize = 59;
/// The record with the GID (RoCE always; InfiniBand with `-x`).
pub const KEY_GID_LEN: usize = 108;
/// The bandwidth report: size, iterations, peak, average, message rate.
pub const REPORT_FIELDS: usize = 5;

/// Our version string, NUL-padded.
pub fn version() -> [u8; VERSION_LEN] {
    let mut v = [0u8; VERSION_LEN];
    v[..ANNOUNCED_VERSION.len()].copy_from_slice(ANNOUNCED_VERSION.as_bytes());
    v
}

/// The peer's version, checked: printable up to the first NUL, `major.minor` as
/// perftest's `atof` reads it, and no older than [`OLDEST`].
///
/// # Errors
/// Kind `refused`: not a version (another protocol on the port), or too old.
pub fn peer_version(raw: &[u8]) -> Result<String, Error> {
    let text = raw.split(|&b| b == 0).next().unwrap_or(&[]);
    let shown = String::from_utf8_lossy(text).escape_debug().to_string();
    let not_perftest = || {
        Error::refused(format!(
            "the peer does not speak perftest's exchange: its first bytes, \"{shown}\", are no version"
        ))
    };
    let s = std::str::from_utf8(text).map_err(|_| not_perftest())?;
    let (major, minor) = s.split_once('.').ok_or_else(not_perftest)?;
    let digits = |t: &str| !t.is_empty() && t.len() <= 4 && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return Err(not_perftest());
    }
    // As atof reads it: "5.7" is 5.70, "5.100" is 5.1.
    let (maj, min): (u32, f64) =
        (major.parse().unwrap_or(0), format!("0.{minor}").parse().unwrap_or(0.0));
    let oldest_min = f64::from(OLDEST.1) / 100.0;
    if maj < OLDEST.0 || (maj == OLDEST.0 && min < oldest_min) {
        return Err(Error::refused(format!(
            "the peer is perftest {s}: its exchange predates 5.70, which rdmabench speaks (perftest says the same of older versions)"
        )));
    }
    Ok(s.to_string())
}

/// One queue pair as perftest describes it to its peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// RDMA reads this side answers at once (`-o`; 1 outside read tests).
    pub out_reads: u16,
    /// Queue pair number, 24 bits.
    pub qpn: u32,
    /// First packet sequence number, 24 bits.
    pub psn: u32,
    /// The buffer's remote key.
    pub rkey: u32,
    /// The address the peer targets.
    pub vaddr: u64,
    /// The GID, in the GID form.
    pub gid: Option<[u8; 16]>,
    /// SRQ number (XRC/DC only; 0 here).
    pub srqn: u32,
}

impl Key {
    /// The record, NUL included: `%04x:%04x:%06x:%06x:%08x:%016llx:` then, with a GID,
    /// its 16 bytes as `%02x:` each, then `%08x` (and `:` after it in the GID form).
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}",
            self.lid,
            self.out_reads,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.vaddr
        );
        match &self.gid {
            None => s.push_str(&format!(":{:08x}", self.srqn)),
            Some(gid) => {
                for b in gid {
                    s.push_str(&format!(":{b:02x}"));
                }
                s.push_str(&format!(":{:08x}:", self.srqn));
            }
        }
        let mut bytes = s.into_bytes();
        bytes.push(0);
        bytes
    }

    /// Parses a record of the form this side uses (`gid`: the 108-byte one). Every
    /// field must have its exact width of hex digits: a record that does not is named,
    /// not guessed at.
    ///
    /// # Errors
    /// Kind `refused`, quoting the record.
    pub fn decode(raw: &[u8], gid: bool) -> Result<Key, Error> {
        let len = if gid { KEY_GID_LEN } else { KEY_LEN };
        let text = raw.strip_suffix(&[0]).filter(|_| raw.len() == len);
        let shown = String::from_utf8_lossy(raw).escape_debug().to_string();
        let bad = |why: &str| {
            Error::refused(format!("the peer's queue pair record \"{shown}\" is malformed: {why}"))
        };
        let text =
            text.ok_or_else(|| bad(&format!("{} bytes, not {len} ending in NUL", raw.len())))?;
        let text = std::str::from_utf8(text).map_err(|_| bad("not ASCII"))?;
        let mut fields: Vec<&str> = text.split(':').collect();
        if gid {
            // The GID form ends with a ':'.
            if fields.pop() != Some("") {
                return Err(bad("the GID form ends with ':'"));
            }
        }
        let expected = if gid { 23 } else { 7 };
        if fields.len() != expected {
            return Err(bad(&format!("{} fields, not {expected}", fields.len())));
        }
        let hex = |i: usize, width: usize| -> Result<u64, Error> {
            let f = fields[i];
            if f.len() != width || !f.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad(&format!("field {} is \"{f}\", not {width} hex digits", i + 1)));
            }
            u64::from_str_radix(f, 16).map_err(|_| bad("a field out of range"))
        };
        let gid = if gid {
            let mut g = [0u8; 16];
            for (k, b) in g.iter_mut().enumerate() {
                *b = hex(6 + k, 2)? as u8;
            }
            Some(g)
        } else {
            None
        };
        // Widths bound every value: 4 hex digits fit u16, 6 fit 24 bits, 8 fit u32.
        Ok(Key {
            lid: hex(0, 4)? as u16,
            out_reads: hex(1, 4)? as u16,
            qpn: hex(2, 6)? as u32,
            psn: hex(3, 6)? as u32,
            rkey: hex(4, 8)? as u32,
            vaddr: hex(5, 16)?,
            gid,
            srqn: hex(expected - 1, 8)? as u32,
        })
    }
}

/// A bandwidth result as perftest's `xchg_bw_reports` carries it, in the sender's
/// report units (MB/s = 2^20 B/s, or Gb/s with `--report_gbits`; not negotiated).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BwReport {
    /// Message size, bytes.
    pub size: u64,
    /// Iterations, all queue pairs together.
    pub iters: u64,
    /// Peak bandwidth (0: not computed).
    pub peak: f64,
    /// Average bandwidth.
    pub avg: f64,
    /// Messages per second, millions.
    pub msg_rate: f64,
}

impl BwReport {
    /// The five fields, each big-endian 8 bytes, as perftest sends them one by one.
    pub fn fields(&self) -> [[u8; 8]; REPORT_FIELDS] {
        [
            self.size.to_be_bytes(),
            self.iters.to_be_bytes(),
            self.peak.to_bits().to_be_bytes(),
            self.avg.to_bits().to_be_bytes(),
            self.msg_rate.to_bits().to_be_bytes(),
        ]
    }

    /// The peer's report, checked: the size it ran, and figures that are numbers.
    ///
    /// # Errors
    /// Kind `refused`, naming the field.
    pub fn from_fields(f: &[[u8; 8]; REPORT_FIELDS], size: u64) -> Result<BwReport, Error> {
        let r = BwReport {
            size: u64::from_be_bytes(f[0]),
            iters: u64::from_be_bytes(f[1]),
            peak: f64::from_bits(u64::from_be_bytes(f[2])),
            avg: f64::from_bits(u64::from_be_bytes(f[3])),
            msg_rate: f64::from_bits(u64::from_be_bytes(f[4])),
        };
        if r.size != size {
            return Err(Error::refused(format!(
                "the peer reports {} B messages; this side ran {size} B (start both with the same -s/-a)",
                r.size
            )));
        }
        for (name, v) in [("peak", r.peak), ("average", r.avg), ("message rate", r.msg_rate)] {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::refused(format!("the peer's report has {name} {v}")));
            }
        }
        Ok(r)
    }
}

#[cfg(target_os = "linux")] // the verbs session's alone
/// A perftest report as this side's result: the figures in the units this side reports
/// in (perftest does not say which it used: both sides should be given the same).
pub(super) fn result_of(r: &BwReport, spec: &TestSpec, gbits: bool) -> SizeResult {
    let unit = unit(gbits);
    let avg = r.avg * unit;
    let bytes = r.iters.saturating_mul(r.size);
    let bw = BwStats {
        messages: r.iters,
        bytes,
        window_ns: if avg > 0.0 { (bytes as f64 / avg * 1e9) as u64 } else { 0 },
        avg_bytes_per_sec: avg,
        peak_bytes_per_sec: (r.peak > 0.0).then_some(r.peak * unit),
        min_bytes_per_sec: None,
        interval_ns: None,
        msg_rate: r.msg_rate * 1e6,
    };
    let qps = u64::from(spec.connections().max(1));
    SizeResult { size: r.size, iterations: r.iters / qps, bw: Some(bw), ..Default::default() }
}

#[cfg(target_os = "linux")] // the verbs session's alone
/// This side's result as perftest's report: iterations of all queue pairs, rates in
/// MB/s (2^20) or Gb/s, messages in millions per second.
pub(super) fn report_of(size: u64, bw: &BwStats, gbits: bool) -> BwReport {
    let unit = unit(gbits);
    BwReport {
        size,
        iters: bw.messages,
        peak: bw.peak_bytes_per_sec.unwrap_or(0.0) / unit,
        avg: bw.avg_bytes_per_sec / unit,
        msg_rate: bw.msg_rate / 1e6,
    }
}

#[cfg(target_os = "linux")] // the verbs session's alone
fn unit(gbits: bool) -> f64 {
    if gbits {
        1e9 / 8.0
    } else {
        1_048_576.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(gid: Option<[u8; 16]>) -> Key {
        Key {
            lid: 0x1,
            out_reads: 0x10,
            qpn: 0x1a2,
            psn: 0x3b4c5d,
            rkey: 0x12345,
            vaddr: 0x7f00_dead_b000,
            gid,
            srqn: 0,
        }
    }

    #[test]
    fn keys_have_perftests_layout_and_read_back() {
        let k = key(None);
        let raw = k.encode();
        assert_eq!(raw, b"0001:0010:0001a2:3b4c5d:00012345:00007f00deadb000:00000000\0".to_vec());
        assert_eq!(raw.len(), KEY_LEN);
        assert_eq!(Key::decode(&raw, false).unwrap(), k);
        let mut g = [0u8; 16];
        g[10..].copy_from_slice(&[0xff, 0xff, 198, 18, 0, 1]);
        let k = key(Some(g));
        let raw = k.encode();
        assert_eq!(raw.len(), KEY_GID_LEN);
        assert!(raw.ends_with(b":00:00:ff:ff:c6:12:00:01:00000000:\0"), "{raw:?}");
        assert_eq!(Key::decode(&raw, true).unwrap(), k);
    }

    #[test]
    fn malformed_keys_are_named_not_guessed() {
        let raw = key(None).encode();
        let e = Key::decode(&raw, true).unwrap_err();
        assert!(e.message.contains("59 bytes, not 108"), "{e}");
        let mut bad = raw.clone();
        bad[5] = b'g';
        let e = Key::decode(&bad, false).unwrap_err();
        assert!(e.message.contains("field 2 is \"g010\""), "{e}");
        let mut no_nul = raw.clone();
        no_nul[58] = b'0';
        assert!(Key::decode(&no_nul, false).is_err());
        let mut g = key(Some([0; 16])).encode();
        g[106] = b'0'; // the trailing ':' of the GID form
        let e = Key::decode(&g, true).unwrap_err();
        assert!(e.message.contains("ends with ':'"), "{e}");
    }

    #[test]
    fn versions_older_than_5_70_and_other_protocols_are_refused() {
        let raw = |s: &str| {
            let mut v = [0u8; VERSION_LEN];
            v[..s.len()].copy_from_slice(s.as_bytes());
            v
        };
        assert_eq!(peer_version(&version()).unwrap(), "6.06");
        assert_eq!(peer_version(&raw("5.70")).unwrap(), "5.70");
        assert_eq!(peer_version(&raw("6.29")).unwrap(), "6.29");
        let e = peer_version(&raw("5.60")).unwrap_err();
        assert!(e.message.contains("perftest 5.60"), "{e}");
        assert!(peer_version(&raw("5.7")).is_ok(), "atof reads 5.7 as 5.70");
        assert!(peer_version(&raw("4.99")).is_err());
        let e = peer_version(b"\x00\x00\x00\x2a{\"hello\":{\"to").unwrap_err();
        assert!(e.message.contains("does not speak perftest's exchange"), "{e}");
        assert!(peer_version(&raw("6.06abc")).is_err());
    }

    #[test]
    fn reports_are_big_endian_and_checked() {
        let r = BwReport { size: 65536, iters: 5000, peak: 0.0, avg: 1234.5, msg_rate: 0.019752 };
        let f = r.fields();
        assert_eq!(f[0], [0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(f[3], 1234.5f64.to_bits().to_be_bytes());
        assert_eq!(BwReport::from_fields(&f, 65536).unwrap(), r);
        let e = BwReport::from_fields(&f, 2).unwrap_err();
        assert!(e.message.contains("65536 B messages; this side ran 2 B"), "{e}");
        let mut nan = f;
        nan[3] = f64::NAN.to_bits().to_be_bytes();
        assert!(BwReport::from_fields(&nan, 65536).is_err());
    }
}
