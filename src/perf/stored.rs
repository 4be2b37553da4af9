//! A test run with `--store`: its report (the parameters in effect, both environments,
//! every size's results, the verdict and any error) recorded in the results store, each
//! size a point (`write_bw 64K`) for `rdmabench history`.

use crate::error::Error;
use crate::measure::MIB;
use crate::report::svg::size_label;
use crate::results::RunReport;
use crate::store::{NewRun, PointRow, Store};

/// Records `report` in `store` (opened, and checked, before the run); returns its id.
///
/// # Errors
/// The store cannot be written: one line naming it.
pub fn record(store: &mut Store, report: &RunReport) -> Result<i64, Error> {
    let env = report.environment.as_ref();
    let local = env.map(|e| &e.local);
    let device = local.and_then(|l| l.device.as_ref());
    let points = report
        .results
        .iter()
        .filter_map(|r| {
            let (figure, unit, value) = match (&r.bw, &r.lat) {
                (Some(bw), _) => ("BW average", "MiB/s", bw.avg_bytes_per_sec / MIB),
                (None, Some(lat)) => ("t_typical", "us", lat.t_typical_us),
                _ => return None,
            };
            Some(PointRow {
                point: format!("{} {}", report.test, size_label(r.size)),
                figure: figure.into(),
                unit: unit.into(),
                median: Some(value),
                runs: 1,
            })
        })
        .collect();
    let run = NewRun {
        kind: "test".into(),
        started: crate::stamp::utc_now(),
        host: local.map_or_else(
            || crate::environment::Environment::host().hostname,
            |l| l.hostname.clone(),
        ),
        device: device.map(|d| d.name.clone()),
        firmware: device.map(|d| d.firmware.clone()),
        profile: report.test.to_string(),
        server: report.peer_address.clone(),
        pass: report.verdict.pass && report.error.is_none(),
        report: crate::report::to_json(report),
        points,
    };
    store.record(&run)
}
