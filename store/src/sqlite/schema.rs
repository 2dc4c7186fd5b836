//! The store's tables (`sg_store_*`, beside a checkpoint file's `sg_*` ones), their version,
//! and the connection's settings.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior};

use super::sql::db;
use crate::StoreError;

/// The newest store schema this build reads, and the one it gives a new file.
pub const SCHEMA_VERSION: u32 = 1;

/// The tables. `sg_store_items.value` is the item's JSON in SQLite's binary JSONB form
/// (`json_extract` reads it without parsing text); `sg_store_items.id` is the rowid of the item's full-text row and the owner of
/// its vector rows; `ns` is the namespace's labels joined with `.`, so a namespace prefix is
/// a range of keys. `sg_store_meta` holds the schema version and `vectors_generation`, which
/// every transaction that changes a vector row increments, so a handle knows when its mirror
/// of the vectors is stale. `sg_store_items_by_recency` is in the order of a search without a
/// query, so such a search reads a page off it and stops (it replaced an index on
/// `updated_at` alone; an index changes no answer, so files of either kind stay version 1).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sg_store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sg_store_items (
    id         INTEGER PRIMARY KEY,
    ns         TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    ttl_ms     INTEGER,
    expires_at INTEGER,
    UNIQUE (ns, key)
);
CREATE INDEX IF NOT EXISTS sg_store_items_by_expiry
    ON sg_store_items (expires_at) WHERE expires_at IS NOT NULL;
DROP INDEX IF EXISTS sg_store_items_by_update;
CREATE INDEX IF NOT EXISTS sg_store_items_by_recency
    ON sg_store_items (updated_at DESC, ns, key);
CREATE VIRTUAL TABLE IF NOT EXISTS sg_store_fts USING fts5 (
    text, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TABLE IF NOT EXISTS sg_store_vectors (
    item   INTEGER NOT NULL,
    field  INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (item, field)
) WITHOUT ROWID;
INSERT OR IGNORE INTO sg_store_meta (key, value) VALUES ('vectors_generation', '0');
";

/// How hard SQLite syncs a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `synchronous=FULL`: a committed batch survives power loss.
    #[default]
    Full,
    /// `synchronous=NORMAL`: a committed batch survives a process crash; the last ones may be
    /// lost on power loss.
    Normal,
}

/// How a [`SqliteStore`](super::SqliteStore) talks to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteStoreOptions {
    /// How long a write waits for another connection's lock (a checkpoint saver's, another
    /// process's) before it fails. Default 5 s.
    pub busy_timeout: Duration,
    /// How commits are synced. Default FULL.
    pub synchronous: Synchronous,
}

impl Default for SqliteStoreOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Full,
        }
    }
}

/// Opens `path` with the settings of a checkpoint file: WAL, a busy timeout, the sync mode.
pub(super) fn connect(path: &Path, options: &SqliteStoreOptions) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(db("opening the store file"))?;
    conn.busy_timeout(options.busy_timeout)
        .map_err(db("setting the busy timeout"))?;
    // A journal-mode change that would wait on another connection's lock fails at once
    // ("database is locked", without the busy handler), so it is tried again.
    let deadline = Instant::now() + options.busy_timeout;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            other => break other.map_err(db("setting the WAL journal mode"))?,
        }
    }
    let sync = match options.synchronous {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)
        .map_err(db("setting the sync mode"))?;
    Ok(conn)
}

/// Whether SQLite reported the database busy or locked.
pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code()
        .is_some_and(|c| matches!(c, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Checks the file's store schema version and creates what is missing, in one transaction.
///
/// # Errors
/// [`StoreError::SchemaTooNew`] when the file's store tables are of a newer version (nothing
/// is written); [`StoreError::Database`] otherwise.
pub(super) fn init(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db("starting the schema transaction"))?;
    if let Some(found) = version(&tx)? {
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION,
            });
        }
    }
    tx.execute_batch(SCHEMA)
        .map_err(db("creating the store tables"))?;
    tx.execute(
        "INSERT OR IGNORE INTO sg_store_meta (key, value) VALUES ('schema_version', ?1)",
        [SCHEMA_VERSION.to_string()],
    )
    .map_err(db("recording the store schema version"))?;
    tx.commit().map_err(db("committing the store tables"))
}

/// The file's store schema version; `None` when it has no store tables yet.
fn version(conn: &Connection) -> Result<Option<u32>, StoreError> {
    let has_meta: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sg_store_meta'",
            [],
            |r| r.get(0),
        )
        .map_err(db("looking for the store tables"))?;
    if has_meta == 0 {
        return Ok(None);
    }
    let text: Option<String> = conn
        .query_row(
            "SELECT value FROM sg_store_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(db("reading the store schema version"))?;
    let Some(text) = text else { return Ok(None) };
    text.parse().map(Some).map_err(|_| {
        StoreError::Database(format!(
            "the store schema version {text:?} in sg_store_meta is not a number"
        ))
    })
}
