//! Talking to PostgreSQL: errors as typed storage errors, statements with the schema named
//! in them, and the column encodings of ids, hashes and JSON.

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, Row, Statement};

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
    /// Whether the hot calls go as named statements each connection prepares once
    /// (`PostgresOptions::prepared_statements`).
    prepared: bool,
}

/// One of the hot calls (a server-side function), ready to run on one connection: its text
/// (schema named), and the named statement the connection prepared for it, if the saver
/// prepares them.
pub(crate) struct Hot {
    text: String,
    prepared: Option<Statement>,
}

impl Sql {
    pub(crate) fn new(schema: &str) -> Self {
        Sql {
            schema: schema.to_owned(),
            prepared: false,
        }
    }

    /// These statements, with the hot calls prepared per connection or not.
    pub(crate) fn with_prepared(mut self, prepared: bool) -> Self {
        self.prepared = prepared;
        self
    }

    /// `text` (a hot call) as `conn` runs it: with prepared statements, the named statement
    /// `conn` prepared for it the first time (one round trip then; its cache keeps it with
    /// the connection), else the text, sent unnamed. Made before a transaction begins on
    /// `conn`, which then runs it with [`Sql::run_hot`].
    pub(crate) async fn hot(
        &self,
        conn: &ClientWrapper,
        text: &str,
        params: &Params<'_>,
    ) -> Result<Hot, CheckpointError> {
        let text = self.text(text);
        let prepared = match self.prepared {
            false => None,
            true => {
                let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
                let stmt = conn.prepare_typed_cached(&text, &types).await;
                Some(stmt.during("preparing a statement")?)
            }
        };
        Ok(Hot { text, prepared })
    }

    /// Run a hot call made by [`Sql::hot`] on its connection (or a transaction on it).
    pub(crate) async fn run_hot(
        &self,
        client: &impl GenericClient,
        hot: &Hot,
        params: &Params<'_>,
        what: &'static str,
    ) -> Result<Vec<Row>, CheckpointError> {
        match &hot.prepared {
            Some(stmt) => {
                let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(v, _)| *v).collect();
                client.query(stmt, &values).await.during(what)
            }
            None => client.query_typed(&hot.text, params).await.during(what),
        }
    }

    /// [`Sql::hot`] and [`Sql::run_hot`] on `conn` itself, outside any explicit
    /// transaction: the call's rows.
    pub(crate) async fn call(
        &self,
        conn: &ClientWrapper,
        text: &str,
        params: &Params<'_>,
        what: &'static str,
    ) -> Result<Vec<Row>, CheckpointError> {
        let hot = self.hot(conn, text, params).await?;
        self.run_hot(&**conn, &hot, params, what).await
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
