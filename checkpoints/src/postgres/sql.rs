//! Talking to PostgreSQL: errors as typed storage errors, statements with the schema named
//! in them, and the column encodings of ids, hashes and JSON.

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, Row};

use crate::{CheckpointError, CheckpointId, StorageError, TaskId};

/// A tokio-postgres result as a checkpoint result: the error becomes a
/// [`CheckpointError::Storage`] holding a [`StorageError`] that says what was being done.
pub(crate) trait PgResult<T> {
    /// Map the error, naming what the statement was doing ("inserting a checkpoint row").
    fn during(self, what: &'static str) -> Result<T, CheckpointError>;
}

impl<T> PgResult<T> for Result<T, tokio_postgres::Error> {
    fn during(self, what: &'static str) -> Result<T, CheckpointError> {
        self.map_err(|e| StorageError::new(what, PgError(e)).into())
    }
}

/// A tokio-postgres error whose message is the server's (with its SQLSTATE), not only
/// "db error"; the original error is its source.
#[derive(Debug)]
pub(crate) struct PgError(pub(crate) tokio_postgres::Error);

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_db_error() {
            Some(db) => write!(f, "{} (SQLSTATE {})", db.message(), db.code().code()),
            None => self.0.fmt(f),
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl<T> PgResult<T> for Result<T, deadpool_postgres::PoolError> {
    fn during(self, what: &'static str) -> Result<T, CheckpointError> {
        self.map_err(|e| StorageError::new(what, e).into())
    }
}

/// One statement's parameters: each value with its type, so that a statement runs as one
/// unnamed statement (no prepare round trip, no server-side statement a pooler would have
/// to follow; decision 0047).
pub(crate) type Params<'a> = [(&'a (dyn ToSql + Sync), Type)];

/// The statements of one schema: table names qualified with the schema, which is a
/// validated identifier (`PostgresOptions::validate`), never a bound value.
#[derive(Debug, Clone)]
pub(crate) struct Sql {
    schema: String,
}

impl Sql {
    pub(crate) fn new(schema: &str) -> Self {
        Sql {
            schema: schema.to_owned(),
        }
    }

    /// The schema's name.
    pub(crate) fn schema(&self) -> &str {
        &self.schema
    }

    /// `text` with every `{s}` replaced by the quoted schema name.
    pub(crate) fn text(&self, text: &str) -> String {
        text.replace("{s}", &format!("\"{}\"", self.schema))
    }

    /// Run a statement; its rows.
    pub(crate) async fn query(
        &self,
        client: &impl GenericClient,
        text: &str,
        params: &Params<'_>,
        what: &'static str,
    ) -> Result<Vec<Row>, CheckpointError> {
        client
            .query_typed(&self.text(text), params)
            .await
            .during(what)
    }

    /// Run a statement that returns at most one row.
    pub(crate) async fn query_opt(
        &self,
        client: &impl GenericClient,
        text: &str,
        params: &Params<'_>,
        what: &'static str,
    ) -> Result<Option<Row>, CheckpointError> {
        Ok(self
            .query(client, text, params, what)
            .await?
            .into_iter()
            .next())
    }

    /// The key of this schema's transaction-scoped advisory lock (puts share it, garbage
    /// collection takes it alone; decision 0046): the first 8 bytes of blake3 of the name.
    pub(crate) fn gc_lock_key(&self) -> i64 {
        lock_key(b"stategraph gc ", &self.schema)
    }

    /// The key of the advisory lock that makes submissions to one thread take turns.
    pub(crate) fn thread_lock_key(&self, thread: &crate::ThreadId) -> i64 {
        lock_key(
            b"stategraph thread ",
            &format!("{}\0{}", self.schema, thread.as_str()),
        )
    }

    /// The notification channel of this schema's run queue: `sg_runs_` and 16 hex digits
    /// derived from the schema name (a channel name is an identifier of at most 63 bytes).
    pub(crate) fn channel(&self) -> String {
        format!(
            "sg_runs_{:016x}",
            lock_key(b"stategraph runs ", &self.schema)
        )
    }

    /// The key of the advisory lock that serializes creating and migrating the schema.
    pub(crate) fn schema_lock_key(&self) -> i64 {
        lock_key(b"stategraph schema ", &self.schema)
    }
}

fn lock_key(purpose: &[u8], schema: &str) -> i64 {
    let mut h = blake3::Hasher::new();
    h.update(purpose);
    h.update(schema.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&h.finalize().as_bytes()[..8]);
    i64::from_be_bytes(first)
}

/// A checkpoint id as stored: 16 bytes, big-endian, so byte order is id order.
pub(crate) fn id_bytes(id: CheckpointId) -> Vec<u8> {
    id.as_u128().to_be_bytes().to_vec()
}

/// A stored checkpoint id. Every id read goes through here, and is observed by the process
/// clock (see [`CheckpointId::observe`]): a child made after loading it gets a greater id.
pub(crate) fn id_from(
    bytes: &[u8],
    thread: &str,
    column: &str,
) -> Result<CheckpointId, CheckpointError> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| CheckpointError::Integrity {
        thread: thread.to_owned(),
        checkpoint: "-".to_owned(),
        blob: column.to_owned(),
        detail: format!("a checkpoint id of {} bytes, not 16", bytes.len()),
    })?;
    let id = CheckpointId::from_u128(u128::from_be_bytes(arr));
    id.observe();
    Ok(id)
}

/// A task id as stored: 16 bytes, big-endian.
pub(crate) fn task_bytes(id: TaskId) -> Vec<u8> {
    id.as_u128().to_be_bytes().to_vec()
}

/// A stored task id.
pub(crate) fn task_from(
    bytes: &[u8],
    thread: &str,
    checkpoint: CheckpointId,
) -> Result<TaskId, CheckpointError> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| CheckpointError::Integrity {
        thread: thread.to_owned(),
        checkpoint: checkpoint.to_string(),
        blob: "sg_writes.task".to_owned(),
        detail: format!("a task id of {} bytes, not 16", bytes.len()),
    })?;
    Ok(TaskId::from_u128(u128::from_be_bytes(arr)))
}

/// A count or step from a `bigint` column, as the unsigned value it stands for.
pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A time in milliseconds as a `bigint`.
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Read a column, mapping a type mismatch to a typed storage error.
pub(crate) fn col<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r Row,
    idx: usize,
) -> Result<T, CheckpointError> {
    row.try_get(idx).during("reading a column")
}

/// Integrity error for a record column that does not decode.
pub(crate) fn bad_record(
    thread: &str,
    checkpoint: CheckpointId,
    column: &str,
    detail: impl std::fmt::Display,
) -> CheckpointError {
    CheckpointError::Integrity {
        thread: thread.to_owned(),
        checkpoint: checkpoint.to_string(),
        blob: column.to_owned(),
        detail: detail.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_ids_sort_as_ids_and_read_back() -> Result<(), CheckpointError> {
        let (a, b) = (
            CheckpointId::from_u128(0xff),
            CheckpointId::from_u128(0x100),
        );
        assert!(id_bytes(a) < id_bytes(b));
        assert_eq!(id_from(&id_bytes(b), "t", "id")?, b);
        assert!(matches!(
            id_from(&[1, 2, 3], "t", "sg_checkpoints.id"),
            Err(CheckpointError::Integrity { .. })
        ));
        Ok(())
    }

    #[test]
    fn statements_name_the_quoted_schema_and_lock_keys_differ_per_schema() {
        let sql = Sql::new("t_1");
        assert_eq!(
            sql.text("SELECT 1 FROM {s}.sg_meta"),
            "SELECT 1 FROM \"t_1\".sg_meta"
        );
        assert_ne!(sql.gc_lock_key(), Sql::new("t_2").gc_lock_key());
        assert_ne!(sql.gc_lock_key(), sql.schema_lock_key());
    }
}
