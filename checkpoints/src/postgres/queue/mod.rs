//! The run queue (decision 0058): runs submitted to threads, leased by workers on any
//! machine, one running run per thread (a unique index), leases heart-beaten and fenced.
//!
//! Inside (what it hands out is `crate::queue`'s): `statements` its SQL; `fence` the check every
//! fenced write makes in its transaction; `listen` wake-ups; `transitions` submitting,
//! stopping and ending runs.

mod fence;
mod listen;
mod statements;
mod transitions;

use std::time::{Duration, SystemTime};

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

pub(crate) use fence::{Fence, Fenced};
pub use listen::Wakeups;

pub(crate) use crate::queue::{
    FencedWrite, Lease, Multitask, QueuedCommand, QueuedRun, RunEnd, StopRequest,
};

use super::sql::{col, id_from, to_i64, to_u64, PgResult, Sql};
use super::PostgresSaver;
use crate::inspect::unix_ms;
use crate::{CheckpointError, RunId, RunRecord, RunStatus, ThreadId};
pub(crate) use statements::{FINISH_FUNCTION, LEASE_FUNCTION};
use statements::{HEARTBEAT, LEASE, RUN_COLUMNS, TRIM_WRITE_LOG, WRITE_LOG};

/// The run queue of a [`PostgresSaver`]'s schema: submit runs, lease them, heart-beat and
/// end them. Cloning shares the saver's pool.
///
/// ```
/// use stategraph_checkpoints::{
///     Multitask, PostgresOptions, PostgresSaver, RunEnd, RunStatus, Saver, ThreadId,
/// };
/// use std::time::Duration;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let Ok(url) = std::env::var("STATEGRAPH_PG_URL") else { return Ok(()) };
/// let options = PostgresOptions { schema: "doc_queue".to_owned(), ..Default::default() };
/// let saver = PostgresSaver::connect_with(&url, options).await?;
/// let queue = saver.queue();
/// let thread = ThreadId::new("doc-queue")?;
/// saver.delete_thread(&thread).await?;
/// let run = queue.submit(&thread, serde_json::json!({"n": 1}), Multitask::Enqueue).await?;
/// let Some(lease) = queue.lease("worker-a", Duration::from_secs(30)).await? else {
///     panic!("the run is runnable")
/// };
/// assert_eq!(lease.run, run);
/// queue.finish(&lease, RunEnd::Success).await?;
/// assert_eq!(queue.run(&run).await?.map(|r| r.status), Some(RunStatus::Success));
/// # Ok::<(), stategraph_checkpoints::CheckpointError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct RunQueue {
    saver: PostgresSaver,
}

impl RunQueue {
    pub(super) fn new(saver: PostgresSaver) -> Self {
        RunQueue { saver }
    }

    fn sql(&self) -> &Sql {
        &self.saver.inner.sql
    }

    /// The saver whose schema holds the queue.
    pub fn saver(&self) -> &PostgresSaver {
        &self.saver
    }

    /// Lease the oldest runnable run for `worker` for `lease_for`: a pending run that is the
    /// oldest unfinished run of a thread with no running run, or a running run whose lease
    /// ended (its worker died or stalled; the new lease has the next epoch). `None` when no
    /// run is runnable now.
    ///
    /// # Errors
    /// Storage errors; [`CheckpointError::Integrity`] for a stored row that does not read.
    pub async fn lease(
        &self,
        worker: &str,
        lease_for: Duration,
    ) -> Result<Option<Lease>, CheckpointError> {
        let mut pooled = self.saver.client().await?;
        let now = to_i64(now_ms());
        let secs = lease_for.as_secs_f64();
        let params: [(&(dyn ToSql + Sync), Type); 3] = [
            (&worker, Type::TEXT),
            (&secs, Type::FLOAT8),
            (&now, Type::INT8),
        ];
        let hot = self.sql().hot(&pooled, LEASE, &params).await?;
        let client: &mut tokio_postgres::Client = &mut pooled;
        let tx = client.transaction().await.during("beginning a lease")?;
        let leased = self
            .sql()
            .run_hot(&tx, &hot, &params, "leasing a run")
            .await
            .map(|rows| rows.into_iter().next());
        let row = match leased {
            Ok(Some(row)) => row,
            Ok(None) => return Ok(None),
            // Another worker leased a run of the same thread at the same moment: the unique
            // index refused this one; nothing is runnable for this worker now.
            Err(e) if is_unique_violation(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let lease = match lease_of(&row, worker) {
            Ok(lease) => lease,
            Err(e) => {
                // Its id or thread does not read either: end it here, so the next lease
                // goes past it, and report it.
                self.end_unreadable(&tx, &row, &e).await?;
                tx.commit().await.during("committing a lease")?;
                return Err(e);
            }
        };
        transitions::mirror(
            &tx,
            self.sql(),
            &lease.run,
            &lease.thread,
            lease.created_at_ms,
        )
        .await?;
        tx.commit().await.during("committing a lease")?;
        Ok(Some(lease))
    }

    /// Extend `lease` by `lease_for` from now; the stop asked of the run, if any.
    ///
    /// # Errors
    /// [`CheckpointError::LeaseLost`] when the lease is no longer the run's current one (the
    /// worker must stop: another took the run over, or it ended); storage errors.
    pub async fn heartbeat(
        &self,
        lease: &Lease,
        lease_for: Duration,
    ) -> Result<Option<StopRequest>, CheckpointError> {
        let client = self.saver.client().await?;
        let epoch = to_i64(lease.epoch);
        let rows = self
            .sql()
            .call(
                &client,
                HEARTBEAT,
                &[
                    (&lease.run.as_str(), Type::TEXT),
                    (&epoch, Type::INT8),
                    (&lease_for.as_secs_f64(), Type::FLOAT8),
                ],
                "extending a lease",
            )
            .await?;
        match rows.first() {
            Some(row) => Ok(col::<Option<&str>>(row, 0)?.and_then(StopRequest::parse)),
            None => Err(Fence::of(lease).lost()),
        }
    }

    /// The run, as the queue holds it.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn run(&self, run: &RunId) -> Result<Option<QueuedRun>, CheckpointError> {
        let client = self.saver.client().await?;
        let text = format!("SELECT {RUN_COLUMNS} FROM {{s}}.sg_run_queue WHERE run_id = $1");
        let row = self
            .sql()
            .query_opt(
                &**client,
                &text,
                &[(&run.as_str(), Type::TEXT)],
                "reading a run",
            )
            .await?;
        row.as_ref().map(queued_of).transpose()
    }

    /// A thread's queued runs, oldest first.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn runs(&self, thread: &ThreadId) -> Result<Vec<QueuedRun>, CheckpointError> {
        let client = self.saver.client().await?;
        let text =
            format!("SELECT {RUN_COLUMNS} FROM {{s}}.sg_run_queue WHERE thread = $1 ORDER BY seq");
        let rows = self
            .sql()
            .query(
                &**client,
                &text,
                &[(&thread.as_str(), Type::TEXT)],
                "listing runs",
            )
            .await?;
        rows.iter().map(queued_of).collect()
    }

    /// Wait until `run` has ended (polling every `every`); the run as it ended.
    ///
    /// # Errors
    /// [`CheckpointError::RunNotFound`] for a run the queue does not hold; storage errors.
    pub async fn wait_until_done(
        &self,
        run: &RunId,
        every: Duration,
    ) -> Result<QueuedRun, CheckpointError> {
        loop {
            match self.run(run).await? {
                Some(r) if r.status.is_terminal() => return Ok(r),
                Some(_) => tokio::time::sleep(every).await,
                None => return Err(CheckpointError::RunNotFound { run: run.clone() }),
            }
        }
    }

    /// Every fenced write made on `thread`, in the order the writes took their fence.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn write_log(&self, thread: &ThreadId) -> Result<Vec<FencedWrite>, CheckpointError> {
        let client = self.saver.client().await?;
        let rows = self
            .sql()
            .query(
                &**client,
                WRITE_LOG,
                &[(&thread.as_str(), Type::TEXT)],
                "reading the write log",
            )
            .await?;
        rows.iter()
            .map(|row| {
                let ids: Vec<Vec<u8>> = col(row, 5)?;
                Ok(FencedWrite {
                    seq: col(row, 0)?,
                    run: run_id(col(row, 1)?)?,
                    epoch: to_u64(col(row, 2)?),
                    worker: col(row, 3)?,
                    kind: col(row, 4)?,
                    checkpoints: ids
                        .iter()
                        .map(|b| id_from(b, thread.as_str(), "sg_run_writes.checkpoints"))
                        .collect::<Result<_, _>>()?,
                })
            })
            .collect()
    }

    /// Delete the write log of every run that ended (a status other than pending or
    /// running) before `ended_before`; the number of log rows deleted. The runs, their
    /// status and the threads' checkpoints stay; a run that has not ended keeps its log,
    /// which its takeover reads.
    ///
    /// # Errors
    /// Storage errors (nothing is deleted).
    pub async fn trim_write_log(&self, ended_before: SystemTime) -> Result<u64, CheckpointError> {
        let cutoff = to_i64(unix_ms(ended_before));
        let client = self.saver.client().await?;
        let rows = self
            .sql()
            .query(
                &**client,
                TRIM_WRITE_LOG,
                &[(&cutoff, Type::INT8)],
                "trimming the write log of ended runs",
            )
            .await?;
        match rows.first() {
            Some(row) => Ok(to_u64(col(row, 0)?)),
            None => Ok(0),
        }
    }

    /// The channel the queue notifies on (`pg_notify`), with a run's id as the payload.
    /// Others may send on it too (an Agent Server tells its relays of new frames); a
    /// payload that names no run only wakes [`Wakeups::wait`] callers, who then look for
    /// runs to lease.
    pub fn channel(&self) -> String {
        self.sql().channel()
    }

    /// Listen for the queue's notifications; a server (or pooler) that refuses gives
    /// [`Wakeups::polling`] instead, so a worker always has a way to wake.
    pub async fn wakeups(&self) -> Wakeups {
        let channel = self.sql().channel();
        let inner = &self.saver.inner;
        match Wakeups::listen(&inner.listen, &inner.connector, &channel).await {
            Ok(w) => w,
            Err(_) => Wakeups::polling(),
        }
    }
}

/// Whether `e` is PostgreSQL's unique-violation (SQLSTATE 23505).
fn is_unique_violation(e: &CheckpointError) -> bool {
    let CheckpointError::Storage(inner) = e else {
        return false;
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(inner.as_ref());
    while let Some(err) = source {
        if let Some(pg) = err.downcast_ref::<tokio_postgres::Error>() {
            return pg.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION);
        }
        source = match err.downcast_ref::<crate::StorageError>() {
            Some(storage) => Some(storage.cause()),
            None => err.source(),
        };
    }
    false
}

fn run_id(text: &str) -> Result<RunId, CheckpointError> {
    RunId::new(text).map_err(|e| bad_row(text, &e.to_string()))
}

fn thread_id(text: &str, run: &str) -> Result<ThreadId, CheckpointError> {
    ThreadId::new(text).map_err(|e| bad_row(run, &e.to_string()))
}

fn bad_row(run: &str, detail: &str) -> CheckpointError {
    CheckpointError::Integrity {
        thread: "-".to_owned(),
        checkpoint: "-".to_owned(),
        blob: format!("sg_run_queue row of run {run}"),
        detail: detail.to_owned(),
    }
}

/// A leased row as a [`Lease`]. An input or command that does not read makes a lease whose
/// `unreadable` says why, not an error: the run must end rather than stay the oldest
/// runnable one and stop every lease after it.
fn lease_of(row: &Row, worker: &str) -> Result<Lease, CheckpointError> {
    let run: &str = col(row, 0)?;
    let mut unreadable = None;
    let input = serde_json::from_str(col(row, 3)?).unwrap_or_else(|e| {
        unreadable = Some(format!("the run's stored input does not read: {e}"));
        serde_json::Value::Null
    });
    let command = match col::<Option<&str>>(row, 8)? {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| {
                unreadable = Some(format!(
                    "the run's stored command does not read (written by a newer build?): {e}"
                ));
            })
            .ok(),
        None => None,
    };
    Ok(Lease {
        run: run_id(run)?,
        thread: thread_id(col(row, 1)?, run)?,
        epoch: to_u64(col(row, 2)?),
        worker: worker.to_owned(),
        input,
        attempt: u32::try_from(col::<i32>(row, 4)?).unwrap_or(0),
        stop: col::<Option<&str>>(row, 5)?.and_then(StopRequest::parse),
        created_at_ms: to_u64(col(row, 6)?),
        resumed: col(row, 7)?,
        command,
        unreadable,
    })
}

fn queued_of(row: &Row) -> Result<QueuedRun, CheckpointError> {
    let run: &str = col(row, 0)?;
    let status: &str = col(row, 2)?;
    let status = RunStatus::parse(status)
        .ok_or_else(|| bad_row(run, &format!("unknown status `{}`", status.escape_debug())))?;
    let stop_reason: Option<String> = col(row, 8)?;
    let reason: Option<String> = col(row, 3)?;
    Ok(QueuedRun {
        run: run_id(run)?,
        thread: thread_id(col(row, 1)?, run)?,
        status,
        reason: reason.or(stop_reason.filter(|_| !status.is_terminal())),
        epoch: to_u64(col(row, 4)?),
        worker: col(row, 5)?,
        attempts: u32::try_from(col::<i32>(row, 6)?).unwrap_or(0),
        stop: col::<Option<&str>>(row, 7)?.and_then(StopRequest::parse),
        created_at_ms: to_u64(col(row, 9)?),
        updated_at_ms: to_u64(col(row, 10)?),
        lease_expired: col::<Option<bool>>(row, 11)?.unwrap_or(false),
        input: serde_json::from_str(col(row, 12)?).unwrap_or(serde_json::Value::Null),
        usage: col::<Option<&str>>(row, 13)?
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| bad_row(run, &format!("its usage does not read: {e}")))?,
    })
}

/// Now, in milliseconds since the Unix epoch (0 for a clock before it).
pub(super) fn now_ms() -> u64 {
    unix_ms(SystemTime::now())
}

/// The record mirrored into `sg_runs` for a queued run.
pub(super) fn record(
    run: &RunId,
    thread: &ThreadId,
    status: RunStatus,
    reason: Option<String>,
    created_at_ms: u64,
) -> RunRecord {
    let mut r = RunRecord::new(run.clone(), thread.clone(), status, now_ms());
    r.created_at_ms = created_at_ms;
    r.reason = reason;
    r.metadata
        .insert("queued".to_owned(), serde_json::Value::Bool(true));
    r
}
