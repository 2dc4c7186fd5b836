//! The long-term store of a checkpoint file, opened for reading: the `sg_store_*` tables a
//! server or a program's `SqliteStore` keeps beside the checkpoints.

use std::path::Path;

use stategraph_store::{SqliteStore, StoreConfig, StoreError};

/// The store in `file`, or `None` when the file holds none (nothing is created then).
///
/// The file must exist. Reads through the returned store should not refresh TTLs
/// (`refresh_ttl: false`), so that looking changes nothing.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("threads.db");
/// stategraph_checkpoints::SqliteSaver::open(&path)?.close()?;
/// assert!(stategraph_studio::open_store(&path)?.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`StoreError::Database`] when the file is missing or not a database.
pub fn open_store(file: &Path) -> Result<Option<SqliteStore>, StoreError> {
    let db = |e: rusqlite::Error| StoreError::Database(format!("{}: {e}", file.display()));
    let conn = rusqlite::Connection::open_with_flags(
        file,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db)?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sg_store_items'",
            [],
            |row| row.get(0),
        )
        .map_err(db)?;
    drop(conn);
    if tables == 0 {
        return Ok(None);
    }
    SqliteStore::open(file, StoreConfig::default()).map(Some)
}
