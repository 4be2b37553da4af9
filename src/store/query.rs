//! Reading the history: runs by filter (`rdmabench history`), one run's report
//! (`diff`, `--baseline ID`), and a profile's points across runs (the report's trends).

use rusqlite::types::Value;
use serde::Serialize;

use super::{failed, Store, MAX_REPORT_BYTES, MAX_ROWS};
use crate::error::Error;
use crate::text::clean;

/// What `history` asks for; every field narrows.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// This host's name.
    pub host: Option<String>,
    /// The RDMA device.
    pub device: Option<String>,
    /// Its firmware.
    pub firmware: Option<String>,
    /// The profile (a test's id for a test run).
    pub profile: Option<String>,
    /// Started at or after (RFC 3339 UTC, as stored).
    pub since: Option<String>,
    /// Started before.
    pub until: Option<String>,
}

/// One stored run, without its report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRow {
    /// The run's id (`diff A B`, `--baseline ID`).
    pub id: i64,
    /// `qualify` or `test`.
    pub kind: String,
    /// When it started, UTC.
    pub started: String,
    /// Host.
    pub host: String,
    /// Device.
    pub device: Option<String>,
    /// Firmware.
    pub firmware: Option<String>,
    /// Profile (or test).
    pub profile: String,
    /// Server.
    pub server: Option<String>,
    /// Passed.
    pub pass: bool,
    /// How many points it recorded.
    pub points: u32,
}

/// A point's median in one earlier run: for a trend.
#[derive(Clone, Debug, PartialEq)]
pub struct TrendRow {
    /// The run.
    pub id: i64,
    /// When it started.
    pub started: String,
    /// Its firmware.
    pub firmware: Option<String>,
    /// The point.
    pub point: String,
    /// Its median.
    pub median: f64,
    /// `MiB/s`, `us`.
    pub unit: String,
}

/// A run's columns, each text cut to one more character than [`clean`] shows (so a
/// longer one is still marked cut): a hostile file's huge value is never fetched whole.
const COLUMNS: &str =
    "r.id, substr(r.kind, 1, 257), substr(r.started, 1, 257), substr(r.host, 1, 257),
     substr(r.device, 1, 257), substr(r.firmware, 1, 257), substr(r.profile, 1, 257),
     substr(r.server, 1, 257), r.pass,
     (SELECT count(*) FROM points p WHERE p.run_id = r.id)";

/// A run's row, its text through the one sanitiser ([`clean`]): the table and `--json`
/// show the same.
fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    let text = |k: usize| r.get::<_, String>(k).map(|t| clean(&t));
    let maybe = |k: usize| r.get::<_, Option<String>>(k).map(|t| t.map(|t| clean(&t)));
    Ok(RunRow {
        id: r.get(0)?,
        kind: text(1)?,
        started: text(2)?,
        host: text(3)?,
        device: maybe(4)?,
        firmware: maybe(5)?,
        profile: text(6)?,
        server: maybe(7)?,
        pass: r.get(8)?,
        points: r.get(9)?,
    })
}

impl Store {
    /// The runs `filter` selects, oldest first.
    ///
    /// # Errors
    /// The database cannot be read.
    pub fn list(&self, filter: &Filter) -> Result<Vec<RunRow>, Error> {
        let mut clauses = Vec::new();
        let mut values: Vec<Value> = Vec::new();
        for (column, op, value) in [
            ("r.host", "=", &filter.host),
            ("r.device", "=", &filter.device),
            ("r.firmware", "=", &filter.firmware),
            ("r.profile", "=", &filter.profile),
            ("r.started", ">=", &filter.since),
            ("r.started", "<", &filter.until),
        ] {
            if let Some(v) = value {
                values.push(Value::Text(v.clone()));
                clauses.push(format!("{column} {op} ?{}", values.len()));
            }
        }
        let filter = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", clauses.join(" AND "))
        };
        let sql =
            format!("SELECT {COLUMNS} FROM runs r {filter} ORDER BY r.id LIMIT {}", MAX_ROWS + 1);
        let fail = |e: rusqlite::Error| failed(self.path(), &e);
        let mut stmt = self.conn().prepare(&sql).map_err(fail)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values), row).map_err(fail)?;
        let rows = rows.collect::<Result<Vec<_>, _>>().map_err(fail)?;
        if rows.len() as i64 > MAX_ROWS {
            return Err(Error::usage(format!(
                "results store {}: more than {MAX_ROWS} runs match: narrow them (--since, --host, --profile, …)",
                self.path().display()
            )));
        }
        Ok(rows)
    }

    /// Run `id` and its JSON report.
    ///
    /// # Errors
    /// No run `id` (one line naming the store), or the database cannot be read.
    pub fn run(&self, id: i64) -> Result<(RunRow, String), Error> {
        // Its size first: a report over the limit is never fetched.
        let bytes: Option<i64> = self
            .conn()
            .query_row("SELECT length(CAST(report AS BLOB)) FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(failed(self.path(), &e)),
            })?;
        if let Some(bytes) = bytes.filter(|&b| b as u64 > MAX_REPORT_BYTES) {
            return Err(Error::io(format!(
                "results store {}: run {id}'s report is {bytes} bytes, over the {MAX_REPORT_BYTES} a stored report may hold",
                self.path().display()
            )));
        }
        let sql = format!("SELECT {COLUMNS}, r.report FROM runs r WHERE r.id = ?1");
        let found = self
            .conn()
            .query_row(&sql, [id], |r| Ok((row(r)?, r.get::<_, String>(10)?)))
            .map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Error::usage(format!(
                "no run {id} in the results store {} (rdmabench history lists them)",
                self.path().display()
            )),
            e => failed(self.path(), &e),
        })?;
        Ok(found)
    }

    /// The medians of every point in the qualify runs of `profile` on `host`, oldest
    /// first, the last `limit` runs at most.
    ///
    /// # Errors
    /// The database cannot be read.
    pub fn trend(&self, profile: &str, host: &str, limit: u32) -> Result<Vec<TrendRow>, Error> {
        let sql = "SELECT r.id, substr(r.started, 1, 257), substr(r.firmware, 1, 257),
                    substr(p.point, 1, 257), p.median, substr(p.unit, 1, 257)
             FROM points p JOIN runs r ON r.id = p.run_id
             WHERE r.id IN (SELECT id FROM runs WHERE kind = 'qualify' AND profile = ?1 AND host = ?2
                            ORDER BY id DESC LIMIT ?3)
               AND p.median IS NOT NULL
             ORDER BY r.id, p.point LIMIT ?4";
        let fail = |e: rusqlite::Error| failed(self.path(), &e);
        let mut stmt = self.conn().prepare(sql).map_err(fail)?;
        let rows = stmt
            .query_map(rusqlite::params![profile, host, limit, MAX_ROWS], |r| {
                Ok(TrendRow {
                    id: r.get(0)?,
                    started: r.get(1)?,
                    firmware: r.get(2)?,
                    point: r.get(3)?,
                    median: r.get(4)?,
                    unit: r.get(5)?,
                })
            })
            .map_err(fail)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(fail)
    }
}
