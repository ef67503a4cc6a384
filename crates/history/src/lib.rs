//! Run history: every run record in an embedded SQLite database, so runs can be
//! listed, re-reported, compared and merged later. Page loads (`redline
//! page`) are kept in the same table and id sequence, marked `kind = 'page'`,
//! with the page report's JSON as their record: they can be listed, shown,
//! exported and compared with each other, not merged or drawn as runs.
//! Trials (`redline trial`) are kept the same way, `kind = 'trial'`, their
//! record the trial's JSON; each of their rounds is a run of its own.
//!
//! The database lives at `$XDG_DATA_HOME/redline/history.db` (else
//! `~/.local/share/redline/history.db`), or where `--db` / `REDLINE_DB` say.
//! It is opened in WAL mode with a busy timeout, so several redline processes
//! can save at once; every write is one transaction, so a crash leaves either
//! the whole run or nothing. The schema is versioned with SQLite's
//! `user_version`; a database that is corrupt, not redline's, or from a newer
//! redline is refused with a clear error and never overwritten.
#![deny(missing_docs)]

pub mod merge;

use redline_stats::RunRecord;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version this build writes (SQLite `user_version`).
pub const SCHEMA_VERSION: i64 = 2;

/// The environment variable that overrides the database path.
pub const DB_ENV: &str = "REDLINE_DB";

/// How long a writer waits for another process's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Migrations: `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 → 1: the runs table. `record` is the full run record as JSON (secrets
    // already redacted by the engine); the other columns are copies for listing
    // and filtering without parsing it.
    "CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        saved_at TEXT NOT NULL,
        started_at TEXT NOT NULL,
        url TEXT NOT NULL,
        method TEXT NOT NULL,
        load_model TEXT NOT NULL,
        load TEXT NOT NULL,
        label TEXT,
        note TEXT,
        duration_s REAL NOT NULL,
        requests_per_sec REAL NOT NULL,
        completed INTEGER NOT NULL,
        failed INTEGER NOT NULL,
        non_2xx INTEGER NOT NULL,
        p50_us INTEGER NOT NULL,
        p99_us INTEGER NOT NULL,
        client_limited INTEGER NOT NULL,
        interrupted INTEGER NOT NULL,
        merged_runs INTEGER NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX runs_started_at ON runs(started_at);
    CREATE INDEX runs_label ON runs(label, id);
    CREATE INDEX runs_url ON runs(url, id);",
    // 1 → 2: page loads share the table: `kind` is 'run' or 'page'.
    "ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'run';",
];

/// What a saved entry is.
pub const KIND_RUN: &str = "run";
/// A saved page load (`redline page`).
pub const KIND_PAGE: &str = "page";
/// A saved trial (`redline trial`): its record is the trial's JSON, its
/// rounds are saved as runs of their own.
pub const KIND_TRIAL: &str = "trial";

/// What can go wrong with the history.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// No path could be worked out (no `$HOME`).
    #[error("cannot find a place for the run history: set --db PATH or REDLINE_DB (neither $XDG_DATA_HOME nor $HOME is set)")]
    NoPath,
    /// The directory could not be created or the file could not be opened.
    #[error("cannot open the run history {path}: {msg}")]
    Open {
        /// The database path.
        path: PathBuf,
        /// Why.
        msg: String,
    },
    /// The file is not a SQLite database, or not redline's, or damaged.
    #[error("the run history {path} is corrupt or not a redline history ({msg}); it was left untouched: move it away or point --db/REDLINE_DB elsewhere")]
    Corrupt {
        /// The database path.
        path: PathBuf,
        /// What SQLite said.
        msg: String,
    },
    /// Written by a newer redline.
    #[error("the run history {path} has schema version {found}, newer than this redline understands ({SCHEMA_VERSION}); upgrade redline (the file was left untouched)")]
    Newer {
        /// The database path.
        path: PathBuf,
        /// Its schema version.
        found: i64,
    },
    /// The database does not exist yet (read-only commands do not create it).
    #[error("no run history at {0} yet: runs are saved there by `redline run` (or use --db PATH)")]
    Missing(PathBuf),
    /// A run reference matched nothing.
    #[error("no saved run {0:?} (try `redline history`)")]
    NotFound(String),
    /// A run reference that cannot be parsed.
    #[error("bad run reference {0:?}: use an id, a label, `last` or `last~N`")]
    BadRef(String),
    /// A stored record could not be read back.
    #[error("saved run {id} cannot be read: {msg}")]
    BadRecord {
        /// The run id.
        id: i64,
        /// Why.
        msg: String,
    },
    /// A page load was named where a run record is needed, or the reverse.
    #[error("saved {id} is a {found}, not a {wanted}: {hint}")]
    WrongKind {
        /// The id.
        id: i64,
        /// What it is (`run`, `page load`).
        found: &'static str,
        /// What the command needs.
        wanted: &'static str,
        /// What to do instead.
        hint: &'static str,
    },
    /// Any other SQLite failure (disk full, locked for too long…).
    #[error("run history: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

impl HistoryError {
    /// True when the user can fix it by changing the command (exit code 2),
    /// false for runtime failures (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            HistoryError::NotFound(_)
                | HistoryError::BadRef(_)
                | HistoryError::WrongKind { .. }
                | HistoryError::Missing(_)
                | HistoryError::Corrupt { .. }
                | HistoryError::Newer { .. }
                | HistoryError::NoPath
        )
    }
}

/// The database path: `flag` if given, else `$REDLINE_DB`, else the platform's
/// data directory.
pub fn resolve_path(flag: Option<&Path>) -> Result<PathBuf, HistoryError> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os(DB_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    default_path().ok_or(HistoryError::NoPath)
}

/// `$XDG_DATA_HOME/redline/history.db`, else `~/.local/share/redline/history.db`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|p| !p.is_empty() && Path::new(p).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("share"))
        })?;
    Some(base.join("redline").join("history.db"))
}

/// One line of `redline history`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// The run id.
    pub id: i64,
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// Target URL.
    pub url: String,
    /// HTTP method.
    pub method: String,
    /// `closed` or `open`.
    pub load_model: String,
    /// The load in words.
    pub load: String,
    /// `--label`.
    pub label: Option<String>,
    /// `--note`.
    pub note: Option<String>,
    /// Run time, seconds.
    pub duration_s: f64,
    /// Completed responses per second.
    pub requests_per_sec: f64,
    /// Completed responses.
    pub completed: u64,
    /// Failed requests.
    pub failed: u64,
    /// Responses outside 2xx.
    pub non_2xx: u64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// p99 latency, µs.
    pub p99_us: u64,
    /// The client may have been the limit.
    pub client_limited: bool,
    /// Stopped early.
    pub interrupted: bool,
    /// [`KIND_RUN`] or [`KIND_PAGE`].
    pub kind: String,
}

/// The columns of a saved page load (the record is the page report's JSON).
#[derive(Debug, Clone)]
pub struct PageSave<'a> {
    /// When the first view started (RFC 3339).
    pub started_at: &'a str,
    /// The page (credentials removed).
    pub url: &'a str,
    /// `--label`.
    pub label: Option<&'a str>,
    /// `--note`.
    pub note: Option<&'a str>,
    /// How many times the views were loaded (`-n`).
    pub runs: u64,
    /// The first view's median time (ms).
    pub first_view_ms: f64,
    /// The first view's requests.
    pub requests: u64,
    /// The first view's errors.
    pub errors: u64,
    /// The first view stopped at the byte budget or resource cap.
    pub truncated: bool,
    /// The page report (JSON, secrets already removed).
    pub record: &'a str,
}

/// A saved entry: a run record, or a page load's report (JSON).
#[derive(Debug, Clone)]
pub enum Saved {
    /// A run (`redline run`, `merge --save`).
    Run(Box<RunRecord>),
    /// A page load (`redline page`): its JSON report.
    Page(String),
    /// A trial (`redline trial`): its JSON record.
    Trial(String),
}

/// The columns of a saved trial (the record is the trial's JSON).
#[derive(Debug, Clone)]
pub struct TrialSave<'a> {
    /// When the first round started (RFC 3339).
    pub started_at: &'a str,
    /// The target (credentials removed).
    pub url: &'a str,
    /// The method.
    pub method: &'a str,
    /// The rounds and their load, in words.
    pub load: &'a str,
    /// The trial's label.
    pub label: &'a str,
    /// `--note`.
    pub note: Option<&'a str>,
    /// Wall time of the trial, seconds.
    pub duration_s: f64,
    /// Mean req/s of B's rounds.
    pub requests_per_sec: f64,
    /// Responses over all rounds.
    pub completed: u64,
    /// Stopped before every round ran.
    pub interrupted: bool,
    /// The trial record (JSON, secrets already removed).
    pub record: &'a str,
}

/// Filters for [`Store::list`].
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only runs whose URL contains this.
    pub url: Option<String>,
    /// Only runs with exactly this label.
    pub label: Option<String>,
    /// Only runs started at or after this RFC 3339 time (or date prefix).
    pub since: Option<String>,
    /// At most this many (newest first).
    pub limit: Option<u64>,
}

/// An open run history.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

fn corrupt(path: &Path, e: impl std::fmt::Display) -> HistoryError {
    HistoryError::Corrupt {
        path: path.to_path_buf(),
        msg: e.to_string(),
    }
}

/// Maps SQLite errors that mean "this file is damaged or not a database".
fn classify(path: &Path, e: rusqlite::Error) -> HistoryError {
    use rusqlite::ErrorCode::*;
    match e.sqlite_error_code() {
        Some(NotADatabase) | Some(DatabaseCorrupt) => corrupt(path, e),
        _ => HistoryError::Sqlite(e),
    }
}

impl Store {
    /// Opens the history at `path`, creating it (and its directory) if needed,
    /// and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Store, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| HistoryError::Open {
                path: path.to_path_buf(),
                msg: format!("cannot create {}: {e}", dir.display()),
            })?;
        }
        Store::open_with(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )
    }

    /// Opens an existing history; [`HistoryError::Missing`] when there is none
    /// (the read-only commands do not create an empty database).
    pub fn open_existing(path: &Path) -> Result<Store, HistoryError> {
        if !path.exists() {
            return Err(HistoryError::Missing(path.to_path_buf()));
        }
        Store::open_with(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
    }

    fn open_with(path: &Path, flags: OpenFlags) -> Result<Store, HistoryError> {
        if path.is_dir() {
            return Err(HistoryError::Open {
                path: path.to_path_buf(),
                msg: "it is a directory".into(),
            });
        }
        let flags = flags | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| HistoryError::Open {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| classify(path, e))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        // Reading the header is the first thing that fails on a file that is
        // not a SQLite database. Everything up to the WAL switch only reads:
        // a file that is not redline's, or fails its integrity check, is
        // refused before anything writes to it (the journal mode is written
        // into the file's header).
        let version = store.user_version()?;
        store.check_version(version)?;
        store.check_ours(version)?;
        if version > 0 {
            store.check_integrity()?;
        }
        // WAL: readers never block the writer, and concurrent redline
        // processes only queue for the short write transaction.
        let _mode: String = store
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| classify(path, e))?;
        store
            .conn
            .execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
            .map_err(|e| classify(path, e))?;
        store.migrate()?;
        Ok(store)
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn user_version(&self) -> Result<i64, HistoryError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| classify(&self.path, e))
    }

    fn check_version(&self, v: i64) -> Result<(), HistoryError> {
        if v > SCHEMA_VERSION {
            return Err(HistoryError::Newer {
                path: self.path.clone(),
                found: v,
            });
        }
        if v < 0 {
            return Err(corrupt(&self.path, format!("schema version {v}")));
        }
        Ok(())
    }

    /// Version 0 must be an empty database (a new file); a versioned one must
    /// have our `runs` table with our columns. Reads only.
    fn check_ours(&self, version: i64) -> Result<(), HistoryError> {
        let names = |sql: &str| -> Result<Vec<String>, HistoryError> {
            let mut st = self
                .conn
                .prepare(sql)
                .map_err(|e| classify(&self.path, e))?;
            let rows = st
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(|e| classify(&self.path, e))?;
            rows.collect::<Result<Vec<_>, _>>()
                .map_err(|e| classify(&self.path, e))
        };
        let tables = names("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")?;
        if version == 0 {
            let objects = names("SELECT name FROM sqlite_master")?;
            if objects.is_empty() {
                return Ok(());
            }
            let mut shown: Vec<&str> = tables.iter().map(|t| t.as_str()).take(5).collect();
            if tables.len() > 5 {
                shown.push("…");
            }
            return Err(corrupt(
                &self.path,
                format!(
                    "a SQLite database of someone else: {} table(s) ({}) and no redline schema version",
                    tables.len(),
                    shown.join(", ")
                ),
            ));
        }
        if !tables.iter().any(|t| t == "runs") {
            return Err(corrupt(
                &self.path,
                format!("schema version {version} but no runs table"),
            ));
        }
        let cols = names("SELECT name FROM pragma_table_info('runs')")?;
        for want in ["id", "started_at", "url", "record"] {
            if !cols.iter().any(|c| c == want) {
                return Err(corrupt(
                    &self.path,
                    format!("its runs table has no {want} column: not redline's"),
                ));
            }
        }
        Ok(())
    }

    /// `PRAGMA quick_check` (reads only); what it found, when it is not "ok".
    fn check_integrity(&self) -> Result<(), HistoryError> {
        let mut st = self
            .conn
            .prepare("PRAGMA quick_check(5)")
            .map_err(|e| classify(&self.path, e))?;
        let found: Vec<String> = st
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect())
            .map_err(|e| classify(&self.path, e))?;
        if found.len() == 1 && found[0] == "ok" {
            return Ok(());
        }
        let one_line: Vec<String> = found
            .iter()
            .map(|f| f.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        Err(corrupt(
            &self.path,
            format!("PRAGMA quick_check found: {}", one_line.join("; ")),
        ))
    }

    /// Applies the missing migrations, each in the same write transaction as
    /// the version bump, so a crash leaves the old or the new schema.
    fn migrate(&mut self) -> Result<(), HistoryError> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| classify(&path, e))?;
        // Read again under the write lock: another process may have migrated.
        let v: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| classify(&path, e))?;
        if v > SCHEMA_VERSION {
            return Err(HistoryError::Newer { path, found: v });
        }
        if v == 0 {
            // A fresh file has no schema at all; anything else at version 0
            // belongs to someone else and must not be touched.
            let n: i64 = tx
                .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
                .map_err(|e| classify(&path, e))?;
            if n > 0 {
                return Err(corrupt(
                    &path,
                    "a SQLite database with other tables and no redline schema version",
                ));
            }
        }
        if v == SCHEMA_VERSION {
            return Ok(()); // dropping the transaction rolls back nothing
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(v as usize) {
            tx.execute_batch(sql).map_err(|e| classify(&path, e))?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(|e| classify(&path, e))?;
        }
        tx.commit().map_err(|e| classify(&path, e))?;
        Ok(())
    }

    /// Saves a run record; returns its id.
    pub fn save(&mut self, rec: &RunRecord) -> Result<i64, HistoryError> {
        let json = serde_json::to_string(rec).map_err(|e| HistoryError::Open {
            path: self.path.clone(),
            msg: format!("cannot serialize the run record: {e}"),
        })?;
        let load_model = if rec.config.load.is_open() {
            "open"
        } else {
            "closed"
        };
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| classify(&path, e))?;
        tx.execute(
            "INSERT INTO runs (saved_at, started_at, url, method, load_model, load, label, note,
                duration_s, requests_per_sec, completed, failed, non_2xx, p50_us, p99_us,
                client_limited, interrupted, merged_runs, record)
             VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?1, ?2, ?3, ?4, ?5, ?6, ?7,
                ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
            params![
                rec.started_at,
                rec.config.url,
                rec.config.method,
                load_model,
                rec.config.load.describe(),
                rec.label,
                rec.note,
                rec.duration_s,
                finite(rec.requests_per_sec),
                rec.counters.completed as i64,
                rec.counters.failed as i64,
                rec.counters.non_2xx as i64,
                rec.latency.percentile(50.0) as i64,
                rec.latency.percentile(99.0) as i64,
                rec.client_limited,
                rec.interrupted,
                rec.merged_runs as i64,
                json,
            ],
        )
        .map_err(|e| classify(&path, e))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| classify(&path, e))?;
        Ok(id)
    }

    /// Saves a page load; returns its id (in the runs' sequence).
    pub fn save_page(&mut self, p: &PageSave) -> Result<i64, HistoryError> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| classify(&path, e))?;
        let load = format!(
            "page, {} load{} of 3 views",
            p.runs,
            if p.runs == 1 { "" } else { "s" }
        );
        tx.execute(
            "INSERT INTO runs (saved_at, started_at, url, method, load_model, load, label, note,
                duration_s, requests_per_sec, completed, failed, non_2xx, p50_us, p99_us,
                client_limited, interrupted, merged_runs, record, kind)
             VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?1, ?2, 'GET', 'page', ?3, ?4, ?5,
                ?6, 0, ?7, ?8, 0, ?9, ?9, 0, ?10, ?11, ?12, 'page')",
            params![
                p.started_at,
                p.url,
                load,
                p.label,
                p.note,
                finite(p.first_view_ms / 1000.0),
                p.requests as i64,
                p.errors as i64,
                finite(p.first_view_ms * 1000.0) as i64,
                p.truncated,
                p.runs as i64,
                p.record,
            ],
        )
        .map_err(|e| classify(&path, e))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| classify(&path, e))?;
        Ok(id)
    }

    /// Saves a trial; returns its id (in the runs' sequence).
    pub fn save_trial(&mut self, t: &TrialSave) -> Result<i64, HistoryError> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| classify(&path, e))?;
        tx.execute(
            "INSERT INTO runs (saved_at, started_at, url, method, load_model, load, label, note,
                duration_s, requests_per_sec, completed, failed, non_2xx, p50_us, p99_us,
                client_limited, interrupted, merged_runs, record, kind)
             VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?1, ?2, ?3, 'trial', ?4, ?5, ?6,
                ?7, ?8, ?9, 0, 0, 0, 0, 0, ?10, 0, ?11, 'trial')",
            params![
                t.started_at,
                t.url,
                t.method,
                t.load,
                t.label,
                t.note,
                finite(t.duration_s),
                finite(t.requests_per_sec),
                t.completed as i64,
                t.interrupted,
                t.record,
            ],
        )
        .map_err(|e| classify(&path, e))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| classify(&path, e))?;
        Ok(id)
    }

    /// Runs matching `f`, newest first.
    pub fn list(&self, f: &Filter) -> Result<Vec<RunSummary>, HistoryError> {
        let mut sql = String::from(
            "SELECT id, started_at, url, method, load_model, load, label, note, duration_s,
                requests_per_sec, completed, failed, non_2xx, p50_us, p99_us, client_limited,
                interrupted, kind FROM runs WHERE 1 = 1",
        );
        let mut args: Vec<String> = Vec::new();
        if let Some(u) = &f.url {
            args.push(u.clone());
            sql.push_str(&format!(" AND instr(url, ?{}) > 0", args.len()));
        }
        if let Some(l) = &f.label {
            args.push(l.clone());
            sql.push_str(&format!(" AND label = ?{}", args.len()));
        }
        if let Some(s) = &f.since {
            args.push(s.clone());
            sql.push_str(&format!(" AND started_at >= ?{}", args.len()));
        }
        sql.push_str(" ORDER BY id DESC");
        if let Some(n) = f.limit {
            sql.push_str(&format!(" LIMIT {}", n.min(i64::MAX as u64)));
        }
        let mut st = self
            .conn
            .prepare(&sql)
            .map_err(|e| classify(&self.path, e))?;
        let rows = st
            .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                Ok(RunSummary {
                    id: r.get(0)?,
                    started_at: r.get(1)?,
                    url: r.get(2)?,
                    method: r.get(3)?,
                    load_model: r.get(4)?,
                    load: r.get(5)?,
                    label: r.get(6)?,
                    note: r.get(7)?,
                    duration_s: r.get(8)?,
                    requests_per_sec: r.get(9)?,
                    completed: r.get::<_, i64>(10)? as u64,
                    failed: r.get::<_, i64>(11)? as u64,
                    non_2xx: r.get::<_, i64>(12)? as u64,
                    p50_us: r.get::<_, i64>(13)? as u64,
                    p99_us: r.get::<_, i64>(14)? as u64,
                    client_limited: r.get(15)?,
                    interrupted: r.get(16)?,
                    kind: r.get(17)?,
                })
            })
            .map_err(|e| classify(&self.path, e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| classify(&self.path, e))
    }

    /// Resolves a run reference: an id, `last`, `last~N` (N runs before the
    /// newest) or a label (the newest run with it). Runs and page loads alike.
    pub fn resolve(&self, r: &str) -> Result<i64, HistoryError> {
        self.resolve_in(r, None)
    }

    /// As [`Store::resolve`] for commands that take runs only: `last`,
    /// `last~N` and labels skip page loads (an explicit id is taken as is).
    pub fn resolve_run(&self, r: &str) -> Result<i64, HistoryError> {
        self.resolve_in(r, Some(KIND_RUN))
    }

    fn resolve_in(&self, r: &str, kind: Option<&str>) -> Result<i64, HistoryError> {
        let r = r.trim();
        if r.is_empty() {
            return Err(HistoryError::BadRef(r.into()));
        }
        let found: Option<i64> = if let Some(rest) = r.strip_prefix("last") {
            let back: i64 = match rest.strip_prefix('~') {
                None if rest.is_empty() => 0,
                Some(n) => n
                    .parse::<u32>()
                    .map_err(|_| HistoryError::BadRef(r.into()))?
                    .into(),
                None => return self.resolve_label(r, kind),
            };
            self.conn
                .query_row(
                    "SELECT id FROM runs WHERE ?2 IS NULL OR kind = ?2
                     ORDER BY id DESC LIMIT 1 OFFSET ?1",
                    params![back, kind],
                    |row| row.get(0),
                )
                .optional()
                .map_err(|e| classify(&self.path, e))?
        } else if let Ok(id) = r.trim_start_matches('#').parse::<i64>() {
            self.conn
                .query_row("SELECT id FROM runs WHERE id = ?1", [id], |row| row.get(0))
                .optional()
                .map_err(|e| classify(&self.path, e))?
        } else {
            return self.resolve_label(r, kind);
        };
        found.ok_or_else(|| HistoryError::NotFound(r.into()))
    }

    fn resolve_label(&self, label: &str, kind: Option<&str>) -> Result<i64, HistoryError> {
        self.conn
            .query_row(
                "SELECT id FROM runs WHERE label = ?1 AND (?2 IS NULL OR kind = ?2)
                 ORDER BY id DESC LIMIT 1",
                params![label, kind],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| classify(&self.path, e))?
            .ok_or_else(|| HistoryError::NotFound(label.into()))
    }

    /// The stored run record of run `id` ([`HistoryError::WrongKind`] for a
    /// page load).
    pub fn get(&self, id: i64) -> Result<RunRecord, HistoryError> {
        match self.get_saved(id)? {
            Saved::Run(r) => Ok(*r),
            Saved::Page(_) => Err(HistoryError::WrongKind {
                id,
                found: "page load",
                wanted: "run",
                hint: "show, export and compare take page loads; report and merge take runs",
            }),
            Saved::Trial(_) => Err(HistoryError::WrongKind {
                id,
                found: "trial",
                wanted: "run",
                hint: "show, export, report and `compare ID` take a trial; its rounds are runs of their own (`redline history --label LABEL:A`)",
            }),
        }
    }

    /// What is saved under `id`: a run record or a page load's JSON.
    pub fn get_saved(&self, id: i64) -> Result<Saved, HistoryError> {
        let (json, kind): (String, String) = self
            .conn
            .query_row("SELECT record, kind FROM runs WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(|e| classify(&self.path, e))?
            .ok_or_else(|| HistoryError::NotFound(id.to_string()))?;
        if kind == KIND_PAGE {
            return Ok(Saved::Page(json));
        }
        if kind == KIND_TRIAL {
            return Ok(Saved::Trial(json));
        }
        RunRecord::from_json(&json)
            .map(|r| Saved::Run(Box::new(r)))
            .map_err(|e| HistoryError::BadRecord {
                id,
                msg: e.to_string(),
            })
    }

    /// Deletes run `id`; false when there was none.
    pub fn remove(&mut self, id: i64) -> Result<bool, HistoryError> {
        let n = self
            .conn
            .execute("DELETE FROM runs WHERE id = ?1", [id])
            .map_err(|e| classify(&self.path, e))?;
        Ok(n > 0)
    }
}

fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

/// Turns `--since` into an RFC 3339 lower bound: a date or time prefix
/// (`2025-05-01`, `2025-05-01T12:00`) is used as is; a relative age
/// (`30m`, `12h`, `7d`, `2w`) counts back from `now_unix_s`.
pub fn since_bound(s: &str, now_unix_s: i64) -> Result<String, String> {
    let s = s.trim();
    let bytes = s.as_bytes();
    let is_date = bytes.len() >= 10
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[5..7].iter().all(u8::is_ascii_digit)
        && bytes[7] == b'-'
        && bytes[8..10].iter().all(u8::is_ascii_digit);
    if is_date {
        // Accept `2025-05-01 12:00` too.
        return Ok(s.replacen(' ', "T", 1));
    }
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num.parse().map_err(|_| {
        format!("bad --since {s:?}: use a date (2025-05-01) or an age (30m, 12h, 7d)")
    })?;
    let secs = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => {
            return Err(format!(
                "bad --since {s:?}: use a date (2025-05-01) or an age (30m, 12h, 7d)"
            ))
        }
    };
    let t = now_unix_s.saturating_sub(n.saturating_mul(secs)).max(0);
    let st = std::time::UNIX_EPOCH + Duration::from_secs(t as u64);
    Ok(redline_stats::time::rfc3339(st))
}

#[cfg(test)]
mod tests;
