//! The SQLite schema (format version 1) and connection set-up.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};

use super::sql::SqlResult;
use crate::CheckpointError;

/// The newest file format version this build reads, and the one it gives a new file.
///
/// Format 2 is format 1 plus small whole values kept in the checkpoint record (the `Inline`
/// reference, decision 0018); the tables are the same. A format-1 file stays format 1: this
/// build writes nothing into it that format 1 lacks, so older builds keep reading it.
pub const FORMAT_VERSION: u32 = 2;

/// Tables of formats 1 and 2. See `docs/design.md` for each column.
///
/// `sg_runs` and `sg_receipts` (runs and their delivery receipts, decision 0022) are in both
/// formats: added to an older file when this build opens it, in the schema transaction. They
/// do not change the format version: no other table's bytes change, and a build without them
/// opens such a file (its schema statements only create missing tables) and ignores them.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sg_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sg_checkpoints (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    thread     TEXT NOT NULL,
    ns         TEXT NOT NULL,
    id         BLOB NOT NULL,
    parent     BLOB,
    parent_seq INTEGER,
    step       INTEGER NOT NULL,
    source     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    metadata   TEXT NOT NULL,
    depth      INTEGER NOT NULL,
    body_hash  BLOB NOT NULL,
    body       BLOB NOT NULL,
    UNIQUE (thread, ns, id)
);
CREATE TABLE IF NOT EXISTS sg_blobs (
    id   INTEGER PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS sg_logs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    base_log   INTEGER,
    base_parts INTEGER NOT NULL,
    tip        INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sg_log_parts (
    log  INTEGER NOT NULL,
    part INTEGER NOT NULL,
    blob INTEGER,
    hash BLOB,
    data BLOB,
    PRIMARY KEY (log, part)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sg_writes (
    thread     TEXT NOT NULL,
    ns         TEXT NOT NULL,
    checkpoint BLOB NOT NULL,
    task       BLOB NOT NULL,
    idx        INTEGER NOT NULL,
    ord        INTEGER NOT NULL,
    node       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    hash       BLOB NOT NULL,
    data       BLOB NOT NULL,
    PRIMARY KEY (thread, ns, checkpoint, task, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sg_runs (
    run_id      TEXT PRIMARY KEY,
    thread      TEXT NOT NULL,
    status      TEXT NOT NULL,
    reason      TEXT,
    stop_reason TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    metadata    TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sg_runs_by_thread ON sg_runs (thread, created_at, run_id);
CREATE TABLE IF NOT EXISTS sg_receipts (
    run_id  TEXT PRIMARY KEY,
    receipt TEXT NOT NULL
) WITHOUT ROWID;
";

/// How hard SQLite syncs a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `synchronous=FULL`: a committed checkpoint survives power loss.
    #[default]
    Full,
    /// `synchronous=NORMAL`: survives a process crash; the last commits may be lost on power
    /// loss.
    Normal,
}

impl Synchronous {
    /// The pragma value.
    pub fn as_str(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// Options of a [`SqliteSaver`](super::SqliteSaver).
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How commits are synced (default FULL).
    pub synchronous: Synchronous,
    /// How long a connection waits for another writer's lock before retrying.
    pub busy_timeout: Duration,
    /// Largest value (one field's stored part) accepted, in bytes.
    pub max_value_bytes: usize,
    /// A full state record is stored at least every this many checkpoints of a branch (the
    /// others store what changed since their parent); bounds the rows a load reads.
    pub full_every: u32,
    /// Cap the database at this many pages (SQLite's `max_page_count`): a write that would
    /// grow it further fails with a storage error ("database or disk is full") and commits
    /// nothing, as on a full disk. `None`: no cap.
    pub max_page_count: Option<u64>,
    /// With `synchronous=FULL`, keep the `-wal` file at the size it reaches between two
    /// automatic checkpoints (about 4.4 MB at the default page size) by extending it with
    /// zeros, under the write lock, before the writer's first commit and whenever another
    /// connection truncated it: each commit's fsync then overwrites blocks the file already
    /// has instead of growing it (about 40% cheaper on the disks we measured). Default `true`;
    /// the WAL is still folded back and truncated when the saver closes. See decision 0017.
    pub preallocate_wal: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
            max_value_bytes: 16 << 20,
            full_every: 16,
            max_page_count: None,
            preallocate_wal: true,
        }
    }
}

/// Open a connection with the pragmas every connection needs.
pub(crate) fn connect(
    path: &std::path::Path,
    options: &SqliteOptions,
) -> Result<Connection, CheckpointError> {
    let conn = Connection::open(path).during("opening the database file")?;
    conn.busy_timeout(options.busy_timeout)
        .during("setting the busy timeout")?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .during("setting the WAL journal mode")?;
    conn.pragma_update(None, "synchronous", options.synchronous.as_str())
        .during("setting the sync mode")?;
    conn.pragma_update(None, "foreign_keys", "OFF")
        .during("setting foreign_keys")?;
    if let Some(pages) = options.max_page_count {
        let pages = i64::try_from(pages).unwrap_or(i64::MAX);
        conn.pragma_update(None, "max_page_count", pages)
            .during("setting max_page_count")?;
    }
    // Keep each prepared statement's plan: without this, SQLite (built with STAT4) re-plans a
    // statement with bound range parameters on every run.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .during("keeping statement plans")?;
    Ok(conn)
}

/// Create the schema if the file is new, and check its format version; the file's version.
pub(crate) fn init(conn: &mut Connection) -> Result<u32, CheckpointError> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .during("beginning the schema transaction")?;
    // Check the version before writing anything: a newer file is refused untouched.
    let has_meta: bool = tx
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sg_meta'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .during("looking for the format table")?
        > 0;
    let found: Option<String> = if has_meta {
        tx.query_row(
            "SELECT value FROM sg_meta WHERE key = 'format_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .during("reading the format version")?
    } else {
        None
    };
    let found = match &found {
        Some(v) => {
            let found: u32 = v.parse().map_err(|_| CheckpointError::Integrity {
                thread: "-".to_owned(),
                checkpoint: "-".to_owned(),
                blob: "sg_meta.format_version".to_owned(),
                detail: format!("unreadable format version {v:?}"),
            })?;
            if found > FORMAT_VERSION {
                return Err(CheckpointError::UnsupportedFormatVersion {
                    found,
                    supported: FORMAT_VERSION,
                });
            }
            Some(found)
        }
        None => None,
    };
    tx.execute_batch(SCHEMA).during("creating the schema")?;
    if found.is_none() {
        tx.execute(
            "INSERT INTO sg_meta(key, value) VALUES ('format_version', ?1)",
            [FORMAT_VERSION.to_string()],
        )
        .during("recording the format version")?;
    }
    tx.commit().during("committing the schema")?;
    Ok(found.unwrap_or(FORMAT_VERSION))
}
