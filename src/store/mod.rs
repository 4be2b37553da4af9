//! The results history: a local SQLite database (docs/history.md) that every qualify
//! run, and any test run with `--store`, is recorded in. One transaction per run (a
//! killed run leaves none of itself), WAL (a rollback journal on file systems without
//! shared memory: [`fs`]) and a busy timeout for concurrent writers, and a schema
//! version in `PRAGMA user_version` checked at every open, with the tables themselves:
//! `runs` and `points` must be tables with rdmabench's columns and no triggers. A
//! writer ([`Store::open`]) checks all this, and that it can write, before its run
//! starts; a reader ([`Store::open_read`]) never creates or changes a file.

pub mod fs;
pub mod query;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};

use crate::error::Error;
use crate::text::clean;

/// The schema this rdmabench reads and writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// How long a writer waits for another one's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest stored report `diff` and `--baseline ID` read, bytes: as a `--baseline` file.
pub const MAX_REPORT_BYTES: u64 = crate::files::BASELINE_LIMIT;
/// Most runs `history` lists at once, and most points a trend reads.
pub const MAX_ROWS: i64 = 100_000;

/// The columns rdmabench reads and writes, each table's: prepared at every open, so a
/// table without them is refused then, not when a run is recorded.
const COLUMNS: [(&str, &str); 2] = [
    ("runs", "id, kind, started, host, device, firmware, profile, server, pass, report"),
    ("points", "run_id, point, figure, unit, median, runs"),
];

/// The way out of a store that cannot be used, named in each refusal.
const WAY_OUT: &str =
    "move it aside, or give another --store PATH, or record nothing (qualify or health --no-store; a test without --store)";

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
    /// Opens (or creates) the store at `path` to record runs, and checks it whole before
    /// anything runs: its schema and tables, and that it can be written.
    ///
    /// # Errors
    /// One line naming the file and the way out: it cannot be created or written, is not
    /// an SQLite database (or is damaged), or holds a schema or tables this rdmabench does
    /// not read.
    pub fn open(path: &Path) -> Result<Store, Error> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::io(format!(
                    "results store {}: cannot create {}: {e}; give --store PATH (a place this user can write), or record nothing (qualify or health --no-store; a test without --store)",
                    path.display(),
                    dir.display()
                ))
            })?;
        }
        let journal = fs::journal_for(path);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|e| damaged(path, &e, &journal))?;
        let store = Store { conn, path: path.to_path_buf() };
        // Two first openers of a new file can be refused at once, without the busy
        // handler (the switch to WAL, or the reader of a WAL another opener is still
        // recovering): try again until the busy timeout.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let prepared = loop {
            match store.prepare(&journal).and_then(|()| store.writable()) {
                Err(Prepared::Sql(e)) if busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                done => break done,
            }
        };
        prepared.map_err(|e| refused(path, e, &journal))?;
        Ok(store)
    }

    /// Opens the store at `path` to read it (`history`, `diff`, `--baseline ID`): never
    /// creates it or anything beside it, and reads a store on read-only media.
    ///
    /// # Errors
    /// No file there (one line: no store at PATH), or one [`Store::open`] refuses.
    pub fn open_read(path: &Path) -> Result<Store, Error> {
        if let Err(e) = path.symlink_metadata() {
            return Err(Error::io(if e.kind() == std::io::ErrorKind::NotFound {
                format!("no results store at {} (qualify records its runs there, and a test given --store)", path.display())
            } else {
                format!("results store {}: {e}", path.display())
            }));
        }
        let journal = fs::Journal { wal: true, fstype: None };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|e| damaged(path, &e, &journal))?;
        let store = Store { conn, path: path.to_path_buf() };
        match store.check() {
            Ok(()) => return Ok(store),
            // Read-only media: a WAL store's readers need its shared memory, which
            // cannot be made there; nothing can change such a file, so read it as
            // immutable.
            Err(Prepared::Sql(e)) if unwritable(&e) => {}
            Err(e) => return Err(refused(path, e, &journal)),
        }
        drop(store);
        let uri = format!("file:{}?immutable=1", uri_path(path));
        let conn = Connection::open_with_flags(&uri, flags | OpenFlags::SQLITE_OPEN_URI)
            .map_err(|e| damaged(path, &e, &journal))?;
        let store = Store { conn, path: path.to_path_buf() };
        store.check().map_err(|e| refused(path, e, &journal))?;
        Ok(store)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Busy timeout, the journal, foreign keys; the schema created in an empty file,
    /// checked in any other.
    fn prepare(&self, journal: &fs::Journal) -> Result<(), Prepared> {
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        // Reads the header: a file that is not a database fails here.
        let version: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == SCHEMA_VERSION {
            self.tables()?;
            self.conn.pragma_update(None, "foreign_keys", true)?;
            return Ok(());
        }
        if version > SCHEMA_VERSION {
            return Err(unreadable(version, 0));
        }
        // WAL persists in the file: set once, before the schema, outside a transaction.
        // Where the file system has no shared memory for it, the rollback journal.
        if journal.wal {
            let mode: String =
                self.conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(Prepared::Refused(format!(
                    "cannot use write-ahead logging (journal mode {mode}); {WAY_OUT}"
                )));
            }
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
            v if v == SCHEMA_VERSION => {}
            v => return Err(unreadable(v, tables)),
        }
        tx.commit()?;
        self.tables()?;
        self.conn.pragma_update(None, "foreign_keys", true)?;
        Ok(())
    }

    /// A reader's checks: the version this rdmabench reads, and its tables.
    fn check(&self) -> Result<(), Prepared> {
        let version: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version != SCHEMA_VERSION {
            let tables: i64 =
                self.conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
            return Err(unreadable(version, tables));
        }
        self.tables()
    }

    /// `runs` and `points` are tables (not views), with rdmabench's columns and no
    /// triggers; a file at version 0 that holds anything is not rdmabench's.
    fn tables(&self) -> Result<(), Prepared> {
        let foreign = |why: String| {
            Prepared::Refused(format!(
                "{why}: not a results store this rdmabench made; move it aside or choose another --store"
            ))
        };
        let mut stmt = self.conn.prepare(
            "SELECT type, name, tbl_name FROM sqlite_master
             WHERE name IN ('runs', 'points') OR (type = 'trigger' AND tbl_name IN ('runs', 'points'))
             LIMIT 16",
        )?;
        let found = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for (kind, name, table) in &found {
            let (kind, name, table) = (clean(kind), clean(name), clean(table));
            if kind == "trigger" {
                return Err(foreign(format!("a trigger ({name}) on its table {table}")));
            }
            if kind != "table" {
                return Err(foreign(format!("{name} is a {kind}, not a table")));
            }
        }
        for (table, columns) in COLUMNS {
            if !found.iter().any(|(kind, name, _)| kind == "table" && name == table) {
                return Err(foreign(format!("no table {table}")));
            }
            if let Err(e) = self.conn.prepare(&format!("SELECT {columns} FROM {table} LIMIT 0")) {
                return Err(foreign(format!("its table {table} lacks rdmabench's columns ({e})")));
            }
        }
        Ok(())
    }

    /// A writer's last check: the file and its folder take a write (a read-only file,
    /// folder or medium is refused before the run, not after it).
    fn writable(&self) -> Result<(), Prepared> {
        if self.conn.is_readonly(rusqlite::MAIN_DB)? {
            return Err(Prepared::Refused(format!("cannot be written (read-only); {WAY_OUT}")));
        }
        self.conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;")?;
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

/// A file SQLite cannot read as a database, or write: one line, exit 2, naming the
/// cause (the file system, where it has no shared memory for a WAL store) and the way
/// out.
fn damaged(path: &Path, e: &rusqlite::Error, journal: &fs::Journal) -> Error {
    let cause = match (&journal.fstype, e.sqlite_error_code()) {
        (Some(fs), Some(rusqlite::ErrorCode::SystemIoFailure)) if !journal.wal => {
            format!("{e}: on {fs}, which has no shared memory for a write-ahead-log store")
        }
        _ => e.to_string(),
    };
    if unwritable(e) && !matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::NotADatabase)) {
        return Error::io(format!(
            "results store {}: cannot be used ({cause}); {WAY_OUT}",
            path.display()
        ));
    }
    Error::io(format!(
        "results store {}: not a usable SQLite database ({cause}); {WAY_OUT}",
        path.display()
    ))
}

/// Why a file of schema `version` (not this rdmabench's), holding `tables` entries,
/// is refused.
fn unreadable(version: i64, tables: i64) -> Prepared {
    Prepared::Refused(match version {
        0 if tables == 0 => format!("an empty file, not a results store; {WAY_OUT}"),
        0 => format!(
            "an SQLite database without rdmabench's schema version (user_version 0, {tables} tables): not a results store this rdmabench made; move it aside or choose another --store"
        ),
        v if v > SCHEMA_VERSION => format!(
            "schema version {v} is a newer rdmabench's (this one reads {SCHEMA_VERSION}): use that rdmabench, or another --store"
        ),
        v => format!(
            "schema version {v}, which this rdmabench (schema {SCHEMA_VERSION}) has no migration from: {WAY_OUT}"
        ),
    })
}

/// A store that could not be prepared, in one line.
fn refused(path: &Path, e: Prepared, journal: &fs::Journal) -> Error {
    match e {
        Prepared::Sql(e) => damaged(path, &e, journal),
        Prepared::Refused(why) => Error::io(format!("results store {}: {why}", path.display())),
    }
}

/// SQLite could not open, lock or write the file (a read-only file, folder or medium).
fn unwritable(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(
            rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::ReadOnly
                | rusqlite::ErrorCode::SystemIoFailure
        )
    )
}

/// `path` for an SQLite `file:` URI: every byte but the unreserved ones and `/`
/// percent-encoded.
fn uri_path(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A query that failed on an opened store.
fn failed(path: &Path, e: &rusqlite::Error) -> Error {
    Error::io(format!("results store {}: {e}", path.display()))
}
