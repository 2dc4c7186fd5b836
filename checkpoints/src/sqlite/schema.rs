//! The SQLite schema (format version 1) and connection set-up.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};

use super::sql::{is_busy_sqlite, retry_busy, SqlResult};
use crate::{CheckpointError, StorageError};

/// The newest file format version this build reads, and the one it gives a new file.
///
/// Format 2 is format 1 plus small whole values kept in the checkpoint record (the `Inline`
/// reference, decision 0018); the tables are the same. Format 3 is format 2 plus the holder
/// index `sg_holders` (which threads hold each value row and log), which every writer of a
/// format-3 file keeps, so deleting or pruning a thread collects values in proportion to what
/// that thread referred to (decision 0057); a build that does not keep it refuses the file
/// as newer, so the index cannot go stale. A file stays at the format it was made with: this
/// build writes nothing into a format-1 or format-2 file that its format lacks, so older
/// builds keep reading and writing it (its deletes and prunes read every row).
pub const FORMAT_VERSION: u32 = 3;

/// Tables of formats 1 to 3. See `docs/design.md` for each column.
///
/// `sg_runs` and `sg_receipts` (runs and their delivery receipts, decision 0022) and
/// `sg_shapes` (each field's recorded shape, decision 0044) and `sg_graphs`/`sg_thread_graphs`
/// (the shape of the graph that wrote a thread, decision 0050) are in every format: added to
/// an older file when this build opens it, in the schema transaction; so is
/// `sg_holders`, which stays empty in a file older than format 3. They
/// do not change the format version: no other table's bytes change, and a build without them
/// opens such a file (its schema statements only create missing tables) and ignores them.
/// Likewise `sg_runs.usage` (a run's token usage, decision 0083): added to an older file's
/// `sg_runs` in the schema transaction, ignored by a build that does not know it. The node
/// cache's table (`sg_node_cache`, decision 0096) is made by its first store, in any format:
/// a file whose graphs use no cache carries no page for it.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sg_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sg_shapes (
    thread TEXT NOT NULL,
    ns     TEXT NOT NULL,
    field  TEXT NOT NULL,
    shape  TEXT NOT NULL,
    PRIMARY KEY (thread, ns, field)
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
    metadata    TEXT NOT NULL,
    usage       TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sg_runs_by_thread ON sg_runs (thread, created_at, run_id);
CREATE TABLE IF NOT EXISTS sg_receipts (
    run_id  TEXT PRIMARY KEY,
    receipt TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sg_holders (
    kind   INTEGER NOT NULL,
    id     INTEGER NOT NULL,
    thread TEXT NOT NULL,
    PRIMARY KEY (kind, id, thread)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sg_graphs (
    hash  TEXT PRIMARY KEY,
    shape BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sg_thread_graphs (
    thread    TEXT NOT NULL,
    since_seq INTEGER NOT NULL,
    hash      TEXT NOT NULL,
    PRIMARY KEY (thread, since_seq)
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
    /// Open a file that lost committed checkpoints (its high-water record names a newer one
    /// than it holds, see [`CheckpointError::LostCommits`]) and go on from what is left: the
    /// record is reset to the file as it is. Default `false`: such a file is refused.
    pub accept_lost_commits: bool,
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
            accept_lost_commits: false,
        }
    }
}

/// Open a connection with the pragmas every connection needs.
pub(crate) fn connect(path: &Path, options: &SqliteOptions) -> Result<Connection, CheckpointError> {
    check_path(path)?;
    refuse_empty_beside_log(path)?;
    let conn = Connection::open(path).during("opening the database file")?;
    conn.busy_timeout(options.busy_timeout)
        .during("setting the busy timeout")?;
    // Before anything writes (the journal mode is written into the file): another
    // application's database is refused untouched.
    format_of(&conn, path)?;
    // Several processes opening a new file at once: SQLite answers a journal-mode change
    // that would wait on another connection's lock with "database is locked" at once,
    // without its busy handler (waiting there could deadlock), so it is tried again here.
    retry_busy(
        || conn.pragma_update(None, "journal_mode", "WAL"),
        is_busy_sqlite,
    )
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

/// Refuse an empty main file with a non-empty `-wal` beside it: SQLite takes a file of zero
/// pages for a new database and deletes its `-wal`, commits and all. A writer never leaves
/// that pair (the file has its first page before it is in WAL mode): it is damage, such as a
/// main file cut to nothing, and both files are left as they are.
fn refuse_empty_beside_log(path: &Path) -> Result<(), CheckpointError> {
    let main = std::fs::metadata(path).map(|m| m.len());
    match main {
        Ok(len) if super::read_only::empty_beside_wal(path, len, 1) => Err(StorageError::new(
            "opening the database file",
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the main file is empty but has a -wal with commits beside it: the file is \
                 damaged (cut short), and SQLite would delete the -wal on opening it, so both \
                 are left as they are",
            ),
        )
        .into()),
        _ => Ok(()),
    }
}

/// Refuse a path SQLite would not keep as one shared file: `""` (a private temporary
/// database) and `:memory:` (a private in-memory one). The saver reads through other
/// connections than its writer, which would each see an empty database of their own.
pub(crate) fn check_path(path: &Path) -> Result<(), CheckpointError> {
    let text = path.as_os_str();
    let reason = if text.is_empty() {
        "an empty path opens a private temporary database that the saver's readers cannot see; \
         use MemorySaver for checkpoints that need no file"
    } else if text == ":memory:" {
        "an in-memory database is private to one connection, and the saver reads through \
         others; use MemorySaver for checkpoints kept in memory"
    } else {
        return Ok(());
    };
    Err(CheckpointError::InvalidPath {
        path: text.to_string_lossy().into_owned(),
        reason,
    })
}

/// The file's format version, reading only: `None` for an empty database (a new file).
///
/// # Errors
/// [`CheckpointError::ForeignDatabase`] for a database with objects but no `sg_meta` table
/// (another application's; the long-term store's `sg_store_*` tables are not another
/// application's: a store file becomes a checkpoint file too);
/// [`CheckpointError::FormatRecord`] for an `sg_meta` table without a readable format record; [`CheckpointError::UnsupportedFormatVersion`] for a
/// newer format; storage errors.
pub(crate) fn format_of(conn: &Connection, path: &Path) -> Result<Option<u32>, CheckpointError> {
    let has_meta: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sg_meta'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .during("looking for the format table")?
        > 0;
    if !has_meta {
        let other: Option<String> = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
                 AND name NOT LIKE 'sg\\_store\\_%' ESCAPE '\\' \
                 ORDER BY type = 'table' DESC, name LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .during("looking for other applications' tables")?;
        return match other {
            Some(table) => Err(CheckpointError::ForeignDatabase {
                file: path.to_path_buf(),
                table,
            }),
            None => Ok(None),
        };
    }
    let row: Option<rusqlite::types::Value> = conn
        .query_row(
            "SELECT value FROM sg_meta WHERE key = 'format_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .during("reading the format version")?;
    let bad = |problem: String| CheckpointError::FormatRecord {
        file: path.to_path_buf(),
        problem,
    };
    let text = match row {
        None => return Err(bad("is missing".to_owned())),
        Some(rusqlite::types::Value::Text(t)) => t,
        Some(other) => return Err(bad(format!("is not text: {other:?}"))),
    };
    let found: u32 = match text.parse() {
        Ok(v) if v >= 1 => v,
        _ => return Err(bad(format!("is unreadable: {:?}", text))),
    };
    if found > FORMAT_VERSION {
        return Err(CheckpointError::UnsupportedFormatVersion {
            found,
            supported: FORMAT_VERSION,
        });
    }
    Ok(Some(found))
}

/// Create the schema if the file is new, and check its format version; the file's version.
///
/// A file with an `sg_meta` table but no readable format record is refused
/// ([`CheckpointError::FormatRecord`]), never given a new one: the record is written in the
/// transaction that creates the tables, so its absence is damage.
pub(crate) fn init(conn: &mut Connection, path: &Path) -> Result<u32, CheckpointError> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .during("beginning the schema transaction")?;
    // Check the version before writing anything: a newer, damaged or foreign file is
    // refused untouched.
    let found = format_of(&tx, path)?;
    tx.execute_batch(SCHEMA).during("creating the schema")?;
    super::runs::add_usage_column(&tx)?;
    if found.is_none() {
        tx.execute(
            "INSERT INTO sg_meta(key, value) VALUES ('format_version', ?1)",
            [FORMAT_VERSION.to_string()],
        )
        .during("recording the format version")?;
    }
    let new_id = super::high_water::ensure_file_id(&tx, path)?;
    tx.commit().during("committing the schema")?;
    if new_id {
        // Into the main file at once: the id must not hang on the log the high-water record
        // watches (best effort; a busy reader leaves it for the next checkpoint).
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
    }
    Ok(found.unwrap_or(FORMAT_VERSION))
}

#[cfg(test)]
mod tests {
    use crate::{CheckpointError, SqliteSaver};

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn another_applications_database_is_refused_untouched() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("shop.db");
        {
            let conn = rusqlite::Connection::open(&path)?;
            conn.execute_batch("CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (1);")?;
        }
        let bytes = std::fs::read(&path)?;
        let got = SqliteSaver::open(&path);
        match &got {
            Err(e @ CheckpointError::ForeignDatabase { table, .. }) => {
                assert_eq!(table, "orders");
                let text = e.to_string();
                assert!(
                    text.contains("shop.db") && text.contains("`orders`"),
                    "{text}"
                );
                assert!(text.contains("not a stategraph checkpoint file"), "{text}");
            }
            other => return Err(format!("expected ForeignDatabase, got {other:?}").into()),
        }
        assert!(std::fs::read(&path)? == bytes, "the file changed");
        let mut names: Vec<_> = std::fs::read_dir(dir.path())?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        assert_eq!(names, ["shop.db"]);
        let read = SqliteSaver::open_read_only(&path);
        assert!(
            matches!(read, Err(CheckpointError::ForeignDatabase { .. })),
            "{read:?}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_full_database_says_storage_error_once() -> TestResult {
        use crate::{RunId, RunRecord, RunStatus, Saver, SqliteOptions, ThreadId};
        let dir = tempfile::tempdir()?;
        let options = SqliteOptions {
            max_page_count: Some(24),
            ..SqliteOptions::default()
        };
        let saver = SqliteSaver::open_with(dir.path().join("t.db"), options)?;
        let thread = ThreadId::new("t")?;
        let mut failure = None;
        for i in 0..10_000 {
            let mut run = RunRecord::new(
                RunId::new(format!("r{i}"))?,
                thread.clone(),
                RunStatus::Running,
                1,
            );
            run.metadata
                .insert("pad".to_owned(), "x".repeat(2000).into());
            if let Err(e) = saver.put_run(run).await {
                failure = Some(e);
                break;
            }
        }
        let e = failure.ok_or("the capped database never filled")?;
        let text = e.to_string();
        assert!(text.contains("database or disk is full"), "{text}");
        assert_eq!(text.matches("storage error").count(), 1, "{text}");
        Ok(())
    }

    #[test]
    fn an_empty_or_in_memory_path_is_a_typed_error() {
        for path in ["", ":memory:"] {
            match SqliteSaver::open(path) {
                Err(e @ CheckpointError::InvalidPath { .. }) => {
                    assert!(e.to_string().contains("MemorySaver"), "{e}");
                }
                other => panic!("{path:?}: expected InvalidPath, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_empty_file_beside_a_wal_with_commits_is_refused_by_a_writer_and_both_kept() -> TestResult
    {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("t.db");
        let wal = dir.path().join("t.db-wal");
        std::fs::write(&path, b"")?;
        std::fs::write(&wal, vec![7u8; 4096])?;
        let got = SqliteSaver::open(&path);
        let e = got
            .err()
            .ok_or("a writer opened an empty file beside a log")?;
        assert!(e.to_string().contains("is empty but has a -wal"), "{e}");
        assert_eq!(std::fs::metadata(&wal)?.len(), 4096, "the -wal was touched");
        assert_eq!(std::fs::metadata(&path)?.len(), 0, "the file was written");
        Ok(())
    }

    #[test]
    fn a_missing_format_record_is_refused_by_a_writer_too() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("t.db");
        SqliteSaver::open(&path)?.close()?;
        rusqlite::Connection::open(&path)?
            .execute("DELETE FROM sg_meta WHERE key = 'format_version'", [])?;
        let got = SqliteSaver::open(&path);
        assert!(
            matches!(&got, Err(CheckpointError::FormatRecord { problem, .. }) if problem == "is missing"),
            "{got:?}"
        );
        let rows: i64 = rusqlite::Connection::open(&path)?.query_row(
            "SELECT count(*) FROM sg_meta WHERE key = 'format_version'",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(rows, 0, "the format record was written back");
        Ok(())
    }
}
