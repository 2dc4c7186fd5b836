//! Submitting, stopping and ending runs: each change of a run's status in one transaction
//! with its mirror in `sg_runs` and a notification to the workers.

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::GenericClient;

use super::super::runs;
use super::super::sql::{col, to_i64, to_u64, PgResult, Sql};
use super::statements::{
    ASK_STOP, END_PENDING, END_UNREADABLE, FINISH, INSERT, OPEN_RUNS, RESET_HEADS, ROLL_BACK,
};
use super::QueuedCommand;
use super::{now_ms, record, run_id, Fence, Lease, Multitask, RunEnd, RunQueue, StopRequest};
use crate::{CheckpointError, Resume, RunId, RunStatus, ThreadId, TokenUsage};

impl RunQueue {
    /// Queue a run of `thread` with `input` (the graph's input as JSON; `null` continues the
    /// thread from its newest checkpoint); its id. `strategy` says what happens to the
    /// thread's unfinished runs (see [`Multitask`]).
    ///
    /// # Errors
    /// [`CheckpointError::ThreadBusy`] under [`Multitask::Reject`] when the thread has an
    /// unfinished run (nothing is queued); storage errors.
    pub async fn submit(
        &self,
        thread: &ThreadId,
        input: serde_json::Value,
        strategy: Multitask,
    ) -> Result<RunId, CheckpointError> {
        let run = RunId::generate();
        self.submit_as(&run, thread, &input, strategy).await?;
        Ok(run)
    }

    /// Queue a run of `thread` under the id `run` the caller chose (an Agent Server hands
    /// its clients the id before the run is leased), with `input` as any JSON its workers
    /// read; otherwise as [`submit`](Self::submit). The pending runs it ended to make way
    /// (a running one is asked to stop, and ends when its worker stops it).
    ///
    /// # Errors
    /// As [`submit`](Self::submit); a storage error for an id the queue already holds.
    pub async fn submit_as(
        &self,
        run: &RunId,
        thread: &ThreadId,
        input: &serde_json::Value,
        strategy: Multitask,
    ) -> Result<Vec<RunId>, CheckpointError> {
        let input = serde_json::to_string(input)
            .map_err(|e| crate::StorageError::new("encoding a run's input", e))?;
        self.enqueue(run, thread, &input, (None, None), strategy)
            .await
    }

    /// Queue a run that answers `thread`'s pending interrupts with `resume` (what
    /// `Command::resume` is to an invoke): the worker that takes it resumes the interrupted
    /// step. Its id; `strategy` as for [`submit`](Self::submit). A run whose thread has no
    /// pending interrupt when it runs, or whose [`Resume::Map`] names an id that is not
    /// pending, ends as `error` with the reason.
    ///
    /// # Errors
    /// As [`submit`](Self::submit).
    pub async fn submit_resume(
        &self,
        thread: &ThreadId,
        resume: &Resume,
        strategy: Multitask,
    ) -> Result<RunId, CheckpointError> {
        self.submit_command(thread, &QueuedCommand::resume(resume.clone()), strategy)
            .await
    }

    /// Queue a run that applies `command` to `thread` instead of an input (what a `Command`
    /// is to an invoke: resume its interrupts, update its state, route). Its id; `strategy`
    /// as for [`submit`](Self::submit). A run whose update does not fit the graph's state,
    /// whose route names no node of the graph, or whose resume the thread cannot take, ends
    /// as `error` with the reason.
    ///
    /// # Errors
    /// As [`submit`](Self::submit).
    pub async fn submit_command(
        &self,
        thread: &ThreadId,
        command: &QueuedCommand,
        strategy: Multitask,
    ) -> Result<RunId, CheckpointError> {
        let text = |v: Result<String, serde_json::Error>| {
            v.map_err(|e| crate::StorageError::new("encoding a run's command", e))
        };
        // A command that only resumes goes in `resume`, which workers of every build that
        // takes resumes read; any other in `command` (decision 0058).
        let (resume, command) = match &command.resume {
            Some(resume) if command.is_resume_only() => {
                (Some(text(serde_json::to_string(resume))?), None)
            }
            _ => (None, Some(text(serde_json::to_string(command))?)),
        };
        let columns = (resume.as_deref(), command.as_deref());
        let run = RunId::generate();
        self.enqueue(&run, thread, "null", columns, strategy)
            .await?;
        Ok(run)
    }

    /// Queue a run with its encoded input, or its command as the `resume` and `command`
    /// columns hold it, making way under `strategy`; the pending runs it ended.
    async fn enqueue(
        &self,
        run: &RunId,
        thread: &ThreadId,
        input: &str,
        (resume, command): (Option<&str>, Option<&str>),
        strategy: Multitask,
    ) -> Result<Vec<RunId>, CheckpointError> {
        let sql = self.sql();
        let mut pooled = self.saver.client().await?;
        let client: &mut tokio_postgres::Client = &mut pooled;
        let tx = client
            .transaction()
            .await
            .during("beginning a submission")?;
        // Submissions to one thread take turns, so two `reject`s cannot both see it idle.
        sql.query(
            &tx,
            "SELECT pg_advisory_xact_lock($1)",
            &[(&sql.thread_lock_key(thread), Type::INT8)],
            "locking the thread's submissions",
        )
        .await?;
        let now = now_ms();
        let superseded = make_way(&tx, sql, thread, run, strategy, now).await?;
        let now_i = to_i64(now);
        sql.query(
            &tx,
            INSERT,
            &[
                (&run.as_str(), Type::TEXT),
                (&thread.as_str(), Type::TEXT),
                (&input, Type::TEXT),
                (&now_i, Type::INT8),
                (&resume, Type::TEXT),
                (&command, Type::TEXT),
            ],
            "queueing a run",
        )
        .await?;
        let r = record(run, thread, RunStatus::Pending, None, now);
        runs::mirror(&tx, sql, &r).await?;
        notify(&tx, sql, run).await?;
        tx.commit().await.during("committing a submission")?;
        Ok(superseded)
    }

    /// End the leased run of `row`, whose id or thread does not read, as `error` with
    /// `problem` as its reason, in the lease's transaction.
    pub(super) async fn end_unreadable(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        row: &tokio_postgres::Row,
        problem: &CheckpointError,
    ) -> Result<(), CheckpointError> {
        let run: &str = col(row, 0)?;
        let reason = problem.to_string();
        let now = to_i64(now_ms());
        self.sql()
            .query(
                tx,
                END_UNREADABLE,
                &[
                    (&run, Type::TEXT),
                    (&reason, Type::TEXT),
                    (&now, Type::INT8),
                ],
                "ending a run whose row does not read",
            )
            .await?;
        Ok(())
    }

    /// Cancel `run`: a pending run ends now (`cancelled`); a running one is asked to stop at
    /// its next step boundary (its worker ends it as `cancelled`). The run's status after the
    /// call (an ended run is left as it is).
    ///
    /// # Errors
    /// [`CheckpointError::RunNotFound`] for a run the queue does not hold; storage errors.
    pub async fn cancel(&self, run: &RunId) -> Result<RunStatus, CheckpointError> {
        self.stop(run, StopRequest::Cancel).await
    }

    /// Ask `run` to stop as `request` says: a pending run ends now (`interrupted` for an
    /// interrupt, else `cancelled`); a running one is asked to stop at its next step
    /// boundary, and its worker ends it ([`RunEnd::Stopped`]). The run's status after the
    /// call (an ended run is left as it is).
    ///
    /// # Errors
    /// [`CheckpointError::RunNotFound`] for a run the queue does not hold; storage errors.
    pub async fn stop(
        &self,
        run: &RunId,
        request: StopRequest,
    ) -> Result<RunStatus, CheckpointError> {
        let Some(found) = self.run(run).await? else {
            return Err(CheckpointError::RunNotFound { run: run.clone() });
        };
        let sql = self.sql();
        let mut pooled = self.saver.client().await?;
        let client: &mut tokio_postgres::Client = &mut pooled;
        let tx = client
            .transaction()
            .await
            .during("beginning a cancellation")?;
        let now = now_ms();
        let reason = match request {
            StopRequest::Cancel => "cancelled on request",
            StopRequest::Interrupt => "interrupted on request",
            StopRequest::Rollback => "rolled back on request",
        };
        let status = match request {
            StopRequest::Interrupt => RunStatus::Interrupted,
            StopRequest::Cancel | StopRequest::Rollback => RunStatus::Cancelled,
        };
        let ended = end_pending(&tx, sql, run, &found.thread, status, reason, now).await?;
        if ended {
            notify(&tx, sql, run).await?;
        } else {
            ask_stop(&tx, sql, run, request, reason, now).await?;
        }
        tx.commit().await.during("committing a cancellation")?;
        Ok(self.run(run).await?.map_or(found.status, |r| r.status))
    }

    /// Delete `run` from the queue, with its write log, if it has ended; whether it was
    /// deleted (a pending or running run is not, nor one the queue does not hold). Its
    /// record in the saver's run history stays.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn forget(&self, run: &RunId) -> Result<bool, CheckpointError> {
        let sql = self.sql();
        let mut pooled = self.saver.client().await?;
        let client: &mut tokio_postgres::Client = &mut pooled;
        let tx = client
            .transaction()
            .await
            .during("beginning to forget a run")?;
        let gone = sql
            .query(
                &tx,
                "DELETE FROM {s}.sg_run_queue
                 WHERE run_id = $1 AND status NOT IN ('pending', 'running') RETURNING 1",
                &[(&run.as_str(), Type::TEXT)],
                "forgetting a run",
            )
            .await?;
        if !gone.is_empty() {
            sql.query(
                &tx,
                "DELETE FROM {s}.sg_run_writes WHERE run_id = $1",
                &[(&run.as_str(), Type::TEXT)],
                "forgetting a run's write log",
            )
            .await?;
        }
        tx.commit().await.during("committing a forgotten run")?;
        Ok(!gone.is_empty())
    }

    /// End the run of `lease` as `end` says: its status and reason, and for a rollback its
    /// checkpoints deleted, all in one transaction fenced by the lease.
    ///
    /// # Errors
    /// [`CheckpointError::LeaseLost`] when the lease is no longer current (nothing is
    /// changed); storage errors.
    pub async fn finish(&self, lease: &Lease, end: RunEnd) -> Result<(), CheckpointError> {
        self.finish_with(lease, end, None).await
    }

    /// [`RunQueue::finish`], also storing the run's token usage when given (in the queue's
    /// row and the run's record in `sg_runs`).
    ///
    /// # Errors
    /// As [`RunQueue::finish`].
    pub async fn finish_with(
        &self,
        lease: &Lease,
        end: RunEnd,
        usage: Option<TokenUsage>,
    ) -> Result<(), CheckpointError> {
        let sql = self.sql();
        let mut pooled = self.saver.client().await?;
        let (status, reason) = (end.status(), end.reason());
        let stopped = matches!(end, RunEnd::Stopped(_));
        let (now, epoch) = (to_i64(now_ms()), to_i64(lease.epoch));
        let params: [(&(dyn ToSql + Sync), Type); 6] = [
            (&lease.run.as_str(), Type::TEXT),
            (&epoch, Type::INT8),
            (&status.as_str(), Type::TEXT),
            (&reason, Type::TEXT),
            (&now, Type::INT8),
            (&stopped, Type::BOOL),
        ];
        let hot = sql.hot(&pooled, FINISH, &params).await?;
        let client: &mut tokio_postgres::Client = &mut pooled;
        let tx = client.transaction().await.during("beginning a run's end")?;
        let ended = sql.run_hot(&tx, &hot, &params, "ending a run").await?;
        let Some(ended) = ended.into_iter().next() else {
            return Err(Fence::of(lease).lost());
        };
        if end == RunEnd::Stopped(StopRequest::Rollback) {
            roll_back(&tx, sql, lease).await?;
        }
        if let Some(usage) = usage {
            store_usage(&tx, sql, &lease.run, usage).await?;
        }
        let reason: Option<String> = col(&ended, 0)?;
        let mut r = record(
            &lease.run,
            &lease.thread,
            status,
            reason,
            lease.created_at_ms,
        );
        r.usage = usage;
        runs::mirror(&tx, sql, &r).await?;
        notify(&tx, sql, &lease.run).await?;
        tx.commit().await.during("committing a run's end")
    }
}

/// Store an ended run's token usage in its queue row (in the transaction that ends it).
async fn store_usage(
    tx: &impl GenericClient,
    sql: &Sql,
    run: &RunId,
    usage: TokenUsage,
) -> Result<(), CheckpointError> {
    let text = serde_json::to_string(&usage)
        .map_err(|e| crate::StorageError::new("encoding a run's usage", e))?;
    sql.query(
        tx,
        "UPDATE {s}.sg_run_queue SET usage = $2 WHERE run_id = $1",
        &[(&run.as_str(), Type::TEXT), (&text, Type::TEXT)],
        "storing a run's usage",
    )
    .await?;
    Ok(())
}

/// Mirror a run's current row as leased: `running`.
pub(super) async fn mirror(
    tx: &impl GenericClient,
    sql: &Sql,
    run: &RunId,
    thread: &ThreadId,
    created_at_ms: u64,
) -> Result<(), CheckpointError> {
    let r = record(run, thread, RunStatus::Running, None, created_at_ms);
    runs::mirror(tx, sql, &r).await
}

/// What `strategy` does to `thread`'s unfinished runs before `run` joins them: nothing
/// (enqueue), refuse (reject), or stop the running one and end the pending ones; the
/// pending runs it ended.
async fn make_way(
    tx: &impl GenericClient,
    sql: &Sql,
    thread: &ThreadId,
    run: &RunId,
    strategy: Multitask,
    now: u64,
) -> Result<Vec<RunId>, CheckpointError> {
    let mut superseded = Vec::new();
    if strategy == Multitask::Enqueue {
        return Ok(superseded);
    }
    let open = sql
        .query(
            tx,
            OPEN_RUNS,
            &[(&thread.as_str(), Type::TEXT)],
            "reading open runs",
        )
        .await?;
    for row in &open {
        let other = run_id(col(row, 0)?)?;
        let running = col::<&str>(row, 1)? == "running";
        let reason = format!("superseded by run {run} ({})", strategy.as_str());
        match strategy {
            Multitask::Enqueue => {}
            Multitask::Reject => {
                return Err(CheckpointError::ThreadBusy {
                    thread: thread.clone(),
                    run: other,
                    status: if running {
                        RunStatus::Running
                    } else {
                        RunStatus::Pending
                    },
                })
            }
            Multitask::Interrupt | Multitask::Rollback if running => {
                let stop = if strategy == Multitask::Rollback {
                    StopRequest::Rollback
                } else {
                    StopRequest::Interrupt
                };
                ask_stop(tx, sql, &other, stop, &reason, now).await?;
            }
            Multitask::Interrupt | Multitask::Rollback => {
                end_pending(tx, sql, &other, thread, RunStatus::Cancelled, &reason, now).await?;
                superseded.push(other);
            }
        }
    }
    Ok(superseded)
}

async fn ask_stop(
    tx: &impl GenericClient,
    sql: &Sql,
    run: &RunId,
    stop: StopRequest,
    reason: &str,
    now: u64,
) -> Result<(), CheckpointError> {
    sql.query(
        tx,
        ASK_STOP,
        &[
            (&run.as_str(), Type::TEXT),
            (&stop.as_str(), Type::TEXT),
            (&reason, Type::TEXT),
            (&to_i64(now), Type::INT8),
        ],
        "asking a run to stop",
    )
    .await?;
    // Its worker beats at once on a notification naming the run.
    notify(tx, sql, run).await
}

/// End a pending run; whether it was pending.
async fn end_pending(
    tx: &impl GenericClient,
    sql: &Sql,
    run: &RunId,
    thread: &ThreadId,
    status: RunStatus,
    reason: &str,
    now: u64,
) -> Result<bool, CheckpointError> {
    let rows = sql
        .query(
            tx,
            &format!("{END_PENDING} RETURNING created_at"),
            &[
                (&run.as_str(), Type::TEXT),
                (&status.as_str(), Type::TEXT),
                (&reason, Type::TEXT),
                (&to_i64(now), Type::INT8),
            ],
            "ending a pending run",
        )
        .await?;
    let Some(row) = rows.first() else {
        return Ok(false);
    };
    let created = to_u64(col(row, 0)?);
    let r = record(run, thread, status, Some(reason.to_owned()), created);
    runs::mirror(tx, sql, &r).await?;
    Ok(true)
}

/// Delete what the leased run wrote (every epoch of it) and move the thread's heads back.
async fn roll_back(
    tx: &impl GenericClient,
    sql: &Sql,
    lease: &Lease,
) -> Result<(), CheckpointError> {
    let (run, thread) = (lease.run.as_str(), lease.thread.as_str());
    sql.query(
        tx,
        ROLL_BACK,
        &[(&run, Type::TEXT), (&thread, Type::TEXT)],
        "deleting a rolled-back run's checkpoints",
    )
    .await?;
    sql.query(
        tx,
        RESET_HEADS,
        &[(&thread, Type::TEXT)],
        "moving heads back",
    )
    .await?;
    Ok(())
}

/// Tell listening workers something changed (sent when the transaction commits).
async fn notify(tx: &impl GenericClient, sql: &Sql, run: &RunId) -> Result<(), CheckpointError> {
    sql.query(
        tx,
        "SELECT pg_notify($1, $2)",
        &[(&sql.channel(), Type::TEXT), (&run.as_str(), Type::TEXT)],
        "notifying workers",
    )
    .await?;
    Ok(())
}
