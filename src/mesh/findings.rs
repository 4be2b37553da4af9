//! Which links a mesh reports, and why it can be believed: a link is *suspect* when its
//! figure leaves the robust band of its peers, and a suspect is *confirmed* only when the
//! same link, measured again alone (no other pair running), leaves the band again.
//!
//! The band. A link's peers are the mesh's other links of its kind: between two hosts,
//! or within one (loopback through the device), since the two are not alike. The band's
//! centre is the median of the *better half* of the peers, and its width the median
//! absolute deviation (MAD) of that half, scaled (×1.4826) to a standard deviation. Not
//! the median of all: one bad host of three is an end of four links of six, and the
//! plain median would then be the bad figure. A link is suspect only past all of:
//! - [`MADS`] scaled MADs from the centre (the mesh's own noise);
//! - for latency, `--lat-ratio` times the centre and `--lat-floor` µs above it (a
//!   scheduler tick on a busy host is milliseconds against microseconds: the rerun alone
//!   tells it from a bad link);
//! - for bandwidth, `--outlier` percent: a byte takes over 1 + PCT/100 times as long.
//!
//! A host's links are judged together too, by bandwidth: a host whose links' median is
//! below `--outlier` percent of the median of the other hosts' medians (the *host band*)
//! makes each of its links below that limit a suspect. One bad host pulls every other
//! host's median only half-way (half their links are good) and its own all the way, so it
//! stands out where single links are lost in noise: with three hosts the better-half band
//! holds a bad link, and on a noisy fabric a 0.7× link is inside its peers' spread.
//! [`HOST_BAND_MIN_HOSTS`] hosts at least; from [`HOST_BAND_MAD_HOSTS`] others on, the
//! limit is also [`MADS`] scaled MADs of their medians below the centre; [`host_suspects`].
//!
//! `--min-bw` is judged the same way: below it first, and below it again alone.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::ranks::{host_of, LinkResult, RankInfo};

/// Scaled MADs between the band's centre and its edge.
pub const MADS: f64 = 4.0;

/// The host band needs this many hosts (a host against the median of two others at least).
pub const HOST_BAND_MIN_HOSTS: usize = 3;

/// From this many other hosts on, the host band is widened by their medians' MADs too.
pub const HOST_BAND_MAD_HOSTS: usize = 8;

/// Which figures fail the run (`--judge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Judge {
    /// Bandwidth only (latency is measured and shown).
    Bw,
    /// Latency only.
    Lat,
    /// Both.
    Both,
}

impl Judge {
    fn bw(self) -> bool {
        self != Judge::Lat
    }

    fn lat(self) -> bool {
        self != Judge::Bw
    }
}

/// What a link is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// `--min-bw`, MB/s.
    pub min_bw: Option<f64>,
    /// `--outlier`: a bandwidth suspect is slower than the band's centre by more than
    /// this percent (time per byte).
    pub outlier_pct: f64,
    /// `--lat-ratio`: a latency suspect is more than this many times the centre.
    pub lat_ratio: f64,
    /// `--lat-floor`: and more than this many µs above it.
    pub lat_floor_usec: f64,
    /// `--judge`.
    pub judge: Judge,
    /// `--recheck`: at most this many pairs measured again alone (the worst first).
    pub recheck_max: usize,
    /// `-n`: the iterations each link's test ran (null: a `-D` run, or the tests'
    /// defaults). Fewer than [`FULL_RUN`] widen the bands ([`Thresholds::widening`]).
    #[serde(default)]
    pub iterations: Option<u64>,
    /// `--recheck-length`: a recheck runs this many times the first measurement's
    /// iterations (null: [`super::recheck::times`]' choice for the job's size).
    #[serde(default)]
    pub recheck_length: Option<u32>,
}

/// A run of this many iterations or more is judged by the bands as given; a shorter one's
/// figures are noisier, and its bands' floors (`--outlier`, `--lat-floor`) widen by
/// √(FULL_RUN / n): ×3.2 at `-n 100`, ×7.1 at `-n 20`.
pub const FULL_RUN: u64 = 1000;

impl Thresholds {
    /// How much the bands' floors widen for the run's length: √(FULL_RUN / n), at least
    /// 1 (the mean of n iterations is noisy as 1/√n; a median much the same).
    pub fn widening(&self) -> f64 {
        self.iterations.map_or(1.0, |n| (FULL_RUN as f64 / n.max(1) as f64).sqrt().max(1.0))
    }

    /// `--outlier` as a fraction, widened for the run's length.
    fn outlier(&self) -> f64 {
        self.outlier_pct / 100.0 * self.widening()
    }

    /// `--lat-floor`, µs, widened for the run's length.
    fn lat_floor(&self) -> f64 {
        self.lat_floor_usec * self.widening()
    }
}

impl Default for Thresholds {
    /// The command line's defaults.
    fn default() -> Self {
        Thresholds {
            min_bw: None,
            outlier_pct: 25.0,
            lat_ratio: 3.0,
            lat_floor_usec: 50.0,
            judge: Judge::Both,
            recheck_max: 32,
            iterations: None,
            recheck_length: None,
        }
    }
}

/// Where a kind of link's figures are expected: past `limit` a link is suspect.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Band {
    /// `bw` (MB/s, higher is better) or `lat` (t_typical µs, lower is better).
    pub metric: &'static str,
    /// Between hosts (`inter`) or within one (`intra`).
    pub peers: &'static str,
    /// How many links it was drawn from.
    pub links: usize,
    /// The median of the better half of the peers.
    pub centre: f64,
    /// That half's median absolute deviation, ×1.4826.
    pub mad: f64,
    /// The suspect side of this is suspect (below for bandwidth, above for latency).
    pub limit: f64,
}

impl Band {
    fn lower_is_better(&self) -> bool {
        self.metric == "lat"
    }

    /// The figure is past the limit.
    pub fn outside(&self, v: f64) -> bool {
        if self.lower_is_better() {
            v > self.limit
        } else {
            v < self.limit
        }
    }

    /// How many times slower than the centre (≥ 1 when slower).
    pub fn times(&self, v: f64) -> f64 {
        if self.lower_is_better() {
            v / self.centre
        } else {
            self.centre / v
        }
    }
}

/// The bands of a mesh: per metric, for links between hosts and within one.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Bands {
    /// Bandwidth between hosts.
    pub bw_inter: Option<Band>,
    /// Bandwidth within a host.
    pub bw_intra: Option<Band>,
    /// Latency between hosts.
    pub lat_inter: Option<Band>,
    /// Latency within a host.
    pub lat_intra: Option<Band>,
}

impl Bands {
    /// The bands of `links` (figures of failed tests left out).
    pub fn of(ranks: &[RankInfo], links: &[LinkResult], t: Thresholds) -> Bands {
        let figures = |bw: bool, intra: bool| -> Vec<f64> {
            links
                .iter()
                .filter(|l| same_host(ranks, l.from, l.to) == intra)
                .filter_map(|l| if bw { l.bw_mb_per_sec } else { l.t_typical_usec })
                .collect()
        };
        Bands {
            bw_inter: band("bw", "inter", figures(true, false), t),
            bw_intra: band("bw", "intra", figures(true, true), t),
            lat_inter: band("lat", "inter", figures(false, false), t),
            lat_intra: band("lat", "intra", figures(false, true), t),
        }
    }

    /// The band a link is judged in.
    pub fn of_link(&self, ranks: &[RankInfo], l: &LinkResult, bw: bool) -> Option<Band> {
        self.between(bw, same_host(ranks, l.from, l.to))
    }

    /// The band of bandwidths (`bw`) or latencies between hosts, or within one.
    pub fn between(&self, bw: bool, same_host: bool) -> Option<Band> {
        match (bw, same_host) {
            (true, false) => self.bw_inter,
            (true, true) => self.bw_intra,
            (false, false) => self.lat_inter,
            (false, true) => self.lat_intra,
        }
    }
}

/// Both ends on one host (the same name and device: one NIC).
pub fn same_host(ranks: &[RankInfo], a: usize, b: usize) -> bool {
    match (ranks.get(a), ranks.get(b)) {
        (Some(a), Some(b)) => a.host == b.host && a.device == b.device,
        _ => false,
    }
}

/// The band of `values` (None when there are none).
pub fn band(
    metric: &'static str,
    peers: &'static str,
    mut values: Vec<f64>,
    t: Thresholds,
) -> Option<Band> {
    values.retain(|v| v.is_finite() && *v > 0.0);
    if values.is_empty() {
        return None;
    }
    let lower_is_better = metric == "lat";
    values.sort_by(f64::total_cmp);
    if !lower_is_better {
        values.reverse();
    }
    let links = values.len();
    let better = &values[..links.div_ceil(2)];
    let centre = median(better);
    let mad = 1.4826 * median(&better.iter().map(|v| (v - centre).abs()).collect::<Vec<_>>());
    let limit = if lower_is_better {
        (centre + MADS * mad).max(centre * t.lat_ratio).max(centre + t.lat_floor())
    } else {
        (centre - MADS * mad).min(centre / (1.0 + t.outlier()))
    };
    Some(Band { metric, peers, links, centre, mad, limit })
}

/// The median of sorted or unsorted `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A link reported: suspect, then confirmed (or not) by its rerun alone; or a failed test.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Client rank.
    pub from: usize,
    /// Its host.
    pub from_host: String,
    /// Its device.
    pub from_device: String,
    /// Server rank.
    pub to: usize,
    /// Its host.
    pub to_host: String,
    /// Its device.
    pub to_device: String,
    /// `bw_outlier`, `latency_outlier`, `min_bw` or `error`.
    pub check: &'static str,
    /// The figure in the mesh (MB/s or µs; null for an error).
    pub figure: Option<f64>,
    /// The band it left.
    pub band: Option<Band>,
    /// The figure measured again alone (null: not measured again yet, or not at all).
    pub rerun: Option<f64>,
    /// Slow again alone (an error: always). Only a confirmed finding fails the run.
    pub confirmed: bool,
    /// One line naming both ends, the figures and the outcome.
    pub message: String,
}

impl Finding {
    /// `l` suspect by `check` (its message written once all are found).
    fn suspect(
        ranks: &[RankInfo],
        l: &LinkResult,
        check: &'static str,
        figure: Option<f64>,
        band: Option<Band>,
    ) -> Finding {
        let ((from_host, from_device), (to_host, to_device)) =
            (host(ranks, l.from), host(ranks, l.to));
        Finding {
            from: l.from,
            from_host,
            from_device,
            to: l.to,
            to_host,
            to_device,
            check,
            figure,
            band,
            rerun: None,
            confirmed: false,
            message: String::new(),
        }
    }
}

/// The suspects and failed tests of `links`, none confirmed yet (errors are).
pub fn suspects(
    ranks: &[RankInfo],
    links: &[LinkResult],
    bands: &Bands,
    t: Thresholds,
) -> Vec<Finding> {
    let mut found = Vec::new();
    for l in links {
        let new = |check, figure, band| Finding::suspect(ranks, l, check, figure, band);
        if let Some(e) = &l.error {
            let mut f = new("error", None, None);
            f.confirmed = true;
            f.message = format!("{}: {e}", link_name(ranks, l.from, l.to));
            found.push(f);
        }
        if let (Some(v), Some(min)) = (l.bw_mb_per_sec, t.min_bw) {
            if v < min && t.judge.bw() {
                found.push(new("min_bw", Some(v), None));
            }
        }
        for bw in [true, false] {
            if (bw && !t.judge.bw()) || (!bw && !t.judge.lat()) {
                continue;
            }
            let v = if bw { l.bw_mb_per_sec } else { l.t_typical_usec };
            if let (Some(v), Some(b)) = (v, bands.of_link(ranks, l, bw)) {
                if b.outside(v) {
                    found.push(new(
                        if bw { "bw_outlier" } else { "latency_outlier" },
                        Some(v),
                        Some(b),
                    ));
                }
            }
        }
    }
    for bw in [true, false] {
        if (bw && !t.judge.bw()) || (!bw && !t.judge.lat()) {
            continue;
        }
        let check = if bw { "bw_outlier" } else { "latency_outlier" };
        for (l, band) in host_suspects(ranks, links, t, bw) {
            let seen = found.iter().any(|f| {
                f.from == l.from && f.to == l.to && (f.check == check || bw && f.check == "min_bw")
            });
            // A slow host's link that its link band found too is judged alone by the band
            // that found the host, when that one's limit is nearer the centre: a 0.7×
            // host's links sit past its host band's limit, and past the link band's (drawn
            // from a whole fabric's noise) only now and then, so against the link band
            // its reruns were seldom slow enough (docs/mesh.md#at-scale).
            let same = |f: &&mut Finding| f.from == l.from && f.to == l.to && f.check == check;
            if let Some(f) = found.iter_mut().find(same) {
                if f.band.is_some_and(|b| b.peers != "host" && band.outside(b.limit)) {
                    f.band = Some(band);
                }
            }
            if !seen {
                let v = if bw { l.bw_mb_per_sec } else { l.t_typical_usec };
                found.push(Finding::suspect(ranks, l, check, v, Some(band)));
            }
        }
    }
    for f in &mut found {
        if f.check != "error" {
            f.message = message(ranks, f, t);
        }
    }
    found
}

/// The links between hosts that the host band makes suspect, each with the band of its
/// slow host (`peers` `host`: `centre` the other hosts' median, `links` the host's
/// links). A host is slow when the median of its links' figures (to and from other
/// hosts) is worse than the median of the other hosts' medians by more than `--outlier`:
/// a byte, or a round trip (`bw` false), takes over 1 + PCT/100 times as long, and for
/// latency `--lat-floor` µs longer too. Not `--lat-ratio`: that is for one link, which
/// a scheduler tick can slow a thousandfold; a median of a host's links is not, and a
/// bad host of three pulls the others' medians half-way to its own (a 50 ms delay on one
/// of three guests: 28 ms against the others' 17 ms).
pub fn host_suspects<'a>(
    ranks: &[RankInfo],
    links: &'a [LinkResult],
    t: Thresholds,
    bw: bool,
) -> Vec<(&'a LinkResult, Band)> {
    let (names, index) = host_of(ranks);
    if names.len() < HOST_BAND_MIN_HOSTS {
        return Vec::new();
    }
    let host = |r: usize| index.get(r).copied();
    let figure = |l: &LinkResult| if bw { l.bw_mb_per_sec } else { l.t_typical_usec };
    let mut per_host: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for l in links {
        let (Some(a), Some(b), Some(v)) = (host(l.from), host(l.to), figure(l)) else {
            continue;
        };
        if a != b && v.is_finite() && v > 0.0 {
            per_host[a].push(v);
            per_host[b].push(v);
        }
    }
    let medians: Vec<Option<f64>> =
        per_host.iter().map(|v| (!v.is_empty()).then(|| median(v))).collect();
    let mut found = Vec::new();
    for (h, own) in medians.iter().enumerate() {
        let others: Vec<f64> =
            medians.iter().enumerate().filter(|&(o, _)| o != h).filter_map(|(_, m)| *m).collect();
        let Some(own) = *own else { continue };
        if others.len() + 1 < HOST_BAND_MIN_HOSTS {
            continue;
        }
        let centre = median(&others);
        // With enough hosts their medians' own spread widens the band, as the link band's
        // MADs do: hosts of few links each (a ring) on a noisy fabric spread widely.
        let mad = if others.len() >= HOST_BAND_MAD_HOSTS {
            1.4826 * median(&others.iter().map(|m| (m - centre).abs()).collect::<Vec<_>>())
        } else {
            0.0
        };
        // Not widened for a short run: a host's median over its links is steadier than
        // one link (a three-guest run under load ~19 lost its delayed guest when it was:
        // 40 ms against the others' 27, inside 1.79× and not 1.25×).
        let longer = 1.0 + t.outlier_pct / 100.0;
        let (metric, limit) = if bw {
            ("bw", (centre / longer).min(centre - MADS * mad))
        } else {
            ("lat", (centre * longer).max(centre + t.lat_floor_usec).max(centre + MADS * mad))
        };
        let band = Band { metric, peers: "host", links: per_host[h].len(), centre, mad, limit };
        if !band.outside(own) {
            continue;
        }
        for l in links {
            let ends = (host(l.from), host(l.to));
            let of_h = ends.0 != ends.1 && (ends.0 == Some(h) || ends.1 == Some(h));
            if of_h && figure(l).is_some_and(|v| band.outside(v)) {
                found.push((l, band));
            }
        }
    }
    found
}

/// Each suspect with its best figure alone from `reruns` (the highest bandwidth, the
/// lowest latency), confirmed when even that is slow (outside the same band, or below
/// `--min-bw`).
pub fn confirm(ranks: &[RankInfo], suspects: &mut [Finding], reruns: &[LinkResult], t: Thresholds) {
    // Each link's best figures alone, found once (a large job's thousands of suspects
    // against every try's reruns: benches/mesh_sim.rs).
    let mut best: BTreeMap<(usize, usize), (Option<f64>, Option<f64>)> = BTreeMap::new();
    for l in reruns {
        let (bw, lat) = best.entry((l.from, l.to)).or_default();
        *bw = [*bw, l.bw_mb_per_sec].into_iter().flatten().reduce(f64::max);
        *lat = [*lat, l.t_typical_usec].into_iter().flatten().reduce(f64::min);
    }
    for f in suspects.iter_mut().filter(|f| f.check != "error") {
        let bw = f.check != "latency_outlier";
        let figures = best.get(&(f.from, f.to)).copied().unwrap_or_default();
        let rerun = if bw { figures.0 } else { figures.1 };
        let confirmed = match (rerun, f.band) {
            (Some(v), Some(b)) => b.outside(v),
            (Some(v), None) => t.min_bw.is_some_and(|m| v < m),
            (None, _) => false,
        };
        if (rerun, confirmed) != (f.rerun, f.confirmed) || f.message.is_empty() {
            (f.rerun, f.confirmed) = (rerun, confirmed);
            f.message = message(ranks, f, t);
        }
    }
}

/// `rank 0 (node1 rxe0) → rank 3 (node3 rxe0)`.
pub fn link_name(ranks: &[RankInfo], from: usize, to: usize) -> String {
    let name = |r: usize| ranks.get(r).map_or_else(|| format!("rank {r}"), RankInfo::name);
    format!("{} → {}", name(from), name(to))
}

fn host(ranks: &[RankInfo], r: usize) -> (String, String) {
    ranks.get(r).map_or_else(|| ("?".into(), "?".into()), |r| (r.host.clone(), r.device.clone()))
}

/// `8.0 ms` or `23.7 µs`; `3170 MB/s`, or `0.26 MB/s` below 10 (a slow lab link's
/// figure is not 0).
pub fn figure(v: f64, bw: bool) -> String {
    if bw && v.abs() < 10.0 {
        format!("{v:.2} MB/s")
    } else if bw {
        format!("{v:.0} MB/s")
    } else if v >= 1000.0 {
        format!("{:.1} ms", v / 1000.0)
    } else {
        format!("{v:.1} µs")
    }
}

/// `339×`, `1.9×`.
fn times(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}×")
    } else {
        format!("{x:.1}×")
    }
}

/// `rank 0 (…) → rank 3 (…): t_typical 8.0 ms vs 23.7 µs for its peers, 339×; confirmed
/// alone: 7.9 ms`.
fn message(ranks: &[RankInfo], f: &Finding, t: Thresholds) -> String {
    let bw = f.check != "latency_outlier";
    let what = if bw { "BW" } else { "t_typical" };
    let mut o = format!("{}: ", link_name(ranks, f.from, f.to));
    let v = f.figure.unwrap_or(f64::NAN);
    match f.band {
        Some(b) => {
            let _ = write!(
                o,
                "{what} {} vs {} for its peers, {} slower",
                figure(v, bw),
                figure(b.centre, bw),
                times(b.times(v))
            );
        }
        None => {
            let _ = write!(
                o,
                "BW {} is below --min-bw {}",
                figure(v, true),
                figure(t.min_bw.unwrap_or(0.0), true)
            );
        }
    }
    match (f.rerun, f.confirmed) {
        (Some(r), true) => {
            let _ = write!(o, "; confirmed alone: {}", figure(r, bw));
        }
        (Some(r), false) => {
            let _ = write!(o, "; not confirmed: {} alone", figure(r, bw));
        }
        (None, _) => o.push_str("; not measured again alone"),
    }
    o
}

#[cfg(test)]
mod tests;
