//! The results history: a local SQLite database (docs/history.md) that every qualify
//! run, and any test run with `--store`, is recorded in. One transaction per run (a
//! killed run leaves none of itself), WAL and a busy timeout for concurrent writers, and
//! a schema version in `PRAGMA user_version` checked at every open.

pub mod query;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};

use crate::error::Error;

/// The schema this rdmabench reads and writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// How long a writer waits for another one's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Schema 1 (docs/history.md#schema).
const SCHEMA: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    started TEXT NOT NULL,
    host TEXT NOT NULL,
    device TEXT,
    firmware TEXT,
    profile TEXT NOT NULL,
    server TEXT,
    pass INTEGER NOT NULL,
    report TEXT NOT NULL
);
CREATE INDEX runs_by_profile ON runs (profile, host, started);
CREATE TABLE points (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    point TEXT NOT NULL,
    figure TEXT NOT NULL,
    unit TEXT NOT NULL,
    median REAL,
    runs INTEGER NOT NULL,
    PRIMARY KEY (run_id, point)
);
";

/// Where the results go when `--store` does not say: `$XDG_DATA_HOME/rdmabench/results.db`,
/// else `~/.local/share/rdmabench/results.db`; on Windows `%LOCALAPPDATA%\rdmabench\results.db`.
pub fn default_path() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir = if cfg!(windows) {
        var("LOCALAPPDATA")
    } else {
        var("XDG_DATA_HOME").or_else(|| var("HOME").map(|h| h.join(".local").join("share")))
    };
    Some(dir?.join("rdmabench").join("results.db"))
}

/// Where a command stores its run: a path, or nowhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Record the run here.
    At(PathBuf),
    /// `--no-store`.
    Nowhere,
}

impl Choice {
    /// `--store PATH`, `--no-store`, else the default path (none without a home:
    /// an error naming `--store`).
    ///
    /// # Errors
    /// No `--store` and no data directory to default to.
    pub fn from_flags(store: Option<PathBuf>, no_store: bool) -> Result<Choice, Error> {
        if no_store {
            return Ok(Choice::Nowhere);
        }
        match store.or_else(default_path) {
            Some(p) => Ok(Choice::At(p)),
            None => Err(Error::usage(
                "no data directory for the results store (neither XDG_DATA_HOME nor HOME is set): give --store PATH or --no-store",
            )),
        }
    }
}

/// One run to record.
#[derive(Clone, Debug, Default)]
pub struct NewRun {
    /// `qualify` or `test`.
    pub kind: String,
    /// When it started, RFC 3339 UTC.
    pub started: String,
    /// This host's name.
    pub host: String,
    /// The RDMA device, if the run used one.
    pub device: Option<String>,
    /// Its firmware.
    pub firmware: Option<String>,
    /// The qualify profile's name; for a test, the test (`write_bw`).
    pub profile: String,
    /// The server or peer.
    pub server: Option<String>,
    /// Whether the run passed.
    pub pass: bool,
    /// The whole JSON document (qualify.json, or the test's `--json`).
    pub report: String,
    /// Each point's figure: `(point, figure, unit, median, runs)`.
    pub points: Vec<PointRow>,
}

/// A point's median as the store keeps it, for listings and trends.
#[derive(Clone, Debug, PartialEq)]
pub struct PointRow {
    /// `write_bw 64K`.
    pub point: String,
    /// `BW average`, `t_typical`.
    pub figure: String,
    /// `MiB/s`, `us`.
    pub unit: String,
    /// The median of its runs (`None`: none measured it).
    pub median: Option<f64>,
    /// How many runs.
    pub runs: u32,
}

/// An open results store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (or creates) the store at `path` and checks its schema.
    ///
    /// # Errors
    /// One line naming the file: it cannot be created, is not an SQLite database (or is
    /// damaged), or holds a schema this rdmabench does not read.
    pub fn open(path: &Path) -> Result<Store, Error> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::io(format!(
                    "results store {}: cannot create {}: {e}",
                    path.display(),
                    dir.display()
                ))
            })?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| damaged(path, &e))?;
        let store = Store { conn, path: path.to_path_buf() };
        // Two first openers of a new file can be refused at once, without the busy
        // handler (the switch to WAL, or the reader of a WAL another opener is still
        // recovering): try again until the busy timeout.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let prepared = loop {
            match store.prepare() {
                Err(Prepared::Sql(e)) if busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                done => break done,
            }
        };
        prepared.map_err(|e| match e {
            Prepared::Sql(e) => damaged(path, &e),
            Prepared::Refused(why) => Error::io(format!("results store {}: {why}", path.display())),
        })?;
        Ok(store)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Busy timeout, WAL, foreign keys; the schema created in an empty file, checked in
    /// any other.
    fn prepare(&self) -> Result<(), Prepared> {
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        // Reads the header: a file that is not a database fails here.
        let version: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == SCHEMA_VERSION {
            self.conn.pragma_update(None, "foreign_keys", true)?;
            return Ok(());
        }
        if version > SCHEMA_VERSION {
            return Err(Prepared::Refused(format!(
                "schema version {version} is a newer rdmabench's (this one reads {SCHEMA_VERSION}): use that rdmabench, or another --store"
            )));
        }
        // WAL persists in the file: set once, before the schema, outside a transaction.
        let mode: String = self.conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Prepared::Refused(format!(
                "cannot use write-ahead logging (journal mode {mode})"
            )));
        }
        // Two first writers at once: the second waits here and finds the schema made.
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let tables: i64 = tx.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
        match version {
            0 if tables == 0 => {
                tx.execute_batch(SCHEMA)?;
                tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            0 => {
                return Err(Prepared::Refused(format!(
                    "an SQLite database without rdmabench's schema version (user_version 0, {tables} tables): not a results store this rdmabench made; move it aside or choose another --store"
                )))
            }
            v if v == SCHEMA_VERSION => {}
            v => {
                return Err(Prepared::Refused(format!(
                    "schema version {v}, which this rdmabench (schema {SCHEMA_VERSION}) has no migration from: move it aside or choose another --store"
                )))
            }
        }
        tx.commit()?;
        self.conn.pragma_update(None, "foreign_keys", true)?;
        Ok(())
    }

    /// Records `run` and its points in one transaction; returns its id.
    ///
    /// # Errors
    /// The database refused the write (full disk, another writer holding it past the
    /// busy timeout, a damaged file): one line naming the file.
    pub fn record(&mut self, run: &NewRun) -> Result<i64, Error> {
        let path = self.path.clone();
        let fail = |e: rusqlite::Error| {
            Error::io(format!("results store {}: the run was not recorded: {e}", path.display()))
        };
        let tx =
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(fail)?;
        tx.execute(
            "INSERT INTO runs (kind, started, host, device, firmware, profile, server, pass, report)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                run.kind,
                run.started,
                run.host,
                run.device,
                run.firmware,
                run.profile,
                run.server,
                run.pass,
                run.report
            ],
        )
        .map_err(fail)?;
        let id = tx.last_insert_rowid();
        {
            let mut insert = tx
                .prepare("INSERT INTO points (run_id, point, figure, unit, median, runs) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                .map_err(fail)?;
            for p in &run.points {
                insert
                    .execute(params![id, p.point, p.figure, p.unit, p.median, p.runs])
                    .map_err(fail)?;
            }
        }
        tx.commit().map_err(fail)?;
        Ok(id)
    }

    fn conn(&self) -> &Connection {
        &self.conn
    }
}

/// Why a store could not be prepared.
/// SQLite's "database is locked" or "busy": another connection holds what was asked.
fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

enum Prepared {
    Sql(rusqlite::Error),
    Refused(String),
}

impl From<rusqlite::Error> for Prepared {
    fn from(e: rusqlite::Error) -> Self {
        Prepared::Sql(e)
    }
}

/// A file SQLite cannot read as a database: one line, exit 2.
fn damaged(path: &Path, e: &rusqlite::Error) -> Error {
    Error::io(format!(
        "results store {}: not a usable SQLite database ({e}); move it aside or choose another --store",
        path.display()
    ))
}

/// A query that failed on an opened store.
fn failed(path: &Path, e: &rusqlite::Error) -> Error {
    Error::io(format!("results store {}: {e}", path.display()))
}
