//! A qualification profile (TOML; docs/qualify-profile.toml is the commented example):
//! which tests, how often, and what each must reach. Parsed and checked once, here:
//! every test becomes a validated [`TestSpec`] per size, every threshold a number, and
//! every mistake one line naming the profile's line.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::threshold::{Bandwidth, Latency, Percent};
use crate::error::Error;
use crate::files;
use crate::spec::{parse_size, rules, Measure, TestKind, TestSpec, Verb};
use crate::transport::{Backend, Service};

/// The built-in profiles, by name.
pub const BUILT_IN: &[(&str, &str)] =
    [("quick", include_str!("quick.toml")), ("sweep", include_str!("sweep.toml"))].as_slice();

/// A checked profile.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Its name (the file's `name`, else the built-in's or the file's).
    pub name: String,
    /// Where it came from: `built-in quick` or the path.
    pub source: String,
    /// What it is for.
    pub description: String,
    /// Runs per test point; the verdict judges their median.
    pub repeats: u32,
    /// Most runs of a point whose comparison with the baseline is inconclusive after
    /// `repeats` (one more at a time until it is not).
    pub max_repeats: u32,
    /// `sequential = true`: each point stops as soon as its verdict is decided (its
    /// thresholds, and against a baseline its comparison), from [`SEQUENTIAL_FLOOR`] runs
    /// on; `repeats` (or `max_repeats`) is then the cap. False: `repeats` every time.
    pub sequential: bool,
    /// How far below (bandwidth) or above (latency) the baseline a median may be.
    pub tolerance: Percent,
    /// Doctor checks whose failure does not fail the qualification (`cpu.governor`).
    pub waive: Vec<String>,
    /// The tests, in order.
    pub tests: Vec<ProfileTest>,
}

/// One `[[test]]` table.
#[derive(Clone, Debug)]
pub struct ProfileTest {
    /// Unique within the profile (`name`, default the test's id).
    pub name: String,
    /// The profile line the table starts on.
    pub line: usize,
    /// One spec per size, validated.
    pub specs: Vec<TestSpec>,
    /// What each median must reach.
    pub limits: Limits,
    /// `soak = true`: each run keeps its intervals (`--json-lines`' records, judged each),
    /// drawn in report.html.
    pub soak: bool,
}

/// A test's thresholds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    /// `min_bw`.
    pub min_bw: Option<Bandwidth>,
    /// `max_lat_typical`.
    pub max_lat_typical: Option<Latency>,
    /// `max_lat_avg`.
    pub max_lat_avg: Option<Latency>,
    /// `max_lat_p99`.
    pub max_lat_p99: Option<Latency>,
    /// `max_cpu_per_gb`: CPU-seconds per GB moved, on each side.
    pub max_cpu_per_gb: Option<f64>,
    /// `max_cv`: the result's coefficient of variation (its `stability`), at most.
    pub max_cv: Option<Percent>,
    /// `min_low_ratio`: the lowest interval over the median interval, at least (bandwidth).
    pub min_low_ratio: Option<f64>,
    /// `max_spike`: the highest interval or slowest iteration over the median, at most.
    pub max_spike: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: Option<String>,
    description: Option<String>,
    repeats: Option<Spanned<u32>>,
    max_repeats: Option<Spanned<u32>>,
    #[serde(default)]
    sequential: bool,
    tolerance: Option<Percent>,
    #[serde(default)]
    waive: Vec<String>,
    firmware: Option<FirmwareRule>,
    #[serde(default)]
    test: Vec<Spanned<RawTest>>,
}

/// `firmware = "judge" | "record"`: whether doctor's firmware check fails the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FirmwareRule {
    /// Below the minimum fails (the default).
    #[default]
    Judge,
    /// Recorded in the report, never failing: a baseline on the old firmware.
    Record,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    test: String,
    name: Option<String>,
    sizes: Option<Vec<SizeValue>>,
    iters: Option<u64>,
    duration: Option<u64>,
    qps: Option<u32>,
    streams: Option<u32>,
    connection: Option<String>,
    backend: Option<Backend>,
    tx_depth: Option<u32>,
    inline_size: Option<u32>,
    bidirectional: Option<bool>,
    min_bw: Option<Bandwidth>,
    max_lat_typical: Option<Latency>,
    max_lat_avg: Option<Latency>,
    max_lat_p99: Option<Latency>,
    max_cpu_per_gb: Option<f64>,
    max_cv: Option<Percent>,
    min_low_ratio: Option<f64>,
    max_spike: Option<f64>,
    soak: Option<bool>,
}

/// `65536` or `"64K"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeValue {
    Bytes(u64),
    Text(String),
}

/// The fewest runs a sequential point stops at (with fewer than two, a later baseline
/// comparison could never be judged: crate::stats).
pub const SEQUENTIAL_FLOOR: u32 = 2;

/// Most repeats of one point.
pub const MAX_REPEATS: u32 = 100;

/// Most `[[test]]`s of one profile (each runs `repeats` times, every size).
pub const MAX_TESTS: usize = 1000;

/// The profile `name_or_path`: a built-in name, else a file.
///
/// # Errors
/// A file that cannot be read, or a profile that does not parse or check: one line
/// naming the file and line.
pub fn load(name_or_path: &str) -> Result<Profile, Error> {
    if let Some((name, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
        return parse(text, &format!("built-in {name}"), name);
    }
    let path = std::path::Path::new(name_or_path);
    let text = files::read_text(path, files::PROFILE_LIMIT).map_err(|e| {
        if e.refused() {
            return Error::usage(format!("profile {e}"));
        }
        let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
        Error::usage(format!(
            "profile {e} (a built-in profile is one of {}, else a TOML file)",
            names.join(", ")
        ))
    })?;
    parse(&text, name_or_path, &default_name(name_or_path))
}

/// The name a profile goes by unless it sets `name`: a built-in's, else its file's stem
/// (`lab` for `/tmp/lab.toml`).
pub fn default_name(name_or_path: &str) -> String {
    let path = std::path::Path::new(name_or_path);
    path.file_stem().map_or(name_or_path.to_string(), |s| s.to_string_lossy().into_owned())
}

/// Parses and checks profile `text` from `source`.
///
/// # Errors
/// One line: `profile SOURCE line N: what is wrong`.
pub fn parse(text: &str, source: &str, default_name: &str) -> Result<Profile, Error> {
    let lines = LineIndex::new(text);
    let at = |span: Option<Range<usize>>, msg: &str| {
        let line = span.map_or(0, |s| lines.of(s.start));
        Error::usage(format!("profile {source} line {line}: {msg}"))
    };
    let raw: RawProfile = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().replace('\n', "; ");
        at(e.span(), &msg)
    })?;
    let repeats = raw.repeats.as_ref().map_or(3, |r| *r.get_ref());
    if !(1..=MAX_REPEATS).contains(&repeats) {
        let span = raw.repeats.as_ref().map(Spanned::span);
        return Err(at(span, &format!("repeats = {repeats}: between 1 and {MAX_REPEATS}")));
    }
    // Default: as many again as `repeats`.
    let max_repeats =
        raw.max_repeats.as_ref().map_or((2 * repeats).min(MAX_REPEATS), |r| *r.get_ref());
    if !(repeats..=MAX_REPEATS).contains(&max_repeats) {
        let span = raw.max_repeats.as_ref().map(Spanned::span);
        let msg =
            format!("max_repeats = {max_repeats}: between repeats ({repeats}) and {MAX_REPEATS}");
        return Err(at(span, &msg));
    }
    if raw.test.is_empty() {
        return Err(at(Some(0..0), "no [[test]]: a profile runs at least one test"));
    }
    if let Some(t) = raw.test.get(MAX_TESTS) {
        let msg = format!("more than {MAX_TESTS} [[test]]s");
        return Err(at(Some(t.span()), &msg));
    }
    let mut tests: Vec<ProfileTest> = Vec::with_capacity(raw.test.len());
    let mut names = std::collections::HashSet::new();
    for t in &raw.test {
        let test =
            test(t.get_ref(), lines.of(t.span().start)).map_err(|m| at(Some(t.span()), &m))?;
        if !names.insert(test.name.clone()) {
            let msg = format!("a second test named '{}': give one a name = \"…\"", test.name);
            return Err(at(Some(t.span()), &msg));
        }
        tests.push(test);
    }
    Ok(Profile {
        // Shown and stored as a test's name is: through the one sanitiser.
        name: crate::text::clean(raw.name.as_deref().unwrap_or(default_name)),
        source: crate::text::clean(source),
        description: crate::text::clean(&raw.description.unwrap_or_default()),
        repeats,
        max_repeats,
        sequential: raw.sequential,
        tolerance: raw.tolerance.unwrap_or(Percent(10.0)),
        waive: raw.waive,
        tests,
    }
    .with_firmware(raw.firmware.unwrap_or_default()))
}

impl Profile {
    /// `firmware = "record"` (or `--baseline-only`): doctor's firmware check is waived,
    /// so a baseline can be taken on firmware below the minimum; the report still shows
    /// its FAIL, marked waived.
    pub fn record_firmware(&mut self) {
        if !self.waive.iter().any(|w| w == FIRMWARE_CHECK) {
            self.waive.push(FIRMWARE_CHECK.to_string());
        }
    }

    fn with_firmware(mut self, rule: FirmwareRule) -> Profile {
        if rule == FirmwareRule::Record {
            self.record_firmware();
        }
        self
    }
}

/// doctor's firmware check's id.
const FIRMWARE_CHECK: &str = "firmware";

/// `qualify --print-profile NAME`: the built-in profile's TOML, exactly what loads as
/// `NAME`, onto `out`.
///
/// # Errors
/// `name` is not a built-in profile, or `out` cannot be written.
pub fn print_built_in(name: &str, out: &mut dyn std::io::Write) -> Result<u8, Error> {
    let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
        let msg = format!("--print-profile {name}: not a built-in profile ({})", names.join(", "));
        return Err(Error::usage(msg));
    };
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(format!("writing output: {e}")))?;
    Ok(0)
}

/// Where a text's lines start, to name the line of a byte offset without counting
/// from the start each time.
struct LineIndex(Vec<usize>);

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        LineIndex(text.match_indices('\n').map(|(i, _)| i).collect())
    }

    /// 1-based line of byte `offset`.
    fn of(&self, offset: usize) -> usize {
        self.0.partition_point(|&newline| newline < offset) + 1
    }
}

/// `write_bw` … `atomic_lat`, `tcp_bw`, `tcp_lat`: (kind, over TCP).
fn kind(id: &str) -> Option<(TestKind, bool)> {
    let (tcp, rest) = match id.strip_prefix("tcp_") {
        Some(m) => (true, format!("send_{m}")),
        None => (false, id.to_string()),
    };
    let (verb, measure) = rest.split_once('_')?;
    let verb = match verb {
        "write" => Verb::Write,
        "read" => Verb::Read,
        "send" => Verb::Send,
        "atomic" => Verb::Atomic,
        _ => return None,
    };
    let measure = match measure {
        "bw" => Measure::Bw,
        "lat" => Measure::Lat,
        _ => return None,
    };
    Some((TestKind { verb, measure }, tcp))
}

/// One `[[test]]` into specs, one per size, each through the tests' own rules.
fn test(t: &RawTest, line: usize) -> Result<ProfileTest, String> {
    let (kind, tcp) = kind(&t.test).ok_or_else(|| {
        format!("test = \"{}\": one of write_bw, read_bw, send_bw, atomic_bw, write_lat, read_lat, send_lat, atomic_lat, tcp_bw, tcp_lat", t.test)
    })?;
    let sizes = match &t.sizes {
        None => vec![None],
        Some(v) if v.is_empty() => return Err("sizes = []: give at least one size".into()),
        Some(v) => v
            .iter()
            .map(|s| match s {
                SizeValue::Bytes(b) => Ok(Some(*b)),
                SizeValue::Text(s) => parse_size(s).map(Some).map_err(|e| format!("sizes: {e}")),
            })
            .collect::<Result<_, _>>()?,
    };
    let rdma_only = [
        ("qps", t.qps.is_some()),
        ("connection", t.connection.is_some()),
        ("backend", t.backend.is_some()),
        ("tx_depth", t.tx_depth.is_some()),
        ("inline_size", t.inline_size.is_some()),
        ("bidirectional", t.bidirectional.is_some()),
    ];
    if tcp {
        if let Some((flag, _)) = rdma_only.iter().find(|(_, given)| *given) {
            return Err(format!("{flag}: an RDMA option, and {} runs over TCP", t.test));
        }
    } else if t.streams.is_some() {
        return Err(format!("streams: a TCP option (tcp_bw), and {} is an RDMA test", t.test));
    }
    let service = match t.connection.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None => None,
        Some("RC") => Some(Service::Rc),
        Some("UC") => Some(Service::Uc),
        Some("UD") => Some(Service::Ud),
        Some(other) => return Err(format!("connection = \"{other}\": RC, UC or UD")),
    };
    let mut specs = Vec::with_capacity(sizes.len());
    for size in sizes {
        let spec = if tcp {
            let r = rules::TcpRequest {
                size,
                iters: t.iters,
                duration: t.duration,
                streams: t.streams,
                ..Default::default()
            };
            rules::tcp(kind.measure, &r)
        } else {
            let r = rules::RdmaRequest {
                size,
                iters: t.iters,
                duration: t.duration,
                qps: t.qps,
                service,
                backend: t.backend,
                tx_depth: t.tx_depth,
                inline_size: t.inline_size,
                bidirectional: t.bidirectional.unwrap_or(false),
                ..Default::default()
            };
            rules::rdma(kind, &r)
        };
        let spec = spec
            .and_then(|s| s.validate().map(|()| s))
            .map_err(|e| format!("{}: {}", t.test, e.message))?;
        specs.push(spec);
    }
    let limits = Limits {
        min_bw: t.min_bw,
        max_lat_typical: t.max_lat_typical,
        max_lat_avg: t.max_lat_avg,
        max_lat_p99: t.max_lat_p99,
        max_cpu_per_gb: t.max_cpu_per_gb,
        max_cv: t.max_cv,
        min_low_ratio: t.min_low_ratio,
        max_spike: t.max_spike,
    };
    let lat_limits = limits.max_lat_typical.or(limits.max_lat_avg).or(limits.max_lat_p99).is_some();
    match kind.measure {
        Measure::Bw if lat_limits => {
            return Err(format!("max_lat_*: {} measures bandwidth", t.test))
        }
        Measure::Lat if limits.min_bw.is_some() => {
            return Err(format!("min_bw: {} measures latency", t.test))
        }
        Measure::Lat if limits.min_low_ratio.is_some() => {
            return Err(format!(
                "min_low_ratio: {} measures latency (its lowest is its fastest iteration: \
                 max_spike limits its slowest)",
                t.test
            ))
        }
        _ => {}
    }
    if limits.min_low_ratio.is_some_and(|r| !(r > 0.0 && r <= 1.0)) {
        return Err("min_low_ratio: the lowest interval over the median, above 0, at most 1".into());
    }
    let soak = t.soak.unwrap_or(false);
    if soak && !(kind.measure == Measure::Bw && t.duration.is_some()) {
        return Err(format!("soak: a bandwidth test with a duration, not {}", t.test));
    }
    if limits.max_spike.is_some_and(|s| !(s >= 1.0 && s.is_finite())) {
        return Err("max_spike: the highest over the median, 1 or more".into());
    }
    if limits.max_cpu_per_gb.is_some_and(|c| !(c > 0.0 && c.is_finite())) {
        return Err("max_cpu_per_gb: a positive number of CPU-seconds per GB".into());
    }
    // A test's name reaches the table, report.html, qualify.json, junit.xml and the
    // store: through the one sanitiser, once, here.
    let name = crate::text::clean(t.name.as_deref().unwrap_or(&t.test));
    if name.is_empty() {
        return Err("name: empty once its control characters are dropped".into());
    }
    Ok(ProfileTest { name, line, specs, limits, soak })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, "p.toml", "p").unwrap_err().message
    }

    fn many_tests(n: usize) -> String {
        (0..n).map(|i| format!("[[test]]\ntest = \"tcp_bw\"\nname = \"t{i}\"\n")).collect()
    }

    #[test]
    fn a_profile_of_many_tests_is_bounded_and_quick() {
        let start = std::time::Instant::now();
        let e = err(&many_tests(100_000));
        assert_eq!(
            e,
            format!("profile p.toml line {}: more than {MAX_TESTS} [[test]]s", 3 * MAX_TESTS + 1)
        );
        let p = parse(&many_tests(MAX_TESTS), "p.toml", "p").unwrap();
        assert_eq!(p.tests.len(), MAX_TESTS);
        let e = err(&format!("{}[[test]]\ntest = \"tcp_bw\"\nname = \"t7\"\n", many_tests(900)));
        assert!(e.starts_with("profile p.toml line 2701: a second test named 't7'"), "{e}");
        // Quadratic parsing took over a minute for 100 000 tests; linear takes about a
        // second here and 12 s under wine beside the fuzz run: the bound is that far off.
        assert!(start.elapsed() < std::time::Duration::from_secs(45), "{:?}", start.elapsed());
    }

    #[test]
    fn a_profile_becomes_validated_specs() {
        let p = parse(
            "name = \"lab\"\nrepeats = 2\ntolerance = \"5%\"\nwaive = [\"cpu.governor\"]\n\n[[test]]\ntest = \"write_bw\"\nsizes = [\"64K\", 1048576]\niters = 500\nmin_bw = \"100 MiB/s\"\n\n[[test]]\ntest = \"tcp_lat\"\nmax_lat_p99 = \"1 ms\"\n",
            "p.toml",
            "p",
        )
        .unwrap();
        assert_eq!(
            (p.name.as_str(), p.repeats, p.tolerance, p.waive.len()),
            ("lab", 2, Percent(5.0), 1)
        );
        assert_eq!(p.tests.len(), 2);
        let w = &p.tests[0];
        assert_eq!((w.name.as_str(), w.line), ("write_bw", 6));
        assert_eq!(w.specs.iter().map(|s| s.sizes[0]).collect::<Vec<_>>(), [65536, 1 << 20]);
        assert!(w.specs.iter().all(|s| s.id() == "write_bw"));
        assert_eq!(p.tests[1].specs[0].id(), "tcp_lat");
        assert_eq!(p.tests[1].line, 12);
    }

    #[test]
    fn errors_name_the_line() {
        let e = err("repeats = 3\n\n[[test]]\ntest = \"write_bw\"\nmin_bw = \"fast\"\n");
        assert!(e.starts_with("profile p.toml line 5:") && e.contains("fast"), "{e}");
        let e = err("[[test]]\ntest = \"write_bww\"\n");
        assert!(e.starts_with("profile p.toml line 1:") && e.contains("write_bww"), "{e}");
        let e = err("[[test]]\ntest = \"write_bw\"\nbogus = 1\n");
        assert!(e.contains("line 3") && e.contains("bogus"), "{e}");
        let e = err("repeats = 0\n[[test]]\ntest = \"write_bw\"\n");
        assert!(e.contains("line 1") && e.contains("repeats = 0"), "{e}");
        let e = err("[[test]]\ntest = \"write_bw\"\n\n[[test]]\ntest = \"write_bw\"\nqps = 5000\n");
        assert!(e.contains("line 4") && e.contains("-q"), "{e}");
        let e = err("[[test]]\ntest = \"write_bw\"\n[[test]]\ntest = \"write_bw\"\n");
        assert!(e.contains("line 3") && e.contains("second test named 'write_bw'"), "{e}");
        let e = err("[[test]]\ntest = \"write_lat\"\nmin_bw = \"1 Gb/s\"\n");
        assert!(e.contains("min_bw: write_lat measures latency"), "{e}");
        let e = err("[[test]]\ntest = \"tcp_bw\"\nqps = 2\n");
        assert!(e.contains("qps: an RDMA option"), "{e}");
        let e = err("name = \"x\"\n");
        assert!(e.contains("no [[test]]"), "{e}");
        let e = err("[[test]\n");
        assert!(e.starts_with("profile p.toml line 1:"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn stability_limits_are_read_and_checked() {
        let p = parse(
            "[[test]]\ntest = \"write_bw\"\nduration = 5\nmax_cv = \"5%\"\nmin_low_ratio = 0.8\nmax_spike = 1.5\n\n[[test]]\ntest = \"write_lat\"\nmax_cv = \"10%\"\nmax_spike = 3\n",
            "p.toml",
            "p",
        )
        .unwrap();
        let l = &p.tests[0].limits;
        assert_eq!(
            (l.max_cv, l.min_low_ratio, l.max_spike),
            (Some(Percent(5.0)), Some(0.8), Some(1.5))
        );
        assert_eq!(p.tests[1].limits.max_spike, Some(3.0));
        let e = err("[[test]]\ntest = \"write_lat\"\nmin_low_ratio = 0.5\n");
        assert!(
            e.contains("line 1") && e.contains("min_low_ratio: write_lat measures latency"),
            "{e}"
        );
        for bad in [
            "min_low_ratio = 0",
            "min_low_ratio = 1.5",
            "max_spike = 0.5",
            "max_cv = \"150%\"",
            "max_cv = 5",
        ] {
            let e = err(&format!("[[test]]\ntest = \"write_bw\"\n{bad}\n"));
            assert!(e.starts_with("profile p.toml line "), "{bad}: {e}");
        }
    }

    #[test]
    fn built_in_profiles_and_the_documented_example_parse() {
        for (name, text) in BUILT_IN {
            let p = parse(text, name, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!p.tests.is_empty());
        }
        let example = include_str!("../../docs/qualify-profile.toml");
        let p = parse(example, "docs/qualify-profile.toml", "example").unwrap();
        assert!(p.tests.iter().any(|t| t.limits.min_bw.is_some()));
        assert!(load("quick").is_ok());
        let e = load("/nonexistent/profile.toml").unwrap_err().message;
        assert!(e.contains("quick, sweep"), "{e}");
    }

    #[test]
    fn a_printed_built_in_loads_back_as_itself() {
        for (name, _) in BUILT_IN {
            let mut out = Vec::new();
            assert_eq!(print_built_in(name, &mut out).unwrap(), 0);
            let printed = String::from_utf8(out).unwrap();
            let dir = std::env::temp_dir().join(format!("rdmabench-print-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let file = dir.join(format!("{name}.toml"));
            std::fs::write(&file, &printed).unwrap();
            let again = load(file.to_str().unwrap()).unwrap();
            let built_in = load(name).unwrap();
            assert_eq!(again.name, built_in.name);
            assert_eq!((again.repeats, again.tolerance), (built_in.repeats, built_in.tolerance));
            assert_eq!(again.waive, built_in.waive);
            let shape = |p: &Profile| {
                p.tests
                    .iter()
                    .map(|t| (t.name.clone(), t.limits.clone(), t.specs.len()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(shape(&again), shape(&built_in));
            let specs = |p: &Profile| {
                p.tests
                    .iter()
                    .flat_map(|t| t.specs.iter().map(|s| format!("{s:?}")))
                    .collect::<Vec<_>>()
            };
            assert_eq!(specs(&again), specs(&built_in));
            std::fs::remove_dir_all(&dir).unwrap();
        }
        let e = print_built_in("nope", &mut Vec::new()).unwrap_err().message;
        assert_eq!(e, "--print-profile nope: not a built-in profile (quick, sweep)");
    }

    #[test]
    fn firmware_record_waives_the_firmware_check_only() {
        let base = "[[test]]\ntest = \"write_bw\"\n";
        let p = parse(&format!("firmware = \"record\"\n{base}"), "p.toml", "p").unwrap();
        assert_eq!(p.waive, ["firmware"]);
        let p = parse(&format!("firmware = \"judge\"\n{base}"), "p.toml", "p").unwrap();
        assert!(p.waive.is_empty());
        let mut p = parse(base, "p.toml", "p").unwrap();
        p.record_firmware();
        p.record_firmware();
        assert_eq!(p.waive, ["firmware"]);
        let e = err(&format!("firmware = \"skip\"\n{base}"));
        assert!(e.starts_with("profile p.toml line 1:") && e.contains("skip"), "{e}");
    }
}
