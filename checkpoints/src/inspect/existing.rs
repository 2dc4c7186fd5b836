//! Opening an existing checkpoint file without changing it: never creating a missing file,
//! never adding tables to another program's database; its `(thread, namespace)` pairs.

use std::path::Path;

use rusqlite::Connection;

use crate::sqlite::read_only::read_unchanged;
use crate::{CheckpointError, SqliteSaver};

fn storage(e: rusqlite::Error) -> CheckpointError {
    CheckpointError::Storage(Box::new(e))
}

fn not_stategraph(detail: &str) -> CheckpointError {
    CheckpointError::Integrity {
        thread: "-".to_owned(),
        checkpoint: "-".to_owned(),
        blob: "sg_meta".to_owned(),
        detail: format!("not a stategraph checkpoint file: {detail}"),
    }
}

/// Open `path` read-only with SQLite, without creating it and without leaving a `-wal` or
/// `-shm` beside it (see [`SqliteSaver::open_read_only`]).
pub(super) fn read_only(path: &Path) -> Result<Connection, CheckpointError> {
    Ok(crate::sqlite::read_only::connect(path, &crate::SqliteOptions::default())?.conn)
}

/// Whether an error is SQLite's "a hot journal needs a writer to roll it back".
fn needs_rollback(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK)
}

/// Check, without writing, that `path` exists and holds stategraph's tables.
pub(super) fn check_existing(path: &Path) -> Result<(), CheckpointError> {
    if !path.is_file() {
        return Err(CheckpointError::Storage(Box::new(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}: no such file", path.display()),
        ))));
    }
    let conn = read_only(path)?;
    let found = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sg_meta'",
        [],
        |r| r.get::<_, i64>(0),
    );
    match found {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => Err(not_stategraph("it has no sg_meta table")),
        // A file whose creation was cut short: only a writer may roll its journal back, and
        // opening it as a saver does just that.
        Err(e) if needs_rollback(&e) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::NotADatabase =>
        {
            Err(not_stategraph("it is not an SQLite database"))
        }
        Err(e) => Err(storage(e)),
    }
}

/// Open an existing checkpoint file as a saver. Unlike [`SqliteSaver::open`] it never creates
/// a file and never adds tables to a database that is not a stategraph file.
///
/// # Errors
/// A storage error (`NotFound`) for a missing file; [`CheckpointError::Integrity`] naming
/// `sg_meta` for a file that is not a stategraph checkpoint file; the errors of
/// [`SqliteSaver::open`].
pub fn open_existing(path: &Path) -> Result<SqliteSaver, CheckpointError> {
    check_existing(path)?;
    SqliteSaver::open(path)
}

/// Open an existing checkpoint file to read it only: [`SqliteSaver::open_read_only`] after
/// the checks of [`open_existing`]. Nothing is written to the file, and a damaged format
/// record is reported, never rewritten.
///
/// # Errors
/// As [`open_existing`], and those of [`SqliteSaver::open_read_only`].
pub fn open_existing_read_only(path: &Path) -> Result<SqliteSaver, CheckpointError> {
    check_existing(path)?;
    SqliteSaver::open_read_only(path)
}

/// Every `(thread, namespace)` pair of the file with its number of checkpoints, ordered by
/// thread then namespace (the root namespace `""` first).
///
/// # Errors
/// Storage errors; a missing file is a `NotFound` storage error.
pub fn namespaces(path: &Path) -> Result<Vec<(String, String, usize)>, CheckpointError> {
    check_existing(path)?;
    read_unchanged(path, list_namespaces)?.0.map_err(storage)
}

fn list_namespaces(conn: &Connection) -> rusqlite::Result<Vec<(String, String, usize)>> {
    conn.prepare(
        "SELECT thread, ns, count(*) FROM sg_checkpoints GROUP BY thread, ns ORDER BY thread, ns",
    )?
    .query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            usize::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
        ))
    })?
    .collect()
}
