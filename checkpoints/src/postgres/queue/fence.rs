//! The fence of a worker's writes: every transaction a fenced saver opens first checks, in
//! that transaction, that its lease is still the run's current one, and logs the write.

use tokio_postgres::types::Type;
use tokio_postgres::GenericClient;

use super::super::sql::{id_bytes, to_i64, Sql};
use super::statements::FENCE;
use super::Lease;
use crate::{CheckpointError, CheckpointId, RunId, ThreadId};

/// A lease's identity, carried by a fenced [`PostgresSaver`](crate::PostgresSaver).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fence {
    run: RunId,
    thread: ThreadId,
    epoch: u64,
}

/// What a fenced transaction writes, as its log row says (a run's end logs `end`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fenced {
    /// A put of checkpoints.
    Checkpoints,
    /// Pending writes against a checkpoint.
    Writes,
}

impl Fenced {
    fn as_str(self) -> &'static str {
        match self {
            Fenced::Checkpoints => "checkpoints",
            Fenced::Writes => "writes",
        }
    }
}

impl Fence {
    pub(crate) fn of(lease: &Lease) -> Self {
        Fence {
            run: lease.run.clone(),
            thread: lease.thread.clone(),
            epoch: lease.epoch,
        }
    }

    /// [`CheckpointError::OutsideLease`] for a write to another thread than the run's.
    pub(crate) fn admit(&self, thread: &ThreadId) -> Result<(), CheckpointError> {
        if *thread == self.thread {
            return Ok(());
        }
        Err(CheckpointError::OutsideLease {
            run: self.run.clone(),
            leased: self.thread.clone(),
            given: thread.clone(),
        })
    }

    /// Check the lease inside the open transaction `tx` and log the write; the run's row
    /// stays locked shared until the transaction ends.
    ///
    /// # Errors
    /// [`CheckpointError::LeaseLost`] when the lease is no longer current (the transaction
    /// must then be rolled back); storage errors.
    pub(crate) async fn hold(
        &self,
        tx: &impl GenericClient,
        sql: &Sql,
        kind: Fenced,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        let epoch = to_i64(self.epoch);
        let ids: Vec<Vec<u8>> = ids.iter().map(|id| id_bytes(*id)).collect();
        let held = sql
            .query_opt(
                tx,
                FENCE,
                &[
                    (&self.run.as_str(), Type::TEXT),
                    (&epoch, Type::INT8),
                    (&kind.as_str(), Type::TEXT),
                    (&ids, Type::BYTEA_ARRAY),
                ],
                "checking the run's lease",
            )
            .await?;
        match held {
            Some(_) => Ok(()),
            None => Err(self.lost()),
        }
    }

    /// The run and epoch a fenced statement checks, as its parameters.
    pub(crate) fn run_and_epoch(&self) -> (&str, i64) {
        (self.run.as_str(), to_i64(self.epoch))
    }

    /// The error of a write whose lease is gone.
    pub(crate) fn lost(&self) -> CheckpointError {
        CheckpointError::LeaseLost {
            run: self.run.clone(),
            epoch: self.epoch,
        }
    }
}
