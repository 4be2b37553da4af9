use super::*;
use crate::measure::cpu::{CpuCost, CpuSides};
use crate::measure::{BwStats, LatStats};
use crate::spec::Verb;

fn series(id: &str, m: Measure) -> Series {
    Series {
        id: id.into(),
        label: id.to_uppercase(),
        kind: TestKind { verb: Verb::Write, measure: m },
        tcp: false,
        streams: 1,
    }
}

fn report() -> CompareReport {
    let bw = |mib: f64, cpu: f64| SizeResult {
        size: 0,
        iterations: 10,
        bw: Some(BwStats { avg_bytes_per_sec: mib * MIB, ..Default::default() }),
        cpu: CpuSides {
            client: Some(CpuCost { cpu_s_per_gb: Some(cpu), ..Default::default() }),
            server: Some(CpuCost { cpu_s_per_gb: Some(cpu / 2.0), ..Default::default() }),
        },
        ..Default::default()
    };
    let lat = |us: f64| SizeResult {
        lat: Some(LatStats { t_typical_us: us, ..Default::default() }),
        ..Default::default()
    };
    let row = |s: &str, size, result, error: Option<&str>| Row {
        series: s.into(),
        size,
        result,
        error: error.map(|e| Error::new(crate::error::ErrorKind::Refused, e)),
    };
    CompareReport {
        schema_version: 1,
        kind: "compare",
        tool: "rdmabench test".into(),
        server: "127.0.0.1".into(),
        started: "2026-11-30T00:00:00Z".into(),
        environment: None,
        sizes: vec![2, 65536],
        series: vec![
            series("a_bw", Measure::Bw),
            series("b_bw", Measure::Bw),
            series("c_lat", Measure::Lat),
        ],
        rows: vec![
            row("a_bw", 2, Some(bw(1.0, 4.0)), None),
            row("a_bw", 65536, Some(bw(600.0, 0.2)), None),
            row("b_bw", 2, None, Some("the peer stopped: \"boom\"")),
            row("b_bw", 65536, Some(bw(300.0, 1.0)), None),
            row("c_lat", 2, Some(lat(12.5)), None),
            row("c_lat", 65536, Some(lat(80.0)), None),
        ],
    }
}

#[test]
fn the_table_puts_series_side_by_side_and_names_failures() {
    let t = table(&report());
    let bw_row = t.lines().find(|l| l.trim_start().starts_with("64K")).unwrap();
    assert_eq!(bw_row.split_whitespace().collect::<Vec<_>>(), ["64K", "600.0", "300.0"]);
    assert!(t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["2", "1.00", "FAIL"]));
    assert!(t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["2", "12.50"]));
    // CPU block: client 4 + server 2.
    assert!(t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["2", "6.00", "FAIL"]));
    assert!(t.contains("1 of 6 points failed") && t.contains("b_bw 2 B: the peer stopped"));
}

#[test]
fn points_that_failed_the_same_way_share_one_line() {
    let mut r = report();
    let why = |m: &str| Some(Error::new(crate::error::ErrorKind::Usage, m));
    (r.rows[0].result, r.rows[0].error) = (None, why("no RDMA stack on this machine"));
    (r.rows[1].result, r.rows[1].error) = (None, why("no RDMA stack on this machine"));
    let t = table(&r);
    let lines: Vec<&str> = t.lines().skip_while(|l| !l.contains("points failed")).collect();
    assert_eq!(
        lines,
        [
            " 3 of 6 points failed:",
            "   a_bw 2 B and 1 more point: no RDMA stack on this machine",
            "   b_bw 2 B: the peer stopped: \"boom\"",
        ],
        "{t}"
    );
}

#[test]
fn the_page_lists_each_failures_reason_not_only_its_tooltip() {
    let mut r = report();
    r.rows[3].error = Some(Error::new(crate::error::ErrorKind::Refused, "<b>late</b>"));
    let page = html(&r, &[]);
    let list = &page[page.find("<h2>Failures</h2>").expect("a failures section")..];
    assert!(
        list.contains("<li><b>b_bw 2 B</b>: the peer stopped: &quot;boom&quot;</li>"),
        "{list}"
    );
    assert!(list.contains("<li><b>b_bw 65536 B</b>: &lt;b&gt;late&lt;/b&gt;</li>"), "{list}");
    assert!(page.contains("<h1>RDMA vs TCP</h1>"));
    // No RDMA series (--tcp-only): the page says what it compares; no failure, no list.
    let mut tcp = report();
    tcp.rows[2].error = None;
    tcp.series.iter_mut().for_each(|s| s.tcp = true);
    let page = html(&tcp, &[]);
    assert!(page.contains("<h1>TCP</h1>") && !page.contains("Failures"), "{page}");
}

#[test]
fn csv_reads_back_as_written_with_one_record_per_point() {
    let mut r = report();
    let nasty = "the peer said: \"no, not now\"\nsecond line, with a comma";
    r.rows[2].error.as_mut().unwrap().message = nasty.into();
    // Intervals of 500 and 700 MiB/s after 3 of warm-up: CV 1/6, spike 7/6.
    r.rows[1].result.as_mut().unwrap().stability =
        Stability::of_intervals(&[500.0 * MIB, 700.0 * MIB], 1_000_000_000, 3);
    let text = csv(&r);
    let mut reader = ::csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().clone();
    assert_eq!(header.len(), 25);
    assert_eq!((&header[18], &header[19]), ("error", "stability_cv"));
    let records: Vec<::csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), r.rows.len());
    assert!(records.iter().all(|rec| rec.len() == 25));
    assert_eq!(
        &records[1].iter().take(7).collect::<Vec<_>>(),
        &["a_bw", "rdma", "write_bw", "1", "65536", "10", "600.0000"]
    );
    assert_eq!(
        &records[1].iter().skip(19).collect::<Vec<_>>(),
        &["0.1667", "1.1667", "500.0000", "600.0000", "700.0000", "3"]
    );
    assert!(records[0].iter().skip(19).all(str::is_empty), "no stability: empty cells");
    assert_eq!(&records[2][18], nasty);
    // And through another reader: Python's csv module (a Linux program: not under
    // wine, where these tests run as Windows code too).
    if cfg!(windows) {
        return;
    }
    let path = std::env::temp_dir().join(format!("rdmabench-csv-{}.csv", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let read = std::process::Command::new("python3")
        .args(["-c", "import csv, json, sys; print(json.dumps(list(csv.reader(open(sys.argv[1], newline='')))))"])
        .arg(&path)
        .output()
        .expect("python3 (ci/setup installs it)");
    std::fs::remove_file(&path).unwrap();
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    let rows: Vec<Vec<String>> = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(rows.len(), r.rows.len() + 1);
    assert_eq!(rows[0], header.iter().collect::<Vec<_>>());
    for (py, rec) in rows[1..].iter().zip(&records) {
        assert_eq!(py, &rec.iter().collect::<Vec<_>>());
    }
    assert_eq!(rows[3][18], nasty);
}

#[test]
fn the_page_holds_every_chart_and_table() {
    let r = report();
    let ch = charts(&r);
    assert_eq!(
        ch.iter().map(|c| c.0).collect::<Vec<_>>(),
        ["bandwidth.svg", "latency.svg", "cpu.svg"]
    );
    let page = html(&r, &ch);
    for id in ["chart-bandwidth", "chart-latency", "chart-cpu"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert_eq!(page.matches("<table>").count(), 3);
    assert!(page.contains("class=\"fail\" title=\"the peer stopped: &quot;boom&quot;\""));
    assert!(page.contains("<p id=\"environment\">No environment was recorded.</p>"));
    let mut r = r;
    let mut local = crate::environment::Environment::host();
    local.kernel = "6.1.0-57-amd64".into();
    let mut peer = local.clone();
    peer.hostname = "target1".into();
    r.environment = Some(crate::results::EnvironmentReport { local, peer: Some(peer) });
    let page = html(&r, &ch);
    let env_at = page.find("<table id=\"environment\">").expect("the environment table");
    assert!(env_at < page.find("<figure").unwrap(), "what was tested comes first");
    assert!(page.contains("<td>6.1.0-57-amd64</td><td>6.1.0-57-amd64</td>"), "{page}");
    assert!(page.contains("<td class=\"changed\">target1</td>"), "{page}");
    let t = table(&r);
    let head: Vec<&str> = t.lines().take(4).collect();
    assert!(head[2].starts_with(" this host: ") && head[2].contains("6.1.0-57-amd64"), "{t}");
    assert!(head[3].starts_with(" server   : target1: "), "{t}");
}
