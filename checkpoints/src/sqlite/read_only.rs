//! Opening a checkpoint file read-only (decision 0035): SQLite's `SQLITE_OPEN_READ_ONLY`,
//! so a user without write access to the file or its directory can read it, and a read never
//! changes the file or leaves a `-wal`/`-shm` beside it that was not there.
//!
//! A WAL database opened read-only still creates the `-wal` and `-shm` files when they are
//! missing (and cannot, in a read-only directory). So when the file has no `-wal` (nothing is
//! committed outside the main file, and no connection has it open) it is opened `immutable`:
//! no locks, no side files. Such a connection is only trusted while the file stays as it was
//! (same size and modification time, still no `-wal`): each read checks that before and
//! after, and reads again on a fresh connection if a writer came in between. When the `-wal`
//! exists it is opened read-only the ordinary way, reading what the WAL holds through the
//! existing `-shm`.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rusqlite::{Connection, OpenFlags};

use super::schema::SqliteOptions;
use super::sql::SqlResult;
use crate::{CheckpointError, StorageError};

/// What an `immutable` connection relies on: the main file's size and modification time,
/// and whether a `-wal` or `-journal` sits beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    side_files: bool,
}

/// `path` with `suffix` appended to its file name (`t.db` → `t.db-wal`).
pub(crate) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The file's stamp now.
///
/// # Errors
/// A storage error if the file's metadata cannot be read.
pub(crate) fn stamp(path: &Path) -> Result<Stamp, CheckpointError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| StorageError::new("reading the file's size and time", e))?;
    Ok(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        side_files: beside(path, "-wal").exists() || beside(path, "-journal").exists(),
    })
}

/// A pooled read connection: `stamp` is `Some` for an `immutable` one, valid only while the
/// file's stamp is unchanged.
pub(crate) struct ReadConn {
    pub(crate) conn: Connection,
    pub(crate) stamp: Option<Stamp>,
}

impl ReadConn {
    /// Whether this connection may still be used: always for an ordinary one; for an
    /// `immutable` one, while the file is as it was when it was opened.
    pub(crate) fn still_valid(&self, path: &Path) -> Result<bool, CheckpointError> {
        match &self.stamp {
            None => Ok(true),
            Some(s) => Ok(stamp(path)? == *s),
        }
    }
}

/// `path` as an SQLite URI (`file:` and the path, every byte outside `[A-Za-z0-9/._~-]`
/// percent-encoded) with its query.
fn uri(path: &Path, query: &str) -> Result<PathBuf, CheckpointError> {
    let absolute = std::path::absolute(path)
        .map_err(|e| StorageError::new("finding the file's absolute path", e))?;
    let mut text = String::from("file:");
    for &b in absolute.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/._~-".contains(&b) {
            text.push(char::from(b));
        } else {
            text.push_str(&format!("%{b:02X}"));
        }
    }
    text.push('?');
    text.push_str(query);
    Ok(PathBuf::from(text))
}

/// Open `path` read-only, without creating it or anything beside it.
///
/// # Errors
/// Storage errors (a missing file is a `NotFound` one).
pub(crate) fn connect(path: &Path, options: &SqliteOptions) -> Result<ReadConn, CheckpointError> {
    if !path.is_file() {
        return Err(StorageError::new(
            "opening the file read-only",
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{}: no such file", path.display()),
            ),
        )
        .into());
    }
    let before = stamp(path)?;
    refuse_empty_beside_wal(path, &before)?;
    let immutable = !before.side_files;
    let query = if immutable {
        "mode=ro&immutable=1"
    } else {
        "mode=ro"
    };
    let conn = Connection::open_with_flags(
        uri(path, query)?,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .during("opening the file read-only")?;
    conn.busy_timeout(options.busy_timeout)
        .during("setting the busy timeout")?;
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .during("keeping statement plans")?;
    Ok(ReadConn {
        conn,
        stamp: immutable.then_some(before),
    })
}

/// An empty main file with a `-wal` beside it is refused: SQLite deletes the `-wal` of a
/// database file of zero pages when it opens it, also on a read-only connection, so a read
/// would destroy what the log holds. A writer never leaves that pair (the file has its first
/// page before it is in WAL mode); it is damage, such as a main file cut to nothing.
fn refuse_empty_beside_wal(path: &Path, stamp: &Stamp) -> Result<(), CheckpointError> {
    if !empty_beside_wal(path, stamp.len, 0) {
        return Ok(());
    }
    Err(StorageError::new(
        "opening the file read-only",
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the main file is empty but has a -wal beside it: the file is damaged (cut \
             short), and SQLite would delete the -wal on opening it, so it is left as it is",
        ),
    )
    .into())
}

/// Whether the main file at `path`, of `len` bytes, is empty with a `-wal` of at least
/// `min_wal` bytes beside it: SQLite takes a file of zero pages for a new database and
/// deletes its `-wal` on opening it, on any connection.
pub(crate) fn empty_beside_wal(path: &Path, len: u64, min_wal: u64) -> bool {
    len == 0 && std::fs::metadata(beside(path, "-wal")).is_ok_and(|m| m.len() >= min_wal)
}

/// SQLite's "a hot journal needs a writer to roll it back" (`SQLITE_READONLY_ROLLBACK`) said
/// plainly: a write to the file was cut short, and only a writer may undo it. Any other
/// error is returned as it is.
pub(crate) fn cut_short(e: CheckpointError) -> CheckpointError {
    let rollback = e
        .storage_error()
        .and_then(|s| s.cause().downcast_ref::<rusqlite::Error>())
        .and_then(|e| match e {
            rusqlite::Error::SqliteFailure(f, _) => Some(f.extended_code),
            _ => None,
        })
        == Some(rusqlite::ffi::SQLITE_READONLY_ROLLBACK);
    match e.storage_error() {
        Some(s) if rollback => StorageError::new(
            "reading a file whose last write was cut short: the -journal beside it needs a \
             writer to roll it back (a write command such as prune, or SqliteSaver::open)",
            s.clone(),
        )
        .into(),
        _ => e,
    }
}

/// How many times [`read_unchanged`] reads again when a writer changed the file under it.
const TRIES: usize = 5;

/// Run `scan` on a new read-only connection, again (at most five times in all) while a writer
/// changed the file during the run: an `immutable` connection sees only what the main file
/// held when it opened. The last run's result, and whether the file stayed unchanged during it.
///
/// # Errors
/// The errors of [`connect`]; a storage error if the file's metadata cannot be read.
pub(crate) fn read_unchanged<T>(
    path: &Path,
    mut scan: impl FnMut(&Connection) -> T,
) -> Result<(T, bool), CheckpointError> {
    let options = SqliteOptions::default();
    let mut tries = 1;
    loop {
        let conn = connect(path, &options)?;
        let result = scan(&conn.conn);
        let unchanged = conn.still_valid(path)?;
        if unchanged || tries == TRIES {
            return Ok((result, unchanged));
        }
        tries += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RunId, RunRecord, RunStatus, Saver, SqliteSaver, ThreadId};

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    fn run(id: &str) -> Result<RunRecord, CheckpointError> {
        Ok(RunRecord::new(
            RunId::new(id)?,
            ThreadId::new("t")?,
            RunStatus::Running,
            1,
        ))
    }

    #[tokio::test]
    async fn a_read_only_saver_writes_nothing_and_sees_a_writer_that_came_later() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("t.db");
        let thread = ThreadId::new("t")?;
        let writer = SqliteSaver::open(&path)?;
        writer.put_run(run("r1")?).await?;
        writer.close()?;
        let bytes = std::fs::read(&path)?;
        let ro = SqliteSaver::open_read_only(&path)?;
        assert_eq!(ro.list_runs(&thread).await?.len(), 1);
        let refused = ro.put_run(run("r2")?).await;
        assert!(
            matches!(refused, Err(CheckpointError::ReadOnly { .. })),
            "{refused:?}"
        );
        assert!(!beside(&path, "-wal").exists(), "a read made a -wal");
        assert!(!beside(&path, "-shm").exists(), "a read made a -shm");
        assert!(std::fs::read(&path)? == bytes, "a read changed the file");
        // A writer opens the file and commits into its WAL: the read-only saver's
        // `immutable` connection no longer sees everything, and is replaced.
        let writer = SqliteSaver::open(&path)?;
        writer.put_run(run("r2")?).await?;
        assert!(beside(&path, "-wal").exists());
        assert_eq!(ro.list_runs(&thread).await?.len(), 2);
        ro.close()?;
        writer.close()?;
        Ok(())
    }

    #[test]
    fn a_scan_during_which_a_writer_came_is_run_again() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("t.db");
        SqliteSaver::open(&path)?.close()?;
        let mut calls = 0;
        let (rows, unchanged) = read_unchanged(&path, |conn| {
            calls += 1;
            let rows = conn.query_row("SELECT count(*) FROM sg_meta WHERE key = 'note'", [], |r| {
                r.get::<_, i64>(0)
            });
            if calls == 1 {
                // A writer commits while the first scan runs.
                let writer = Connection::open(&path).map_err(|e| e.to_string())?;
                writer
                    .execute("INSERT INTO sg_meta VALUES ('note', 'x')", [])
                    .map_err(|e| e.to_string())?;
            }
            rows.map_err(|e| e.to_string())
        })?;
        assert_eq!(calls, 2, "the scan was not run again");
        assert!(unchanged);
        assert_eq!(rows?, 1, "the second scan saw the writer's row");
        Ok(())
    }

    #[test]
    fn a_read_only_open_refuses_what_is_not_a_checkpoint_file() -> TestResult {
        let dir = tempfile::tempdir()?;
        let missing = SqliteSaver::open_read_only(dir.path().join("none.db"));
        assert!(missing.is_err());
        assert!(
            !dir.path().join("none.db").exists(),
            "a read created the file"
        );
        for path in ["", ":memory:"] {
            let got = SqliteSaver::open_read_only(path);
            assert!(
                matches!(got, Err(CheckpointError::InvalidPath { .. })),
                "{path:?}: {got:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn an_empty_file_beside_a_wal_is_refused_and_its_wal_kept() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("t.db");
        std::fs::write(&path, b"")?;
        std::fs::write(beside(&path, "-wal"), b"frames of a log")?;
        let got = SqliteSaver::open_read_only(&path);
        let text = got
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(
            text.contains("is empty but has a -wal beside it"),
            "{got:?}"
        );
        assert_eq!(std::fs::read(beside(&path, "-wal"))?, b"frames of a log");
        assert!(!beside(&path, "-shm").exists(), "a read made a -shm");
        Ok(())
    }

    #[test]
    fn a_path_becomes_a_uri_with_every_special_byte_encoded() -> TestResult {
        let got = uri(Path::new("/tmp/a b?c#d%e.db"), "mode=ro")?;
        assert_eq!(got, PathBuf::from("file:/tmp/a%20b%3Fc%23d%25e.db?mode=ro"));
        Ok(())
    }
}
