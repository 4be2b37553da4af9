//! `--interval`'s lines (iperf3's `-i`): a bandwidth loop's marks printed as the run
//! goes, on the sending side, one line each; TCP streams send theirs to the thread that
//! started them, which prints them marked with the stream's number. `--json-lines`
//! records the same marks, each whole interval judged by the run's [`SoakWatch`].

use std::collections::VecDeque;
use std::io::Write;
use std::sync::mpsc::Sender;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::soak::SoakWatch;
use crate::measure::MIB;
use crate::perf::loops::{IntervalMark, Pulse};
use crate::spec::IntervalLines;

/// A loop's [`Pulse`] that also prints its interval marks.
pub(crate) struct IntervalPrinter<'a, P> {
    inner: P,
    lines: Option<&'a IntervalLines>,
    size: u64,
    watch: Option<&'a mut SoakWatch>,
}

impl<'a, P: Pulse> IntervalPrinter<'a, P> {
    /// Around `inner`, for messages of `size` bytes; `watch` judges each interval.
    pub(crate) fn new(
        inner: P,
        lines: Option<&'a IntervalLines>,
        size: u64,
        watch: Option<&'a mut SoakWatch>,
    ) -> Self {
        IntervalPrinter { inner, lines, size, watch }
    }
}

impl<P: Pulse> Pulse for IntervalPrinter<'_, P> {
    const BEATS: bool = P::BEATS;
    fn alive(&mut self, now: Instant) -> bool {
        self.inner.alive(now)
    }
    fn interval(&mut self, mark: IntervalMark) {
        let Some(lines) = self.lines else { return };
        tell(lines, &mark, self.size, None, self.watch.as_deref_mut());
    }
}

/// An interval that ended: its line printed (`--interval`), its record appended
/// (`--json-lines`; judged by `watch`, given for the whole run's intervals, not a
/// stream's of several). A closed pipe or a full disk ends no run: the table and JSON
/// still come.
pub(crate) fn tell(
    lines: &IntervalLines,
    mark: &IntervalMark,
    size: u64,
    stream: Option<usize>,
    watch: Option<&mut SoakWatch>,
) {
    if lines.text {
        print_line(lines, &interval_line(mark, size, lines.gbits, stream));
    }
    record(lines, mark, size, stream, watch);
}

/// An interval's `--json-lines` record appended, judged by `watch` if given.
pub(crate) fn record(
    lines: &IntervalLines,
    mark: &IntervalMark,
    size: u64,
    stream: Option<usize>,
    watch: Option<&mut SoakWatch>,
) {
    let Some(path) = &lines.json_lines else { return };
    let time = crate::stamp::utc_now_millis();
    let mut record = interval_record(mark, size, stream, &time);
    if let Some(watch) = watch {
        watch.judge(&mut record, bytes_per_sec(mark, size), &time);
    }
    let _ = crate::files::append_line(path, &Value::Object(record).to_string());
}

fn bytes_per_sec(mark: &IntervalMark, size: u64) -> f64 {
    let secs = mark.end_ns.saturating_sub(mark.start_ns).max(1) as f64 / 1e9;
    mark.messages.saturating_mul(size) as f64 / secs
}

/// One `--json-lines` record: `{"time", "stream", "start_s", "end_s", "messages",
/// "bytes", "bytes_per_sec", "msg_rate"}`.
fn interval_record(
    mark: &IntervalMark,
    size: u64,
    stream: Option<usize>,
    time: &str,
) -> Map<String, Value> {
    let secs = mark.end_ns.saturating_sub(mark.start_ns).max(1) as f64 / 1e9;
    let record = json!({
        "time": time,
        "stream": stream,
        "start_s": mark.start_ns as f64 / 1e9,
        "end_s": mark.end_ns as f64 / 1e9,
        "messages": mark.messages,
        "bytes": mark.messages.saturating_mul(size),
        "bytes_per_sec": bytes_per_sec(mark, size),
        "msg_rate": mark.messages as f64 / secs,
    });
    match record {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Several streams' k-th intervals added up as each stream's arrives: the whole run's
/// k-th interval once every stream has told its own (a stream's marks come in order).
pub(crate) struct StreamSums {
    /// Marks seen from each stream.
    seen: Vec<usize>,
    /// The intervals some streams have told, from the oldest: how many, their sum.
    partial: VecDeque<(usize, IntervalMark)>,
    /// The index of `partial`'s first.
    first: usize,
}

impl StreamSums {
    pub(crate) fn new(streams: usize) -> Self {
        StreamSums { seen: vec![0; streams], partial: VecDeque::new(), first: 0 }
    }

    /// Stream `k`'s next mark; the whole interval it completes, if it does.
    pub(crate) fn add(&mut self, k: usize, mark: IntervalMark) -> Option<IntervalMark> {
        let index = *self.seen.get(k)?;
        self.seen[k] += 1;
        let at = index.checked_sub(self.first)?;
        while self.partial.len() <= at {
            let empty = IntervalMark { start_ns: u64::MAX, end_ns: 0, messages: 0 };
            self.partial.push_back((0, empty));
        }
        let (told, sum) = &mut self.partial[at];
        *told += 1;
        sum.start_ns = sum.start_ns.min(mark.start_ns);
        sum.end_ns = sum.end_ns.max(mark.end_ns);
        sum.messages += mark.messages;
        // Only the stream that told last can complete the oldest, and only it.
        if self.partial.front().is_some_and(|(told, _)| *told == self.seen.len()) {
            self.first += 1;
            return self.partial.pop_front().map(|(_, sum)| sum);
        }
        None
    }
}

/// Prints one interval line where `lines` says.
fn print_line(lines: &IntervalLines, line: &str) {
    let _ = if lines.to_stderr {
        writeln!(std::io::stderr(), "{line}")
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").and_then(|()| out.flush())
    };
}

/// A stream thread's [`Pulse`]: sends its marks, with its index, to the thread that
/// prints them.
pub(crate) struct MarkSender {
    tx: Sender<(usize, IntervalMark)>,
    stream: usize,
}

impl MarkSender {
    pub(crate) fn new(tx: Sender<(usize, IntervalMark)>, stream: usize) -> Self {
        MarkSender { tx, stream }
    }
}

impl Pulse for MarkSender {
    const BEATS: bool = false;
    fn alive(&mut self, _: Instant) -> bool {
        true
    }
    fn interval(&mut self, mark: IntervalMark) {
        // The printer gone (the run failing) loses only lines.
        let _ = self.tx.send((self.stream, mark));
    }
}

/// `[  0.00-  1.00 sec]  123456789 bytes    117.74 MiB/sec   0.0613 Mpps`
pub(crate) fn interval_line(
    mark: &IntervalMark,
    size: u64,
    gbits: bool,
    stream: Option<usize>,
) -> String {
    let secs = mark.end_ns.saturating_sub(mark.start_ns).max(1) as f64 / 1e9;
    let bytes = mark.messages * size;
    let (rate, unit) = if gbits {
        (bytes as f64 * 8.0 / 1e9 / secs, "Gb/sec")
    } else {
        (bytes as f64 / MIB / secs, "MiB/sec")
    };
    let prefix = stream.map_or(String::new(), |k| format!("[stream {k}] "));
    format!(
        "{prefix}[{:>7.2}-{:>7.2} sec] {bytes:>14} bytes {rate:>10.2} {unit} {:>9.4} Mpps",
        mark.start_ns as f64 / 1e9,
        mark.end_ns as f64 / 1e9,
        mark.messages as f64 / secs / 1e6,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_gives_the_intervals_bytes_and_rates() {
        let mark = IntervalMark { start_ns: 1_000_000_000, end_ns: 2_000_000_000, messages: 1024 };
        let line = interval_line(&mark, 1024, false, None);
        assert_eq!(
            line,
            "[   1.00-   2.00 sec]        1048576 bytes       1.00 MiB/sec    0.0010 Mpps"
        );
        let line = interval_line(&mark, 1024, true, Some(2));
        assert!(
            line.starts_with("[stream 2] [   1.00-") && line.contains(" 0.01 Gb/sec"),
            "{line}"
        );
    }

    #[test]
    fn a_record_is_one_line_of_json_with_its_time() {
        let mark = IntervalMark { start_ns: 1_000_000_000, end_ns: 1_500_000_000, messages: 1024 };
        let record =
            Value::Object(interval_record(&mark, 1024, Some(2), "2026-12-05T13:45:01.250Z"))
                .to_string();
        assert!(!record.contains('\n'), "{record}");
        let r: serde_json::Value = serde_json::from_str(&record).unwrap();
        assert_eq!((&r["time"], &r["stream"]), (&"2026-12-05T13:45:01.250Z".into(), &2.into()));
        assert_eq!((r["start_s"].as_f64(), r["end_s"].as_f64()), (Some(1.0), Some(1.5)));
        assert_eq!((&r["messages"], &r["bytes"]), (&1024.into(), &1_048_576.into()));
        // A MiB in half a second; 1024 messages in half a second.
        assert_eq!(
            (r["bytes_per_sec"].as_f64(), r["msg_rate"].as_f64()),
            (Some(2_097_152.0), Some(2048.0))
        );
        let one = Value::Object(interval_record(&mark, 1024, None, "t")).to_string();
        assert!(one.contains("\"stream\":null"), "{one}");
    }

    #[test]
    fn several_streams_make_a_whole_interval_once_each_has_told_its_own() {
        let mark = |start_ns, end_ns, messages| IntervalMark { start_ns, end_ns, messages };
        let mut sums = StreamSums::new(2);
        assert_eq!(sums.add(0, mark(0, 1_000, 10)), None);
        // Stream 0 runs ahead by an interval: nothing whole until stream 1 tells its first.
        assert_eq!(sums.add(0, mark(1_000, 2_000, 20)), None);
        assert_eq!(sums.add(1, mark(0, 1_010, 5)), Some(mark(0, 1_010, 15)));
        assert_eq!(sums.add(1, mark(1_010, 2_000, 7)), Some(mark(1_000, 2_000, 27)));
        assert_eq!(sums.add(1, mark(2_000, 3_000, 1)), None);
        assert_eq!(sums.add(0, mark(2_000, 3_005, 2)), Some(mark(2_000, 3_005, 3)));
        assert_eq!(sums.add(7, mark(0, 1, 1)), None, "no such stream");
    }
}
