//! The results store on the command line: `history`, `diff`, the `--store`/`--no-store`
//! flags of qualify, and qualify's options built from its flags (docs/history.md).

use std::path::PathBuf;

use clap::Args;

use super::QualifyArgs;
use crate::error::Error;
use crate::history::{DiffOptions, HistoryOptions};
use crate::qualify::Options;
use crate::store::query::Filter;
use crate::store::Choice;

#[doc = concat!("Where a run is recorded.")]
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The results store (SQLite) to record the run in (default: $XDG_DATA_HOME/rdmabench/results.db, else ~/.local/share/…; on Windows %LOCALAPPDATA%\rdmabench\results.db).
    #[arg(long = "store", value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Record nothing in the results store.
    #[arg(long = "no-store", conflicts_with = "store")]
    pub no_store: bool,
}

impl StoreArgs {
    /// The choice these flags make.
    ///
    /// # Errors
    /// No `--store` and no data directory.
    pub fn choice(&self) -> Result<Choice, Error> {
        Choice::from_flags(self.store.clone(), self.no_store)
    }
}

/// The store a reading command opens: `--store`, else the default.
fn store_path(store: Option<PathBuf>) -> Result<PathBuf, Error> {
    match Choice::from_flags(store, false)? {
        Choice::At(p) => Ok(p),
        Choice::Nowhere => unreachable!("not --no-store"),
    }
}

/// A test's `--store` (`None`: alone, the default store). `client`: the test was given
/// a HOST. `--store WORD` takes WORD as its PATH; when that leaves a server (no HOST)
/// with a PATH that is no store (no `.db`, no `/`, no such file), WORD was meant as the
/// HOST (`--store HOST`), and is refused rather than run as a server storing in a file
/// named after a host.
///
/// # Errors
/// `--store` alone with no data directory; `--store HOST`.
pub fn test_store(path: Option<PathBuf>, client: bool) -> Result<PathBuf, Error> {
    let Some(path) = path else { return store_path(None) };
    let text = path.to_string_lossy();
    let store_like = text.ends_with(".db") || text.contains('/') || path.exists();
    if !client && !store_like {
        return Err(Error::usage(format!(
            "--store {text}: the word after --store is its PATH, and this left no HOST; \
             write `HOST --store` for the default store, or a PATH ending in .db"
        )));
    }
    Ok(path)
}

#[doc = concat!("`rdmabench history`.")]
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only runs on this host.
    #[arg(long = "host", value_name = "NAME")]
    pub host: Option<String>,
    /// Only runs on this RDMA device (rxe0, mlx4_0).
    #[arg(long = "device", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Only runs with this firmware version.
    #[arg(long = "firmware", value_name = "VERSION")]
    pub firmware: Option<String>,
    /// Only runs of this qualify profile (for a test run: the test, e.g. write_bw).
    #[arg(long = "profile", value_name = "NAME")]
    pub profile: Option<String>,
    /// Only runs started on or after DATE (2026-12-01, or 2026-12-01T08:00:00Z).
    #[arg(long = "since", value_name = "DATE", value_parser = since)]
    pub since: Option<String>,
    /// Only runs started before the end of DATE (a day), or before a time.
    #[arg(long = "until", value_name = "DATE", value_parser = until)]
    pub until: Option<String>,
    /// JSON on stdout instead of the table (with --show: the run's stored JSON document).
    #[arg(long = "json")]
    pub json: bool,
    /// Show one stored run again, as it printed: a test's results table, a qualification's verdict table.
    #[arg(long = "show", value_name = "ID", conflicts_with_all = ["host", "device", "firmware", "profile", "since", "until"])]
    pub show: Option<i64>,
    /// The results store (default as qualify's).
    #[arg(long = "store", value_name = "PATH")]
    pub store: Option<PathBuf>,
}

impl HistoryArgs {
    /// The listing asked for.
    ///
    /// # Errors
    /// No store to default to.
    pub fn options(&self) -> Result<HistoryOptions, Error> {
        Ok(HistoryOptions {
            store: store_path(self.store.clone())?,
            filter: Filter {
                host: self.host.clone(),
                device: self.device.clone(),
                firmware: self.firmware.clone(),
                profile: self.profile.clone(),
                since: self.since.clone(),
                until: self.until.clone(),
            },
            json: self.json,
            show: self.show,
        })
    }
}

#[doc = concat!("`rdmabench diff`.")]
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline: a stored run's id (rdmabench history), or a JSON file a test's --json or qualify --json wrote.
    #[arg(value_name = "A")]
    pub a: String,
    /// The run judged against A: an id or a file, the same kind as A.
    #[arg(value_name = "B")]
    pub b: String,
    /// JSON on stdout instead of the text (docs/json.md, "diff").
    #[arg(long = "json")]
    pub json: bool,
    /// The results store ids are read from (default as qualify's).
    #[arg(long = "store", value_name = "PATH")]
    pub store: Option<PathBuf>,
}

impl DiffArgs {
    /// The comparison asked for.
    pub fn options(&self) -> DiffOptions {
        DiffOptions {
            store: self.store.clone(),
            a: self.a.clone(),
            b: self.b.clone(),
            json: self.json,
        }
    }
}

impl QualifyArgs {
    /// qualify's options from its flags.
    ///
    /// # Errors
    /// A bad `--timeout` or `--auth-key`, or no store to default to.
    pub fn options(&self) -> Result<Options, Error> {
        Ok(Options {
            profile: self.profile.clone(),
            server: self.server.clone(),
            baseline: self.baseline.clone(),
            json: self.json.clone(),
            junit: self.junit.clone(),
            out: self.out.clone(),
            quiet: self.quiet,
            local: self.client.local()?,
            store: self.store.choice()?,
            print_profile: self.print_profile,
            baseline_only: self.baseline_only,
        })
    }
}

/// `2026-12-01` → `2026-12-01T00:00:00Z`; a full time as given (normalised).
fn day_or_time(text: &str) -> Result<std::time::SystemTime, String> {
    let full = if text.len() == 10 { format!("{text}T00:00:00Z") } else { text.to_string() };
    humantime::parse_rfc3339_weak(full.trim_end_matches('Z'))
        .map_err(|_| format!("'{text}': a date (2026-12-01) or a UTC time (2026-12-01T08:00:00Z)"))
}

fn since(text: &str) -> Result<String, String> {
    Ok(humantime::format_rfc3339_seconds(day_or_time(text)?).to_string())
}

/// A day's end is the next day's start; a time is itself.
fn until(text: &str) -> Result<String, String> {
    let mut t = day_or_time(text)?;
    if text.len() == 10 {
        t += std::time::Duration::from_secs(86_400);
    }
    Ok(humantime::format_rfc3339_seconds(t).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_bound_whole_days() {
        assert_eq!(since("2026-12-01").unwrap(), "2026-12-01T00:00:00Z");
        assert_eq!(until("2026-12-31").unwrap(), "2027-01-01T00:00:00Z");
        assert_eq!(until("2026-12-01T08:00:00Z").unwrap(), "2026-12-01T08:00:00Z");
        assert!(since("yesterday").unwrap_err().contains("a date (2026-12-01)"));
    }
}
