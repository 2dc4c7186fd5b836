//! Talking to SQLite: rusqlite errors as typed storage errors, the busy retry, and the
//! encodings of ids and blobs in columns.

use std::time::{Duration, Instant};

use rusqlite::ErrorCode;

use crate::{CheckpointError, CheckpointId, StorageError};

/// A rusqlite result as a checkpoint result: an error becomes a
/// [`CheckpointError::Storage`] holding a [`StorageError`] that says what was being done.
pub(crate) trait SqlResult<T> {
    /// Map the error, naming what the statement was doing ("reading a checkpoint row").
    fn during(self, what: &'static str) -> Result<T, CheckpointError>;
}

impl<T> SqlResult<T> for rusqlite::Result<T> {
    #[inline]
    fn during(self, what: &'static str) -> Result<T, CheckpointError> {
        self.map_err(|e| StorageError::new(what, e).into())
    }
}

/// Whether SQLite reported the database busy or locked (worth trying again).
pub(crate) fn is_busy_sqlite(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code()
        .is_some_and(|c| matches!(c, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Whether a checkpoint error is SQLite's "busy/locked" (worth trying again).
pub(crate) fn is_busy(e: &CheckpointError) -> bool {
    e.storage_error()
        .and_then(|s| s.cause().downcast_ref::<rusqlite::Error>())
        .is_some_and(is_busy_sqlite)
}

/// Whether a checkpoint error is SQLite's "database or disk is full".
pub(crate) fn is_full(e: &CheckpointError) -> bool {
    e.storage_error()
        .and_then(|s| s.cause().downcast_ref::<rusqlite::Error>())
        .and_then(rusqlite::Error::sqlite_error_code)
        == Some(ErrorCode::DiskFull)
}

/// How long an operation is retried while the database stays busy (each try already waits
/// out the busy timeout).
pub(crate) const BUSY_RETRY_FOR: Duration = Duration::from_secs(60);

/// Run `attempt` again while it fails with an error `busy` says is worth retrying, for up to
/// [`BUSY_RETRY_FOR`]; then its last result, whatever it is.
pub(crate) fn retry_busy<T, E>(
    mut attempt: impl FnMut() -> Result<T, E>,
    busy: impl Fn(&E) -> bool,
) -> Result<T, E> {
    let deadline = Instant::now() + BUSY_RETRY_FOR;
    loop {
        match attempt() {
            Err(e) if busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            other => return other,
        }
    }
}

/// A checkpoint id as its column stores it (16 bytes, big-endian: ordered by time).
pub(crate) fn id_bytes(id: CheckpointId) -> [u8; 16] {
    id.as_u128().to_be_bytes()
}

/// A checkpoint id from its column; an integrity error naming `thread` if it is not 16 bytes.
pub(crate) fn id_from(bytes: &[u8], thread: &str) -> Result<CheckpointId, CheckpointError> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| CheckpointError::Integrity {
        thread: thread.to_owned(),
        checkpoint: "-".to_owned(),
        blob: "sg_checkpoints.id".to_owned(),
        detail: format!("checkpoint id of {} bytes", bytes.len()),
    })?;
    Ok(CheckpointId::from_u128(u128::from_be_bytes(arr)))
}

/// Column `i` of `r` as bytes borrowed from SQLite (`None` for NULL); any other type is an
/// error, as `get::<Option<Vec<u8>>>` would give.
pub(crate) fn blob_at<'r>(
    r: &'r rusqlite::Row<'_>,
    i: usize,
) -> rusqlite::Result<Option<&'r [u8]>> {
    r.get_ref(i)?.as_blob_or_null().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Blob, Box::new(e))
    })
}

/// An integrity error: stored bytes in `thread`, checkpoint `checkpoint` (or `-`), at `blob`
/// (a hash or a row), are not what they must be.
pub(crate) fn integrity(
    thread: &str,
    checkpoint: &str,
    blob: impl Into<String>,
    detail: impl Into<String>,
) -> CheckpointError {
    CheckpointError::Integrity {
        thread: thread.to_owned(),
        checkpoint: checkpoint.to_owned(),
        blob: blob.into(),
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn a_failed_statement_is_a_storage_error_naming_what_it_did() -> TestResult {
        let conn = Connection::open_in_memory()?;
        let err = conn
            .execute("INSERT INTO missing (x) VALUES (1)", [])
            .during("inserting into the missing table")
            .err()
            .ok_or("the insert succeeded")?;
        let storage = err.storage_error().ok_or("not a StorageError")?;
        assert_eq!(storage.during(), "inserting into the missing table");
        assert!(storage.cause().downcast_ref::<rusqlite::Error>().is_some());
        let text = err.to_string();
        assert!(
            text.starts_with("storage error: inserting into the missing table: "),
            "{text}"
        );
        assert!(text.contains("no such table"), "{text}");
        assert!(!is_busy(&err));
        Ok(())
    }

    #[test]
    fn a_locked_database_is_busy_and_other_errors_are_not() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("busy.db");
        let a = Connection::open(&path)?;
        let b = Connection::open(&path)?;
        b.busy_timeout(Duration::ZERO)?;
        a.execute_batch("CREATE TABLE t (x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")?;
        let err = b
            .execute_batch("BEGIN IMMEDIATE")
            .during("beginning")
            .err()
            .ok_or("took the lock twice")?;
        assert!(is_busy(&err));
        let not_storage = CheckpointError::InvalidFilterKey { key: "k".into() };
        assert!(!is_busy(&not_storage));
        Ok(())
    }

    #[test]
    fn retry_busy_retries_only_what_is_busy() {
        let mut tries = 0;
        let r: Result<u32, u32> = retry_busy(
            || {
                tries += 1;
                if tries < 3 {
                    Err(1)
                } else {
                    Ok(tries)
                }
            },
            |e| *e == 1,
        );
        assert_eq!(r, Ok(3));
        let mut tries = 0;
        let r: Result<u32, u32> = retry_busy(
            || {
                tries += 1;
                Err(2)
            },
            |e| *e == 1,
        );
        assert_eq!((r, tries), (Err(2), 1));
    }

    #[test]
    fn ids_round_trip_and_a_short_id_is_an_integrity_error() -> TestResult {
        let id = CheckpointId::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        assert_eq!(id_from(&id_bytes(id), "t")?, id);
        assert!(matches!(
            id_from(&[1, 2, 3], "t"),
            Err(CheckpointError::Integrity { .. })
        ));
        Ok(())
    }
}
