//! A put's transaction, begun together with the collection lock in one round trip, and
//! never handed back to the pool unfinished.

use deadpool_postgres::Object;
use tokio_postgres::Client;

use super::sql::{PgResult, Sql};
use crate::{CheckpointError, StorageError};

/// An open read-write transaction on a pooled connection. Committed with
/// [`WriteTx::commit`]; dropped unfinished (an error, or a cancelled future), its connection
/// is taken out of the pool and closed, and the server rolls the transaction back.
pub(crate) struct WriteTx {
    obj: Option<Object>,
}

#[derive(Debug, thiserror::Error)]
#[error("the transaction was already finished")]
struct Finished;

impl WriteTx {
    /// `BEGIN` and take the schema's collection lock shared (decision 0046), sent as one
    /// simple query: one round trip instead of two. The lock key is a number the saver
    /// derives from the schema name, not a value from a caller.
    pub(crate) async fn begin_put(obj: Object, sql: &Sql) -> Result<Self, CheckpointError> {
        let tx = WriteTx { obj: Some(obj) };
        tx.client()?
            .batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock_shared({})",
                sql.gc_lock_key()
            ))
            .await
            .during("beginning a put")?;
        Ok(tx)
    }

    /// The connection, for the transaction's statements.
    pub(crate) fn client(&self) -> Result<&Client, CheckpointError> {
        match &self.obj {
            Some(obj) => Ok(obj),
            None => Err(StorageError::new("using a transaction", Finished).into()),
        }
    }

    /// Commit; the connection goes back to the pool.
    pub(crate) async fn commit(mut self) -> Result<(), CheckpointError> {
        let obj = self
            .obj
            .take()
            .ok_or_else(|| StorageError::new("committing", Finished))?;
        let committed = obj.batch_execute("COMMIT").await;
        match committed {
            Ok(()) => Ok(()),
            Err(e) => {
                // Whatever state the connection is in, it does not go back to the pool.
                let _ = Object::take(obj);
                Err(StorageError::new("committing a put", e).into())
            }
        }
    }
}

impl Drop for WriteTx {
    fn drop(&mut self) {
        if let Some(obj) = self.obj.take() {
            // Unfinished: close the connection rather than pool it inside a transaction.
            let _ = Object::take(obj);
        }
    }
}

impl std::fmt::Debug for WriteTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTx")
            .field("open", &self.obj.is_some())
            .finish()
    }
}
